"""Settings (TOML + command line), model resolution, source-path safety, the allow list, the CLI."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from daemon_util import REPO, daemon_env, models_folder, start_daemon

from kickserver import reload as reload_mod
from kickserver.config import ServerConfig, ServerConfigError, load_config
from kickserver.frontend import allowed


def run_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kickserver", *args], cwd=REPO, env=daemon_env(),
                          capture_output=True, text=True, timeout=timeout)


# ---------------------------------------------------------------- config


def test_toml_then_command_line(tmp_path):
    f = tmp_path / "config.toml"
    f.write_text('host = "0.0.0.0"\nport = 9100\nallow = ["10.0.0.0/8"]\nmax_files = 10\nsample_rate = 48000\n'
                 'read_roots = ["~/Samples"]\nmax_mb = 5\n')
    cfg, path = load_config(f, {"port": 9200, "host": None})
    assert path == f
    assert (cfg.host, cfg.port, cfg.allow, cfg.max_files, cfg.sample_rate, cfg.max_mb) == (
        "0.0.0.0", 9200, ["10.0.0.0/8"], 10, 48000, 5.0)
    assert cfg.read_root_dirs == [Path(os.path.expanduser("~/Samples"))]


def test_defaults_and_default_path(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    cfg, path = load_config(None, {})
    assert path is None
    assert (cfg.host, cfg.port, cfg.reply_port, cfg.sample_rate, cfg.queue_limit, cfg.max_steps) == (
        "127.0.0.1", 9000, 9001, 44100, 64, 200)
    assert cfg.out_dir == Path(os.path.expanduser("~/Music/kickserver"))
    (tmp_path / "kickserver").mkdir()
    (tmp_path / "kickserver" / "config.toml").write_text("port = 9300\n")
    cfg, path = load_config(None, {})
    assert cfg.port == 9300 and path == tmp_path / "kickserver" / "config.toml"


@pytest.mark.parametrize("text,needle", [
    ("prot = 9000\n", "unknown key(s) prot"),
    ('port = "9000"\n', "expected an integer"),
    ("sample_rate = 22050\n", "44100 or 48000"),
    ('allow = ["not-a-net"]\n', "not a network"),
    ("max_files = 0\n", "max_files"),
    ("max_steps = 5000\n", "max_steps"),
    ("steps = 300\n", "steps must be within 0..max_steps (200)"),
    ("port = [\n", "not valid TOML"),
    ("queue_limit = true\n", "expected an integer"),
])
def test_bad_config_is_an_error(tmp_path, text, needle):
    f = tmp_path / "c.toml"
    f.write_text(text)
    with pytest.raises(ServerConfigError, match=None) as e:
        load_config(f, {})
    assert needle in str(e.value)


def test_missing_explicit_config_is_an_error(tmp_path):
    with pytest.raises(ServerConfigError, match="no such config file"):
        load_config(tmp_path / "nope.toml", {})


# ---------------------------------------------------------------- models


def test_resolve_model(tmp_path, tiny_artifact, monkeypatch):
    monkeypatch.setattr(reload_mod, "BUNDLED", tmp_path / "no-bundled.safetensors")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(reload_mod.ModelNotFound, match="no model to serve"):
        reload_mod.resolve_model(empty, None)
    with pytest.raises(reload_mod.ModelNotFound, match="not found"):
        reload_mod.resolve_model(empty, "default")
    models = models_folder(tmp_path / "m", tiny_artifact)
    (models / "junk.safetensors").write_bytes(b"junk")
    (models / ".hidden.safetensors").write_bytes(b"junk")
    assert reload_mod.resolve_model(models, "tiny") == (models / "tiny.safetensors", "tiny")
    assert reload_mod.resolve_model(models, None) == (models / "tiny.safetensors", "tiny")  # newest valid
    with pytest.raises(reload_mod.ModelNotFound, match="available: tiny"):
        reload_mod.resolve_model(models, "other")
    assert reload_mod.list_models(models) == ["tiny"]
    # with a bundled model: `default` and an empty folder fall back to it
    bundled = models_folder(tmp_path / "pkg", tiny_artifact) / "tiny.safetensors"
    monkeypatch.setattr(reload_mod, "BUNDLED", bundled)
    assert reload_mod.resolve_model(empty, "default") == (bundled, "default")
    assert reload_mod.resolve_model(empty, "anything") == (bundled, "default")
    assert reload_mod.resolve_model(models, None) == (bundled, "default")
    assert reload_mod.list_models(models) == ["default", "tiny"]
    # <models>/default.safetensors is preferred over the bundled model (docs/daemon.md, model resolution)
    own = models_folder(tmp_path / "own", tiny_artifact)
    (own / "tiny.safetensors").rename(own / "default.safetensors")
    assert reload_mod.resolve_model(own, None) == (own / "default.safetensors", "default")
    assert reload_mod.list_models(own) == ["default"]


def test_missing_model_exits_2_with_a_clear_error(tmp_path, tiny_artifact):
    # a named model that is not in a non-empty folder: no fallback to the bundled one, a clear refusal
    # (the model is resolved before the port is bound, so the port is never used)
    models = models_folder(tmp_path / "models", tiny_artifact)
    cfg = tmp_path / "c.toml"
    cfg.write_text("")
    r = run_cli("serve", "--config", str(cfg), "--device", "cpu", "--models", str(models), "--model", "other",
                "--out", str(tmp_path / "out"), "--port", "9", timeout=60)
    assert r.returncode == 2, r.stderr
    assert "model 'other' not found" in r.stderr and "(available: default, tiny)" in r.stderr
    assert "Traceback" not in r.stderr


def test_port_in_use_exits_2_with_a_clear_error(tmp_path, tiny_artifact):
    # a port another program holds (root may bind port 1, so the test takes one itself)
    models = models_folder(tmp_path / "models", tiny_artifact)
    cfg = tmp_path / "c.toml"
    cfg.write_text("")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as held:
        held.bind(("127.0.0.1", 0))
        port = held.getsockname()[1]
        r = run_cli("serve", "--config", str(cfg), "--device", "cpu", "--models", str(models), "--model", "tiny",
                    "--out", str(tmp_path / "out"), "--port", str(port), timeout=60)
    assert r.returncode == 2, r.stderr
    assert f"cannot bind UDP 127.0.0.1:{port}" in r.stderr and "Traceback" not in r.stderr
    # the port is bound before the model loads: a second daemon fails at once, and says what to do
    assert "loaded model" not in r.stderr, "the model was loaded before the bind failed:\n" + r.stderr
    assert "another kickserver" in r.stderr and "--port" in r.stderr, r.stderr


# ---------------------------------------------------------------- paths and networks


def test_allow_list():
    cfg = ServerConfig(host="127.0.0.1")
    assert allowed(cfg, "127.0.0.1") and allowed(cfg, "10.1.2.3")  # loopback bind: only loopback can reach it
    cfg = ServerConfig(host="0.0.0.0", allow=["192.168.1.0/24", "fd00::/8"])
    assert allowed(cfg, "127.0.0.1") and allowed(cfg, "::1") and allowed(cfg, "192.168.1.77")
    assert allowed(cfg, "::ffff:192.168.1.5") and allowed(cfg, "fd00::1")
    assert not allowed(cfg, "192.168.2.1") and not allowed(cfg, "8.8.8.8") and not allowed(cfg, "fe80::1")
    cfg = ServerConfig(host="0.0.0.0")
    assert allowed(cfg, "127.0.0.1") and not allowed(cfg, "192.168.1.77")


# ---------------------------------------------------------------- command line


def test_help_lists_every_option():
    r = run_cli("--help", timeout=60)
    assert r.returncode == 0
    for opt in ("--config", "--host", "--port", "--reply-port", "--out", "--models", "--model", "--device",
                "--sample-rate", "--allow", "serve", "send", "render"):
        assert opt in r.stdout, opt


def test_daemon_imports_no_training_only_libraries():
    # torch itself pulls in tqdm (torch.hub); what matters is that nothing of ours adds training-only libraries
    code = ("import sys, torch, torchaudio\n"
            "base = set(sys.modules)\n"
            "import kickserver.cli, kickserver.daemon, kickserver.worker, kickserver.reload, kickserver.writer\n"
            "import kickmodel.generator, kickmodel.clips\n"
            "added = [m for m in ('tensorboard', 'matplotlib', 'tqdm') if m in sys.modules and m not in base]\n"
            "assert not added, added\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=daemon_env(), capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr


def test_render(tmp_path, tiny_artifact):
    models = models_folder(tmp_path / "models", tiny_artifact)
    cfg = tmp_path / "c.toml"
    cfg.write_text("")
    out = tmp_path / "kicks"
    r = run_cli("render", "--n", "3", "--out", str(out), "--config", str(cfg), "--models", str(models), "--model",
                "tiny", "--device", "cpu", "--steps", "2", "--seed", "5", "--sample-rate", "48000", "--batch", "2",
                "--control", "decay=0.5")
    assert r.returncode == 0, r.stderr
    paths = [Path(p) for p in r.stdout.split()]
    assert len(paths) == 3 and all(p.parent == out and p.is_file() for p in paths)
    assert [p.name.rsplit("_", 1)[1] for p in paths] == ["5.wav", "6.wav", "7.wav"]
    import soundfile as sf

    info = sf.info(paths[0])
    assert (info.samplerate, info.subtype) == (48000, "PCM_24")
    assert abs(info.frames - 4096 * 48000 / 44100) < 1.5


@pytest.mark.parametrize("argv", [
    ["--port", "9100", "serve"],
    ["serve", "--port", "9100"],
    ["--port", "9100"],
    ["--port", "9000", "serve", "--port", "9100"],  # the later one wins
])
def test_serve_options_before_or_after_the_subcommand(tmp_path, argv):
    from kickserver.cli import _overrides, build_parser

    cfg_file = tmp_path / "c.toml"
    cfg_file.write_text("port = 9300\nreply_port = 9400\n")
    ns = build_parser().parse_args(["--config", str(cfg_file), "--model", "mykit", *argv])
    cfg, path = load_config(ns.config, _overrides(ns))
    assert path == cfg_file
    assert (cfg.port, cfg.reply_port, cfg.model) == (9100, 9400, "mykit")


def test_options_before_render_and_send_are_kept():
    from kickserver.cli import _overrides, build_parser

    ns = build_parser().parse_args(["--device", "cpu", "--out", "/tmp/k", "render", "--n", "2"])
    assert (ns.command, ns.out, _overrides(ns)["device"]) == ("render", "/tmp/k", "cpu")
    ns = build_parser().parse_args(["--port", "9100", "send", "/kick/ping"])
    assert (ns.command, ns.port, ns.host) == ("send", 9100, None)
    ns = build_parser().parse_args(["send", "--port", "9200", "/kick/ping"])
    assert ns.port == 9200


def test_server_steps_fill_in_for_requests_that_name_none(tmp_path, tiny_artifact):
    # `steps` in the config (or --steps) replaces the model's default, e.g. fewer steps on a CPU-only box
    import soundfile as sf

    models = models_folder(tmp_path / "models", tiny_artifact)
    with start_daemon(tmp_path, models, extra_args=["--steps", "3"]) as d:
        (a1, p1), = d.send("/kick/generate", "seed", 1)
        (a2, p2), = d.send("/kick/generate", "seed", 1, "steps", 2)
    assert (a1, a2) == ("/kick/done", "/kick/done"), (p1, p2)
    assert "steps=3 " in sf.SoundFile(p1[1]).copy_metadata()["comment"]
    assert "steps=2 " in sf.SoundFile(p2[1]).copy_metadata()["comment"]
