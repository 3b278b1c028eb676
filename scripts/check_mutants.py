"""Put each bug of MUTANTS (bugs the code once had or could easily get, each beside the tests that must catch it)
into a scratch copy of the code and check that those tests fail.

    python scripts/check_mutants.py [NAME ...]        # all of them by default; exit status 1 if one survives

Each mutant is one textual replacement in one file (the replaced text must occur exactly once, so a
mutant cannot silently stop applying when the code changes) and the tests that must catch it. The
scratch copy is the working tree's tracked files under a temporary folder; the repository is never
touched. A run prints one line per mutant: killed (the tests failed, as they must) or SURVIVED.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

MUTANTS = {
    "dpmpp-first-order": (
        "kickmodel/diffusion.py",
        "d = (1 + 1 / (2 * r)) * x0 - (1 / (2 * r)) * old_x0",
        "d = x0",
        ["tests/kickmodel/test_diffusion.py"]),
    "atomic-write-in-place": (
        "kickmodel/fsutil.py",
        'fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)',
        "fd, tmp = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), str(path)",
        ["tests/kickmodel/test_fsutil.py"]),
    "name-counter-skips": (
        "kickserver/writer.py",
        "while os.path.lexists(self.out_dir / name):\n            n += 1\n",
        "while os.path.lexists(self.out_dir / name):\n            n += 1 if n == 1 else 8\n",
        ["tests/kickserver/test_writer.py"]),
    "path-check-by-prefix": (
        "kickserver/sources.py",
        "        Path(path).relative_to(root)\n        return True",
        "        return str(path).startswith(str(root))",
        ["tests/kickserver/test_sources.py"]),
    "resume-restarts-at-zero": (
        "trainer/train.py",
        'self.step = int(state["step"])',
        "self.step = 0",
        ["tests/trainer/test_train.py", "-k", "resume"]),
    # notes, the smpl chunk, kits
    "octave-off-by-one": (
        "kickmodel/notes.py",
        "return _midi_in_range((octave + 1) * 12",
        "return _midi_in_range((octave + 2) * 12",
        ["tests/kickmodel/test_notes.py"]),
    "smpl-nearest-note": (
        "kickmodel/wavfile.py",
        "note = math.floor(m + 1e-9)",
        "note = math.floor(m + 0.5)",
        ["tests/kickmodel/test_wav_smpl.py"]),
    "layer-without-tilt": (
        "kickmodel/kitrules.py",
        "y = high_shelf(y, sample_rate, -TILT_RANGE_DB * (1.0 - p))",
        "y = high_shelf(y, sample_rate, 0.0)",
        ["tests/kickmodel/test_kitrules.py"]),
    "kit-without-beater": (
        "kickmodel/kitrules.py",
        "if own >= BEATER_TOP_DB or not np.any(x):",
        "if True:",
        ["tests/kickmodel/test_kit_shipped.py"]),
    "drumgizmo-power-per-robin": (
        "kickserver/kitfiles.py",
        'power=f"{power:g}")',
        'power=f"{power + 3 * r:g}")',
        ["tests/kickserver/test_kitfiles.py", "-k", "drumgizmo_renders"]),
    "hydrogen-no-round-robin": (
        "kickserver/kitfiles.py",
        '"ROUND_ROBIN" if h_robins > 1 else "VELOCITY"',
        '"VELOCITY"',
        ["tests/kickserver/test_kitfiles.py", "-k", "hydrogen_plays"]),
    "kit-replaces-a-folder": (
        "kickserver/kitfiles.py",
        "if not publish(tmp, target):",
        "if os.replace(tmp, target) is not None:",
        ["tests/kickserver/test_kitfiles.py", "-k", "appearing"]),
    "kit-temp-left-behind": (
        "kickserver/kitfiles.py",
        "        shutil.rmtree(tmp, ignore_errors=True)\n        if isinstance(e, FileExistsError):",
        "        if isinstance(e, FileExistsError):",
        ["tests/kickserver/test_kitfiles.py", "-k", "failed_write or full_disk"]),
    "kit-pruned-in-sight": (
        "kickserver/writer.py",
        "            os.rename(name, hidden, src_dir_fd=self._fd, dst_dir_fd=self._fd)\n",
        "            hidden = name\n",
        ["tests/kickserver/test_kit_retention.py", "-k", "as_a_whole"]),
    "kick-synth-kit-by-audio-rules": (
        "kickmodel/generator.py",
        'return "numbers" if KIT_NUMBERS in self.capabilities and not (source and strength == 0.0) else "audio"',
        'return "audio"',
        ["tests/kickserver/test_kit_daemon.py", "-k", "number_rules"]),
}


def scratch_copy(dst: Path) -> None:
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout.split(b"\0")
    for name in filter(None, files):
        src = REPO / name.decode()
        if src.is_file() and not src.is_symlink():
            (dst / name.decode()).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst / name.decode())


def run(name: str) -> bool:
    """True when the mutant is killed (its tests fail)."""
    path, old, new, tests = MUTANTS[name]
    with tempfile.TemporaryDirectory(prefix=f"mutant-{name}-") as tmp:
        root = Path(tmp)
        scratch_copy(root)
        text = (root / path).read_text()
        if text.count(old) != 1:
            raise SystemExit(f"{name}: the text to replace occurs {text.count(old)} times in {path}; update the mutant")
        (root / path).write_text(text.replace(old, new))
        env = dict(os.environ, PYTHONPATH=str(root), PYTHONDONTWRITEBYTECODE="1")
        t0 = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *tests],
                              cwd=root, env=env, capture_output=True, text=True)
        last = (proc.stdout.strip().splitlines() or ["(no output)"])[-1]
        killed = proc.returncode == 1  # tests failed; 4 (bad path), 5 (no test ran) and crashes prove nothing
        verdict = "killed" if killed else f"SURVIVED (pytest exit {proc.returncode})"
        print(f"{name:<26} {verdict} in {time.monotonic() - t0:.0f} s: {last}", flush=True)
        return killed


def main(argv: list[str]) -> int:
    names = argv or list(MUTANTS)
    unknown = [n for n in names if n not in MUTANTS]
    if unknown:
        print(f"unknown mutant(s) {', '.join(unknown)}; choose from {', '.join(MUTANTS)}", file=sys.stderr)
        return 2
    survived = [n for n in names if not run(n)]
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
