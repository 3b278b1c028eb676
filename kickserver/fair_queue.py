"""Queued kicks, taken fairly: pure bookkeeping, no threads and no locks (the worker holds its own around it).

A request that would push the queue past `queue_limit` kicks, or its host's kicks past `client_limit`, is refused
(`busy`). A host is a source address: a job's client is (address, port), and every port of one address shares that
address's limit and its turn, so opening more sockets buys no larger share (four ports once filled the whole queue).
Batches start from the hosts in turn (round-robin), and within a host from its clients (ports) in turn, so one
host's backlog never starves another host's single kick: a host waits at most one batch per other host with work
queued; two programs on one machine (Max and Pd, both 127.0.0.1) share that machine's limit and take turns within it.
Queued kicks that share a batch key (kickserver.jobs: the settings for fresh kicks, the request itself for the other
kinds) are taken together, up to `max_batch` at a time, one per host per pass.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterator
from typing import Any

from .jobs import Job, Kick

# The host of every source that has not proved its return path (kickserver.ratelimit.ReturnPaths):
# forged addresses cost nothing, so all of them together take one host's turn and one host's limit, each (address,
# port) a client within it, and a proven host is never starved by many claimed ones.
UNPROVEN = "senders that have not proved their address"


class FairQueue:
    def __init__(self, queue_limit: int = 64, client_limit: int = 32) -> None:
        self.queue_limit = int(queue_limit)
        self.client_limit = int(client_limit)
        # host -> client -> its queued kicks; each dict's order is its round-robin order (the host, and the client
        # within it, served last moves to the end). A client whose queue empties is removed, and a host with no
        # client left.
        self._queues: collections.OrderedDict[Any, collections.OrderedDict[Any, collections.deque[Kick]]] = (
            collections.OrderedDict())
        self._host_waiting: dict[Any, int] = {}  # host -> its kicks in the queues
        self.waiting = 0  # kicks in all the queues

    def __len__(self) -> int:
        return self.waiting

    def add(self, job: Job) -> str | None:
        """Queue a job's kicks; None, or why it is refused ("busy: ...")."""
        if self.waiting + job.count > self.queue_limit:
            return f"busy: {self.waiting} kicks queued (limit {self.queue_limit})"
        host = job.host
        mine = self._host_waiting.get(host, 0)
        if mine + job.count > self.client_limit and host == UNPROVEN:
            return (f"busy: {mine} kicks from {UNPROVEN} queued (limit {self.client_limit} for all of them together; "
                    f"send /kick/proof, then echo its token, for your address's own share)")
        if mine + job.count > self.client_limit:
            return f"busy: {mine} kicks from your address queued (limit {self.client_limit} per address)"
        q = self._queues.setdefault(host, collections.OrderedDict()).setdefault(job.client, collections.deque())
        q.extend(job.kicks())
        self._host_waiting[host] = mine + job.count
        self.waiting += job.count
        return None

    def jobs(self) -> Iterator[Job]:
        """Every job with a kick queued, once each."""
        return iter({id(k.job): k.job for k in self._all()}.values())

    def take(self, max_batch: int, key: Callable[[Kick], tuple] = lambda k: k.job.batch_key()) -> list[Kick]:
        """Up to max_batch queued kicks sharing a key ([] when none is queued).

        The batch starts with the oldest kick of the host whose turn it is, from that host's client whose turn it
        is; both then go to the end of their rounds. It is filled with kicks of the same key taken one per host per
        pass, in round order (each from the host's next client that has one), so a batch never takes a host's whole
        backlog while another host waits with the same key, and many ports buy one host no larger share."""
        if not self._queues:
            return []
        first_host, clients = next(iter(self._queues.items()))
        first_client, q = next(iter(clients.items()))
        first = q.popleft()
        clients.move_to_end(first_client)
        want = key(first)
        batch = [first]
        progress = True
        while len(batch) < max_batch and progress:
            progress = False
            for clients in self._queues.values():
                if len(batch) >= max_batch:
                    break
                if self._take_one(clients, key, want, batch):
                    progress = True
        self._queues.move_to_end(first_host)
        for k in batch:
            host = k.job.host
            self._host_waiting[host] -= 1
            if not self._host_waiting[host]:
                del self._host_waiting[host]
        for host, clients in list(self._queues.items()):
            for client in [c for c, queue in clients.items() if not queue]:
                del clients[client]
            if not clients:
                del self._queues[host]
        self.waiting -= len(batch)
        return batch

    def drain(self) -> list[Kick]:
        """Every queued kick, in no particular order; the queue is empty after."""
        left = list(self._all())
        self._queues.clear()
        self._host_waiting.clear()
        self.waiting = 0
        return left

    def _all(self) -> Iterator[Kick]:
        return (k for clients in self._queues.values() for q in clients.values() for k in q)

    @staticmethod
    def _take_one(clients: collections.OrderedDict, key: Callable[[Kick], tuple], want: tuple,
                  batch: list[Kick]) -> bool:
        """Move the oldest kick with key `want` of the first of a host's clients (in their round order) that has one
        into batch; that client goes to the end of the host's round."""
        for client, queue in clients.items():
            for i, k in enumerate(queue):
                if key(k) == want:
                    del queue[i]
                    batch.append(k)
                    clients.move_to_end(client)
                    return True
        return False
