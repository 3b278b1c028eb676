"""File names that say the sound: `kick_A1_short_5513.wav` (the measured pitch's nearest note, one character word,
then the label that makes the kick again: its seed, or KickInfo.label's `v`/`t`/`m` forms), so a browser sorts an
evening's kicks by note and by kind.

The character word comes from the measured descriptors (kickmodel.descriptors.measure: decay s, pitch Hz, click
dB), by this table, first match down the list. The thresholds sit near the quartiles of the starter kit's 101 real
kicks (decay median 0.36 s, 10..90 % 0.16..1.18 s; click median -38 dB, 75 % -28 dB, 90 % -20 dB; pitch median 52 Hz):

    decay >= LONG_S (0.6 s) and pitch < BOOMY_HZ (50 Hz)    boomy   a long, low 808-like boom
    decay >= LONG_S                                          long
    click >= CLICKY_DB (-25 dB)                              clicky  a strong beater click (the kit's top fifth)
    decay < SHORT_S (0.2 s)                                  short
    click < SOFT_DB (-45 dB)                                 soft    no click to speak of: a rounded attack
    otherwise                                                punchy  a mid decay with some click

A note name spells accidentals as flats (`Db1`, not `C#1`): Pure Data's file format turns `#` into `$` when it
loads what it saved, and a path is a symbol a patch may keep. An unmeasured pitch leaves the note out.

A pattern (the daemon's `name_pattern`) is text with fields from NAME_FIELDS; TIME_PATTERN is the daemon's old
naming (`kick_20261205-083442_5513.wav`). name_regex(pattern) matches every name kick_name makes from it (and the
writer's collision suffix `-2`, `-3`...), so the writer's retention removes only names its patterns make.
"""

from __future__ import annotations

import math
import re
import string

from kickmodel.notes import midi_to_name, nearest_note

LONG_S = 0.6
SHORT_S = 0.2
BOOMY_HZ = 50.0
CLICKY_DB = -25.0
SOFT_DB = -45.0
WORDS = ("boomy", "long", "clicky", "short", "soft", "punchy")

DEFAULT_PATTERN = "kick_{note}_{word}_{label}"
TIME_PATTERN = "kick_{time}_{label}"  # the daemon's names before they said the sound: kick_20261205-083442_5513.wav
NAME_FIELDS = {"note": "the nearest note (Db1)", "word": "the character word", "label": "seed or label (5513, v12)",
               "cents": "cents off the note (+12)", "time": "the writer's time stamp"}
MAX_PATTERN = 100
_SAFE = re.compile(r"[^A-Za-z0-9._+-]")


def character_word(decay_s: float, pitch_hz: float | None, click_db: float) -> str:
    """One word for a kick's character from its measured decay (s), pitch (Hz, None if unmeasured) and click (dB),
    by the table in the module docstring."""
    decay_s, click_db = float(decay_s), float(click_db)
    if decay_s >= LONG_S:
        return "boomy" if pitch_hz is not None and float(pitch_hz) < BOOMY_HZ else "long"
    if click_db >= CLICKY_DB:
        return "clicky"
    if decay_s < SHORT_S:
        return "short"
    if click_db < SOFT_DB:
        return "soft"
    return "punchy"


def check_pattern(pattern: str) -> str:
    """A name pattern (str.format fields from NAME_FIELDS, no folders, no extension: `.wav` is added), or
    ValueError saying which part is wrong and what is allowed."""
    if not isinstance(pattern, str) or not pattern or len(pattern) > MAX_PATTERN:
        raise ValueError(f"name pattern {str(pattern)[:MAX_PATTERN]!r}: empty, not text or longer than "
                         f"{MAX_PATTERN} characters; give e.g. {DEFAULT_PATTERN!r}")
    if "/" in pattern or "\\" in pattern or "\0" in pattern or pattern.startswith("."):
        raise ValueError(f"name pattern {pattern!r}: a file name, not a path (no '/', '\\', NUL or leading '.'); "
                         f"give e.g. {DEFAULT_PATTERN!r}")
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(pattern) if f is not None]
    except ValueError as e:
        raise ValueError(f"name pattern {pattern!r}: {e}; write fields as {{note}}, braces as {{{{ }}}}") from None
    if any(conv is not None for _, f, _, conv in string.Formatter().parse(pattern) if f is not None):
        raise ValueError(f"name pattern {pattern!r}: no conversions (!r, !s, !a) in a field; write {{label}}")
    if any(spec for _, f, spec, _ in string.Formatter().parse(pattern) if f is not None):
        raise ValueError(f"name pattern {pattern!r}: no format spec (:...) in a field; write {{label}}")
    unknown = [f for f in fields if f not in NAME_FIELDS]
    if unknown:
        raise ValueError(f"name pattern {pattern!r}: unknown field {unknown[0]!r}; the fields are "
                         + ", ".join(f"{{{k}}} ({v})" for k, v in NAME_FIELDS.items()))
    if "label" not in fields:
        raise ValueError(f"name pattern {pattern!r}: it needs {{label}} (the seed), or two kicks of one sound would "
                         "take one name")
    return pattern


KIT_PATTERN = "kit_{note}_{word}_{label}"
# what each field can come out as (kick_name): a note spelled with flats, a word of the table, a seed or a label
# (KickInfo.label: v12, t250, m5), cents with their sign, the writer's time stamp
_FIELD_RE = {"note": r"[A-G]b?-?\d+", "word": "(?:" + "|".join(WORDS) + ")", "label": r"(?:-?\d+|[vmt]\d+)",
             "cents": r"[+-]?\d+", "time": r"\d{8}-\d{6}"}
_OPTIONAL = ("note", "cents")  # empty for a kick whose pitch was not measured


def name_regex(pattern: str, suffix: str = ".wav") -> re.Pattern[str]:
    """A regex that matches every name kick_name(..., pattern, suffix=suffix) makes, with or without the writer's
    collision suffix (`-2`, `-3`, ... before the suffix), and no name whose fields are not what kick_name puts there
    (a user's `kick_best_ever.wav` is no name of DEFAULT_PATTERN's)."""
    check_pattern(pattern)
    parsed = list(string.Formatter().parse(pattern))
    parts = []
    for i, (literal, field, _, _) in enumerate(parsed):
        literal = _SAFE.sub("-", literal)
        if i == 0:
            literal = literal.lstrip("-.")  # kick_name strips `-` and `.` off the ends of the name
        if i == len(parsed) - 1 and field is None:
            literal = literal.rstrip("-.")
        sep = ""
        if field in _OPTIONAL and literal and literal[-1] in "_-.":  # an empty field takes its separator with it
            literal, sep = literal[:-1], literal[-1]
        parts.append(re.escape(literal))
        if field is not None:
            value = re.escape(sep) + _FIELD_RE[field]
            parts.append(f"(?:{value})?" if field in _OPTIONAL else value)
    return re.compile(rf"\A{''.join(parts)}(?:-\d+)?{re.escape(suffix)}\Z", re.ASCII)


def kick_name(label: str, decay_s: float, pitch_hz: float | None, click_db: float,
              pattern: str = DEFAULT_PATTERN, time: str = "", suffix: str = ".wav") -> str:
    """The file name (with suffix, `.wav`) of a kick measured so, by pattern: `kick_A1_short_5513.wav`; a kit's
    folder, named after its top kick: KIT_PATTERN and no suffix (`kit_A1_punchy_5513`). Fields that come out empty
    (an unmeasured pitch) drop with the separator before them; characters other than letters, digits and `._+-`
    become `-`."""
    check_pattern(pattern)
    note, cents = "", ""
    if pitch_hz is not None and not math.isfinite(float(pitch_hz)):
        pitch_hz = None  # a pitch the measure could not read names no note
    if pitch_hz is not None:
        m, c = nearest_note(float(pitch_hz))
        note, cents = midi_to_name(m, flats=True), f"{int(round(c)):+d}"
    values = {"note": note, "word": character_word(decay_s, pitch_hz, click_db), "label": str(label),
              "cents": cents, "time": str(time)}
    # an empty field takes the separator before it with it: kick_{note}_{word} with no note is kick_short
    for k, v in values.items():
        if not v:
            pattern = re.sub(r"[_\-. ]?\{" + k + r"(:[^}]*)?\}", "", pattern)
    name = _SAFE.sub("-", pattern.format(**values)).strip("-.") or "kick"
    return name + suffix
