"""Every GPU measurement in one call of at most 8 minutes, for the day a GPU is lent.

    python -m bench.gpu [--budget-s 480] [--out bench/results]      # refuses (exit 2) without a CUDA GPU

Writes bench/results/gpu-<date>.json and gpu-latest.json (`python -m bench.report` shows the latest), in
sections, each as long as the budget allows (a section that no longer fits is marked skipped):

1. train: per family and preset, samples/s and peak VRAM (torch.cuda.max_memory_allocated, reset per
   job, in this one process) of the optimised loop at the preset's precision (auto: bf16 where
   supported), the same loop in fp32 and in fp16, and the naive loop (fp32, one micro-batch, no
   checkpointing): bench/train_speed.measure. Verdicts: every preset's optimised loop within the 6 GB
   design point, `base` within 2 GiB, and the optimised loop >= 2x the naive one's samples/s at less
   peak memory (issue 2's targets).
2. sampling: the bundled model and a random `small` model of each other family, eager, at the default
   steps, batch 1 and 8: latency, real-time factor and peak VRAM (bench/sampling.time_render); then
   the bundled model with its modules under torch.compile ("default") and with CUDA graphs
   ("reduce-overhead"), after a warm-up that compiles. A mode that fails is a row with its error.
3. loop: the real training loop (`trainer.train.fit` on the starter kit, augmentation and
   conditioning included) for LOOP_STEPS steps of each family's `small` preset: samples/s on one GPU.

The logic runs on a CPU too (tests/bench/test_gpu.py calls the sections with device "cpu" and tiny
sizes); only `main` insists on a GPU.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench import common

BUDGET_S = 480
DESIGN_POINT_GB = 6.0
BASE_TARGET_GIB = 2.0
SPEEDUP_TARGET = 2.0
MODES = (("optimised", None), ("optimised", "off"), ("optimised", "fp16"), ("naive", None))
TRAIN_STEPS = 5
SAMPLING_REPS = 5
LOOP_STEPS = 40
COMPILE_MODES = ("default", "reduce-overhead")


class Deadline:
    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        return self.end - time.monotonic()


def _free(device) -> None:
    import torch

    gc.collect()
    if str(device).startswith("cuda"):
        torch.cuda.empty_cache()


def train_section(device: str, families, presets, modes=MODES, steps: int = TRAIN_STEPS,
                  deadline: Deadline | None = None, reserve_s: float = 0.0) -> list[dict]:
    """Rows of bench/train_speed.measure for each family, preset and (mode, precision override)."""
    from bench.train_speed import measure

    rows = []
    for fam in families:
        for p in presets:
            for mode, prec in modes:
                label = mode if prec is None else f"{mode}-{'fp32' if prec == 'off' else prec}"
                if deadline is not None and deadline.left() < reserve_s:
                    rows.append({"family": fam, "preset": p, "mode": label, "skipped": "time budget"})
                    continue
                _free(device)
                try:
                    r = measure(p, mode, steps, device, fam, precision_mode=prec)
                except Exception as e:  # e.g. out of memory: the row says so, the rest still runs
                    r = {"family": fam, "preset": p, "error": f"{type(e).__name__}: {e}"}
                r["mode"] = label
                rows.append(r)
    return rows


def verdicts(rows: list[dict]) -> list[dict]:
    """Per family and preset: the optimised loop's peak VRAM against the design point (and 2 GiB for base),
    and its speed-up and memory against the naive loop."""
    by = {(r["family"], r["preset"], r["mode"]): r for r in rows if "samples_per_s" in r and "peak_gpu_mb" in r}
    out = []
    for (fam, p, mode), o in by.items():
        if mode != "optimised":
            continue
        v = {"family": fam, "preset": p, "peak_gpu_mb": o["peak_gpu_mb"],
             "within_design_point": bool(o["peak_gpu_mb"] <= DESIGN_POINT_GB * 1000),
             "base_within_2gib": bool(o["peak_gpu_mb"] <= BASE_TARGET_GIB * 1024) if p == "base" else None}
        n = by.get((fam, p, "naive"))
        if n is not None:
            v["speedup"] = o["samples_per_s"] / n["samples_per_s"]
            v["memory_ratio"] = o["peak_gpu_mb"] / n["peak_gpu_mb"]
            v["beats_naive"] = bool(v["speedup"] >= SPEEDUP_TARGET and v["memory_ratio"] < 1.0)
        out.append(v)
    return out


def _peak_mb(device) -> float | None:
    import torch

    return torch.cuda.max_memory_allocated(device) / 2**20 if str(device).startswith("cuda") else None


def compile_modules(gen, mode: str) -> list[str]:
    """Wrap the generator's modules in torch.compile(mode=...); the names wrapped. Only their forward is
    compiled: a family that calls another method (mel-vae's vae.decode) runs that part eagerly."""
    import torch

    names = []
    for name, value in list(vars(gen).items()):
        if isinstance(value, torch.nn.Module):
            setattr(gen, name, torch.compile(value, mode=mode, dynamic=False))
            names.append(name)
    return names


def sampling_section(device: str, models: list[Path], compile_model: Path | None, batches=(1, 8),
                     reps: int = SAMPLING_REPS, compile_modes=COMPILE_MODES, deadline: Deadline | None = None,
                     reserve_s: float = 0.0) -> list[dict]:
    import torch

    from bench.sampling import time_render
    from kickmodel.generator import load_generator

    rows = []

    def one(gen, label: str, how: str) -> None:
        steps = gen.default_steps if gen.samplers else None
        for b in batches:
            if deadline is not None and deadline.left() < reserve_s:
                rows.append({"model": label, "how": how, "batch": b, "skipped": "time budget"})
                continue
            try:
                t_warm = time.perf_counter()
                time_render(gen, b, steps, None, 2)  # warm-up: compiles, captures graphs
                warm = time.perf_counter() - t_warm
                if str(device).startswith("cuda"):
                    torch.cuda.reset_peak_memory_stats(device)
                times = time_render(gen, b, steps, None, reps)
            except Exception as e:
                rows.append({"model": label, "how": how, "batch": b, "error": f"{type(e).__name__}: {e}"})
                continue
            med = statistics.median(times)
            rows.append({"model": label, "family": gen.family, "how": how, "steps": steps, "batch": b,
                         "median_s": med, "realtime_factor": b * gen.length / gen.sample_rate / med,
                         "warmup_s": warm, "peak_gpu_mb": _peak_mb(device)})

    for path in models:
        _free(device)
        gen = load_generator(path, device)
        one(gen, common.model_label(gen), "eager")
    if compile_model is not None:
        for mode in compile_modes:
            _free(device)
            torch.compiler.reset()
            gen = load_generator(compile_model, device)
            label = common.model_label(gen)
            try:
                wrapped = compile_modules(gen, mode)
            except Exception as e:
                rows.append({"model": label, "how": f"compile {mode}", "error": f"{type(e).__name__}: {e}"})
                continue
            one(gen, label, f"compile {mode} ({', '.join(wrapped)})")
    return rows


def loop_section(device: str, families, preset_name: str, steps: int, data: list[Path], work: Path,
                 deadline: Deadline | None = None, reserve_s: float = 0.0) -> list[dict]:
    """samples/s of the real training loop (trainer.train.fit) for `steps` steps per family."""
    from kickmodel.families import preset
    from trainer.train import FitOptions, fit

    rows = []
    for fam in families:
        if deadline is not None and deadline.left() < reserve_s:
            rows.append({"family": fam, "preset": preset_name, "skipped": "time budget"})
            continue
        _free(device)
        cfg = preset(preset_name, fam)
        cfg = cfg.replace("train", max_steps=steps, val_every=0, sample_every=0, ckpt_every=10**9, log_every=10**9)
        options = common.family_options(cfg.family, {}, work, preset_name)  # e.g. a random VAE to train over
        opts = FitOptions(data=[str(d) for d in data], run_dir=work / f"run-{fam}", cfg=cfg, device=device,
                          progress=False, tensorboard=False, family_options=options, cache_dir=work / "cache")
        try:
            summary = fit(opts, log=lambda m: None)
        except Exception as e:
            rows.append({"family": fam, "preset": preset_name, "error": f"{type(e).__name__}: {e}"})
            continue
        rows.append({"family": fam, "preset": preset_name, "steps": summary["step"], "seconds": summary["seconds"],
                     "batch": cfg.train.batch_size,
                     "samples_per_s": summary["step"] * cfg.train.batch_size / summary["seconds"]})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.gpu", description=__doc__.split("\n\n")[0])
    ap.add_argument("--budget-s", type=float, default=BUDGET_S, help="seconds for everything (default 480)")
    ap.add_argument("--device", default="cuda", help="a CUDA device (default cuda)")
    ap.add_argument("--out", type=Path, default=common.RESULTS)
    args = ap.parse_args(argv)
    import torch

    if not torch.cuda.is_available() or not args.device.startswith("cuda"):
        print(f"bench/gpu.py: no CUDA GPU here (torch {torch.__version__}, CUDA build "
              f"{torch.version.cuda or 'none'}); it measures GPUs only: run it on a machine with an NVIDIA GPU, "
              "or `python -m bench` for the CPU figures", file=sys.stderr)
        return 2
    from kickmodel.families import family_names
    from kickmodel.generator import resolve_device

    try:
        device = str(resolve_device(args.device))
    except RuntimeError as e:
        print(f"bench/gpu.py: {e}", file=sys.stderr)
        return 2
    t0 = time.monotonic()
    deadline = Deadline(args.budget_s)
    fams = family_names()
    payload: dict = {"suite": common.SCHEMA, "benchmark": "gpu", "date": common.now(),
                     "machine": common.machine(device), "budget_s": args.budget_s}
    with tempfile.TemporaryDirectory(prefix="kickbench-gpu-") as tmp:
        work = Path(tmp)
        print("== train: samples/s and peak VRAM per family, preset and precision", flush=True)
        payload["train"] = train_section(device, fams, ("tiny", "small", "base"), deadline=deadline,
                                         reserve_s=0.55 * args.budget_s)
        payload["verdicts"] = verdicts(payload["train"])
        print(common.table(payload["train"], [("family", "family", ""), ("preset", "preset", ""),
                                              ("mode", "mode", ""), ("precision", "precision", ""),
                                              ("samples_per_s", "samples/s", ".1f"),
                                              ("peak_gpu_mb", "peak MB", ".0f"), ("error", "error", "")]), flush=True)
        print("== sampling: eager, torch.compile, CUDA graphs", flush=True)
        models = [common.BUNDLED] + [common.random_artifact(work / f"{f}.safetensors", f, "small")
                                     for f in fams if f != "waveform_diffusion"]
        payload["sampling"] = sampling_section(device, models, common.BUNDLED, deadline=deadline,
                                               reserve_s=0.2 * args.budget_s)
        print(common.table(payload["sampling"], [("model", "model", ""), ("how", "how", ""), ("batch", "batch", "d"),
                                                 ("median_s", "median s", ".4f"), ("warmup_s", "warm-up s", ".1f"),
                                                 ("peak_gpu_mb", "peak MB", ".0f"), ("error", "error", "")]),
              flush=True)
        print("== loop: the real training loop on one GPU", flush=True)
        payload["loop"] = loop_section(device, fams, "small", LOOP_STEPS, [common.STARTER_KIT], work,
                                       deadline=deadline, reserve_s=30.0)
        print(common.table(payload["loop"], [("family", "family", ""), ("steps", "steps", "d"),
                                             ("samples_per_s", "samples/s", ".1f"), ("error", "error", "")]))
    payload["seconds"] = round(time.monotonic() - t0, 1)
    stamp = payload["date"][:19].replace(":", "").replace("-", "")  # e.g. 20261204T101500
    for tag in (stamp, "latest"):  # gpu-<stamp>.json keeps every run; gpu-latest.json is the one to show
        path = common.write_result(args.out, "gpu", tag, payload)
        print(f"wrote {path}")
    print(f"{payload['seconds']:.0f} s in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
