"""Pitch sweep and haze of mel-VAE reconstructions and of generated kicks (bench/studies/gpu_vae_variants.sh).

    python -m bench.studies.vae_pitch_check vae VAE.safetensors ...   # Griffin-Lim of each VAE's reconstruction of the
                                                              # held-out and training clips (20 % split), NNLS off/on
    python -m bench.studies.vae_pitch_check ld MODEL.safetensors ...  # 64 generated kicks per model

Prints one JSON line per model, then all of them in one JSON line (the last line).
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

from bench.sound_check import measure
from kickmodel.families.mel_vae.generator import build_parts
from kickmodel.generator import Item
from kickmodel.loading import load_artifact, load_generator
from trainer.data import prepare

KIT = Path(__file__).resolve().parents[2] / "kickserver" / "data" / "kicks"


def summary(audio: np.ndarray, sample_rate: int) -> dict[str, float]:
    r = measure(audio, sample_rate)
    return {"pitch_drop": float(r["pitch_drop"].mean()), "start_hz": float(np.median(r["pitch_start_hz"])),
            "end_hz": float(np.median(r["pitch_end_hz"])), "haze_db": float(np.median(r["body_hf_db"]))}


def check_vaes(paths: list[str], dev: torch.device) -> dict:
    res: dict = {}
    clips = None
    for p in paths:
        art = load_artifact(Path(p))
        front, vae, inv = build_parts(art, dev)
        cfg = art.config.data
        if clips is None:
            ds = prepare([KIT], cfg, Path(tempfile.mkdtemp()))
            tr, va = ds.split(0.2)
            clips = torch.tensor(np.asarray(ds.audio)).float()
            res["real"] = {"heldout": summary(clips[va].numpy(), cfg.sample_rate),
                           "train": summary(clips[tr].numpy(), cfg.sample_rate)}
        out: dict = {"step": art.step}
        with torch.no_grad():
            for name, idx in (("heldout", va), ("train", tr)):
                mel = front(clips[idx].to(dev))
                mel_hat = vae.decode(vae.encode(mel)[0])
                out[name + "_l1"] = float((mel_hat - mel).abs().mean())
                for iters in (0, 30):
                    inv.nnls_iters = iters
                    out[f"{name}_nnls{iters}"] = summary(inv(mel_hat).float().cpu().numpy(), cfg.sample_rate)
        res[Path(p).stem] = out
        print(Path(p).stem, json.dumps(out), flush=True)
    return res


def check_models(paths: list[str], dev: torch.device) -> dict:
    res = {}
    items = [Item(seed=1000 + i) for i in range(64)]
    for p in paths:
        g = load_generator(p, dev)
        res[Path(p).stem] = summary(g.generate(items, g.settings()), g.sample_rate) | {"step": g.artifact.step}
        print(Path(p).stem, json.dumps(res[Path(p).stem]), flush=True)
    return res


def main() -> None:
    mode, paths = sys.argv[1], sys.argv[2:]
    if mode not in ("vae", "ld") or not paths:
        sys.exit(__doc__)
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    res = check_vaes(paths, dev) if mode == "vae" else check_models(paths, dev)
    print(json.dumps(res))


if __name__ == "__main__":
    main()
