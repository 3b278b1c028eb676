"""The Pure Data client: the project's [kickserver-osc] abstraction and the user patch, run in real Pd
(Debian's `puredata-core`, headless) against a running daemon, plus static checks of both patches.

Pd runs as `pd -nogui -nosound -nomidi -stderr -noprefs -path max_patches -open test.pd`; the test patches
(fixtures/*.pd.in, ports filled in here) print what they receive with [print KS...] and quit themselves,
with their own timeout. Pd sends every number as a float; the daemon takes integral floats as ints.
"""

from __future__ import annotations

import difflib
import re
import shutil
import socket
import subprocess
import threading
from pathlib import Path

import pytest
import soundfile as sf
from daemon_util import REPO, build_message, parse_replies

from kickserver import __version__, osc_api

MAX_PATCHES = REPO / "max_patches"
FIXTURES = Path(__file__).parent / "fixtures"
ABSTRACTION = MAX_PATCHES / "kickserver-osc.pd"
USER_PATCH = MAX_PATCHES / "kickserver.pd"
CONTROL_KEYS = {"decay", "pitch", "click"}
# the XY pad's OSC, fixed in the contract before the daemon serves it
MAP, MAP_AXES, NEAR, LOCATE = "/kick/map", "/kick/map/axes", "/kick/near", "/kick/locate"
PAD_REQUESTS = {MAP, NEAR, LOCATE}
# /kick/kit as docs/kits.md fixes it (the daemon's route may come later): key/value pairs, one origin (a seed or a
# source file), layers 1..8, robins 1..4, a note (a name or a MIDI number) or the pitch_hz unit or the pitch dial
KIT, KIT_DONE = "/kick/kit", "/kick/kit/done"
KIT_KEYS = {"id", "seed", "source", "strength", "layers", "robins", "note", "key", "steps", "sampler"}
PITCH_PART = ["pitch", 0.5]  # what the patch appends to a request when neither a note nor Hz is set
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
    assert addresses == set(osc_api.ADDRESSES) | PAD_REQUESTS | {KIT}
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
        req = osc_api.parse("/kick/" + words[0], args + (PITCH_PART if words[0] == "generate" else []), limits)
        assert req.seed is not None
        if words[0] == "generate":
            assert set(req.controls) == CONTROL_KEYS
            assert "pitch" not in words  # the pitch is the pitch part, appended at the press (note, Hz or dial)
    assert "ping, status, controls" in msgs
    # the pitch part: `note <the note box>`, else `pitch_hz <the Hz box>`, else `pitch <the dial>`
    assert {"pitch $1", "pitch_hz $1"} <= set(msgs) and "list prepend note" in [t for k, t in boxes if k == "obj"]
    # Morph: [pack] values -> "count $2 decay $3 click $4", the pitch part appended, "b <last>" and "a <A>"
    # prepended, then the address word; the ends are the seeds Pd sends as floats, or paths
    (morph,) = [m for m in msgs if m.startswith("count ")]
    objs = [t for k, t in boxes if k == "obj"]
    assert {"list prepend a", "list prepend b", "list prepend interpolate"} <= set(objs)
    words = ["a", 5.0, "b", "/tmp/kick_20260101-000000_t500.wav"] + [1.0 if w.startswith("$") else w
                                                                      for w in morph.split()] + PITCH_PART
    req = osc_api.parse(osc_api.INTERPOLATE, words, limits)
    assert (req.a, req.b, req.ts) == (5, "/tmp/kick_20260101-000000_t500.wav", [0.5])
    assert set(req.controls) == CONTROL_KEYS and "interpolate" in routed and "controls" in routed
    # the request messages carry no steps: "steps N" is appended only when Steps is 1..200 (0: the model's own)
    assert not any("steps" in m.split() for m in requests)
    assert "steps $1" in msgs
    (steps_atom,) = [ln for ln in USER_PATCH.read_text().splitlines()
                     if ln.startswith("#X floatatom") and " steps " in ln]
    assert steps_atom.split()[5:7] == ["0", "200"], steps_atom
    # Random on draws seeds the patch can show exactly (Pd prints six significant digits)
    (rnd,) = [t for k, t in boxes if k == "obj" and t.startswith("random ")]
    assert 0 < float(rnd.split()[1]) <= 10**6
    # a seed typed or sent to ks-seed is kept below 2^24, where Pd's 32-bit floats stop holding every integer;
    # the bound is written (1<<24)-1, not 16777215, which Pd would save as 1.67772e+07 (16777200)
    assert "expr min(max($f1, 0), (1<<24)-1)" in [t for k, t in boxes if k == "obj"]
    assert "; ks-osc connect 127.0.0.1 9000" in msgs  # the connect box on the face sends to the abstraction


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


@pytest.mark.parametrize("patch", [USER_PATCH, ABSTRACTION], ids=lambda p: p.name)
def test_patches_hold_no_number_pd_would_round_when_it_saves(patch):
    """Pd saves a float with six significant digits (%g): 16777215 comes back as 1.67772e+07 (16777200). No
    number in the patches may need more, so a patch saved by Pd means what the file here means."""
    for rec in re.split(r"(?<!\\);\s*\n", patch.read_text()):
        for word in rec.split():
            try:
                value = float(word)
            except ValueError:
                continue
            assert float(f"{value:g}") == value, (word, rec)


def top_level(path: Path) -> tuple[list[str], list[list[str]], list[tuple[int, int, int, int]]]:
    """The top-level canvas of a .pd file: its header words, its objects' words (a subpatch as its `#X restore`
    line, its `#X coords` as the last entry when it has one) and its connections."""
    records = [re.sub(r",( f \d+)$", r" ,\1", " ".join(r.split()))  # an empty box's width: "#X msg 5 6, f 52"
               for r in re.split(r"(?<!\\);\s*\n", path.read_text()) if r.strip()]
    header, objects, cords, depth = records[0].split(), [], [], 0
    for rec in records[1:]:
        if rec.startswith("#N canvas"):
            depth += 1
        elif rec.startswith("#X restore"):
            depth -= 1
            if depth == 0:
                objects.append(rec.split())
        elif depth == 0 and rec.startswith("#X connect"):
            cords.append(tuple(int(w) for w in rec.split()[2:6]))
        elif depth == 0:
            objects.append(rec.split())
    return header, objects, cords


CHAR_W, LINE_H = 7, 19  # DejaVu Sans Mono at Pd's font size 12: a character's width, a box's height


def face_boxes(objects: list[list[str]]) -> list[tuple[str, tuple[int, int, int, int]]]:
    """(what, (x0, y0, x1, y1)) of each thing drawn on the face: a control, its label, a display box."""
    out = []
    for w in objects:
        if w[1] not in ("obj", "msg", "floatatom", "symbolatom", "restore"):
            continue
        x, y = int(w[2]), int(w[3])
        if w[1] in ("floatatom", "symbolatom"):
            width = int(w[4]) * CHAR_W + 4
            out.append((w[8], (x, y, x + width, y + LINE_H)))
            if w[8] != "-":  # label on the right (position 1)
                out.append(("label " + w[8], (x + width + 2, y, x + width + 2 + len(w[8]) * CHAR_W, y + LINE_H)))
        elif w[1] == "obj" and w[4] in ("bng", "tgl", "hsl", "vsl", "cnv"):
            size = {"bng": (5, 5), "tgl": (5, 5), "hsl": (5, 6), "vsl": (5, 6), "cnv": (6, 7)}[w[4]]
            label_at = {"bng": 11, "tgl": 9, "hsl": 13, "vsl": 13, "cnv": 10}[w[4]]
            wd, ht = int(w[size[0]]), int(w[size[1]])
            out.append((w[4] + " " + w[label_at - 1], (x, y, x + wd, y + ht)))
            label = w[label_at]
            if label != "empty" and w[4] != "cnv":  # a header's label lies on its own bar
                lx, ly = x + int(w[label_at + 1]), y + int(w[label_at + 2])
                out.append(("label " + label, (lx, ly - 7, lx + len(label) * CHAR_W, ly + 7)))
        elif w[1] == "msg":
            m = re.search(r", f (\d+)$", " ".join(w))
            text = " ".join(w[4:])
            lines = 2 if text.startswith("\\;") else 1
            out.append(("msg " + text, (x, y, x + (int(m.group(1)) if m else len(text)) * CHAR_W, y + LINE_H * lines)))
        elif w[1] == "restore" and w[-1] == "ks-pad":
            out.append(("pad", (x, y, x + 120, y + 120)))
    return out


def test_user_patch_is_a_panel():
    """The user patch opens as a panel: a graph-on-parent face that its window holds, with the controls and displays
    and no logic (that is in [pd logic], kickserver-osc included); no cord on the face but the zero-length ones from
    a display's [r] (hidden under its header bar) into the display; nothing drawn over anything else (controls,
    their labels, display boxes), nothing outside the face."""
    header, objects, cords = top_level(USER_PATCH)
    coords = objects[-1]
    assert coords[:2] == ["#X", "coords"] and coords[8] in ("1", "2"), coords  # graph on parent (2: name hidden)
    face_w, face_h = int(coords[6]), int(coords[7])
    win_w, win_h = int(header[4]), int(header[5])
    assert face_w <= win_w and face_h + 30 <= win_h, (header, coords)  # the window holds the face (and menu)
    kinds = set()
    for w in objects[:-1]:
        if w[1] == "obj":
            kinds.add(w[4] if w[4] != "r" else "r " + w[5].split("-")[1])
        else:
            kinds.add(w[1] if w[1] != "restore" else "pd " + w[-1])
    assert kinds <= {"bng", "tgl", "hsl", "vsl", "cnv", "floatatom", "symbolatom", "msg", "text", "r show",
                     "pd ks-pad", "pd logic"}, kinds
    assert "kickserver-osc" in {w[4] for w in map(str.split, USER_PATCH.read_text().splitlines())
                                if len(w) > 4 and w[1] == "obj"}
    for src, _, dst, _ in cords:
        r, box = objects[src], objects[dst]
        assert r[4] == "r" and r[5].startswith("ks-show-") and box[1] == "msg", (r, box)
        assert int(box[2]) == int(r[2]) and 0 <= int(box[3]) - int(r[3]) - LINE_H <= 2, (r, box)  # no cord shows
        (bar,) = [w for w in objects if w[1] == "obj" and w[4] == "cnv" and w[2:4] == r[2:4]]
        assert int(bar[6]) >= len(" ".join(r[4:])) * CHAR_W and int(bar[7]) >= LINE_H, (bar, r)  # hides the [r]
    drawn = face_boxes(objects)
    for what, (x0, y0, x1, y1) in drawn:
        assert 0 <= x0 and 0 <= y0 and x1 <= face_w and y1 <= face_h, (what, (x0, y0, x1, y1), (face_w, face_h))
    bars = [b for what, b in drawn if what.startswith("cnv ")]
    for i, (a, (ax0, ay0, ax1, ay1)) in enumerate(drawn):
        for b, (bx0, by0, bx1, by1) in drawn[i + 1:]:
            if a.startswith("cnv ") or b.startswith("cnv "):
                continue  # the header bars and the pad's background: drawn under what lies on them
            assert ax1 <= bx0 or bx1 <= ax0 or ay1 <= by0 or by1 <= ay0, f"{a!r} overlaps {b!r}"
    assert bars


@needs_pd
@pytest.mark.parametrize("patch", [USER_PATCH, ABSTRACTION], ids=lambda p: p.name)
def test_pd_saves_the_patches_unchanged(patch, tmp_path):
    """Load each patch in Pd (headless), let it save itself (`pd-<name> menusave`), diff: the file is in Pd 0.53's
    own form and no number is rewritten (16777215 would come back as 1.67772e+07)."""
    for f in (USER_PATCH, ABSTRACTION):
        shutil.copy2(f, tmp_path / f.name)
    saved = tmp_path / patch.name
    console = run_pd(saved, "-send", f"pd-{patch.name} menusave; pd quit", timeout=60)
    assert f"saved to: {saved}" in console, console
    assert saved.read_text() == patch.read_text(), "".join(difflib.unified_diff(
        patch.read_text().splitlines(True), saved.read_text().splitlines(True), "as committed", "as Pd saves"))


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
    assert seed == osc_api.NO_SEED and variation.is_file() and variation != kick  # no generate seed makes it
    words = wav_comment(variation).split()
    assert f"source={kick.name}" in words and "strength=0.3000" in words and "seed=7" in words, words

    _id, kick, seed = third
    assert 0 <= seed < 10**6 and kick.is_file()
    assert re.fullmatch(rf"kick_(?:[A-G]b?-?\d+_)?[a-z]+_{seed}(-\d+)?\.wav", kick.name), kick.name
    assert f"seed={seed}" in wav_comment(kick).split()


# ---------------------------------------------------------------- what the user patch sends and shows


class FakeDaemon:
    """A UDP stand-in for the daemon: records each request; answers /kick/generate with /kick/done (ids 1, 2, ...,
    the request's seed), /kick/model NAME with /kick/model NAME (after which it serves a model whose only control
    is decay), /kick/controls with the serving model's controls, and anything else with /kick/error `reason`, to
    the port the request came from."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        self.requests: list[tuple[str, list]] = []
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        self.kicks = 0
        self.controls = ["decay", "pitch", "click"]
        while not self._stop.is_set():
            try:
                data, addr = self.sock.recvfrom(65536)
            except (TimeoutError, OSError):
                continue
            for address, args in parse_replies(data):
                self.requests.append((address, args))
                for reply in self.answer(address, args):
                    self.sock.sendto(reply, addr)

    def answer(self, address: str, args: list) -> list[bytes]:
        """The replies to one request (see the class doc)."""
        if address == osc_api.GENERATE:
            self.kicks += 1
            seed = int(args[args.index("seed") + 1])
            return [build_message(osc_api.DONE, [("i", self.kicks), ("s", f"/tmp/kick_{seed}.wav"), ("i", seed)])]
        if address == osc_api.MODEL:
            self.controls = ["decay"]
            return [build_message(osc_api.MODEL, [("s", args[0])])]
        if address == osc_api.CONTROLS:
            return [build_message(osc_api.CONTROLS, [("s", c) for c in self.controls])]
        return [build_message(osc_api.ERROR, [("i", self.kicks), ("s", self.reason)])]

    def close(self) -> None:
        self._stop.set()
        self.thread.join(timeout=5)
        self.sock.close()


def saved_message_boxes(path: Path) -> list[str]:
    """The contents of every message box in a saved .pd file, as saved (escapes kept; without the box's width,
    the `, f N` Pd saves after the contents)."""
    records = re.split(r"(?<!\\);\s*\n", path.read_text())
    return [re.sub(r", f \d+$", "", " ".join(m.group(1).split())) for rec in records
            if (m := re.match(r"#X msg -?\d+ -?\d+ ?(.*)", rec.strip(), re.S))]


def run_beside_user_patch(tmp_path: Path, template: str, port: int) -> tuple[str, Path]:
    """Run the test patch `template` (its daemon at `port`) beside a copy of the user patch, which Pd may save
    (menusave) so the test can read what it shows: the console and that copy."""
    ui = tmp_path / "ui"
    ui.mkdir()
    for f in (USER_PATCH, ABSTRACTION):
        shutil.copy2(f, ui / f.name)
    patch = write_test_patch(tmp_path, template, PORT=port, TIMEOUT_MS=PD_TIMEOUT_MS)
    return run_pd(patch, "-open", str(ui / USER_PATCH.name)), ui / USER_PATCH.name


def run_against_stand_in(tmp_path: Path, template: str, fake: FakeDaemon, bad: str) -> tuple[str, Path]:
    """run_beside_user_patch against the stand-in `fake` (closed after): the run must end neither at the timeout nor at
    an error reply, and no console line but the patch's own error log may match `bad`."""
    try:
        console, saved = run_beside_user_patch(tmp_path, template, fake.port)
    finally:
        fake.close()
    assert not printed(console, "KSTIMEOUT"), console
    assert not printed(console, "KSERROR"), console
    assert not [ln for ln in console.splitlines() if re.search(bad, ln, re.I)
                and not ln.startswith("kickserver-error:")], console
    return console, saved


@needs_pd
def test_pd_user_patch_sends_steps_only_when_set_and_shows_replies_readably(tmp_path):
    """The user patch, in real Pd, against a stand-in daemon: with Steps at its default no `steps` key is sent
    (the model's own), with Steps 7 it is; a seed above 10^6 is shown whole (not 1.23457e+07); an error reason
    shows as words (not one symbol with every space escaped as a backslash-space). It asks /kick/controls when it
    connects and again after /kick/model answers, and shows the new model's dials."""
    reason = "unknown key 'bogus'; this request takes id, count, seed, steps"
    fake = FakeDaemon(reason)
    try:
        console, saved = run_beside_user_patch(tmp_path, "pd_ui_display.pd.in", fake.port)
    finally:
        fake.close()
    assert not printed(console, "KSTIMEOUT"), console
    bad = [ln for ln in console.splitlines() if re.search(r"error|couldn't create|bad arguments", ln, re.I)
           and not ln.startswith("kickserver-error:")]
    assert not bad, console

    addresses = [a for a, _ in fake.requests]
    # connect: controls; the model swap: model, then controls again once it answered (among the kicks)
    assert addresses[:2] == [osc_api.CONTROLS, osc_api.MODEL], fake.requests
    assert addresses.count(osc_api.CONTROLS) == 2 and fake.requests[1] == (osc_api.MODEL, ["other"])
    kicks = [(a, args) for a, args in fake.requests if a not in (osc_api.CONTROLS, osc_api.MODEL)]
    assert [a for a, _ in kicks] == [osc_api.GENERATE, osc_api.GENERATE, osc_api.VARIATION], fake.requests
    first, second, vary = (args for _, args in kicks)
    assert "steps" not in first, first  # Steps left at 0: the daemon uses the model's default
    assert first[first.index("seed") + 1] == 12345678
    assert second[second.index("steps") + 1] == 7
    assert vary[vary.index("steps") + 1] == 7 and vary[0] == "/tmp/kick_12345678.wav"
    limits = osc_api.Limits(controls=tuple(sorted(CONTROL_KEYS)))
    assert osc_api.parse(osc_api.GENERATE, first, limits).steps is None

    shown = saved_message_boxes(saved)
    (dials,) = [m for m in shown if m.startswith("dials:")]
    assert dials == "dials: decay", shown  # the model that serves now has one control
    (status,) = [m for m in shown if m.startswith("kick ")]
    assert status == "kick 2 ready - seed 12345678", status
    (error,) = [m for m in shown if m.startswith("error:")]
    # a comma or semicolon becomes a real comma in the box (saved as " \,"); no escaped spaces
    assert "\\ " not in error, error
    assert error.replace(" \\,", ",") == "error: " + reason.replace(";", ","), error


@needs_pd
def test_pd_user_patch_morphs_between_seeds_and_from_a_file(kick_daemon, tmp_path):
    """set-A and Morph in real Pd against the daemon: A is the last kick's seed when it has one, else its file;
    Morph asks /kick/interpolate from A to the last kick with Count kicks (the dials for every kick)."""
    patch = write_test_patch(tmp_path, "pd_ui_morph.pd.in", PORT=kick_daemon.port, TIMEOUT_MS=PD_TIMEOUT_MS)
    console = run_pd(patch)
    assert not printed(console, "KSTIMEOUT"), console
    assert not printed(console, "KSERROR"), console
    dones = done_lines(console)
    assert [seed for _, _, seed in dones] == [5, 9, 5, -1, 9, -1, 11, -1, 11], dones
    assert [d[1] for d in done_lines(console, "kickserver-done")] == [d[1] for d in dones]
    tags = [dict(w.split("=", 1) for w in wav_comment(path).split()) for _, path, _ in dones]
    assert [(t.get("a"), t.get("b"), t.get("t")) for t in tags[2:6]] == [
        ("5", "9", "0.0000"), ("5", "9", "0.5000"), ("5", "9", "1.0000"), ("5", "9", "0.5000")]
    halfway = dones[5][1]
    assert [(t["a"], t["b"], t["t"]) for t in tags[7:]] == [(halfway.name, "11", "0.0000"),
                                                            (halfway.name, "11", "1.0000")]
    for t in tags[2:]:
        assert (t["steps"], t["decay"], t["pitch"], t["click"]) == ("2", "0.5000", "0.5000", "0.5000"), t
    # the morph's ends are the kicks generated from those seeds, to within float rounding in a batch
    for end, generated in ((dones[2][1], dones[0][1]), (dones[4][1], dones[1][1])):
        assert abs(sf.read(end)[0] - sf.read(generated)[0]).max() < 1e-5


@needs_pd
def test_pd_user_patch_set_a_after_a_variation_marks_its_file(kick_daemon, tmp_path):
    """Generate seed 5, Vary, set-A, Generate seed 9, Morph count 2, in real Pd against the daemon: the
    variation's reply carries -1 (its seed is its noise, which /kick/generate turns into another kick), so set-A
    marks its file and the morph starts from the variation, not from seed 5."""
    patch = write_test_patch(tmp_path, "pd_ui_vary_morph.pd.in", PORT=kick_daemon.port, TIMEOUT_MS=PD_TIMEOUT_MS)
    console = run_pd(patch)
    assert not printed(console, "KSTIMEOUT"), console
    assert not printed(console, "KSERROR"), console
    dones = done_lines(console)
    assert [seed for _, _, seed in dones] == [5, osc_api.NO_SEED, 9, osc_api.NO_SEED, 9], dones
    variation = dones[1][1]
    assert f"source={dones[0][1].name}" in wav_comment(variation).split()
    tags = [dict(w.split("=", 1) for w in wav_comment(path).split()) for _, path, _ in dones[3:]]
    assert [(t["a"], t["b"], t["t"]) for t in tags] == [(variation.name, "9", "0.0000"),
                                                        (variation.name, "9", "1.0000")]


# ---------------------------------------------------------------- the XY pad

PAD_POINTS = [(0.0, 1.0, "kick_a"), (0.5, 0.25, "kick b"), (1.0, 0.0, "kick_c")]


def pad_id(x: float, y: float) -> int:
    return 1 + 1001 * round(1000 * x) + round(1000 * y)


def pad_px(x: float, y: float) -> tuple[float, float]:
    """Where the pad draws (x, y) (0..1, y up): its dots' fields, in pixels of the 120-pixel [pd ks-pad]."""
    return 4 + 112 * x, 4 + 112 * (1 - y)


class PadDaemon(FakeDaemon):
    """The stand-in daemon for the pad: /kick/controls ends with `map`, /kick/map answers PAD_POINTS in two parts and
    the axes, /kick/near answers one /kick/done per kick with the request's id, /kick/locate places the kick at
    (0.3, 0.6). Requests are recorded as FakeDaemon's are."""

    def answer(self, address: str, args: list) -> list[bytes]:
        if address == osc_api.CONTROLS:
            return [build_message(osc_api.CONTROLS, [("s", w) for w in ("decay", "pitch", "click", "map")])]
        if address == MAP:
            parts = [PAD_POINTS[:2], PAD_POINTS[2:]]
            return [build_message(MAP, [("i", i + 1), ("i", 2)] + [a for x, y, name in part for a in
                                                                   (("f", x), ("f", y), ("s", name))])
                    for i, part in enumerate(parts)] + [
                build_message(MAP_AXES, [("s", "longer decay ->"), ("s", "higher pitch ->")])]
        if address == NEAR:
            pairs = dict(zip(args[2::2], args[3::2]))
            replies = []
            for _ in range(int(pairs.get("count", 1))):
                self.kicks += 1
                replies.append(build_message(osc_api.DONE, [("i", int(pairs["id"])),
                                                            ("s", f"/tmp/kick_near_{self.kicks}.wav"), ("i", 7)]))
            return replies
        if address == LOCATE:
            return [build_message(LOCATE, [("f", 0.3), ("f", 0.6), ("s", args[0])])]
        return [build_message(osc_api.ERROR, [("i", -1), ("s", self.reason)])]


def pad_dots(saved: Path) -> list[tuple[float, float, int]]:
    """The scalars in the saved user patch's [pd ks-pad]: (x, y, colour)."""
    return [(float(m.group(1)), float(m.group(2)), int(float(m.group(3))))
            for m in re.finditer(r"^#X scalar ks-pad-dot (\S+) (\S+) (\S+) \\;", saved.read_text(), re.M)]


def run_pad_patch(tmp_path: Path, port: int) -> tuple[str, Path]:
    return run_beside_user_patch(tmp_path, "pd_ui_pad.pd.in", port)


def near_args(args: list) -> dict:
    assert len(args) % 2 == 0 and len(args) >= 2, args
    return {"x": args[0], "y": args[1], **dict(zip(args[2::2], args[3::2]))}


@needs_pd
def test_pd_pad_sends_near_for_two_points_and_a_rate_limited_drag(tmp_path):
    """The user patch, in real Pd, against a stand-in daemon: connecting asks /kick/controls, whose `map` asks
    /kick/map; the points are drawn as dots in [pd ks-pad] and the axes labelled; two points set as a person would
    (x and y together) send one /kick/near each, with Count, Spread, the seed, the steps, the dials and the pad's
    id; a drag of five steps 50 ms apart sends its first step at once and its last 250 ms later; each kick comes
    back marked where it was asked; Locate sends the last kick's path and the reply is drawn."""
    fake = PadDaemon("no such request")
    console, saved = run_against_stand_in(tmp_path, "pd_ui_pad.pd.in", fake,
                                          r"error|couldn't create|bad arguments|stale")
    addresses = [a for a, _ in fake.requests]
    # controls at connect (the first point goes out in the same moment); its `map` word asks for the map
    assert addresses[0] == osc_api.CONTROLS and addresses.count(MAP) == 1, fake.requests
    nears = [near_args(args) for a, args in fake.requests if a == NEAR]
    assert len(nears) == 4, fake.requests
    first, second, drag1, drag2 = nears
    assert (first["x"], first["y"]) == pytest.approx((0.25, 0.75)) and first["id"] == pad_id(0.25, 0.75)
    assert (second["x"], second["y"]) == pytest.approx((0.6, 0.2)) and second["id"] == pad_id(0.6, 0.2)
    assert (drag1["x"], drag2["x"]) == pytest.approx((0.1, 0.5)) and drag1["y"] == pytest.approx(0.2)
    for req in nears:
        assert {k: req[k] for k in ("count", "spread", "seed", "steps")} == {"count": 1, "spread": 0, "seed": 7,
                                                                              "steps": 2}, req
        assert {req["decay"], req["pitch"], req["click"]} == {0.5}, req
    assert [d[1] for d in done_lines(console)] == [Path(f"/tmp/kick_near_{i}.wav") for i in range(1, 5)]
    assert fake.requests[-1] == (LOCATE, ["/tmp/kick_near_4.wav"])
    assert printed(console, "KSLOCATED") == ["0.3 0.6 /tmp/kick_near_4.wav"]

    dots = pad_dots(saved)

    def at(colour: int) -> list[float]:
        return [v for x, y, c in dots if c == colour for v in (x, y)]

    assert at(358) == pytest.approx([v for x, y, _ in PAD_POINTS for v in pad_px(x, y)]), dots  # the kit
    assert at(950) == pytest.approx([v for r in nears for v in pad_px(r["x"], r["y"])], abs=0.2), dots  # the pad's
    assert at(999) == pytest.approx(pad_px(0.3, 0.6)), dots  # located
    shown = saved_message_boxes(saved)
    assert "x: longer decay ->" in shown and "y: higher pitch ->" in shown, shown
    assert "pad: the kit's map" in shown and "located /tmp/kick_near_4.wav" in shown, shown
    # the dials line does not show the map word
    (dials,) = [m for m in shown if m.startswith("dials:")]
    assert dials == "dials: decay pitch click", shown


@needs_pd
def test_pd_pad_against_the_daemon(tmp_path):
    """The same clicks against a real daemon serving a model with a kit map (the bundled model; mapped here over
    eight starter-kit kicks with `kicktrain map --into` if it carries none): two /kick/near requests at the two
    points come back as kicks, each marked on the pad where it was asked, the map's points are drawn, and the last
    kick is located."""
    if NEAR not in osc_api.ADDRESSES:
        pytest.skip("the daemon has no /kick/near route yet (kickserver/osc_api.py): the pad's sending side is "
                    "checked against a stand-in daemon (test_pd_pad_sends_near_for_two_points_and_a_rate_limited_drag)")
    from daemon_util import start_daemon

    from kickmodel.loading import load_artifact

    bundled = REPO / "kickserver" / "models" / "default.safetensors"
    models = tmp_path / "models"
    models.mkdir()
    model = models / "default.safetensors"
    shutil.copy2(bundled, model)
    if getattr(load_artifact(model), "kit_map", None) is None:
        from trainer.cli import main as kicktrain

        kicks = tmp_path / "kicks"
        kicks.mkdir()
        for f in sorted((REPO / "kickserver" / "data" / "kicks").glob("*.flac"))[:8]:
            shutil.copy2(f, kicks / f.name)
        assert kicktrain(["map", str(model), str(kicks), "--into", str(model), "--perplexity", "2"]) == 0
    with start_daemon(tmp_path, models) as d:
        (_, controls), = d.send(osc_api.CONTROLS, expect=1, timeout=30)
        assert controls[-1] == "map", controls
        console, saved = run_pad_patch(tmp_path, d.port)
    assert not printed(console, "KSTIMEOUT"), console
    assert not printed(console, "KSERROR"), console
    dones = done_lines(console)
    assert [i for i, _, _ in dones] == [pad_id(0.25, 0.75), pad_id(0.6, 0.2), pad_id(0.1, 0.2), pad_id(0.5, 0.2)]
    for _, path, _ in dones:
        assert path.is_file() and path.parent == (tmp_path / "out").resolve(), path
    (located,) = printed(console, "KSLOCATED")
    assert located.endswith(dones[-1][1].name), located
    dots = pad_dots(saved)
    assert len([d for d in dots if d[2] == 358]) == len(load_artifact(model).kit_map.names), dots
    marks = [v for x, y, c in dots if c == 950 for v in (x, y)]
    assert marks == pytest.approx([v for p in ((0.25, 0.75), (0.6, 0.2), (0.1, 0.2), (0.5, 0.2))
                                   for v in pad_px(*p)], abs=0.2), dots
    assert len([d for d in dots if d[2] == 999]) == 1, dots


# ---------------------------------------------------------------- the kit, the note and audition



class KitDaemon(FakeDaemon):
    """The stand-in daemon for the kit: /kick/generate answers a real WAV (`wav`), /kick/kit answers
    `/kick/kit/done <id> <folder> <layers> <robins> <seed>`; requests are recorded as FakeDaemon's are."""

    def __init__(self, wav: Path) -> None:
        self.wav = wav
        super().__init__("no such request")

    def answer(self, address: str, args: list) -> list[bytes]:
        if address == osc_api.GENERATE:
            seed = int(args[args.index("seed") + 1])
            return [build_message(osc_api.DONE, [("i", 1), ("s", str(self.wav)), ("i", seed)])]
        if address == KIT:
            pairs = dict(zip(args[::2], args[1::2]))
            self.kicks += 1
            return [build_message(KIT_DONE, [("i", -self.kicks), ("s", f"/tmp/kit_A1_short_{self.kicks}"),
                                             ("i", int(pairs["layers"])), ("i", int(pairs["robins"])),
                                             ("i", int(pairs.get("seed", -1)))])]
        return super().answer(address, args)


@needs_pd
def test_pd_kit_note_and_audition(tmp_path):
    """The user patch, in real Pd, against a stand-in daemon: Kit sends /kick/kit with the last kick's seed, the
    layers and robins chosen and the note (A1), the dials and steps; with no note, the Hz box's pitch_hz instead of
    the pitch dial; with neither, the dial. The kit's folder is shown; audition loads the last kick's file into the
    table (`soundfiler` reads all its samples; headless, so nothing is heard)."""
    wav = tmp_path / "kick_7.wav"
    sf.write(str(wav), [0.5, -0.25, 0.125] * 1000, 44100, subtype="PCM_24")
    fake = KitDaemon(wav)
    console, saved = run_against_stand_in(tmp_path, "pd_ui_kit.pd.in", fake,
                                          r"error|couldn't create|bad arguments|unknown")

    kits = [args for a, args in fake.requests if a == KIT]
    assert len(kits) == 3, fake.requests
    pairs = []
    for args in kits:
        assert len(args) % 2 == 0 and all(isinstance(k, str) for k in args[::2]), args  # key/value pairs only
        pairs.append(dict(zip(args[::2], args[1::2])))
        assert set(pairs[-1]) <= KIT_KEYS | CONTROL_KEYS | {"pitch_hz"}, args
    with_note, with_hz, with_dial = pairs
    assert with_note == {"seed": 7, "layers": 8, "robins": 3, "note": "A1", "decay": 0.5, "click": 0.5,
                         "steps": 2}, with_note
    assert with_hz == {"seed": 7, "layers": 1, "robins": 4, "pitch_hz": pytest.approx(43.65), "decay": 0.5,
                       "click": 0.5, "steps": 2}, with_hz
    assert with_dial == {"seed": 7, "layers": 1, "robins": 4, "pitch": 0.5, "decay": 0.5, "click": 0.5,
                         "steps": 2}, with_dial
    if KIT in osc_api.ADDRESSES:  # the daemon's own parser, once it has the route
        limits = osc_api.Limits(controls=tuple(sorted(CONTROL_KEYS)),
                                units=(osc_api.UnitControl("pitch_hz", "pitch", 30.0, 250.0),))
        for args in kits:
            req = osc_api.parse(KIT, args, limits)
            assert (req.seed, req.layers, req.robins) == (7, int(dict(zip(args[::2], args[1::2]))["layers"]),
                                                          int(dict(zip(args[::2], args[1::2]))["robins"]))
        assert osc_api.parse(KIT, kits[0], limits).pitch_hz == pytest.approx(55.0)  # A1

    assert printed(console, "KSKIT")[-1] == "-3 /tmp/kit_A1_short_3 1 4 7", console
    (frames,) = {int(float(n)) for n in printed(console, "KSAUDITION")}
    assert frames == sf.info(str(wav)).frames == 3000
    shown = saved_message_boxes(saved)
    assert "kit /tmp/kit_A1_short_3 (1 x 4)" in shown, shown
    assert "audition: 3000 samples" in shown, shown


@needs_pd
def test_pd_kit_against_the_daemon(kick_daemon, tmp_path):
    """Generate seed 5, then Kit 2 x 2, in real Pd against the daemon once it serves /kick/kit: one
    /kick/kit/done names a folder in the output folder holding the 4 hits and the SFZ, and the patch shows it."""
    if KIT not in osc_api.ADDRESSES:
        pytest.skip("the daemon has no /kick/kit route yet (kickserver/osc_api.py): the Kit button's requests are "
                    "checked against docs/kits.md's contract with a stand-in daemon (test_pd_kit_note_and_audition)")
    console, saved = run_beside_user_patch(tmp_path, "pd_ui_kit_daemon.pd.in", kick_daemon.port)
    assert not printed(console, "KSTIMEOUT"), console
    assert not printed(console, "KSERROR"), console
    (kick,) = done_lines(console)
    assert kick[2] == 5
    (kit,) = printed(console, "KSKIT")
    m = re.fullmatch(r"(-?\d+) (.+) 2 2 (-?\d+)", kit)
    assert m, kit
    folder = Path(m.group(2))
    assert folder.is_dir() and folder.parent == kick_daemon.out_dir.resolve(), folder
    assert len(list(folder.glob("*.wav"))) == 4 and list(folder.glob("*.sfz")), sorted(folder.iterdir())
    assert f"kit {folder} (2 x 2)" in saved_message_boxes(saved)


# ---------------------------------------------------------------- the note on every request

UNITS = osc_api.Limits(controls=tuple(sorted(CONTROL_KEYS)),
                       units=(osc_api.UnitControl("pitch_hz", "pitch", 30.0, 250.0),))  # a kick-synth model's
PITCH_KEYS = {"pitch", "pitch_hz", "note"}


class EveryKickDaemon(FakeDaemon):
    """The stand-in daemon for the note: /kick/generate, /kick/variation, /kick/interpolate and /kick/near each
    answer one /kick/done (the request's seed for a generated kick, else -1); requests are recorded."""

    def answer(self, address: str, args: list) -> list[bytes]:
        if address in (osc_api.GENERATE, osc_api.VARIATION, osc_api.INTERPOLATE, NEAR):
            self.kicks += 1
            seed = int(args[args.index("seed") + 1]) if address == osc_api.GENERATE else osc_api.NO_SEED
            pairs = dict(zip(args[2::2], args[3::2])) if address == NEAR else {}
            return [build_message(osc_api.DONE, [("i", int(pairs.get("id", -self.kicks))),
                                                ("s", f"/tmp/kick_{self.kicks}.wav"), ("i", seed)])]
        return super().answer(address, args)


def pitch_of(args: list, first_pair: int) -> dict:
    """The pitch keys of a request's key/value pairs (from argument `first_pair` on)."""
    pairs = dict(zip(args[first_pair::2], args[first_pair + 1::2]))
    return {k: v for k, v in pairs.items() if k in PITCH_KEYS}


@needs_pd
def test_pd_note_goes_with_every_request(tmp_path):
    """The user patch, in real Pd, against a stand-in daemon: the note box (A1) goes with Generate, Vary and Morph as
    `note A1` in place of the pitch dial; with no note ('-') and 43.65 Hz, Near and Vary send `pitch_hz 43.65`; with
    neither, Generate sends the pitch dial and Vary no pitch at all; a number sent to ks-note (33) is sent as that
    note, and 0 clears it, as does a 0 typed into the box (its symbol 0). Each request parses in the daemon's parser
    for a model that takes units."""
    fake = EveryKickDaemon("no such request")
    console, saved = run_against_stand_in(tmp_path, "pd_ui_note.pd.in", fake,
                                          r"error|couldn't create|bad arguments|unknown|no method")
    kicks = [(a, args) for a, args in fake.requests if a != osc_api.CONTROLS]
    assert [a for a, _ in kicks] == [osc_api.GENERATE, osc_api.VARIATION, osc_api.INTERPOLATE, NEAR,
                                     osc_api.VARIATION, osc_api.GENERATE, osc_api.VARIATION, osc_api.GENERATE,
                                     osc_api.GENERATE, osc_api.GENERATE], fake.requests
    first_pair = {osc_api.GENERATE: 1, osc_api.VARIATION: 1, osc_api.INTERPOLATE: 0, NEAR: 2}
    pitches = [pitch_of(args, first_pair[a]) for a, args in kicks]
    assert pitches == [{"note": "A1"}, {"note": "A1"}, {"note": "A1"}, {"pitch_hz": pytest.approx(43.65)},
                       {"pitch_hz": pytest.approx(43.65)}, {"pitch": 0.5}, {}, {"note": "33"}, {"pitch": 0.5},
                       {"pitch": 0.5}], kicks
    for address, args in kicks:
        req = osc_api.parse(address, args, UNITS)  # raises on anything the daemon would refuse
        if address != osc_api.VARIATION:
            assert {"decay", "click"} <= set(req.controls), args
    assert osc_api.parse(osc_api.GENERATE, kicks[0][1], UNITS).controls["pitch_hz"] == pytest.approx(55.0)  # A1
    assert osc_api.parse(osc_api.GENERATE, kicks[7][1], UNITS).controls["pitch_hz"] == pytest.approx(55.0)  # 33
    assert len(done_lines(console)) == 10


def run_note_against(tmp_path: Path, daemon) -> tuple[str, Path]:
    """pd_ui_note_daemon beside the user patch against `daemon`: connect, note A1, Generate seed 5; saved at the kick
    or at an error."""
    console, saved = run_beside_user_patch(tmp_path, "pd_ui_note_daemon.pd.in", daemon.port)
    assert not printed(console, "KSTIMEOUT"), console
    return console, saved


@needs_pd
def test_pd_note_refused_by_a_model_without_units_shows_the_reason(kick_daemon, tmp_path):
    """Against a daemon serving a model that takes no units (the tiny test model): Generate with note A1 is refused,
    and the error box shows the daemon's reason as words."""
    (_, (_, reason)), = kick_daemon.send(osc_api.GENERATE, "seed", 5, "note", "A1", expect=1, timeout=30)
    assert reason.startswith("note: the serving model takes no pitch in Hz"), reason
    console, saved = run_note_against(tmp_path, kick_daemon)
    assert not done_lines(console) and len(printed(console, "KSERROR")) == 1, console
    (error,) = [m for m in saved_message_boxes(saved) if m.startswith("error:")]
    assert "\\ " not in error and error.replace(" \\,", ",") == "error: " + reason.replace(";", ","), error


@needs_pd
def test_pd_note_and_map_from_a_kick_synth_daemon_that_asks_for_proof(tmp_path):
    """The user patch against a real daemon serving the shipped kick-synth model with `--return-proof all` (loopback
    standing for a LAN bind, where the map goes only to an address that proved its return path): the map arrives
    (kickserver-osc echoed /kick/map/proof's token and asked again) and every kit kick is a dot; Generate with note
    A1 makes a kick tagged pitch_hz=55.0000 whose smpl chunk says note 33."""
    from daemon_util import models_folder, start_daemon

    from kickmodel.loading import load_artifact

    synth = REPO / "kickserver" / "models" / "kick-synth.safetensors"
    with start_daemon(tmp_path, models_folder(tmp_path / "models", synth), model="kick-synth",
                      extra_args=["--return-proof", "all"]) as d:
        console, saved = run_note_against(tmp_path, d)
        log = d.stderr_text()
    assert not printed(console, "KSERROR"), console + log
    ((_, kick, seed),) = done_lines(console)
    assert seed == 5 and kick.is_file()
    assert "pitch_hz=55.0000" in wav_comment(kick).split(), wav_comment(kick)
    if shutil.which("sndfile-info"):
        info = subprocess.run(["sndfile-info", "--instrument", str(kick)], capture_output=True, text=True, timeout=30)
        assert re.search(r"Base note\s*:\s*33\b", info.stdout), info.stdout
    dots = pad_dots(saved)
    assert len([d for d in dots if d[2] == 358]) == len(load_artifact(synth).kit_map.names) > 0, (dots, log)


class ProofDaemon(FakeDaemon):
    """A stand-in daemon that never takes the patch's proof: /kick/controls ends with `map`, /kick/map always answers
    /kick/map/proof 4711 (a daemon whose proof does not hold, e.g. behind a NAT that changes ports)."""

    def answer(self, address: str, args: list) -> list[bytes]:
        if address == osc_api.CONTROLS:
            return [build_message(osc_api.CONTROLS, [("s", w) for w in ("decay", "pitch", "click", "map")])]
        if address == MAP:
            return [build_message(osc_api.MAP_PROOF, [("i", 4711)])]
        if address == osc_api.PROOF:
            return []
        return super().answer(address, args)


@needs_pd
def test_pd_answers_a_map_proof_once_per_map_asked(tmp_path):
    """/kick/map answered with /kick/map/proof <token>: the patch echoes the token (/kick/proof 4711) and asks the map
    again, once: a daemon that keeps refusing does not make it ask forever. The status line says it is proving."""
    fake = ProofDaemon("no such request")
    console, saved = run_against_stand_in(tmp_path, "pd_ui_proof.pd.in", fake, r"error|couldn't create|no method")
    assert fake.requests == [(osc_api.CONTROLS, []), (MAP, []), (osc_api.PROOF, [4711]), (MAP, [])], fake.requests
    assert "map: proving this address to the daemon" in saved_message_boxes(saved)
