"""Why a model's kicks cluster: the prior (where its latents land) or the codec (what decoding does to every kick).

    python bench/studies/diversity.py                                              # the bundled model
    python bench/studies/diversity.py --artifact kickserver/models/kick-synth.safetensors
    python bench/studies/diversity.py --n 512 --variants default ddpm@10 dpmpp_2m@10:tp1.0

The 1-NN two-sample test (trainer.evaluation.distances, Xu et al. 2018) spots a model's kicks at 0.70 (bundled) and
0.77 (kick-synth) against real ones, and most generated kicks sit nearer another generated kick than any real one.
Two places can cause that, and this study tells them apart by measuring the same test in both spaces:

- the codec: the training kicks encoded and decoded again (`codec(train)`: the model's own route back to audio,
  the prior left out) against the held-out real kicks. When that row already scores far above the real-vs-real
  baseline, every decoded kick carries the codec's signature (its haze, its smoothed attack) and no prior can hide it.
- the prior: in the latent space the prior samples, its latents against the training kicks' latents (standardised
  by the training latents): the 1-NN test, the share of generated latents whose nearest neighbour is generated, the
  spread over the training latents' spread, and how far each generated latent lies from its nearest training
  latent over how far training latents lie from each other (under 1: it copies; far over 1: it strays).

Sampling variants (`SAMPLER@STEPS[:tpPOWER]`, e.g. `ddpm@50`, `dpmpp_2m@10:tp1.0`) change only the sampler, its
steps and the time grid's power: the weights stay as they are. Every row is in the same standardised "mfcc-stats"
embedding `kicktrain eval` uses (trainer.embeddings), held-out/train split as the model recorded it. Prints a table
and writes --out (default ~/.cache/kickserver/bench/diversity-<model>.json).
"""

from __future__ import annotations

import argparse
import datetime
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from bench.common import machine, user_results, write_json  # noqa: E402


def parse_variant(text: str) -> tuple[str | None, int | None, float | None]:
    """'default' -> the model's own; 'ddpm@50' -> (sampler, steps, None); 'dpmpp_2m@10:tp1.0' adds the time power."""
    if text == "default":
        return None, None, None
    head, _, tail = text.partition(":")
    sampler, _, steps = head.partition("@")
    power = None
    if tail:
        if not tail.startswith("tp"):
            raise argparse.ArgumentTypeError(f"variant {text!r}: after ':' give tpPOWER, e.g. :tp1.0")
        power = float(tail[2:])
    return sampler or None, int(steps) if steps else None, power


def latent_stats(gen_z: np.ndarray, train_z: np.ndarray) -> dict[str, float]:
    """The prior's side, in the training latents' standardised space."""
    from trainer.evaluation.distances import _pairwise, diversity, standardiser, two_sample_1nn

    mu, scale = standardiser(train_z)
    g, t = (gen_z - mu) / scale, (train_z - mu) / scale
    tt = _pairwise(t, t)
    np.fill_diagonal(tt, np.inf)
    train_nn = float(np.median(tt.min(axis=1)))
    gen_to_train = float(np.median(_pairwise(g, t).min(axis=1)))
    nn = two_sample_1nn(g, t)
    return {"nn1": nn["accuracy"], "nn1_lo": nn["lo"], "nn1_hi": nn["hi"], "gen_nn_gen": nn["gen_nn_gen"],
            "spread": diversity(g) / diversity(t), "novelty": gen_to_train / train_nn}


def codec_signature(codec: np.ndarray, real: np.ndarray, train: np.ndarray, sr: int, draws: int = 50,
                    seed: int = 0) -> dict[str, dict]:
    """The codec's own mark, without the pairing that hides it: codec(train) against the training kicks would find
    each decoding's original beside it (accuracy under 0.5 however audible the codec is), so each draw splits the
    training kicks in halves and sets the decodings of one half against the originals of the other; beside it, the
    originals' halves against each other (the baseline). Same embedding and standardiser as bench.sound_check."""
    from trainer.embeddings import get_embedding
    from trainer.evaluation.distances import one_nn_accuracy, standardiser

    emb = get_embedding("mfcc-stats")
    e_real, e_train = (np.asarray(emb(x, sr), dtype=np.float64) for x in (real, train))
    mu, scale = standardiser(np.concatenate([e_real, e_train]))
    z_train = (e_train - mu) / scale
    z_codec = (np.asarray(emb(codec, sr), dtype=np.float64) - mu) / scale
    rng = np.random.default_rng(seed)
    h = len(train) // 2
    acc, side, base = [], [], []
    for _ in range(draws):
        p = rng.permutation(len(train))
        a, b = p[:h], p[h:2 * h]
        t, _, g = one_nn_accuracy(z_train[b], z_codec[a])
        acc.append(t)
        side.append(g)
        base.append(one_nn_accuracy(z_train[a], z_train[b])[0])

    def band(v: list[float]) -> dict[str, float]:
        return {"accuracy": float(np.mean(v)), "lo": float(np.percentile(v, 2.5)), "hi": float(np.percentile(v, 97.5))}

    return {"codec": band(acc) | {"gen_nn_gen": float(np.mean(side))}, "real": band(base), "n_per_set": h}


def cell(t: dict | None) -> str:
    return f"{t['accuracy']:.2f} [{t['lo']:.2f}..{t['hi']:.2f}]" if t else "-"


def inverter_only(artifact: str, clips: np.ndarray, sr: int) -> np.ndarray | None:
    """A mel model's inverter alone on the clips' own log-mels (no VAE: bench/studies/synth_ceiling's Griffin-Lim
    route), finished as the daemon finishes a kick; None for a model without a mel front end."""
    import torch

    from kickmodel.dsp import finish_kick
    from kickmodel.loading import load_artifact

    art = load_artifact(Path(artifact))
    if art.family not in ("latent_diffusion", "mel_vae"):
        return None
    from kickmodel.families.mel_vae.generator import build_parts

    front, _, inverter = build_parts(art, torch.device("cpu"))
    with torch.inference_mode():
        raw = torch.cat([inverter(front(torch.from_numpy(clips[i:i + 1]))) for i in range(len(clips))]).numpy()
    return finish_kick(raw, sr)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--artifact", default=str(REPO / "kickserver" / "models" / "default.safetensors"))
    ap.add_argument("--kit", default=str(REPO / "kickserver" / "data" / "kicks"),
                    help="the folder the model trained on (its recorded split picks the held-out kicks)")
    ap.add_argument("--n", type=int, default=128, help="generated kicks per variant")
    ap.add_argument("--variants", nargs="+", type=parse_variant, default=None,
                    help="sampling variants: default, SAMPLER@STEPS, SAMPLER@STEPS:tpPOWER")
    ap.add_argument("--out", help="folder for the JSON (default ~/.cache/kickserver/bench)")
    args = ap.parse_args(argv)

    import torch

    from bench.sound_check import measure, spread, summarise
    from kickmodel.dsp import finish_kick
    from kickmodel.generator import Item, Ragged
    from kickmodel.kitmap import clean_name
    from trainer.evaluation.sets import collect

    torch.set_num_threads(1)  # a loaded 2-core box: one thread renders as fast and leaves the other core
    gens, sets = collect([args.artifact], [args.kit], [args.kit], n=2, steps=(1,), log=lambda m: None)
    gen = gens[0]
    sr = sets.sample_rate
    variants = args.variants or ([(None, None, None), ("ddpm", None, None), ("ddpm", 50, None),
                                  (None, None, 1.0)] if gen.samplers else [(None, None, None)])

    def latents_of(clips: np.ndarray, sources: list) -> np.ndarray:
        """The kit map's latents of these kicks when it holds them all (the model's own encoding of them), else an
        encoding now."""
        m = gen.kit_map
        if m is not None:
            where = {name: i for i, name in enumerate(m.names)}
            idx = [where.get(clean_name(Path(s).stem)) for s in sources]
            if all(i is not None for i in idx):
                return np.asarray(m.latents[idx], dtype=np.float64)
        return np.asarray(gen.encode(clips), dtype=np.float64)

    t0 = time.perf_counter()
    train_z = latents_of(sets.train, sets.train_sources)
    held_z = latents_of(sets.real, sets.real_sources)
    raw = gen.decode_latents(train_z.astype(np.float32), [Item(seed=i) for i in range(len(train_z))])
    raw = raw.audio[:, :gen.length] if isinstance(raw, Ragged) else raw  # over the model's length, as the real kicks
    codec = finish_kick(raw, sr)
    print(f"codec: {len(train_z)} training kicks decoded in {time.perf_counter() - t0:.0f} s", flush=True)

    groups: dict[str, np.ndarray] = {"real held-out": sets.real, "real training": sets.train, "codec(train)": codec}
    inverted = inverter_only(args.artifact, sets.train, sr)
    signatures = {"codec": codec_signature(codec, sets.real, sets.train, sr)}
    if inverted is not None:  # a mel model: its inverter alone (the training kicks' own mels, no VAE) beside it
        groups["inverter(train)"] = inverted
        signatures["inverter"] = codec_signature(inverted, sets.real, sets.train, sr)
    lat: dict[str, dict] = {"real held-out": latent_stats(held_z, train_z)}
    scale = float(getattr(getattr(gen, "denoiser", None), "data_scale", 1.0) or 1.0)
    for sampler, steps, power in variants:
        captured: list[np.ndarray] = []
        orig = gen.from_latent if gen.samplers else None
        if orig is not None:
            def cap(z, items, hook, _orig=orig, captured=captured):
                captured.append(z.detach().float().cpu().numpy() / scale)
                return _orig(z, items, hook)
            gen.from_latent = cap
        old_power = getattr(gen, "time_power", None)
        if power is not None:
            gen.time_power = power
        try:
            settings = gen.settings(steps, sampler)
            label = (f"{settings.sampler}@{settings.steps}" + (f":tp{gen.time_power:g}" if gen.samplers else "")
                     if gen.samplers else "generated")
            t1 = time.perf_counter()
            # over the model's length, as the real kicks are (a kick-synth kick with a long tail renders longer)
            clips = np.concatenate([gen.generate([Item(seed=s) for s in range(i, min(args.n, i + 8))],
                                                 settings)[:, :gen.length] for i in range(0, args.n, 8)])
            print(f"{label}: {args.n} kicks in {time.perf_counter() - t1:.0f} s", flush=True)
        finally:
            if orig is not None:
                del gen.from_latent
            if old_power is not None:
                gen.time_power = old_power
        groups[label] = clips
        if captured:
            lat[label] = latent_stats(np.concatenate(captured).astype(np.float64), train_z)

    spreads = spread(groups, sets.real, sets.train, sr)
    rows = {}
    print(f"\n{'set':<22} {'n':>4}  {'1-NN held-out':>18}  {'1-NN train':>18}  {'gen-nn-gen':>10}  {'div/real':>8}  "
          f"{'haze dB':>8}  |  {'latent 1-NN':>18}  {'lat gen-nn-gen':>14}  {'lat spread':>10}  {'novelty':>8}")
    for name, clips in groups.items():
        s = spreads[name]
        haze = float(summarise(measure(clips, sr))["body_hf_db"]["median"])
        nn, nt = s["nn1"], s["nn1_train"]
        gng = nn.get("gen_nn_gen")
        line = (f"{name:<22} {len(clips):>4}  {cell(nn):>18}  {cell(nt):>18}  "
                f"{(f'{gng:.2f}' if gng is not None else '-'):>10}  {s['diversity_ratio']:>8.2f}  {haze:>8.1f}")
        la = lat.get(name)
        if la:
            line += (f"  |  {la['nn1']:.2f} [{la['nn1_lo']:.2f}..{la['nn1_hi']:.2f}]".ljust(23)
                     + f"  {la['gen_nn_gen']:>14.2f}  {la['spread']:>10.2f}  {la['novelty']:>8.2f}")
        print(line)
        rows[name] = {"n": len(clips), "nn1": nn, "nn1_train": nt, "diversity_ratio": s["diversity_ratio"],
                      "body_hf_db": haze, "latent": la}
    for what, sig in signatures.items():
        print(f"\n{what} signature, unpaired: its renders of one half of the training kicks against the other "
              f"half's originals: 1-NN {sig['codec']['accuracy']:.2f} [{sig['codec']['lo']:.2f}.."
              f"{sig['codec']['hi']:.2f}] (renders whose nearest is a render: {sig['codec']['gen_nn_gen']:.2f}); "
              f"the two halves of the originals: {sig['real']['accuracy']:.2f} [{sig['real']['lo']:.2f}.."
              f"{sig['real']['hi']:.2f}]")
    print("\nlatent columns: against the training kicks' latents (real held-out: the unseen kicks' own latents, the "
          "baseline); novelty = median distance to the nearest training latent / the training latents' own median "
          "nearest-neighbour distance")
    out = Path(args.out) if args.out else user_results()
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"diversity-{Path(args.artifact).stem}.json"
    write_json(path, {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                      "machine": machine(), "artifact": Path(args.artifact).name, "n": args.n,
                      "held_out": len(sets.real), "train": len(sets.train), "notes": sets.notes, "rows": rows,
                      "signatures": signatures})
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
