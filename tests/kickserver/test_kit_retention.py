"""Kit folders and the output folder's budget, through a running daemon (the shipped kick-synth model): a kit counts
against max_files as one entry and against max_mb with its whole size, and is pruned with the kicks, oldest first,
as a whole (a watcher on the output folder sees the folder leave in one move, never a file of it deleted while it is
visible), in the kick pruning's log line; and a kit temp folder a killed writer left (`.NAME.<random>.kitpart`) is
swept when the daemon starts, said in the log."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from daemon_util import REPO, models_folder, start_daemon, wait_until
from inotify_util import InotifyWatch

SYNTH = REPO / "kickserver" / "models" / "kick-synth.safetensors"
STALE = ".kit_A1_punchy_5.k7x2q9ab.kitpart"  # what kickserver.kitfiles.write_kit's temp folder is called


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    """Serving with max_files 3, started over an output folder that holds a killed kit writer's temp folder."""
    d = tmp_path_factory.mktemp("kit_retention")
    stale = d / "out" / STALE
    stale.mkdir(parents=True)
    (stale / "kit_A1_punchy_5_v1_rr1.wav").write_bytes(b"RIFF half a kit")
    with start_daemon(d, models_folder(d / "models", SYNTH), model="kick-synth",
                      extra_args=["--max-files", "3"]) as daemon:
        yield daemon


def _one(daemon, *args) -> Path:
    (address, params), = daemon.send(*args, expect=1, timeout=120)
    assert address in ("/kick/done", "/kick/kit/done"), params
    return Path(params[1])


def test_a_stale_kit_temp_folder_is_swept_at_start(daemon):
    assert not (daemon.out_dir / STALE).exists()
    assert re.search(rf"removed 1 stale kit temp folder\(s\) in {re.escape(str(daemon.out_dir))} \({STALE}\)",
                     daemon.stderr_text()), daemon.stderr_text()


def test_a_kit_counts_as_one_and_is_pruned_as_a_whole_oldest_first(daemon):
    old_kit = _one(daemon, "/kick/kit", "seed", 5, "layers", 2, "robins", 2, "id", 1)
    kick = _one(daemon, "/kick/generate", "seed", 6, "id", 2)
    new_kit = _one(daemon, "/kick/kit", "seed", 7, "layers", 2, "robins", 1, "id", 3)
    assert old_kit.is_dir() and kick.is_file() and new_kit.is_dir()  # three entries: within max_files 3
    with InotifyWatch(daemon.out_dir, events="create,moved_from,delete") as watch:
        last = _one(daemon, "/kick/generate", "seed", 8, "id", 4)
        assert wait_until(lambda: not old_kit.exists(), timeout=10)
        assert wait_until(lambda: not [p for p in daemon.out_dir.iterdir() if p.name.endswith(".kitpart")],
                          timeout=10)
    assert kick.is_file() and new_kit.is_dir() and last.is_file()
    assert len(list(new_kit.iterdir())) == 7  # 2 WAVs, the SFZ, DrumGizmo's three files, Hydrogen's
    visible = [(e, n) for e, n in watch.events if not n.startswith(".") and not n.startswith("zz-inotify")]
    assert visible == [("MOVED_FROM,ISDIR", old_kit.name)], watch.events  # one move, nothing deleted in sight
    assert daemon.wait_for_log(f"retention removed 1 old kit folder(s) from {daemon.out_dir}, oldest first "
                               f"({old_kit.name}/): it keeps at most 3 kicks (max_files; a kit folder counts as one)",
                               timeout=10), daemon.stderr_text()


def test_a_kit_counts_against_max_mb_with_its_whole_size(tmp_path):
    """A 2 x 2 kit (4 hits of about 73 kB, each file as long as its hit sounds) fits 0.45 MB alone; a 3 s kick after
    it (decay_s 2.0, about 400 kB) does not: the kit goes, whole."""
    with start_daemon(tmp_path, models_folder(tmp_path / "models", SYNTH), model="kick-synth",
                      extra_args=["--max-mb", "0.45"]) as d:
        kit = _one(d, "/kick/kit", "seed", 5, "layers", 2, "robins", 2, "id", 1)
        size = sum(f.stat().st_size for f in kit.iterdir())
        assert 0.2e6 < size < 0.45e6, size
        kick = _one(d, "/kick/generate", "seed", 6, "decay_s", 2.0, "id", 2)
        assert 0.3e6 < kick.stat().st_size < 0.45e6, kick.stat().st_size
        assert wait_until(lambda: not kit.exists(), timeout=10), sorted(p.name for p in d.out_dir.iterdir())
        assert kick.is_file()
        assert d.wait_for_log(f"retention removed 1 old kit folder(s) from {d.out_dir}, oldest first ({kit.name}/): "
                              "it keeps under 0.45 MB (max_mb", timeout=10), d.stderr_text()
