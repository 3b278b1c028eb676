"""The waveform family's own config section: the U-Net's shape."""

from __future__ import annotations

from dataclasses import dataclass

from ...diffusion import SamplingConfig


@dataclass(frozen=True)
class UNetConfig:
    """A compact 1-D U-Net over the waveform (network.py)."""

    io: str = "conv"  # "pqmf": a filter bank of `patch` subbands in and out (pqmf.py); "conv": the first design,
    # a learned strided convolution in and a transposed one out (images at multiples of sample_rate / patch)
    patch: int = 16  # subbands (pqmf) or the stride of the learned down/up-sampling (conv) at the input/output
    patch_kernel: int = 32  # conv: kernel of that layer (> patch: overlapping, no patch-boundary tones)
    pqmf_taps: int = 256  # pqmf: the prototype filter's length - 1
    widths: tuple[int, ...] = (32, 48, 64, 96, 128)  # channels per level; each level after the first halves time
    blocks_per_level: int = 1
    dilations: tuple[int, ...] = (1, 3)  # dilated convolutions inside each residual block
    attention: bool = True  # self-attention at the lowest resolution only
    heads: int = 4
    emb_dim: int = 128  # noise-level (and conditioning) embedding width
    out_smoothing: int = 9  # kernel of a full-rate conv after the output upsampling (0: none)
    dropout: float = 0.0


@dataclass(frozen=True)
class WaveformSamplingConfig(SamplingConfig):
    """The diffusion sampler's settings, and the waveform codec's image dip (kickmodel.codecs.identity): how far the
    bands around multiples of sample_rate / patch that a strided output stage (model.io conv) leaves are dipped, in dB
    (0: off; a filter bank, model.io pqmf, has none to dip). An export may change it: no retraining."""

    image_reject_db: float = 30.0
