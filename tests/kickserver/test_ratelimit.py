"""The reply budget alone, with a fake clock."""

from __future__ import annotations

from kickserver.ratelimit import ReplyBudget


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def test_a_burst_then_the_rate():
    clock = Clock()
    b = ReplyBudget(rate=1000, burst=4000, clock=clock)
    assert [b.take("10.0.0.1", 1000) for _ in range(5)] == [True] * 4 + [False]
    assert b.dropped == {"10.0.0.1": 1}
    assert b.take("10.0.0.2", 1000)  # another address has its own bucket
    clock.t += 0.5
    assert not b.take("10.0.0.1", 1000)  # 500 bytes refilled: not enough
    clock.t += 0.5
    assert b.take("10.0.0.1", 1000)
    clock.t += 3600
    assert b.tokens("10.0.0.1") == 4000  # never above the burst


def test_work_replies_are_charged_but_never_refused():
    clock = Clock()
    b = ReplyBudget(rate=1000, burst=4000, clock=clock)
    for _ in range(10):
        b.charge("10.0.0.1", 1000)  # the caller sends these whatever the bucket holds
    assert b.tokens("10.0.0.1") == -4000  # at most one burst of debt
    assert not b.take("10.0.0.1", 10)  # immediate replies wait until the debt is paid off
    clock.t += 4.0
    assert not b.take("10.0.0.1", 10)
    clock.t += 0.1
    assert b.take("10.0.0.1", 10)


def test_forged_sources_cannot_grow_the_table_without_bound():
    b = ReplyBudget(rate=1, burst=100, max_addresses=50)
    for i in range(1000):
        b.take(f"10.0.{i // 256}.{i % 256}", 200)
    assert len(b._buckets) == 50 and len(b.dropped) <= 51
