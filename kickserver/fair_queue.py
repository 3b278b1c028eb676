"""Queued kicks, taken fairly: pure bookkeeping, no threads and no locks (the worker holds its own around it).

Work is counted in kicks: a job costs its price (`Job.price`, set by the worker from what the serving model was
measured to take: kickserver.pricing), one per kick it renders plus what encoding its source files costs (a
kick-synth fit: tens of kicks' worth), not one per request slot. A request that would push the queue past
`queue_limit` kicks' worth, or its host's past `client_limit`, is refused (`busy`), with one exception: a job whose
kicks alone are within the limit but whose price is not (a fit) is taken when nothing is queued there (the queue,
its host), so a locate is never refused for good, and a host holds one such job at a time. A job that costs nothing
beyond its kicks is refused past the limits exactly as before.

A host is a source address: a job's client is (address, port), and every port of one address shares that
address's limit and its turn, so opening more sockets buys no larger share (four ports once filled the whole queue).
Batches start from the host that has had the least work so far (start-time fair queueing: each host's `spent`
counts the kicks' worth taken from it; a host that starts queueing joins at the current batch's start, `_vtime`,
so it neither owes for its idle time nor saves it up), the round-robin order breaking ties; within a host, its
clients (ports) take turns. So one host's backlog never starves another host's single kick (a host waits at most
one batch per other host with work queued), and a host that took an expensive job (a fit priced 40 kicks) waits
until the others have had as much. Queued kicks that share a batch key (kickserver.jobs: the settings for fresh
kicks, the request itself for the other kinds) are taken together, up to `max_batch` at a time, one per host per
pass.
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
MAX_REMEMBERED = 4096  # hosts with no work queued whose spent work is remembered (beyond: forgotten, oldest first)


class FairQueue:
    def __init__(self, queue_limit: int = 64, client_limit: int = 32) -> None:
        self.queue_limit = int(queue_limit)
        self.client_limit = int(client_limit)
        # host -> client -> its queued kicks; each dict's order is its round-robin order (the host, and the client
        # within it, served last moves to the end). A client whose queue empties is removed, and a host with no
        # client left.
        self._queues: collections.OrderedDict[Any, collections.OrderedDict[Any, collections.deque[Kick]]] = (
            collections.OrderedDict())
        self._host_units: dict[Any, int] = {}  # host -> the kicks' worth it has queued (its kicks' prices)
        self.units = 0  # the kicks' worth queued in all
        self.waiting = 0  # kicks in all the queues
        # host -> the kicks' worth taken from it (its start tag); kept for a host with nothing queued while it is
        # ahead of the current batch's start (_vtime), so an expensive job still counts when it asks again
        self._spent: collections.OrderedDict[Any, int] = collections.OrderedDict()
        self._vtime = 0  # the start tag of the batch taken last

    def __len__(self) -> int:
        return self.waiting

    def add(self, job: Job) -> str | None:
        """Queue a job's kicks at its price; None, or why it is refused ("busy: ...")."""
        price = job.cost
        alone = job.count  # what it would count were its work only its kicks: within the limit, it may go alone
        if self.units + price > self.queue_limit and not (self.units == 0 and alone <= self.queue_limit):
            why = self._why(job, self.queue_limit, "nothing is queued")
            return f"busy: {self._worth(self.units, self.waiting)} queued (limit {self.queue_limit}{why})"
        host = job.host
        mine = self._host_units.get(host, 0)
        if mine + price > self.client_limit and not (mine == 0 and alone <= self.client_limit):
            kicks = sum(len(q) for q in self._queues.get(host, {}).values())
            if host == UNPROVEN:
                why = self._why(job, self.client_limit, "nothing of theirs is queued")
                return (f"busy: {self._worth(mine, kicks)} from {UNPROVEN} queued (limit {self.client_limit} for all "
                        f"of them together{why}; send /kick/proof, then echo its token, for your address's own "
                        "share)")
            why = self._why(job, self.client_limit, "nothing of your address is queued")
            return (f"busy: {self._worth(mine, kicks)} from your address queued (limit {self.client_limit} per "
                    f"address{why})")
        if host not in self._queues:  # it starts queueing: at the current batch's start, or later if it is ahead
            self._spent[host] = max(self._spent.pop(host, self._vtime), self._vtime)
        q = self._queues.setdefault(host, collections.OrderedDict()).setdefault(job.client, collections.deque())
        q.extend(job.priced_kicks())
        self._host_units[host] = mine + price
        self.units += price
        self.waiting += job.count
        return None

    @staticmethod
    def _worth(units: int, kicks: int) -> str:
        if units == kicks:
            return f"{units} kicks"
        return f"{units} kicks' worth of work ({kicks} requested kick{'' if kicks == 1 else 's'})"

    @staticmethod
    def _why(job: Job, limit: int, when: str) -> str:
        """What a refusal adds for a job that costs more than its kicks: its price, why, and when it is taken."""
        if job.cost == job.count:
            return ""
        then = (f"it is taken once {when}" if job.count <= limit else
                f"its {job.count} kicks alone are past the limit: ask for fewer")
        return f"; this request costs {job.cost} kicks' worth: {job.price_note}; {then}"

    def jobs(self) -> Iterator[Job]:
        """Every job with a kick queued, once each."""
        return iter({id(k.job): k.job for k in self._all()}.values())

    def take(self, max_batch: int, key: Callable[[Kick], tuple] = lambda k: k.job.batch_key()) -> list[Kick]:
        """Up to max_batch queued kicks sharing a key ([] when none is queued).

        The batch starts with the oldest kick of the host that has had the least work (ties: the round order),
        from that host's client whose turn it is; both then go to the end of their rounds. It is filled with kicks
        of the same key taken one per host per pass, in round order (each from the host's next client that has one),
        so a batch never takes a host's whole backlog while another host waits with the same key, and many ports
        buy one host no larger share. Each host is charged the prices of its kicks taken."""
        if not self._queues:
            return []
        first_host = min(self._queues, key=self._spent.__getitem__)  # the first of the least, in round order
        self._vtime = self._spent[first_host]
        clients = self._queues[first_host]
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
            self._spent[host] += k.price
            self._host_units[host] -= k.price
            self.units -= k.price
            if not self._host_units[host]:
                del self._host_units[host]
        for host, clients in list(self._queues.items()):
            for client in [c for c, queue in clients.items() if not queue]:
                del clients[client]
            if not clients:
                del self._queues[host]
        self._forget()
        self.waiting -= len(batch)
        return batch

    def _forget(self) -> None:
        """Drop what is spent by hosts with nothing queued that are no longer ahead (they join at _vtime anyway),
        and the oldest beyond MAX_REMEMBERED."""
        idle = [h for h, s in self._spent.items() if h not in self._queues and s <= self._vtime]
        for h in idle:
            del self._spent[h]
        extra = len(self._spent) - len(self._queues) - MAX_REMEMBERED
        for h in [h for h in self._spent if h not in self._queues][:max(0, extra)]:
            del self._spent[h]

    def drain(self) -> list[Kick]:
        """Every queued kick, in no particular order; the queue is empty after."""
        left = list(self._all())
        self._queues.clear()
        self._host_units.clear()
        self._spent.clear()
        self.units = self.waiting = 0
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
