"""`/kick/interpolate` and `/kick/controls` over real UDP against a running daemon: seeds, files, count, refusals,
`kickserver send`, and the controls of the model that serves (also after a swap)."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from daemon_util import REPO, daemon_env, make_artifact, models_folder, root_conftest, start_daemon

from kickserver import osc_api

STEPS = 2
LSB = 2.0 ** -23  # one step of a 24-bit file


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory, tiny_artifact):
    """The tiny diffusion model (served), a tiny mel-VAE, and a diffusion model whose only control is decay."""
    from kickmodel.config import ConditioningConfig
    from kickmodel.families import preset

    folder = models_folder(tmp_path_factory.mktemp("models"), tiny_artifact)
    make_artifact(folder / "vae.safetensors", family="mel_vae")
    one = dataclasses.replace(preset("tiny"), conditioning=ConditioningConfig(controls=("decay",)))
    root_conftest().make_tiny_artifact(folder / "onecontrol.safetensors", cfg=one)
    return folder


@pytest.fixture(scope="module")
def daemon(tmp_path_factory, models_dir):
    tmp = tmp_path_factory.mktemp("interp")
    roots = tmp / "roots"
    roots.mkdir()
    with start_daemon(tmp, models_dir, model="tiny", extra_args=["--read-root", str(roots)]) as d:
        d.read_root = roots
        yield d


@pytest.fixture(scope="module")
def vae_daemon(tmp_path_factory, models_dir):
    with start_daemon(tmp_path_factory.mktemp("interp-vae"), models_dir, model="vae") as d:
        yield d


def dones(d, address, *args, expect):
    replies = d.send(address, *args, expect=expect, timeout=60)
    assert [a for a, _ in replies] == ["/kick/done"] * expect, replies
    return [p for _, p in replies]


def samples(path) -> np.ndarray:
    return sf.read(path, dtype="float64")[0]


def label(path) -> str:
    """What a kick's file name carries after its note and character word (the seed, or t in thousandths), collision
    suffix off."""
    m = re.fullmatch(r"kick_(?:[A-G]b?-?\d+_)?[a-z]+_(\d+|t\d{3,4})(-\d+)?\.wav", Path(path).name)
    assert m, path
    return m.group(1)


def comment(path) -> str:
    """The kick's comment as asked: what the writer measured (measured_pitch_hz=... at its end) left out."""
    with sf.SoundFile(path) as f:
        return re.sub(r" measured_\S+", "", f.comment)


def error_reason(d, address, *args) -> tuple[int, str]:
    replies = d.send(address, *args, expect=1, timeout=10)
    assert len(replies) == 1 and replies[0][0] == "/kick/error", replies
    return replies[0][1][0], replies[0][1][1]


# ---------------------------------------------------------------- seeds


@pytest.mark.parametrize("which", ["daemon", "vae_daemon"])
def test_the_ends_of_a_morph_between_seeds_are_the_generated_kicks_sample_for_sample(request, which):
    d = request.getfixturevalue(which)
    (g5,) = dones(d, "/kick/generate", "seed", 5, "steps", STEPS, "decay", 0.3, expect=1)
    (g9,) = dones(d, "/kick/generate", "seed", 9, "steps", STEPS, "decay", 0.3, expect=1)
    (at0,) = dones(d, "/kick/interpolate", "a", 5, "b", 9, "t", 0.0, "steps", STEPS, "decay", 0.3, "id", 11, expect=1)
    (at1,) = dones(d, "/kick/interpolate", "a", 5, "b", 9, "t", 1.0, "steps", STEPS, "decay", 0.3, expect=1)
    (mid,) = dones(d, "/kick/interpolate", "a", 5, "b", 9, "t", 0.5, "steps", STEPS, "decay", 0.3, expect=1)
    assert at0[0] == 11 and at0[2] == 5 and at1[2] == 9  # an end that is a seed: the seed that regenerates it
    assert mid[2] == osc_api.NO_SEED
    assert np.array_equal(samples(at0[1]), samples(g5[1]))  # bit for bit, as 24-bit files
    assert np.array_equal(samples(at1[1]), samples(g9[1]))
    m = samples(mid[1])
    assert np.abs(m - samples(g5[1])).max() > 1e-3 and np.abs(m - samples(g9[1])).max() > 1e-3
    assert label(at0[1]) == "5" and label(mid[1]) == "t500"
    assert "seed=5" in comment(at0[1]) and "a=5 b=9 t=0.0000" in comment(at0[1])
    assert "seed=" not in comment(mid[1]) and "a=5 b=9 t=0.5000" in comment(mid[1])
    assert "decay=0.3000" in comment(mid[1])


def test_count_gives_evenly_spaced_kicks_in_order_and_the_default_is_five(daemon):
    (g5,) = dones(daemon, "/kick/generate", "seed", 5, "steps", STEPS, expect=1)
    (g9,) = dones(daemon, "/kick/generate", "seed", 9, "steps", STEPS, expect=1)
    got = dones(daemon, "/kick/interpolate", "a", 5.0, "b", 9.0, "count", 3.0, "steps", STEPS, "id", 12, expect=3)
    assert [p[0] for p in got] == [12] * 3 and [p[2] for p in got] == [5, osc_api.NO_SEED, 9]
    assert [comment(p[1]).split()[-1] for p in got] == ["t=0.0000", "t=0.5000", "t=1.0000"]
    # in a batch of three the ends match the kicks made alone to within float rounding (a few 24-bit steps)
    assert np.abs(samples(got[0][1]) - samples(g5[1])).max() <= 8 * LSB
    assert np.abs(samples(got[2][1]) - samples(g9[1])).max() <= 8 * LSB
    five = dones(daemon, "/kick/interpolate", "a", 5, "b", 9, "steps", STEPS, expect=5)
    assert [comment(p[1]).split()[-1] for p in five] == [f"t={t:.4f}" for t in (0, 0.25, 0.5, 0.75, 1)]
    assert len({p[1] for p in five}) == 5


def test_one_request_of_sixteen_spans_batches_and_keeps_its_order(daemon):
    got = dones(daemon, "/kick/interpolate", "a", 1, "b", 2, "count", 16, "steps", 1, expect=16)
    ts = [float(comment(p[1]).split("t=")[-1]) for p in got]
    assert ts == pytest.approx([i / 15 for i in range(16)], abs=1e-4)
    assert [p[2] for p in got] == [1] + [osc_api.NO_SEED] * 14 + [2]


# ---------------------------------------------------------------- files


def test_file_ends_by_bare_name_and_by_path_under_a_read_root(daemon):
    (g,) = dones(daemon, "/kick/generate", "seed", 21, "steps", STEPS, expect=1)
    other = daemon.read_root / "other.wav"
    data, rate = sf.read(g[1], dtype="float32")
    sf.write(other, data[::-1].copy(), rate, subtype="PCM_24")  # another kick: the first one, reversed
    got = dones(daemon, "/kick/interpolate", "a", Path(g[1]).name, "b", str(other), "count", 2, "steps", STEPS,
                "id", 13, expect=2)
    assert [p[2] for p in got] == [osc_api.NO_SEED] * 2  # no seed regenerates a file's kick
    assert [label(p[1]) for p in got] == ["t000", "t1000"]
    c = comment(got[0][1])
    assert f"a={Path(g[1]).name} b=other.wav t=0.0000" in c
    for _, path, _ in got:
        x = samples(path)
        assert np.isfinite(x).all() and np.abs(x).max() > 0.5
    mixed = dones(daemon, "/kick/interpolate", "a", str(other), "b", 4, "t", 1.0, "steps", STEPS, expect=1)
    (g4,) = dones(daemon, "/kick/generate", "seed", 4, "steps", STEPS, expect=1)
    assert mixed[0][2] == 4 and np.array_equal(samples(mixed[0][1]), samples(g4[1]))


def test_a_file_end_on_the_mel_vae_is_its_encoding(vae_daemon):
    """The mel-VAE takes a file's latent (its encoding): a morph from a file to a seed lands, t 1 is the seed's
    kick bit for bit."""
    (g,) = dones(vae_daemon, "/kick/generate", "seed", 21, expect=1)
    (g4,) = dones(vae_daemon, "/kick/generate", "seed", 4, expect=1)
    got = dones(vae_daemon, "/kick/interpolate", "a", Path(g[1]).name, "b", 4, "count", 3, expect=3)
    assert [p[2] for p in got] == [osc_api.NO_SEED, osc_api.NO_SEED, 4]
    assert f"a={Path(g[1]).name} b=4 t=0.5000" in comment(got[1][1])
    assert np.abs(samples(got[2][1]) - samples(g4[1])).max() <= 8 * LSB
    assert all(np.isfinite(samples(p[1])).all() for p in got)


def test_a_file_that_is_not_audio_is_refused_at_once_naming_its_end(daemon):
    bad = daemon.read_root / "notaudio.wav"
    bad.write_bytes(b"RIFF not really a wav file at all" * 10)
    _, reason = error_reason(daemon, "/kick/interpolate", "a", 3, "b", str(bad), "id", 14)
    assert reason.startswith("b: cannot use source notaudio.wav: not a sound file"), reason


def test_a_file_the_model_cannot_use_fails_each_kick_once_across_batches(daemon):
    """A silent file passes the receive loop's checks; the worker's preparation refuses it. Ten kicks take two
    batches (max_batch 8): every kick gets that one reason, the second batch without trying again."""
    silent = daemon.read_root / "silent.wav"
    sf.write(silent, np.zeros(4410, dtype=np.float32), 44100, subtype="PCM_24")
    replies = daemon.send("/kick/interpolate", "a", str(silent), "b", 3, "count", 10, "id", 15, "steps", STEPS,
                          expect=10, timeout=60)
    assert [a for a, _ in replies] == ["/kick/error"] * 10, replies
    assert {tuple(p) for _, p in replies} == {(15, "a: cannot use source silent.wav: silent")}
    assert daemon.wait_for_log("request 15 refused by the model: a: cannot use source silent.wav: silent")
    assert daemon.stderr_text().count("request 15 refused by the model") == 1


# ---------------------------------------------------------------- refusals


@pytest.mark.parametrize("args,needle", [
    (("a", 3, "id", 20), "needs b"),
    (("id", 20, "t", 0.5), "needs a and b"),
    (("a", 1.5, "b", 2, "id", 20), "a must be a seed (an int >= 0) or a file name"),
    (("a", -3, "b", 2, "id", 20), "a as a seed must be within 0.."),
    (("a", 1, "b", 2, "t", 1.5, "id", 20), "t must be within 0..1"),
    (("a", 1, "b", 2, "t", 0.5, "count", 3, "id", 20), "not both"),
    (("a", 1, "b", 2, "count", 17, "id", 20), "count must be within 1..16"),
    (("a", 1, "b", 2, "seed", 3, "id", 20), "unknown key 'seed'"),
    (("a", 1, "b", 2, "sampler", "ddpm", "id", 20), "interpolation needs a deterministic sampler (dpmpp_2m or ddim)"),
    (("a", 1, "b", "missing.wav", "id", 20), "b: source missing.wav does not exist"),
    (("a", "../etc/passwd", "b", 2, "id", 20), "a: source must be a bare file name"),
    (("a", "/etc/passwd", "b", 2, "id", 20), "a: source must be a file name in the output folder or a path under"),
    ((3, "a", 1, "b", 2), "key/value pairs only"),
])
def test_refusals_get_one_clear_reason_with_the_id(daemon, args, needle):
    id, reason = error_reason(daemon, "/kick/interpolate", *args)
    assert needle in reason, reason
    assert id == (20 if "id" in args else osc_api.NO_ID)


@pytest.mark.parametrize("address,args", [
    ("/kick/interpolate", ("a", 1, "b", 2, "t", 0.5, "count", 3)),  # refused while parsing
    ("/kick/interpolate", ("a", 1, "b", 2, "sampler", "ddpm", "t", 0.5)),  # refused by the daemon
    ("/kick/interpolate", ("a", 1, "b", "missing.wav")),
    ("/kick/variation", ("missing.wav",)),
    ("/kick/variation", ("/etc/passwd",)),
])
def test_a_refusal_of_a_request_without_an_id_carries_minus_one(daemon, address, args):
    """One rule (README): an error reply carries the id the request named, else -1; server-assigned ids are only
    for kicks actually queued (a refusal by the daemon used to carry one, a refusal while parsing -1)."""
    id, reason = error_reason(daemon, address, *args)
    assert id == osc_api.NO_ID, (id, reason)


def test_a_sampler_that_cannot_morph_refuses_the_whole_request_once(daemon):
    """Refused when it arrives (one /kick/error), not kick by kick when the model tries."""
    replies = daemon.send("/kick/interpolate", "a", 1, "b", 2, "count", 3, "sampler", "ddpm", "id", 23, expect=3,
                          timeout=3)
    assert replies == [("/kick/error", [23, "interpolation needs a deterministic sampler (dpmpp_2m or ddim), "
                                           "not ddpm"])]
    assert daemon.wait_for_log("refused interpolation 23: sampler ddpm")


def test_a_refused_file_end_leaves_no_descriptor_open(daemon):
    """a opens fine, b is refused: the daemon closes a's descriptor before it answers."""
    (g,) = dones(daemon, "/kick/generate", "seed", 22, "steps", STEPS, expect=1)
    pid = daemon.proc.pid
    fds = lambda: sorted(p.resolve() for p in Path(f"/proc/{pid}/fd").iterdir() if p.resolve().suffix == ".wav")  # noqa: E731
    before = fds()
    for _ in range(5):
        error_reason(daemon, "/kick/interpolate", "a", Path(g[1]).name, "b", "missing.wav")
    assert fds() == before


# ---------------------------------------------------------------- kickserver send


def test_send_waits_for_every_kick_of_an_interpolation(daemon):
    def send(*args):
        return subprocess.run([sys.executable, "-m", "kickserver", "send", "--port", str(daemon.port),
                               "/kick/interpolate", *args], cwd=REPO, env=daemon_env(), capture_output=True,
                              text=True, timeout=120)

    run = send("a", "3", "b", "4", "count", "3", "steps", str(STEPS))
    assert run.returncode == 0, run.stderr
    assert [ln.split()[0] for ln in run.stdout.strip().splitlines()] == ["/kick/done"] * 3
    run = send("a", "3", "b", "4", "steps", str(STEPS))  # neither t nor count: five kicks
    assert run.returncode == 0, run.stderr
    assert len(run.stdout.strip().splitlines()) == 5
    run = send("a", "3", "b", "4", "t", "0.25", "steps", str(STEPS))
    assert run.returncode == 0 and len(run.stdout.strip().splitlines()) == 1
    run = send("a", "3", "b", "4", "sampler", "ddpm")
    assert run.returncode == 1 and "deterministic sampler" in run.stdout


# ---------------------------------------------------------------- /kick/controls


def test_controls_lists_the_serving_models_controls_also_after_a_swap(daemon):
    assert daemon.send("/kick/controls") == [("/kick/controls", ["decay", "pitch", "click", "no-map"])]
    try:
        assert daemon.send("/kick/model", "onecontrol", timeout=60) == [("/kick/model", ["onecontrol"])]
        assert daemon.send("/kick/controls") == [("/kick/controls", ["decay", "no-map"])]
        _, reason = error_reason(daemon, "/kick/interpolate", "a", 1, "b", 2, "pitch", 0.5)
        assert "unknown key 'pitch'" in reason
    finally:
        assert daemon.send("/kick/model", "tiny", timeout=60) == [("/kick/model", ["tiny"])]
    assert daemon.send("/kick/controls") == [("/kick/controls", ["decay", "pitch", "click", "no-map"])]
    _, reason = error_reason(daemon, "/kick/controls", "decay")
    assert "takes no arguments" in reason
