"""scripts/outside_test_set.py on a fake /usr/share: kicks by name or Hydrogen instrument, kit files left out."""

from __future__ import annotations

import csv
import importlib.util
import io
import shutil
import sys
from pathlib import Path

import numpy as np
import soundfile as sf

from trainer.synth import synth_kick

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "kicks"
sys.path.insert(0, str(REPO / "scripts"))
spec = importlib.util.spec_from_file_location("outside_test_set", REPO / "scripts" / "outside_test_set.py")
O = importlib.util.module_from_spec(spec)
spec.loader.exec_module(O)

XML = """<?xml version="1.0" encoding="UTF-8"?>
<drumkit_info xmlns="http://www.hydrogen-music.org/drumkit">
 <name>KitA</name>
 <instrumentList>
  <instrument><id>0</id><name>Kick</name><layer><filename>boom.wav</filename></layer></instrument>
  <instrument><id>1</id><name>Snare</name><layer><filename>crack.wav</filename></layer></instrument>
 </instrumentList>
</drumkit_info>
"""


def kick(seed: int) -> np.ndarray:
    return 0.8 * synth_kick(np.random.default_rng(seed), length=20000, drive=0.0, click=0.0)


def test_outside_set_takes_unlisted_kicks_only(tmp_path, capsys):
    share = tmp_path / "root/usr/share"
    kit_dir = share / "hydrogen/data/drumkits/KitA"
    kit_dir.mkdir(parents=True)
    (kit_dir / "drumkit.xml").write_text(XML)
    sf.write(str(kit_dir / "boom.wav"), kick(1), 44100)  # a kick by its instrument's name only
    sf.write(str(kit_dir / "crack.wav"), kick(2), 44100)  # a snare instrument: not taken
    (share / "sonic-pi/samples").mkdir(parents=True)
    sf.write(str(share / "sonic-pi/samples/bd_new.flac"), kick(3), 44100)
    shutil.copy(FIXTURES / "samples_bd_fat.flac", share / "sonic-pi/samples/bd_fat.flac")  # in the kit already
    (share / "lmms/samples/drums").mkdir(parents=True)
    sf.write(str(share / "lmms/samples/drums/kick09.wav"), kick(4), 44100)
    kit = tmp_path / "kit"
    kit.mkdir()
    shutil.copy(FIXTURES / "samples_bd_fat.flac", kit)
    (kit / "MANIFEST.csv").write_text("file,seconds,debian_package,original_path,license\r\n"
                                      "samples_bd_fat.flac,0.232,sonic-pi-samples,sonic-pi/samples/bd_fat.flac,CC0-1.0\r\n")
    out = tmp_path / "outside"
    assert O.main([str(out), "--root", str(tmp_path / "root"), "--kit", str(kit)]) == 0
    rows = list(csv.DictReader(io.StringIO((out / "MANIFEST.csv").read_text())))
    got = {r["file"]: (r["debian_package"], r["original_path"]) for r in rows}
    assert got == {"KitA_boom.flac": ("hydrogen-drumkits", "hydrogen/data/drumkits/KitA/boom.wav"),
                   "bd_new.flac": ("sonic-pi-samples", "sonic-pi/samples/bd_new.flac"),
                   "drums_kick09.flac": ("lmms-common", "lmms/samples/drums/kick09.wav")}
    assert sorted(p.name for p in out.glob("*.flac")) == sorted(got)
    # a rerun replaces its own folder; a foreign non-empty folder and the kit itself are refused
    assert O.main([str(out), "--root", str(tmp_path / "root"), "--kit", str(kit)]) == 0
    (tmp_path / "foreign").mkdir()
    (tmp_path / "foreign" / "mine.txt").write_text("x")
    capsys.readouterr()
    assert O.main([str(tmp_path / "foreign"), "--root", str(tmp_path / "root"), "--kit", str(kit)]) == 2
    assert "not a folder this script wrote" in capsys.readouterr().err
    assert O.main([str(kit), "--root", str(tmp_path / "root"), "--kit", str(kit)]) == 2
