"""trainer.xcorr: the waveform cross-correlation that finds near-copies (scaled, shifted, inverted, a little
noisy) within the lags and nothing beyond them, and whose screened pair search finds exactly what the full
matrix finds. The thresholds are the held-out split's (trainer.split)."""

from __future__ import annotations

import numpy as np

from trainer.split import NEAR_COPY_LAG_MS, NEAR_COPY_NCC
from trainer.synth import synth_kick
from trainer.xcorr import near_copy_pairs, pairwise_max_ncc

LENGTH = 8192


def kick(seed: int, length: int = LENGTH) -> np.ndarray:
    return synth_kick(np.random.default_rng(seed), length=length, drive=0.0)


def delayed(x: np.ndarray, ms: float) -> np.ndarray:
    n = int(ms * 44100 / 1000)
    return np.concatenate([np.zeros(n, x.dtype), x[:len(x) - n]])


def test_pairwise_ncc_finds_scaled_noisy_and_shifted_copies_only_within_the_lag():
    a = synth_kick(np.random.default_rng(1), length=LENGTH, drive=0.0, decay=0.05)  # all in the first 60 ms
    rng = np.random.default_rng(0)
    shifted = delayed(a, 3.0) * 0.3
    far = delayed(a, 50.0)
    clips = np.stack([a, 0.5 * a + 0.003 * rng.standard_normal(LENGTH), -a, shifted, far, kick(2),
                      np.zeros(LENGTH)])
    ncc = pairwise_max_ncc(clips, int(NEAR_COPY_LAG_MS * 44100 / 1000))
    assert np.allclose(ncc, ncc.T)
    assert ncc[0, 1] >= NEAR_COPY_NCC and ncc[0, 2] > 0.999 and ncc[0, 3] > 0.999
    assert ncc[0, 4] < NEAR_COPY_NCC and ncc[0, 5] < NEAR_COPY_NCC
    assert ncc[0, 6] == 0.0 and ncc[6, 6] == 0.0


def test_near_copy_pairs_screen_finds_exactly_what_the_full_matrix_finds():
    rng = np.random.default_rng(3)
    base = [kick(40 + i) for i in range(12)]
    clips = base + [0.3 * base[0], -base[1], delayed(base[2], 4.0), base[3] + 0.01 * rng.standard_normal(LENGTH),
                    base[4] + 0.2 * rng.standard_normal(LENGTH), delayed(base[5], 30.0), np.zeros(LENGTH)]
    clips = np.stack(clips).astype(np.float32)
    lag = int(NEAR_COPY_LAG_MS * 44100 / 1000)
    for threshold in (NEAR_COPY_NCC, 0.9, 0.5):
        full = pairwise_max_ncc(clips, lag)
        want = {(i, j) for i in range(len(clips)) for j in range(i + 1, len(clips)) if full[i, j] >= threshold}
        got = near_copy_pairs(clips, lag, threshold, 44100)
        assert {(i, j) for i, j, _ in got} == want
        assert all(abs(v - full[i, j]) < 1e-6 for i, j, v in got)
    found = {(i, j) for i, j, _ in near_copy_pairs(clips, lag, NEAR_COPY_NCC, 44100)}
    assert found >= {(0, 12), (1, 13), (2, 14), (3, 15)}
