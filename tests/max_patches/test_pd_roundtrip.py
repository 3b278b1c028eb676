"""The Pure Data client: the project's [kickserver-osc] abstraction and the user patch, run in real Pd
(Debian's `puredata-core`, headless) against a running daemon, plus static checks of both patches.

Pd runs as `pd -nogui -nosound -nomidi -stderr -noprefs -path max_patches -open test.pd`; the test patches
(fixtures/*.pd.in, ports filled in here) print what they receive with [print KS...] and quit themselves,
with their own timeout. Pd sends every number as a float; the daemon takes integral floats as ints.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import soundfile as sf
from daemon_util import REPO

from kickserver import __version__, osc_api

MAX_PATCHES = REPO / "max_patches"
FIXTURES = Path(__file__).parent / "fixtures"
ABSTRACTION = MAX_PATCHES / "kickserver-osc.pd"
USER_PATCH = MAX_PATCHES / "kickserver.pd"
CONTROL_KEYS = {"decay", "pitch", "click"}
PD_TIMEOUT_MS = 45000  # the test patches quit themselves after this; subprocess waits a little longer


def pd_binary() -> str | None:
    return shutil.which("pd") or shutil.which("puredata")


needs_pd = pytest.mark.skipif(pd_binary() is None,
                              reason="Pure Data is not installed (Debian: apt-get install puredata-core)")


def run_pd(patch: Path, *extra: str, timeout: float = PD_TIMEOUT_MS / 1000 + 30) -> str:
    """Run Pd headless on `patch` until it quits (exit status 0, or the test fails); its console (stderr) as text."""
    cmd = [pd_binary(), "-nogui", "-nosound", "-nomidi", "-stderr", "-noprefs", "-path", str(MAX_PATCHES),
           *extra, "-open", str(patch)]
    proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)
    console = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"pd exited with status {proc.returncode}:\n{console}"
    return console


def pd_unescape(s: str) -> str:
    """Pd's console escapes spaces, commas, semicolons and dollars in symbols with a backslash."""
    return re.sub(r"\\(.)", r"\1", s)


def printed(console: str, tag: str) -> list[str]:
    """The lines a [print TAG] wrote, without the tag, unescaped."""
    return [pd_unescape(m.group(1)) for m in re.finditer(rf"^{tag}: (.*)$", console, re.M)]


def done_lines(console: str, tag: str = "KSDONE") -> list[tuple[int, Path, int]]:
    out = []
    for line in printed(console, tag):
        m = re.fullmatch(r"(-?\d+) (.+) (-?\d+)", line)
        assert m, f"unexpected {tag} line {line!r}"
        out.append((int(m.group(1)), Path(m.group(2)), int(m.group(3))))
    return out


def write_test_patch(tmp_path: Path, template: str, **values: object) -> Path:
    text = (FIXTURES / template).read_text()
    for key, value in values.items():
        text = text.replace(f"@{key}@", str(value))
    assert "@" not in text, "a placeholder was left unfilled"
    path = tmp_path / template.removesuffix(".in")
    path.write_text(text)
    return path


def wav_comment(path: Path) -> str:
    with sf.SoundFile(str(path)) as f:
        assert f.format == "WAV"
        assert f.frames > 0
        return f.comment or ""


# ---------------------------------------------------------------- static: the patches as text


def pd_boxes(path: Path) -> list[tuple[str, str]]:
    """(kind, text) of every object and message box in a .pd file, in file order, unescaped."""
    records = re.split(r"(?<!\\);\s*\n", path.read_text())
    out = []
    for rec in records:
        m = re.match(r"#X (obj|msg) -?\d+ -?\d+ ?(.*)", rec.strip(), re.S)
        if m:
            text = " ".join(pd_unescape(m.group(2)).split())
            out.append((m.group(1), re.sub(r" ([,;])", r"\1", text)))
    return out


def test_abstraction_formats_only_contract_addresses():
    boxes = pd_boxes(ABSTRACTION)
    formats = [t.split() for k, t in boxes if k == "obj" and t.startswith("oscformat")]
    addresses = {"/" + "/".join(words[1:]) for words in formats}
    assert addresses == set(osc_api.ADDRESSES)
    (route,) = [t.split() for k, t in boxes if k == "obj" and t.startswith("route generate")]
    assert {"/kick/" + w for w in route[1:]} == addresses
    objs = [t for k, t in boxes if k == "obj"]
    assert "netsend -u -b" in objs and "netreceive -u -b" in objs and "oscparse" in objs
    assert "route done error" in objs  # replies split into the outlets


def test_user_patch_sends_contract_messages():
    boxes = pd_boxes(USER_PATCH)
    (osc,) = [t for k, t in boxes if k == "obj" and t.startswith("kickserver-osc")]
    assert osc.split()[1:] == ["127.0.0.1", "9000"]
    routed = {w for k, t in pd_boxes(ABSTRACTION) if k == "obj" and t.startswith("route generate")
              for w in t.split()[1:]}
    msgs = [t for k, t in boxes if k == "msg"]
    requests = [m for m in msgs if m.split() and m.split()[0] in ("generate", "variation")]
    assert len(requests) == 2  # generate and variation, always with a seed (the patch draws random ones)
    limits = osc_api.Limits(controls=tuple(sorted(CONTROL_KEYS)))
    for m in requests:
        words = m.split()
        assert words[0] in routed
        # $n as the float Pd would send; the source of a variation is a path
        args = [("kick.wav" if (words[0] == "variation" and w == "$2") else 1.0) if w.startswith("$") else w
                for w in words[1:]]
        req = osc_api.parse("/kick/" + words[0], args, limits)
        assert req.seed is not None
        if words[0] == "generate":
            assert set(req.controls) == CONTROL_KEYS
    assert "ping, status" in msgs
    # Random on draws seeds the patch can show exactly (Pd prints six significant digits)
    (rnd,) = [t for k, t in boxes if k == "obj" and t.startswith("random ")]
    assert 0 < int(rnd.split()[1]) <= 10**6
    assert "connect 127.0.0.1 9000" in msgs


@needs_pd
@pytest.mark.parametrize("patch", [USER_PATCH, ABSTRACTION], ids=lambda p: p.name)
def test_pd_patches_load_without_errors(patch, tmp_path):
    # the abstraction opened on its own has no arguments: it must stay quiet (no connect, no listen)
    console = run_pd(patch, "-verbose", "-send", "pd quit", timeout=60)  # exit status 0 checked there
    # -verbose names each file Pd opened: the patch (and, from the user patch, the abstraction) did load
    opened = set(re.findall(r"^verbose\(\d+\): tried (.+) and succeeded$", console, re.M))
    assert str(patch) in opened, console
    if patch == USER_PATCH:
        assert str(ABSTRACTION) in opened, console
    # the path search's misses ("tried X and failed") are Pd looking along its path, not errors
    bad = [ln for ln in console.splitlines()
           if re.search(r"couldn't create|error|failed|bad arguments|no such object", ln, re.I)
           and not re.match(r"verbose\(\d+\): tried .+ and failed$", ln)]
    assert not bad, console


# ---------------------------------------------------------------- round trips with a running daemon


@needs_pd
@pytest.mark.parametrize("replies", ["reply-port", "source-port"])
def test_pd_abstraction_generates_a_kick(kick_daemon, tmp_path, replies):
    """[kickserver-osc] sends /kick/generate 1 seed 7 steps 2; the /kick/done comes back; the file is there.

    reply-port: [netreceive] listens on the daemon's --reply-port (as Max's [udpreceive 9001] does);
    source-port: the replies to the port [netsend] sent from, read from its second outlet.
    """
    reply_port = kick_daemon.reply_port if replies == "reply-port" else 0
    patch = write_test_patch(tmp_path, "pd_roundtrip.pd.in", PORT=kick_daemon.port, REPLYPORT=reply_port,
                             TIMEOUT_MS=PD_TIMEOUT_MS)
    console = run_pd(patch)
    assert not printed(console, "KSTIMEOUT"), console
    assert not printed(console, "KSERROR"), console
    assert printed(console, "KSREPLY") == [f"pong {__version__}"], console
    (done,) = done_lines(console)
    _id, path, seed = done
    assert seed == 7
    assert path.is_absolute() and path.parent == kick_daemon.out_dir.resolve()
    assert path.is_file() and path.suffix == ".wav"
    comment = wav_comment(path)
    assert "seed=7" in comment.split() and "steps=2" in comment.split(), comment


@needs_pd
def test_pd_user_patch_generates_and_varies(kick_daemon, tmp_path):
    """The user patch, driven through its controls' receive names: Generate with seed 7, Vary the result,
    then Generate with Random on (the patch draws the seed: below 10^6, which Pd prints exactly)."""
    patch = write_test_patch(tmp_path, "pd_ui_roundtrip.pd.in", PORT=kick_daemon.port, TIMEOUT_MS=PD_TIMEOUT_MS)
    console = run_pd(patch)
    assert not printed(console, "KSTIMEOUT"), console
    assert not printed(console, "KSERROR"), console
    (first, second, third) = done_lines(console)
    # the user patch logs the same replies itself
    assert [d[1] for d in done_lines(console, "kickserver-done")] == [first[1], second[1], third[1]]

    _id, kick, seed = first
    assert seed == 7 and kick.is_file()
    words = wav_comment(kick).split()
    assert {"seed=7", "steps=2", "decay=0.2500", "pitch=0.5000", "click=0.5000"} <= set(words), words

    _id, variation, seed = second
    assert seed == 7 and variation.is_file() and variation != kick
    words = wav_comment(variation).split()
    assert f"source={kick.name}" in words and "strength=0.3000" in words, words

    _id, kick, seed = third
    assert 0 <= seed < 10**6 and kick.is_file()
    assert re.fullmatch(rf"kick_\d{{8}}-\d{{6}}_{seed}(-\d+)?\.wav", kick.name), kick.name
    assert f"seed={seed}" in wav_comment(kick).split()
