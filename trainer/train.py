"""The training loop: set-up, one step function, and hooks around a loop you can read in one sitting.

    kicktrain fit DATA_DIR... --run-dir RUN [--family waveform-diffusion] [--preset small] [--train-steps N]
                  [--device auto] [--export-dir DIR]

    trainer = Trainer(opts, log)        # set-up: config, data, the family's objective, optimiser, resume
    while trainer.step < trainer.total:
        metrics = trainer.train_step()  # one optimiser step over batch_size clips
        for hook in trainer.hooks:      # log, validate, sample, checkpoint (+ profiler, when asked)
            hook(trainer, metrics)

The loop knows nothing of any family: its recipe (`trainer.recipes.get_recipe(name).objective()`) gives the
module to train and its loss. Why it looks the way it does:
- All randomness of step k (which clips, how they are augmented, which controls are dropped, noise
  levels, noise) comes from generators seeded by (seed, k). A resumed run therefore continues exactly
  where the killed one would have gone: weights after N straight steps equal weights after k steps,
  kill, resume.
- The state is saved at checkpoint steps and when SIGINT/SIGTERM arrive (at the next step
  boundary, then exit 0). Checkpoints are atomic; see checkpoint.py.
- Low-VRAM switches: mixed precision (bf16 autocast where supported, else fp16 with a gradient
  scaler), gradient accumulation (batch_size = micro_batch x accumulation), gradient checkpointing,
  pinned host memory, cudnn.benchmark. They only cost time where memory is not short, so loop_plan.py
  picks micro-batch, precision and checkpointing: the fastest loop whose measured step fits the budget
  (`vram_budget_gb`, else the GPU's free memory; the plain loop on a CPU).
- Controls (decay, pitch, click) are measured on each augmented batch, mapped to 0..1 by the
  training set's quantiles, and randomly dropped (wholly or per control) so the same network
  serves free generation and classifier-free guidance.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import os
import shutil
import signal
import time
from collections.abc import Callable, Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.profiler import record_function

from kickmodel import safejson
from kickmodel.artifact import Artifact
from kickmodel.config import Config, ConfigError, differences
from kickmodel.descriptors import CONTROL_NAMES, fit_quantiles, measure, to_dial
from kickmodel.families import from_dict, get_family
from kickmodel.families.base import parameter_count
from kickmodel.fsutil import atomic_write_bytes, clean_stale_temp_files
from kickmodel.loading import load_artifact, resolve_device

from . import __version__, selection
from .augment import Augmenter
from .checkpoint import list_checkpoints, load_latest, rng_state, save_checkpoint, set_rng_state
from .data import default_cache_dir, prepare
from .distributed import Dist, per_rank_batch
from .errors import TrainingError
from .export import artifact_from_state
from .loop_plan import choose_loop, explicit_settings, set_grad_checkpointing
from .recipes import get_recipe
from .recipes.base import FitContext, Objective

Log = Callable[[str], None]
NAMED_HELD_OUT = 8  # the log names the held-out clips when there are at most this many (they are not on the map)
AUTO_MAP_KICKS = 256  # the map a fit's last export makes: at most this many kicks (an even subsample beyond)
# a fine-tune from --init that names no length (--train-steps, --set train.max_steps) takes FINETUNE_STEPS steps,
# validated and checkpointed (so exported) FINETUNE_CHECKS times on the way; the preset's length is a fresh run's
FINETUNE_STEPS = 400
FINETUNE_CHECKS = 8
RISEN_CHECKS = 3  # validation checks in a row without a new best before the log says validation has risen
CLOCK: Callable[[], float] = time.monotonic  # what --minutes is measured on (tests put a fake clock here)
Hook = Callable[["Trainer", dict], None]


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
    cache_dir: Path | None = None  # default: the shared prepared-data cache (data.default_cache_dir)
    progress: bool = True
    tensorboard: bool = True
    family_options: dict[str, Any] = dataclasses.field(default_factory=dict)  # e.g. {"vae": path}
    minutes: float | None = None  # time budget: stop, checkpoint and export once this much has passed (set-up included)


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


def step_generator(seed: int, step: int, stream: int) -> torch.Generator:
    return torch.Generator().manual_seed((seed * 1_000_003 + step * 7919 + stream) % (2**63 - 1))


def batch_indices(train_idx: np.ndarray, seed: int, step: int, micro: int, n_micro: int,
                  groups: Sequence[np.ndarray] | None = None) -> list[np.ndarray]:
    """Clips for each micro-batch of `step`: epochs are seeded permutations, so position is a function of step.
    With `groups` (the training clips as groups of velocity layers and near-copies, `train.balance_layers`),
    an epoch is a permutation of the groups and each draw takes one member of its group at random: a kick
    recorded at five velocities is drawn as often as a kick recorded once, not five times as often."""
    per_step = micro * n_micro
    n = len(groups) if groups is not None else len(train_idx)
    start = step * per_step
    out = []
    for m in range(n_micro):
        rows = []
        for k in range(start + m * micro, start + (m + 1) * micro):
            epoch, pos = divmod(k, n)
            perm = np.random.default_rng([seed, epoch]).permutation(n)
            if groups is None:
                rows.append(train_idx[perm[pos]])
            else:
                group = groups[perm[pos]]
                rows.append(group[int(np.random.default_rng([seed, epoch, pos, 1]).integers(len(group)))])
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


def precision(mode: str, device: torch.device) -> tuple[torch.dtype | None, bool]:
    """(autocast dtype or None, use grad scaler)."""
    if mode == "off" or (mode == "auto" and device.type != "cuda"):
        return None, False
    if mode == "bf16" or (mode == "auto" and torch.cuda.is_bf16_supported()):
        return torch.bfloat16, False
    return torch.float16, device.type == "cuda"


def lr_at(step: int, base: float, warmup: int) -> float:
    """Linear warm-up, then constant (the EMA does the averaging). Not tied to max_steps, so a run
    that is resumed with a larger --max-steps continues on the same curve."""
    return base * min(1.0, (step + 1) / max(1, warmup))


def peak_memory_mb(device: torch.device) -> float:
    """Peak memory of this process so far: the GPU's allocator on CUDA, else the resident set's high water mark."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _write_json(path: Path, obj: Any) -> None:
    atomic_write_bytes(path, (json.dumps(obj, indent=1, sort_keys=True, allow_nan=False) + "\n").encode())


def _train_keys_set(cfg: Config) -> set[str]:
    """The train settings that differ from the preset's (set with --set): all of them when the preset is unknown."""
    try:
        ref = get_family(cfg.family).presets()[cfg.preset].train
    except Exception:  # noqa: BLE001 -- "custom", or a preset this family does not have
        return {f.name for f in dataclasses.fields(cfg.train)}
    return {f.name for f in dataclasses.fields(cfg.train) if getattr(cfg.train, f.name) != getattr(ref, f.name)}


def _finite_or_none(v: float | None) -> float | None:
    return v if v is not None and math.isfinite(v) else None


CLIPS_DEVICE_SHARE = 0.25  # the training clips go to the GPU when they take at most this share of its free memory


def _bytes(n: float) -> str:
    return next(f"{n / f:.0f} {u}" for f, u in ((1e9, "GB"), (1e6, "MB"), (1e3, "kB"), (1, "B")) if n >= f or f == 1)


def place_clips(audio: torch.Tensor, device: torch.device, log: Log, free_bytes: int | None = None) -> torch.Tensor:
    """The training clips [N, L] where each step is drawn from them: on the training device (a step's clips are then
    indexed, augmented and measured there and nothing crosses the bus), unless they would take more than
    CLIPS_DEVICE_SHARE of its free memory: then they stay in RAM, each step's clips are moved, and the log says so.
    free_bytes: the device's free memory (default: CUDA's own figure; other devices are not asked)."""
    if device.type == "cpu":
        return audio
    if free_bytes is None and device.type == "cuda":
        free_bytes = torch.cuda.mem_get_info(device)[0]
    size = audio.numel() * audio.element_size()
    if free_bytes is not None and size > CLIPS_DEVICE_SHARE * free_bytes:
        log(f"data: the {len(audio)} clips ({_bytes(size)}) kept on the CPU: more than {CLIPS_DEVICE_SHARE:.0%} of "
            f"the {_bytes(free_bytes)} free on {device}; each step's clips are moved there")
        return audio
    return audio.to(device)


class Trainer:
    """A run, set up and (where a checkpoint exists) resumed. See the module docstring for the loop."""

    # while profiling: waits for the device, called at each phase's start and end (trainer.profiling sets it)
    _phase_sync: Callable[[], None] | None = None

    def __init__(self, opts: FitOptions, log: Log = print) -> None:
        self.opts = opts
        self.log = log
        self.run_dir = Path(opts.run_dir)
        self.dist = Dist.from_env()
        self.is_main = self.dist.is_main
        if not self.is_main:  # one voice: rank 0 speaks for the run
            self.log = log = lambda m: None
        self._created_run_dir = not self.run_dir.exists()
        self._t0 = CLOCK()  # --minutes counts from here
        self._export_noted = False  # the first export says what a daemon serving from its folder does
        self._no_map_said = False  # why an export has no kit map is said once a run
        try:
            self._setup()
        except BaseException:
            self._remove_if_unused()
            raise

    # ------------------------------------------------------------------ set-up
    def _remove_if_unused(self) -> None:
        """A run that failed before its first checkpoint leaves no folder behind (if this call made it)."""
        if self.is_main and self._created_run_dir and self.run_dir.is_dir() and not list_checkpoints(self.run_dir):
            shutil.rmtree(self.run_dir, ignore_errors=True)

    def _resolve_config(self, init: Artifact | None, ctx: FitContext) -> Config:
        """A run folder remembers its config; a resumed run keeps it (max_steps may grow)."""
        opts, log = self.opts, self.log
        saved = self.run_dir / "config.json"
        cfg = opts.cfg
        if saved.is_file():
            try:
                old = from_dict(safejson.read(saved, max_bytes=1 << 20))
            except (ValueError, ConfigError) as e:
                raise TrainingError(f"{saved}: cannot read the run's config ({e})") from None
            if old.family != cfg.family:
                raise TrainingError(f"{self.run_dir} trains family {old.family}, not {cfg.family}; "
                                    "use a new --run-dir")
            if old.preset != cfg.preset and cfg.preset != "custom":
                raise TrainingError(f"{self.run_dir} was trained with preset {old.preset!r}, not {cfg.preset!r}; "
                                    "use a new --run-dir")
            # the loop (micro-batch, checkpointing, precision) is the plan's, not the user's, unless they set it
            planned = tuple(f"train.{k}" for k in ("micro_batch", "grad_checkpointing", "mixed_precision")
                            if k not in explicit_settings(cfg))
            # a fine-tune's checks were set by its length (_finetune_length), not asked for again on the command line
            paced = tuple(f"train.{k}" for k in ("val_every", "ckpt_every")
                          if opts.init is not None and k not in _train_keys_set(cfg))
            differ = differences(old, cfg, ignore=("train.max_steps", *planned, *paced))
            if differ:
                log(f"resuming keeps the run's saved config; the command line asked otherwise for: {', '.join(differ)}")
            cfg = old
            get_recipe(cfg.family).check_resume(cfg, ctx.options)  # e.g. another --vae than the run's: refused
        else:
            if init is not None and init.family != cfg.family:
                theirs = get_family(init.family).cli_name
                raise TrainingError(f"--init {init.path.name} is a {theirs} model: drop --family or pass "
                                    f"--family {theirs}")
            cfg = get_recipe(cfg.family).fit_config(cfg, ctx)
            if init is not None and "sampling" in cfg.parts and "sampling" in init.config.parts:
                # the sampling settings were chosen by evaluating the model being fine-tuned (the bundled one
                # samples at guidance 2): a fine-tune keeps them rather than the preset's
                cfg = cfg.with_section("sampling", init.config.sampling)
                log(f"sampling settings from {init.path.name}: {init.config.sampling}")
        if opts.max_steps is not None:
            cfg = cfg.replace("train", max_steps=opts.max_steps)
        elif init is not None and not saved.is_file() and "max_steps" not in _train_keys_set(cfg):
            cfg = self._finetune_length(cfg)
        return cfg

    def _finetune_length(self, cfg: Config) -> Config:
        """A fine-tune's default length: FINETUNE_STEPS (the preset's is a fresh run's: 20,000 steps of the bundled
        model's preset, hours on a CPU), validated and checkpointed FINETUNE_CHECKS times so the best is exported."""
        tc = cfg.train
        steps = min(tc.max_steps, FINETUNE_STEPS)
        every = max(1, steps // FINETUNE_CHECKS)
        mine = _train_keys_set(cfg)
        changes = {"max_steps": steps}
        for key in ("val_every", "ckpt_every"):
            if key not in mine and getattr(tc, key) > every:
                changes[key] = every
        self.log(f"fine-tune: {steps} steps (the preset's {tc.max_steps} are a fresh run's; --train-steps N for "
                 f"more), validated and exported every {changes.get('val_every', tc.val_every)}; --minutes M stops "
                 "it sooner")
        return cfg.replace("train", **changes)

    def _setup(self) -> None:
        opts, log = self.opts, self.log
        run_dir = self.run_dir
        if run_dir.exists() and not run_dir.is_dir():
            raise TrainingError(f"--run-dir {run_dir} is a file, not a folder")
        if run_dir.is_dir() and self.is_main:
            for stale in [p for d in (run_dir / "checkpoints", run_dir, run_dir / "samples")
                          for p in clean_stale_temp_files(d)]:
                log(f"removed stale temp file {stale}")
        self.device = device = self.dist.start(resolve_device(opts.device))
        resuming = bool(list_checkpoints(run_dir))
        init = None
        if opts.init is not None and resuming:
            log(f"--init {opts.init} ignored: resuming the run, whose weights already started from an artifact")
        elif opts.init is not None:
            init = load_artifact(opts.init)
        ctx = FitContext(device=device, log=log, init=init, options=dict(opts.family_options), run_dir=run_dir)
        cfg = self._resolve_config(init, ctx)
        tc = cfg.train
        if tc.num_threads:
            torch.set_num_threads(tc.num_threads)
        elif self.dist.enabled and device.type == "cpu":  # the box's cores shared by its processes
            torch.set_num_threads(max(1, (os.cpu_count() or 1) // self.dist.local_world))
        if device.type == "cuda":
            torch.backends.cudnn.benchmark = tc.cudnn_benchmark
        family = get_family(cfg.family)
        log(f"kicktrain {__version__}: family {family.cli_name}, preset {cfg.preset}, device {device}, run {run_dir}")

        cache = Path(opts.cache_dir) if opts.cache_dir else default_cache_dir(opts.data, cfg.data)
        self.data = data = prepare(opts.data, cfg.data, cache, log=log)
        self.train_idx, self.val_idx = data.split(cfg.data.val_fraction)
        if len(self.train_idx) == 0:
            raise TrainingError("no training clips left after the validation split")
        held = [Path(str(data.manifest[int(i)]["source"])).name for i in self.val_idx]
        log(f"data: {len(self.train_idx)} training clips, {len(self.val_idx)} validation clips"
            + (f" (held out: {', '.join(held)})" if 0 < len(held) <= NAMED_HELD_OUT else ""))
        self.train_groups: list[np.ndarray] | None = None
        if tc.balance_layers:
            self.train_groups = data.groups(self.train_idx)
            log(f"data: drawing the {len(self.train_idx)} training clips as {len(self.train_groups)} kicks "
                "(velocity layers and near-copies of one kick drawn as one: train.balance_layers)")
        self.audio = place_clips(torch.from_numpy(np.array(data.audio)), device, log)  # kick sets are small

        self.controls = tuple(cfg.controls)
        self.ctrl_cols = [CONTROL_NAMES.index(c) for c in self.controls]
        self.quantiles: list[list[float]] = []
        if self.controls:
            raw = measure(self.audio[torch.from_numpy(self.train_idx)], cfg.data.sample_rate)[:, self.ctrl_cols]
            self.quantiles = fit_quantiles(raw)

        # micro-batch, checkpointing and precision: the fastest loop that fits the budget (loop_plan.py)
        plan = choose_loop(cfg, device, opts.vram_budget_gb, ctx, log, world=self.dist.world, resumed=resuming)
        cfg = plan.apply(cfg)
        tc = cfg.train
        self.cfg = cfg
        try:
            self.per_rank, self.micro = per_rank_batch(tc.batch_size, tc.micro_batch, self.dist.world)
        except ValueError as e:
            raise TrainingError(str(e)) from None
        log(plan.line(self.per_rank))
        self.n_micro = self.per_rank // self.micro
        if self.dist.enabled:
            log(f"world size {self.dist.world}, per-rank batch {self.per_rank} ({self.n_micro} x {self.micro}), "
                f"effective batch {tc.batch_size}; backend {'nccl' if device.type == 'cuda' else 'gloo'}")
        if self.is_main:
            run_dir.mkdir(parents=True, exist_ok=True)
            _write_json(run_dir / "config.json", cfg.to_dict())

        torch.manual_seed(tc.seed)
        self.objective: Objective = get_recipe(cfg.family).objective(cfg, ctx)
        self.module = self.objective.module
        set_grad_checkpointing(self.module, tc.grad_checkpointing)
        self.base_lr = tc.lr
        self.init_from: str | None = None
        if init is not None:
            self.objective.load_init(init)
            self.init_from = str(opts.init)
            self.base_lr = tc.finetune_lr
            log(f"fine-tuning from {opts.init} (step {init.step}) at lr {self.base_lr}")
        self.ema = EMA(self.module, tc.ema_decay, tc.ema_warmup)
        self.opt = torch.optim.AdamW(self.module.parameters(), lr=self.base_lr, weight_decay=tc.weight_decay)
        self.amp_dtype, self.use_scaler = precision(tc.mixed_precision, device)
        self.scaler = torch.amp.GradScaler("cuda", enabled=self.use_scaler)
        self.augmenter = Augmenter(cfg.augment, cfg.data.sample_rate, peak_db=cfg.data.peak_db)
        log(f"model: {parameter_count({'m': self.module}) / 1e6:.2f} M parameters; batch {tc.batch_size} = "
            f"{self.dist.world} x {self.n_micro} x {self.micro}; precision {self.amp_dtype or 'fp32'}; "
            f"checkpointing {'on' if tc.grad_checkpointing else 'off'}")

        self.step = 0
        self.train_seconds = 0.0  # time in train_step over every session of the run (not validation, saving)
        self.best_val = float("inf")
        self.bad_rounds = 0
        self.best_step: int | None = None  # the step of best_val, whose EMA weights best_ema holds
        self.best_ema: dict[str, torch.Tensor] | None = None
        self.resumed_from: int | None = None
        found = load_latest(run_dir, log=log) if resuming else None
        if found is not None:
            self._resume(*found)
        elif init is None:
            self.objective.fit_data(self.audio[torch.from_numpy(self.train_idx)])
            self.ema = EMA(self.module, tc.ema_decay, tc.ema_warmup)  # with whatever fit_data set
        # DDP wraps the module for the forward passes that need gradients; the EMA, checkpoints and
        # exports use the unwrapped one (DDP broadcast rank 0's weights to every rank just now)
        self.ddp_module = self.module
        if self.dist.enabled:
            from torch.nn.parallel import DistributedDataParallel

            self.ddp_module = DistributedDataParallel(
                self.module, device_ids=[device.index] if device.type == "cuda" else None)
        self.total = tc.max_steps
        self._pending: tuple[int, Any] | None = None
        self._prefetcher = None
        if tc.prefetch:
            from concurrent.futures import ThreadPoolExecutor

            self._prefetcher = ThreadPoolExecutor(1, thread_name_prefix="kicktrain-prefetch")
        self.stop_reason: str | None = None
        self.smoothed: float | None = None
        self.metrics_path = run_dir / "metrics.jsonl"
        if self.resumed_from is not None and self.is_main:
            self._trim_metrics(self.resumed_from)
        self.tb = None
        if opts.tensorboard and self.is_main:
            try:
                from torch.utils.tensorboard import SummaryWriter

                self.tb = SummaryWriter(str(run_dir / "tb"))
            except ImportError:  # tensorboard missing: keep training, say so once
                log("tensorboard not installed: no TensorBoard logs")
        self._last_log = (time.time(), self.step)
        # the budget before the validation: a run stopped by its budget is judged at the step it stops on
        self.hooks: list[Hook] = [log_hook, budget_hook, validate_hook, sample_hook, checkpoint_hook]

    def _resume(self, state: dict[str, Any], path: Path) -> None:
        self.module.load_state_dict(state["model"])
        self.ema.load_state_dict(state["ema"])
        self.opt.load_state_dict(state["optimizer"])
        self.scaler.load_state_dict(state["scaler"])
        set_rng_state(state["rng"])
        self.step = int(state["step"])
        self.best_val = float(state.get("best_val", float("inf")))
        self.bad_rounds = int(state.get("bad_rounds", 0))
        if state.get("best_ema") is not None:
            self.best_step, self.best_ema = int(state["best_step"]), state["best_ema"]
        self.quantiles = state.get("control_quantiles", self.quantiles)
        self.base_lr = float(state.get("base_lr", self.base_lr))  # a fine-tune keeps its own rate without --init
        self.init_from = state.get("init_from")
        self.train_seconds = float(state.get("train_seconds", 0.0))
        self.resumed_from = self.step
        saved_world = int(state.get("world_size", 1))
        if saved_world != self.dist.world:
            self.log(f"resuming with world size {self.dist.world} (checkpointed with {saved_world}): the effective "
                     f"batch stays {self.cfg.train.batch_size}, per-rank batch {self.per_rank}; each process draws "
                     "its own augmentation and noise, so the steps from here differ from a run that kept "
                     f"{saved_world} process(es)")
        self.log(f"resumed from step {self.step} ({path.name})"
                 + (f", fine-tuning from {self.init_from}" if self.init_from else ""))

    def _trim_metrics(self, step: int) -> None:
        """Lines logged after the checkpoint a resume starts from are dropped (they are logged again)."""
        if not self.metrics_path.is_file():
            return
        kept = []
        for line in self.metrics_path.read_text().splitlines():
            try:
                if int(safejson.parse(line, max_bytes=1 << 16).get("step", 0)) <= step:
                    kept.append(line)
            except (ValueError, AttributeError, TypeError):
                continue
        atomic_write_bytes(self.metrics_path, "".join(k + "\n" for k in kept).encode())

    # ------------------------------------------------------------------ one step
    def conditioning(self, x: torch.Tensor, g: torch.Generator) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """Measured controls of clean clips x [B, L] as 0..1 values and a presence mask, some dropped."""
        if not self.controls:
            return None, None
        cc = self.cfg.conditioning
        raw = measure(x, self.cfg.data.sample_rate)[:, self.ctrl_cols]  # on x's device
        c = to_dial(raw, self.quantiles)
        # the drops: drawn from the CPU generator, as on every device, then moved
        mask = (torch.rand(c.shape, generator=g) > cc.drop_each).float()
        drop_all = torch.rand(c.shape[0], generator=g) < cc.drop_all
        mask[drop_all] = 0.0
        return c.to(self.device), mask.to(self.device, non_blocking=True)

    @contextmanager
    def _phase(self, name: str):
        """A phase of a step as a profiler range. While profiling (`_phase_sync` set) the device is waited for at its
        start and end, so on a GPU the range holds the phase's work, not only its launches; never otherwise."""
        sync = self._phase_sync
        if sync is None:
            with record_function(name):
                yield
            return
        sync()
        with record_function(name):
            yield
            sync()

    def _clips(self, idx: np.ndarray) -> torch.Tensor:
        """Clips idx [B, L] on the training device: indexed there when the clips live there (place_clips), else
        indexed in RAM and moved (pinned first on a GPU with train.pin_memory)."""
        at = torch.from_numpy(idx)
        if self.audio.device.type != "cpu" or self.device.type == "cpu":  # (a "cuda" device holds them as "cuda:0")
            return self.audio[at.to(self.audio.device, non_blocking=True)]
        x = self.audio[at]
        if self.device.type == "cuda" and self.cfg.train.pin_memory:
            x = x.pin_memory()
        return x.to(self.device, non_blocking=True)

    def train_step(self) -> dict[str, Any]:
        """One optimiser step over batch_size augmented clips (n_micro micro-batches, accumulated)."""
        t0 = time.perf_counter()
        metrics = self._step()
        self.train_seconds += time.perf_counter() - t0
        return metrics

    def _prepare(self, step: int) -> tuple[list[tuple[Any, Any, Any]], torch.Generator]:
        """Step `step`'s micro-batches, ready for the loss: clips chosen, augmented, their controls measured (and
        some dropped), moved to the device and prepared by the objective (no gradient). Everything here is
        drawn from generators seeded by (seed, step, rank), so it can run ahead on another thread and a
        resumed run still repeats it exactly. Returns the batches and the step's noise generator, advanced
        past the control drops, for the loss's draws."""
        tc = self.cfg.train
        stream = 1000 * self.dist.rank  # each process its own randomness; rank 0's is a single process's
        g_aug = step_generator(tc.seed, step, 1 + stream)
        g_noise = step_generator(tc.seed, step, 2 + stream)
        out = []
        with torch.no_grad():
            with self._phase("data"):
                flat = batch_indices(self.train_idx, tc.seed, step, tc.batch_size, 1, self.train_groups)[0]
                micro_batches = self.dist.shard(flat, self.micro)
            for idx in micro_batches:
                with self._phase("data"):
                    x = self._clips(idx)  # on the device from here on
                with self._phase("augment"):
                    x = self.augmenter(x, g_aug)
                with self._phase("conditioning"):
                    c, m = self.conditioning(x, g_noise)
                with self._phase("prepare"):
                    out.append((self.objective.prepare_batch(x), c, m))
        return out, g_noise

    def _batches(self, step: int) -> tuple[list[tuple[Any, Any, Any]], torch.Generator]:
        """This step's prepared batches (from the prefetch thread when it ran ahead), and start the next step's."""
        pending, self._pending = self._pending, None
        if pending is not None and pending[0] == step:
            with record_function("wait for data"):
                batches = pending[1].result()
        else:
            batches = self._prepare(step)
        if self._prefetcher is not None and step + 1 < self.total:
            self._pending = (step + 1, self._prefetcher.submit(self._prepare, step + 1))
        return batches

    def _step(self) -> dict[str, Any]:
        tc = self.cfg.train
        self.module.train()
        lr = lr_at(self.step, self.base_lr, tc.warmup_steps)
        for group in self.opt.param_groups:
            group["lr"] = lr
        losses: list[torch.Tensor] = []
        figures_each: list[dict[str, Any]] = []
        micro_batches, g_noise = self._batches(self.step)
        for i, (x, c, m) in enumerate(micro_batches):
            amp = torch.autocast(self.device.type, dtype=self.amp_dtype) if self.amp_dtype else nullcontext()
            # gradients are all-reduced once per step: on the last micro-batch
            sync = self.ddp_module.no_sync() if self.dist.enabled and i < len(micro_batches) - 1 else nullcontext()
            with sync:
                with self._phase("forward"), amp:
                    loss, figures = self.objective.loss(self.ddp_module, x, c, m, g_noise, self.step)
                with self._phase("backward"):
                    self.scaler.scale(loss / self.n_micro).backward()
            losses.append(loss.detach())  # read back with the step's others, not one wait per micro-batch
            figures_each.append(figures)
        loss_sum, extra = self._read_back(losses, figures_each)
        if not math.isfinite(loss_sum) and not self.use_scaler:  # fp16's scaler skips such steps itself
            raise TrainingError(f"loss became {loss_sum} at step {self.step}; lower the learning rate or "
                                "turn mixed precision off")
        with self._phase("optimizer"):
            self.scaler.unscale_(self.opt)
            for group in self.objective.clip_groups():
                torch.nn.utils.clip_grad_norm_(group, tc.grad_clip)
            self.scaler.step(self.opt)
            self.scaler.update()
            self.opt.zero_grad(set_to_none=True)
        with self._phase("ema"):
            self.ema.update(self.module)
        self.step += 1
        self.smoothed = loss_sum if self.smoothed is None else 0.95 * self.smoothed + 0.05 * loss_sum
        return {"loss": loss_sum, "lr": lr, **extra}

    def _read_back(self, losses: list[torch.Tensor], figures_each: list[dict[str, Any]]
                   ) -> tuple[float, dict[str, float]]:
        """A step's micro-batch losses and figures (tensors on the device, or numbers) as their means over the
        micro-batches, read back in one transfer (one wait for the device a step), then summed in the order and
        with the arithmetic of reading each on its own, so a CPU run logs what it logged."""
        tensors = losses + [v for f in figures_each for v in f.values() if isinstance(v, torch.Tensor)]
        wide = torch.float32 if self.device.type == "mps" else torch.float64  # exact for every float dtype
        values = iter(torch.stack([t.detach().reshape(()).to(self.device, wide) for t in tensors]).tolist())
        loss_sum = 0.0
        for _ in losses:
            loss_sum += next(values) / self.n_micro
        extra: dict[str, float] = {}
        for figures in figures_each:
            for k, v in figures.items():
                v = next(values) if isinstance(v, torch.Tensor) else float(v)
                extra[k] = extra.get(k, 0.0) + v / self.n_micro
        return loss_sum, extra

    # ------------------------------------------------------------------ what hooks call
    @torch.no_grad()
    def validate(self) -> dict[str, float] | None:
        """The EMA weights' validation figures: the objective's on the held-out clips (none without any), and those
        train.select_by chooses the exported step by (trainer/selection.py; the dials need no held-out clip). The
        dials' kicks are drawn from seeds of their own, the RNG state kept around them: a run validated or not
        trains the same steps."""
        figures: dict[str, float] | None = None
        if len(self.val_idx):
            g = torch.Generator().manual_seed(12345)
            x = self.audio[torch.from_numpy(self.val_idx)]
            c, m = self.conditioning(x, g)
            figures = self.objective.val_loss(self.ema.model, self.objective.prepare_batch(x.to(self.device)), c, m, g)
        if self.cfg.train.select_by != "loss":
            kept = rng_state()
            try:
                figures = (figures or {}) | selection.select_figures(self.cfg.train, self.preview_generator())
            finally:
                set_rng_state(kept)
        return figures

    def training_summary(self) -> dict[str, Any]:
        """What the run learned from and what it cost, for the artifact: counts, and the split's files by name and
        content hash; no folder (an artifact travels, the folders it was made from do not)."""
        data = self.data
        summary = {"family": self.cfg.family, "clips": len(data), "train_clips": len(self.train_idx),
                   "val_clips": len(self.val_idx), "skipped": len(data.skipped),
                   "preset": self.cfg.preset, "steps": self.step,
                   selection.summary_key(self.cfg.train): _finite_or_none(self.best_val),
                   "train_seconds": round(self.train_seconds, 1), "device": str(self.device),
                   "threads": torch.get_num_threads(), "peak_memory_mb": round(peak_memory_mb(self.device), 1),
                   "world_size": self.dist.world,
                   "samples_per_s": round(self.step * self.cfg.train.batch_size / self.train_seconds, 2)
                   if self.train_seconds > 0 else None}
        describe = getattr(data, "describe_split", None)
        if describe is not None:
            summary["split"] = describe(self.train_idx, self.val_idx)
        return summary

    def training_state(self) -> dict[str, Any]:
        return {"model": self.module.state_dict(), "ema": self.ema.state_dict(), "optimizer": self.opt.state_dict(),
                "scaler": self.scaler.state_dict(), "rng": rng_state(), "config": self.cfg.to_dict(),
                "best_val": self.best_val, "bad_rounds": self.bad_rounds, "control_quantiles": self.quantiles,
                "best_step": self.best_step, "best_ema": self.best_ema,
                "data_position": {"step": self.step, "clips_seen": self.step * self.cfg.train.batch_size},
                "base_lr": self.base_lr, "init_from": self.init_from, "training_summary": self.training_summary(),
                "code_version": __version__, "train_seconds": self.train_seconds, "world_size": self.dist.world,
                **self.objective.state_for_checkpoint()}

    def artifact(self, name: str, training: dict[str, Any] | None = None, *, best: bool = False) -> Artifact:
        """The EMA weights as an artifact in memory (export and preview both start here); best: those of the step
        with the best validation figure so far (best_step: the loss's, or the dials', train.select_by), where there
        was a validation."""
        if best and self.best_ema is not None:
            return artifact_from_state(self.objective, self.cfg, self.best_ema, name=name, step=int(self.best_step),
                                       control_quantiles=self.quantiles, training=training)
        return artifact_from_state(self.objective, self.cfg, self.ema.model.state_dict(), name=name, step=self.step,
                                   control_quantiles=self.quantiles, training=training)

    def export(self, path: Path, *, with_map: bool = False) -> Path:
        """The best EMA weights by validation (best_step, by the figure train.select_by names; the current ones without
        a validation) as a served artifact at path (atomic), its training summary saying which step (`exported_step`)
        and why; with_map: holding the map of its training kicks (kickmodel.kitmap, the map the daemon's /kick/map and
        /kick/near serve) where its family can encode."""
        best = self.best_ema is not None and self.best_step != self.step
        training = self.training_summary()
        training["exported_step"] = int(self.best_step) if best else self.step
        training["exported_because"] = selection.exported_because(self.cfg.train, self.best_ema is not None)
        art = self.artifact(Path(path).name.removesuffix(".safetensors"), training, best=best)
        if with_map:
            self.attach_kit_map(art)
        out = art.save(path)
        self.log(f"exported {out.name}: step {training['exported_step']}'s weights ("
                 + (f"the best {selection.words(self.cfg.train)}, {self.best_val:.4f}; now step {self.step})" if best
                    else training["exported_because"] + ")"))
        return out

    def attach_kit_map(self, art: Artifact) -> None:
        """art.kit_map from the run's training clips, already in memory (the folders they came from may have moved
        since), or one line saying why it has none (a family without an encoder, anything that fails: the export
        goes on without a map, and `kicktrain map --into` can add one later). Costs an encode and a t-SNE of at most
        AUTO_MAP_KICKS kicks: seconds for the VAE families; for kick-synth a fit of each kick (about a second a kick),
        made at the first export and remembered (Objective.map_encoder), so every export carries a map."""
        from .latent_map import MapError, attach_map

        t0 = time.perf_counter()
        idx = np.asarray(self.train_idx)
        try:
            clips = self.audio[torch.from_numpy(idx).to(self.audio.device)].cpu().numpy()
            sources = [str(self.data.manifest[int(i)]["source"]) for i in idx]
            attach_map(art, clips=clips, sources=sources, limit=AUTO_MAP_KICKS, log=self.log,
                       encode=self.objective.map_encoder())
        except MapError as e:
            if not self._no_map_said:
                self._no_map_said = True
                self.log(f"the exports carry no kit map: {e}")
            return
        except Exception as e:  # noqa: BLE001 -- a map is a bonus: the trained model is exported without one
            self.log(f"the export carries no kit map ({type(e).__name__}: {e}); add one with `kicktrain map MODEL "
                     "KIT --into MODEL`")
            return
        self.log(f"kit map of {art.kit_map.n} kicks made in {time.perf_counter() - t0:.1f} s")

    def checkpoint(self) -> None:
        """Rank 0 saves (and exports); every rank then checks that all hold the same weights, and waits."""
        if self.is_main:
            path = save_checkpoint(self.run_dir, self.training_state(), self.step,
                                   keep=self.cfg.train.keep_checkpoints)
            if self.opts.export_dir is not None:
                name = self.opts.export_name or self.run_dir.name
                folder = Path(self.opts.export_dir)
                folder.mkdir(parents=True, exist_ok=True)
                clean_stale_temp_files(folder, prefix=f".{name}.safetensors.")
                # every export carries its kit's map (the daemon serves each one live: without it the pad is grey)
                self.export(folder / f"{name}.safetensors", with_map=True)
                if not self._export_noted:
                    self._export_noted = True
                    self.log(f"exported {name} to {folder}: a kickserver serving from this folder without --model "
                             f"switches to it (and to each later export); pin with --model NAME (e.g. --model "
                             f"default, the bundled model) to keep the one you have")
            self.log(f"checkpoint {path.name}")
        if self.dist.enabled:
            hashes = self.dist.weight_hashes(self.module)
            if len(set(hashes)) != 1:
                raise TrainingError(f"step {self.step}: the {self.dist.world} processes hold different weights")
            self.log(f"step {self.step}: weights identical on {self.dist.world} processes (sha256 {hashes[0][:16]})")
            self.dist.barrier()

    def preview_generator(self) -> Any:
        """A generator of the current EMA weights, without writing an artifact."""
        return get_family(self.cfg.family).load_generator(self.artifact(f"step-{self.step:08d}"), self.device)

    def close_prefetch(self) -> None:
        if self._prefetcher is not None:
            self._prefetcher.shutdown(wait=True, cancel_futures=True)
            self._prefetcher, self._pending = None, None

    def write_metrics(self, record: dict[str, Any]) -> None:
        if self.is_main:
            with open(self.metrics_path, "a") as f:
                f.write(json.dumps(record, allow_nan=False) + "\n")

    # ------------------------------------------------------------------ the loop
    def run(self) -> dict[str, Any]:
        if self.step >= self.total:
            self.log(f"nothing to do: step {self.step} >= max_steps {self.total}")
        self.progress = None
        if self.opts.progress and self.is_main:
            from tqdm import tqdm

            self.progress = tqdm(total=self.total, initial=self.step, unit="step", dynamic_ncols=True,
                                 mininterval=2.0)
        t_start = time.time()
        with _StopFlag() as stop:
            while self.step < self.total:
                metrics = self.train_step()
                if self.dist.any(stop.signal is not None):  # every process stops at the same step
                    name = signal.Signals(stop.signal).name if stop.signal is not None else "on another process"
                    self.stop_reason = f"signal {name}"
                for hook in self.hooks:
                    hook(self, metrics)
                if self.stop_reason is not None:
                    break
        self.close_prefetch()
        if self.progress is not None:
            self.progress.close()
        if self.resumed_from is None and self.step == 0:
            self.checkpoint()
        if self.tb is not None:
            self.tb.close()
        wall = time.time() - t_start
        reason = self.stop_reason or "max_steps"
        self.log(f"stopped at step {self.step} ({reason}); {wall:.0f} s this session")
        return {"step": self.step, "stop_reason": reason, "loss": self.smoothed,
                selection.summary_key(self.cfg.train): _finite_or_none(self.best_val), "best_step": self.best_step,
                "seconds": wall,
                "resumed_from": self.resumed_from, "config": self.cfg.to_dict()}


# ---------------------------------------------------------------------- the hooks


def _due(tr: Trainer, every: int) -> bool:
    return bool(every) and tr.step % every == 0


def log_hook(tr: Trainer, metrics: dict) -> None:
    tc = tr.cfg.train
    if tr.progress is not None:
        tr.progress.update(1)
    if not (_due(tr, tc.log_every) or tr.step == tr.total):
        return
    now = time.time()
    t0, s0 = tr._last_log
    sps = (tr.step - s0) * tc.batch_size / max(now - t0, 1e-9)
    tr._last_log = (now, tr.step)
    if tr.progress is not None:
        tr.progress.set_postfix(loss=f"{tr.smoothed:.4f}", samples_s=f"{sps:.1f}")
    extra = {k: v for k, v in metrics.items() if k not in ("loss", "lr")}
    tr.write_metrics({"step": tr.step, "loss": tr.smoothed, "lr": metrics["lr"], "samples_per_s": sps, **extra})
    if tr.tb is not None:
        tr.tb.add_scalar("train/loss", tr.smoothed, tr.step)
        tr.tb.add_scalar("train/lr", metrics["lr"], tr.step)
        tr.tb.add_scalar("train/samples_per_s", sps, tr.step)
        for k, v in extra.items():
            tr.tb.add_scalar(f"train/{k}", v, tr.step)


def validate_hook(tr: Trainer, metrics: dict) -> None:
    """Every train.val_every steps, and at the last step of a run that ends by its length or its time budget (so its
    last steps can be exported: a kick-synth run stopped by --minutes 118 steps after a check lost them); not when
    a signal stops it (Ctrl-C stops at once; the checkpoint keeps the steps, and a resumed run goes on from them)."""
    tc = tr.cfg.train
    ending = tr.step == tr.total or (tr.stop_reason is not None and not tr.stop_reason.startswith("signal"))
    if not (_due(tr, tc.val_every) or (tc.val_every and ending)):
        return
    figures = tr.validate()
    if figures is None:
        return
    v = selection.figure(tc, figures)
    what = selection.words(tc)
    tr.write_metrics({"step": tr.step, **{f"val_{k}": x for k, x in figures.items()}})
    if tr.tb is not None:
        for k, x in figures.items():
            if isinstance(x, (list, tuple)):  # e.g. the VAE's KL per latent dimension
                tr.tb.add_histogram(f"val/{k}", torch.tensor(x, dtype=torch.float32), tr.step)
            else:
                tr.tb.add_scalar(f"val/{k}", x, tr.step)
    if v < tr.best_val - 1e-4:
        tr.best_val, tr.bad_rounds, tr.best_step = v, 0, tr.step
        tr.best_ema = {k: t.detach().clone() for k, t in tr.ema.model.state_dict().items()}
    else:
        tr.bad_rounds += 1
    dials = "".join(f", {k[len('dial_r_'):]} r {x:.2f}" for k, x in figures.items() if k.startswith("dial_r_"))
    loss = f" (validation loss {figures['loss']:.4f})" if tc.select_by != "loss" and "loss" in figures else ""
    tr.log(f"step {tr.step}: {what} {v:.4f}{dials} (best {tr.best_val:.4f} at step {tr.best_step}){loss}")
    if tr.bad_rounds and tr.bad_rounds % RISEN_CHECKS == 0 and v > tr.best_val:
        why = ("its dials follow less well than they did" if tc.select_by == "dials"
               else "the model is learning its training kicks rather than kicks like them")
        tr.log(f"validation has risen: {tr.bad_rounds} checks without a new best {what} ({tr.best_val:.4f} at step "
               f"{tr.best_step}, {v:.4f} now): {why}; "
               f"exports keep step {tr.best_step}'s weights. Stop it (Ctrl-C) or let --set "
               "train.early_stop_patience=N stop it")
    # every process stops together (a rank's figures may differ in their last bits on a GPU)
    if tc.early_stop_patience and tr.dist.any(tr.bad_rounds >= tc.early_stop_patience):
        tr.stop_reason = "early_stop"


def sample_hook(tr: Trainer, metrics: dict) -> None:
    if tr.is_main and _due(tr, tr.cfg.train.sample_every):
        real = tr.audio[torch.from_numpy(tr.val_idx[:4])] if len(tr.val_idx) else tr.audio[:4]
        write_samples(tr, real)


def budget_hook(tr: Trainer, metrics: dict) -> None:
    """--minutes: once the budget has passed since the run started (set-up included), stop here (the checkpoint hook
    then saves and exports, as on SIGTERM)."""
    minutes = tr.opts.minutes
    if minutes is None or tr.stop_reason is not None:
        return
    if tr.dist.any(CLOCK() - tr._t0 >= 60.0 * minutes):  # under torchrun every process stops at the same step
        tr.stop_reason = f"time budget of {minutes:g} min"


def checkpoint_hook(tr: Trainer, metrics: dict) -> None:
    if _due(tr, tr.cfg.train.ckpt_every) or tr.step == tr.total or tr.stop_reason is not None:
        tr.checkpoint()


def fit(opts: FitOptions, log: Log = print) -> dict[str, Any]:
    """Train (or resume) a run. Returns a summary dict (steps, losses, timing, stop reason)."""
    dist = Dist.from_env()
    try:
        tr = Trainer(opts, log)
        try:
            return tr.run()
        finally:
            tr.close_prefetch()
    finally:
        dist.close()


def write_samples(tr: Trainer, real: torch.Tensor, n: int = 4) -> list[Path]:
    """Generate n kicks with the EMA weights into RUN/samples/ (WAV + spectrogram PNG beside real kicks)."""
    from kickmodel.generator import Item
    from kickmodel.wavfile import encode_wav

    from .plots import spectrogram_grid

    folder = tr.run_dir / "samples"
    folder.mkdir(parents=True, exist_ok=True)
    sr, step = tr.cfg.data.sample_rate, tr.step
    gen = tr.preview_generator()
    clips = gen.generate([Item(seed=i) for i in range(n)], gen.settings())
    paths = []
    for i, clip in enumerate(clips):
        p = folder / f"step-{step:08d}-{i}.wav"
        atomic_write_bytes(p, encode_wav(clip, sr))
        paths.append(p)
    png = folder / f"step-{step:08d}.png"
    spectrogram_grid([("generated", clips), ("real", real.cpu().numpy())], sr, png, title=f"step {step}")
    if tr.tb is not None:
        for i, clip in enumerate(clips[:2]):
            tr.tb.add_audio(f"samples/{i}", torch.from_numpy(clip)[None], step, sample_rate=sr)
        import matplotlib.image as mpimg

        tr.tb.add_image("samples/spectrograms", mpimg.imread(png)[..., :3], step, dataformats="HWC")
    return paths
