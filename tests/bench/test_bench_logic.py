"""The suite's figures on inputs whose answer is known: Spearman's r, the control targets, the guidance choice,
FLOP counting, the burst's accounting, the report's choice of results, bench/gpu.py on a CPU."""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from daemon_util import make_artifact  # noqa: E402

from bench import common, controls, custom, flops, gpu, latency, report  # noqa: E402
from bench.train_speed import speedups  # noqa: E402
from trainer.evaluation import dials  # noqa: E402

# ------------------------------------------------------------------ Spearman


def test_spearman_is_one_for_any_increasing_map_and_handles_ties():
    x = np.arange(20, dtype=float)
    assert dials.spearman(x, np.exp(x / 3)) == pytest.approx(1.0)
    assert dials.spearman(x, -(x**3)) == pytest.approx(-1.0)
    assert np.isnan(dials.spearman(x, np.ones(20)))
    assert list(dials.rankdata([3, 1, 3, 2])) == [3.5, 1.0, 3.5, 2.0]
    rng = np.random.default_rng(0)
    asked = np.repeat([0.1, 0.3, 0.5, 0.7, 0.9], 8)  # the sweep's many ties
    measured = asked + rng.normal(0, 0.3, asked.size)
    scipy_stats = pytest.importorskip("scipy.stats")
    assert dials.spearman(asked, measured) == pytest.approx(scipy_stats.spearmanr(asked, measured)[0], abs=1e-12)


# ------------------------------------------------------------------ the control targets

VALUES = (0.1, 0.3, 0.5, 0.7, 0.9)
Q = [float(v) for v in np.linspace(0.0, 1.0, 33)]  # raw units = dial units: the percentiles are 0.1, 0.2, ...
QUANTILES = {"decay": Q, "pitch": [100 * v for v in Q], "click": [-60 + 60 * v for v in Q]}


def sweep_raw(own: np.ndarray, pitch: float = 50.0, click: float = -30.0) -> np.ndarray:
    """[values, n, 3] with decay = own and the other two constant (unless given per value)."""
    n = own.shape[1]
    raw = np.zeros((len(VALUES), n, 3))
    raw[:, :, 0] = own
    raw[:, :, 1] = np.broadcast_to(np.asarray(pitch, dtype=float).reshape(-1, 1), (len(VALUES), n))
    raw[:, :, 2] = np.broadcast_to(np.asarray(click, dtype=float).reshape(-1, 1), (len(VALUES), n))
    return raw


def test_a_dial_that_does_what_it_says_meets_every_target():
    rng = np.random.default_rng(1)
    own = np.asarray(VALUES)[:, None] + rng.normal(0, 0.01, (5, 8))
    row = controls.score("decay", VALUES, sweep_raw(own), QUANTILES)
    assert row["r"] > 0.95 and row["targets"] == {"r": True, "low_end": True, "high_end": True, "cross_talk": True}
    assert row["train"]["p20"] == pytest.approx(0.2) and row["train"]["p80"] == pytest.approx(0.8)
    assert row["move_own"] == pytest.approx(0.8, abs=0.03) and row["met"] == 4


def test_each_target_fails_on_its_own():
    rng = np.random.default_rng(2)
    narrow = 0.5 + 0.2 * (np.asarray(VALUES)[:, None] - 0.5) + rng.normal(0, 0.005, (5, 8))  # right way, too little
    row = controls.score("decay", VALUES, sweep_raw(narrow), QUANTILES)
    assert row["targets"]["r"] and not row["targets"]["low_end"] and not row["targets"]["high_end"]
    noisy = np.asarray(VALUES)[:, None] + rng.normal(0, 0.6, (5, 8))
    assert not controls.score("decay", VALUES, sweep_raw(noisy), QUANTILES)["targets"]["r"]
    good = np.asarray(VALUES)[:, None] + rng.normal(0, 0.01, (5, 8))
    dragging = 100 * (0.3 + 0.5 * np.asarray(VALUES))  # pitch moves 0.4 of its range while decay moves 0.8
    row = controls.score("decay", VALUES, sweep_raw(good, pitch=dragging), QUANTILES)
    assert row["cross_talk"]["pitch"] == pytest.approx(0.4, abs=0.02) and row["cross_talk"]["click"] == 0
    assert row["cross_talk_ratio"]["pitch"] == pytest.approx(0.5, abs=0.03)
    assert row["targets"]["r"] and row["targets"]["low_end"] and not row["targets"]["cross_talk"]
    backwards = controls.score("decay", VALUES, sweep_raw(good[::-1]), QUANTILES)
    assert backwards["r"] < -0.9 and backwards["met"] == 0


def test_best_guidance_meets_the_most_targets_then_the_higher_r_then_the_smaller_scale():
    def rows(met, r):
        return [{"met": met, "r": r}]

    assert controls.best_guidance({1.0: rows(2, 0.9), 2.0: rows(3, 0.5), 3.0: rows(1, 0.99)}) == 2.0
    assert controls.best_guidance({1.0: rows(3, 0.5), 2.0: rows(3, 0.7)}) == 2.0
    assert controls.best_guidance({3.0: rows(3, 0.7), 1.5: rows(3, 0.7)}) == 1.5
    assert controls.best_guidance({}) is None


# ------------------------------------------------------------------ FLOPs


def test_flop_counter_counts_a_matmul_and_the_peak_is_a_rate():
    a, b = torch.randn(64, 32), torch.randn(32, 16)
    assert flops.count_flops(lambda: a @ b) == 2 * 64 * 32 * 16
    assert 1e6 < flops.peak_flops("cpu", n=128, reps=1) < 1e15


def test_flops_per_kick_is_the_steps_times_the_cost_of_one(tmp_path):
    from kickmodel.loading import load_generator

    gen = load_generator(make_artifact(tmp_path / "w.safetensors"), "cpu")
    rows = flops.measure_model(gen, peak=1e11, reps=1)
    one = rows[0]
    assert one["steps"] == gen.default_steps and one["flops_per_step"] > 0
    assert one["flops_per_kick"] == pytest.approx(one["flops_outside_steps"] + gen.default_steps
                                                  * one["flops_per_step"], rel=0.01)
    assert rows[1]["batch"] == 8 and rows[1]["flops_per_kick"] == pytest.approx(one["flops_per_kick"], rel=0.01)
    assert one["of_peak"] == pytest.approx(one["achieved_flops"] / 1e11)


# ------------------------------------------------------------------ the burst's accounting


def fake_daemon(limit: int) -> tuple[int, threading.Event]:
    """A UDP server that answers like the daemon: the first `limit` kicks are done (after a queue), the rest
    refused busy; /kick/status reports the queue."""
    from pythonosc.osc_message_builder import OscMessageBuilder
    from pythonosc.osc_packet import OscPacket

    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(0.01)
    stop = threading.Event()
    state = {"accepted": 0}

    def reply(addr, address, *args):
        b = OscMessageBuilder(address=address)
        for a in args:
            b.add_arg(a)
        sock.sendto(b.build().dgram, addr)

    def serve():
        pending, last = [], time.monotonic()
        while not stop.is_set():
            try:
                data, addr = sock.recvfrom(65536)
            except TimeoutError:
                data = None
            if data:
                for m in OscPacket(data).messages:
                    msg = m.message
                    if msg.address == "/kick/status":
                        reply(addr, "/kick/status", "fake", "cpu", len(pending), 0)
                    elif msg.address == "/kick/generate":
                        kid = msg.params[2]
                        if state["accepted"] < limit:
                            state["accepted"] += 1
                            pending.append((addr, kid))
                        else:
                            reply(addr, "/kick/error", kid, "busy: 3 kicks queued (limit 3)")
            if pending and time.monotonic() - last > 0.03:  # one kick per 30 ms
                addr, kid = pending.pop(0)
                reply(addr, "/kick/done", kid, f"/tmp/{kid}.wav", 0)
                last = time.monotonic()

    threading.Thread(target=serve, daemon=True).start()
    return sock.getsockname()[1], stop


def test_burst_counts_done_refused_and_the_largest_queue():
    port, stop = fake_daemon(limit=5)
    try:
        b = latency.burst(port, clients=3, requests=3, timeout=20)
    finally:
        stop.set()
    assert b["kicks_asked"] == 9 and b["kicks_done"] == 5 and b["refused"] == 4 and b["lost"] == 0
    assert b["refusal_reasons"] == {"busy": 4}
    assert b["kicks_per_s"] > 0 and 1 <= b["max_queue"] <= 5 and b["status_replies"] >= 1


# ------------------------------------------------------------------ the rest


def test_benchmarks_give_each_family_its_own_options(tmp_path):
    """A benchmark of several families gives each the options it declares for "bench" (a latent-diffusion model's
    --vae), not the others'; one whose value is an artifact and is not given is a random one made on the spot."""
    import argparse

    from kickmodel.loading import load_artifact
    from trainer.cli import add_family_flags, given_options

    vae = make_artifact(tmp_path / "vae.safetensors", seed=2, family="mel_vae")
    ap = argparse.ArgumentParser()
    add_family_flags(ap, "bench")
    given = given_options(ap.parse_args(["--vae", str(vae)]))
    assert given == {"vae": str(vae)}
    made_in = tmp_path / "made"
    made_in.mkdir()
    assert common.family_options("latent_diffusion", given, made_in, "tiny") == {"vae": vae}
    assert common.family_options("waveform_diffusion", given, made_in, "tiny") == {}  # not its option
    made = common.family_options("latent_diffusion", {}, made_in, "tiny")  # none given: a random stand-in
    assert load_artifact(made["vae"]).family == "mel_vae" and made["vae"].parent == made_in
    assert common.option_args(made) == ["--vae", str(made["vae"])]


def test_custom_picks_files_spread_over_the_folder():
    files = [Path(f"k{i:03d}.wav") for i in range(100)]
    got = custom.pick(list(reversed(files)), 4)
    assert got == [Path("k000.wav"), Path("k025.wav"), Path("k050.wav"), Path("k075.wav")]
    assert custom.pick(files[:3], 10) == files[:3]


def test_speedups_compare_each_optimised_row_with_its_naive_twin():
    rows = [{"family": "f", "preset": "p", "mode": "optimised", "samples_per_s": 30.0, "peak_gpu_mb": 500.0},
            {"family": "f", "preset": "p", "mode": "naive", "samples_per_s": 10.0, "peak_gpu_mb": 1000.0},
            {"family": "f", "preset": "q", "mode": "optimised", "error": "OOM"}]
    assert speedups(rows) == [{"family": "f", "preset": "p", "speed_x": 3.0, "memory_x": 0.5}]


def test_report_keeps_the_newest_suite_result_per_benchmark_and_device(tmp_path):
    def write(name, d):
        (tmp_path / name).write_text(json.dumps(d))

    write("flops-cpu.json", {"suite": 1, "benchmark": "flops", "date": "2026-12-04T10:00:00+00:00", "machine": {}})
    write("flops-old.json", {"suite": 1, "benchmark": "flops", "date": "2026-12-01T10:00:00+00:00", "machine": {}})
    write("flops-gpu.json", {"suite": 1, "benchmark": "flops", "date": "2026-12-02T10:00:00+00:00",
                             "machine": {"gpu": "H100"}})
    write("latency-cpu.json", {"host": "vm", "results": []})  # an older script's result: not the suite's
    (tmp_path / "broken.json").write_text("{")
    got = report.load_results(tmp_path)
    assert set(got) == {("flops", "cpu"), ("flops", "cuda")}
    assert got[("flops", "cpu")]["_file"] == "flops-cpu.json"


def test_report_shows_a_results_own_command_and_note_and_names_files_without_their_folders(tmp_path):
    """A result may carry the command it was run with and a note (a busy machine, an earlier run): the page prints
    both, and a file outside the repository (recorded by its name only) shows as its name."""
    d = {"suite": 1, "benchmark": "custom", "date": "2026-12-06T05:00:00+00:00", "machine": {}, "_file": "c.json",
         "user_kicks": 12, "kicks": f"{common.OUTSIDE} my-kicks", "init": "kickserver/models/default.safetensors",
         "train_steps": 100, "samples_per_s": 50.0, "fit_s": 150.0, "budget_s": 180.0, "time_to_model_s": 155.0,
         "target_s": 3600, "met_target": True, "held_out_kicks": 8, "eval_n": 32, "rows": [],
         "command": "python -m bench custom --kicks my-kicks --budget-min 3", "note": "The machine was busy."}
    page = report.render({("custom", "cpu"): d}, tmp_path / "B.md", tmp_path / "img")
    assert "`python -m bench custom --kicks my-kicks --budget-min 3`" in page and "The machine was busy." in page
    assert "a user's folder from `my-kicks`" in page and "fine-tuned from `default.safetensors`" in page
    assert "outside the repository" not in page
    plain = report.render({("custom", "cpu"): {k: v for k, v in d.items() if k not in ("command", "note")}},
                          tmp_path / "B.md", tmp_path / "img")
    assert f"`{report.COMMANDS['custom']}`" in plain and "The machine was busy." not in plain


def test_gpu_script_refuses_without_a_gpu(capsys):
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    assert gpu.main([]) == 2
    err = capsys.readouterr().err
    assert "no CUDA GPU here" in err and "python -m bench" in err


def test_gpu_sections_run_on_a_cpu_with_tiny_sizes(tmp_path):
    art = make_artifact(tmp_path / "w.safetensors")
    rows = gpu.sampling_section("cpu", [art], art, batches=(1,), reps=1, capture_modes=("graphs",))  # no inductor
    assert rows[0]["how"] == "eager" and rows[0]["median_s"] > 0 and rows[0]["peak_gpu_mb"] is None
    assert rows[1]["how"] == "graphs" and rows[1]["capture_used"] == "off"
    assert "CUDA graphs need a CUDA device" in rows[1]["error"]
    late = gpu.plan_section("cpu", ["mel_vae"], "tiny", budgets=(None,), deadline=gpu.Deadline(0), reserve_s=1)
    assert late == [{"family": "mel_vae", "preset": "tiny", "budget_gb": None, "skipped": "time budget"}]
    plan = gpu.plan_section("cpu", ["waveform_diffusion"], "tiny", budgets=(None,), steps=1)
    assert plan[0]["precision"] == "fp32" and not plan[0]["checkpointing"] and plan[0]["vs_naive"] > 0
    kit = Path(__file__).resolve().parents[2] / "kickserver" / "data" / "kicks"
    loop = gpu.loop_section("cpu", ["latent_diffusion"], "tiny", 2, [kit], tmp_path, network_steps=1)
    assert loop[0]["steps"] == 2 and loop[0]["samples_per_s"] > 0 and loop[0]["network_samples_per_s"] > 0
    assert loop[0]["loop_vs_network"] == pytest.approx(loop[0]["samples_per_s"] / loop[0]["network_samples_per_s"])
    assert loop[0]["micro_batch"] >= 1 and loop[0]["peak_gpu_mb"] is None
    daemon = gpu.daemon_section("cpu", tmp_path, captures=("off",), counts=(1,), reps=1, warm=0)
    assert daemon[0]["capture"] == "off" and daemon[0]["median_s"] > 0 and daemon[0]["rss_mb"] > 0
    assert daemon[0]["target_s"] is None  # the targets are a GPU's
    got = gpu.summary({"daemon": daemon, "loop": loop, "plan": plan})
    assert [t["what"] for t in got] == ["latent_diffusion tiny: real loop / network samples/s",
                                        "waveform_diffusion: default loop / naive loop samples/s"]
    assert got[0]["met"] == loop[0]["met_ratio_target"]


def test_gpu_summary_judges_each_target():
    payload = {"daemon": [{"capture": "off", "count": 1, "median_s": 0.05},
                          {"capture": "auto", "count": 1, "median_s": 0.012, "met_target": True, "reserved_mb": 900.0,
                           "met_resident_target": True},
                          {"capture": "auto", "count": 8, "median_s": 0.031, "met_target": False}],
               "custom": {"time_to_model_s": 130.0, "met_target": False}}
    got = {t["what"]: (t["value"], t["met"]) for t in gpu.summary(payload)}
    assert got == {"daemon, 1 kick(s) end to end (median s)": (0.012, True),
                   "daemon resident VRAM (MB reserved)": (900.0, True),
                   "daemon, 8 kick(s) end to end (median s)": (0.031, False),
                   "20 kicks -> model served (s)": (130.0, False)}
    assert gpu.resident_mb(["m", "cuda:0", 0, 0, "why",
                            "cuda:0 allocator reserved 1100 MB, peak 640 MB, device used 1900 of 143771 MB"]) == {
        "reserved_mb": 1100.0, "peak_mb": 640.0, "device_used_mb": 1900.0, "device_total_mb": 143771.0,
        "resident_target_mb": 1024.0, "met_resident_target": False}
    # judged on the allocator's reserve, not the device's use (which counts the context and other processes)
    assert gpu.resident_mb(["m", "cuda:0", 0, 0, "why",
                            "cuda:0 allocator reserved 900 MB, peak 640 MB, device used 1900 of 143771 MB"])[
        "met_resident_target"] is True
    assert gpu.resident_mb(["m", "cpu", 0, 0, "why", "cpu RSS 950 MB"]) == {"rss_mb": 950.0}


def test_loop_ab_runs_a_commit_beside_this_tree(tmp_path):
    """bench/studies/loop_ab.py: a revision's committed tree, exported, and this tree, each timed in a fresh process."""
    from bench.studies import loop_ab

    before = loop_ab.export_tree("HEAD", tmp_path / "before")
    assert (before / "trainer" / "train.py").is_file() and not (before / ".git").exists()
    logs: list[str] = []
    rows = loop_ab.compare(before, loop_ab.common.REPO, ["mel_vae"], "tiny", 1, 1, "cpu", threads=1, log=logs.append)
    r = rows[0]
    assert r["before_samples_per_s"] > 0 and r["after_samples_per_s"] > 0
    assert r["after_vs_before"] == pytest.approx(r["after_samples_per_s"] / r["before_samples_per_s"])
    assert logs and logs[0].startswith("mel_vae round 1: before")


def test_batch_bits_finds_a_batch_dependent_kick_and_passes_a_batch_invariant_one(tmp_path):
    """bench/batch_bits.py (bench.gpu's batch section, run on CUDA when a GPU is lent): on a real generator every
    mode's kick is identical at every position; a generator whose kicks move with their batch is caught, with its
    largest difference in 24-bit steps; the summary turns both into targets."""
    from bench import batch_bits
    from kickmodel.loading import load_generator

    gen = load_generator(make_artifact(tmp_path / "ld.safetensors", family="latent_diffusion"), "cpu")
    rows = batch_bits.bits(gen)
    assert [r["mode"] for r in rows] == ["generate", "variation", "morph"]
    assert all(r["identical"] and r["positions"] == 14 for r in rows), rows

    class Drifting:  # a kick that moves by a rounding with its batch's size
        capabilities, samplers, sample_rate = frozenset(), (), 8000

        def settings(self, *a):
            return None

        def generate(self, items, settings):
            n = len(items)
            return np.stack([np.full(16, it.seed * 1e-3 + (n > 1) * 2.0 ** -20) for it in items])

    (r,) = batch_bits.bits(Drifting())
    assert not r["identical"] and r["max_lsb"] == 8.0
    payload = {"batch": {"models": [{"model": "m", "bits": rows, "timing": {"eight_over_one": 1.5}},
                                    {"model": "d", "bits": [r], "timing": {"eight_over_one": 3.0}}]}}
    met = {t["what"].split(":")[0] + (" bits" if "bit for bit" in t["what"] else ""): t["met"]
           for t in gpu.summary(payload)}
    assert met == {"m": True, "m bits": True, "d": False, "d bits": False}


# ------------------------------------------------------------------ a folder's bodies (bench/studies/folder_body.py)


def test_folder_body_tells_a_lone_swept_sine_from_a_body_with_partials_and_modes():
    """A kick that is one swept sine measures almost nothing from 1.5 x its fundamental to 1 kHz (a "lone sine"); the
    same kick with near-harmonic partials at 2 and 3 times it and an inharmonic mode at 430 Hz measures them, in the
    partials' band too; the fundamental is found where the body settles."""
    from bench.studies.folder_body import LONE_DB, body_figures, summary

    sr = 44100
    t = np.arange(int(0.6 * sr)) / sr
    f = 50.0 * (1 + 1.5 * np.exp(-t / 0.012))  # 125 Hz falling to 50 Hz
    phase = 2 * np.pi * np.cumsum(f) / sr
    env = (1 - np.exp(-t / 0.001)) * np.exp(-t / 0.25)
    lone = env * np.sin(phase)
    drum = lone + env * (0.5 * np.sin(2.04 * phase) + 0.3 * np.sin(3.06 * phase) + 0.2 * np.sin(2 * np.pi * 430 * t))
    gone = np.where(t < 0.02, lone, 0.0)  # a 20 ms blip: nothing left 30..200 ms after its onset
    fig = body_figures(np.stack([lone, drum, np.zeros_like(t), gone]), sr)
    assert fig["f0_hz"][:2] == pytest.approx([50.0, 50.0], abs=3.0)
    assert fig["above_db"][0] < LONE_DB < -10 < fig["above_db"][1]
    assert fig["h23_db"][1] > -10 and fig["h23_db"][0] < LONE_DB
    assert all(np.isnan(v[2:]).all() for v in fig.values())  # no body: no figures, not a full body at 0 dB
    s = summary({k: np.repeat(v, [3, 7, 5, 5]) for k, v in fig.items()})
    assert s["n"] == 20 and s["n_measured"] == 10 and s["lone_share"][0] == pytest.approx(0.3)


def test_osc_counts_the_seconds_a_model_renders_not_its_trimmed_files(tmp_path):
    """The real-time factor of `bench osc` counts what the model renders a kick (its artifact's length), which files
    cut where the kick has decayed no longer show: a model in the folder given, else the bundled one."""
    from kickmodel.artifact import read_metadata

    art = make_artifact(tmp_path / "tiny.safetensors")
    meta = read_metadata(art)
    assert latency.render_seconds(str(tmp_path), "tiny") == int(meta["length"]) / int(meta["sample_rate"])
    bundled = read_metadata(common.BUNDLED)
    assert latency.render_seconds(str(tmp_path), "default") == int(bundled["length"]) / int(bundled["sample_rate"])
    assert latency.render_seconds(None, "default") == pytest.approx(45056 / 44100)
    assert latency.render_seconds(str(tmp_path), "nothing-here") is None
