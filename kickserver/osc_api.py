"""The OSC contract (v1): parse and validate requests, build replies.

Requests arrive as (address, args) from any OSC client (Max's [udpsend], Pd's [oscformat], liblo,
python-osc). Parsing never raises anything but RequestError, whose reason goes back to the client
as `/kick/error <id> <reason>`. Replies are built with explicit int32/float32/string type tags only
(Pd 0.53's [oscparse] drops `h`, `d`, `T`, `F`, `N`) and stay under MAX_DATAGRAM bytes.
"""

from __future__ import annotations

import math
import random
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from pythonosc.osc_message import OscMessage, ParseError
from pythonosc.osc_message_builder import OscMessageBuilder

from kickmodel.config import SEED_LIMIT

from .config import MAX_MODEL_NAME, valid_model_name

PING = "/kick/ping"
GENERATE = "/kick/generate"
VARIATION = "/kick/variation"
STATUS = "/kick/status"
MODELS = "/kick/models"
MODEL = "/kick/model"
INTERPOLATE = "/kick/interpolate"
CONTROLS = "/kick/controls"
MAP = "/kick/map"  # the serving model's kit map: its kicks' points, in parts, then MAP_AXES
NEAR = "/kick/near"  # kicks from a point of the map
LOCATE = "/kick/locate"  # where a file's kick lies on the map
PROOF = "/kick/proof"  # a return path proved: the token a reply carried, echoed
ADDRESSES: tuple[str, ...] = (PING, GENERATE, VARIATION, STATUS, MODELS, MODEL, INTERPOLATE, CONTROLS, MAP, NEAR,
                              LOCATE, PROOF)

PONG = "/kick/pong"
DONE = "/kick/done"
ERROR = "/kick/error"
MAP_AXES = "/kick/map/axes"
MAP_PROOF = "/kick/map/proof"  # /kick/map from an address that has not proved its return path: its token
REPLY_ADDRESSES: tuple[str, ...] = (PONG, DONE, ERROR, STATUS, MODELS, MODEL, CONTROLS, MAP, MAP_AXES, LOCATE, PROOF,
                                    MAP_PROOF)

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
MAX_STRING = 256  # longest string accepted in a request
MAX_DATAGRAM = 4000  # replies stay under Max's and Pd's 4096-byte datagrams
MAX_COUNT = 16
NO_ID = -1  # in /kick/error: the request named no id and none was assigned
ID_MIN = 0  # ids a client chooses; the server assigns -2, -3, ... (frontend.Routes._id), so they never collide
MAX_ARGS = 64  # arguments in one request message
MAX_BUNDLE_MESSAGES = 32  # messages in one datagram (a bundle, nested bundles included)
MAX_BUNDLE_DEPTH = 4
# Type tags a request may carry: int32, float32, string, and int64 / float64 read as int and float. python-osc
# also decodes T, F, N and b, which `parse` refuses with the request's id; any other tag refuses the whole
# message before python-osc sees it (it would drop the tag silently and misread what follows).
ACCEPTED_TAGS = frozenset("ifsdh")
DECODED_TAGS = ACCEPTED_TAGS | frozenset("TFNb")

GENERATE_KEYS = ("id", "count", "seed", "steps", "sampler")
VARIATION_KEYS = ("id", "count", "seed", "steps", "sampler", "strength")
INTERPOLATE_KEYS = ("id", "a", "b", "t", "count", "steps", "sampler")
INTERPOLATE_DEFAULT_COUNT = 5  # /kick/interpolate with neither t nor count: t = 0, 0.25, 0.5, 0.75, 1
NEAR_KEYS = ("id", "count", "spread", "seed", "steps", "sampler")
NEAR_DEFAULT_SPREAD = 0.2
# /kick/controls' last word: whether the serving model has a kit map (clients that build dials from the names skip it)
HAS_MAP, NO_MAP = "map", "no-map"
NO_SEED = -1  # the seed field of a /kick/done for a kick that no seed regenerates (an interpolation's inner kicks)

# /kick/kit: one kick made a kit, layers x robins hits in one folder, answered by one /kick/kit/done.
# Its address joins ADDRESSES where its route joins ROUTES (below); kickmodel.kitrules' MAX_LAYERS, MAX_ROBINS.
KIT = "/kick/kit"
KIT_DONE = "/kick/kit/done"
REPLY_ADDRESSES += (KIT_DONE,)
KIT_KEYS = ("id", "seed", "source", "strength", "layers", "robins", "note", "key", "steps", "sampler")
KIT_MAX_LAYERS, KIT_MAX_ROBINS = 8, 4
KIT_DEFAULT_LAYERS, KIT_DEFAULT_ROBINS = 4, 2


class RequestError(Exception):
    """A request refused before it is queued; `reason` is sent back with `id` (-1 if unknown)."""

    def __init__(self, reason: str, id: int = NO_ID) -> None:
        super().__init__(reason)
        self.reason = reason
        self.id = id


class Malformed(RequestError):
    """A message that is not a well-formed request to an address this server serves (a type tag it does not read,
    a broken address or argument, an unknown address). Nothing a real client sends by mistake is this short, but
    a forger's datagram is: its refusal must never be much larger than the datagram (`refusal`), so `shorter`
    holds shorter forms of the reason, longest first."""

    def __init__(self, reason: str, shorter: Sequence[str] = ()) -> None:
        super().__init__(reason)
        self.shorter = tuple(shorter)


def refusal(e: RequestError, limit: int) -> bytes | None:
    """The /kick/error for e in at most `limit` bytes: its reason, else the longest of a Malformed's shorter forms
    that fits, else None (no reply)."""
    for reason in (e.reason, *getattr(e, "shorter", ())):
        data = error(e.id, reason)
        if len(data) <= limit:
            return data
    return None


@dataclass
class Ping:
    pass


@dataclass
class Status:
    pass


@dataclass
class Models:
    pass


@dataclass
class Controls:
    ranges: bool = False  # `/kick/controls ranges`: each control's range (`/kick/ranges`), not the names


@dataclass
class SelectModel:
    name: str


@dataclass
class Generate:
    id: int | None = None
    count: int = 1
    seed: int | None = None
    steps: int | None = None
    sampler: str | None = None
    controls: dict[str, float] = field(default_factory=dict)


@dataclass
class Variation(Generate):
    source: str = ""
    strength: float = 0.5


@dataclass
class Near(Generate):
    """`count` kicks from the kit map's point (x, y) (0..1 each, y up), each its seed's noise scaled by spread."""

    x: float = 0.5
    y: float = 0.5
    spread: float = NEAR_DEFAULT_SPREAD


@dataclass
class KitMap:
    pass


@dataclass
class Proof:
    """`/kick/proof`: ask for this address's token (token None), or echo it (proving the return path)."""

    token: int | None = None


@dataclass
class Locate:
    """Where a file's kick (a source, as /kick/variation reads it) lies on the kit map."""

    source: str


@dataclass
class Interpolate:
    """A morph from a to b, each a seed (int) or a file name (str, opened like a variation's source): one kick
    per t in `ts`."""

    id: int | None = None
    a: int | str | None = None
    b: int | str | None = None
    ts: list[float] = field(default_factory=list)
    steps: int | None = None
    sampler: str | None = None
    controls: dict[str, float] = field(default_factory=dict)

    @property
    def count(self) -> int:
        return len(self.ts)

    def reply_seed(self, i: int) -> int:
        """The seed field of kick i's /kick/done: the seed /kick/generate turns into this very kick (with the same
        steps, sampler and controls) -- a's at t = 0, b's at t = 1, where that end is a seed -- else NO_SEED."""
        t = self.ts[i]
        if t == 0.0 and isinstance(self.a, int):
            return self.a
        if t == 1.0 and isinstance(self.b, int):
            return self.b
        return NO_SEED


Request = (Ping | Status | Models | Controls | SelectModel | Generate | Variation | Interpolate | Near | KitMap | Locate
           | Proof)


@dataclass(frozen=True)
class UnitControl:
    """A control given in its unit instead of as a 0..1 dial (`pitch_hz 43.65`; kickmodel.descriptors.UNIT_CONTROLS):
    the dial it stands for and the range a model takes."""

    name: str
    dial: str
    lo: float
    hi: float


@dataclass(frozen=True)
class Limits:
    """What the serving model and the server accept; the receive loop passes the current one."""

    controls: tuple[str, ...] = ()
    samplers: tuple[str, ...] | None = None  # None: a one-pass model, which ignores any sampler named
    max_steps: int = 200
    units: tuple[UnitControl, ...] = ()  # the controls in units the serving model takes (gen.unit_controls)
    other_units: tuple[str, ...] = ()  # unit names other models take: refused as such, not as an unknown key

    @property
    def control_keys(self) -> tuple[str, ...]:
        """What a request may name as a control: the dials, then the units."""
        return self.controls + tuple(u.name for u in self.units)


# ------------------------------------------------------------------ values


def _describe(v: Any) -> str:
    if isinstance(v, bool):
        return f"bool {v}"
    if v is None:
        return "nil"
    if isinstance(v, str):
        return f"string {clip(repr(v), 40)}"
    if isinstance(v, (int, float)):
        return f"{type(v).__name__} {v!r}"
    return f"{type(v).__name__} value"


def clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."


def as_int(key: str, v: Any, lo: int, hi: int, id: int = NO_ID) -> int:
    """An int within lo..hi; a float with an integral value counts (Pd sends floats)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise RequestError(f"{key} must be an int, got {_describe(v)}", id)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise RequestError(f"{key} must be a finite number, got {v!r}", id)
        if v != int(v):
            raise RequestError(f"{key} must be a whole number, got {v!r}", id)
        v = int(v)
    if not lo <= v <= hi:
        raise RequestError(f"{key} must be within {lo}..{hi}, got {v}", id)
    return v


def _f32(v: float) -> float:
    """v rounded to float32, the precision of an OSC 'f' argument (infinite past float32's range)."""
    try:
        return struct.unpack("<f", struct.pack("<f", v))[0]
    except OverflowError:
        return math.copysign(math.inf, v)


def _within(v: float, lo: float, hi: float) -> float | None:
    """v if it lies within lo..hi, compared in the wire's precision too: a bound as a float32 (the advertised
    `decay_s 0.92` arrives as 0.92000002) counts as the bound, and v is clamped onto it; None when outside."""
    if lo <= v <= hi:
        return v
    if min(lo, _f32(lo)) <= v <= max(hi, _f32(hi)):
        return min(max(v, lo), hi)
    return None


def shown(v: float) -> str:
    """v as it was received, for a refusal: the shortest decimal that reads back as it (in float32's precision for a
    value a float32 holds), so 1.0000001 is never printed as an in-range `1`."""
    if _f32(v) == v and math.isfinite(v):
        digits = next(d for d in range(1, 10) if _f32(float(f"{v:.{d}g}")) == v)
        return f"{v:.{max(digits, 6)}g}"  # at least :g's 6 digits, so 300 stays 300 (not 3e+02)
    return f"{v:g}" if float(f"{v:g}") == v else repr(v)


def as_float(key: str, v: Any, lo: float, hi: float, id: int = NO_ID) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise RequestError(f"{key} must be a number, got {_describe(v)}", id)
    v = float(v)
    if not math.isfinite(v):
        raise RequestError(f"{key} must be a finite number, got {v!r}", id)
    got = _within(v, lo, hi)
    if got is None:
        raise RequestError(f"{key} must be within {lo:g}..{hi:g}, got {shown(v)}", id)
    return got


def as_str(key: str, v: Any, id: int = NO_ID) -> str:
    if not isinstance(v, str):
        raise RequestError(f"{key} must be a string, got {_describe(v)}", id)
    if len(v) > MAX_STRING:
        raise RequestError(f"{key} is longer than {MAX_STRING} characters", id)
    if "\0" in v:
        raise RequestError(f"{key} contains a NUL character", id)
    return v


def _check_arg_types(args: Sequence[Any], id: int = NO_ID) -> None:
    for i, a in enumerate(args):
        if isinstance(a, str):
            if len(a) > MAX_STRING:
                raise RequestError(f"argument {i + 1} is a string longer than {MAX_STRING} characters", id)
        elif isinstance(a, bool) or not isinstance(a, (int, float)):
            raise RequestError(f"argument {i + 1} has an unsupported type ({_describe(a)}); "
                               "use int, float or string", id)


def _find_id(args: Sequence[Any]) -> int:
    """The request's id if it carries a usable one (so even a refusal can name it), else -1.

    Runs before any other check, on arguments of any type (blobs, nil, over-long strings), so every
    refusal of a request that names its id echoes it."""
    for i in range(len(args) - 1):
        if isinstance(args[i], str) and args[i] == "id":
            try:
                return as_int("id", args[i + 1], ID_MIN, INT32_MAX)
            except RequestError:
                return NO_ID
    return NO_ID


def _pairs(args: Sequence[Any], id: int) -> list[tuple[str, Any]]:
    if len(args) % 2:
        raise RequestError(f"expected key/value pairs after the positional arguments, got an odd number "
                           f"({len(args)}) of arguments", id)
    out: list[tuple[str, Any]] = []
    seen: set[str] = set()
    for i in range(0, len(args), 2):
        k = args[i]
        if not isinstance(k, str):
            raise RequestError(f"expected a key (string) at argument position, got {_describe(k)}", id)
        if k in seen:
            raise RequestError(f"key {clip(k, 40)!r} given twice", id)
        seen.add(k)
        out.append((k, args[i + 1]))
    return out


def _takes(limits: Limits) -> str:
    """What the serving model takes as controls, for a refusal: "decay, pitch (dials 0..1), pitch_hz 30..250"."""
    parts = [f"{u.name} {u.lo:g}..{u.hi:g}" for u in limits.units]
    if limits.controls:
        dials = "dials" if len(limits.controls) > 1 else "dial"
        parts.insert(0, f"{', '.join(limits.controls)} ({dials} 0..1)")
    return ", ".join(parts)


def _control(controls: dict[str, float], k: str, v: Any, limits: Limits, id: int) -> bool:
    """Read key k into controls if it is a control: a dial (0..1) or a control in units the serving model takes
    (within its range). A unit the model does not take is refused naming what it takes; False: not a control."""
    if k in limits.controls:
        controls[k] = as_float(k, v, 0.0, 1.0, id)
        return True
    if k == NOTE and (limits.units or PITCH_HZ in limits.other_units):  # a note is a pitch_hz, said in music
        if PITCH_HZ in controls:
            raise RequestError(f"note and {PITCH_HZ}: give one of them, not both", id)
        controls[PITCH_HZ] = asked_pitch(v, None, limits, id)
        return True
    unit = next((u for u in limits.units if u.name == k), None)
    if unit is not None:
        if k in controls:  # only a note puts it there (a key given twice is refused by _pairs)
            raise RequestError(f"note and {k}: give one of them, not both", id)
        value = as_float(k, v, -math.inf, math.inf, id)
        got = _within(value, unit.lo, unit.hi)
        if got is None:
            fix = f"send {k} {unit.lo:g}..{unit.hi:g}" + (f", or the dial {unit.dial} 0..1"
                                                           if unit.dial in limits.controls else "")
            raise RequestError(f"{k} must be within {unit.lo:g}..{unit.hi:g}, got {shown(value)}: {fix}", id)
        controls[k] = got
        return True
    if k in limits.other_units:
        if not limits.controls and not limits.units:
            raise RequestError(f"{k}: the serving model takes no controls", id)
        if not limits.units:
            raise RequestError(f"{k}: the serving model takes no controls in units; it takes {_takes(limits)}", id)
        raise RequestError(f"{k}: the serving model does not take it; it takes {_takes(limits)}", id)
    return False


NOTE, PITCH_HZ = "note", "pitch_hz"


def asked_pitch(note: Any, key: str | None, limits: Limits, id: int) -> float:
    """The pitch in Hz that a `note` (A1, C#2, a MIDI number 0..127) or a kit's `key` (Am) asks for
    (kickmodel.notes.resolve_pitch), within the serving model's pitch_hz range; refused where it takes no pitch in Hz
    or the note lies outside that range."""
    from kickmodel.notes import resolve_pitch

    asked = NOTE if note is not None else "key"
    unit = next((u for u in limits.units if u.name == PITCH_HZ), None)
    if unit is None:
        raise RequestError(f"{asked}: the serving model takes no pitch in Hz; it takes {_takes(limits) or 'none'}",
                           id)
    if note is not None and not isinstance(note, str):
        note = as_float(NOTE, note, -math.inf, math.inf, id)
    try:
        hz = resolve_pitch(note, None, key)
    except ValueError as e:
        raise RequestError(str(e), id) from None
    got = _within(hz, unit.lo, unit.hi)
    if got is None:
        given = key if note is None else note if isinstance(note, str) else f"{note:g}"
        raise RequestError(f"{asked} {given} is {hz:.2f} Hz, outside the model's {PITCH_HZ} {unit.lo:g}..{unit.hi:g}",
                           id)
    return got


def _check_controls(controls: dict[str, float], limits: Limits, id: int) -> None:
    """A control is given once: as its dial or in its unit, not both."""
    for u in limits.units:
        if u.name in controls and u.dial in controls:
            raise RequestError(f"give {u.dial} (a 0..1 dial) or {u.name} ({u.lo:g}..{u.hi:g}), not both", id)


def _fill(req: Generate, pairs: list[tuple[str, Any]], keys: tuple[str, ...], limits: Limits, id: int) -> None:
    for k, v in pairs:
        if k == "id":
            req.id = as_int("id", v, ID_MIN, INT32_MAX, id)
        elif k == "count" and k in keys:
            req.count = as_int("count", v, 1, MAX_COUNT, id)
        elif k == "seed" and k in keys:
            req.seed = as_int("seed", v, 0, INT32_MAX, id)
        elif k == "steps" and k in keys:
            req.steps = as_int("steps", v, 1, limits.max_steps, id)
        elif k == "sampler" and k in keys:
            s = as_str("sampler", v, id)
            if limits.samplers is not None and s not in limits.samplers:
                raise RequestError(f"unknown sampler {clip(s, 40)!r}; choose one of {', '.join(limits.samplers)}", id)
            req.sampler = s
        elif k == "strength" and k in keys and isinstance(req, Variation):
            req.strength = as_float("strength", v, 0.0, 1.0, id)
        elif k == "spread" and k in keys and isinstance(req, Near):
            req.spread = as_float("spread", v, 0.0, 1.0, id)
        elif not _control(req.controls, k, v, limits, id):
            known = ", ".join(keys + limits.control_keys)
            raise RequestError(f"unknown key {clip(k, 40)!r}; this request takes {known}", id)
    _check_controls(req.controls, limits, id)
    if req.seed is not None and req.seed + req.count - 1 > INT32_MAX:
        raise RequestError(f"seed + count - 1 must stay within 0..{INT32_MAX}", id)


def morph_points(count: int) -> list[float]:
    """`count` evenly spaced t from a (0) to b (1), both included; one point is the midpoint."""
    if count == 1:
        return [0.5]
    return [i / (count - 1) for i in range(count)]


def _endpoint(key: str, v: Any, id: int) -> int | str:
    """An interpolation end: a seed (an int >= 0; a whole-number float counts, as Pd sends) or a file name."""
    if isinstance(v, str):
        name = as_str(key, v, id)
        if not name:
            raise RequestError(f"{key} is an empty file name", id)
        return name
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (isinstance(v, float) and not (
            math.isfinite(v) and v == int(v))):
        raise RequestError(f"{key} must be a seed (an int >= 0) or a file name (a string), got {_describe(v)}", id)
    v = int(v)
    if not 0 <= v <= INT32_MAX:
        raise RequestError(f"{key} as a seed must be within 0..{INT32_MAX}, got {v}", id)
    return v


def _parse_interpolate(args: list[Any], limits: Limits, id: int) -> Interpolate:
    if args and not isinstance(args[0], str):
        raise RequestError(f"{INTERPOLATE} takes key/value pairs only (a 7 b 9 t 0.5), got {_describe(args[0])} "
                           "first", id)
    req = Interpolate()
    t: float | None = None
    count: int | None = None
    for k, v in _pairs(args, id):
        if k == "id":
            req.id = as_int("id", v, ID_MIN, INT32_MAX, id)
        elif k in ("a", "b"):
            setattr(req, k, _endpoint(k, v, id))
        elif k == "t":
            t = as_float("t", v, 0.0, 1.0, id)
        elif k == "count":
            count = as_int("count", v, 1, MAX_COUNT, id)
        elif k == "steps":
            req.steps = as_int("steps", v, 1, limits.max_steps, id)
        elif k == "sampler":
            s = as_str("sampler", v, id)
            if limits.samplers is not None and s not in limits.samplers:
                raise RequestError(f"unknown sampler {clip(s, 40)!r}; choose one of {', '.join(limits.samplers)}", id)
            req.sampler = s
        elif not _control(req.controls, k, v, limits, id):
            known = ", ".join(INTERPOLATE_KEYS + limits.control_keys)
            raise RequestError(f"unknown key {clip(k, 40)!r}; this request takes {known}", id)
    _check_controls(req.controls, limits, id)
    missing = [k for k in ("a", "b") if getattr(req, k) is None]
    if missing:
        raise RequestError(f"{INTERPOLATE} needs {' and '.join(missing)} (each a seed int >= 0 or a file name)", id)
    if t is not None and count is not None:
        raise RequestError("give t (one kick) or count (kicks from a to b), not both", id)
    req.ts = [t] if t is not None else morph_points(count if count is not None else INTERPOLATE_DEFAULT_COUNT)
    return req


def pick_seed(rng: random.Random, count: int) -> int:
    """A first seed for `count` kicks when the client gave none: base .. base + count - 1 < SEED_LIMIT."""
    return rng.randrange(0, SEED_LIMIT - max(1, int(count)) + 1)


def _no_args(kind: type) -> Callable[[str, list[Any], Limits, int], Request]:
    def read(address: str, args: list[Any], limits: Limits, id: int) -> Request:
        if args:
            raise RequestError(f"{address} takes no arguments, got {len(args)}")
        return kind()

    return read


def _parse_controls(args: list[Any]) -> Controls:
    """`/kick/controls`: the names; `/kick/controls ranges`: each control's range."""
    if not args:
        return Controls()
    if args != [RANGES_WORD]:
        raise RequestError(f"{CONTROLS} takes no arguments (the names) or `{RANGES_WORD}` (each control's range), "
                           f"got {len(args)}")
    return Controls(ranges=True)


def _parse_proof(address: str, args: list[Any], limits: Limits, id: int) -> Proof:
    if not args:
        return Proof()
    if len(args) != 1:
        raise RequestError(f"{PROOF} takes none (ask for your token) or one argument (the token), got {len(args)}")
    return Proof(as_int("token", args[0], 0, TOKEN_LIMIT - 1))


def _parse_model(address: str, args: list[Any], limits: Limits, id: int) -> SelectModel:
    if len(args) != 1:
        raise RequestError(f"{MODEL} takes one argument (a model name), got {len(args)}")
    name = as_str("name", args[0])
    if len(name) > MAX_MODEL_NAME:
        raise RequestError(f"a model name has at most {MAX_MODEL_NAME} characters; got {len(name)}")
    if not valid_model_name(name):
        raise RequestError(f"{clip(name, 60)!r} is not a model name (a file name without extension)")
    return SelectModel(name)


def _parse_generate(address: str, args: list[Any], limits: Limits, id: int) -> Generate:
    req = Generate()
    rest = args
    if rest and not isinstance(rest[0], str):
        req.count = as_int("count", rest[0], 1, MAX_COUNT, id)
        rest = rest[1:]
        if "count" in rest[0::2]:
            raise RequestError("count given twice (first argument and key)", id)
    _fill(req, _pairs(rest, id), GENERATE_KEYS, limits, id)
    return req


def _parse_variation(address: str, args: list[Any], limits: Limits, id: int) -> Variation:
    if not args:
        raise RequestError(f"{VARIATION} needs a source (a file name) as its first argument", id)
    if args[0] == "source" and len(args) % 2 == 0:
        pairs = _pairs(args, id)
        src = dict(pairs).get("source")
        pairs = [p for p in pairs if p[0] != "source"]
    else:
        src = args[0]
        pairs = _pairs(args[1:], id)
    req = Variation(source=as_str("source", src, id))
    if not req.source:
        raise RequestError("source is empty", id)
    _fill(req, pairs, VARIATION_KEYS, limits, id)
    return req


def _parse_near(address: str, args: list[Any], limits: Limits, id: int) -> Near:
    """`/kick/near x y key value...`: x and y floats 0..1 (an int 0 or 1 counts), then NEAR_KEYS and the controls."""
    if len(args) < 2 or isinstance(args[0], str):
        raise RequestError(f"{NEAR} needs x and y (each 0..1, y up) as its first two arguments, then key/value "
                           "pairs (count, spread, seed, ...)", id)
    req = Near(x=as_float("x", args[0], 0.0, 1.0, id), y=as_float("y", args[1], 0.0, 1.0, id))
    _fill(req, _pairs(args[2:], id), NEAR_KEYS, limits, id)
    return req


def _parse_locate(address: str, args: list[Any], limits: Limits, id: int) -> Locate:
    if not args:
        raise RequestError(f"{LOCATE} needs a source (a file name, as /kick/variation reads it) as its one argument")
    if len(args) > 1:
        raise RequestError(f"{LOCATE} takes one argument (a source file name), got {len(args)}")
    source = as_str("source", args[0])
    if not source:
        raise RequestError("source is empty")
    return Locate(source)


@dataclass
class Kit(Generate):
    """`/kick/kit`: one kick (from `seed`, or a `source` file varied at `strength`, 0: the file as it is) made into
    `layers` x `robins` hits; `pitch_hz` is the pitch asked (by `note`, `key` or the `pitch_hz` unit), else None."""

    source: str | None = None
    strength: float = 0.0
    layers: int = KIT_DEFAULT_LAYERS
    robins: int = KIT_DEFAULT_ROBINS
    key: str | None = None
    pitch_hz: float | None = None


def _parse_kit(address: str, args: list[Any], limits: Limits, id: int) -> Kit:
    """`/kick/kit key value...`: KIT_KEYS and the controls. A `note` (A1, 33) or `key` (Am) is resolved here into
    the serving model's `pitch_hz` unit (kickmodel.notes.resolve_pitch), refused where the model takes no pitch."""
    from kickmodel.notes import parse_key

    if args and not isinstance(args[0], str):
        raise RequestError(f"{KIT} takes key/value pairs only (seed 5 layers 4 robins 2), got {_describe(args[0])} "
                           "first", id)
    req = Kit()
    note: Any = None
    rest = []
    for k, v in _pairs(args, id):
        if k == "source":
            req.source = as_str("source", v, id)
            if not req.source:
                raise RequestError("source is empty", id)
        elif k == "strength":
            req.strength = as_float("strength", v, 0.0, 1.0, id)
        elif k == "layers":
            req.layers = as_int("layers", v, 1, KIT_MAX_LAYERS, id)
        elif k == "robins":
            req.robins = as_int("robins", v, 1, KIT_MAX_ROBINS, id)
        elif k == "note":
            note = v if isinstance(v, str) else as_float("note", v, -math.inf, math.inf, id)
        elif k == "key":
            try:
                req.key = parse_key(as_str("key", v, id)).name
            except ValueError as e:
                raise RequestError(str(e), id) from None
        else:
            rest.append((k, v))
    _fill(req, rest, KIT_KEYS, limits, id)
    if note is None and req.key is None:
        req.pitch_hz = req.controls.get(PITCH_HZ)
        return req
    if PITCH_HZ in req.controls:
        what = f"note {note!r}" if note is not None else f"key {req.key!r}"
        raise RequestError(f"{what} and {PITCH_HZ} {req.controls[PITCH_HZ]!r}: give one of them, not both", id)
    req.controls[PITCH_HZ] = req.pitch_hz = asked_pitch(note, req.key, limits, id)
    _check_controls(req.controls, limits, id)
    return req


@dataclass(frozen=True)
class Route:
    """One address the daemon serves: how its arguments are read into a request, whether the request may carry
    an id, and the `Handlers` method that serves it."""

    read: Callable[[str, list[Any], Limits, int], Request]
    handler: str
    takes_id: bool = False


# The whole request side of the contract: address -> (reader, handler). kickserver.frontend.Routes implements
# `Handlers`.
ROUTES: dict[str, Route] = {
    PING: Route(_no_args(Ping), "ping"),
    GENERATE: Route(_parse_generate, "generate", takes_id=True),
    VARIATION: Route(_parse_variation, "variation", takes_id=True),
    STATUS: Route(_no_args(Status), "status"),
    MODELS: Route(_no_args(Models), "models"),
    MODEL: Route(_parse_model, "select_model"),
    INTERPOLATE: Route(lambda address, args, limits, id: _parse_interpolate(args, limits, id), "interpolate",
                       takes_id=True),
    CONTROLS: Route(lambda address, args, limits, id: _parse_controls(args), "controls"),
    MAP: Route(_no_args(KitMap), "kit_map"),
    NEAR: Route(_parse_near, "near", takes_id=True),
    LOCATE: Route(_parse_locate, "locate"),
    PROOF: Route(_parse_proof, "proof"),
}
assert tuple(ROUTES) == ADDRESSES
ROUTES[KIT] = Route(_parse_kit, "kit", takes_id=True)
ADDRESSES += (KIT,)


class Handlers(Protocol):
    """What serves each route (kickserver.frontend.Routes): the parsed request, the client's (host, port), and where
    to reply. A handler never raises: every failure becomes a /kick/error reply."""

    def ping(self, req: Ping, client: tuple, reply: Callable[[bytes], None]) -> None: ...
    def kit(self, req: Kit, client: tuple, reply: Callable[[bytes], None]) -> None: ...
    def generate(self, req: Generate, client: tuple, reply: Callable[[bytes], None]) -> None: ...
    def variation(self, req: Variation, client: tuple, reply: Callable[[bytes], None]) -> None: ...
    def status(self, req: Status, client: tuple, reply: Callable[[bytes], None]) -> None: ...
    def models(self, req: Models, client: tuple, reply: Callable[[bytes], None]) -> None: ...
    def select_model(self, req: SelectModel, client: tuple, reply: Callable[[bytes], None]) -> None: ...
    def interpolate(self, req: Interpolate, client: tuple, reply: Callable[[bytes], None]) -> None: ...
    def controls(self, req: Controls, client: tuple, reply: Callable[[bytes], None]) -> None: ...
    def kit_map(self, req: KitMap, client: tuple, reply: Callable[[bytes], None]) -> None: ...
    def near(self, req: Near, client: tuple, reply: Callable[[bytes], None]) -> None: ...
    def locate(self, req: Locate, client: tuple, reply: Callable[[bytes], None]) -> None: ...
    def proof(self, req: Proof, client: tuple, reply: Callable[[bytes], None]) -> None: ...


def parse(address: str, args: Sequence[Any], limits: Limits) -> Request:
    """One OSC message as a request; RequestError (with the request's id if it has one) otherwise."""
    route = ROUTES.get(address) if isinstance(address, str) else None
    if route is None:
        shown = clip(address, 60) if isinstance(address, str) else repr(address)
        raise Malformed(f"unknown address {shown}; known: {' '.join(ADDRESSES)}",
                        (f"unknown address {clip(shown, 40)}", "unknown address"))
    args = list(args)
    id = _find_id(args) if route.takes_id else NO_ID
    if len(args) > MAX_ARGS:
        raise RequestError(f"{address} takes at most {MAX_ARGS} arguments, got {len(args)}", id)
    _check_arg_types(args, id)
    return route.read(address, args, limits, id)


def dispatch(handlers: Handlers, address: str, args: Sequence[Any], limits: Limits, client: tuple,
             reply: Callable[[bytes], None]) -> Request:
    """Parse a message and hand it to its route's handler; RequestError when it cannot be parsed (no handler ran)."""
    req = parse(address, args, limits)
    getattr(handlers, ROUTES[address].handler)(req, client, reply)
    return req


# ------------------------------------------------------------------ datagrams


class NotOSC(Exception):
    """A datagram that is neither an OSC message nor an OSC bundle (it gets no reply)."""


BUNDLE_HEAD = b"#bundle\0"


@dataclass
class Datagram:
    """What one datagram holds: its OSC messages in order (raw), and what had to be left out."""

    messages: list[bytes] = field(default_factory=list)
    bundle: bool = False
    junk: int = 0  # elements of a bundle that are neither a message nor a bundle (never answered)
    dropped: int = 0  # messages beyond MAX_BUNDLE_MESSAGES


def split_datagram(data: bytes) -> Datagram:
    """The messages of one datagram: a message, or a bundle's messages (nested bundles flattened, their time
    tags ignored). Raises NotOSC when the datagram itself is neither a message nor a well-formed bundle."""
    out = Datagram()
    if data.startswith(b"/"):
        out.messages.append(data)
        return out
    if not data.startswith(BUNDLE_HEAD):
        raise NotOSC("neither an OSC message nor a bundle")
    out.bundle = True
    if not _walk_bundle(data, out, 0):
        raise NotOSC("a malformed bundle")
    return out


def _walk_bundle(data: bytes, out: Datagram, depth: int) -> bool:
    """Collect a bundle's messages into out; False if the bundle's framing is broken."""
    if len(data) < 16 or len(data) % 4 or depth > MAX_BUNDLE_DEPTH:
        return False
    i = 16  # "#bundle\0" and the 8-byte time tag
    while i < len(data):
        if i + 4 > len(data):
            return False
        size = int.from_bytes(data[i:i + 4], "big", signed=True)
        i += 4
        if size <= 0 or size % 4 or i + size > len(data):
            return False
        element = data[i:i + size]
        i += size
        if element.startswith(b"/"):
            if len(out.messages) < MAX_BUNDLE_MESSAGES:
                out.messages.append(element)
            else:
                out.dropped += 1
        elif element.startswith(BUNDLE_HEAD):
            if not _walk_bundle(element, out, depth + 1):
                out.junk += 1
        else:
            out.junk += 1
    return True


def _osc_string(data: bytes, start: int) -> tuple[str, int] | None:
    """A padded OSC string at start and the offset after it, or None."""
    end = data.find(b"\0", start)
    if end < 0:
        return None
    try:
        text = data[start:end].decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text, (end // 4 + 1) * 4


# Routes that make work (a kick, a fit, a model load) must carry the OSC type tag string, which OSC 1.0 makes
# mandatory (a 16-byte /kick/generate without one made a 135 KB kick); python-osc, liblo, Max's
# [udpsend] and Pd's [oscformat] always send it. Address-only queries (/kick/ping, /kick/status ...) are still read
# without one, as OSC 1.0's predecessors sent them.
NEEDS_TAGS = frozenset({GENERATE, VARIATION, INTERPOLATE, NEAR, LOCATE, MODEL})


def decode_message(data: bytes) -> tuple[str, list[Any]]:
    """One OSC message as (address, arguments). The type tag string is read here first: a tag this server does
    not decode refuses the whole message (RequestError, id -1) instead of being dropped by python-osc."""
    head = _osc_string(data, 0)
    if head is None:
        raise Malformed("not a valid OSC message (its address is not a terminated string)", ("malformed OSC",))
    address, i = head
    if i >= len(data) and address in NEEDS_TAGS:
        raise Malformed(f"{clip(address, 60)} has no OSC type tag string (OSC 1.0 requires one, even with no "
                        f"arguments: ','); send it with type tags, as OSC libraries, Max and Pd do",
                        ("no type tag string", "no type tags"))
    if i < len(data):
        tags = _osc_string(data, i)
        if tags is None or not tags[0].startswith(","):
            raise Malformed(f"not a valid OSC message for {clip(address, 60)} (no type tag string)",
                            ("no type tag string", "malformed OSC"))
        for n, tag in enumerate(tags[0][1:], start=1):
            if tag not in DECODED_TAGS:
                shown_tag = tag if tag.isprintable() else repr(tag)
                raise Malformed(f"argument {n} of {clip(address, 60)} has the unsupported OSC type tag "
                                f"{shown_tag!r}; use int (i), float (f) or string (s)",
                                (f"unsupported OSC type tag {shown_tag!r}", f"unsupported tag {shown_tag!r}",
                                 "unsupported tag"))
    try:
        msg = OscMessage(data)
        params = list(msg.params)
    except (ParseError, ValueError, TypeError, IndexError, OverflowError) as e:
        raise Malformed(f"malformed OSC arguments for {clip(address, 60)} ({clip(str(e), 80)})",
                        ("malformed OSC arguments", "malformed arguments", "malformed OSC")) from None
    return address, params


# ------------------------------------------------------------------ replies


def _int32(v: int) -> int:
    return max(INT32_MIN, min(INT32_MAX, int(v)))


def _osc_str(s: str) -> str:
    return str(s).replace("\0", "")


def build(address: str, args: Sequence[tuple[str, Any]]) -> bytes:
    """An OSC message with explicit type tags only: 'i' int32, 'f' float32, 's' string."""
    b = OscMessageBuilder(address=address)
    for tag, v in args:
        if tag == "i":
            b.add_arg(_int32(v), OscMessageBuilder.ARG_TYPE_INT)
        elif tag == "f":
            b.add_arg(float(v), OscMessageBuilder.ARG_TYPE_FLOAT)
        elif tag == "s":
            b.add_arg(_osc_str(v), OscMessageBuilder.ARG_TYPE_STRING)
        else:  # pragma: no cover - a programming error
            raise ValueError(f"reply type {tag!r} is not one of i, f, s")
    return b.build().dgram


def pong(version: str) -> bytes:
    return build(PONG, [("s", version)])


def kit_done(id: int, folder: str, layers: int, robins: int, seed: int) -> bytes:
    """`/kick/kit/done <id:i> <folder:s> <layers:i> <robins:i> <seed:i>`: the kit's folder (absolute), its layers and
    robins, and the seed /kick/kit turns into it again (NO_SEED for a kit made from a source file)."""
    return build(KIT_DONE, [("i", id), ("s", folder), ("i", layers), ("i", robins), ("i", seed)])


def done(id: int, path: str, seed: int) -> bytes:
    return build(DONE, [("i", id), ("s", path), ("i", seed)])


def error(id: int, reason: str) -> bytes:
    return build(ERROR, [("i", id), ("s", clip(_osc_str(reason), 512))])


def status(model: str, device: str, queued: int, generated: int, why: str, memory: str | None = None) -> bytes:
    """`/kick/status model device queued generated why memory`: `why` the model serves (e.g. "pinned by --model")
    came after the first four, and `memory` (what the daemon holds: kickserver.worker.resident_memory, "cuda:0
    allocator reserved <MB> MB, peak <MB> MB, device used <MB> of <MB> MB" or "cpu RSS <MB> MB") after it, so
    clients that read only the first ones are unchanged."""
    args = [("s", model), ("s", device), ("i", queued), ("i", generated), ("s", why)]
    return build(STATUS, args + ([("s", clip(_osc_str(memory), 200))] if memory is not None else []))


def _fitting(address: str, names: Sequence[str], last: str | None = None) -> list[str]:
    """The longest head of names that `address name... [last]` holds in one datagram, its size counted once per name
    (linear: dropping one name at a time and encoding again cost 0.88 s for 1,000 names)."""
    def size(text: str) -> int:
        return _padded(len(_osc_str(text).encode("utf-8")))

    fixed = _padded(len(address.encode("utf-8"))) + (size(last) if last is not None else 0)
    total, n = 0, 0
    for name in names:
        if fixed + _padded(1 + n + 1 + (last is not None)) + total + size(name) > MAX_DATAGRAM:
            break
        total += size(name)
        n += 1
    return list(names[:n])


def _names(address: str, names: Sequence[str]) -> bytes:
    """`address name...`, as many names as fit in one datagram."""
    return build(address, [("s", n) for n in _fitting(address, list(names))])


def models(names: Sequence[str]) -> bytes:
    """`/kick/models name...`, as many names as fit in one datagram."""
    return _names(MODELS, names)


def model(name: str) -> bytes:
    return build(MODEL, [("s", name)])


def controls(names: Sequence[str], has_map: bool) -> bytes:
    """`/kick/controls name... map|no-map`: the serving model's control names, its dials then the controls in units
    it takes (`decay pitch click decay_s pitch_hz click_db` for a kick-synth model; none for a model without
    controls), as many as fit in one datagram, and always last whether it has a kit map (HAS_MAP / NO_MAP;
    clients that build dials from the names skip the word)."""
    word = HAS_MAP if has_map else NO_MAP
    return build(CONTROLS, [("s", n) for n in _fitting(CONTROLS, list(names), word) + [word]])


RANGES = "/kick/ranges"
RANGES_WORD = "ranges"
REPLY_ADDRESSES += (RANGES,)


def ranges(limits: Limits) -> bytes:
    """`/kick/ranges <name:s> <lo:f> <hi:f> ...`, the answer to `/kick/controls ranges`: each control the serving
    model takes with its range, the dials (0..1), then the controls in units, then `note` as MIDI numbers (the whole
    notes within pitch_hz's range: 30..250 Hz is 23..59, B0..B3) where it takes pitch_hz. A separate reply, so the
    `/kick/controls` names reply that Max and Pd read is as it was."""
    from kickmodel.notes import hz_to_midi

    rows = [(n, 0.0, 1.0) for n in limits.controls] + [(u.name, u.lo, u.hi) for u in limits.units]
    unit = next((u for u in limits.units if u.name == PITCH_HZ), None)
    if unit is not None:
        rows.append((NOTE, float(math.ceil(hz_to_midi(unit.lo) - 1e-9)), float(math.floor(hz_to_midi(unit.hi) + 1e-9))))
    args: list[tuple[str, Any]] = []
    for name, lo, hi in rows:
        row = [("s", name), ("f", float(lo)), ("f", float(hi))]
        if len(build(RANGES, args + row)) > MAX_DATAGRAM:
            break
        args += row
    return build(RANGES, args)


# ------------------------------------------------------------------ the kit map


def _padded(n: int) -> int:
    """An OSC string or blob of n bytes with its NUL, padded to 4 bytes."""
    return (n // 4 + 1) * 4


def _map_size(count: int, payload: int) -> int:
    """Bytes of `/kick/map part parts` with `count` points whose arguments take `payload` bytes."""
    return _padded(len(MAP)) + _padded(len(",ii") + 3 * count) + 8 + payload


def kit_map(points: Sequence[Sequence[float]], names: Sequence[str]) -> list[bytes]:
    """`/kick/map <part:i> <parts:i> x:f y:f name:s ...`: every point of the map, in order, in as few datagrams of at
    most MAX_DATAGRAM bytes (OSC padding counted) as the names allow, parts numbered 1..parts."""
    chunks: list[list[int]] = [[]]
    payload = 0
    for i, name in enumerate(names):
        size = 8 + _padded(len(_osc_str(name).encode("utf-8")))
        if chunks[-1] and _map_size(len(chunks[-1]) + 1, payload + size) > MAX_DATAGRAM:
            chunks.append([])
            payload = 0
        chunks[-1].append(i)
        payload += size
    out = []
    for part, chunk in enumerate(chunks, start=1):
        args: list[tuple[str, Any]] = [("i", part), ("i", len(chunks))]
        for i in chunk:
            args += [("f", float(points[i][0])), ("f", float(points[i][1])), ("s", names[i])]
        data = build(MAP, args)
        assert len(data) <= MAX_DATAGRAM, (len(data), part)  # _map_size is exact
        out.append(data)
    return out


# What an axis of the map means: the descriptor it follows most (largest |r| of its correlations), in words for its
# direction, when |r| >= max(AXIS_MIN_R, 2 / sqrt(N)); else "mixed". 0.3 is Cohen's "medium" correlation: the axis
# then accounts for 9 % of that descriptor's variance across the kit; below it, moving along the axis changes the
# descriptor too little on average for a label to promise it. 2 / sqrt(N) is about the 95 % band of r for N kicks
# with no relation at all (20 kicks: 0.45), so a small kit's chance correlation is not read as meaning.
AXIS_MIN_R = 0.3
AXIS_WORDS = {"decay": ("longer decay", "shorter decay"), "pitch": ("higher pitch", "lower pitch"),
              "click": ("more click", "less click")}
MIXED = "mixed"


def axis_label(correlations: Any, n: int) -> str:
    """A short label of what moving along an axis (toward 1: right, up) does: `longer decay ->`, or MIXED."""
    rs = {d: float(r) for d, r in dict(correlations or {}).items()
          if d in AXIS_WORDS and isinstance(r, (int, float)) and not isinstance(r, bool) and math.isfinite(r)}
    if not rs:
        return MIXED
    d = max(rs, key=lambda k: abs(rs[k]))
    r = rs[d]
    if abs(r) < max(AXIS_MIN_R, 2.0 / math.sqrt(max(1, n))):
        return MIXED
    return f"{AXIS_WORDS[d][0 if r > 0 else 1]} ->"


def map_axes(axes: Any, n: int) -> bytes:
    """`/kick/map/axes <x:s> <y:s>`: each axis' label (axis_label) from the map's correlations over its n kicks."""
    return build(MAP_AXES, [("s", axis_label(axes.get("x"), n)), ("s", axis_label(axes.get("y"), n))])


TOKEN_LIMIT = 1 << 24  # tokens are below 2^24, so a float32 (Pd, Max) holds them exactly


def proof(token: int) -> bytes:
    """`/kick/proof <token:i>`: this address's token; echoing it (`/kick/proof <token>`) proves the return path."""
    return build(PROOF, [("i", token)])


def map_proof(token: int) -> bytes:
    """`/kick/map/proof <token:i>`: the map is sent only to an address that proved its return path: echo the token
    (`/kick/proof <token>`), then ask `/kick/map` again."""
    return build(MAP_PROOF, [("i", token)])


def located(x: float, y: float, source: str) -> bytes:
    """`/kick/locate <x:f> <y:f> <source:s>`: where the source's kick lies on the map; source as the client named it."""
    return build(LOCATE, [("f", x), ("f", y), ("s", source)])
