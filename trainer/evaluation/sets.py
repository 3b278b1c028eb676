"""The sets an evaluation looks at: the real held-out and training clips, decoded as training decodes them,
and each model's kicks (and the synth baseline's), rendered and finished as the daemon renders them.

Which files are held out when --real and --train are the same folder (the split the models recorded, else
the one `kicktrain fit` makes), and why every set shares one rate, length, onset alignment and peak level:
trainer/evaluate.py's docstring.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from kickmodel.generator import KickGenerator

EVAL_BATCH = 16  # kicks per sampler call
LATENCY_REPS = 3  # one-kick renders timed per row (median)
LATENCY_THREADS = 1  # CPU threads a timed kick renders on (`kickserver serve --threads 1`, the quickest for one kick)
MIN_HELDOUT = 4  # real held-out clips the real-vs-real split needs (two halves of two)
BASELINE = "procedural baseline"  # the row of trainer.synth's kicks (never a model's name: the README's example model
# is called "synth")
CLOCK: Callable[[], float] = time.perf_counter  # what the timings are read from (tests put a fake clock here)

Log = Callable[[str], None]


def log_stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


@dataclass
class ModelRow:
    """One generated set: an artifact at one step count (one-pass families: steps None)."""

    label: str
    artifact: str
    name: str
    family: str
    steps: int | None
    clips: np.ndarray
    seconds_per_kick: float  # batch of EVAL_BATCH, per kick
    latency_s: float  # one kick alone after a warm-up, on LATENCY_THREADS (median of LATENCY_REPS), the daemon's case
    training: dict[str, Any] = field(default_factory=dict)


@dataclass
class EvalSets:
    """Every clip an evaluation looked at, [n, L] float32 at sample_rate."""

    sample_rate: int
    real: np.ndarray
    train: np.ndarray | None
    models: list[ModelRow]
    synth: np.ndarray
    real_sources: list[str] = field(default_factory=list)
    train_sources: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def load_folder(paths: Sequence[str | Path], cfg, log: Log = log_stderr
                ) -> tuple[np.ndarray, list[str], list[str], list[tuple[str, str]]]:
    """(clips [n, cfg.length], sources, sha256s, skipped) of every usable file under paths, decoded
    with kickmodel.clips.load_clip exactly as training decodes them."""
    from ..data import BadAudio, NoUsableAudio, header_problem, load_clip, scan_audio, sha256_file

    files = scan_audio(paths, log=log)
    clips, sources, shas, skipped = [], [], [], []
    for f in files:
        try:
            problem = header_problem(f, f.stat().st_size)  # size and header first: never hash a 10 GB file
            if problem is not None:
                raise BadAudio(problem)
            clip, _ = load_clip(f, cfg)
        except BadAudio as e:
            reason = str(e)
        except (OSError, RuntimeError, ValueError) as e:
            reason = f"unreadable: {e}"
        else:
            clips.append(clip)
            sources.append(str(f))
            shas.append(sha256_file(f))
            continue
        log(f"skipped {f}: {reason}")
        skipped.append((str(f), reason))
    if not clips:
        where = ", ".join(str(p) for p in paths)
        raise NoUsableAudio(f"no usable audio in {where}: {len(files)} audio file(s) found, {len(skipped)} skipped")
    return np.stack(clips).astype(np.float32), sources, shas, skipped


def _heldout_split(clips: np.ndarray, sources: list[str], shas: list[str], cfg) -> tuple[np.ndarray, np.ndarray]:
    """(train, validation) indices exactly as `kicktrain fit` splits the same files."""
    from ..data import PreparedSet

    manifest = [{"source": s, "sha256": h} for s, h in zip(sources, shas)]
    return PreparedSet(audio=clips, manifest=manifest, skipped=[], config=cfg, cache_dir=Path(".")).split(
        cfg.val_fraction)


def generate(gen, n: int, steps: int | None, sampler: str | None, seed: int,
             batch: int = EVAL_BATCH) -> tuple[np.ndarray, float, float]:
    """(n finished kicks from seeds seed..seed+n-1 with no controls set, seconds per kick in batches,
    seconds for one kick alone). One kick alone is timed as the daemon serves it: after a warm-up kick at the same
    settings, on LATENCY_THREADS CPU threads (torch's default team of every core, on a loaded 2-core box, took
    8-15 s a kick of the bundled model where one thread took 0.9 s), the median of LATENCY_REPS."""
    import torch

    from kickmodel.generator import Item

    settings = gen.settings(steps, sampler)
    gen.generate([Item(seed=seed)], gen.settings(1 if gen.samplers else None, sampler))  # warm-up, not timed
    out = []
    t0 = CLOCK()
    for s in range(0, n, batch):
        items = [Item(seed=seed + i) for i in range(s, min(n, s + batch))]
        # over the model's length, as the real kicks it is compared with are (a kick-synth kick with a long tail
        # renders longer: kickmodel.families.kick_synth.generator)
        out.append(gen.generate(items, settings)[:, :gen.length])
    elapsed = CLOCK() - t0
    threads = torch.get_num_threads()
    torch.set_num_threads(LATENCY_THREADS)
    try:
        gen.generate([Item(seed=seed + LATENCY_REPS)], settings)  # warm-up at these settings on these threads
        alone = []
        for r in range(LATENCY_REPS):
            t1 = CLOCK()
            gen.generate([Item(seed=seed + r)], settings)
            alone.append(CLOCK() - t1)
    finally:
        torch.set_num_threads(threads)
    return np.concatenate(out), elapsed / n, float(np.median(alone))


def _recorded_split(gens: Sequence[KickGenerator]) -> dict[str, str] | None:
    """{sha256: "train" | "heldout"} recorded in the artifacts (all the same), or None when none records one."""
    splits = []
    for gen in gens:
        rec = (gen.artifact.training or {}).get("split")
        if isinstance(rec, dict) and isinstance(rec.get("train"), list) and isinstance(rec.get("heldout"), list):
            table = {e["sha256"]: side for side in ("train", "heldout") for e in rec[side]
                     if isinstance(e, dict) and isinstance(e.get("sha256"), str)}
            splits.append(table)
    if not splits:
        return None
    if any(t != splits[0] for t in splits[1:]):
        raise ValueError("the models were trained on different splits of the data; compare models trained on "
                         "the same split, or give --real and --train as separate folders")
    return splits[0]


def _labels(gens: Sequence[Any]) -> list[str]:
    names = [g.name for g in gens]
    return [n if names.count(n) == 1 else f"{n}#{i + 1}" for i, n in enumerate(names)]


def collect(artifacts: str | Path | Sequence[str | Path], real: Sequence[str | Path],
            train: Sequence[str | Path] | None = None, *, n: int = 64, steps: Sequence[int] = (10, 25, 50),
            sampler: str | None = None, seed: int = 0, device: str = "auto", log: Log = log_stderr
            ) -> tuple[list[Any], EvalSets]:
    """Load the models and the real/training clips, generate every model's sets and the synth set.
    Diffusion models get a row per step count; one-pass models one row."""
    from kickmodel.dsp import finish_kick
    from kickmodel.loading import load_generator

    from ..synth import synth_batch

    artifacts = [artifacts] if isinstance(artifacts, (str, Path)) else list(artifacts)
    if not artifacts:
        raise ValueError("no model to evaluate")
    gens = [load_generator(Path(a), device) for a in artifacts]
    first = gens[0]
    cfg = first.config.data
    for a, g in zip(artifacts, gens):
        if (g.sample_rate, g.length) != (cfg.sample_rate, cfg.length):
            raise ValueError(f"{Path(a).name} makes {g.length} samples at {g.sample_rate} Hz and "
                             f"{Path(artifacts[0]).name} {cfg.length} at {cfg.sample_rate} Hz; compare models "
                             "of the same clip length and rate")
    notes: list[str] = []

    from ..data import scan_audio

    real_clips, real_src, real_sha, skipped = load_folder(real, cfg, log)
    train_clips, train_src = None, []
    same = False  # --real and --train the same files: the held-out split of one folder
    if train:
        same = scan_audio(real) == scan_audio(train)
        if not same:
            train_clips, train_src, train_sha, skipped_t = load_folder(train, cfg, log)
            skipped += [s for s in skipped_t if s not in skipped]
            shared = set(real_sha) & set(train_sha)
            if shared:
                notes.append(f"{sum(h in shared for h in real_sha)} real clip(s) are identical to training files: "
                             "they are not held out")
        else:
            recorded = _recorded_split(gens)
            if recorded is not None:
                va = np.array([i for i, h in enumerate(real_sha) if recorded.get(h) == "heldout"], dtype=np.int64)
                tr = np.array([i for i, h in enumerate(real_sha) if recorded.get(h) == "train"], dtype=np.int64)
                unknown = len(real_sha) - len(va) - len(tr)
                notes.append(f"--real and --train are the same files: using the split the model(s) recorded: "
                             f"{len(va)} real held-out, {len(tr)} training clips"
                             + (f" ({unknown} file(s) the model never saw left out)" if unknown else ""))
            else:
                tr, va = _heldout_split(real_clips, real_src, real_sha, cfg)
                notes.append(f"--real and --train are the same files: using the held-out split as `fit` makes it "
                             f"(val_fraction {cfg.val_fraction:g}): {len(va)} real held-out, {len(tr)} training "
                             "clips")
            train_clips, train_src = real_clips[tr], [real_src[i] for i in tr]
            real_clips, real_src = real_clips[va], [real_src[i] for i in va]
    else:
        # an artifact names no folder (no machine path): its recorded split names the files it learned from by
        # content hash, which is what says whether the real set is held out
        for g in gens:
            split = (g.artifact.training or {}).get("split") or {}
            learned = {r.get("sha256") for r in split.get("train", []) if isinstance(r, dict)}
            seen = sum(h in learned for h in real_sha)
            if seen:
                notes.append(f"{seen} of the {len(real_sha)} real clips are files {g.name} was trained on; pass "
                             "--train with the same folder to evaluate on its held-out split")
    for note in notes:
        log(f"note: {note}")
    if len(real_clips) < MIN_HELDOUT:
        raise ValueError(
            f"need at least {MIN_HELDOUT} real held-out clips (the real-vs-real split compares two halves), found "
            f"{len(real_clips)}" + (
                f" in the held-out split of {len(real_clips) + len(train_src)} files (data.val_fraction "
                f"{cfg.val_fraction:g}); give --real a folder of {MIN_HELDOUT} or more kicks the model never "
                f"trained on (and --train the training folder), or train with --set data.val_fraction="
                f"{min(0.5, MIN_HELDOUT / max(1, len(real_clips) + len(train_src))):.2f} so about {MIN_HELDOUT} "
                "are held out"
                if same else f"; give --real a folder of {MIN_HELDOUT} or more kicks the model never trained on"))
    if n < 2:
        raise ValueError("--n must be at least 2")

    rows: list[ModelRow] = []
    for label, path, gen in zip(_labels(gens), artifacts, gens):
        training = dict(gen.artifact.training or {})
        for s in (sorted(steps) if gen.samplers else [None]):
            t0 = time.perf_counter()
            clips, spk, alone = generate(gen, n, s, sampler, seed)
            name = f"{label} @ {s}" if s is not None else label
            log(f"{name}: {n} kicks in {time.perf_counter() - t0:.1f} s ({spk:.3f} s per kick in batches, "
                f"{alone:.3f} s alone on {LATENCY_THREADS} thread{'s' if LATENCY_THREADS != 1 else ''})")
            rows.append(ModelRow(label=name, artifact=str(path), name=gen.name, family=gen.family, steps=s,
                                 clips=clips, seconds_per_kick=spk, latency_s=alone, training=training))
    synth = finish_kick(synth_batch(n, seed=seed, sample_rate=cfg.sample_rate, length=cfg.length), cfg.sample_rate)
    sets = EvalSets(sample_rate=cfg.sample_rate, real=real_clips, train=train_clips, models=rows, synth=synth,
                    real_sources=real_src, train_sources=train_src, skipped=skipped, notes=notes)
    return gens, sets
