"""The pictures' axes: a spectrogram grid has a time axis (ms) under its bottom row."""

from __future__ import annotations

import numpy as np


def test_spectrogram_grid_has_ms_ticks_on_the_bottom_row_only(tmp_path):
    from trainer.plots import spectrogram_figure, spectrogram_grid

    sr = 44100
    clips = np.random.default_rng(0).normal(scale=0.1, size=(3, sr // 2)).astype(np.float32)
    fig = spectrogram_figure([("real", clips), ("model", clips[:2])], sr, cols=4)
    fig.canvas.draw()
    axes = np.array(fig.axes[: 4 * 4]).reshape(4, 4)  # rows: waveform, spectrogram, waveform, spectrogram
    bottom = axes[3, 0]
    labels = [t.get_text() for t in bottom.get_xticklabels() if t.get_text()]
    assert len(labels) >= 3 and all(s.replace("\u2212", "-").lstrip("-").isdigit() for s in labels), labels
    assert "ms" in bottom.get_xlabel()
    assert max(float(s) for s in labels) <= 500  # ms of a 0.5 s clip, not seconds or samples
    for ax in axes[:3].ravel():  # the rows above share the axis: no labels of their own
        assert not [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    assert spectrogram_grid([("real", clips)], sr, tmp_path / "g.png").read_bytes()[:4] == b"\x89PNG"
