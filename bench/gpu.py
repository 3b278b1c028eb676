"""Every GPU target measured in one call of at most 8 minutes, for the day a GPU is lent.

    python -m bench.gpu [--budget-s 480] [--out bench/results]      # refuses (exit 2) without a CUDA GPU

Writes OUT/gpu-<date>.json and gpu-latest.json (OUT: --out, default ~/.cache/kickserver/bench; `python -m
bench.report` shows the latest), in
sections, each as long as the budget allows (a section that no longer fits is marked skipped), then a table of
every target with its figure and verdict (`targets`):

0. batch (first: seconds): bench/batch_bits on the GPU: each shipped model's seed alone against the same seed at
   every position of batches of 2, 4 and 8 for a fresh kick, a variation, a morph's kick and a kick from the map
   (target: identical, bit for bit), and the render of eight kicks against one (target: eight <= 2x one).
1. loop: the real training loop (`trainer.train.fit` on the starter kit: augmentation, conditioning and the
   VAE's encoding included) for LOOP_STEPS steps of each family's `small` preset and latent diffusion's `base`,
   beside its network alone at the loop it chose (bench/train_speed.measure): the ratio (target >= 0.70) and
   the real loop's peak VRAM (latent diffusion: <= 6 GB at small, <= 2 GiB at base).
2. daemon: the bundled model served by `kickserver serve --device cuda` with `--render-capture off` and with the
   default (`auto`: CUDA graphs), one after the other in this run: /kick/generate -> /kick/done of the renamed
   file (bench/latency.measure), one and eight kicks, median and p95, and the memory the daemon reports in
   /kick/status. Targets: one kick <= 15 ms median, eight <= 25 ms, resident VRAM <= 1 GB (allocator reserve).
3. custom: bench/custom on the GPU: 20 of the starter kit's kicks -> a fine-tune of the bundled model served by a
   running daemon (CUSTOM_TRAIN_S of training); target <= 2 minutes from `kicktrain fit` to the first kick.
4. plan: per family, the loop trainer.loop_plan chooses with no budget, 2 GB and 0.5 GB, and its samples/s
   beside the naive loop's (fp32, one micro-batch, no checkpointing): the default at least as fast as naive.
5. sampling (last: what time is left): render alone (no daemon): the bundled model and a random `small` model of
   each other family eager at their default steps, batch 1 and 8; then the bundled model under kickmodel.capture's
   "compile" and "graphs", as the daemon applies them (warm-up at load timed; a mode that falls back is a row
   with why).

Each section starts only while enough of the budget is left for those after it (a row that does not is marked
skipped); a section can overrun a little (a compile takes what it takes), so the budget is a target, not a kill.

The logic runs on a CPU too (tests/bench/test_bench_logic.py calls the sections with device "cpu" and tiny
sizes); only `main` insists on a GPU.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench import common

BUDGET_S = 480
DESIGN_POINT_GB = 6.0
TRAIN_STEPS = 5
SAMPLING_REPS = 5
LOOP_STEPS = 40
CAPTURE_MODES = ("compile", "graphs")  # kickmodel.capture's modes beside eager
DAEMON_CAPTURES = ("off", "auto")  # eager beside what the daemon does by default, in one run
DAEMON_REPS = 30
DAEMON_TARGETS_S = {"cuda": {1: 0.015, 8: 0.025}}  # one kick <= 15 ms median end to end, eight <= 25 ms
RESIDENT_TARGET_MB = 1024.0  # the daemon's resident VRAM <= 1 GB
PLAN_BUDGETS_GB = (None, 2.0, 0.5)  # the default, and two --vram-budget values that should force memory tricks
DEFAULT_VS_NAIVE_TARGET = 0.95  # with room, the default loop at least as fast as the naive one (5 % noise)
LOOP_RATIO_TARGET = 0.70  # the real loop >= 70 % of its network's samples/s on a GPU
LOOP_VRAM_TARGET_MB = {("latent_diffusion", "small"): DESIGN_POINT_GB * 1000, ("latent_diffusion", "base"): 2048.0}
BATCH_RATIO_TARGET = 2.0  # eight kicks within 2x one kick's time on a GPU
CUSTOM_TRAIN_S = 45.0  # training wall time of the custom section (its clock also counts start-up, export, swap)
CUSTOM_TARGET_S = {"cuda": 120.0}  # 20 kicks -> a model served by a running daemon in <= 2 minutes


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


def _peak_mb(device) -> float | None:
    import torch

    return torch.cuda.max_memory_allocated(device) / 2**20 if str(device).startswith("cuda") else None


def sampling_section(device: str, models: list[Path], capture_model: Path | None, batches=(1, 8),
                     reps: int = SAMPLING_REPS, capture_modes=CAPTURE_MODES, deadline: Deadline | None = None,
                     reserve_s: float = 0.0) -> list[dict]:
    """Render alone (no daemon): each model eager at its default steps and batch 1 and 8; then capture_model under
    each of kickmodel.capture's modes as the daemon applies them (its warm-up at load timed, and a mode that falls
    back to eager is a row with the reason)."""
    import torch

    from bench.sampling import time_render
    from kickmodel.capture import capture
    from kickmodel.loading import load_generator

    rows = []

    def one(gen, label: str, how: str, extra: dict) -> None:
        steps = gen.default_steps if gen.samplers else None
        for b in batches:
            if deadline is not None and deadline.left() < reserve_s:
                rows.append({"model": label, "how": how, "batch": b, "skipped": "time budget"})
                continue
            try:
                time_render(gen, b, steps, None, 1)  # warm: a batch size capture did not warm compiles here
                if str(device).startswith("cuda"):
                    torch.cuda.reset_peak_memory_stats(device)
                times = time_render(gen, b, steps, None, reps)
            except Exception as e:
                rows.append({"model": label, "how": how, "batch": b, "error": f"{type(e).__name__}: {e}"})
                continue
            med = statistics.median(times)
            rows.append({"model": label, "family": gen.family, "how": how, "steps": steps, "batch": b,
                         "median_s": med, "realtime_factor": b * gen.length / gen.sample_rate / med,
                         "peak_gpu_mb": _peak_mb(device), **extra})

    for path in models:
        _free(device)
        gen = load_generator(path, device)
        one(gen, common.model_label(gen), "eager", {})
    if capture_model is not None:
        for mode in capture_modes:
            if deadline is not None and deadline.left() < reserve_s:
                rows.append({"model": str(capture_model), "how": mode, "skipped": "time budget"})
                continue
            _free(device)
            torch.compiler.reset()
            gen = load_generator(capture_model, device)
            report = capture(gen, mode, batches=batches)
            extra = {"capture_asked": report.asked, "capture_used": report.used, "warmup_s": report.warmup_s}
            if report.error:
                rows.append({"model": common.model_label(gen), "how": mode, **extra, "error": report.error})
                continue
            one(gen, common.model_label(gen), f"capture {mode} ({', '.join(report.modules)})", extra)
    return rows


def loop_section(device: str, families, preset_name: str, steps: int, data: list[Path], work: Path,
                 deadline: Deadline | None = None, reserve_s: float = 0.0, network_steps: int = 8,
                 budget_gb: float | None = None) -> list[dict]:
    """Per family: samples/s of the real training loop (trainer.train.fit: data, augmentation, conditioning,
    the objective's preparation and all) for `steps` steps, its peak VRAM, and beside it the network alone
    (bench/train_speed.measure: the same batch, micro-batch, precision and checkpointing the loop chose, on a
    fixed batch already on the device): loop_vs_network = the share of the network's speed the loop reaches
    (target: >= LOOP_RATIO_TARGET on a GPU)."""
    from bench.train_speed import measure
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
        run_dir = work / f"run-{fam}-{preset_name}"
        opts = FitOptions(data=[str(d) for d in data], run_dir=run_dir, cfg=cfg, device=device,
                          progress=False, tensorboard=False, family_options=options, cache_dir=work / "cache",
                          vram_budget_gb=budget_gb)
        if str(device).startswith("cuda"):
            import torch

            torch.cuda.reset_peak_memory_stats(device)
        lines: list[str] = []
        try:
            summary = fit(opts, log=lines.append)
        except Exception as e:
            rows.append({"family": fam, "preset": preset_name, "error": f"{type(e).__name__}: {e}"})
            continue
        row = {"family": fam, "preset": preset_name, "steps": summary["step"], "seconds": summary["seconds"],
               "batch": cfg.train.batch_size, "peak_gpu_mb": _peak_mb(device),
               "samples_per_s": summary["step"] * cfg.train.batch_size / summary["seconds"],
               "loop_log": [ln for ln in lines if ln.startswith(("loop:", "model:"))]}
        chosen = json.loads((run_dir / "config.json").read_text())["train"]
        keep = ("micro_batch", "mixed_precision", "grad_checkpointing")
        row.update({k: chosen.get(k) for k in keep})
        _free(device)
        try:
            net = measure(preset_name, "optimised", network_steps, device, fam,
                          train_overrides={k: chosen[k] for k in keep if k in chosen})
            row["network_samples_per_s"] = net["samples_per_s"]
            row["loop_vs_network"] = row["samples_per_s"] / net["samples_per_s"]
            row["met_ratio_target"] = bool(row["loop_vs_network"] >= LOOP_RATIO_TARGET)
        except Exception as e:  # noqa: BLE001 -- the row keeps the loop's figure and says what failed
            row["network_error"] = f"{type(e).__name__}: {e}"
        limit = LOOP_VRAM_TARGET_MB.get((fam, preset_name))
        if limit is not None and row["peak_gpu_mb"] is not None:
            row["vram_target_mb"] = limit
            row["met_vram_target"] = bool(row["peak_gpu_mb"] <= limit)
        rows.append(row)
    return rows


def plan_section(device: str, families, preset_name: str, budgets=PLAN_BUDGETS_GB, steps: int = TRAIN_STEPS,
                 work: Path | None = None, deadline: Deadline | None = None, reserve_s: float = 0.0) -> list[dict]:
    """Per family and budget (GB; None: the default with no --vram-budget): the loop trainer.loop_plan.choose_loop
    picks (micro-batch, precision, checkpointing, its measured one-step peak) and its samples/s beside the naive
    loop's (fp32, one micro-batch, no checkpointing), measured in this run: with no budget the chosen loop should
    be at least as fast as the naive one (default_vs_naive >= 1 within noise)."""
    from bench.train_speed import measure
    from kickmodel.families import preset
    from kickmodel.loading import resolve_device
    from trainer.loop_plan import choose_loop
    from trainer.recipes import get_recipe
    from trainer.recipes.base import FitContext

    dev = resolve_device(device)
    rows = []
    with tempfile.TemporaryDirectory(prefix="kickbench-plan-") as tmp:
        folder = Path(work or tmp)
        for fam in families:
            naive = None
            for budget in budgets:
                if deadline is not None and deadline.left() < reserve_s:
                    rows.append({"family": fam, "preset": preset_name, "budget_gb": budget, "skipped": "time budget"})
                    continue
                _free(device)
                row: dict = {"family": fam, "preset": preset_name, "budget_gb": budget}
                try:
                    if naive is None:
                        naive = measure(preset_name, "naive", steps, device, fam)
                    cfg = preset(preset_name, fam)
                    options = common.family_options(fam, {}, folder, preset_name)
                    ctx = FitContext(device=dev, log=lambda m: None, options=options)
                    cfg = get_recipe(fam).fit_config(cfg, ctx)
                    lines: list[str] = []
                    plan = choose_loop(cfg, dev, budget, ctx, lines.append)
                    _free(device)
                    got = measure(preset_name, "optimised", steps, device, fam,
                                  train_overrides={"micro_batch": plan.micro_batch,
                                                   "grad_checkpointing": plan.grad_checkpointing,
                                                   "mixed_precision": plan.mixed_precision or "auto"})
                except Exception as e:  # noqa: BLE001 -- e.g. no loop fits the budget: the row says so
                    rows.append({**row, "error": f"{type(e).__name__}: {e}"[-400:]})
                    continue
                row.update(micro_batch=plan.micro_batch, precision=plan.precision,
                           checkpointing=plan.grad_checkpointing, planned_peak_mb=plan.peak_mb, reason=plan.reason,
                           samples_per_s=got["samples_per_s"], peak_gpu_mb=got.get("peak_gpu_mb"),
                           naive_samples_per_s=naive["samples_per_s"], naive_peak_gpu_mb=naive.get("peak_gpu_mb"),
                           vs_naive=got["samples_per_s"] / naive["samples_per_s"])
                if budget is None:
                    row["default_at_least_naive"] = bool(row["vs_naive"] >= DEFAULT_VS_NAIVE_TARGET)
                elif row["peak_gpu_mb"] is not None:
                    row["within_budget"] = bool(row["peak_gpu_mb"] <= budget * 1024)
                rows.append(row)
    return rows


def resident_mb(status: list) -> dict:
    """The memory figures in a /kick/status reply's last argument ("cuda:0 allocator reserved 812 MB, peak 640 MB,
    device used 1400 of 143771 MB" or "cpu RSS 950 MB"), with the verdict against RESIDENT_TARGET_MB on CUDA; {}
    when the daemon reports none. The target is judged on the allocator's reserve (what the daemon's tensors and
    graph pools hold); the device's memory in use is kept beside it (device_used_mb: it adds the CUDA context and
    kernels, and counts every process on the device)."""
    import re

    text = str(status[5]) if len(status) > 5 else ""
    out: dict = {}
    for key, pattern in (("reserved_mb", r"reserved ([0-9.]+) MB"), ("peak_mb", r"peak ([0-9.]+) MB"),
                         ("device_used_mb", r"device used ([0-9.]+) of"),
                         ("device_total_mb", r"device used [0-9.]+ of ([0-9.]+) MB"),
                         ("rss_mb", r"RSS ([0-9.]+) MB")):
        m = re.search(pattern, text)
        if m:
            out[key] = float(m.group(1))
    if "reserved_mb" in out:
        out["resident_target_mb"] = RESIDENT_TARGET_MB
        out["met_resident_target"] = bool(out["reserved_mb"] <= RESIDENT_TARGET_MB)
    return out


def daemon_section(device: str, work: Path, captures=DAEMON_CAPTURES, counts=(1, 8), reps: int = DAEMON_REPS,
                   warm: int = 3, deadline: Deadline | None = None, reserve_s: float = 0.0) -> list[dict]:
    """The daemon end to end (bench/latency: /kick/generate -> /kick/done of the renamed file), bundled model, one
    daemon per --render-capture mode, side by side in this run: median, p95 and the resident memory its
    /kick/status reports after the run; verdicts against the targets for that device kind."""
    import argparse

    from bench import latency

    rows = []
    for mode in captures:
        if deadline is not None and deadline.left() < reserve_s:
            rows.append({"capture": mode, "skipped": "time budget"})
            continue
        folder = work / f"daemon-{mode}"
        folder.mkdir(parents=True, exist_ok=True)
        ns = argparse.Namespace(device=device, models=None, model=None, threads=0,
                                extra=["--render-capture", mode, "--reply-rate-kb", "4096", "--reply-burst-kb", "4096"])
        try:
            proc, port, log = latency.start(ns, folder)
        except SystemExit as e:  # the daemon did not start: the row says why, the rest still runs
            rows.append({"capture": mode, "error": str(e)[-500:]})
            continue
        conv = latency.connect(port)
        try:
            for c in counts:
                r = latency.measure(conv, c, reps, warm, (), 600)  # the first waits for the capture
                [(_, st)], _ = latency.timed(conv, "/kick/status")
                r.update(capture=mode, model=st[0], device=st[1], status=[str(v) for v in st])
                r.update(resident_mb(st))
                target = DAEMON_TARGETS_S.get(common.device_kind(st[1]), {}).get(c)
                r["target_s"] = target
                r["met_target"] = None if target is None else bool(r["median_s"] <= target)
                rows.append(r)
            r["capture_log"] = [ln for ln in log.read_text(errors="replace").splitlines() if "capture" in ln][-3:]
        except (SystemExit, TimeoutError, OSError) as e:
            rows.append({"capture": mode, "error": f"{type(e).__name__}: {e}"[-500:]})
        finally:
            latency.stop_daemon(proc)
            conv.close()
    return rows


def custom_section(device: str, budget_s: float = CUSTOM_TRAIN_S, quick: bool = False) -> dict:
    """bench/custom: 20 of the starter kit's kicks -> a fine-tune of the bundled model served by a running daemon
    (training stopped after budget_s), timed from the start of `kicktrain fit` to the first kick of the new model."""
    from bench import custom

    opts = common.Options(device=device, quick=quick, budget_s=budget_s)
    try:
        r = custom.run(opts)
    except Exception as e:  # noqa: BLE001 -- the section's row says what failed; the rest of the run is kept
        return {"error": f"{type(e).__name__}: {e}"[-800:]}
    kind = common.device_kind(device)
    r["target_s"] = CUSTOM_TARGET_S.get(kind)
    r["met_target"] = None if r["target_s"] is None else bool(r["time_to_model_s"] <= r["target_s"])
    return r


def summary(payload: dict) -> list[dict]:
    """The GPU targets, one row each: what was measured in this run and whether it met the target (None: not
    measured, e.g. skipped for time or failed)."""
    out = []

    def add(what: str, value, met) -> None:
        out.append({"what": what, "value": value, "met": met})

    for r in payload.get("daemon", []):
        if r.get("capture") == "auto" and "median_s" in r:
            add(f"daemon, {r['count']} kick(s) end to end (median s)", round(r["median_s"], 4), r.get("met_target"))
            if r["count"] == 1 and "reserved_mb" in r:
                add("daemon resident VRAM (MB reserved)", r["reserved_mb"], r.get("met_resident_target"))
    for r in payload.get("loop", []):
        if "loop_vs_network" in r:
            add(f"{r['family']} {r['preset']}: real loop / network samples/s", round(r["loop_vs_network"], 3),
                r.get("met_ratio_target"))
        if "met_vram_target" in r:
            add(f"{r['family']} {r['preset']}: real loop peak VRAM (MB)", round(r["peak_gpu_mb"]),
                r["met_vram_target"])
    for r in payload.get("plan", []):
        if r.get("budget_gb") is None and "vs_naive" in r:
            add(f"{r['family']}: default loop / naive loop samples/s", round(r["vs_naive"], 3),
                r.get("default_at_least_naive"))
        elif "within_budget" in r:
            add(f"{r['family']}: loop chosen for {r['budget_gb']} GB fits it (peak MB)", round(r["peak_gpu_mb"]),
                r["within_budget"])
    for m in payload.get("batch", {}).get("models", []):
        t = m["timing"]
        add(f"{m['model']}: eight kicks / one (render, target <= {BATCH_RATIO_TARGET:g})",
            round(t["eight_over_one"], 2), t["eight_over_one"] <= BATCH_RATIO_TARGET)
        add(f"{m['model']}: a seed's kick bit for bit at every position of 2, 4, 8 "
            f"({', '.join(b['mode'] for b in m['bits'])})", max(b["max_lsb"] for b in m["bits"]),
            all(b["identical"] for b in m["bits"]))
    c = payload.get("custom", {})
    if "time_to_model_s" in c:
        add("20 kicks -> model served (s)", round(c["time_to_model_s"], 1), c.get("met_target"))
    return out


def _show(rows: list[dict], columns: list[tuple[str, str, str]]) -> str:
    """common.table of rows with each error cut to its first line (80 characters; the JSON keeps it whole) and a
    column for rows skipped for time."""
    short = [dict(r, error=str(r["error"]).strip().splitlines()[0][:80]) if r.get("error") else r for r in rows]
    return common.table(short, [*columns, ("skipped", "skipped", "")])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.gpu", description=__doc__.split("\n\n")[0])
    ap.add_argument("--budget-s", type=float, default=BUDGET_S, help="seconds for everything (default 480)")
    ap.add_argument("--device", default="cuda", help="a CUDA device (default cuda)")
    common.add_out_option(ap)
    args = ap.parse_args(argv)
    import torch

    if not torch.cuda.is_available() or not args.device.startswith("cuda"):
        print(f"bench/gpu.py: no CUDA GPU here (torch {torch.__version__}, CUDA build "
              f"{torch.version.cuda or 'none'}); it measures GPUs only: run it on a machine with an NVIDIA GPU, "
              "or `python -m bench` for the CPU figures", file=sys.stderr)
        return 2
    from kickmodel.families import family_names
    from kickmodel.loading import resolve_device

    try:
        device = str(resolve_device(args.device))
    except RuntimeError as e:
        print(f"bench/gpu.py: {e}", file=sys.stderr)
        return 2
    t0 = time.monotonic()
    deadline = Deadline(args.budget_s)
    fams = family_names()
    budget = args.budget_s
    payload: dict = {"suite": common.SCHEMA, "benchmark": "gpu", "date": common.now(),
                     "machine": common.machine(device), "budget_s": budget}
    with tempfile.TemporaryDirectory(prefix="kickbench-gpu-") as tmp:
        work = Path(tmp)
        print("== batch: a seed's kick alone and at every position of a batch; one kick beside eight", flush=True)
        try:
            from bench import batch_bits

            payload["batch"] = batch_bits.run(device, ["default", "kick-synth"])
            print(batch_bits.table(payload["batch"]), flush=True)
        except Exception as e:  # noqa: BLE001 -- the section's row says what failed; the rest of the run is kept
            payload["batch"] = {"error": f"{type(e).__name__}: {e}"}
            print(f"batch section failed: {payload['batch']['error']}", flush=True)
        print("== loop: the real training loop beside its network alone", flush=True)
        payload["loop"] = loop_section(device, fams, "small", LOOP_STEPS, [common.STARTER_KIT], work,
                                       deadline=deadline, reserve_s=0.62 * budget)
        payload["loop"] += loop_section(device, ["latent_diffusion"], "base", LOOP_STEPS, [common.STARTER_KIT],
                                        work, deadline=deadline, reserve_s=0.60 * budget)
        print(_show(payload["loop"], [("family", "family", ""), ("preset", "preset", ""),
                                             ("samples_per_s", "loop/s", ".1f"),
                                             ("network_samples_per_s", "network/s", ".1f"),
                                             ("loop_vs_network", "ratio", ".2f"), ("peak_gpu_mb", "peak MB", ".0f"),
                                             ("micro_batch", "micro", "d"), ("mixed_precision", "precision", ""),
                                             ("error", "error", "")]), flush=True)
        print("== daemon: one and eight kicks end to end, eager beside the default capture", flush=True)
        payload["daemon"] = daemon_section(device, work, deadline=deadline, reserve_s=0.30 * budget)
        print(_show(payload["daemon"], [("capture", "capture", ""), ("count", "kicks", "d"),
                                               ("median_s", "median s", ".4f"), ("p95_s", "p95 s", ".4f"),
                                               ("target_s", "target", ".3f"), ("met_target", "met", ""),
                                               ("reserved_mb", "reserved MB", ".0f"), ("error", "error", "")]),
              flush=True)
        print("== custom: 20 kicks -> a fine-tuned model served by a running daemon", flush=True)
        if deadline.left() > CUSTOM_TRAIN_S + 75:
            payload["custom"] = custom_section(device)
        else:
            payload["custom"] = {"skipped": "time budget"}
        c = payload["custom"]
        print({k: c.get(k) for k in ("time_to_model_s", "target_s", "met_target", "train_steps", "error",
                                      "skipped")}, flush=True)
        print("== plan: the loop chosen per budget beside the naive loop", flush=True)
        payload["plan"] = plan_section(device, fams, "small", work=work, deadline=deadline,
                                       reserve_s=10.0)
        print(_show(payload["plan"], [("family", "family", ""), ("budget_gb", "budget GB", ""),
                                             ("micro_batch", "micro", "d"), ("precision", "precision", ""),
                                             ("checkpointing", "ckpt", ""), ("samples_per_s", "samples/s", ".1f"),
                                             ("vs_naive", "vs naive", ".2f"), ("peak_gpu_mb", "peak MB", ".0f"),
                                             ("error", "error", "")]), flush=True)
        print("== sampling: render alone, eager and captured", flush=True)
        models = [common.BUNDLED] + [common.random_artifact(work / f"{f}.safetensors", f, "small")
                                     for f in fams if f != "latent_diffusion"]
        payload["sampling"] = sampling_section(device, models, common.BUNDLED, deadline=deadline,
                                               reserve_s=10.0)
        print(_show(payload["sampling"], [("model", "model", ""), ("how", "how", ""), ("batch", "batch", "d"),
                                                 ("median_s", "median s", ".4f"), ("warmup_s", "warm-up s", ".1f"),
                                                 ("peak_gpu_mb", "peak MB", ".0f"), ("error", "error", "")]),
              flush=True)
    payload["targets"] = summary(payload)
    print(_show(payload["targets"], [("what", "target", ""), ("value", "value", ""), ("met", "met", "")]))
    payload["seconds"] = round(time.monotonic() - t0, 1)
    stamp = payload["date"][:19].replace(":", "").replace("-", "")  # e.g. 20261204T101500
    for tag in (stamp, "latest"):  # gpu-<stamp>.json keeps every run; gpu-latest.json is the one to show
        path = common.write_result(args.out, "gpu", tag, payload)
        print(f"wrote {path}")
    print(f"{payload['seconds']:.0f} s in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
