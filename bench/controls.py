"""Do the dials do what they say? Each control swept over 0.1..0.9 and the kicks measured.

    python -m bench.controls [--models A.safetensors ...] [--guidance 1,1.5,2,3] [--quick]
    python -m bench controls ...                                   # the same, in the suite

For each model and each of its controls: VALUES asked for that control alone (the others free), N kicks
per value from the same seeds (seed .. seed+N-1), rendered at the model's default steps and sampler
as the daemon renders them, and measured with `kickmodel.descriptors.measure` (decay s, pitch Hz, click
dB: the descriptors the model was conditioned on). Per control:

- r: Spearman's rank correlation between the asked value and the measured descriptor over all kicks.
- median measured at the lowest and highest value against the training set's 10th/20th/80th/90th
  percentiles (the artifact's control quantiles mapped back to raw units with `from_dial`).
- cross-talk: how far the medians of the other descriptors move between the lowest and the highest
  value, against how far the control's own descriptor moves, both in dial units (each descriptor
  through its training quantiles with `to_dial`, so 1.0 is the whole training range).

Targets: r >= 0.8; median at 0.1 <= the 20th percentile and at 0.9 >= the 80th; every other
descriptor moves less than a third as much as the control's own. With --guidance W,...: the whole
sweep again at each classifier-free guidance scale (models whose generator declares GUIDANCE, the diffusion
families, read it from `gen.guidance`),
and the scale that meets the most targets (ties: the higher mean r, then the smaller scale). One plot
per control (asked on x, measured on y, the training set's 10..90 and 20..80 % as bands) goes to
--img as controls-<model>-<control>.png.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from bench import common
from trainer.evaluation.dials import VALUES, spearman, sweep

NAME = "controls"
N_PER_VALUE = 16
R_TARGET = 0.8
CROSS_TALK_MAX = 1 / 3
UNITS = {"decay": "s", "pitch": "Hz", "click": "dB"}


def _unit(raw: np.ndarray, quantiles: list[float]) -> np.ndarray:
    import torch

    from kickmodel.descriptors import to_dial

    return to_dial(torch.as_tensor(raw, dtype=torch.float64).reshape(-1, 1), [quantiles]).numpy().reshape(raw.shape)


def training_percentiles(quantiles: list[float]) -> dict[str, float]:
    """{"p10", "p20", "p50", "p80", "p90"}: the training set's percentiles in raw units (from_dial)."""
    import torch

    from kickmodel.descriptors import from_dial

    u = torch.tensor([[0.1], [0.2], [0.5], [0.8], [0.9]], dtype=torch.float64)
    raw = from_dial(u, [quantiles]).numpy()[:, 0]
    return dict(zip(("p10", "p20", "p50", "p80", "p90"), (float(v) for v in raw)))


def score(control: str, values: Sequence[float], raw: np.ndarray, quantiles: dict[str, list[float]]) -> dict:
    """The figures and target verdicts of one control's sweep; raw [len(values), n, 3]; quantiles: the
    artifact's training quantiles per descriptor it has (others get no cross-talk figure)."""
    from kickmodel.descriptors import CONTROL_NAMES

    ci = CONTROL_NAMES.index(control)
    lo, hi = int(np.argmin(values)), int(np.argmax(values))
    n = raw.shape[1]
    asked = np.repeat(np.asarray(values, dtype=np.float64), n)
    own = raw[:, :, ci]
    medians = np.median(own, axis=1)
    pct = training_percentiles(quantiles[control])
    row = {"control": control, "unit": UNITS.get(control, ""), "values": [float(v) for v in values],
           "n_per_value": n, "measured": own.tolist(), "median": medians.tolist(),
           "r": spearman(asked, own.ravel()), "median_lo": float(medians[lo]), "median_hi": float(medians[hi]),
           "train": pct}
    unit_move = {}
    for di, d in enumerate(CONTROL_NAMES):
        if d not in quantiles:
            continue
        u = np.median(_unit(raw[:, :, di], quantiles[d]), axis=1)
        unit_move[d] = float(u[hi] - u[lo])
    own_move = unit_move[control]
    cross = {d: abs(m) for d, m in unit_move.items() if d != control}
    row.update({
        "move_own": own_move,
        "cross_talk": cross,
        "cross_talk_ratio": {d: m / abs(own_move) if own_move else None for d, m in cross.items()},
        "cross_r": {d: spearman(asked, raw[:, :, CONTROL_NAMES.index(d)].ravel())
                    for d in CONTROL_NAMES if d != control},
        "others_measured": {d: raw[:, :, CONTROL_NAMES.index(d)].tolist() for d in CONTROL_NAMES if d != control},
    })
    row["targets"] = {
        "r": bool(row["r"] >= R_TARGET),  # nan (a constant output) fails
        "low_end": bool(medians[lo] <= pct["p20"]),
        "high_end": bool(medians[hi] >= pct["p80"]),
        "cross_talk": bool(own_move > 0 and all(m < CROSS_TALK_MAX * own_move for m in cross.values())),
    }
    row["met"] = sum(row["targets"].values())
    return row


def sweep_model(gen, values: Sequence[float], n: int, seed: int) -> list[dict]:
    quantiles = dict(zip(gen.controls, gen.control_quantiles or []))
    rows = []
    for c in gen.controls:
        if c not in quantiles:
            raise ValueError(f"model {gen.name!r} has no training quantiles for its control {c!r}")
        rows.append(score(c, values, sweep(gen, c, values, n, seed), quantiles))
    return rows


def best_guidance(per_scale: dict[float, list[dict]]) -> float | None:
    """The scale whose sweep meets the most targets; ties: the higher mean r, then the smaller scale."""
    if not per_scale:
        return None

    def key(w: float) -> tuple:
        rows = per_scale[w]
        rs = [r["r"] for r in rows if np.isfinite(r["r"])]
        return (-sum(r["met"] for r in rows), -(float(np.mean(rs)) if rs else -1.0), w)

    return min(per_scale, key=key)


def plot_control(row: dict, model: str, path: Path) -> Path:
    """Asked (x, jittered) against measured (y), the median per value, and the training set's 10..90 %
    and 20..80 % as bands; written atomically."""
    from trainer.plots import pyplot, save_figure

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(4.6, 3.4))
    t = row["train"]
    ax.axhspan(t["p10"], t["p90"], color="tab:blue", alpha=0.12, label="training 10..90 %")
    ax.axhspan(t["p20"], t["p80"], color="tab:blue", alpha=0.18, label="training 20..80 %")
    rng = np.random.default_rng(0)
    for v, ys in zip(row["values"], row["measured"]):
        ax.scatter(v + rng.uniform(-0.025, 0.025, len(ys)), ys, s=9, color="k", alpha=0.5, lw=0)
    ax.plot(row["values"], row["median"], "o-", color="tab:red", label="median")
    ax.set_xlabel(f"{row['control']} asked (0..1)")
    ax.set_ylabel(f"{row['control']} measured ({row['unit']})")
    ax.set_xlim(0, 1)
    ax.set_title(f"{model}: {row['control']}, r = {row['r']:.2f}", fontsize=9)
    ax.legend(fontsize=7, loc="best")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return save_figure(fig, path)


def plot_name(model: str, control: str) -> str:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in model)
    return f"controls-{safe}-{control}.png"


def run(opts: common.Options) -> dict:
    from kickmodel.generator import GUIDANCE
    from kickmodel.loading import load_generator

    values, n = (VALUES, 2) if opts.quick else (VALUES, N_PER_VALUE)
    Path(opts.img).mkdir(parents=True, exist_ok=True)
    rows, models, plots, guidance = [], [], [], []
    for path in opts.models:
        gen = load_generator(path, opts.device)
        guided = GUIDANCE in gen.capabilities  # diffusion families: gen.guidance, which may be set
        models.append({"name": gen.name, "family": gen.family, "path": str(path), "controls": list(gen.controls),
                       "guidance": gen.guidance if guided else None, "steps": gen.default_steps,
                       "sampler": gen.default_sampler})
        if not gen.controls:
            continue
        mine = sweep_model(gen, values, n, opts.seed)
        for r in mine:
            r.update(model=gen.name, family=gen.family, guidance=gen.guidance if guided else None)
            plots.append(str(plot_control(r, gen.name, Path(opts.img) / plot_name(gen.name, r["control"]))))
        rows += mine
        if opts.guidance and guided:
            own = gen.guidance
            per_scale = {}
            try:
                for w in opts.guidance:
                    gen.guidance = float(w)
                    per_scale[float(w)] = mine if float(w) == own else sweep_model(gen, values, n, opts.seed)
            finally:
                gen.guidance = own
            best = best_guidance(per_scale)
            guidance.append({"model": gen.name, "model_guidance": own, "best": best, "scales": [
                {"guidance": w, "met": sum(r["met"] for r in rs), "of": 4 * len(rs),
                 **{f"r_{r['control']}": r["r"] for r in rs},
                 **{f"met_{r['control']}": r["met"] for r in rs}} for w, rs in per_scale.items()]})
    return {"values": list(values), "n_per_value": n, "seed": opts.seed, "targets": {
        "r": f">= {R_TARGET}", "low_end": "median at the lowest value <= the training set's 20th percentile",
        "high_end": "median at the highest value >= the training set's 80th percentile",
        "cross_talk": f"every other descriptor moves < {CROSS_TALK_MAX:.2f} x the control's own (dial units)"},
        "models": models, "rows": rows, "guidance": guidance, "plots": plots}


def table(payload: dict) -> str:
    flat = []
    for r in payload["rows"]:
        flat.append({"model": r["model"], "control": r["control"], "r": r["r"],
                     "lo": f"{r['median_lo']:.3g} ({r['train']['p10']:.3g}/{r['train']['p20']:.3g})",
                     "hi": f"{r['median_hi']:.3g} ({r['train']['p80']:.3g}/{r['train']['p90']:.3g})",
                     "cross": ", ".join(f"{d} {v:.2f}" for d, v in r["cross_talk_ratio"].items() if v is not None),
                     "met": f"{r['met']}/4"})
    text = common.table(flat, [("model", "model", ""), ("control", "control", ""), ("r", "r", ".2f"),
                               ("lo", "median @0.1 (p10/p20)", ""), ("hi", "median @0.9 (p80/p90)", ""),
                               ("cross", "cross-talk / own", ""), ("met", "targets", "")])
    for g in payload["guidance"]:
        text += f"\nguidance sweep, {g['model']} (its own {g['model_guidance']}): best {g['best']}\n"
        keys = [k for k in g["scales"][0] if k.startswith("r_")] if g["scales"] else []
        text += common.table(g["scales"], [("guidance", "guidance", ".3g"), ("met", "targets met", "d"),
                                           ("of", "of", "d")] + [(k, k, ".2f") for k in keys])
    return text


def main(argv: list[str] | None = None) -> int:
    from bench.__main__ import main as suite

    return suite(["controls", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
