"""The `smpl` chunk a sampler maps a kick by, checked with libsndfile's own tool (Debian sndfile-programs):
`sndfile-info --instrument` reads the unity note, `sndfile-info` dumps the chunk's fields. The pitch they imply
must be within 25 cents of the pitch asked; the chunk is opt-in, so a file written without a pitch is byte for
byte what encode_wav always wrote."""

from __future__ import annotations

import io
import re
import shutil
import struct
import subprocess

import numpy as np
import pytest
import soundfile as sf

from kickmodel import notes
from kickmodel.wavfile import KickInfo, Measured, encode_wav, smpl_pitch

SR = 44100
needs_sndfile_info = pytest.mark.skipif(shutil.which("sndfile-info") is None,
                                        reason="sndfile-info not installed (Debian: apt-get install sndfile-programs)")


def _kick(n: int = 8820) -> np.ndarray:
    t = np.arange(n) / SR
    return (0.8 * np.sin(2 * np.pi * 55.0 * t) * np.exp(-t / 0.08)).astype(np.float32)


def _sndfile_info(path, *args) -> str:
    return subprocess.run(["sndfile-info", *args, str(path)], capture_output=True, text=True, timeout=30).stdout


def _implied_midi(path) -> float:
    """The pitch sndfile-info reads from the file, as a fractional MIDI number: its `Midi Note` plus the pitch
    fraction. libsndfile 1.2 prints `Pitch Fract.` as 2^31 / dwMIDIPitchFraction (1.0 is 50 cents, 0 prints for
    none), so the fraction in cents is 50 over the printed number."""
    dump = _sndfile_info(path)
    note = int(re.search(r"Midi Note\s*:\s*(\d+)", dump).group(1))
    shown = float(re.search(r"Pitch Fract\.\s*:\s*([0-9.]+)", dump).group(1))
    cents = 0.0 if shown == 0 else 50.0 / shown
    base = int(re.search(r"Base note\s*:\s*(\d+)", _sndfile_info(path, "--instrument")).group(1))
    assert base == note  # --instrument's unity note is the chunk's
    return note + cents / 100.0


@needs_sndfile_info
@pytest.mark.parametrize("asked", [55.0, notes.note_to_hz("C#2"), 54.0, 56.0, 43.65, 65.41, 30.0, 249.0,
                                   notes.midi_to_hz(33.49), notes.midi_to_hz(33.51), notes.midi_to_hz(32.999)])
def test_sndfile_info_reads_the_unity_note_and_pitch(tmp_path, asked):
    p = tmp_path / "k.wav"
    p.write_bytes(encode_wav(_kick(), SR, {"title": "k"}, pitch_hz=asked))
    implied = _implied_midi(p)
    assert abs(implied - notes.hz_to_midi(asked)) * 100 <= 25.0
    # soundfile still reads the file, and the samples are the ones written without the chunk
    with_chunk, rate = sf.read(p, dtype="float32")
    without, _ = sf.read(io.BytesIO(encode_wav(_kick(), SR, {"title": "k"})), dtype="float32")
    assert rate == SR and np.array_equal(with_chunk, without)
    assert sf.info(p).frames == len(_kick())


@needs_sndfile_info
def test_without_a_pitch_there_is_no_instrument_data(tmp_path):
    p = tmp_path / "k.wav"
    p.write_bytes(encode_wav(_kick(), SR, {"title": "k"}))
    assert "does not contain instrument data" in _sndfile_info(p, "--instrument")
    p.write_bytes(encode_wav(_kick(), SR, {"title": "k"}, pitch_hz=55.0))
    out = _sndfile_info(p, "--instrument")
    assert "does not contain instrument data" not in out and re.search(r"Base note\s*:\s*33\b", out)


def test_no_pitch_is_byte_identical_to_a_plain_soundfile_write():
    """encode_wav without pitch_hz writes what libsndfile writes (as it did before the smpl chunk existed)."""
    tags = {"title": "kick_1", "comment": "model=x seed=1", "software": "kickserver", "artist": "kickserver",
            "date": "2026-12-05"}
    buf = io.BytesIO()
    with sf.SoundFile(buf, "w", samplerate=SR, channels=1, subtype="PCM_24", format="WAV") as snd:
        for k, v in tags.items():
            setattr(snd, k, v)
        snd.write(_kick(8821))  # an odd number of 3-byte frames: an odd data chunk
    assert encode_wav(_kick(8821), SR, tags) == buf.getvalue()


def test_chunk_layout():
    """The chunk as the RIFF spec lays it out: 36 bytes, before the data; RIFF size grown by 44."""
    plain = encode_wav(_kick(8821), SR, {"title": "k"})
    data = encode_wav(_kick(8821), SR, {"title": "k"}, pitch_hz=notes.midi_to_hz(33.25))
    assert len(data) == len(plain) + 44
    assert struct.unpack("<I", data[4:8])[0] == len(data) - 8
    at = data.index(b"smpl")
    assert at < data.index(b"data")
    size, manuf, product, period, note, frac, smpte_fmt, smpte_off, loops, extra = struct.unpack(
        "<10I", data[at + 4:at + 44])
    assert (size, manuf, product, period, note, loops, extra) == (36, 0, 0, 22676, 33, 0, 0)
    assert frac == pytest.approx(0.25 * 2 ** 32, abs=1)


def test_smpl_pitch_is_the_note_below_and_the_fraction_upwards():
    assert smpl_pitch(55.0) == (33, 0)
    assert smpl_pitch(notes.midi_to_hz(33.5)) == (33, 2 ** 31)
    note, frac = smpl_pitch(notes.midi_to_hz(32.7))
    assert note == 32 and frac / 2 ** 32 == pytest.approx(0.7, abs=1e-6)
    assert smpl_pitch(notes.midi_to_hz(127.99))[0] == 127
    for bad in (5.0, 20000.0, 0.0, -1.0, float("nan")):
        with pytest.raises(ValueError):
            smpl_pitch(bad)


def test_measured_tags():
    info = KickInfo(model="m", seed=7, steps=None, sampler=None, controls={},
                    measured=Measured(pitch_hz=56.0, decay_s=0.4123, click_db=-21.26))
    assert info.comment() == ("model=m seed=7 measured_pitch_hz=56.00 measured_note=A1+31c measured_decay_s=0.412 "
                              "measured_click_db=-21.3")
    data = encode_wav(_kick(), SR, info.tags("k", date="2026-12-05"), pitch_hz=56.0)
    with sf.SoundFile(io.BytesIO(data)) as snd:
        assert "measured_note=A1+31c" in snd.comment
    assert KickInfo(model="m", seed=7, steps=None, sampler=None, controls={}).comment() == "model=m seed=7"
    assert Measured(decay_s=0.5).comment_parts() == ["measured_decay_s=0.500"]
