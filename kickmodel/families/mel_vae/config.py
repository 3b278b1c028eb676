"""The mel-VAE family's config sections."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MelConfig:
    """The log-mel front end (torchaudio.transforms.MelSpectrogram, magnitude, HTK scale)."""

    n_mels: int = 128
    n_fft: int = 2048  # 46 ms at 44.1 kHz: 21.5 Hz bins, so the 40..100 Hz body falls in distinct mel bands
    hop: int = 256  # 5.8 ms frames: the attack stays in one or two frames
    f_min: float = 20.0
    f_max: float = 16000.0
    floor_db: float = -100.0  # log-mel floor re. a full-scale sine; the network sees (dB - floor) / -floor * 2 - 1


@dataclass(frozen=True)
class VAEConfig:
    """A 1-D convolutional VAE over mel frames with one global latent vector per kick."""

    channels: tuple[int, ...] = (64, 128, 192)  # per level; each level after the first halves the frames
    blocks_per_level: int = 2
    latent_dim: int = 32
    kernel: int = 5
    beta: float = 1e-4  # weight of the KL (nats per kick) against the mean per-bin error, after warm-up
    kl_warmup_steps: int = 2000  # beta rises linearly from 0 over these steps (against posterior collapse)
    free_bits: float = 0.05  # nats per latent dimension below which the KL is not pushed down
    recon: str = "l1"  # "l1" | "l2" on the normalised log-mel
    # weight of the mel bands centred below recon_low_hz in the reconstruction error (the mean weight over
    # all bands is kept at 1). With 1.0 the 11 of 128 bands that hold a kick's body and its pitch sweep are
    # 9 % of the loss, and the decoder gave every kick the same average low end (docs/model.md)
    recon_low_weight: float = 1.0
    recon_low_hz: float = 250.0
    # weight of a second reconstruction term on linear mel magnitudes, relative per kick (sum |S^ - S| /
    # sum S), as DDSP's multi-scale spectral loss pairs linear and log magnitudes (Engel et al. 2020). The
    # log-mel error weighs a band 90 dB down in the tail like the body's loudest band; the linear term
    # weighs the loud attack and body, where the pitch sweep is
    recon_linear_weight: float = 0.0
    # weight of an error on the body's frequency track (network.low_centroid_error: the frame-by-frame
    # centroid of the bands below recon_low_hz, in octaves), the sweep that the band-by-band errors above
    # let a decoder lose
    recon_pitch_weight: float = 0.0
    # a decoder-only fine-tune (with --init): the encoder is frozen, so the latent space, and any latent
    # diffusion trained in it, keeps its meaning; the decoder learns from the posterior means (no sampling
    # noise, which blurs what it learns: MODEL_CARD.md)
    train_encoder: bool = True
    posterior_noise: bool = True


@dataclass(frozen=True)
class PriorConfig:
    """A small learned prior p(z | controls): a mixture of Gaussians whose weights, means and scales an
    MLP gives from the controls (with a presence mask, so any control may be left free). Fitted to
    the encoder's posterior samples during training; sampled by the generator."""

    components: int = 8
    hidden: int = 128
    weight: float = 1.0


@dataclass(frozen=True)
class InverterConfig:
    """Back to audio from a log-mel: "vocos" (learned: ConvNeXt blocks over frames predicting the STFT's
    magnitude and phase, then an inverse STFT -- no upsampling layer, so no images at multiples of
    sample_rate / stride) or "griffin-lim" (torchaudio's, training-free: the baseline)."""

    kind: str = "vocos"
    dim: int = 192
    blocks: int = 4
    batch: int = 4  # clips of each training batch the inverter learns from (the first ones: it costs most)
    weight: float = 1.0  # weight of its loss (multi-resolution STFT + log-mel L1) in the run's total
    griffin_lim_iters: int = 32
    # mel -> linear STFT magnitude for Griffin-Lim: the pseudo-inverse, clamped at 0, then this many
    # multiplicative non-negative least-squares updates (Lee & Seung; librosa's mel_to_stft solves the same
    # NNLS). A decoded mel is never exactly the mel of some spectrum; the pseudo-inverse's answer then goes
    # negative, and the clamped rest was far from the mel asked for, most in the few wide STFT bins under
    # 250 Hz that carry the pitch. With the updates the bundled model's kicks fall in pitch in 61 % instead
    # of 50 %, and their 1-8 kHz haze is that of real kicks (MODEL_CARD.md); 30 is where it stopped changing
    nnls_iters: int = 30


@dataclass(frozen=True)
class VAESamplingConfig:
    temperature: float = 1.0  # scales the prior's spread when sampling (below 1: safer, less varied)
