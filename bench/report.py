"""BENCHMARKS.md from the suite's JSON files: the page is generated, never edited by hand.

    python -m bench.report                      # ~/.cache/kickserver/bench: its JSON, BENCHMARKS.md and img/
    python -m bench.report --results bench/results --out BENCHMARKS.md --img docs/img   # the repository's page

Reads every JSON the suite wrote (the ones with a "suite" key: `python -m bench` and
`python -m bench.gpu`), keeps the newest per benchmark and device, and writes the page with the date
and machine of each figure, tables, and plots drawn from the same JSON into --img: latency against
steps (sampling), quality against latency (quality), and one sweep per control (controls). Results of a
--quick run are shown with a warning: their figures mean nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from bench import common

ORDER = ("osc", "sampling", "quality", "flops", "controls", "train", "ddp", "custom")
TITLES = {"osc": "The daemon end to end (OSC)", "sampling": "Sampling latency per sampler and step count",
          "quality": "Quality per cost", "flops": "FLOPs and the hardware's limit",
          "controls": "Do the dials do what they say?", "train": "Training speed and peak memory",
          "custom": "Time to a custom model", "gpu": "GPU",
          "ddp": "Training on 1 and on 2 processes (DistributedDataParallel)"}
COMMANDS = {"osc": "python -m bench osc", "sampling": "python -m bench sampling", "quality": "python -m bench quality",
            "flops": "python -m bench flops", "controls": "python -m bench controls --threads 1 --guidance 2",
            "train": "python -m bench train", "custom": "python -m bench custom", "gpu": "python -m bench.gpu",
            "ddp": "python -m bench.ddp_speed"}


def load_results(folder: Path) -> dict[tuple[str, str], dict]:
    """{(benchmark, cpu|cuda): newest payload} of the suite's JSON files in folder (others are skipped)."""
    newest: dict[tuple[str, str], dict] = {}
    for path in sorted(Path(folder).glob("*.json")):
        try:
            d = json.loads(path.read_text())
        except (OSError, ValueError):
            print(f"bench.report: skipped {path.name}: not readable JSON", file=sys.stderr)
            continue
        if not isinstance(d, dict) or d.get("suite") != common.SCHEMA or not isinstance(d.get("benchmark"), str):
            continue
        gpu = (d.get("machine") or {}).get("gpu")
        key = (d["benchmark"], "cuda" if gpu or d["benchmark"] == "gpu" else "cpu")
        if key not in newest or str(d.get("date", "")) > str(newest[key].get("date", "")):
            d["_file"] = path.name
            newest[key] = d
    return newest


def md_table(rows: list[dict], columns: list[tuple[str, str, str]]) -> str:
    cols = [c for c in columns if any(r.get(c[0]) is not None for r in rows)]
    lines = ["| " + " | ".join(h for _, h, _ in cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for r in rows:
        lines.append("| " + " | ".join(common.fmt(r.get(k), spec) for k, _, spec in cols) + " |")
    return "\n".join(lines)


def machine_line(d: dict) -> str:
    m = d.get("machine") or {}
    gpu = f", GPU {m['gpu']} ({m.get('gpu_memory_gb')} GB)" if m.get("gpu") else ", no GPU"
    load = d.get("load_before")
    busy = f"; load average {load[0]:.1f} when it started" if load else ""
    when = str(d.get("date", "?"))[:16].replace("T", " ")
    line = (f"Measured {when} UTC on {m.get('cpu', '?')} ({m.get('cores', '?')} cores, {m.get('torch_threads', '?')} "
            f"torch threads){gpu}, torch {m.get('torch', '?')}, commit {m.get('commit') or '?'}{busy}; "
            f"`{d.get('_file', '')}`.")
    if d.get("quick"):
        line += " **A --quick run: the figures mean nothing; rerun without --quick.**"
    return line


def _plt():
    from trainer.plots import pyplot as plt

    return plt()


def plot_latency(d: dict, path: Path) -> Path | None:
    from trainer.plots import save_figure

    rows = [r for r in d["rows"] if r.get("steps")]
    if not rows:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4))
    series: dict[tuple, list] = {}
    for r in rows:
        series.setdefault((r["model"], r["sampler"], r["batch"]), []).append((r["steps"], r["median_s"]))
    for (model, sampler, batch), pts in series.items():
        pts.sort()
        ax.plot(*zip(*pts), "o-" if batch == 1 else "s--", ms=3, label=f"{model} {sampler}, batch {batch}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("sampler steps")
    ax.set_ylabel("seconds per render")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=6)
    fig.tight_layout()
    return save_figure(fig, path)


def plot_quality(d: dict, path: Path) -> Path | None:
    from trainer.plots import save_figure

    rows = [r for r in d["rows"] if r.get("kind") == "model" and r.get("latency_s") and r.get("kid") is not None]
    if not rows:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 4))
    by: dict[str, list] = {}
    for r in rows:
        by.setdefault(r.get("artifact") or r["name"], []).append(r)
    for name, rs in by.items():
        rs.sort(key=lambda r: r["latency_s"])
        ax.plot([r["latency_s"] for r in rs], [r["kid"] for r in rs], "o-", label=name)
        for r in rs:
            if r.get("steps"):
                ax.annotate(str(r["steps"]), (r["latency_s"], r["kid"]), fontsize=7, xytext=(3, 3),
                            textcoords="offset points")
    for r in d["rows"]:
        if r.get("kind") == "real":
            ax.axhline(r["kid"], color="g", ls=":", label="real vs real")
    ax.set_xscale("log")
    ax.set_xlabel("seconds for one kick (labels: steps)")
    ax.set_ylabel("KID against real held-out kicks (lower is better)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return save_figure(fig, path)


def _img(path: Path | None, page: Path, alt: str) -> str:
    if path is None:
        return ""
    return f"![{alt}]({os.path.relpath(path, page.parent)})\n"


def section_osc(d: dict, img: Path, page: Path) -> str:
    b = d["burst"]
    return (md_table(d["rows"], [("count", "kicks per request", "d"), ("reps", "requests", "d"),
                                 ("median_s", "median s", ".3f"), ("p95_s", "p95 s", ".3f"),
                                 ("realtime_factor", "x real time", ".1f"), ("target_s", "target s", ".3g"),
                                 ("met_target", "met", "")])
            + f"\n\nModel `{d['model']}` on {d['device']}, the model's default steps. Burst: {b['clients']} clients x "
            f"{b['requests_per_client']} one-kick requests at once: {b['kicks_done']} kicks done at "
            f"{common.fmt(b['kicks_per_s'], '.2f')} kicks/s, largest queue {common.fmt(b['max_queue'], 'd')}, "
            f"{b['refused']} refused ({', '.join(f'{k}: {v}' for k, v in b['refusal_reasons'].items()) or 'none'}), "
            f"{b['lost']} lost.\n")


def section_sampling(d: dict, img: Path, page: Path) -> str:
    pic = plot_latency(d, img / "bench-latency-steps.png")
    return (_img(pic, page, "latency against steps") + "\n"
            + md_table(d["rows"], [("model", "model", ""), ("sampler", "sampler", ""), ("steps", "steps", "d"),
                                   ("batch", "batch", "d"), ("median_s", "median s", ".3f"),
                                   ("per_kick_s", "s per kick", ".3f"), ("realtime_factor", "x real time", ".1f")])
            + "\n")


def section_quality(d: dict, img: Path, page: Path) -> str:
    pic = plot_quality(d, img / "bench-quality-latency.png")
    rec = ", ".join(f"{k}: {v}" for k, v in (d.get("recommended_steps") or {}).items())
    return (_img(pic, page, "quality against latency") + "\n"
            + md_table(d["rows"], [("name", "set", ""), ("steps", "steps", "d"), ("kid", "KID", ".3g"),
                                   ("kid_std", "KID ±", ".2g"), ("fad", "FAD", ".3g"), ("latency_s", "s/kick", ".3f"),
                                   ("haze_vs_real_db", "haze dB vs real", "+.1f"),
                                   ("diversity_ratio", "diversity / real", ".2f")])
            + f"\n\n{d['n']} kicks per row, {d['n_real']} real held-out and {d['n_train']} training kicks, embedding "
            f"`{d['embedding']}`, {d['splits']} splits. Recommended steps (the evaluation's rule): {rec or '-'}.\n")


def section_flops(d: dict, img: Path, page: Path) -> str:
    rows = [dict(r, gflop_kick=r["flops_per_kick"] / 1e9, gflops=r["achieved_flops"] / 1e9,
                 gflop_step=None if r.get("flops_per_step") is None else r["flops_per_step"] / 1e9) for r in d["rows"]]
    return (md_table(rows, [("model", "model", ""), ("steps", "steps", "d"), ("batch", "batch", "d"),
                            ("gflop_step", "GFLOP per network call", ".3g"), ("gflop_kick", "GFLOP per kick", ".3g"),
                            ("seconds", "s per render", ".3f"), ("gflops", "achieved GFLOP/s", ".3g"),
                            ("of_peak", "of peak", ".1%")])
            + f"\n\nPeak: {d['peak_flops'] / 1e9:.3g} GFLOP/s ({d['peak']}). Counted: {d['counted']}.\n")


def section_controls(d: dict, img: Path, page: Path) -> str:
    from bench.controls import plot_control, plot_name

    rows, pics = [], []
    for r in d["rows"]:
        t = r["train"]
        rows.append({"model": r["model"], "control": r["control"], "r": r["r"],
                     "lo": f"{r['median_lo']:.3g} (p10 {t['p10']:.3g}, p20 {t['p20']:.3g})",
                     "hi": f"{r['median_hi']:.3g} (p80 {t['p80']:.3g}, p90 {t['p90']:.3g})",
                     "cross": ", ".join(f"{k} {v:.2f}" for k, v in r["cross_talk_ratio"].items() if v is not None)
                     or "-", "met": ", ".join(k for k, ok in r["targets"].items() if ok) or "none",
                     "unit": r["unit"]})
        pics.append(plot_control(r, r["model"], img / plot_name(r["model"], r["control"])))
    text = md_table(rows, [("model", "model", ""), ("control", "control", ""), ("unit", "unit", ""),
                           ("r", "Spearman r", ".2f"), ("lo", "median at 0.1", ""), ("hi", "median at 0.9", ""),
                           ("cross", "others' move / own", ""), ("met", "targets met", "")])
    t = d["targets"]
    text += (f"\n\nTargets: r {t['r']}; {t['low_end']}; {t['high_end']}; {t['cross_talk']}. {d['n_per_value']} kicks "
             f"per value (seeds {d['seed']}..), values {', '.join(str(v) for v in d['values'])}, the other controls "
             "free.\n\n")
    text += "".join(_img(p, page, p.stem) for p in pics)
    for g in d.get("guidance") or []:
        keys = [k for k in (g["scales"][0] if g["scales"] else {}) if k.startswith("r_")]
        text += (f"\nGuidance sweep of `{g['model']}` (its own scale {g['model_guidance']}): best **{g['best']}**.\n\n"
                 + md_table(g["scales"], [("guidance", "guidance", ".3g"), ("met", "targets met", "d"),
                                          ("of", "of", "d")] + [(k, f"r {k[2:]}", ".2f") for k in keys]) + "\n")
    return text


def section_train(d: dict, img: Path, page: Path) -> str:
    mem = "peak_gpu_mb" if any("peak_gpu_mb" in r for r in d["rows"]) else "peak_rss_mb"
    return (md_table(d["rows"], [("family", "family", ""), ("preset", "preset", ""), ("mode", "loop", ""),
                                 ("params", "parameters", ",d"), ("batch", "batch", "d"), ("micro_batch", "micro", "d"),
                                 ("precision", "precision", ""), ("checkpointing", "checkpointing", ""),
                                 ("samples_per_s", "samples/s", ".1f"), (mem, "peak MB", ".0f"),
                                 ("error", "error", "")])
            + "\n\nOptimised / naive:\n\n"
            + md_table(d["optimised_vs_naive"], [("family", "family", ""), ("preset", "preset", ""),
                                                 ("speed_x", "speed x", ".2f"), ("memory_x", "memory x", ".2f")])
            + f"\n\nMemory: {d.get('memory', '')}.\n")


def _name(path: str) -> str:
    """A recorded path's file name (a result names a file outside the repository by its name only: common.portable)."""
    return Path(path.removeprefix(common.OUTSIDE).strip()).name or path


def section_custom(d: dict, img: Path, page: Path) -> str:
    return (f"{d['user_kicks']} kicks (a user's folder from `{_name(d['kicks'])}`) to a model fine-tuned from "
            f"`{_name(d['init'])}` ({d['train_steps']} steps, {common.fmt(d.get('samples_per_s'), '.1f')} "
            f"samples/s, fit ran {d['fit_s'] / 60:.1f} min"
            + (f" of a {d['budget_s'] / 60:.0f} min budget" if d.get("budget_s") else "")
            + f") and its first kick from the running daemon: **{d['time_to_model_s'] / 60:.1f} min** (target "
            f"{d['target_s'] / 60:.0f} min: {'met' if d['met_target'] else 'missed'}). Quality against "
            f"{d['held_out_kicks']} held-out kicks of the same pool ({d['eval_n']} kicks per row):\n\n"
            + md_table(d["rows"], [("name", "set", ""), ("kid", "KID", ".3g"), ("kid_std", "KID ±", ".2g"),
                                   ("fad", "FAD", ".3g"), ("haze_vs_real_db", "haze dB vs real", "+.1f"),
                                   ("diversity_ratio", "diversity / real", ".2f")]) + "\n")


def section_gpu(d: dict, img: Path, page: Path) -> str:
    skip = [("error", "error", ""), ("skipped", "skipped", "")]
    targets = [("what", "target", ""), ("value", "measured", ""), ("met", "met", "")]
    text = "The GPU targets:\n\n" + md_table(d.get("targets", []), targets)
    text += "\n\nThe daemon end to end, eager (`--render-capture off`) beside the default (`auto`):\n\n" + md_table(
        d.get("daemon", []), [("capture", "capture", ""), ("count", "kicks", "d"), ("median_s", "median s", ".4f"),
                              ("p95_s", "p95 s", ".4f"), ("reserved_mb", "reserved MB", ".0f"),
                              ("peak_mb", "peak MB", ".0f"), *skip])
    text += "\n\nRender alone:\n\n" + md_table(d.get("sampling", []), [
        ("model", "model", ""), ("how", "how", ""), ("steps", "steps", "d"), ("batch", "batch", "d"),
        ("median_s", "median s", ".4f"), ("realtime_factor", "x real time", ".0f"), ("warmup_s", "warm-up s", ".1f"),
        ("peak_gpu_mb", "peak VRAM MB", ".0f"), *skip])
    text += "\n\nThe real training loop beside its network alone:\n\n" + md_table(d.get("loop", []), [
        ("family", "family", ""), ("preset", "preset", ""), ("micro_batch", "micro-batch", "d"),
        ("mixed_precision", "precision", ""), ("samples_per_s", "loop samples/s", ".1f"),
        ("network_samples_per_s", "network samples/s", ".1f"), ("loop_vs_network", "ratio", ".2f"),
        ("peak_gpu_mb", "peak VRAM MB", ".0f"), *skip])
    text += "\n\nThe loop chosen per budget beside the naive loop:\n\n" + md_table(d.get("plan", []), [
        ("family", "family", ""), ("budget_gb", "budget GB", ""), ("micro_batch", "micro-batch", "d"),
        ("precision", "precision", ""), ("checkpointing", "checkpointing", ""), ("samples_per_s", "samples/s", ".1f"),
        ("vs_naive", "x naive", ".2f"), ("peak_gpu_mb", "peak VRAM MB", ".0f"), *skip])
    c = d.get("custom") or {}
    if "time_to_model_s" in c:
        text += (f"\n\nTime to a custom model: {c['user_kicks']} kicks -> served in {c['time_to_model_s']:.0f} s "
                 f"({c['train_steps']} steps; target {c.get('target_s')} s).")
    return text + "\n"


def section_ddp(d: dict, img: Path, page: Path) -> str:
    return (md_table(d["rows"], [("family", "family", ""), ("processes", "processes", "d"), ("steps", "steps", "d"),
                                 ("samples_per_s", "samples/s", ".1f"), ("speed_up", "x of 1 process", ".2f"),
                                 ("log_line", "the trainer says", "")])
            + f"\n\nPreset `{d.get('preset')}`, {d.get('threads_per_process')} torch thread(s) per process, the same "
            "effective batch split across the processes (gloo on a CPU).\n")


SECTIONS = {"ddp": section_ddp, "osc": section_osc, "sampling": section_sampling, "quality": section_quality,
            "flops": section_flops,
            "controls": section_controls, "train": section_train, "custom": section_custom, "gpu": section_gpu}


def render(results: dict[tuple[str, str], dict], page: Path, img: Path) -> str:
    img.mkdir(parents=True, exist_ok=True)
    out = ["# Benchmarks", "",
           "Generated by `python -m bench.report` from the suite's JSON files: do not edit by hand. "
           "`python -m bench` measures (see `python -m bench --help`), `python -m bench.gpu` measures a GPU in one "
           "call; both write to ~/.cache/kickserver/bench unless given `--out`. The repository's page: "
           "`python -m bench.report --results bench/results --out BENCHMARKS.md --img docs/img`. Every figure says "
           "when and where it was measured; a busy machine (load average above its cores) slows them all.", ""]
    for kind, heading in (("cpu", "CPU"), ("cuda", "GPU")):
        names = [n for n in (*ORDER, "gpu") if (n, kind) in results]
        out += [f"## {heading}", ""]
        if not names:
            out += [f"Not measured yet: `{'python -m bench.gpu' if kind == 'cuda' else 'python -m bench'}`.", ""]
            continue
        for name in names:
            d = results[(name, kind)]
            command = d.get("command") or COMMANDS.get(name, name)  # the run's own, where it recorded one
            out += [f"### {TITLES.get(name, name)}", "", machine_line(d), "", f"`{command}`", ""]
            try:
                out.append(SECTIONS[name](d, img, page))
            except (KeyError, TypeError, ValueError) as e:
                out.append(f"(could not show {d.get('_file')}: {type(e).__name__}: {e})\n")
            if d.get("note"):  # what the figures need beside them (a busy machine, an earlier run), kept in the JSON
                out.append(f"{d['note']}\n")
        missing = [n for n in ORDER if (n, kind) not in results]
        if missing and kind == "cpu":
            out += [f"Not measured yet: {', '.join(missing)}.", ""]
    return "\n".join(out).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    from kickmodel.fsutil import atomic_write_bytes

    ap = argparse.ArgumentParser(prog="python -m bench.report", description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", type=Path, help=f"the suite's JSON files (default {common.user_results()})")
    ap.add_argument("--out", type=Path, help="the page to write (default RESULTS/BENCHMARKS.md)")
    ap.add_argument("--img", type=Path, help="folder for its plots (default: img beside the page)")
    args = ap.parse_args(argv)
    args.results = args.results or common.user_results()
    args.out = args.out or args.results / "BENCHMARKS.md"
    args.img = args.img or args.out.parent / "img"
    if not args.results.is_dir():
        print(f"bench.report: {args.results}: no such folder", file=sys.stderr)
        return 2
    page = render(load_results(args.results), args.out, args.img)
    atomic_write_bytes(args.out, page.encode())
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
