"""Render the Pd panel's picture (max_patches/img/pd-panel.png) as the README shows it.

Needs Pd's GUI (Debian puredata-gui), a running X display (e.g. `Xvfb :77 -screen 0 1400x1100x24 &`, then
DISPLAY=:77) and ImageMagick's `import`. The patch talks to a stand-in daemon (the one tests/max_patches uses for
the pad, answering a kick, a kit and its map) while a small driver patch presses Generate, set-A, the pad, Kit and
audition; the root window is captured 9 s after Pd starts.

    PYTHONPATH=. DISPLAY=:77 python max_patches/render_pd_panel.py max_patches/img/pd-panel.png
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import soundfile as sf

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tests" / "max_patches"), str(HERE.parent / "tests")]
from test_pd_roundtrip import KIT, KIT_DONE, PadDaemon, build_message, osc_api  # noqa: E402

OUT_DIR = "/home/you/Music/kickserver"
DRIVER = """#N canvas 900 50 300 200 12;
#X obj 10 10 loadbang;
#X obj 10 40 delay 500;
#X msg 10 70 \\; ks-osc connect 127.0.0.1 {port} \\; ks-random 0 \\; ks-seed 5513 \\; ks-generate bang;
#X obj 10 110 delay 1200;
#X msg 10 140 \\; ks-seta bang \\; ks-map-x 0.3 \\; ks-map-y 0.7 \\; ks-layers 8 \\; ks-robins 4 \\; ks-note symbol A1 \
\\; ks-kit bang \\; ks-audition bang;
#X connect 0 0 1 0;
#X connect 1 0 2 0;
#X connect 1 0 3 0;
#X connect 3 0 4 0;
"""


class PictureDaemon(PadDaemon):
    """The pad's stand-in, answering Generate with a real WAV (so audition reads it), Kit with a folder, and the
    pad's kick with a file named as the daemon names them."""

    def __init__(self, wav: Path) -> None:
        self.wav = wav
        super().__init__("no such request")

    def answer(self, address: str, args: list) -> list[bytes]:
        if address == osc_api.GENERATE:
            return [build_message(osc_api.DONE, [("i", -1), ("s", str(self.wav)), ("i", 5513)])]
        if address == KIT:
            return [build_message(KIT_DONE, [("i", -2), ("s", f"{OUT_DIR}/kit_A1_punchy_5513"), ("i", 8), ("i", 4),
                                             ("i", 5513)])]
        if address == "/kick/near":
            pairs = dict(zip(args[2::2], args[3::2]))
            return [build_message(osc_api.DONE, [("i", int(pairs["id"])), ("s", f"{OUT_DIR}/kick_A1_short_8812.wav"),
                                                 ("i", 8812)])]
        return super().answer(address, args)


def main(out: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        wav = work / "kick_A1_punchy_5513.wav"
        t = np.arange(22050) / 44100
        sf.write(str(wav), 0.9 * np.sin(2 * np.pi * (55 * t + 40 * (1 - np.exp(-t * 30)) / 30)) * np.exp(-t * 6),
                 44100, subtype="PCM_24")
        for f in ("kickserver.pd", "kickserver-osc.pd"):
            shutil.copy2(HERE / f, work / f)
        daemon = PictureDaemon(wav)
        (work / "drive.pd").write_text(DRIVER.format(port=daemon.port))
        pd = subprocess.Popen(["pd", "-nosound", "-nomidi", "-noprefs", "-path", str(work), "-open",
                               str(work / "kickserver.pd"), "-open", str(work / "drive.pd")],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            time.sleep(9)
            subprocess.run(["import", "-window", "root", "-crop", "910x660+0+0", "+repage", str(out)], check=True)
        finally:
            pd.terminate()
            pd.wait(5)
            daemon.close()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
