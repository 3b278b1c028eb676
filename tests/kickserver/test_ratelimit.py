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


def test_evicting_a_spent_bucket_never_grants_a_fresh_budget():
    """Once a victim's budget is spent, datagrams from more addresses than the table holds
    evicted its bucket, and the victim got a fresh burst. Over any stretch of time an address gets at most
    burst + rate x elapsed, however many other addresses come and go."""
    clock = Clock()
    b = ReplyBudget(rate=1000, burst=4000, max_addresses=50, clock=clock)
    got = sum(200 for _ in range(40) if b.take("10.9.9.9", 200))
    assert got == 4000
    for i in range(200):  # spoofed addresses, each drawing one small reply, at the same instant
        b.take(f"10.0.{i // 256}.{i % 256}", 40)
    assert not b.take("10.9.9.9", 200), "the spent bucket was evicted and came back full"
    t0 = clock.t
    for step in range(100):  # then, for 1 s: the victim asks, and 60 new addresses come every 10 ms
        clock.t += 0.01
        for i in range(60):
            b.take(f"10.1.{step}.{i}", 40)
        got += sum(200 for _ in range(10) if b.take("10.9.9.9", 200))
    assert got <= 4000 + 1000 * (clock.t - t0) + 200, got


def test_a_full_table_of_spent_buckets_shares_one_budget_among_new_addresses():
    """With every bucket in use and none full again, a new address gets no bucket of its own: its replies draw on
    one budget shared by all such addresses, and an address that gets its own bucket later starts no fuller than
    that shared budget (so moving in and out of the table never refills anyone)."""
    clock = Clock()
    b = ReplyBudget(rate=1000, burst=4000, max_addresses=10, clock=clock)
    assert b.take("10.0.0.9", 100)  # full again 0.1 s from now
    for i in range(9):
        assert b.take(f"10.0.0.{i}", 4000)  # nine spent buckets: none may go for 4 s
    assert b.take("10.0.1.1", 3000)  # no room: from the shared budget
    assert not b.take("10.0.1.2", 2000)  # the shared budget holds 1000 now
    assert b.tokens("10.0.0.3") == 0  # the spent ones are still there, still spent
    clock.t += 0.2  # 10.0.0.9 is full again: it may go; the shared budget holds 1200
    assert b.take("10.0.1.1", 500)  # its own bucket now, which starts with the shared 1200, not a burst
    assert not b.take("10.0.1.1", 800)
    assert "10.0.0.9" not in b._buckets and len(b._buckets) == 10
    clock.t += 4.0
    assert b.take("10.0.1.3", 4000)  # once buckets are full again, new addresses get whole bursts as before
