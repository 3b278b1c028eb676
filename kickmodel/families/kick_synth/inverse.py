"""The synth's amortised inverse: a small network that reads a kick and guesses the synth's numbers at once.

Analysis by synthesis (fit.py) finds a kick's numbers by a few hundred gradient steps from a few measured starts,
about 2 s a kick on the CPU; this encoder, trained on the synth's own random renders (scripts/train_synth_inverse.py),
guesses them in one pass (a few ms), and the fit then refines from the guess instead of from its starts (as
Synplant's Genopatch does). Trained with a squared error on the numbers, it guesses what a number is on average
among the renders that sound alike: where the audio cannot tell a number (a partial 70 dB down, the level of a
peak-normalised file), that is the typical value, not an arbitrary one.

    input     a prepared clip (kickmodel.clips: onset-aligned, peak -1 dBFS) at the encoder's rate, cropped or padded
              to its length: a log-mel of the whole kick (MEL_FFT window, MEL_HOP hop, MEL_BANDS bands) and a
              finer one of its first ONSET_SAMPLES (the attack and the click), each standardised per band by the
              training renders' mean and spread
    network   1-D convolutions over time (bands as channels), strided down, then an MLP: the unconstrained numbers,
              in units of the training renders' spread around their mean (buffers u_mean, u_std)

Weights: inverse_v<version>.safetensors beside this module, one file per synth version (synth.py's versions: a
model trained on version 1, as the kick-synth model shipped until 2026-12-06, uses inverse_v1; one trained on version
2, as the shipped one since, inverse_v2; a new synth body gets its own file from the same script), read with
safetensors (no pickle), its metadata naming the synth version, the numbers in order and the encoder's config; a
file that is missing or does not match the synth is refused (shipped() gives None: the fit starts from its measured
starts, as before).
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from .synth import U_LIMIT, params_for

HERE = Path(__file__).resolve().parent
MAX_WEIGHTS_BYTES = 8 << 20
log = logging.getLogger(__name__)


def weights_path(version: int) -> Path:
    """Where the inverse shipped for synth `version` lives (beside this module)."""
    return HERE / f"inverse_v{int(version)}.safetensors"


@dataclass(frozen=True)
class InverseConfig:
    sample_rate: int = 44100
    length: int = 45056
    mel_fft: int = 2048
    mel_hop: int = 512
    mel_bands: int = 64
    onset_samples: int = 2048
    onset_fft: int = 256
    onset_hop: int = 64
    onset_bands: int = 32
    fmin: float = 20.0
    channels: int = 96
    squeeze: int = 32
    hidden: int = 256


class InverseNet(torch.nn.Module):
    """Prepared clips [n, length] -> unconstrained synth numbers [n, n_params] (InverseNet.guess)."""

    def __init__(self, cfg: InverseConfig, n_params: int) -> None:
        super().__init__()
        self.cfg, self.n_params = cfg, int(n_params)
        for name, n_fft, bands in (("whole", cfg.mel_fft, cfg.mel_bands), ("early", cfg.onset_fft, cfg.onset_bands)):
            # computed at construction, never stored: the weights file holds the network and its standardisation
            self.register_buffer(f"{name}_window", torch.hann_window(n_fft), persistent=False)
            self.register_buffer(f"{name}_fb", _mel_bank(n_fft, bands, cfg), persistent=False)
        frames = cfg.length // cfg.mel_hop + 1
        onset_frames = cfg.onset_samples // cfg.onset_hop + 1
        c = cfg.channels

        def tower(bands: int, n: int) -> tuple[torch.nn.Sequential, int]:
            layers: list[torch.nn.Module] = [torch.nn.Conv1d(bands, c, 5, padding=2), torch.nn.GELU()]
            while n > 12:
                layers += [torch.nn.Conv1d(c, c, 5, stride=2, padding=2), torch.nn.GELU()]
                n = (n - 1) // 2 + 1
            layers += [torch.nn.Conv1d(c, cfg.squeeze, 1), torch.nn.GELU()]  # fewer channels into the MLP
            return torch.nn.Sequential(*layers), cfg.squeeze * n

        self.body, body_out = tower(cfg.mel_bands, frames)
        self.onset, onset_out = tower(cfg.onset_bands, onset_frames)
        self.head = torch.nn.Sequential(torch.nn.Linear(body_out + onset_out, cfg.hidden), torch.nn.GELU(),
                                        torch.nn.Linear(cfg.hidden, cfg.hidden), torch.nn.GELU(),
                                        torch.nn.Linear(cfg.hidden, self.n_params))
        self.register_buffer("mel_mean", torch.zeros(cfg.mel_bands, 1))
        self.register_buffer("mel_std", torch.ones(cfg.mel_bands, 1))
        self.register_buffer("onset_mean", torch.zeros(cfg.onset_bands, 1))
        self.register_buffer("onset_std", torch.ones(cfg.onset_bands, 1))
        self.register_buffer("u_mean", torch.zeros(self.n_params))
        self.register_buffer("u_std", torch.ones(self.n_params))

    def features(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Clips [n, length] (prepared, at cfg.sample_rate) -> (log-mel [n, bands, frames], onset log-mel), raw."""
        x, c = x.float(), self.cfg
        whole = _log_mel(x, c.mel_fft, c.mel_hop, self.whole_window, self.whole_fb)
        early = _log_mel(x[:, :c.onset_samples], c.onset_fft, c.onset_hop, self.early_window, self.early_fb)
        return whole, early

    def from_features(self, whole: torch.Tensor, onset: torch.Tensor) -> torch.Tensor:
        """Standardised numbers [n, n_params] (u - u_mean) / u_std from raw features."""
        a = self.body((whole - self.mel_mean) / self.mel_std).flatten(1)
        b = self.onset((onset - self.onset_mean) / self.onset_std).flatten(1)
        return self.head(torch.cat([a, b], dim=1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.from_features(*self.features(x))

    @torch.no_grad()
    def guess(self, clips: torch.Tensor, sample_rate: int) -> torch.Tensor:
        """Unconstrained numbers [n, n_params] for prepared clips [n, L] at sample_rate (resampled to the encoder's
        rate, cropped or zero-padded to its length: a prepared clip starts at its onset)."""
        x = fit_to(clips.detach().float().cpu(), sample_rate, self.cfg)
        z = self(x)
        return (z * self.u_std + self.u_mean).clamp(-U_LIMIT, U_LIMIT)


def _mel_bank(n_fft: int, bands: int, cfg: InverseConfig) -> torch.Tensor:
    import torchaudio.functional as AF

    return AF.melscale_fbanks(n_fft // 2 + 1, cfg.fmin, cfg.sample_rate / 2, bands, cfg.sample_rate, norm="slaney")


def _log_mel(x: torch.Tensor, n_fft: int, hop: int, window: torch.Tensor, fb: torch.Tensor) -> torch.Tensor:
    """[n, L] -> [n, bands, frames]: log mel power."""
    spec = torch.stft(x, n_fft, hop_length=hop, window=window, center=True, return_complex=True).abs().pow(2)
    return torch.log(torch.einsum("nbf,bm->nmf", spec, fb) + 1e-8)


def fit_to(x: torch.Tensor, sample_rate: int, cfg: InverseConfig) -> torch.Tensor:
    """Clips [n, L] at sample_rate -> [n, cfg.length] at cfg.sample_rate."""
    if int(sample_rate) != cfg.sample_rate:
        import torchaudio.functional as AF

        x = AF.resample(x, int(sample_rate), cfg.sample_rate)
    if x.shape[1] >= cfg.length:
        return x[:, :cfg.length]
    return torch.nn.functional.pad(x, (0, cfg.length - x.shape[1]))


def param_names(version: int) -> list[str]:
    return [p.name for p in params_for(version)]


def metadata(cfg: InverseConfig, version: int, extra: dict | None = None) -> dict[str, str]:
    return {"synth_version": str(int(version)), "params": json.dumps(param_names(version)),
            "config": json.dumps(asdict(cfg), sort_keys=True), **{k: str(v) for k, v in (extra or {}).items()}}


def save(net: InverseNet, path: Path, version: int, extra: dict | None = None) -> None:
    """The network's weights (float16: a few hundred kB; buffers float32) and what they were made for, written to a
    temporary file beside `path`, synced and renamed over it (a reader never sees half a file)."""
    from safetensors.torch import save

    if net.n_params != len(params_for(version)):
        raise ValueError(f"an inverse of {net.n_params} numbers is not one for synth version {version}")
    state = {k: (v.half() if v.is_floating_point() and not k.split(".")[-1].endswith(("_mean", "_std")) else v)
             .contiguous() for k, v in net.state_dict().items()}
    data = save(state, metadata=metadata(net.cfg, version, extra))
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class InverseError(ValueError):
    pass


def load(version: int, path: Path | None = None) -> InverseNet:
    """The inverse for synth `version` (its file beside this module by default); InverseError when the file is
    missing, too large, or made for another synth version, other numbers or other shapes."""
    from safetensors import SafetensorError, safe_open

    path = weights_path(version) if path is None else Path(path)
    try:
        names = param_names(version)
    except ValueError as e:
        raise InverseError(str(e)) from None
    try:
        if path.stat().st_size > MAX_WEIGHTS_BYTES:
            raise InverseError(f"{path.name} is larger than {MAX_WEIGHTS_BYTES >> 20} MB")
        with safe_open(str(path), "pt") as f:
            meta = f.metadata() or {}
            if meta.get("synth_version") != str(int(version)):
                raise InverseError(f"{path.name} is for synth version {meta.get('synth_version')!r}, not {version}")
            if json.loads(meta.get("params", "null")) != names:
                raise InverseError(f"{path.name} guesses other numbers than this synth's")
            fields = json.loads(meta.get("config", "{}"))
            if set(fields) != set(InverseConfig.__dataclass_fields__):
                raise InverseError(f"{path.name}'s config names other fields")
            cfg = InverseConfig(**fields)
            net = InverseNet(cfg, len(names))
            want = net.state_dict()
            if set(f.keys()) != set(want):
                raise InverseError(f"{path.name} holds other tensors than the network's")
            state = {}
            for k in f.keys():
                t = f.get_tensor(k)
                if tuple(t.shape) != tuple(want[k].shape):
                    raise InverseError(f"{path.name}: {k} has shape {tuple(t.shape)}, not {tuple(want[k].shape)}")
                state[k] = t.to(want[k].dtype)
                if not bool(torch.isfinite(state[k]).all()):
                    raise InverseError(f"{path.name}: {k} holds NaN or inf")
    except (OSError, SafetensorError, json.JSONDecodeError, TypeError) as e:
        raise InverseError(f"cannot read {path.name}: {e}") from None
    net.load_state_dict(state)
    return net.eval()


_CACHE: dict[int, InverseNet | None] = {}


def shipped(version: int) -> InverseNet | None:
    """The inverse shipped for synth `version`, loaded once; None when there is none or it is refused (logged once:
    fits then start from their measured starts, as before)."""
    if version not in _CACHE:
        try:
            _CACHE[version] = load(version)
        except InverseError as e:
            if weights_path(version).exists():
                log.warning("the kick synth's inverse for version %s is not used: %s", version, e)
            _CACHE[version] = None
    return _CACHE[version]


def n_weights(net: InverseNet) -> int:
    return sum(p.numel() for p in net.parameters())

