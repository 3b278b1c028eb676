"""The changes `kicktrain profile` led to, each measured against what it replaced in the same run.

    python -m bench.studies.profile_changes [--vae VAE.safetensors] [--repeats 5] [--batch 64] [--out bench/results]

1. The mel front end's magnitude: hypot(re, im) of torchaudio's complex STFT (what MelFrontEnd does now)
   against torchaudio's MelSpectrogram(power=1), which takes abs() of the complex tensor. Same output.
2. Latent diffusion with augmentation off: one training step (prepare + forward + backward + optimiser)
   with the latent cache against encoding every batch through the VAE.

Timings alternate between the two variants, repeat by repeat, so a busy machine slows both alike; the
median is reported. Writes <out>/profile-changes-<cpu|cuda>.json with the machine.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench import common


def _median_ms(fn, repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1000.0)
    return out


def front_end(vae_path: Path | None, batch: int, repeats: int) -> dict:
    import torch
    import torchaudio

    from kickmodel.families import preset
    from kickmodel.families.mel_vae.mel import MelFrontEnd
    from trainer.synth import synth_batch

    cfg = preset("small", "mel_vae")
    sr, n = cfg.data.sample_rate, cfg.data.length
    front = MelFrontEnd(cfg.mel, sr, n)
    old = torchaudio.transforms.MelSpectrogram(sr, n_fft=cfg.mel.n_fft, hop_length=cfg.mel.hop, n_mels=cfg.mel.n_mels,
                                               f_min=cfg.mel.f_min, f_max=min(cfg.mel.f_max, sr / 2), power=1.0)
    x = torch.from_numpy(synth_batch(batch, seed=0, length=n))
    with torch.no_grad():
        front(x), old(x)  # warm-up
        before, after = [], []
        for _ in range(repeats):
            before += _median_ms(lambda: old(x), 1)
            after += _median_ms(lambda: front(x), 1)
        same = torch.allclose(old(x), front.mel.mel_scale(torch.stft(
            x, cfg.mel.n_fft, cfg.mel.hop, window=torch.hann_window(cfg.mel.n_fft), return_complex=True).abs()),
            atol=1e-4)
    return {"change": "mel magnitude: hypot instead of complex abs", "batch": batch,
            "before_ms": statistics.median(before), "after_ms": statistics.median(after), "same_output": bool(same)}


def latent_cache(vae_path: Path | None, batch: int, repeats: int) -> dict:
    import torch

    from kickmodel.config import AugmentConfig, ConditioningConfig
    from kickmodel.families import preset
    from kickmodel.families.mlp_denoiser import MLPDenoiser
    from kickmodel.loading import load_artifact
    from trainer.recipes.latent_diffusion import LatentObjective
    from trainer.synth import synth_batch

    with tempfile.TemporaryDirectory() as tmp:
        path = vae_path or common.random_artifact(Path(tmp) / "vae.safetensors", "mel_vae", "small")
        vae = load_artifact(path)
    off = AugmentConfig(**{f.name: 0.0 for f in dataclasses.fields(AugmentConfig) if f.name.endswith("_p")})
    cfg = preset("small", "latent_diffusion").with_section("augment", off).with_section(
        "conditioning", ConditioningConfig(controls=()))
    net = MLPDenoiser(cfg.model, vae.config.vae.latent_dim, 0)
    obj = LatentObjective(cfg, net, vae, torch.device("cpu"))
    clips = torch.from_numpy(synth_batch(81, seed=1, length=vae.config.data.length))  # the kit's training split
    opt = torch.optim.AdamW(net.parameters(), lr=1e-4)
    g = torch.Generator().manual_seed(0)
    cache = obj.cache

    def step(use_cache: bool) -> None:
        obj.cache = cache if use_cache else None
        idx = torch.randint(0, len(clips), (batch,), generator=g)
        z = obj.prepare_batch(clips[idx])
        loss, _ = obj.loss(net, z, None, None, g, 10**6)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for i in range(0, len(clips), 32):  # the cache filled, as after the first steps of a run
        obj.prepare_batch(clips[i:i + 32])
    before, after = [], []
    for _ in range(repeats):
        before += _median_ms(lambda: step(False), 1)
        after += _median_ms(lambda: step(True), 1)
    return {"change": "latent diffusion, augmentation off: latents cached", "batch": batch,
            "before_ms": statistics.median(before), "after_ms": statistics.median(after),
            "vae": Path(path).name if vae_path else "a random small mel-vae"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vae", type=Path, help="a mel-vae artifact (default: a random small one)")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=5)
    common.add_out_option(ap)
    args = ap.parse_args(argv)
    rows = [front_end(args.vae, args.batch, args.repeats), latent_cache(args.vae, args.batch, args.repeats)]
    for r in rows:
        r["speed_up"] = r["before_ms"] / r["after_ms"]
    print(common.table(rows, [("change", "change", "s"), ("batch", "batch", "d"), ("before_ms", "before ms", ".1f"),
                              ("after_ms", "after ms", ".1f"), ("speed_up", "x faster", ".2f")]))
    payload = {"suite": common.SCHEMA, "benchmark": "profile-changes", "date": common.now(),
               "machine": common.machine("cpu"), "repeats": args.repeats, "rows": rows}
    print(f"wrote {common.write_result(args.out, 'profile-changes', 'cpu', payload)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
