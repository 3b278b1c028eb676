"""What `kicktrain eval` shows of a report: the text table, the report made JSON-safe, and the pictures
(spectrograms, envelopes, the loss curve; drawn by trainer/plots.py).

The columns and how to read them: one line each in column_legend (printed under the table), the whole story in
trainer/evaluate.py's docstring and format_table's.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from .sets import BASELINE, EvalSets


def _fmt(v: float | None, spec: str = ".3g") -> str:
    return "-" if v is None else format(v, spec)


def _pm(v: float | None, sd: float | None) -> str:
    return "-" if v is None else f"{v:.3g} ±{sd or 0.0:.2g}"


TABLE_COLUMNS = ("set", "family", "n", "FAD", "KID", "KID(train)", "1-NN", "1-NN(train)", "gen nn gen",
                 "nov/real", "ncc max", "copies", "div/real", "haze dB", "hiss dB", "2nd hit", "s/kick", "train h",
                 "train kicks/s", "train MB")


def column_legend() -> dict[str, str]:
    """One short line per table column, printed under the table (the whole story: trainer/evaluate.py's docstring)."""
    from .measures import HAZE_HZ, TAIL_HZ
    from .scoring import COPY_NCC

    return {
        "set": "real vs real (the floor), NAME @ steps (a model), procedural baseline (trainer.synth)",
        "family": "waveform (diffusion), mel-vae or latent (diffusion); - for the reference rows",
        "n": "kicks in the set",
        "FAD": "Frechet distance to the real held-out kicks' embeddings; lower is closer (± over splits)",
        "KID": "kernel distance to the real held-out kicks; unbiased, so it can be < 0; lower is closer",
        "KID(train)": "KID against the training kicks (with --train): steadier, but a copier scores well too",
        "1-NN": "1-NN two-sample accuracy vs held-out [95 %]: 0.5 alike, 1 apart, <0.5 copies; real: halves",
        "1-NN(train)": "the same against the training kicks (with --train; the real row: held-out vs training)",
        "gen nn gen": "share of the set's kicks whose nearest neighbour is its own: ~0.5 as real, ~1 clustered",
        "nov/real": "median distance to the nearest training kick, over real kicks': ~0 copies, ~1 as new as real",
        "ncc max": "largest waveform cross-correlation with any training kick; 1 is a copy of one",
        "copies": f"kicks whose cross-correlation with a training kick is {COPY_NCC:g} or more",
        "div/real": "spread within the set over the real kicks' spread; 1 as varied as real, low all alike",
        "haze dB": f"the body's {HAZE_HZ[0] / 1000:g}..{HAZE_HZ[1] / 1000:g} kHz energy minus real kicks'; 0 as real, "
                   "+ hazier",
        "hiss dB": f"energy above {TAIL_HZ / 1000:g} kHz in the tail (400..900 ms), dB re. peak; real kicks are near "
                   "silence",
        "2nd hit": "kicks that hit again (a flam, a loop's next beat), of n [95 % Wilson]; a one-shot: 0",
        "s/kick": "seconds for one kick alone after a warm-up, on 1 CPU thread (serve --threads 1); median of 3",
        "train h": "hours the model spent in training steps (from the artifact)",
        "train kicks/s": "training speed in clips a second (from the artifact, on the machine that trained it)",
        "train MB": "peak memory while training (from the artifact)",
    }


def format_legend() -> str:
    """The column legend as aligned lines: `name: what it is`."""
    legend = column_legend()
    width = max(len(c) for c in TABLE_COLUMNS) + 1
    return "\n".join(f"  {(c + ':'):<{width}} {legend[c]}" for c in TABLE_COLUMNS)


def _nn(t: dict | None) -> str:
    """A 1-NN test's accuracy with its interval, e.g. 0.70 [0.62..0.78]."""
    if not t:
        return "-"
    return f"{t['accuracy']:.2f} [{t['lo']:.2f}..{t['hi']:.2f}]"


def _gen_side(r: dict) -> float | None:
    """The share of a set's kicks whose nearest neighbour is its own: against training when measured, else held-out."""
    t = r.get("nn1_train") or r.get("nn1") or {}
    return t.get("gen_nn_gen")


def _second_hit(r: dict) -> str:
    """Kicks that hit twice with the share's interval, e.g. 0/512 [0..0.7 %]."""
    t = r.get("second_hit")
    if not t:
        return "-"
    return f"{t['kicks']}/{t['n']} [{100 * t['lo']:.2g}..{100 * t['hi']:.2g} %]"


def _family_short(name: str | None) -> str:
    """A family's name as the table's narrow column shows it (latent_diffusion -> latent, kick_synth -> kick-synth):
    from the name, so a new family needs no line here."""
    if not name:
        return "-"
    return name.removesuffix("_diffusion").replace("_", "-")


def format_table(report: dict[str, Any]) -> str:
    """The rows as an aligned text table. haze dB: the body's 1..8 kHz energy minus the real kicks' (0 = as
    real); s/kick: one kick alone, the daemon's case; train: the run's time in training steps, its speed
    and peak memory, from the artifact."""
    lines = []
    for r in report["rows"]:
        hours = r.get("train_seconds")
        lines.append([r["name"], _family_short(r.get("family")) if r["kind"] == "model" else "-", str(r["n"]),
                      f"{r['fad']:.3g} ±{r['fad_std']:.2g}", f"{r['kid']:.3g} ±{r['kid_std']:.2g}",
                      _pm(r["kid_train"], r["kid_train_std"]), _nn(r.get("nn1")), _nn(r.get("nn1_train")),
                      _fmt(_gen_side(r), ".2f"), _fmt(r["novelty_ratio"], ".2f"),
                      _fmt(r["ncc_max"], ".3f"), _fmt(r["copies"], "d"), _fmt(r["diversity_ratio"], ".2f"),
                      _fmt(r.get("haze_vs_real_db"), "+.1f"), _fmt(r["tail_hiss_db"], ".1f"),
                      _second_hit(r), _fmt(r.get("latency_s"), ".3f"), _fmt(hours / 3600 if hours else None, ".2f"),
                      _fmt(r.get("train_samples_per_s"), ".1f"), _fmt(r.get("train_peak_memory_mb"), ".0f")])
    widths = [max(len(c), *(len(row[i]) for row in lines)) for i, c in enumerate(TABLE_COLUMNS)]
    fmt_row = lambda cells: "  ".join(c.ljust(w) if i == 0 else c.rjust(w)  # noqa: E731
                                      for i, (c, w) in enumerate(zip(cells, widths)))
    out = [fmt_row(TABLE_COLUMNS), fmt_row(["-" * w for w in widths])] + [fmt_row(row) for row in lines]
    return "\n".join(out)


def json_safe(o: Any) -> Any:
    """JSON-safe: NaN/inf -> None, numpy scalars -> Python."""
    if isinstance(o, dict):
        return {str(k): json_safe(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [json_safe(v) for v in o]
    if isinstance(o, (np.floating, float)):
        f = float(o)
        return f if math.isfinite(f) else None
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.bool_):
        return bool(o)
    return o


def _save_png(draw: Callable[[Path], Path | None], path: Path) -> Path | None:
    """Draw into a temp file beside path, then rename: a picture appears complete or not at all."""
    tmp = path.with_name(f".{path.stem}.tmp-{os.getpid()}.png")
    try:
        if draw(tmp) is None:
            return None
        os.replace(tmp, path)
        return path
    finally:
        if tmp.exists():
            tmp.unlink()


def write_pictures(sets: EvalSets, out: Path, run: Path | None = None, title: str = "") -> list[Path]:
    """spectrograms.png (real, model @ each step count, synth; 4 clips each), envelopes.png, and
    loss.png from RUN/metrics.jsonl when run is given and has one."""
    from .. import plots

    sr = sets.sample_rate
    groups = [("real", sets.real)] + [(m.label, m.clips) for m in sets.models] + [(BASELINE, sets.synth)]
    written = []
    p = _save_png(lambda t: plots.spectrogram_grid([(k, v[:4]) for k, v in groups], sr, t, title=title),
                  out / "spectrograms.png")
    written += [p] if p else []
    p = _save_png(lambda t: plots.envelope_plot(groups, sr, t), out / "envelopes.png")
    written += [p] if p else []
    if run is not None:
        p = _save_png(lambda t: plots.loss_curve(Path(run) / "metrics.jsonl", t), out / "loss.png")
        written += [p] if p else []
    return written
