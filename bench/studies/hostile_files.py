"""What a small hostile file costs: the daemon's peak memory for odd-rate sources, and an artifact's refusal.

    python bench/studies/hostile_files.py sources             # the bundled model; VmRSS idle, VmHWM per source
    python bench/studies/hostile_files.py sources --rates 9071 --limit-gb 12
    python bench/studies/hostile_files.py sources --rates 191999 --seconds 20 --channels 2   # near the largest accepted
    python bench/studies/hostile_files.py artifact            # time and peak RSS of refusing a costly mel-VAE artifact

`sources` starts `python -m kickserver serve` (this checkout; CPU, one thread) on free loopback ports with an
empty models folder (so the bundled model serves), warms it with a kick and a variation of a 48 kHz source,
reads its idle VmRSS, then for each rate writes a 0.2 s 16-bit WAV (a few KB) into the output folder, resets
the daemon's peak RSS (/proc/PID/clear_refs 5), sends /kick/variation with it and reads VmHWM after the reply.
--limit-gb caps the daemon's address space (prlimit) above its size at idle, so a version that blows up fails
instead of taking the machine. `artifact` writes a mel-VAE artifact whose config asks for a 192000-sample
clip at mel hop 16, n_fft 8192 and 256 mels (203 KB that would cost 1.8 TFLOP and 2 GB a kick; it used to
be accepted) and times `check_artifact` on it in a fresh process. Figures go to stdout (docs/daemon.md quotes them).
"""

from __future__ import annotations

import argparse
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _status(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(key)


def _send(port: int, address: str, *args: object, timeout: float = 120.0) -> tuple[str, list]:
    """The first reply to one message (kickserver.client); TimeoutError when none comes within timeout s."""
    from kickserver.client import Client

    replies = Client("127.0.0.1", port, bind=("127.0.0.1", 0)).send(address, *args, timeout=timeout)
    if not replies:
        raise TimeoutError(f"no reply to {address} within {timeout:g} s")
    return replies[0]


def _kick(path: Path, sr: int, seconds: float = 0.2, channels: int = 1) -> Path:
    import soundfile as sf

    t = np.arange(int(seconds * sr)) / sr
    x = (0.8 * np.sin(2 * np.pi * 60 * t) * np.exp(-t * 20)).astype(np.float32)
    sf.write(path, np.repeat(x[:, None], channels, axis=1), sr, subtype="PCM_16")
    return path


def sources(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "models").mkdir()
        out = work / "out"
        port, reply_port = _free_port(), _free_port()
        (work / "empty.toml").write_text("")
        cmd = [sys.executable, "-m", "kickserver", "serve", "--config", str(work / "empty.toml"), "--device", "cpu",
               "--threads", "1", "--port", str(port), "--reply-port", str(reply_port), "--out", str(out),
               "--models", str(work / "models")]
        env = dict(os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")
        env["PYTHONPATH"] = str(REPO)
        log = work / "daemon.log"
        with open(log, "wb") as f:
            proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=f, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 180
            while True:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"the daemon did not start:\n{log.read_text()}")
                try:
                    if _send(port, "/kick/ping", timeout=0.5)[0] == "/kick/pong":
                        break
                except TimeoutError:
                    pass
            _send(port, "/kick/generate")
            _kick(out / "common.wav", 48000)
            _send(port, "/kick/variation", "common.wav", "strength", 0.5)
            idle = _status(proc.pid, "VmRSS")
            print(f"idle VmRSS {idle / 2**20:.0f} MB (after a kick and a 48 kHz variation)")
            if args.limit_gb:
                cap = _status(proc.pid, "VmSize") + int(args.limit_gb * 2**30)
                resource.prlimit(proc.pid, resource.RLIMIT_AS, (cap, resource.RLIM_INFINITY))
            for sr in args.rates:
                src = _kick(out / f"src{sr}.wav", sr, args.seconds, args.channels)
                Path(f"/proc/{proc.pid}/clear_refs").write_text("5")
                t0 = time.perf_counter()
                addr, params = _send(port, "/kick/variation", src.name, "strength", 0.5)
                took = time.perf_counter() - t0
                hwm = _status(proc.pid, "VmHWM")
                print(f"{sr:>6} Hz source ({src.stat().st_size} B): {addr} in {took:.2f} s, peak VmHWM "
                      f"{hwm / 2**20:.0f} MB (+{(hwm - idle) / 2**20:.0f} MB over idle)"
                      + ("" if addr == "/kick/done" else f": {str(params[-1])[:120]}"))
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


ARTIFACT_CHILD = """
import resource, sys, time
from kickmodel.artifact import ArtifactError
from kickmodel.loading import check_artifact
from kickmodel.families import get_family
get_family("mel_vae")
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
for what in ("first check", "again"):
    t0 = time.perf_counter()
    try:
        check_artifact(sys.argv[1])
        verdict = "accepted"
    except ArtifactError as e:
        verdict = "refused: " + str(e)
    took = time.perf_counter() - t0
    grew = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) / 1024
    print(f"{what}: {verdict}\\n  in {took * 1000:.0f} ms, peak RSS +{grew:.0f} MB over the imports")
"""


def artifact(args: argparse.Namespace) -> None:
    import torch

    from kickmodel.families import get_family, preset
    from kickmodel.loading import save_artifact

    cfg = preset("tiny", "mel_vae")
    cfg = cfg.replace("data", length=192000).replace("mel", hop=16, n_fft=8192, n_mels=256)
    cfg = cfg.replace("inverter", kind="griffin-lim")
    with torch.device("meta"):
        shapes = {f"{p}.{k}": tuple(v.shape) for p, m in get_family("mel_vae").part_modules({"vae": cfg}).items()
                  for k, v in m.state_dict().items()}
    tensors = {k: torch.zeros(s) for k, s in shapes.items()}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "costly.safetensors"
        save_artifact(path, tensors, cfg, step=0, control_quantiles=[[0.0, 1.0]] * len(cfg.controls))
        print(f"{path.name}: {path.stat().st_size / 1024:.0f} KB, data.length 192000, mel hop 16, n_fft 8192, "
              "256 mels, griffin-lim")
        env = dict(os.environ, PYTHONPATH=str(REPO))
        proc = subprocess.run([sys.executable, "-c", ARTIFACT_CHILD, str(path)], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=600)
        print(proc.stdout.strip() or proc.stderr[-2000:])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="what", required=True)
    s = sub.add_parser("sources")
    s.add_argument("--rates", type=int, nargs="+", default=[48000, 9071, 13001])
    s.add_argument("--limit-gb", type=float, default=0.0, help="cap the daemon's address space this far above idle")
    s.add_argument("--seconds", type=float, default=0.2, help="length of each source (the largest accepted: "
                   "--rates 192000 --seconds 20 --channels 2, 7.7 M samples)")
    s.add_argument("--channels", type=int, default=1)
    sub.add_parser("artifact")
    args = p.parse_args()
    sources(args) if args.what == "sources" else artifact(args)


if __name__ == "__main__":
    main()
