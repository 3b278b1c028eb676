"""The kick synth's amortised inverse (kickmodel/families/kick_synth/inverse.py), side by side with the fit it starts.

    python bench/synth_inverse.py [--json OUT] [--threads 2] [--parts speed,kit] [--kicks N] [--model M]

- speed: a WAV to the synth's numbers before any refinement, one file at a time: the file read and prepared as the
  daemon prepares a source (GeneratorBase.prepare_source), then the guess (target: at most 50 ms on 2 cores), then
  its frequency set from the pitch track (fit.pitch_tracked: one render and two measures); median and p90 over the
  starter kit's kicks, 3 passes.
- kit: the starter kit's kicks (prepared as sources) fitted at the shipped kick-synth model's served settings
  (fit.serve_options, fit.batch kicks at once), each way in turn over each batch (the order alternating batch by
  batch, so a change in the machine's load falls on every way alike): today's fit from its measured starts, the
  guess alone (pitch track and adjust, no descent), the guess refined (at most serve_iters steps, stopping early:
  target at most 2 minutes for the kit), and what the daemon now serves: each kick's nearer of today's fit and the
  guess refined (fit.nearer; timed as both fits and the pick). For each: wall and process CPU seconds for the kit
  and each kick's distance from its numbers as the daemon plays them (heard_distances; fit.distance's scale: 0 the
  kick itself), median and p90, and per kick against today's.
- --model: another kick-synth model than the shipped one (a version-2 model's fits start from inverse_v2), its
  served settings and synth version taken from it.

Wall-clock figures move with the machine's load (recorded: the load average before and after): only the figures of
one run compare.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import soundfile as sf  # noqa: E402
import torch  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.common import machine, now, user_results, write_json  # noqa: E402
from kickmodel.families.kick_synth import fit as F  # noqa: E402
from kickmodel.families.kick_synth import inverse as inv  # noqa: E402

KIT = REPO / "kickserver" / "data" / "kicks"
MODEL = REPO / "kickserver" / "models" / "kick-synth.safetensors"


def kit_files() -> list[Path]:
    return sorted(KIT.glob("*.flac"))


def source(gen, path: Path) -> np.ndarray:
    """A file prepared as the daemon prepares a variation's, a morph's or a locate's source."""
    a, r = sf.read(path, dtype="float32")
    return gen.prepare_source(a, r)


def speed(gen, net: inv.InverseNet) -> dict:
    files, rate, version = kit_files(), gen.sample_rate, gen.synth_version
    net.guess(torch.zeros(1, gen.length), rate)  # warm
    guess_ms, file_ms, tracked_ms = [], [], []
    for _ in range(3):
        for p in files:
            t0 = time.perf_counter()
            clip = torch.from_numpy(source(gen, p))[None]
            t1 = time.perf_counter()
            u = net.guess(clip, rate)
            t2 = time.perf_counter()
            F.pitch_tracked(u, clip, rate, version)
            t3 = time.perf_counter()
            guess_ms.append(1000 * (t2 - t1))
            file_ms.append(1000 * (t2 - t0))
            tracked_ms.append(1000 * (t3 - t0))
    q = {"median": 0.5, "p90": 0.9}
    return {"kicks": len(files), "passes": 3,
            **{f"guess_ms_{k}": float(np.quantile(guess_ms, v)) for k, v in q.items()},
            **{f"file_to_guess_ms_{k}": float(np.quantile(file_ms, v)) for k, v in q.items()},
            **{f"file_to_pitch_tracked_ms_{k}": float(np.quantile(tracked_ms, v)) for k, v in q.items()}}


def heard_distances(gen, clips: torch.Tensor, u: torch.Tensor) -> np.ndarray:
    """fit.heard_distance: each clip's distance from its numbers as the daemon plays them (what fit.nearer picks by)."""
    return F.heard_distance(u, clips, gen.sample_rate, gen.synth_version).numpy()


def kit(gen, net: inv.InverseNet, n_kicks: int | None) -> dict:
    files = kit_files()[:n_kicks] if n_kicks else kit_files()
    clips = torch.from_numpy(np.stack([source(gen, p) for p in files]))
    f, version = gen.fit_config, gen.synth_version
    served = F.serve_options(f, version)
    guessed = F.serve_options(f, version, net.guess) | {"keep_nearer": False}
    ways = {"today": served, "guess_only": guessed | {"guess_iters": 0}, "guess_refined": guessed}
    u = {w: torch.zeros(len(clips), gen.latent_dim) for w in ways}
    wall, cpu, steps = dict.fromkeys(ways, 0.0), dict.fromkeys(ways, 0.0), dict.fromkeys(ways, 0)
    for j, a in enumerate(range(0, len(clips), f.batch)):
        x = clips[a:a + f.batch]
        for w in (list(ways) if j % 2 == 0 else list(ways)[::-1]):
            calls: list[int] = []
            t, c = time.perf_counter(), time.process_time()
            u[w][a:a + len(x)] = F.fit(x, gen.sample_rate, **ways[w], check=lambda c=calls: c.append(1))[0]
            wall[w] += time.perf_counter() - t
            cpu[w] += time.process_time() - c
            steps[w] += len(calls)
            print(f"kicks {a + 1}..{a + len(x)}, {w}: {wall[w]:.0f} s so far", file=sys.stderr, flush=True)
    # what the daemon now serves (fit.serve_options with the guess: keep_nearer): both fits above, each kick's nearer
    # as fit.nearer weighs it; the same numbers fit(keep_nearer=True) gives (tests/kickmodel/test_synth_inverse.py),
    # timed as the two fits and the pick
    u["served"] = torch.zeros_like(u["today"])
    t, c = time.perf_counter(), time.process_time()
    for a in range(0, len(clips), f.batch):
        u["served"][a:a + f.batch] = F.nearer([u["guess_refined"][a:a + f.batch], u["today"][a:a + f.batch]],
                                              clips[a:a + f.batch], gen.sample_rate, version)[0]
    wall["served"] = wall["today"] + wall["guess_refined"] + time.perf_counter() - t
    cpu["served"] = cpu["today"] + cpu["guess_refined"] + time.process_time() - c
    steps["served"] = steps["today"] + steps["guess_refined"]
    out: dict = {"kicks": len(clips), "settings": {k: v for k, v in served.items()}}
    today = heard_distances(gen, clips, u["today"])
    for w in [*ways, "served"]:
        d = today if w == "today" else heard_distances(gen, clips, u[w])
        out[w] = {"wall_s": wall[w], "cpu_s": cpu[w], "check_calls": steps[w],
                  "distance_median": float(np.median(d)), "distance_p90": float(np.quantile(d, 0.9)),
                  "distance_mean": float(d.mean()), "each": d.round(4).tolist()}
        if w != "today":
            out[w] |= {"kicks_no_worse_than_today": int((d <= today + 1e-6).sum()),
                       "minus_today_median": float(np.median(d - today)),
                       "minus_today_worst": float((d - today).max())}
        print(f"kit, {w}: {wall[w]:.0f} s wall ({cpu[w]:.0f} s CPU) for {len(clips)} kicks; distance median "
              f"{np.median(d):.3f}, p90 {np.quantile(d, 0.9):.3f}", flush=True)
    other = heard_distances(gen, clips, u["today"].roll(1, dims=0))  # the yardstick: another kick's numbers
    out["another_kicks_numbers"] = {"distance_median": float(np.median(other))}
    print(f"kit: each kick against another kick's fit, distance median {np.median(other):.3f}", flush=True)
    return out


def main() -> None:
    from kickmodel.loading import load_generator

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", type=Path, default=user_results() / "synth_inverse.json")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--parts", default="speed,kit")
    ap.add_argument("--kicks", type=int, default=0, help="kit: the first N of the starter kit (0: all)")
    ap.add_argument("--weights", type=Path, help="an inverse's weights (default: the one shipped for the synth)")
    ap.add_argument("--model", type=Path, default=MODEL, help="a kick-synth model (default: the shipped one)")
    ns = ap.parse_args()
    torch.set_num_threads(ns.threads)
    gen = load_generator(ns.model, "cpu")
    net = inv.load(gen.synth_version, ns.weights)
    out = {"date": now(), "machine": machine(), "threads": ns.threads, "load_average_before": os.getloadavg(),
           "model": ns.model.name, "synth_version": gen.synth_version,
           "weights": str(ns.weights or inv.weights_path(gen.synth_version).relative_to(REPO))}
    parts = ns.parts.split(",")
    if "speed" in parts:
        out["speed"] = sp = speed(gen, net)
        print(f"speed: guess {sp['guess_ms_median']:.1f} ms median (p90 {sp['guess_ms_p90']:.1f}); file to guess "
              f"{sp['file_to_guess_ms_median']:.1f} ms (p90 {sp['file_to_guess_ms_p90']:.1f}); with the pitch track "
              f"{sp['file_to_pitch_tracked_ms_median']:.1f} ms", flush=True)
    if "kit" in parts:
        out["kit"] = kit(gen, net, ns.kicks or None)
    out["load_average_after"] = os.getloadavg()
    print(f"written {write_json(ns.json, out)}")


if __name__ == "__main__":
    main()
