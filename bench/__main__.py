"""kickserver's benchmark suite: every figure of BENCHMARKS.md, measured and written as JSON.

    python -m bench                          # every benchmark, full size, the bundled model
    python -m bench sampling flops           # some of them
    python -m bench --quick --out /tmp/b     # the smoke test CI runs (minutes; figures not meaningful)
    python -m bench controls --models mine.safetensors --guidance 1,1.5,2,3
    python -m bench.report                   # a BENCHMARKS.md and its plots from those results
    python -m bench --out bench/results --img docs/img   # refresh the figures the docs quote (tracked files)

Benchmarks: train (training speed and peak memory per family and preset, optimised vs naive),
sampling (latency and real-time factor per sampler, step count and batch), osc (the daemon end to
end: median and p95 latency, and a burst of clients), controls (does each dial move what it says),
quality (KID beside latency per step count), flops (FLOPs per kick against the machine's measured
peak), custom (from a folder of kicks to a fine-tuned model served by a running daemon). Each prints a
table and writes <out>/<name>-<cpu|cuda>.json with the machine, the date and the load average (a
busy machine slows every figure); --out defaults to ~/.cache/kickserver/bench ($XDG_CACHE_HOME), so a run
changes no tracked file unless asked to. A benchmark that fails is reported and the others still run; the
exit status is then 1.

As the daemon does, OpenMP's idle threads sleep instead of spinning (OMP_WAIT_POLICY=PASSIVE unless the
environment sets it): on a 2-core machine that other processes keep busy, spinning threads made one kick
take 2-19 s instead of 0.25 s. On such a machine --threads 1 gives the steadiest figures.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch is imported (see the docstring)

import argparse
import importlib
import sys
import time
import traceback
from pathlib import Path

from bench import common

BENCHMARKS = {"train": "bench.train_speed", "sampling": "bench.sampling", "osc": "bench.latency",
              "controls": "bench.controls", "quality": "bench.quality", "flops": "bench.flops",
              "custom": "bench.custom"}


def _floats(text: str) -> list[float]:
    try:
        vals = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected comma-separated numbers, e.g. 1,1.5,2") from None
    if not vals or any(not (0 <= v <= 20) for v in vals):
        raise argparse.ArgumentTypeError(f"{text!r}: guidance scales are numbers within 0..20")
    return vals


def _existing(text: str) -> Path:
    p = Path(text).expanduser()
    if not p.exists():
        raise argparse.ArgumentTypeError(f"{text}: no such file or folder")
    return p


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n")[1])
    ap.add_argument("names", nargs="*", metavar="NAME",
                    help=f"benchmarks to run (default all): {', '.join(BENCHMARKS)}")
    ap.add_argument("--quick", action="store_true", help="tiny sizes: exercises every code path, figures meaningless")
    ap.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N")
    ap.add_argument("--models", nargs="+", type=_existing, default=[common.BUNDLED], metavar="ARTIFACT",
                    help="models to measure (default: the bundled model); osc measures the first only")
    common.add_out_option(ap)
    ap.add_argument("--img", type=Path, help="folder for the control plots (default OUT/img; the docs' plots: "
                    "docs/img)")
    ap.add_argument("--real", nargs="+", type=_existing, default=[common.STARTER_KIT],
                    help="quality: real (held-out) kicks, folders or files (default: the starter kit)")
    ap.add_argument("--train", nargs="+", type=_existing, default=[common.STARTER_KIT],
                    help="quality: training kicks (default: the starter kit; the same as --real: the recorded split)")
    ap.add_argument("--kicks", type=_existing, default=common.STARTER_KIT,
                    help="custom: the folder a user's subset is taken from (default: the starter kit)")
    ap.add_argument("--init", type=_existing, help="custom: the model to fine-tune (default: the first of --models)")
    ap.add_argument("--family", help="custom: train a new model of this family (its small preset) from the user's "
                    "kicks instead of fine-tuning --init (a kick-synth model needs no starting model)")
    ap.add_argument("--budget-min", type=float, help="custom: minutes of training before fit is stopped (default 45)")
    ap.add_argument("--guidance", type=_floats, default=[], metavar="W,W,...",
                    help="controls: also sweep these classifier-free guidance scales (diffusion families)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads here and in started processes "
                    "(0: torch's default)")
    return ap


def run_one(name: str, opts: common.Options) -> tuple[dict | None, str | None]:
    """(payload with the machine added, None) or (None, the error)."""
    mod = importlib.import_module(BENCHMARKS[name])
    load = os.getloadavg()
    t0 = time.perf_counter()
    try:
        payload = mod.run(opts)
    except (Exception, SystemExit) as e:  # a benchmark's failure is reported, the others still run
        traceback.print_exc(file=sys.stderr)
        return None, f"{type(e).__name__}: {e}"
    from kickmodel.loading import resolve_device

    kind = common.device_kind(resolve_device(opts.device))
    payload.update(suite=common.SCHEMA, benchmark=name, quick=opts.quick, date=common.now(),
                   seconds=round(time.perf_counter() - t0, 1), machine=common.machine(kind),
                   load_before=[round(v, 2) for v in load], load_after=[round(v, 2) for v in os.getloadavg()])
    print(mod.table(payload), flush=True)
    path = common.write_result(opts.out, name, kind, payload)
    print(f"wrote {path} ({payload['seconds']:.0f} s)\n", flush=True)
    return payload, None


def main(argv: list[str] | None = None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    unknown = [n for n in args.names if n not in BENCHMARKS]
    if unknown:
        ap.error(f"unknown benchmark(s) {', '.join(unknown)}; choose from {', '.join(BENCHMARKS)}")
    if args.threads < 0:
        ap.error("--threads must be >= 0")
    if args.budget_min is not None and not 0 < args.budget_min <= 24 * 60:
        ap.error("--budget-min must be within 0..1440 minutes")
    from kickmodel.loading import resolve_device

    try:
        resolve_device(args.device)
    except RuntimeError as e:
        ap.error(str(e))
    opts = common.Options(quick=args.quick, device=args.device, models=list(args.models), out=args.out,
                          img=args.img or args.out / "img", real=list(args.real), train=list(args.train),
                          kicks=args.kicks, init=args.init, family=args.family,
                          budget_s=args.budget_min * 60 if args.budget_min else None,
                          guidance=args.guidance, seed=args.seed, threads=args.threads)
    common.set_threads(args.threads)
    failed = {}
    for name in args.names or list(BENCHMARKS):
        print(f"== {name}{' (quick)' if opts.quick else ''}", flush=True)
        _, err = run_one(name, opts)
        if err:
            failed[name] = err
            print(f"bench {name}: FAILED: {err}\n", file=sys.stderr, flush=True)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
