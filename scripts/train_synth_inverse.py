"""Train the kick synth's amortised inverse (kickmodel/families/kick_synth/inverse.py) on the synth's own renders.

    python scripts/train_synth_inverse.py [--version 2] [--anchors kickserver/models/kick-synth.safetensors]
        [--renders 96000] [--epochs 4] [--work runs/synth-inverse] [--out <family folder>/inverse_v2.safetensors]

1. Numbers drawn (seeded) from three regions: between the anchors (a kit map's kicks: 1-3 of them blended, plus
   noise up to 0.6 of the kit's spread, as /kick/near draws), around one anchor (noise 0.3-2 spreads) and uniform
   over the unconstrained range (+-UNIFORM). The anchors are the starter kit's fits as the shipped kick-synth model
   stores them (its kit map), so the inverse sees most what the daemon's files are; the uniform third keeps it
   from guessing only kit-like kicks.
2. Each played by the synth at the encoder's rate and length, finished as the daemon finishes a kick
   (kickmodel.dsp.finish_kick), rounded to 24 bits as its WAV is, and prepared as a source file is
   (kickmodel.clips.prepare_audio without the high-pass, GeneratorBase.prepare_source): what encode is given.
   The renders' features and numbers are kept in WORK/renders-v<version>-<seed>-<shard>.safetensors (made once;
   --shards renders some of them, so two processes can share the work).
3. The network learns the numbers (standardised by the renders' mean and spread) by squared error, AdamW with a
   one-cycle schedule; a held-out 5 % reports the error per number, and the epoch with the least held-out error is
   kept. Deterministic for a given --threads: the same seed, renders and order give the same weights.

Version 2 (the shipped model's since 2026-12-06: the default) plays each render with a noise draw of its own (its
seed), as the daemon's version-2 kicks are. Version 1 has no shipped model to anchor on since then: --version 1 with
--no-anchors, or --anchors a version-1 model.

What it costs (2026-12-05, the 2-core AMD EPYC dev box, 2 threads, loaded by other sessions: load average 11): 250
renders with their features take 5.2 s of CPU for version 1 and 9.3 s for version 2 (18 and 31 s wall at that
load), a training step of 128 renders 0.53 s of CPU; so the default run (96,000 renders, 4 epochs, 2,850 steps) is
about 33 + 25 minutes of CPU for version 1 and 60 + 25 for version 2 (twice that wall-clock at such a load). A smoke
run, end to end (--version 2 --no-anchors --renders 256 --shard-size 256 --epochs 1 --batch 64): renders 104 s,
training 44 s wall. inverse_v1.safetensors was made by the default run of the time (--version 1, anchored on the
version-1 model then shipped; its metadata: 96,000 renders, 4 epochs, seed 20261205, anchors kick-synth.safetensors);
its wall-clock time was not recorded. inverse_v2.safetensors was made by the run with --version 2 --anchors the
version-2 model scripts/train_kick_synth.sh exports, shipped since 2026-12-06 (its kit map:
the 81 training kicks' fits, the same at every step of its prior), 2026-12-05 late: the 96,000 renders 68 minutes
wall on one thread (--threads 1, the box's other core busy: load 2-3), then the training, restarted on the kept
renders with --threads 2, 152 s (4 epochs, held-out error 0.669 of the renders' spread: 0.75, 0.70, 0.68, 0.67; 8
epochs on the same renders level at 0.666, so the 4-epoch file ships). The 0.53 s a step above was the load's: 0.05 s
a step here.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kickmodel.families.kick_synth import inverse as inv  # noqa: E402
from kickmodel.families.kick_synth.synth import U_LIMIT, VERSIONS, params_for, synth_for  # noqa: E402

UNIFORM = 6.0
SHARES = (0.35, 0.35, 0.30)  # between anchors, around one, uniform
VAL_FRACTION = 0.05


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


class Anchors:
    """A kick-synth model's kit map in the synth's unconstrained numbers: its kit's fits (as served), and draws as
    /kick/near makes them (latent_at of a point, plus noise scaled by a spread)."""

    def __init__(self, model: Path, version: int) -> None:
        from kickmodel.loading import load_generator

        self.gen = gen = load_generator(model, "cpu")
        if gen.kit_map is None:
            raise SystemExit(f"{model} has no kit map to take anchors from")
        if getattr(gen, "synth_version", None) != version:
            raise SystemExit(f"{model} plays synth version {getattr(gen, 'synth_version', None)}, not {version}: "
                             "give --anchors a model of that version, or --no-anchors")
        self.km = gen.kit_map
        self.u = self.numbers(np.asarray(self.km.latents, np.float64))

    def numbers(self, z: np.ndarray) -> torch.Tensor:
        with torch.no_grad():
            return self.gen.numbers(torch.as_tensor(z, dtype=torch.float32) * self.gen.denoiser.data_scale).float()

    def near(self, n: int, g: torch.Generator) -> torch.Tensor:
        """n draws of the map: a point uniform over the pad, a spread uniform over 0..0.3 for half of them (the
        daemon's default is 0.2) and over 0..1 for the others."""
        xy = torch.rand(n, 2, generator=g, dtype=torch.float64).numpy()
        wide = torch.rand(n, generator=g) < 0.5
        spread = torch.rand(n, generator=g, dtype=torch.float64) * torch.where(wide, 1.0, 0.3)
        noise = torch.randn(n, self.km.latent_dim, generator=g, dtype=torch.float64)
        z = self.km.latents_at(xy) + spread[:, None].numpy() * self.km.latent_std.astype(np.float64) * noise.numpy()
        return self.numbers(z)


def draw(n: int, numbers: int, anchors: Anchors | None, g: torch.Generator, kind: str = "mixed") -> torch.Tensor:
    """n unconstrained numbers [n, numbers] (module docstring, step 1)."""
    uniform = (torch.rand(n, numbers, generator=g) * 2 - 1) * UNIFORM
    if anchors is None:
        return uniform
    if kind == "map":
        return anchors.near(n, g).clamp(-U_LIMIT, U_LIMIT)
    a = anchors.u.double()
    sd = a.std(dim=0).clamp(min=0.1)
    which = torch.rand(n, generator=g)
    k = torch.randint(1, 4, (n,), generator=g)
    idx = torch.randint(0, len(a), (n, 3), generator=g)
    w = -torch.log(torch.rand(n, 3, generator=g).clamp(min=1e-9))  # Dirichlet(1, 1, 1) by normalised exponentials
    w = w * (torch.arange(3)[None] < k[:, None])
    w = w / w.sum(dim=1, keepdim=True)
    blend = (w[:, :, None] * a[idx]).sum(dim=1)
    noise = torch.randn(n, numbers, generator=g, dtype=torch.float64) * sd
    between = blend + noise * torch.rand(n, 1, generator=g, dtype=torch.float64) * 0.6
    around = a[idx[:, 0]] + noise * (0.3 + 1.7 * torch.rand(n, 1, generator=g, dtype=torch.float64))
    u = torch.where((which < SHARES[0])[:, None], between,
                    torch.where((which < SHARES[0] + SHARES[1])[:, None], around, uniform.double()))
    return u.float().clamp(-U_LIMIT, U_LIMIT)


def render(u: torch.Tensor, cfg: inv.InverseConfig, version: int, seeds: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """(prepared clips [m, length], the rows of u kept) for numbers u: played (each with its seed: a synth that draws
    its noise per kick, version 2, plays a texture of its own), finished, 24-bit, prepared."""
    from kickmodel.clips import BadAudio, prepare_audio
    from kickmodel.config import DataConfig
    from kickmodel.dsp import finish_kick

    synth = synth_for(version, cfg.sample_rate, cfg.length)
    with torch.no_grad():
        raw = synth(u, seeds).numpy()
    kicks = finish_kick(raw, cfg.sample_rate)
    kicks = np.round(kicks * 8388607.0) / 8388607.0  # the WAV's 24 bits
    dc = DataConfig(sample_rate=cfg.sample_rate, length=cfg.length)
    out, kept = [], []
    for i, k in enumerate(kicks):
        try:
            out.append(prepare_audio(k.astype(np.float32), cfg.sample_rate, dc, highpass=False)[0])
            kept.append(i)
        except BadAudio:  # silent: no file the daemon writes is
            pass
    return np.stack(out) if out else np.zeros((0, cfg.length), np.float32), np.asarray(kept, dtype=np.int64)


MIXED_SHARDS = 8  # shards 0..7 draw the mixture (between anchors, around one, uniform); the later ones the map's own
SHARD = 8000  # renders per file: --renders N makes (or reads) the first N // SHARD shards, each its own seed


def make_renders(work: Path, n: int, anchors: Anchors | None, cfg: inv.InverseConfig, seed: int,
                 version: int, shards: list[int] | None = None, shard: int = SHARD) -> dict:
    """The renders' numbers and features, shard by shard (WORK/renders-v<version>-<seed>-<i>.safetensors, made once:
    shard i draws from its own generator, so more shards add renders and keep the ones made)."""
    from safetensors.torch import load_file, save_file

    parts: dict[str, list[torch.Tensor]] = {"u": [], "whole": [], "early": []}
    numbers = len(params_for(version))
    net = inv.InverseNet(cfg, numbers)
    for i in (range(-(-n // shard)) if shards is None else shards):
        suffix = "" if shard == SHARD else f"-of{shard}"
        path = work / f"renders-v{version}-{seed}-{i}{suffix}.safetensors"
        if not path.is_file():
            g = torch.Generator().manual_seed(seed * 1000 + i)
            u_all = draw(shard, numbers, anchors, g, "map" if i >= MIXED_SHARDS else "mixed")
            seeds = torch.randint(0, 1 << 31, (shard,), generator=g)
            part: dict[str, list[torch.Tensor]] = {"u": [], "whole": [], "early": []}
            started = time.monotonic()
            for a in range(0, shard, 250):
                clips, kept = render(u_all[a:a + 250], cfg, version, seeds[a:a + 250])
                with torch.no_grad():
                    whole, early = net.features(torch.from_numpy(clips))
                part["u"].append(u_all[a:a + 250][torch.from_numpy(kept)])
                part["whole"].append(whole.half())
                part["early"].append(early.half())
                el = time.monotonic() - started
                log(f"renders, shard {i}: {min(a + 250, shard)} of {shard} in {el:.0f} s")
            work.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(path.name + ".tmp")  # a shard appears complete or not at all
            save_file({k: torch.cat(v).contiguous() for k, v in part.items()}, str(tmp),
                      metadata={"seed": str(seed * 1000 + i), "n": str(shard)})
            os.replace(tmp, path)
        data = load_file(str(path))
        for k in parts:
            parts[k].append(data[k])
    return {k: torch.cat(v) for k, v in parts.items()}


def train(data: dict, cfg: inv.InverseConfig, epochs: int, batch: int, lr: float, seed: int,
          version: int) -> inv.InverseNet:
    torch.manual_seed(seed)
    params = params_for(version)
    net = inv.InverseNet(cfg, len(params))
    u, whole, early = data["u"].float(), data["whole"], data["early"]
    n = len(u)
    g = torch.Generator().manual_seed(seed + 1)
    perm = torch.randperm(n, generator=g)
    n_val = max(1, int(n * VAL_FRACTION))
    val, tr = perm[:n_val], perm[n_val:]
    with torch.no_grad():
        w, e = whole[tr].float(), early[tr].float()
        net.mel_mean.copy_(w.mean(dim=(0, 2))[:, None])
        net.mel_std.copy_(w.std(dim=(0, 2)).clamp(min=1e-3)[:, None])
        net.onset_mean.copy_(e.mean(dim=(0, 2))[:, None])
        net.onset_std.copy_(e.std(dim=(0, 2)).clamp(min=1e-3)[:, None])
        net.u_mean.copy_(u[tr].mean(dim=0))
        net.u_std.copy_(u[tr].std(dim=0).clamp(min=1e-3))
        del w, e
    target = (u - net.u_mean) / net.u_std
    opt = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=1e-4)
    steps = epochs * (len(tr) // batch)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps, pct_start=0.05)
    started = time.monotonic()
    best: tuple[float, int, dict] = (float("inf"), 0, {})
    for ep in range(epochs):
        net.train()
        order = tr[torch.randperm(len(tr), generator=g)]
        total = 0.0
        for b in range(len(tr) // batch):
            i = order[b * batch:(b + 1) * batch]
            loss = (net.from_features(whole[i].float(), early[i].float()) - target[i]).pow(2).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            total += float(loss.detach())
        err = val_error(net, whole[val], early[val], target[val])
        if float(err.mean()) < best[0]:
            best = (float(err.mean()), ep + 1, {k: v.clone() for k, v in net.state_dict().items()})
        log(f"epoch {ep + 1}/{epochs}: train {total / max(1, len(tr) // batch):.4f}, held out {err.mean():.4f} "
            f"({time.monotonic() - started:.0f} s)")
    log(f"keeping epoch {best[1]}'s weights (held-out error {best[0]:.4f})")
    net.load_state_dict(best[2])
    err = val_error(net, whole[val], early[val], target[val])
    log("held-out squared error per number (in the renders' spreads): " + ", ".join(
        f"{p.name} {v:.3f}" for p, v in zip(params, err.tolist())))
    return net.eval()


@torch.no_grad()
def val_error(net: inv.InverseNet, whole: torch.Tensor, early: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    net.eval()
    out = torch.cat([net.from_features(whole[a:a + 512].float(), early[a:a + 512].float())
                     for a in range(0, len(whole), 512)])
    return (out - target).pow(2).mean(dim=0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--version", type=int, default=2, choices=VERSIONS,
                    help="the synth version the inverse is for (2: the shipped model's)")
    ap.add_argument("--anchors", type=Path, default=Path("kickserver/models/kick-synth.safetensors"),
                    help="a kick-synth model of this synth version whose kit map's numbers anchor the draws")
    ap.add_argument("--no-anchors", action="store_true", help="uniform draws only")
    ap.add_argument("--renders", type=int, default=96000)
    ap.add_argument("--shards", help="make only these shards (comma-separated), for rendering in parallel")
    ap.add_argument("--render-only", action="store_true")
    ap.add_argument("--shard-size", type=int, default=SHARD, help="renders a shard (a smoke run: a few hundred)")
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--seed", type=int, default=20261205)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--work", type=Path, default=Path("runs/synth-inverse"))
    ap.add_argument("--out", type=Path, default=None, help="default: the family folder's inverse_v<version>")
    ns = ap.parse_args()
    torch.set_num_threads(ns.threads)
    started = time.monotonic()
    cfg = inv.InverseConfig()
    anchors = None if ns.no_anchors else Anchors(ns.anchors, ns.version)
    shards = [int(v) for v in ns.shards.split(",")] if ns.shards else None
    data = make_renders(ns.work, ns.renders, anchors, cfg, ns.seed, ns.version, shards, ns.shard_size)
    log(f"renders: {len(data['u'])} kept")
    if ns.render_only:
        return
    rendered = time.monotonic()
    net = train(data, cfg, ns.epochs, ns.batch, ns.lr, ns.seed, ns.version)
    out = ns.out or inv.weights_path(ns.version)
    inv.save(net, out, ns.version, {"renders": len(data["u"]), "epochs": ns.epochs, "seed": ns.seed,
                                    "anchors": "none" if anchors is None else ns.anchors.name,
                                    "trained_by": "scripts/train_synth_inverse.py"})
    done = time.monotonic()
    log(f"wrote {out} ({out.stat().st_size / 1024:.0f} kB, {inv.n_weights(net)} weights): renders "
        f"{rendered - started:.0f} s, training {done - rendered:.0f} s, on {ns.threads} threads")
    print(json.dumps({"out": str(out), "weights": inv.n_weights(net), "render_s": round(rendered - started),
                      "train_s": round(done - rendered)}))


if __name__ == "__main__":
    main()
