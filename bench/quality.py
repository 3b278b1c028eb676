"""Quality per cost: the evaluation's KID beside the latency of one kick, at each step count.

    python -m bench quality [--models A.safetensors ...] [--real DIR --train DIR] [--quick]

Calls `trainer.evaluate.evaluate` (what `kicktrain eval` runs) on the models at STEPS with N kicks per
row, against --real / --train (default: the starter kit for both, so each model's recorded held-out
split, or `fit`'s split when it records none). Per row: KID and FAD against the real held-out kicks
(lower is closer), the haze and diversity figures, and the latency of one kick alone on this machine
(the daemon's case). The real-vs-real and synth rows give the floor and the baseline. --quick: 4 kicks,
two step counts, 6 real and 6 training files (figures meaningless).
"""

from __future__ import annotations

from bench import common

NAME = "quality"
STEPS = (1, 2, 4, 10, 25, 50)
N = 64
KEYS = ("name", "kind", "family", "artifact", "steps", "n", "kid", "kid_std", "fad", "fad_std", "kid_train",
        "latency_s", "seconds_per_kick", "haze_vs_real_db", "diversity_ratio", "novelty_ratio", "copies")


def _quick_sets(real: list, train: list) -> tuple[list, list]:
    """A few files: the first 6 of --real, and 6 training files that are not among them."""
    from trainer.data import scan_audio

    r = scan_audio(real)
    t = [f for f in scan_audio(train) if f not in set(r[:6])]
    return r[:6], t[:6]


def run(opts: common.Options) -> dict:
    from trainer.evaluate import evaluate

    real, train = list(opts.real), list(opts.train)
    n, steps, splits = N, STEPS, 50
    if opts.quick:
        real, train = _quick_sets(real, train)
        n, steps, splits = 4, (1, 2), 5
    report, _ = evaluate(opts.models, real, train, n=n, steps=steps, seed=opts.seed, device=opts.device,
                         splits=splits, log=lambda m: None)
    rows = [{k: r.get(k) for k in KEYS} for r in report["rows"]]
    return {"n": n, "steps": list(steps), "splits": report["splits"], "embedding": report["embedding"]["name"],
            "n_real": report["n_real"], "n_train": report["n_train"], "notes": report["notes"],
            "real": [str(p) for p in opts.real], "train": [str(p) for p in opts.train],
            "recommended_steps": report["recommended_steps"], "latency": report["latency"], "rows": rows}


def table(payload: dict) -> str:
    return common.table(payload["rows"], [("name", "set", ""), ("steps", "steps", "d"), ("kid", "KID", ".3g"),
                                          ("kid_std", "±", ".2g"), ("fad", "FAD", ".3g"),
                                          ("latency_s", "s/kick", ".3f"), ("haze_vs_real_db", "haze dB", "+.1f"),
                                          ("diversity_ratio", "div/real", ".2f")])
