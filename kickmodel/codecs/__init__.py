"""Codecs: the piece of a model that turns audio into the space its prior works in and back (RAVE's encode/decode,
audiocraft's compression models beside their language models). A family pairs a prior with one of these, so a
better synth body or inverter replaces one piece:

    identity.WaveformCodec   waveform diffusion: the waveform itself, scaled (and its output stage's image dip)
    mel.MelCodec             mel-VAE and latent diffusion: the mel front end, the VAE and its inverter
    synth.SynthCodec         kick-synth: the synth's numbers, fitted to audio (analysis by synthesis) and played

Each has `encode(audio [n, length], hook) -> latents [n, ...]` and `decode(latents, hook) -> audio [n, length]`
(float32 numpy at the model's rate, each network at its render shape so no kick depends on its batch:
kickmodel.batching),
calling the render hook (kickmodel.generator.Hook) between its passes. They are built from an artifact's parts by
the families' generators; none knows the prior it is paired with.
"""
