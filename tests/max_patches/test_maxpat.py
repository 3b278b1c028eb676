"""The Max for Live device: the .maxpat is a well-formed patcher that speaks the daemon's OSC contract,
and the .amxd is exactly that patcher in Live's device container.

Max itself cannot run here, so this checks the patch as data: every box and patch cord is consistent,
the network objects have the contract's defaults, every address the device sends exists in the daemon,
and the messages the device would build (from the values its [pack]s hold) parse in the daemon's own
parser with the right types. Each key is traced back through the cords to the control that sets it.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from collections import deque

import pytest
from daemon_util import REPO

from kickmodel.families import family_names, preset
from kickserver import osc_api

MAX_PATCHES = REPO / "max_patches"
MAXPAT = MAX_PATCHES / "kickserver.maxpat"
AMXD = MAX_PATCHES / "kickserver.amxd"
# the companion audio effect that plays the last kick (a MIDI effect has no audio output)
AUDITION_MAXPAT = MAX_PATCHES / "kickserver-audition.maxpat"
AUDITION_AMXD = MAX_PATCHES / "kickserver-audition.amxd"
LAST_KICK = "kickserver-last-kick"  # the global send/receive name between the two devices
BUILD = MAX_PATCHES / "build_amxd.py"

CONTROL_KEYS = {"decay", "pitch", "click"}  # what every preset's model.controls is (checked below)
# The XY pad's OSC, fixed in the contract before the daemon serves it: the device's checks accept these
# addresses whether or not kickserver/osc_api.py has them yet, and parse /kick/near with the daemon's parser once
# it does.
MAP, MAP_AXES, NEAR, LOCATE = "/kick/map", "/kick/map/axes", "/kick/near", "/kick/locate"
PAD_REQUESTS = {MAP, NEAR, LOCATE}
PAD_REPLIES = {MAP, MAP_AXES, LOCATE}
# The kit request (docs/kits.md), fixed in the contract before the daemon serves it, as the pad's were
KIT, KIT_DONE = "/kick/kit", "/kick/kit/done"
PARAMETER_CLASSES = {"live.dial", "live.numbox", "live.toggle", "live.text", "live.menu", "live.tab", "live.slider"}


def load_build_module():
    spec = importlib.util.spec_from_file_location("build_amxd", BUILD)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class Patch:
    """The patcher as a graph: boxes by id, cords as (src, outlet, dst, inlet)."""

    def __init__(self, doc: dict) -> None:
        self.doc = doc
        self.patcher = doc["patcher"]
        self.boxes = {b["box"]["id"]: b["box"] for b in self.patcher["boxes"]}
        self.lines = [(ln["patchline"]["source"][0], ln["patchline"]["source"][1],
                       ln["patchline"]["destination"][0], ln["patchline"]["destination"][1])
                      for ln in self.patcher["lines"]]

    def kind(self, box: dict) -> str:
        """The object's class: maxclass, or the first word of a newobj's text."""
        if box["maxclass"] == "newobj":
            return box.get("text", "").split()[0]
        return box["maxclass"]

    def find(self, kind: str) -> list[dict]:
        return [b for b in self.boxes.values() if self.kind(b) == kind]

    def sources(self, box_id: str, inlet: int | None = None) -> list[tuple[str, int]]:
        return [(s, so) for s, so, d, di in self.lines if d == box_id and (inlet is None or di == inlet)]

    def targets(self, box_id: str, outlet: int | None = None) -> list[tuple[str, int]]:
        return [(d, di) for s, so, d, di in self.lines if s == box_id and (outlet is None or so == outlet)]

    def reaches(self, start: str, outlet: int, goal) -> list[dict]:
        """Boxes satisfying goal(box) reachable downstream from start's outlet."""
        seen, found = set(), []
        todo = deque(d for d, _ in self.targets(start, outlet))
        while todo:
            bid = todo.popleft()
            if bid in seen:
                continue
            seen.add(bid)
            if goal(self.boxes[bid]):
                found.append(self.boxes[bid])
            todo.extend(d for d, _ in self.targets(bid))
        return found

    def upstream(self, start: str, goal, inlet: int | None = None) -> list[dict]:
        """Boxes satisfying goal(box) reachable upstream from start (optionally from one inlet)."""
        seen, found = set(), []
        todo = deque(s for s, _ in self.sources(start, inlet))
        while todo:
            bid = todo.popleft()
            if bid in seen:
                continue
            seen.add(bid)
            if goal(self.boxes[bid]):
                found.append(self.boxes[bid])
            todo.extend(s for s, _ in self.sources(bid))
        return found


def longname(box: dict) -> str | None:
    return box.get("saved_attribute_attributes", {}).get("valueof", {}).get("parameter_longname")


def valueof(box: dict) -> dict:
    return box.get("saved_attribute_attributes", {}).get("valueof", {})


def osc_messages(box: dict) -> list[list[str]]:
    """The OSC messages a message box sends (its text split at commas), as token lists."""
    if box["maxclass"] != "message":
        return []
    return [part.split() for part in box.get("text", "").split(",") if part.strip()]


@pytest.fixture(scope="module")
def patch() -> Patch:
    return Patch(json.loads(MAXPAT.read_text(encoding="utf-8")))


@pytest.fixture(scope="module")
def audition() -> Patch:
    return Patch(json.loads(AUDITION_MAXPAT.read_text(encoding="utf-8")))


@pytest.fixture(scope="module", params=[MAXPAT, AUDITION_MAXPAT], ids=lambda p: p.name)
def any_patch(request) -> Patch:
    """Each device's patcher, for the checks every patcher must pass."""
    return Patch(json.loads(request.param.read_text(encoding="utf-8")))


# ---------------------------------------------------------------- well-formed


def test_maxpat_is_a_patcher_that_opens_in_presentation(patch):
    p = patch.patcher
    assert p["fileversion"] == 1
    assert p["classnamespace"] == "box"
    assert p["openinpresentation"] == 1
    assert p["boxes"] and p["lines"]
    shown = [b for b in patch.boxes.values() if b.get("presentation") == 1]
    assert len(shown) >= 15
    for b in shown:
        x, y, w, h = b["presentation_rect"]
        assert w > 0 and h > 0 and x >= 0 and y >= 0
        assert y + h <= 169, f"{b['id']} ({patch.kind(b)}) lies below Live's device height"


def test_every_box_has_id_class_and_ports(any_patch):
    patch = any_patch
    ids = [b["box"]["id"] for b in patch.patcher["boxes"]]
    assert len(ids) == len(set(ids)), "duplicate box ids"
    for b in patch.boxes.values():
        assert re.fullmatch(r"obj-\d+", b["id"])
        assert isinstance(b["maxclass"], str) and b["maxclass"]
        assert isinstance(b["numinlets"], int) and b["numinlets"] >= 0
        assert isinstance(b["numoutlets"], int) and b["numoutlets"] >= 0
        assert len(b.get("outlettype", [])) == b["numoutlets"], b["id"]
        assert len(b["patching_rect"]) == 4
        if b["maxclass"] in ("newobj", "message", "comment", "live.comment"):
            assert "text" in b, b["id"]


def test_patch_cords_join_existing_ports(any_patch):
    patch = any_patch
    assert len(set(patch.lines)) == len(patch.lines), "a patch cord is listed twice"
    for src, so, dst, di in patch.lines:
        assert src in patch.boxes and dst in patch.boxes, (src, dst)
        assert 0 <= so < patch.boxes[src]["numoutlets"], f"{src} has no outlet {so}"
        assert 0 <= di < patch.boxes[dst]["numinlets"], f"{dst} has no inlet {di}"


def test_object_port_counts_match_their_arguments(any_patch):
    """Max sizes some objects by their arguments; a cord to a port that Max would not create is lost."""
    patch = any_patch
    for b in patch.boxes.values():
        if b["maxclass"] != "newobj":
            continue
        words = b["text"].split()
        k, args = words[0], words[1:]
        if k == "pack":
            assert b["numinlets"] == len(args) and b["numoutlets"] == 1, b["text"]
        elif k == "route":
            assert b["numinlets"] == len(args) + 1 and b["numoutlets"] == len(args) + 1, b["text"]
        elif k in ("t", "trigger", "unpack"):
            assert b["numoutlets"] == len(args), b["text"]
        elif k == "gate":
            assert b["numoutlets"] == int(args[0]) and b["numinlets"] == 2, b["text"]
        elif k == "udpsend":
            assert (b["numinlets"], b["numoutlets"]) == (1, 0), "udpsend has no outlet"
        elif k == "udpreceive":
            assert (b["numinlets"], b["numoutlets"]) == (1, 1)
        elif k == "expr":  # one inlet per $ argument, up to the highest
            highest = max(int(n) for n in re.findall(r"\$[fi](\d)", b["text"]))
            assert (b["numinlets"], b["numoutlets"]) == (highest, 1), b["text"]
        elif k == "zl":
            assert (b["numinlets"], b["numoutlets"]) == (2, 2), b["text"]
        elif k in ("plugin~", "plugout~"):  # as Max saves them: two signal inlets and outlets (stereo)
            assert (b["numinlets"], b["numoutlets"]) == (2, 2) and b["outlettype"] == ["signal"] * 2, b["text"]
        elif k == "play~":  # N channels, then the bang when playback ends
            n = int(args[1]) if len(args) > 1 else 1
            assert (b["numinlets"], b["numoutlets"]) == (1, n + 1) and b["outlettype"] == ["signal"] * n + ["bang"]
        elif k == "buffer~":
            assert (b["numinlets"], b["numoutlets"]) == (1, 2) and b["outlettype"] == ["float", "bang"], b["text"]
        elif k in ("s", "send"):
            assert (b["numinlets"], b["numoutlets"]) == (1, 0), b["text"]
        elif k in ("r", "receive"):
            assert (b["numinlets"], b["numoutlets"]) == (0, 1), b["text"]


# ---------------------------------------------------------------- network objects


def test_udpsend_defaults_to_the_daemon_and_can_be_retargeted(patch):
    (send,) = patch.find("udpsend")
    assert send["text"].split()[1:] == ["127.0.0.1", "9000"]
    feeding = {patch.boxes[s].get("text", "") for s, _ in patch.sources(send["id"])}
    assert "prepend host" in feeding and "prepend port" in feeding
    # host comes from a text field, port from a number box, both visible in the device
    (host_prep,) = [b for b in patch.find("prepend") if b["text"] == "prepend host"]
    assert patch.upstream(host_prep["id"], lambda b: b["maxclass"] == "textedit" and b.get("presentation") == 1)
    (port_prep,) = [b for b in patch.find("prepend") if b["text"] == "prepend port"]
    (port,) = patch.upstream(port_prep["id"], lambda b: b["maxclass"] == "live.numbox")
    assert valueof(port)["parameter_initial"] == [9000]
    (host,) = patch.find("textedit")
    assert host["text"] == "127.0.0.1"


def test_replies_are_received_on_9001_and_shown_in_the_device(patch):
    (recv,) = patch.find("udpreceive")
    assert recv["text"].split()[1:] == ["9001"]
    (route,) = [patch.boxes[d] for d, _ in patch.targets(recv["id"]) if patch.kind(patch.boxes[d]) == "route"]
    addresses = route["text"].split()[1:]
    assert {"/kick/done", "/kick/error"} <= set(addresses)
    assert set(addresses) <= set(osc_api.REPLY_ADDRESSES) | PAD_REPLIES | {KIT_DONE}

    def shown_text(b):
        return b["maxclass"] == "comment" and b.get("presentation") == 1

    for i, address in enumerate(addresses):
        assert patch.reaches(route["id"], i, shown_text), f"{address} is not shown in the device"
    # the path of the last kick is shown as it arrives ([unpack] -> [prepend set] -> comment)
    (unpack,) = [patch.boxes[d] for d, _ in patch.targets(route["id"], addresses.index("/kick/done"))
                 if patch.kind(patch.boxes[d]) == "unpack"]
    assert unpack["text"].split()[1:] == ["0", "s", "0"]  # id path seed
    assert patch.reaches(unpack["id"], 1, shown_text)
    # errors land in a visible comment, not only the Max console
    err = patch.reaches(route["id"], addresses.index("/kick/error"), shown_text)
    assert err and all(e.get("textcolor") for e in err)


def test_device_passes_midi_through(patch):
    (midiin,) = patch.find("midiin")
    (midiout,) = patch.find("midiout")
    assert (midiout["id"], 0) in patch.targets(midiin["id"], 0)


# ---------------------------------------------------------------- Live parameters


def test_live_parameters_are_unique_and_sensible(patch):
    params = [b for b in patch.boxes.values() if b.get("parameter_enable") == 1]
    names = [longname(b) for b in params]
    assert all(names) and len(names) == len(set(names)), names
    shorts = [valueof(b)["parameter_shortname"] for b in params]
    assert len(shorts) == len(set(shorts)), shorts
    for b in params:
        assert b.get("presentation") == 1, f"{longname(b)} is not in the device view"
    # the patcher's parameter table lists the same objects under the same names
    table = {k: v for k, v in patch.patcher["parameters"].items() if k.startswith("obj-")}
    assert table == {b["id"]: [longname(b), valueof(b)["parameter_shortname"], 0] for b in params}

    dials = {longname(b): valueof(b) for b in patch.find("live.dial")}
    assert set(dials) == {f"KS {k.capitalize()}" for k in CONTROL_KEYS | {"strength", "spread"}}
    for name, v in dials.items():
        assert v["parameter_type"] == 0, name  # float
        assert (v["parameter_mmin"], v["parameter_mmax"]) == (0.0, 1.0), name
        initial = 0.2 if name == "KS Spread" else 0.5  # /kick/near's default spread
        assert v["parameter_initial_enable"] == 1 and v["parameter_initial"] == [initial], name

    numboxes = {longname(b): valueof(b) for b in patch.find("live.numbox")}
    # Live's Int type holds 256 values (0..255 by default): small ranges only
    ints = {"KS Count": (1, osc_api.MAX_COUNT), "KS Steps": (0, 200)}
    for name, (lo, hi) in ints.items():
        v = numboxes[name]
        assert v["parameter_type"] == 1, name  # int
        assert (v["parameter_mmin"], v["parameter_mmax"]) == (lo, hi), name
    # Larger ranges are Float parameters shown as integers (unit style 0 = Int), as Cycling '74 advises for
    # integers outside 0..255: an Int parameter would be clamped to 255 by Live.
    # Every seed the device uses fits exactly: Live parameters are floats, exact to 2^24.
    floats = {"KS Port": (1, 65535), "KS Seed": (0, 2**24 - 1)}
    for name, (lo, hi) in floats.items():
        v = numboxes[name]
        assert v["parameter_type"] == 0 and v["parameter_unitstyle"] == 0, f"{name}: Float type, Int unit style"
        assert (v["parameter_mmin"], v["parameter_mmax"]) == (lo, hi), name
    for b in params:
        v = valueof(b)
        if v.get("parameter_type") == 1:
            span = v.get("parameter_mmax", 127) - v.get("parameter_mmin", 0)
            assert span <= 255, f"{longname(b)}: an Int parameter holds 256 values, this range needs {span + 1}"
    # steps 0 = the model's default (no steps key is sent): the initial value
    assert numboxes["KS Steps"]["parameter_initial"] == [0]
    (random,) = patch.find("live.toggle")
    assert longname(random) == "KS Random Seed" and valueof(random)["parameter_initial"] == [1]
    buttons = {b["text"] for b in patch.find("live.text")}
    assert {"Generate", "Vary"} <= buttons
    for b in patch.find("live.text"):
        assert b["mode"] == 0, "live.text buttons are momentary (mode 0)"


def test_float_parameters_are_rounded_before_use(patch):
    """A Float parameter can hold 8999.9996 (automation, a MIDI mapping): Port and Seed reach their consumers
    only through [round 1], so [udpsend] and the seed get whole numbers."""
    for name in ("KS Port", "KS Seed"):
        (numbox,) = [b for b in patch.find("live.numbox") if longname(b) == name]
        after = [patch.boxes[d] for d, _ in patch.targets(numbox["id"], 0)]
        assert after and all(b.get("text", "").split() == ["round", "1"] for b in after), (name, after)


def test_every_model_control_has_a_dial():
    """The dials are the models' controls: every preset (and any bundled model) has exactly these."""
    from kickmodel.artifact import read_metadata

    for family in family_names():
        for name in ("tiny", "small", "base"):
            assert set(preset(name, family).controls) == CONTROL_KEYS, (family, name)
    for path in sorted((MAX_PATCHES.parent / "kickserver" / "models").glob("*.safetensors")):
        assert set(json.loads(read_metadata(path).get("controls", "[]"))) == CONTROL_KEYS, path.name


# ---------------------------------------------------------------- what the device sends


def test_every_address_sent_exists_in_the_daemon(patch):
    sent = set()
    for b in patch.boxes.values():
        text = b.get("text", "")
        for part in text.split(","):
            for word in part.split():
                if word.startswith("/kick/") and b["maxclass"] in ("message", "newobj"):
                    sent.add(word)
    received = {w for b in patch.find("route") for w in b["text"].split()[1:]}
    allowed = set(osc_api.ADDRESSES) | PAD_REQUESTS | {KIT}
    assert sent - received <= allowed, sorted(sent - received - allowed)
    assert PAD_REQUESTS <= sent
    assert {"/kick/generate", "/kick/variation", "/kick/ping", "/kick/status"} <= sent
    # every message box that sends /kick/... is wired to [udpsend], directly or through what appends the pitch part
    # ([zl join]) and chooses whether there is one ([gate]): nothing else touches the message on its way
    (send,) = patch.find("udpsend")
    for b in patch.boxes.values():
        if any(m and m[0].startswith("/kick/") for m in osc_messages(b)):
            assert ends_of(patch, b["id"], {"zl join", "gate 2 1"}) == {send["id"]}, b["text"]


def ends_of(patch, start: str, through: set[str]) -> set[str]:
    """The boxes start's outlet 0 reaches when the walk passes only boxes whose text is in `through` (their left
    inlet for a [zl join], their right inlet, the data, for a [gate])."""
    ends, todo, seen = set(), [start], set()
    while todo:
        bid = todo.pop()
        for dst, inlet in patch.targets(bid, 0 if bid == start else None):
            text = patch.boxes[dst].get("text", "")
            if text in through and (dst, inlet) not in seen:
                assert inlet == (1 if text.startswith("gate") else 0), (bid, dst, inlet)
                seen.add((dst, inlet))
                todo.append(dst)
            elif text not in through:
                ends.add(dst)
    return ends


def _pack_values(pack: dict) -> list:
    """What a Max [pack] holds before any input: its arguments, typed as Max types them."""
    out = []
    for a in pack["text"].split()[1:]:
        if a in ("s", "sym", "symbol"):
            out.append("")
        elif re.fullmatch(r"-?\d+", a):
            out.append(int(a))
        else:
            out.append(float(a))
    return out


def _request_boxes(patch, address) -> list[dict]:
    return [b for b in patch.boxes.values() if any(m[0] == address for m in osc_messages(b))]


def _steps_numbox(patch) -> dict:
    (box,) = [b for b in patch.find("live.numbox") if longname(b) == "KS Steps"]
    return box


def _request_pack(patch, address) -> dict:
    """The one [pack] that holds the values of every message sending `address`."""
    packs = {p["id"]: p for box in _request_boxes(patch, address)
             for p in patch.upstream(box["id"], lambda b: patch.kind(b) == "pack")}
    assert len(packs) == 1, f"{address}: expected one [pack], found {sorted(packs)}"
    return next(iter(packs.values()))


def _gate_outlet(patch, gate: dict, steps: int) -> int | None:
    """The outlet (0-based) of a [gate] whose control inlet is driven by KS Steps through [> N] / [+ N]
    when KS Steps is `steps`; None if it would close the gate."""
    chain = []
    (node,) = [patch.boxes[s] for s, _ in patch.sources(gate["id"], 0)]
    while longname(node) != "KS Steps":
        chain.append(node)
        (node,) = [patch.boxes[s] for s, _ in patch.sources(node["id"])]
    v = steps
    for op in reversed(chain):
        words = op["text"].split()
        if words[0] == ">":
            v = int(v > float(words[1]))
        elif words[0] == "+":
            v = v + int(words[1])
        else:
            raise AssertionError(f"unexpected {op['text']!r} between KS Steps and {gate['text']!r}")
    n = int(gate["text"].split()[1])
    assert 0 <= v <= n, f"{gate['text']!r} has no outlet {v}"
    return v - 1 if v else None


def device_message(patch, address, steps: int | None = None) -> tuple[dict, list]:
    """The message box a press sends for `address` with KS Steps at `steps` (None: its initial value), and
    the arguments Max would fill in from the [pack]'s values (the last kick's path as the variation source)."""
    steps_box = _steps_numbox(patch)
    if steps is None:
        (steps,) = valueof(steps_box)["parameter_initial"]
    pack = _request_pack(patch, address)
    values = _pack_values(pack)
    for s, _, d, di in patch.lines:
        if s == steps_box["id"] and d == pack["id"]:
            values[di] = steps
    (node,) = [patch.boxes[d] for d, _ in patch.targets(pack["id"], 0)]
    while patch.kind(node) == "gate":
        outlet = _gate_outlet(patch, node, steps)
        assert outlet is not None, f"KS Steps {steps} closes {node['text']!r}: nothing is sent"
        (node,) = [patch.boxes[d] for d, _ in patch.targets(node["id"], outlet)]
    (tokens,) = osc_messages(node)
    assert tokens[0] == address, (address, node["text"])
    tokens = tokens + appended_pitch(patch, node)
    args = []
    for t in tokens[1:]:
        m = re.fullmatch(r"\$(\d+)", t) if isinstance(t, str) else None
        if m:
            k = int(m.group(1))
            assert 2 <= k <= len(values), f"{t} in {node['text']!r} is not a value of {pack['text']!r}"
            v = values[k - 1]
            args.append(v if v != "" else "kick_20250101-000000_7.wav")  # source: the last kick's path
        else:
            args.append(t)
    return node, args


def pitch_gate(patch) -> dict:
    """The [gate 2 1] that chooses the pitch part at each press: its outlets fill `pitch <KS Pitch>` (KS Note 0) or
    `note <KS Note>` message boxes."""
    (gate,) = [b for b in patch.find("gate") if {osc_messages(patch.boxes[d])[0][0] for d, _ in patch.targets(b["id"])
                                                 if patch.boxes[d]["maxclass"] == "message"} == {"pitch", "note"}]
    return gate


def appended_pitch(patch, message: dict) -> list:
    """What the device appends to `message` at a press with KS Note at its initial 0 (each press fills the pitch
    part first): the `pitch <dial>` part when the message goes into a [zl join] (Generate, Near, Morph), nothing when it
    goes through Vary's [gate] (whose outlet 1, for a note, is the join), or when it goes straight on."""
    ((dst, inlet),) = patch.targets(message["id"], 0)
    if patch.boxes[dst].get("text") != "zl join":
        return []
    assert inlet == 0
    (part,) = [patch.boxes[d] for d, _ in patch.targets(pitch_gate(patch)["id"], 0)]
    assert (part["id"], 0) in patch.sources(dst, 1), "the join's right inlet gets the pitch part"
    return [atom(w) for w in part["text"].split()]


@pytest.mark.parametrize("address", [osc_api.GENERATE, osc_api.VARIATION])
@pytest.mark.parametrize("steps", [None, 1, 25, 200])
def test_request_messages_parse_in_the_daemon(patch, address, steps):
    """Fill each message's $n from its [pack]'s values, as Max would, and parse it with the daemon's parser."""
    limits = osc_api.Limits(controls=tuple(sorted(CONTROL_KEYS)))
    _box, args = device_message(patch, address, steps)
    req = osc_api.parse(address, args, limits)
    assert req.seed is not None  # the device always sends a seed: its own [random] one when Random is on
    assert req.steps == steps  # None: the model's default
    if address == osc_api.GENERATE:
        assert set(req.controls) == CONTROL_KEYS, args
        assert isinstance(args[0], int)  # count first, as an int
    else:
        assert req.source and req.strength == 0.5


@pytest.mark.parametrize("address", [osc_api.GENERATE, osc_api.VARIATION])
def test_no_steps_key_is_sent_unless_steps_are_set(patch, address):
    """The model knows its own best steps (10 for the bundled one): the device's default sends none."""
    _box, args = device_message(patch, address)
    assert "steps" not in args, args
    for steps in (1, 10, 200):
        _box, args = device_message(patch, address, steps)
        assert args[args.index("steps") + 1] == steps


@pytest.mark.parametrize("address", [osc_api.GENERATE, osc_api.VARIATION])
def test_each_value_comes_from_its_control(patch, address):
    """Trace every `key $n` back: the pack inlet n-1 is fed by the Live parameter named after the key."""
    pack = _request_pack(patch, address)
    boxes = _request_boxes(patch, address)
    reached = patch.reaches(pack["id"], 0, lambda b: b["maxclass"] == "message")
    assert all(box in reached for box in boxes), [b["text"] for b in boxes]
    (with_steps,) = [b for b in boxes if "steps" in osc_messages(b)[0]]
    (tokens,) = osc_messages(with_steps)
    pairs = list(zip(tokens[1:], tokens[2:]))
    refs = {"count" if address == osc_api.GENERATE else "source": tokens[1]}
    refs.update({k: v for k, v in pairs if not k.startswith("$") and v.startswith("$")})
    assert "seed" in refs and "steps" in refs
    for key, ref in refs.items():
        inlet = int(ref[1:]) - 1
        feeders = [patch.boxes[s] for s, _ in patch.sources(pack["id"], inlet)]
        if key == "source":
            # the path of the last /kick/done
            assert any(patch.kind(f) == "unpack" for f in feeders), with_steps["text"]
            continue
        names = {longname(f) for f in feeders} | {
            longname(u) for f in feeders for u in patch.upstream(f["id"], lambda b: longname(b) is not None)}
        assert f"KS {key.capitalize()}" in names, (key, with_steps["text"], names)
        if key == "seed":
            # Random on: a [random N] (N <= 2^24) behind a [gate] that KS Random Seed opens sets the seed
            (rnd,) = [f for f in feeders if patch.kind(f) == "random"]
            assert 0 < int(rnd["text"].split()[1]) <= 2**24
            (gate,) = [patch.boxes[s] for s, _ in patch.sources(rnd["id"], 0)]
            assert patch.kind(gate) == "gate"
            assert [longname(patch.boxes[s]) for s, _ in patch.sources(gate["id"], 0)] == ["KS Random Seed"]
    # every other message for the address uses the same slots, minus steps
    for box in boxes:
        (other,) = osc_messages(box)
        assert [t for t in other if t != "steps" and t != refs["steps"]] == \
            [t for t in tokens if t != "steps" and t != refs["steps"]], box["text"]
    # the pack's left inlet only bangs (from the button's trigger), after the random seed is drawn
    (trig,) = patch.upstream(pack["id"], lambda b: patch.kind(b) in ("t", "trigger"), inlet=0)

    bang_path = {b["id"] for b in patch.upstream(pack["id"], lambda b: True, inlet=0)} | {pack["id"]}
    (to_pack,) = {so for s, so, d, _ in patch.lines if s == trig["id"] and d in bang_path}
    gates = {d: so for s, so, d, _ in patch.lines if s == trig["id"] and patch.kind(patch.boxes[d]) == "gate"}
    (to_gate,) = [so for d, so in gates.items() if patch.reaches(d, 0, lambda b: patch.kind(b) == "random")]
    (to_pitch,) = [so for d, so in gates.items() if d == pitch_gate(patch)["id"]]
    # a [trigger] fires right to left: the random seed is drawn (gate) and the pitch part chosen before the pack is
    # banged
    assert to_gate > to_pack and to_pitch > to_pack


def test_buttons_trigger_requests(patch):
    def sends(box, address):
        return patch.reaches(box["id"], 0, lambda b: any(m[0] == address for m in osc_messages(b)))

    buttons = {b["text"]: b for b in patch.find("live.text")}
    assert sends(buttons["Generate"], osc_api.GENERATE)
    assert sends(buttons["Vary"], osc_api.VARIATION)
    assert sends(buttons["Check"], osc_api.PING) and sends(buttons["Check"], osc_api.STATUS)
    (thisdevice,) = patch.find("live.thisdevice")
    assert patch.reaches(thisdevice["id"], 0, lambda b: b.get("text") == "udpsend 127.0.0.1 9000")


# ---------------------------------------------------------------- the .amxd


# The keys of the `project` object Max writes into a device's patcher when it saves it, as in the devices
# Max saved in Ableton/maxdevtools (cpu-reporter/CPU Reporter.amxd, an audio effect: amxdtype 1633771873;
# maxdiff/tests/test_files/Test.amxd, a MIDI effect: amxdtype 1835887981).
PROJECT_KEYS = {"version", "creationdate", "modificationdate", "viewrect", "autoorganize", "hideprojectwindow",
                "showdependencies", "autolocalize", "contents", "layout", "searchpath", "detailsvisible",
                "amxdtype", "readonly", "devpathtype", "devpath", "sortmode", "viewmode", "includepackages"}


def test_patcher_has_the_project_block_max_writes_for_a_device(patch):
    project = patch.patcher["project"]
    assert set(project) == PROJECT_KEYS
    # amxdtype is the ampf chunk's four bytes as a big-endian integer: "mmmm" for a MIDI effect
    assert project["amxdtype"] == int.from_bytes(b"mmmm", "big") == 1835887981
    assert project["version"] == 1 and project["devpath"] == "." and project["readonly"] == 0
    assert project["contents"] == {"patchers": {}}, "the device uses no abstractions or files"
    assert list(patch.patcher).index("project") < list(patch.patcher).index("autosave")


def test_amxd_is_the_maxpat_in_a_midi_device():
    build = load_build_module()
    maxpat = MAXPAT.read_bytes()
    amxd = AMXD.read_bytes()
    assert amxd == build.build_amxd(maxpat), "kickserver.amxd is stale: run python max_patches/build_amxd.py"
    chunks = build.read_chunks(amxd)
    assert [t for t, _ in chunks] == ["ampf", "meta", "ptch"]
    assert chunks[0][1] == b"mmmm"  # MIDI effect
    assert int.from_bytes(chunks[0][1], "big") == json.loads(maxpat)["patcher"]["project"]["amxdtype"]
    assert chunks[1][1] == b"\0\0\0\0"
    ptch = chunks[2][1]
    assert ptch.endswith(b"\0") and b"\0" not in ptch[:-1]
    assert json.loads(ptch[:-1].decode("utf-8")) == json.loads(maxpat.decode("utf-8"))
    assert build.patcher_from_amxd(amxd) == maxpat
    # the header is what maxdevtools' amxd_textconv reads: tag, little-endian size, data
    assert amxd[:12] == b"ampf\x04\x00\x00\x00mmmm"


def test_build_amxd_check_mode(tmp_path):
    ok = subprocess.run([sys.executable, str(BUILD), "--check"], capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0, ok.stderr
    edited = tmp_path / "edited.maxpat"
    edited.write_bytes(MAXPAT.read_bytes().replace(b'"127.0.0.1"', b'"10.0.0.2"', 1))
    stale = subprocess.run([sys.executable, str(BUILD), "--check", "--maxpat", str(edited), "--amxd", str(AMXD)],
                           capture_output=True, text=True, timeout=60)
    assert stale.returncode == 1 and "out of date" in stale.stderr
    out = tmp_path / "new.amxd"
    built = subprocess.run([sys.executable, str(BUILD), "--maxpat", str(edited), "--amxd", str(out)],
                           capture_output=True, text=True, timeout=60)
    assert built.returncode == 0, built.stderr
    assert load_build_module().patcher_from_amxd(out.read_bytes()) == edited.read_bytes()
    # the device type comes from project.amxdtype; asking for another is refused
    wrong = subprocess.run([sys.executable, str(BUILD), "--check", "--type", "audio"], capture_output=True, text=True,
                           timeout=60)
    assert wrong.returncode == 2 and "project.amxdtype says midi" in wrong.stderr
    doc = json.loads(MAXPAT.read_bytes())
    doc["patcher"]["project"]["amxdtype"] = int.from_bytes(b"aaaa", "big")
    assert load_build_module().build_amxd(json.dumps(doc).encode())[8:12] == b"aaaa"
    doc["patcher"]["project"]["amxdtype"] = 12345
    with pytest.raises(ValueError, match="project.amxdtype must be one of"):
        load_build_module().build_amxd(json.dumps(doc).encode())
    (tmp_path / "bad.maxpat").write_text("{not json")
    bad = subprocess.run([sys.executable, str(BUILD), "--check", "--maxpat", str(tmp_path / "bad.maxpat")],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "not a Max patcher" in bad.stderr


# ---------------------------------------------------------------- the device run: a small Max interpreter


class MaxSim:
    """Runs the patcher's message flow for the objects it uses, as Max does: a [trigger] and an [unpack] fire
    right to left, an outlet feeding several inlets fires them right to left by position, hot left inlets, cold
    right ones. Messages are lists of atoms (a first atom that is a string is the selector). What reaches
    [udpsend] (other than host and port) is recorded in `sent`; what a comment is `set` to, in `shown`.

    Only the objects of this device are modelled; anything else raises, so a new object cannot slip past."""

    def __init__(self, patch: Patch) -> None:
        self.patch = patch
        self.sent: list[list] = []
        self.now = 0  # ms: [speedlim] holds what arrives too soon until advance() reaches its time
        self.drawn: list[list] = []  # what the pad's [lcd] was sent, in order
        self.shown = {bid: b.get("text", "") for bid, b in patch.boxes.items() if b["maxclass"] == "comment"}
        self.named: dict[str, list[list]] = {}  # what each [s NAME] sent, by name
        self.got: dict[str, list[list]] = {}  # what each [buffer~] and [play~] was sent, by box id
        self.state: dict[str, dict] = {}
        for bid, b in patch.boxes.items():
            self.state[bid] = self._initial(b)

    def _initial(self, b: dict) -> dict:
        k = self.patch.kind(b)
        args = b.get("text", "").split()[1:] if b["maxclass"] == "newobj" else []
        if k == "pack":
            return {"values": _pack_values(b)}
        if k == "speedlim":
            return {"interval": int(args[0]), "last": None, "pending": None}
        if k == "*":
            return {"right": float(args[0]) if "." in args[0] else int(args[0])}
        if k == "gate":
            return {"open": int(args[1]) if len(args) > 1 else 0}
        if k == "i":
            return {"value": int(args[0]) if args else 0}
        if k in ("<", ">", "+"):
            return {"right": float(args[0]) if "." in args[0] else int(args[0])}
        if k == "zl":
            return {"stored": []}
        if k == "message":
            return {"text": b.get("text", "")}
        if b.get("parameter_enable") == 1 and valueof(b).get("parameter_initial"):
            return {"value": valueof(b)["parameter_initial"][0]}
        return {}

    # ------------------------------------------------------------ sending
    def out(self, bid: str, outlet: int, msg: list) -> None:
        targets = self.patch.targets(bid, outlet)
        targets.sort(key=lambda t: -self.patch.boxes[t[0]]["patching_rect"][0])  # right to left
        for dst, inlet in targets:
            self.inlet(dst, inlet, list(msg))

    def advance(self, ms: int) -> None:
        """Let `ms` milliseconds pass: a [speedlim] whose interval is over sends what it held."""
        self.now += ms
        for bid, st in self.state.items():
            if self.patch.kind(self.patch.boxes[bid]) == "speedlim" and st["pending"] is not None \
                    and self.now - st["last"] >= st["interval"]:
                msg, st["pending"], st["last"] = st["pending"], None, self.now
                self.out(bid, 0, msg)

    def click(self, px: int, py: int) -> None:
        """A click (or a drag's step) on the pad at pixel (px, py), y down as in Max."""
        (lcd,) = self.patch.find("lcd")
        self.out(lcd["id"], 0, [px, py])

    def pad_shapes(self) -> list[list]:
        """The pad's drawing since it was last cleared: paintoval / paintrect ... messages."""
        last_clear = max((i for i, m in enumerate(self.drawn) if m == ["clear"]), default=-1)
        return [m for m in self.drawn[last_clear + 1:]
                if m[0] in ("paintoval", "paintrect") and m[1:5] != [0, 0, 120, 120]]  # not the background

    def press(self, longname_: str) -> None:
        (b,) = [b for b in self.patch.boxes.values() if longname(b) == longname_]
        self.out(b["id"], 0, [1])

    def set_value(self, longname_: str, value) -> None:
        (b,) = [b for b in self.patch.boxes.values() if longname(b) == longname_]
        self.state[b["id"]]["value"] = value
        self.out(b["id"], 0, [value])

    def deliver(self, name: str, *msg) -> None:
        """A message sent to NAME from elsewhere (another device's [s NAME]): every [r NAME] here outputs it."""
        receivers = [b for b in self.patch.find("r") if b["text"].split()[1:] == [name]]
        assert receivers, f"nothing here receives {name}"
        for b in receivers:
            self.out(b["id"], 0, list(msg))

    def buffer_read(self) -> None:
        """The [buffer~] has read its file: it bangs its right outlet."""
        (buf,) = self.patch.find("buffer~")
        self.out(buf["id"], 1, ["bang"])

    def receive(self, address: str, *args) -> None:
        """A reply arriving at [udpreceive]."""
        (recv,) = self.patch.find("udpreceive")
        self.out(recv["id"], 0, [address, *args])

    # ------------------------------------------------------------ objects
    def inlet(self, bid: str, inlet: int, msg: list) -> None:  # noqa: C901 - one branch per object
        b = self.patch.boxes[bid]
        k = self.patch.kind(b)
        st = self.state[bid]
        args = b.get("text", "").split()[1:] if b["maxclass"] == "newobj" else []
        bang = msg == ["bang"]
        if k == "comment":
            if msg and msg[0] == "set":
                self.shown[bid] = " ".join(str(a) for a in msg[1:])
            return
        if k == "message":
            if msg and msg[0] == "set":
                st["text"] = " ".join(str(a) for a in msg[1:])
                return
            for part in st["text"].split(","):
                words = []
                for w in part.split():
                    m = re.fullmatch(r"\$(\d+)", w)
                    if m:
                        assert int(m.group(1)) <= len(msg), (b["text"], msg)
                        words.append(msg[int(m.group(1)) - 1])
                    else:
                        words.append(atom(w))
                if words:
                    self.out(bid, 0, words)
            return
        if k in ("t", "trigger"):
            for i in reversed(range(len(args))):
                const = re.fullmatch(r"-?\d+", args[i])
                self.out(bid, i, ["bang"] if args[i] == "b" else [int(args[i])] if const else msg)
            return
        if k == "unpack":
            for i in reversed(range(min(len(args), len(msg)))):
                self.out(bid, i, [msg[i]])
            return
        if k == "pack":
            if inlet == 0:
                if not bang:
                    st["values"][0] = msg[0]
                self.out(bid, 0, list(st["values"]))
            else:
                st["values"][inlet] = msg[0]
            return
        if k == "gate":
            if inlet == 0:
                st["open"] = int(msg[0])
            elif st["open"]:
                self.out(bid, st["open"] - 1, msg)
            return
        if k == "i":
            if inlet == 1:
                st["value"] = int(msg[0])
                return
            if not bang:
                st["value"] = int(msg[0])
            self.out(bid, 0, [st["value"]])
            return
        if k in ("<", ">", "+"):
            if inlet == 1:
                st["right"] = msg[0]
                return
            v = msg[0]
            self.out(bid, 0, [int(v < st["right"]) if k == "<" else int(v > st["right"]) if k == ">"
                              else v + st["right"]])
            return
        if k == "*":
            if inlet == 1:
                st["right"] = msg[0]
                return
            self.out(bid, 0, [msg[0] * st["right"]])
            return
        if k == "clip":
            self.out(bid, 0, [min(max(msg[0], float(args[0])), float(args[1]))])
            return
        if k == "moses":
            self.out(bid, 0 if msg[0] < float(args[0]) else 1, msg)
            return
        if k == "expr":
            assert inlet == 0, "only the left inlet of an [expr] is used (a list fills $1, $2, ...)"
            code = re.sub(r"\$([fi])(\d)",
                          lambda m: f"{'float' if m.group(1) == 'f' else 'int'}(a[{int(m.group(2)) - 1}])",
                          " ".join(args))
            self.out(bid, 0, [eval(code, {"int": int, "float": float}, {"a": msg})])  # noqa: S307 - the patch's own text
            return
        if k == "speedlim":
            if inlet == 1:
                st["interval"] = int(msg[0])
            elif st["last"] is None or self.now - st["last"] >= st["interval"]:
                st["last"] = self.now
                self.out(bid, 0, msg)
            else:
                st["pending"] = msg  # the last one wins; advance() sends it when the interval is over
            return
        if k == "lcd":
            self.drawn.append(msg)
            return
        if k == "sel":
            target = float(args[0])
            self.out(bid, 0, ["bang"]) if float(msg[0]) == target else self.out(bid, 1, msg)
            return
        if k == "round":
            self.out(bid, 0, [round(msg[0])])
            return
        if k == "zl":
            mode = args[0]
            if msg == ["zlclear"]:
                st["stored"] = []
                return
            if inlet == 1:
                st["stored"] = list(msg)
                return
            if mode == "rev":
                self.out(bid, 0, list(reversed(msg)))
                return
            if mode == "slice":
                n = int(args[1])
                if msg[n:]:
                    self.out(bid, 1, msg[n:])
                self.out(bid, 0, msg[:n])
                return
            if mode == "iter":
                n = int(args[1])
                for i in range(0, len(msg), n):
                    self.out(bid, 0, msg[i:i + n])
                return
            if mode == "change":
                if msg != st["stored"]:
                    st["stored"] = list(msg)
                    self.out(bid, 0, list(msg))
                return
            if mode == "reg":
                if not bang:
                    st["stored"] = list(msg)
                if st["stored"]:
                    self.out(bid, 0, list(st["stored"]))
                return
            if mode == "join":
                self.out(bid, 0, list(msg) + st["stored"])
                return
            raise AssertionError(f"zl {mode} is not modelled")
        if k == "prepend":
            self.out(bid, 0, args + ([] if bang else msg))
            return
        if k == "route":
            if msg and msg[0] in args:
                rest = msg[1:]
                self.out(bid, args.index(msg[0]), rest if rest else ["bang"])
            else:
                self.out(bid, len(args), msg)
            return
        if k == "udpsend":
            if msg[0] not in ("host", "port"):
                self.sent.append(msg)
            return
        if k == "random":
            self.out(bid, 0, [4711])
            return
        if k in ("live.numbox", "live.dial", "live.toggle"):
            if msg[0] == "set":  # the value changes, nothing is sent
                st["value"] = msg[1]
                return
            if not bang:
                st["value"] = msg[0]
            self.out(bid, 0, [st["value"]])  # a bang outputs the value held
            return
        if k == "textedit":
            self.out(bid, 0, ["text", b["text"]] if bang else ["text", *msg])
            return
        if k == "delay":
            self.out(bid, 0, ["bang"])
            return
        if k == "print":
            return
        if k in ("s", "send"):
            self.named.setdefault(args[0], []).append(msg)
            return
        if k in ("buffer~", "play~", "line~"):
            self.got.setdefault(bid, []).append(msg)
            return
        if k == "dbtoa":
            self.out(bid, 0, [10 ** (msg[0] / 20)])
            return
        raise AssertionError(f"{k} ({bid}) is not modelled")


def atom(word: str):
    """A word of a message box as Max types it: an int, a float, else a symbol."""
    if re.fullmatch(r"-?\d+", word):
        return int(word)
    if re.fullmatch(r"-?\d+\.\d*|-?\.\d+", word):
        return float(word)
    return word


LIMITS = osc_api.Limits(controls=tuple(sorted(CONTROL_KEYS)))


def test_the_device_generates_as_the_static_checks_say(patch):
    """The interpreter agrees with the static traces: Generate with the initial values sends the message they
    build, with the seed Random drew (the interpreter's [random] gives 4711)."""
    sim = MaxSim(patch)
    sim.press("KS Generate")
    (msg,) = sim.sent
    expected = [osc_api.GENERATE] + device_message(patch, osc_api.GENERATE)[1]
    expected[expected.index("seed") + 1] = 4711
    assert msg == expected


def test_morph_from_a_seed_to_the_last_kick(patch):
    """Set A takes the last kick's seed; Morph sends /kick/interpolate a <A> b <last kick> count <Count> with the
    dials (and steps only when Steps is set); the daemon's parser accepts it."""
    sim = MaxSim(patch)
    sim.press("KS Morph")
    assert sim.sent == [] and "press Set A first" in " ".join(sim.shown.values())
    sim.press("KS Set A")
    assert sim.sent == [] and "press Generate first" in " ".join(sim.shown.values())
    sim.receive(osc_api.DONE, 1, "/out/kick_20260101-000000_5.wav", 5)
    sim.press("KS Set A")
    assert "A: 5" in sim.shown.values()
    sim.receive(osc_api.DONE, 2, "/out/kick_20260101-000001_9.wav", 9)
    sim.set_value("KS Count", 4)
    sim.set_value("KS Pitch", 0.25)
    sim.press("KS Morph")
    (msg,) = sim.sent
    assert msg[0] == osc_api.INTERPOLATE, msg
    req = osc_api.parse(msg[0], msg[1:], LIMITS)
    assert (req.a, req.b, req.ts, req.steps) == (5, 9, [0, 1 / 3, 2 / 3, 1], None)
    assert req.controls == {"decay": 0.5, "pitch": 0.25, "click": 0.5}
    sim.set_value("KS Steps", 12)
    sim.press("KS Morph")
    req = osc_api.parse(sim.sent[-1][0], sim.sent[-1][1:], LIMITS)
    assert req.steps == 12 and (req.a, req.b) == (5, 9)


def test_a_kick_that_no_seed_makes_is_an_end_by_its_path(patch):
    """A morph's inner kick answers with seed -1: as A (or as the last kick) the device sends its path."""
    sim = MaxSim(patch)
    sim.receive(osc_api.DONE, 3, "/out/kick_20260101-000000_t500.wav", -1)
    sim.press("KS Set A")
    assert "A: /out/kick_20260101-000000_t500.wav" in sim.shown.values()
    sim.receive(osc_api.DONE, 4, "/out/kick_20260101-000002_11.wav", 11)
    sim.press("KS Morph")
    req = osc_api.parse(sim.sent[-1][0], sim.sent[-1][1:], LIMITS)
    assert (req.a, req.b) == ("/out/kick_20260101-000000_t500.wav", 11)
    sim.receive(osc_api.DONE, 5, "/out/kick_20260101-000003_t250.wav", -1)
    sim.press("KS Morph")
    req = osc_api.parse(sim.sent[-1][0], sim.sent[-1][1:], LIMITS)
    assert (req.a, req.b) == ("/out/kick_20260101-000000_t500.wav", "/out/kick_20260101-000003_t250.wav")


def test_the_device_asks_for_the_models_dials_and_shows_them(patch):
    """Load and Check ask /kick/status; /kick/controls follows once the status reply names a model the device has
    not seen (at load, after Check, after a swap) or /kick/model answers; `map` / `no-map` is no dial."""
    sim = MaxSim(patch)
    (thisdevice,) = patch.find("live.thisdevice")
    sim.out(thisdevice["id"], 0, ["bang"])  # the device has loaded
    assert sim.sent == [[osc_api.PING], [osc_api.STATUS]]
    status = ("cpu", 0, 3, "bundled default")
    sim.receive(osc_api.STATUS, "default", *status)
    assert sim.sent[2:] == [[osc_api.CONTROLS]]
    sim.receive(osc_api.STATUS, "default", *status)  # the same model: not asked again
    assert len(sim.sent) == 3
    sim.sent.clear()
    sim.press("KS Check")
    assert [m[0] for m in sim.sent] == [osc_api.PING, osc_api.STATUS]
    sim.receive(osc_api.STATUS, "default", *status)  # Check forgot the model: asked again
    assert sim.sent[2:] == [[osc_api.CONTROLS]]
    sim.receive(osc_api.CONTROLS, "decay", "pitch")  # a daemon from before the map: no map word
    assert "dials: decay pitch" in sim.shown.values()
    sim.receive(osc_api.CONTROLS, "decay", "pitch", "click", "map")
    assert "dials: decay pitch click" in sim.shown.values()
    assert sim.sent[-1] == [MAP]  # the model has a map: the pad asks for it
    sim.receive(osc_api.CONTROLS, "decay", "no-map")
    assert "dials: decay" in sim.shown.values() and sim.sent[-1] == [MAP]  # nothing more asked
    sim.sent.clear()
    sim.receive(osc_api.STATUS, "kick-synth", *status)  # another model serves now
    sim.receive(osc_api.MODEL, "other")  # a /kick/model reply (this device's or another client's on 9001)
    assert sim.sent == [[osc_api.CONTROLS], [osc_api.CONTROLS]]


def test_set_a_after_a_variation_marks_the_variation_by_its_file(patch, kick_daemon):
    """The device against a running daemon: Generate, Vary, Set A, Generate, Morph. A variation's seed
    is its noise, which /kick/generate turns into another kick, so the daemon's reply carries -1 and Set A marks
    the variation's file: the morph starts from the variation the user marked, not from a generated seed."""
    import soundfile as sf

    sim = MaxSim(patch)

    def run(expect: int = 1) -> list:
        msg = sim.sent[-1]
        replies = kick_daemon.send(msg[0], *msg[1:], expect=expect, timeout=60)
        assert [a for a, _ in replies] == [osc_api.DONE] * expect, replies
        for address, args in replies:
            sim.receive(address, *args)
        return [args for _, args in replies]

    sim.set_value("KS Steps", 2)
    sim.press("KS Generate")
    ((_, generated, _),) = run()
    sim.press("KS Vary")
    assert sim.sent[-1][:2] == [osc_api.VARIATION, generated]
    ((_, varied, seed),) = run()
    assert seed == osc_api.NO_SEED
    sim.press("KS Set A")
    assert f"A: {varied}" in sim.shown.values()
    sim.press("KS Generate")
    ((_, last, _),) = run()
    sim.set_value("KS Count", 2)
    sim.press("KS Morph")
    req = osc_api.parse(sim.sent[-1][0], sim.sent[-1][1:], LIMITS)
    assert (req.a, req.b) == (varied, 4711)  # the last kick: generated with the seed the interpreter's [random] draws
    start, _ = run(expect=2)
    with sf.SoundFile(start[1]) as f:
        assert f"a={varied.rsplit('/', 1)[-1]}" in f.comment.split(), f.comment


# ---------------------------------------------------------------- the XY pad

PAD_PX = 120  # the [lcd]'s size; a point at (x, y), y up, is drawn at 4 + 112 x, 4 + 112 (1 - y)
NEAR_KEYS = {"count", "spread", "seed", "id", "steps", "sampler"} | CONTROL_KEYS


def near_request(msg: list) -> dict:
    """A /kick/near message checked against the contract (x y, then key/value pairs: count int 1..16, spread,
    the dials 0..1, seed, id, steps 1..200), and parsed by the daemon's parser when it has the route."""
    assert msg[0] == NEAR and len(msg) >= 3 and len(msg) % 2 == 1, msg
    x, y = msg[1], msg[2]
    assert isinstance(x, float) and isinstance(y, float) and 0 <= x <= 1 and 0 <= y <= 1, msg
    pairs = dict(zip(msg[3::2], msg[4::2]))
    assert len(pairs) == len(msg[3:]) // 2 and set(pairs) <= NEAR_KEYS, msg
    assert isinstance(pairs["count"], int) and 1 <= pairs["count"] <= osc_api.MAX_COUNT, msg
    for key in ("spread", *CONTROL_KEYS):
        assert isinstance(pairs[key], float) and 0 <= pairs[key] <= 1, (key, msg)
    for key in ("seed", "id"):
        assert isinstance(pairs[key], int) and 0 <= pairs[key] < 2**24, (key, msg)
    if "steps" in pairs:
        assert isinstance(pairs["steps"], int) and 1 <= pairs["steps"] <= 200, msg
    if NEAR in osc_api.ADDRESSES:
        osc_api.parse(NEAR, msg[1:], LIMITS)  # raises on anything the daemon refuses
    return {"x": x, "y": y, **pairs}


def pad_id(x: float, y: float) -> int:
    return 1 + 1001 * round(1000 * x) + round(1000 * y)


def test_the_pad_and_its_parameters(patch):
    (lcd,) = patch.find("lcd")
    x, y, w, h = lcd["presentation_rect"]
    assert (w, h) == (PAD_PX, PAD_PX) and y + h <= 169 and x + w <= patch.patcher["devicewidth"]
    assert lcd["presentation"] == 1 and (lcd["numinlets"], lcd["numoutlets"]) == (1, 4)
    params = {longname(b): (b, valueof(b)) for b in patch.boxes.values() if b.get("parameter_enable") == 1}
    for name in ("KS Map X", "KS Map Y", "KS Spread"):
        b, v = params[name]
        assert v["parameter_type"] == 0 and (v["parameter_mmin"], v["parameter_mmax"]) == (0.0, 1.0), name
        assert v["parameter_initial"] == [0.2 if name == "KS Spread" else 0.5], name
    assert params["KS Map X"][0]["maxclass"] == params["KS Map Y"][0]["maxclass"] == "live.numbox"
    for name in ("KS Near", "KS Locate"):
        assert params[name][0]["maxclass"] == "live.text" and params[name][0]["mode"] == 0, name
    # every shown box fits in the device's width
    for b in patch.boxes.values():
        if b.get("presentation") == 1:
            assert b["presentation_rect"][0] + b["presentation_rect"][2] <= patch.patcher["devicewidth"], b["id"]


def test_a_click_on_the_pad_asks_for_kicks_near_it(patch):
    """A click at pixel (60, 32) is the point (0.5, 0.75): /kick/near 0.5 0.75 with Count, Spread, the seed Random
    drew, the dials and an id that says where it was asked; X and Y show the point without sending twice."""
    sim = MaxSim(patch)
    sim.set_value("KS Spread", 0.35)
    sim.set_value("KS Decay", 0.8)
    sim.click(60, 32)
    (msg,) = sim.sent
    req = near_request(msg)
    assert (req["x"], req["y"]) == (0.5, 0.75)
    assert (req["count"], req["spread"], req["seed"], req["decay"]) == (1, 0.35, 4711, 0.8)
    assert req["id"] == pad_id(0.5, 0.75) and "steps" not in req
    assert sim.state[[b for b in patch.find("live.numbox") if longname(b) == "KS Map X"][0]["id"]]["value"] == 0.5
    assert sim.state[[b for b in patch.find("live.numbox") if longname(b) == "KS Map Y"][0]["id"]]["value"] == 0.75
    # the pad's corners are 0 and 1 (a click in the 4 px margin is clipped), Steps and Random off are sent
    sim.advance(1000)
    sim.set_value("KS Steps", 12)
    sim.set_value("KS Random Seed", 0)
    sim.set_value("KS Seed", 99)
    sim.click(0, 119)
    req = near_request(sim.sent[-1])
    assert (req["x"], req["y"], req["steps"], req["seed"]) == (0.0, 0.0, 12, 99)
    assert req["id"] == 1


def test_a_drag_is_rate_limited_to_one_request_per_250_ms_times_count(patch):
    """A drag sends its first point at once and then its latest point at most every 250 ms x Count: four kicks a
    second at most, about what the daemon makes on 2 CPU cores (its queue refuses with `busy` past 32 kicks)."""
    sim = MaxSim(patch)
    for i in range(10):  # ten drag steps within 90 ms
        sim.click(10 + 10 * i, 60)
        sim.advance(10)
    assert len(sim.sent) == 1 and abs(near_request(sim.sent[0])["x"] - (10 - 4) / 112) < 1e-9
    sim.advance(150)  # 250 ms after the first: the drag's last position
    assert len(sim.sent) == 2 and abs(near_request(sim.sent[1])["x"] - (100 - 4) / 112) < 1e-9
    sim.advance(1000)
    assert len(sim.sent) == 2  # nothing more was held
    sim.set_value("KS Count", 4)
    sim.click(60, 60)
    sim.advance(500)
    sim.click(70, 60)
    sim.advance(400)
    assert len(sim.sent) == 3  # 4 kicks: 1 s between requests
    sim.advance(100)
    assert len(sim.sent) == 4 and near_request(sim.sent[3])["count"] == 4


def test_moving_x_or_y_as_parameters_asks_and_near_asks_at_the_point(patch):
    """Automation or a MIDI mapping moving KS Map X / Y asks for kicks there (through the same rate limit); KS Near
    asks at the current point; Spread alone sends nothing."""
    sim = MaxSim(patch)
    sim.set_value("KS Spread", 0.6)
    assert sim.sent == []
    sim.set_value("KS Map X", 0.25)
    assert [(r["x"], r["y"], r["spread"]) for r in map(near_request, sim.sent)] == [(0.25, 0.5, 0.6)]
    sim.advance(300)
    sim.set_value("KS Map Y", 0.9)
    sim.advance(300)
    sim.press("KS Near")
    sim.advance(300)
    assert [(r["x"], r["y"]) for r in map(near_request, sim.sent)] == [(0.25, 0.5), (0.25, 0.9), (0.25, 0.9)]


def test_the_map_is_drawn_and_kicks_are_marked_where_they_were_asked(patch):
    """/kick/controls ending in `map` makes the device ask /kick/map; part 1 clears the pad; each point is a dot at
    its place (y up); /kick/map/axes labels the axes; a /kick/done with a pad id is an orange mark at the point
    asked; a located kick is a white square; kicks that are not the pad's (id < 1) leave no mark."""
    sim = MaxSim(patch)
    sim.receive(osc_api.CONTROLS, "decay", "pitch", "click", "map")
    assert sim.sent == [[MAP]]
    sim.receive(MAP, 1, 2, 0.0, 1.0, "kick_a", 0.5, 0.25, "kick b")
    assert sim.drawn[0] == ["clear"]
    assert sim.pad_shapes() == [["paintoval", 1.0, 1.0, 7.0, 7.0, 110, 150, 190],
                                ["paintoval", 57.0, 85.0, 63.0, 91.0, 110, 150, 190]]
    sim.receive(MAP, 2, 2, 1.0, 0.0, "kick_c")  # the second datagram adds to the first
    assert len(sim.pad_shapes()) == 3 and sim.pad_shapes()[2][1:5] == [113.0, 113.0, 119.0, 119.0]
    assert "kit map: part 2 of 2" in sim.shown.values()
    sim.receive(MAP_AXES, "longer decay ->", "higher pitch ->")
    assert {"x: longer decay ->", "y: higher pitch ->"} <= set(sim.shown.values())
    sim.receive(osc_api.DONE, pad_id(0.5, 0.75), "/out/kick_1.wav", 7)
    sim.receive(osc_api.DONE, -3, "/out/kick_2.wav", 8)  # a Generate press's kick: no mark
    assert sim.pad_shapes()[3:] == [["paintoval", 57.0, 29.0, 63.0, 35.0, 255, 140, 40]]
    sim.receive(LOCATE, 0.25, 0.5, "fav.wav")
    assert sim.pad_shapes()[4:] == [["paintrect", 29.0, 57.0, 35.0, 63.0, 255, 255, 255]]
    assert "located fav.wav on the map" in sim.shown.values()
    sim.receive(MAP, 1, 1, 0.5, 0.5, "only")  # a new map (another model): the pad starts again
    assert sim.pad_shapes() == [["paintoval", 57.0, 57.0, 63.0, 63.0, 110, 150, 190]]


def test_a_model_without_a_map_greys_the_pad_and_the_pad_sends_nothing(patch):
    sim = MaxSim(patch)
    sim.receive(osc_api.CONTROLS, "decay", "pitch", "click", "no-map")
    assert sim.sent == [] and "dials: decay pitch click" in sim.shown.values()
    assert sim.drawn[0] == ["clear"] and ["write", "no", "kit", "map"] in sim.drawn
    assert "x: none (the model has no kit map)" in sim.shown.values()
    sim.click(60, 60)
    sim.press("KS Near")
    sim.set_value("KS Map X", 0.3)
    sim.advance(1000)
    assert sim.sent == []
    sim.receive(osc_api.CONTROLS, "decay", "map")  # a model with a map again
    sim.click(60, 60)
    assert [m[0] for m in sim.sent] == [MAP, NEAR]


def test_locate_places_the_last_kick(patch):
    sim = MaxSim(patch)
    sim.press("KS Locate")
    assert sim.sent == [] and "error: press Generate first" in sim.shown.values()
    sim.receive(osc_api.DONE, -2, "/out/kick_20260101-000000_5.wav", 5)
    sim.receive(osc_api.DONE, -3, "/out/kick_20260101-000001_9.wav", 9)
    sim.press("KS Locate")
    assert sim.sent == [[LOCATE, "/out/kick_20260101-000001_9.wav"]]


def test_the_pad_against_the_daemon(patch, kick_daemon):
    """Once the daemon serves the map's routes: a click's /kick/near is accepted and its kicks come back with the
    pad's id, and are marked on the pad; /kick/controls says whether the model has a map."""
    if NEAR not in osc_api.ADDRESSES:
        pytest.skip("the daemon has no /kick/near yet (kickserver/osc_api.py): the pad is checked against the contract")
    sim = MaxSim(patch)
    ((address, controls),) = kick_daemon.send(osc_api.CONTROLS, expect=1, timeout=30)
    sim.receive(address, *controls)
    assert controls[-1] in ("map", "no-map"), controls
    if controls[-1] == "no-map":
        sim.click(60, 32)
        assert sim.sent == []
        return
    sim.set_value("KS Steps", 2)
    sim.set_value("KS Count", 2)
    sim.click(60, 32)
    msg = sim.sent[-1]
    replies = kick_daemon.send(msg[0], *msg[1:], expect=2, timeout=60)
    assert [a for a, _ in replies] == [osc_api.DONE] * 2, replies
    for address, args in replies:
        assert args[0] == pad_id(0.5, 0.75)
        sim.receive(address, *args)
    assert sim.pad_shapes()[-2:] == [["paintoval", 57.0, 29.0, 63.0, 35.0, 255, 140, 40]] * 2


def test_a_map_refused_for_its_return_path_is_proved_and_asked_again(patch):
    """A daemon that serves the device's address only once it proved its return path (docs/daemon.md, Exposure:
    beyond loopback by default) answers /kick/map with /kick/map/proof <token>: the device echoes the token
    (/kick/proof <token>) and asks /kick/map again, so the pad is drawn as on loopback."""
    sim = MaxSim(patch)
    sim.receive(osc_api.MAP_PROOF, 4711)
    assert sim.sent == [[osc_api.PROOF, 4711], [MAP]]
    # once per map asked: a daemon that keeps refusing (its proof never holds) gets no endless echo
    sim.receive(osc_api.MAP_PROOF, 4711)
    assert sim.sent == [[osc_api.PROOF, 4711], [MAP]]
    assert "map: proving this address to the daemon" in sim.shown.values()
    sim.receive(osc_api.CONTROLS, "decay", "pitch", "click", "map")  # the device asks again (a Check, a new model)
    sim.receive(osc_api.MAP_PROOF, 4712)
    assert sim.sent[2:] == [[MAP], [osc_api.PROOF, 4712], [MAP]]


# ---------------------------------------------------------------- the kit


def test_kit_asks_for_the_last_kick_as_a_kit_and_shows_its_folder(patch):
    """Kit sends /kick/kit with the last kick's file as the source, Layers and Robins, and the note when Note is
    set (a MIDI number; 0: none); before any kick it says so and sends nothing; /kick/kit/done shows the folder."""
    sim = MaxSim(patch)
    sim.press("KS Kit")
    assert sim.sent == [] and "error: press Generate first" in sim.shown.values()
    sim.receive(osc_api.DONE, -2, "/out/kick_20260101-000000_5.wav", 5)
    sim.press("KS Kit")
    assert sim.sent[-1] == [KIT, "source", "/out/kick_20260101-000000_5.wav", "layers", 4, "robins", 2]
    sim.set_value("KS Layers", 8)
    sim.set_value("KS Robins", 3)
    sim.set_value("KS Note", 33)
    sim.press("KS Kit")
    assert sim.sent[-1] == [KIT, "source", "/out/kick_20260101-000000_5.wav", "layers", 8, "robins", 3, "note", 33]
    if KIT in osc_api.ADDRESSES:  # the daemon's own parser, once it has the route
        limits = osc_api.Limits(controls=tuple(sorted(CONTROL_KEYS)),
                                units=(osc_api.UnitControl("pitch_hz", "pitch", 30.0, 250.0),))
        req = osc_api.parse(KIT, sim.sent[-1][1:], limits)
        assert (req.source, req.layers, req.robins) == ("/out/kick_20260101-000000_5.wav", 8, 3)
        assert req.pitch_hz == pytest.approx(55.0)  # MIDI 33 = A1
        assert osc_api.parse(KIT, sim.sent[-2][1:], limits).pitch_hz is None
    sim.receive(KIT_DONE, -7, "/out/kit_A1_short_5", 8, 3, -1)
    assert "kit /out/kit_A1_short_5 - 8 layers x 3 robins" in sim.shown.values()
    (kit,) = [b for b in patch.boxes.values() if longname(b) == "KS Kit"]
    assert kit["presentation_rect"][0] + kit["presentation_rect"][2] <= patch.patcher["devicewidth"]



def test_kit_against_the_daemon(patch, kick_daemon):
    """The device against a running daemon that serves /kick/kit: Generate, then Kit 2 x 2 from the kick's file;
    one /kick/kit/done names a folder holding the 4 hits, and the device shows it."""
    if KIT not in osc_api.ADDRESSES:
        pytest.skip("the daemon has no /kick/kit route yet (kickserver/osc_api.py): the Kit button's request is "
                    "checked against docs/kits.md's contract (test_kit_asks_for_the_last_kick_as_a_kit...)")
    from pathlib import Path

    sim = MaxSim(patch)
    sim.set_value("KS Steps", 2)
    sim.press("KS Generate")
    ((address, args),) = kick_daemon.send(*sim.sent[-1], expect=1, timeout=60)
    sim.receive(address, *args)
    sim.set_value("KS Layers", 2)
    sim.set_value("KS Robins", 2)
    sim.press("KS Kit")
    assert sim.sent[-1][:3] == [KIT, "source", args[1]]
    ((address, reply),) = kick_daemon.send(*sim.sent[-1], expect=1, timeout=120)
    assert address == KIT_DONE, reply
    folder = Path(reply[1])
    assert reply[2:4] == [2, 2] and len(list(folder.glob("*.wav"))) == 4, reply
    sim.receive(address, *reply)
    assert f"kit {folder} - 2 layers x 2 robins" in sim.shown.values()


# ---------------------------------------------------------------- the note on every request

UNITS = osc_api.Limits(controls=tuple(sorted(CONTROL_KEYS)),
                       units=(osc_api.UnitControl("pitch_hz", "pitch", 30.0, 250.0),))  # a kick-synth model's


def pitch_keys(msg: list) -> dict:
    """The pitch keys of a request (`pitch`, `note`, `pitch_hz`) and their values."""
    return {k: v for k, v in zip(msg[1:], msg[2:]) if k in ("pitch", "note", "pitch_hz")}


def test_the_note_goes_with_every_request(patch):
    """KS Note above 0 goes with Generate, Vary, Morph, the pad's Near and Kit as `note N`, in place of the Pitch dial
    (the daemon refuses the two together); at 0 Generate, Morph and Near send the dial and Vary no pitch at all.
    Every request parses in the daemon's parser for a model that takes units, the note as A1's 55 Hz."""
    sim = MaxSim(patch)
    sim.receive(osc_api.DONE, -2, "/out/kick_20260101-000000_5.wav", 5)
    sim.set_value("KS Note", 33)
    sim.press("KS Generate")
    sim.press("KS Vary")
    sim.press("KS Set A")
    sim.press("KS Morph")
    sim.click(60, 32)
    sim.press("KS Kit")
    assert [m[0] for m in sim.sent] == [osc_api.GENERATE, osc_api.VARIATION, osc_api.INTERPOLATE, NEAR, KIT]
    assert [pitch_keys(m) for m in sim.sent] == [{"note": 33}] * 5, sim.sent
    for msg in sim.sent:
        req = osc_api.parse(msg[0], msg[1:], UNITS)
        assert (req.pitch_hz if msg[0] == KIT else req.controls["pitch_hz"]) == pytest.approx(55.0), msg
    sim.sent.clear()
    sim.set_value("KS Note", 0)
    sim.set_value("KS Pitch", 0.8)
    sim.press("KS Generate")
    sim.press("KS Vary")
    sim.press("KS Morph")
    sim.advance(1000)
    sim.press("KS Near")
    sim.press("KS Kit")
    assert [pitch_keys(m) for m in sim.sent] == [{"pitch": 0.8}, {}, {"pitch": 0.8}, {"pitch": 0.8}, {}], sim.sent
    for msg in sim.sent:
        osc_api.parse(msg[0], msg[1:], UNITS)


def test_a_note_the_model_refuses_shows_the_daemons_reason(patch, kick_daemon):
    """Against a daemon whose model takes no units (the tiny test model): Generate with Note 33 is refused, and the
    device's error line shows the daemon's reason."""
    sim = MaxSim(patch)
    sim.set_value("KS Note", 33)
    sim.press("KS Generate")
    ((address, args),) = kick_daemon.send(*sim.sent[-1], expect=1, timeout=30)
    assert address == osc_api.ERROR and args[1].startswith("note: the serving model takes no pitch in Hz"), args
    sim.receive(address, *args)
    assert f"error: {args[1]}" in sim.shown.values()


# ---------------------------------------------------------------- the audition device (kickserver-audition.amxd)


def test_the_audition_device_is_an_audio_effect_in_lives_container(audition):
    """A MIDI effect has no audio output, so the last kick is heard through a second device, an audio effect: its
    project block says so (amxdtype "aaaa"), and the .amxd is the .maxpat in Live's container with ampf "aaaa"."""
    p = audition.patcher
    assert p["openinpresentation"] == 1 and set(p["project"]) == PROJECT_KEYS
    assert p["project"]["amxdtype"] == int.from_bytes(b"aaaa", "big") == 1633771873
    assert p["project"]["contents"] == {"patchers": {}}, "it uses no abstractions or files"
    build = load_build_module()
    maxpat = AUDITION_MAXPAT.read_bytes()
    amxd = AUDITION_AMXD.read_bytes()
    assert amxd == build.build_amxd(maxpat), "kickserver-audition.amxd is stale: run python max_patches/build_amxd.py"
    assert [t for t, _ in build.read_chunks(amxd)] == ["ampf", "meta", "ptch"] and amxd[8:12] == b"aaaa"
    assert build.patcher_from_amxd(amxd) == maxpat
    shown = [b for b in audition.boxes.values() if b.get("presentation") == 1]
    for b in shown:
        x, y, w, h = b["presentation_rect"]
        assert x >= 0 and y >= 0 and x + w <= p["devicewidth"] and y + h <= 169, b["id"]
    params = [b for b in audition.boxes.values() if b.get("parameter_enable") == 1]
    names = {longname(b) for b in params}
    assert names == {"KSA Play", "KSA Level", "KSA Auto"} and all(b.get("presentation") == 1 for b in params)
    table = {k: v for k, v in p["parameters"].items() if k.startswith("obj-")}
    assert table == {b["id"]: [longname(b), valueof(b)["parameter_shortname"], 0] for b in params}
    level = valueof(next(b for b in params if longname(b) == "KSA Level"))
    assert (level["parameter_mmin"], level["parameter_mmax"], level["parameter_unitstyle"]) == (-70.0, 0.0, 4)  # dB
    assert level["parameter_initial"] == [-6.0]
    (play,) = [b for b in params if longname(b) == "KSA Play"]
    assert play["maxclass"] == "live.text" and play["mode"] == 0


def test_the_audition_device_passes_the_track_through_and_mixes_the_kick_in(audition):
    """[plugin~] feeds [plugout~] channel for channel (the track's audio goes on); [play~] reaches both of
    [plugout~]'s inlets through the level's [*~], which KSA Level sets through [dbtoa] and [line~]; [play~] plays
    the [buffer~] the path is read into, a name Live makes unique per device (---)."""
    (pin,) = audition.find("plugin~")
    (pout,) = audition.find("plugout~")
    assert (pout["id"], 0) in audition.targets(pin["id"], 0) and (pout["id"], 1) in audition.targets(pin["id"], 1)
    (play,) = audition.find("play~")
    (buf,) = audition.find("buffer~")
    assert play["text"].split()[1] == buf["text"].split()[1] and buf["text"].split()[1].startswith("---")
    reaches = audition.reaches(play["id"], 0, lambda b: b["id"] == pout["id"])
    assert reaches, "play~ does not reach plugout~"
    ((mul, _),) = audition.targets(play["id"], 0)
    assert audition.boxes[mul]["text"] == "*~" and {(pout["id"], 0), (pout["id"], 1)} == set(audition.targets(mul, 0))
    (level,) = [b for b in audition.boxes.values() if longname(b) == "KSA Level"]
    feeders = audition.upstream(mul, lambda b: b["id"] == level["id"], inlet=1)
    assert feeders and [audition.boxes[s]["text"] for s, _ in audition.sources(mul, 1)] == ["line~"]
    assert audition.reaches(level["id"], 0, lambda b: b.get("text") == "dbtoa")


def test_the_main_device_sends_each_kicks_path_to_the_audition_device(patch, audition):
    """kickserver.amxd sends the path of each /kick/done to the global name kickserver-last-kick (no ---, so Live
    shares it between devices); the audition device's [r] of that name reaches [buffer~]'s `replace` (the buffer
    resized to the file), shows the path, and says it is reading it."""
    (send,) = [b for b in patch.find("s") if b["text"].split()[1:] == [LAST_KICK]]
    (unpack,) = [patch.boxes[s] for s, so in patch.sources(send["id"], 0)]
    assert unpack["text"] == "unpack 0 s 0" and (send["id"], 0) in patch.targets(unpack["id"], 1)
    sim = MaxSim(patch)
    sim.receive(osc_api.DONE, -2, "/home/you/Music/kickserver/kick_20260101-000000_5.wav", 5)
    assert sim.named[LAST_KICK] == [["/home/you/Music/kickserver/kick_20260101-000000_5.wav"]]

    (recv,) = [b for b in audition.find("r") if b["text"].split()[1:] == [LAST_KICK]]
    (buf,) = audition.find("buffer~")
    (replace,) = audition.reaches(recv["id"], 0, lambda b: b.get("text") == "prepend replace")
    assert audition.targets(replace["id"], 0) == [(buf["id"], 0)]
    run = MaxSim(audition)
    run.deliver(LAST_KICK, *sim.named[LAST_KICK][-1])
    assert run.got[buf["id"]] == [["replace", "/home/you/Music/kickserver/kick_20260101-000000_5.wav"]]
    assert "/home/you/Music/kickserver/kick_20260101-000000_5.wav" in run.shown.values()
    assert "reading the kick..." in run.shown.values()


def test_play_plays_the_last_kick_and_auto_plays_each_new_one(audition):
    """Play sends `start` to [play~] (the whole buffer from its start, at normal speed); with Auto off a kick that
    has been read is not played by itself, with Auto on it is, once [buffer~] says it has read the file."""
    (play,) = audition.find("play~")
    sim = MaxSim(audition)
    sim.deliver(LAST_KICK, "/out/kick_1.wav")
    sim.buffer_read()
    assert "ready: press Play" in sim.shown.values() and play["id"] not in sim.got
    sim.press("KSA Play")
    assert sim.got[play["id"]] == [["start"]]
    sim.set_value("KSA Auto", 1)
    sim.deliver(LAST_KICK, "/out/kick_2.wav")
    assert sim.got[play["id"]] == [["start"]]  # not before the file is read
    sim.buffer_read()
    assert sim.got[play["id"]] == [["start"], ["start"]]
    sim.set_value("KSA Level", -6.0)
    (line,) = audition.find("line~")
    assert sim.got[line["id"]][-1] == [pytest.approx(10 ** (-6 / 20)), 20.0]


def test_build_amxd_builds_and_checks_every_device(tmp_path):
    """build_amxd.py (and its --check) covers both devices; --maxpat builds one, its .amxd beside it by default."""
    ok = subprocess.run([sys.executable, str(BUILD), "--check"], capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0, ok.stderr
    assert "kickserver.amxd matches kickserver.maxpat" in ok.stdout
    assert "kickserver-audition.amxd matches kickserver-audition.maxpat" in ok.stdout
    stale = tmp_path / "stale.amxd"
    stale.write_bytes(AMXD.read_bytes())
    run = subprocess.run([sys.executable, str(BUILD), "--check", "--maxpat", str(AUDITION_MAXPAT),
                          "--amxd", str(stale)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 1 and "out of date" in run.stderr
    copy = tmp_path / "kickserver-audition.maxpat"
    copy.write_bytes(AUDITION_MAXPAT.read_bytes())
    built = subprocess.run([sys.executable, str(BUILD), "--maxpat", str(copy)], capture_output=True, text=True,
                           timeout=60)
    assert built.returncode == 0 and "audio device" in built.stdout, built.stderr
    assert (tmp_path / "kickserver-audition.amxd").read_bytes() == AUDITION_AMXD.read_bytes()
    alone = subprocess.run([sys.executable, str(BUILD), "--amxd", str(stale)], capture_output=True, text=True,
                           timeout=60)
    assert alone.returncode == 2 and "--amxd goes with --maxpat" in alone.stderr
