"""The output folder swapped for a link while the daemon runs: writes were redirected into the
link's target, and a bare variation source was read from there (the output folder as a read root followed the link).
The daemon opens its output folder once and writes relative to that descriptor; a folder at its path that is not the
one it opened is refused with a reason, never written through; the output folder as a read root stays the folder
it opened."""

from __future__ import annotations

import os
import shutil

from daemon_util import models_folder, start_daemon


def test_an_output_folder_swapped_for_a_link_redirects_nothing(tmp_path, tiny_artifact):
    models = models_folder(tmp_path / "models", tiny_artifact)
    out, moved, elsewhere = tmp_path / "out", tmp_path / "out-moved", tmp_path / "elsewhere"
    elsewhere.mkdir()
    with start_daemon(tmp_path, models, model="tiny", out_dir=out) as d:
        (a, p), = d.send("/kick/generate", "steps", 2, "id", 1, timeout=60)
        assert a == "/kick/done", p
        first = os.path.basename(p[1])
        shutil.copyfile(out / first, elsewhere / "planted.wav")  # a file only the link's target holds
        os.rename(out, moved)
        out.symlink_to(elsewhere)  # the swap: the folder's name is now a link to another folder
        replies = d.send("/kick/generate", "steps", 2, "id", 2, timeout=60)
        assert [n for n in os.listdir(elsewhere) if n != "planted.wav"] == [], replies  # nothing redirected
        (a, p), = replies
        assert a == "/kick/error" and p[0] == 2 and "was replaced" in p[1], p
        (a, p), = d.send("/kick/variation", "planted.wav", "strength", 0.0, "id", 3, timeout=60)
        assert a == "/kick/error" and p[0] == 3, p  # the link's target is not the output folder
        assert sorted(os.listdir(moved)) == [first] or first in os.listdir(moved)
        assert d.alive()
