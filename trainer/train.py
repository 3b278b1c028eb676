"""The training loop: one explicit loop you can read in one sitting.

    kicktrain fit DATA_DIR... --run-dir RUN [--preset small] [--max-steps N] [--device auto] [--export-dir DIR]

Why it looks the way it does:
- All randomness of step k (which clips, how they are augmented, noise levels, noise) comes from
  generators seeded by (seed, k). A resumed run therefore continues exactly where the killed one
  would have gone: weights after N straight steps equal weights after k steps, kill, resume.
- The state is saved at checkpoint steps and when SIGINT/SIGTERM arrive (at the next step
  boundary, then exit 0). Checkpoints are atomic; see checkpoint.py.
- Low-VRAM switches: mixed precision (bf16 autocast where supported, else fp16 with a gradient
  scaler), gradient accumulation (batch_size = micro_batch x accumulation), gradient checkpointing
  of every residual block, pinned host memory, cudnn.benchmark. `vram_budget_gb` probes peak
  memory on the GPU and takes the largest micro-batch that fits.
- Controls (decay, pitch, click) are measured on each augmented batch, mapped to 0..1 by the
  training set's quantiles, and randomly dropped (wholly or per control) so the same network
  serves unconditional sampling and classifier-free guidance.

Multi-GPU (torchrun + DDP) is a later issue: only rank 0 writes, and `RANK` is read for that.
"""

from __future__ import annotations

import copy
import dataclasses
import io
import json
import math
import os
import signal
import time
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import numpy as np
import torch

from . import __version__
from .artifact import load_artifact, save_artifact
from .augment import Augmenter
from .checkpoint import (
    list_checkpoints,
    load_latest,
    rng_state,
    save_checkpoint,
    set_rng_state,
)
from .config import Config, ConfigError, from_dict
from .data import prepare
from .descriptors import CONTROL_NAMES, fit_quantiles, measure, to_unit
from .diffusion import Denoiser
from .fsutil import atomic_write_bytes, clean_stale_temp_files
from .generator import resolve_device
from .model import build_network, count_parameters

Log = Callable[[str], None]


class TrainingError(RuntimeError):
    """A problem the user can fix (bad run folder, mismatched config); printed without a traceback."""


@dataclasses.dataclass
class FitOptions:
    data: list[str]
    run_dir: Path
    cfg: Config
    device: str = "auto"
    max_steps: int | None = None
    export_dir: Path | None = None
    export_name: str | None = None
    init: Path | None = None
    vram_budget_gb: float | None = None
    cache_dir: Path | None = None
    progress: bool = True
    tensorboard: bool = True


class _StopFlag:
    """SIGINT/SIGTERM set a flag; the loop saves at the next step boundary and exits 0."""

    def __init__(self) -> None:
        self.signal: int | None = None
        self._old: dict[int, Any] = {}

    def __enter__(self) -> _StopFlag:
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                self._old[sig] = signal.signal(sig, self._handle)
            except ValueError:  # not the main thread
                pass
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        self.signal = signum

    def __exit__(self, *exc: Any) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)


def _step_generator(seed: int, step: int, stream: int) -> torch.Generator:
    return torch.Generator().manual_seed((seed * 1_000_003 + step * 7919 + stream) % (2**63 - 1))


def _batch_indices(train_idx: np.ndarray, seed: int, step: int, micro: int, n_micro: int) -> list[np.ndarray]:
    """Clips for each micro-batch of `step`: epochs are seeded permutations, so position is a function of step."""
    per_step = micro * n_micro
    n = len(train_idx)
    start = step * per_step
    out = []
    for m in range(n_micro):
        rows = []
        for k in range(start + m * micro, start + (m + 1) * micro):
            epoch, pos = divmod(k, n)
            perm = np.random.default_rng([seed, epoch]).permutation(n)
            rows.append(train_idx[perm[pos]])
        out.append(np.array(rows))
    return out


class EMA:
    """Exponential moving average of parameters (and a copy of buffers)."""

    def __init__(self, model: torch.nn.Module, decay: float, warmup: bool) -> None:
        self.model = copy.deepcopy(model).eval().requires_grad_(False)
        self.decay = decay
        self.warmup = warmup
        self.updates = 0

    @torch.no_grad()
    def update(self, model: torch.nn.Module) -> None:
        self.updates += 1
        d = min(self.decay, (1 + self.updates) / (10 + self.updates)) if self.warmup else self.decay
        for e, p in zip(self.model.parameters(), model.parameters()):
            e.lerp_(p.detach(), 1 - d)
        for e, b in zip(self.model.buffers(), model.buffers()):
            e.copy_(b)

    def state_dict(self) -> dict[str, Any]:
        return {"model": self.model.state_dict(), "updates": self.updates}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.model.load_state_dict(state["model"])
        self.updates = int(state["updates"])


def _precision(mode: str, device: torch.device) -> tuple[torch.dtype | None, bool]:
    """(autocast dtype or None, use grad scaler)."""
    if mode == "off" or (mode == "auto" and device.type != "cuda"):
        return None, False
    if mode == "bf16" or (mode == "auto" and torch.cuda.is_bf16_supported()):
        return torch.bfloat16, False
    return torch.float16, device.type == "cuda"


def _lr_at(step: int, base: float, warmup: int) -> float:
    """Linear warm-up, then constant (the EMA does the averaging). Not tied to max_steps, so a run
    that is resumed with a larger --max-steps continues on the same curve."""
    return base * min(1.0, (step + 1) / max(1, warmup))


def probe_micro_batch(cfg: Config, device: torch.device, budget_gb: float, log: Log) -> int:
    """Largest micro-batch (a divisor of batch_size) whose training step peaks under budget_gb on the GPU."""
    if device.type != "cuda":
        log(f"--vram-budget {budget_gb} GB ignored: training on {device.type}, not a GPU")
        return cfg.train.micro_batch
    budget = budget_gb * 1024**3
    amp_dtype, _ = _precision(cfg.train.mixed_precision, device)
    candidates = [m for m in range(cfg.train.batch_size, 0, -1) if cfg.train.batch_size % m == 0]
    net = build_network(cfg).to(device)
    net.grad_checkpointing = cfg.train.grad_checkpointing
    den = Denoiser.from_config(net, cfg)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-6)
    chosen = None
    for m in candidates:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
        try:
            x = torch.zeros(m, 1, cfg.data.length, device=device)
            t = torch.full((m,), 0.5, device=device, dtype=torch.float64)
            ctx = torch.autocast("cuda", dtype=amp_dtype) if amp_dtype else nullcontext()
            with ctx:
                loss = den.loss(x, t, torch.randn_like(x), stft_weight=cfg.diffusion.stft_loss_weight).mean()
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            peak = torch.cuda.max_memory_allocated(device)
        except torch.cuda.OutOfMemoryError:
            peak = float("inf")
        log(f"vram probe: micro-batch {m}: peak {peak / 1024**3:.2f} GB")
        if peak <= 0.9 * budget:
            chosen = m
            break
    del net, den, opt
    torch.cuda.empty_cache()
    if chosen is None:
        raise TrainingError(f"no micro-batch fits in {budget_gb} GB of VRAM; try a smaller preset")
    return chosen


def _write_json(path: Path, obj: Any) -> None:
    atomic_write_bytes(path, (json.dumps(obj, indent=1, sort_keys=True) + "\n").encode())


def _config_differences(saved: Config, asked: Config) -> list[str]:
    """Dotted keys whose values differ (max_steps and the preset name aside)."""
    out = []
    a, b = saved.to_dict(), asked.to_dict()
    for section, values in a.items():
        if isinstance(values, dict):
            for k, v in values.items():
                if k != "max_steps" and b[section].get(k) != v:
                    out.append(f"{section}.{k} (run: {v!r}, asked: {b[section].get(k)!r})")
    return out


def _resolve_config(opts: FitOptions, log: Log) -> Config:
    """A run folder remembers its config; a resumed run keeps it (max_steps may grow)."""
    saved = opts.run_dir / "config.json"
    cfg = opts.cfg
    if saved.is_file():
        try:
            old = from_dict(json.loads(saved.read_text()))
        except (ValueError, ConfigError) as e:
            raise TrainingError(f"{saved}: cannot read the run's config ({e})") from None
        if old.preset != cfg.preset and cfg.preset != "custom":
            raise TrainingError(f"{opts.run_dir} was trained with preset {old.preset!r}, not {cfg.preset!r}; "
                                "use a new --run-dir")
        differ = _config_differences(old, cfg)
        if differ:
            log(f"resuming keeps the run's saved config; the command line asked otherwise for: {', '.join(differ)}")
        cfg = old
    elif opts.init is not None:
        art = load_artifact(opts.init)
        if (art.config.model, art.config.diffusion) != (cfg.model, cfg.diffusion):
            log(f"fine-tuning: taking the model and diffusion settings of {opts.init.name}")
        # the weights only make sense with the network, process and clip they were trained for
        cfg = dataclasses.replace(cfg, model=art.config.model, diffusion=art.config.diffusion,
                                  data=dataclasses.replace(cfg.data, sample_rate=art.config.data.sample_rate,
                                                           length=art.config.data.length))
    if opts.max_steps is not None:
        cfg = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, max_steps=opts.max_steps))
    return cfg


def fit(opts: FitOptions, log: Log = print) -> dict[str, Any]:
    """Train (or resume) a run. Returns a summary dict (steps, losses, timing, stop reason)."""
    run_dir = Path(opts.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    is_main = int(os.environ.get("RANK", "0")) == 0
    stale_dirs = [run_dir / "checkpoints", run_dir, run_dir / "samples"]
    for stale in [p for d in stale_dirs for p in clean_stale_temp_files(d)]:
        log(f"removed stale temp file {stale}")
    cfg = _resolve_config(opts, log)
    tc = cfg.train
    device = resolve_device(opts.device)
    if tc.num_threads:
        torch.set_num_threads(tc.num_threads)
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = tc.cudnn_benchmark
    log(f"kicktrain {__version__}: preset {cfg.preset}, device {device}, run {run_dir}")

    data = prepare(opts.data, cfg.data, Path(opts.cache_dir or run_dir / "cache"), log=log)
    train_idx, val_idx = data.split(cfg.data.val_fraction)
    if len(train_idx) == 0:
        raise TrainingError("no training clips left after the validation split")
    log(f"data: {len(train_idx)} training clips, {len(val_idx)} validation clips")
    audio = torch.from_numpy(np.array(data.audio))  # a writable copy in RAM: kick sets are small

    controls = tuple(cfg.model.controls)
    ctrl_cols = [CONTROL_NAMES.index(c) for c in controls]
    quantiles: list[list[float]] = []
    if controls:
        raw = measure(audio[torch.from_numpy(train_idx)], cfg.data.sample_rate)[:, ctrl_cols]
        quantiles = fit_quantiles(raw)

    micro = tc.micro_batch
    if opts.vram_budget_gb:
        micro = probe_micro_batch(cfg, device, opts.vram_budget_gb, log)
        cfg = dataclasses.replace(cfg, train=dataclasses.replace(tc, micro_batch=micro))
        tc = cfg.train
    n_micro = tc.batch_size // micro
    if is_main:
        _write_json(run_dir / "config.json", cfg.to_dict())

    torch.manual_seed(tc.seed)
    net = build_network(cfg).to(device)
    net.grad_checkpointing = tc.grad_checkpointing
    den = Denoiser.from_config(net, cfg)
    schedule = den.schedule
    base_lr = tc.lr
    init_from = None
    if opts.init is not None and bool(list_checkpoints(run_dir)):
        log(f"--init {opts.init} ignored: resuming the run, whose weights already started from an artifact")
    elif opts.init is not None:
        init_from = str(opts.init)
        art = load_artifact(opts.init)
        net.load_state_dict(art.tensors)
        base_lr = tc.finetune_lr
        log(f"fine-tuning from {opts.init} (step {art.step}) at lr {base_lr}")
    ema = EMA(net, tc.ema_decay, tc.ema_warmup)
    opt = torch.optim.AdamW(net.parameters(), lr=base_lr, weight_decay=tc.weight_decay)
    amp_dtype, use_scaler = _precision(tc.mixed_precision, device)
    scaler = torch.amp.GradScaler("cuda", enabled=use_scaler)
    augmenter = Augmenter(cfg.augment, cfg.data.sample_rate, peak_db=cfg.data.peak_db)
    log(f"model: {count_parameters(net) / 1e6:.2f} M parameters; batch {tc.batch_size} = {n_micro} x {micro}; "
        f"precision {amp_dtype or 'fp32'}; checkpointing {'on' if tc.grad_checkpointing else 'off'}")

    step = 0
    best_val = float("inf")
    bad_rounds = 0
    resumed = load_latest(run_dir, log=log)
    if resumed is not None:
        state, path = resumed
        net.load_state_dict(state["model"])
        ema.load_state_dict(state["ema"])
        opt.load_state_dict(state["optimizer"])
        scaler.load_state_dict(state["scaler"])
        set_rng_state(state["rng"])
        step = int(state["step"])
        best_val = float(state.get("best_val", float("inf")))
        bad_rounds = int(state.get("bad_rounds", 0))
        quantiles = state.get("control_quantiles", quantiles)
        base_lr = float(state.get("base_lr", base_lr))  # a fine-tune keeps its own rate without --init again
        init_from = state.get("init_from")
        log(f"resumed from step {step} ({path.name})" + (f", fine-tuning from {init_from}" if init_from else ""))

    tb = None
    if opts.tensorboard and is_main:
        try:
            from torch.utils.tensorboard import SummaryWriter

            tb = SummaryWriter(str(run_dir / "tb"))
        except ImportError:  # tensorboard missing: keep training, say so once
            log("tensorboard not installed: no TensorBoard logs")
    metrics_path = run_dir / "metrics.jsonl"

    def training_state() -> dict[str, Any]:
        return {"model": net.state_dict(), "ema": ema.state_dict(), "optimizer": opt.state_dict(),
                "scaler": scaler.state_dict(), "rng": rng_state(), "config": cfg.to_dict(),
                "best_val": best_val, "bad_rounds": bad_rounds, "control_quantiles": quantiles,
                "data_position": {"step": step, "clips_seen": step * tc.batch_size},
                "base_lr": base_lr, "init_from": init_from, "training_summary": training_summary(),
                "code_version": __version__}

    def training_summary() -> dict[str, Any]:
        return {"clips": len(data), "train_clips": len(train_idx), "val_clips": len(val_idx),
                "skipped": len(data.skipped), "sources": sorted({str(Path(m["source"]).parent) for m in data.manifest}),
                "preset": cfg.preset, "steps": step, "best_val_loss": best_val if best_val < float("inf") else None}

    def checkpoint_and_export() -> None:
        if not is_main:
            return
        path = save_checkpoint(run_dir, training_state(), step, keep=tc.keep_checkpoints)
        if opts.export_dir is not None:
            name = opts.export_name or run_dir.name
            Path(opts.export_dir).mkdir(parents=True, exist_ok=True)
            clean_stale_temp_files(Path(opts.export_dir), prefix=f".{name}.safetensors.")
            save_artifact(Path(opts.export_dir) / f"{name}.safetensors", ema.model.state_dict(), cfg, step=step,
                          control_quantiles=quantiles or None, training=training_summary())
        log(f"checkpoint {path.name}")

    def conditioning(x: torch.Tensor, g: torch.Generator) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        if not controls:
            return None, None
        raw = measure(x, cfg.data.sample_rate)[:, ctrl_cols]
        c = to_unit(raw, quantiles)
        mask = (torch.rand(c.shape, generator=g) > 0.3).float()
        drop_all = torch.rand(c.shape[0], generator=g) < cfg.diffusion.cond_drop
        mask[drop_all] = 0.0
        return c.to(device), mask.to(device)

    @torch.no_grad()
    def validate() -> float | None:
        if len(val_idx) == 0:
            return None
        g = torch.Generator().manual_seed(12345)
        x = audio[torch.from_numpy(val_idx)][:, None].to(device)
        losses = []
        for t_val in (0.05, 0.2, 0.5, 0.8):
            t = torch.full((x.shape[0],), t_val, dtype=torch.float64)
            noise = torch.randn(x.shape, generator=g).to(device)
            c, m = conditioning(x[:, 0].cpu(), g)
            vden = Denoiser.from_config(ema.model, cfg)
            losses.append(vden.loss(x, t.to(device), noise, c, m,
                                    stft_weight=cfg.diffusion.stft_loss_weight).mean().item())
        return float(np.mean(losses))

    total = tc.max_steps
    if step >= total:
        log(f"nothing to do: step {step} >= max_steps {total}")
    progress = None
    if opts.progress and is_main:
        from tqdm import tqdm

        progress = tqdm(total=total, initial=step, unit="step", dynamic_ncols=True, mininterval=2.0)
    stop_reason = "max_steps"
    smoothed = None
    t_start = time.time()
    last_log_t, last_log_step = time.time(), step
    with _StopFlag() as stop:
        while step < total:
            net.train()
            lr = _lr_at(step, base_lr, tc.warmup_steps)
            for group in opt.param_groups:
                group["lr"] = lr
            batches = _batch_indices(train_idx, tc.seed, step, micro, n_micro)
            g_aug = _step_generator(tc.seed, step, 1)
            g_noise = _step_generator(tc.seed, step, 2)
            t_min = 0.0
            if cfg.diffusion.curriculum_steps > 0:
                t_min = 0.7 * max(0.0, 1.0 - step / cfg.diffusion.curriculum_steps)
            loss_sum = 0.0
            for idx in batches:
                x = augmenter(audio[torch.from_numpy(idx)], g_aug)
                c, m = conditioning(x, g_noise)
                x = x[:, None]
                if device.type == "cuda" and tc.pin_memory:
                    x = x.pin_memory()
                x = x.to(device, non_blocking=True)
                t = schedule.sample_t(x.shape[0], g_noise, low_noise_bias=cfg.diffusion.low_noise_bias, t_min=t_min)
                noise = torch.randn(x.shape, generator=g_noise).to(device)
                ctx = torch.autocast(device.type, dtype=amp_dtype) if amp_dtype else nullcontext()
                with ctx:
                    loss = den.loss(x, t.to(device), noise, c, m, stft_weight=cfg.diffusion.stft_loss_weight).mean()
                scaler.scale(loss / n_micro).backward()
                loss_sum += loss.item() / n_micro
            if not math.isfinite(loss_sum) and not use_scaler:  # fp16's scaler skips such steps itself
                raise TrainingError(f"loss became {loss_sum} at step {step}; lower the learning rate or "
                                    "turn mixed precision off")
            scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_(net.parameters(), tc.grad_clip)
            scaler.step(opt)
            scaler.update()
            opt.zero_grad(set_to_none=True)
            ema.update(net)
            step += 1
            smoothed = loss_sum if smoothed is None else 0.95 * smoothed + 0.05 * loss_sum

            if progress is not None:
                progress.update(1)
            if step % tc.log_every == 0 or step == total:
                now = time.time()
                sps = (step - last_log_step) * tc.batch_size / max(now - last_log_t, 1e-9)
                last_log_t, last_log_step = now, step
                if progress is not None:
                    progress.set_postfix(loss=f"{smoothed:.4f}", samples_s=f"{sps:.1f}")
                if is_main:
                    with open(metrics_path, "a") as f:
                        f.write(json.dumps({"step": step, "loss": smoothed, "lr": lr, "samples_per_s": sps}) + "\n")
                    if tb is not None:
                        tb.add_scalar("train/loss", smoothed, step)
                        tb.add_scalar("train/lr", lr, step)
                        tb.add_scalar("train/samples_per_s", sps, step)
            if tc.val_every and step % tc.val_every == 0:
                v = validate()
                if v is not None:
                    if is_main:
                        with open(metrics_path, "a") as f:
                            f.write(json.dumps({"step": step, "val_loss": v}) + "\n")
                        if tb is not None:
                            tb.add_scalar("val/loss", v, step)
                    if v < best_val - 1e-4:
                        best_val, bad_rounds = v, 0
                    else:
                        bad_rounds += 1
                    log(f"step {step}: validation loss {v:.4f} (best {best_val:.4f})")
                    if tc.early_stop_patience and bad_rounds >= tc.early_stop_patience:
                        stop_reason = "early_stop"
            if tc.sample_every and step % tc.sample_every == 0 and is_main:
                write_samples(run_dir, ema.model, cfg, quantiles, step, audio[torch.from_numpy(val_idx[:4])]
                              if len(val_idx) else audio[:4], tb)
            if stop.signal is not None:
                stop_reason = f"signal {signal.Signals(stop.signal).name}"
            if (tc.ckpt_every and step % tc.ckpt_every == 0) or step == total or stop_reason != "max_steps":
                checkpoint_and_export()
            if stop_reason != "max_steps":
                break
    if progress is not None:
        progress.close()
    if resumed is None and step == 0:
        checkpoint_and_export()
    if tb is not None:
        tb.close()
    wall = time.time() - t_start
    log(f"stopped at step {step} ({stop_reason}); {wall:.0f} s this session")
    return {"step": step, "stop_reason": stop_reason, "loss": smoothed, "best_val_loss": best_val,
            "seconds": wall, "config": cfg.to_dict()}


def write_samples(run_dir: Path, model: torch.nn.Module, cfg: Config, quantiles: list[list[float]], step: int,
                  real: torch.Tensor, tb: Any = None, n: int = 4) -> list[Path]:
    """Generate n kicks with the EMA weights into RUN/samples/ (WAV + spectrogram PNG beside real kicks)."""
    import soundfile as sf

    from .artifact import Artifact
    from .generator import Item, WaveformDiffusionGenerator, finish_kick
    from .plots import spectrogram_grid

    folder = Path(run_dir) / "samples"
    folder.mkdir(parents=True, exist_ok=True)
    art = Artifact(folder / f"step-{step:08d}.safetensors", {
        "family": cfg.model.family, "controls": json.dumps(list(cfg.model.controls)),
        "control_quantiles": json.dumps(quantiles), "step": str(step)}, model.state_dict(), cfg)
    was_training = model.training
    gen = WaveformDiffusionGenerator(art, next(model.parameters()).device)
    clips = finish_kick(gen.sample([Item(seed=i) for i in range(n)]), cfg.data.sample_rate)
    model.train(was_training)
    paths = []
    for i, clip in enumerate(clips):
        p = folder / f"step-{step:08d}-{i}.wav"
        buf = io.BytesIO()
        sf.write(buf, clip, cfg.data.sample_rate, subtype="PCM_24", format="WAV")
        atomic_write_bytes(p, buf.getvalue())
        paths.append(p)
    png = folder / f"step-{step:08d}.png"
    spectrogram_grid([("generated", clips), ("real", real.numpy())], cfg.data.sample_rate, png,
                     title=f"step {step}")
    if tb is not None:
        for i, clip in enumerate(clips[:2]):
            tb.add_audio(f"samples/{i}", torch.from_numpy(clip)[None], step, sample_rate=cfg.data.sample_rate)
        import matplotlib.image as mpimg

        tb.add_image("samples/spectrograms", mpimg.imread(png)[..., :3], step, dataformats="HWC")
    return paths
