"""The daemon's network front end: a datagram -> a typed request (osc_api) -> a typed, resolved job (kickserver.jobs)
-> the worker; the replies, the reply budget and the refusals. What the worker emits for a job (Done, Refused,
Located, Serving) is encoded as OSC here (`encode`), never in the worker.

The receive loop parses, validates, enqueues and replies, and never waits on the model. Every reply is charged to
its source address's reply budget (kickserver.ratelimit); a malformed datagram's refusal is at most REFUSAL_GAIN
times its size; a datagram gets at most one /kick/error.
"""

from __future__ import annotations

import ipaddress
import itertools
import logging
import math
import os
import random
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kickmodel.descriptors import UNIT_CONTROLS

from . import __version__, jobs, osc_api, reload
from .config import ServerConfig
from .fair_queue import UNPROVEN
from .ratelimit import Counts, ReplyBudget, ReturnPaths
from .reload import ModelNotFound, list_models, resolve_model
from .sources import SourceError, open_source

log = logging.getLogger("kickserver")

Reply = Callable[[bytes], None]
RECV_BUFFER = 4 << 20  # ask for a large socket buffer so a burst of requests is not dropped by the kernel
# A malformed datagram's refusal (osc_api.Malformed, an empty bundle) is at most this many bytes per byte of the
# datagram, counting every copy sent (source port and reply port), or there is none: a forger draws at most this
# factor times what it sends (a 4-byte `/\0\0\0` once drew 320 bytes). 5, not less: a 16-byte message to a mistyped
# address (/kick/gen) is still told "unknown address".
REFUSAL_GAIN = 5
# /kick/models lists only what loads: the listing is built once per change of the models folder, in the loader thread
# (an artifact not checked yet, new or changed, is checked there first), never in the receive loop, which only
# checks that it is current (one stat of the folder); a reply waits for a listing being built at most MODELS_WAIT_S
# (then it lists what is checked); at most MAX_LISTING_WAITERS replies wait (beyond that, one is answered at once
# with the last listing built)
MODELS_WAIT_S = 5.0
# datagrams dropped (outside --allow, not OSC): each address's first is logged among the first DROP_LOG_FIRST of
# its kind, then every 1000th of an address, and of a flood of many addresses one line per 1000
DROP_LOG_FIRST = 1000
MAX_LISTING_WAITERS = 64


def encode(outcome: jobs.Outcome) -> bytes:
    """What the worker emitted, as the OSC reply that says it."""
    if isinstance(outcome, jobs.Done):
        return osc_api.done(outcome.id, outcome.path, osc_api.NO_SEED if outcome.seed is None else outcome.seed)
    if isinstance(outcome, jobs.Refused):
        return osc_api.error(osc_api.NO_ID if outcome.id is None else outcome.id, outcome.reason)
    if isinstance(outcome, jobs.Located):
        return osc_api.located(outcome.x, outcome.y, outcome.source)
    if isinstance(outcome, jobs.KitDone):
        return osc_api.kit_done(outcome.id, outcome.folder, outcome.layers, outcome.robins,
                                osc_api.NO_SEED if outcome.seed is None else outcome.seed)
    return osc_api.model(outcome.name)


def answering(reply: Reply) -> jobs.Answer:
    """An answer target that sends each outcome, encoded, with reply."""
    return lambda outcome: reply(encode(outcome))


def is_loopback_host(host: str) -> bool:
    if host in ("localhost", ""):
        return host == "localhost"
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def allowed(cfg: ServerConfig, ip: str) -> bool:
    """Whether a datagram from ip is served: all of them on a loopback bind, else loopback and the --allow nets."""
    if is_loopback_host(cfg.host):
        return True
    try:
        addr = ipaddress.ip_address(ip.split("%")[0])
    except ValueError:
        return False
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    if addr.is_loopback:
        return True
    return any(addr in net for net in cfg.allow_networks if addr.version == net.version)


class FrontEnd:
    """The UDP socket, the receive loop and the replies. `house` is the daemon (its cfg, worker, loader and
    catalog, read as they are now: SIGHUP replaces the cfg)."""

    def __init__(self, house: Any) -> None:
        self.house = house
        self.sock: socket.socket | None = None
        self.receiving = threading.Event()
        cfg = house.cfg
        self.budget = ReplyBudget(cfg.reply_rate_kb * 1024, cfg.reply_burst_kb * 1024)
        self.routes = Routes(self)
        self._dropped = Counts()  # senders outside --allow (bounded)
        self.paths = ReturnPaths()  # addresses that proved their return path
        self._junk = Counts()  # senders of datagrams that are not OSC

    @property
    def cfg(self) -> ServerConfig:
        return self.house.cfg

    def bind(self) -> None:
        cfg = self.cfg
        info = socket.getaddrinfo(cfg.host, cfg.port, type=socket.SOCK_DGRAM)
        family, _, _, _, addr = info[0]
        s = socket.socket(family, socket.SOCK_DGRAM)
        try:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECV_BUFFER)
        except OSError:
            pass
        s.bind(addr)
        s.settimeout(0.2)
        self.sock = s

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def trusted(self, ip: str) -> bool:
        """Whether ip gets its own reply budget and queue share and the kit map: it proved its return path
        (ReturnPaths), or return_proof does not ask it to (`network`: loopback need not; `off`: none need)."""
        mode = self.cfg.return_proof
        if mode == "off" or (mode == "network" and is_loopback_host(ip.split("%")[0])):
            return True
        return self.paths.proven(ip)

    def replier(self, addr: tuple, *, work: bool = False, paid: bool = False, token: bool = False) -> Reply:
        """Replies to a request from addr: to its source port and to the reply port at its IP.

        Every reply is charged to the IP's reply budget (ratelimit.py): an immediate one is dropped when the
        budget cannot pay for it; one answering accepted work (work=True: a kick, a model load) always goes;
        paid=True: the caller has charged the budget already (a reply of several datagrams, all or none);
        token=True: a token for a return-path proof (a few times its request at most), charged to the address's
        budget only, so a flood of unproven senders that spends their pooled budget cannot keep others from proving."""
        targets = [addr]
        if addr[1] != self.cfg.reply_port:
            targets.append((addr[0], self.cfg.reply_port) + tuple(addr[2:]))
        sock, budget, ip = self.sock, self.budget, addr[0]
        pooled = not work and not paid and not token and not self.trusted(ip)

        def reply(data: bytes) -> None:
            n = len(data) * len(targets)
            if paid:
                pass
            elif work:
                budget.charge(ip, n)
            elif not budget.take(ip, n, pooled=pooled):
                dropped = budget.dropped.get(ip, 0)
                if dropped == 1 or dropped % 1000 == 0:
                    log.warning("dropped %d repl%s to %s: over its reply budget (%g KB/s, bursts of %g KB)", dropped,
                                "y" if dropped == 1 else "ies", ip, budget.rate / 1024, budget.burst / 1024)
                return
            for t in targets:
                try:
                    sock.sendto(data, t)
                except OSError as e:
                    log.debug("reply to %s failed: %s", t, e)

        return reply

    def receive_loop(self) -> None:
        assert self.sock is not None
        while self.receiving.is_set():
            try:
                data, addr = self.sock.recvfrom(65535)
            except TimeoutError:
                continue
            except OSError as e:  # e.g. ICMP port unreachable from an earlier reply
                if not self.receiving.is_set():
                    break
                log.debug("receive: %s", e)
                continue
            if not allowed(self.cfg, addr[0]):
                n = self._dropped.add(addr[0])
                total = self._dropped.total
                if (n == 1 and total <= DROP_LOG_FIRST) or n % 1000 == 0:
                    log.warning("dropped %d datagram(s) from %s: not in --allow", n, addr[0])
                elif total % 1000 == 0:
                    log.warning("dropped %d datagrams from outside --allow so far (%d addresses remembered, at most "
                                "%d; the latest %s)", total, len(self._dropped), self._dropped.limit, addr[0])
                continue
            try:
                self._handle_datagram(data, addr)
            except Exception as e:  # noqa: BLE001 - a handler never takes the server down
                log.error("request from %s failed: %s: %s", addr[0], type(e).__name__, e,
                          exc_info=log.isEnabledFor(logging.DEBUG))
                self.replier(addr)(osc_api.error(osc_api.NO_ID, f"internal error: {type(e).__name__}"))

    def _handle_datagram(self, data: bytes, addr: tuple) -> None:
        """One datagram: no reply at all unless it is OSC; at most one /kick/error for it (a bundle's messages
        are answered one by one, but only its first refusal is); none for a bundle's elements that are not OSC."""
        try:
            dg = osc_api.split_datagram(data)
        except osc_api.NotOSC as e:
            n = self._junk.add(addr[0])
            if (n == 1 and self._junk.total <= DROP_LOG_FIRST) or n % 1000 == 0:
                log.warning("ignored %d datagram(s) from %s that are not OSC (%s, %d bytes); not answered", n,
                            addr[0], e, len(data))
            return
        copies = 1 if addr[1] == self.cfg.reply_port else 2  # as replier sends them
        reply = OneError(self.replier(addr), limit=REFUSAL_GAIN * len(data) // copies)
        if dg.dropped:
            total = len(dg.messages) + dg.dropped
            log.info("refused a bundle of %d messages from %s", total, addr[0])
            reply(osc_api.error(osc_api.NO_ID, f"a bundle may hold at most {osc_api.MAX_BUNDLE_MESSAGES} "
                                               f"messages; this one holds {total}, none was run"))
            return
        if dg.junk:
            log.info("ignored %d element(s) of a bundle from %s that are not OSC", dg.junk, addr[0])
        if dg.bundle and not dg.messages:
            if not dg.junk:
                reply.refuse(osc_api.Malformed("an empty bundle: nothing to do", ("empty bundle",)))
            return
        for raw in dg.messages:
            try:
                address, params = osc_api.decode_message(raw)
            except osc_api.RequestError as e:
                log.info("refused a message from %s: %s", addr[0], e.reason)
                reply.refuse(e)
                continue
            try:
                osc_api.dispatch(self.routes, address, params, self.limits(), addr, reply)  # ROUTES: the handler
            except osc_api.RequestError as e:
                log.info("refused %s: %s", osc_api.clip(str(address), 60), e.reason)
                reply.refuse(e)

    def limits(self) -> osc_api.Limits:
        """What a request may ask of the serving model and this server now."""
        gen = self.house.worker.gen
        # a one-pass model takes any steps and sampler and ignores them (clients may send them to any model)
        samplers = tuple(gen.samplers) or None
        max_steps = min(self.cfg.max_steps, gen.max_steps) if gen.samplers else self.cfg.max_steps
        # controls in units (pitch_hz ...) that this model takes, with their ranges; the others are refused by name
        units = tuple(osc_api.UnitControl(u, *gen.unit_range(u)) for u in gen.unit_controls)  # this model's ranges
        return osc_api.Limits(controls=tuple(gen.controls), samplers=samplers, max_steps=max_steps, units=units,
                              other_units=tuple(u for u in UNIT_CONTROLS if u not in gen.unit_controls))


class OneError:
    """A reply function that lets through at most one /kick/error (a datagram's one refusal); others pass.

    `refuse` answers a refusal: a malformed one (osc_api.Malformed) in at most `limit` bytes, the datagram's
    REFUSAL_GAIN share, shortening its reason to fit or sending nothing."""

    def __init__(self, reply: Reply, limit: int | None = None) -> None:
        self._reply = reply
        self._errors = 0
        self.limit = limit

    def refuse(self, e: osc_api.RequestError) -> None:
        if isinstance(e, osc_api.Malformed) and self.limit is not None:
            data = osc_api.refusal(e, self.limit)
            if data is None:
                log.debug("not answered: its refusal would be over %d bytes a copy", self.limit)
                return
        else:
            data = osc_api.error(e.id, e.reason)
        self(data)

    def __call__(self, data: bytes) -> None:
        if data.startswith(ERROR_PREFIX):
            self._errors += 1
            if self._errors > 1:
                return
        self._reply(data)


ERROR_PREFIX = osc_api.ERROR.encode() + b"\0"


class Routes:
    """The handler of each route (osc_api.Handlers): a request answered at once, or made into a job, resolved
    once against the serving model and queued. A handler never raises past a refusal (osc_api.RequestError)."""

    def __init__(self, front: FrontEnd) -> None:
        self.front = front
        self.house = front.house
        self._ids = itertools.count(0)  # server-assigned ids: -2, -3, ... (see _next_id)
        self._refused = 0
        self._rng = random.Random()
        self._listings: list[tuple[float, Reply]] = []  # /kick/models replies waiting for checks
        self._listings_lock = threading.Lock()
        # the /kick/models reply built last: (reload.generation, the folder's path and signature, its names, the reply)
        self._listing: tuple[int, tuple, list[str], bytes] | None = None
        self._map: tuple[Any, list[bytes], int] | None = None  # the map encoded last: (its KitMap, datagrams, bytes)

    def ping(self, req: osc_api.Ping, addr: tuple, reply: Reply) -> None:
        reply(osc_api.pong(__version__))

    def status(self, req: osc_api.Status, addr: tuple, reply: Reply) -> None:
        w = self.house.worker
        reply(osc_api.status(w.model_name, w.device, w.queued, w.generated, self.house.catalog.why, w.resident()))

    def models(self, req: osc_api.Models, addr: tuple, reply: Reply) -> None:
        """What loads, from the listing built once per change of the models folder (built here for
        each request it cost 0.88 s with 1,000 models, quadratic in them): here only one stat of the folder checks
        that it is current. A stale one is built again in the loader thread (new or changed artifacts checked
        first), and the reply waits for it (see MODELS_WAIT_S)."""
        data = self._listing_now()
        if data is not None:
            reply(data)
            return
        with self._listings_lock:
            waits = len(self._listings) < MAX_LISTING_WAITERS
            if waits:
                self._listings.append((time.monotonic(), reply))
        if waits:
            self.house.loader.call_soon(self._relist)
        elif self._listing is not None:
            reply(self._listing[3])

    def _listing_now(self) -> bytes | None:
        """The last listing if nothing changed since it was built (no verdict, no watcher event, the same folder
        entries), else None."""
        cached = self._listing
        if cached is None or cached[0] != reload.generation[0]:
            return None
        return cached[3] if cached[1] == _folder_sig(self.house.cfg.models_dir) else None

    def listed_names(self) -> list[str] | None:
        """The names of the last listing built, current or not (for refusals that name them), None before any."""
        cached = self._listing
        return None if cached is None else list(cached[2])

    def _relist(self) -> None:
        """In the loader thread: queue the checks of artifacts not checked since they changed, then build the listing
        (at once when there is none; else the loader calls answer_listings once they are done)."""
        unchecked: list[Path] = []

        def later(path: Path) -> None:
            unchecked.append(path)
            self.house.loader.check_later(path)

        list_models(self.house.cfg.models_dir, check_later=later)
        if not unchecked:
            self.answer_listings()

    def answer_listings(self, before: float | None = None) -> None:
        """Build the listing of what is checked and answer the /kick/models replies waiting (those that began before
        `before`, when given: the main loop's call for those that waited MODELS_WAIT_S, which builds nothing when
        none waits). The loader thread calls it once no check is left, and keeps the listing when every artifact was
        checked (else it asks for the checks, and is called again once they are done)."""
        with self._listings_lock:
            go = [r for t, r in self._listings if before is None or t < before]
            self._listings = [(t, r) for t, r in self._listings if before is not None and t >= before]
        if not go and before is not None:
            return
        models_dir = self.house.cfg.models_dir
        gen, sig = reload.generation[0], _folder_sig(models_dir)
        unchecked: list[Path] = []
        try:
            names = list_models(models_dir, check_later=unchecked.append)
            data = osc_api.models(names)
        except Exception as e:  # noqa: BLE001 - called from the main loop and the loader thread: never raise there
            log.error("cannot list the models (%s: %s)", type(e).__name__, e)
            data = osc_api.error(osc_api.NO_ID, "cannot list the models; see the daemon's log")
        else:
            if before is None and not unchecked:
                self._listing = (gen, sig, names, data)
            elif before is None:
                for p in unchecked:
                    self.house.loader.check_later(p)
        for reply in go:
            reply(data)

    def controls(self, req: osc_api.Controls, addr: tuple, reply: Reply) -> None:
        gen = self.house.worker.gen
        if req.ranges:  # `/kick/controls ranges`: each control's range, its own reply (osc_api.ranges)
            return reply(osc_api.ranges(self.front.limits()))
        # the dials, then the units, then whether it has a kit map
        reply(osc_api.controls(tuple(gen.controls) + tuple(gen.unit_controls), gen.kit_map is not None))

    def _no_map(self) -> str | None:
        """Why the serving model has no kit map, naming it; None when it has one."""
        gen, name = self.house.worker.gen, self.house.worker.model_name
        if gen.kit_map is not None:
            return None
        why = gen.kit_map_missing or "it stores none"
        return why if f"model {name} " in why else f"model {name} has no kit map: {why}"

    def kit_map(self, req: osc_api.KitMap, addr: tuple, reply: Reply) -> None:
        """The serving model's map: its points in parts, then the axes' labels, all or none: the datagrams are
        charged to the address's reply budget together, so a client never gets half a map (a map over the budget is
        refused saying how large it is and what to change)."""
        missing = self._no_map()
        km = self.house.worker.gen.kit_map
        if missing is not None or km is None:
            reply(osc_api.error(osc_api.NO_ID, missing or "no kit map"))
            return
        if not self.front.trusted(addr[0]):  # hundreds of times its request: only to a proven return path
            self.front.replier(addr, token=True)(osc_api.map_proof(self.front.paths.token(addr[0])))
            return
        datagrams, size = self._map_datagrams(km)
        copies = 1 if addr[1] == self.house.cfg.reply_port else 2  # as replier sends them
        total = size * copies
        budget = self.front.budget
        if not budget.take(addr[0], total):
            kb, burst = total / 1024, budget.burst / 1024
            wait = (total - max(0.0, budget.tokens(addr[0]))) / max(1.0, budget.rate)
            fix = (f"raise reply_burst_kb in the config to at least {math.ceil(kb)}" if total > budget.burst
                   else f"ask again in {math.ceil(wait)} s")
            log.info("refused /kick/map from %s: %.0f KB is over its reply budget", addr[0], kb)
            reply(osc_api.error(osc_api.NO_ID, f"the kit map is {kb:.1f} KB of replies ({len(datagrams)} datagrams "
                                               f"x {copies}), more than your address's reply budget holds now "
                                               f"({burst:g} KB at most); {fix}"))
            return
        send = self.front.replier(addr, paid=True)
        for data in datagrams:
            send(data)

    def _map_datagrams(self, km: Any) -> tuple[list[bytes], int]:
        """The map's datagrams and their size, encoded once per map (encoded for every request,
        refused or not, a 4,096-kick map cost the receive loop 28-60 ms a 16-byte request)."""
        cached = self._map
        if cached is None or cached[0] is not km:
            datagrams = osc_api.kit_map(km.points, km.names) + [osc_api.map_axes(km.axes, km.n)]
            cached = self._map = (km, datagrams, sum(len(d) for d in datagrams))
        return cached[1], cached[2]

    def proof(self, req: osc_api.Proof, addr: tuple, reply: Reply) -> None:
        """`/kick/proof`: the address's token; `/kick/proof <token>`: the return path proved (no reply), or refused."""
        paths = self.front.paths
        if req.token is None:
            self.front.replier(addr, token=True)(osc_api.proof(paths.token(addr[0])))
        elif paths.prove(addr[0], req.token):
            log.debug("%s proved its return path (%d proven)", addr[0], len(paths))
        else:
            reply(osc_api.error(osc_api.NO_ID, "wrong token: send /kick/proof for yours"))

    def _client(self, addr: tuple) -> tuple:
        """Whose queue a job joins: (address, port), within the address's share; for an address that has not proved
        its return path, a client of the one host all such addresses share (fair_queue.UNPROVEN)."""
        return addr[:2] if self.front.trusted(addr[0]) else (UNPROVEN, addr[:2])

    def select_model(self, req: osc_api.SelectModel, addr: tuple, reply: Reply) -> None:
        w, loader = self.house.worker, self.house.loader
        try:
            # no stand-in: a name that is not there is refused, naming those that are, and the served one stays
            path, name = resolve_model(self.house.cfg.models_dir, req.name, fall_back=False,
                                       check_later=loader.check_later, available=self.listed_names)
        except ModelNotFound as e:
            reply(osc_api.error(osc_api.NO_ID, str(e)))
            return
        if name == w.model_name and path == self.house.catalog.path:
            self.house.catalog.choose(loader, name)  # chosen now: it holds until the next choice
            reply(osc_api.model(name))
        else:
            log.info("loading model %s on request", name)
            loader.request(path, name, answering(self.front.replier(addr, work=True)))

    # ------------------------------------------------------------ requests that become jobs
    def generate(self, req: osc_api.Generate, addr: tuple, reply: Reply) -> None:
        self._enqueue(req, addr, reply, jobs.Fresh)

    def variation(self, req: osc_api.Variation, addr: tuple, reply: Reply) -> None:
        named = _named(req)
        try:
            source = jobs.Opened(open_source(req.source, self.house.cfg.out_dir, self.house.cfg.read_root_dirs))
        except SourceError as e:
            log.info("refused variation %d: %s", named, e)
            reply(osc_api.error(named, str(e)))
            return
        self._enqueue(req, addr, reply, jobs.Variation, source=source, strength=req.strength)

    def kit(self, req: osc_api.Kit, addr: tuple, reply: Reply) -> None:
        """/kick/kit: one kick made a kit (jobs.Kit), queued as its layers x robins hits; a source as a variation's."""
        try:
            cfg = self.house.cfg
            source = jobs.Opened(open_source(req.source, cfg.out_dir, cfg.read_root_dirs)) if req.source else None
        except SourceError as e:
            reply(osc_api.error(_named(req), str(e)))
            return
        req.count = req.layers * req.robins
        self._enqueue(req, addr, reply, jobs.Kit, source=source, strength=req.strength, layers=req.layers,
                      robins=req.robins, pitch_hz=req.pitch_hz, key=req.key)

    def near(self, req: osc_api.Near, addr: tuple, reply: Reply) -> None:
        """Kicks from a point of the map, queued as /kick/generate's are (limits, batching, shutdown). The dials are
        taken and ignored: a kick from the map is the map's latent decoded as it is (kickmodel.generator.map_latents);
        controls in units stay, for a family that sets them on the decoded kick (kick synth)."""
        missing = self._no_map()
        if missing is not None:
            log.info("refused near %d: %s", _named(req), missing)
            reply(osc_api.error(_named(req), missing))
            return
        units = self.house.worker.gen.unit_controls
        self._enqueue(req, addr, reply, jobs.Near, point=jobs.MapPoint(req.x, req.y, req.spread),
                      controls={k: v for k, v in req.controls.items() if k in units})  # dials: ignored

    def _enqueue(self, req: osc_api.Generate, addr: tuple, reply: Reply, kind: type[jobs.KickJob],
                 **fields: Any) -> None:
        base = req.seed if req.seed is not None else osc_api.pick_seed(self._rng, req.count)
        job = kind(id=self._id(req), seeds=[base + i for i in range(req.count)], client=self._client(addr),
                   answer=answering(self.front.replier(addr, work=True)), steps=req.steps, sampler=req.sampler,
                   **{"controls": dict(req.controls), **fields})
        self._resolve(job)
        self._submit(job, _named(req), reply)

    def interpolate(self, req: osc_api.Interpolate, addr: tuple, reply: Reply) -> None:
        """Queue a morph: each end that names a file is opened and checked here, once (as a variation's source;
        decoded later by the worker). A sampler the model cannot morph with is refused at once."""
        named = _named(req)
        job = jobs.Morph(id=named, seeds=[req.reply_seed(i) for i in range(req.count)], client=self._client(addr),
                         answer=answering(self.front.replier(addr, work=True)), steps=req.steps,
                         sampler=req.sampler, controls=dict(req.controls), ts=list(req.ts))
        self._resolve(job)
        sampler = job.settings.sampler
        usable = tuple(self.house.worker.gen.interpolation_samplers)  # diffusion families: those that can morph
        if sampler is not None and usable and sampler not in usable:
            log.info("refused interpolation %d: sampler %s", named, sampler)
            reply(osc_api.error(named, f"interpolation needs a deterministic sampler ({' or '.join(usable)}), "
                                       f"not {sampler}"))
            return
        ends: list[jobs.End] = []
        for key, end in (("a", req.a), ("b", req.b)):
            if isinstance(end, int):
                ends.append(jobs.End(seed=end))
                continue
            try:
                cfg = self.house.cfg
                ends.append(jobs.End(file=jobs.Opened(open_source(end, cfg.out_dir, cfg.read_root_dirs))))
            except SourceError as e:
                for opened in ends:
                    if opened.file is not None:
                        opened.file.close()
                log.info("refused interpolation %d: %s: %s", named, key, e)
                reply(osc_api.error(named, f"{key}: {e}"))
                return
        job.ends, job.id = (ends[0], ends[1]), self._id(req)
        self._submit(job, named, reply)

    def locate(self, req: osc_api.Locate, addr: tuple, reply: Reply) -> None:
        """Where a file's kick lies on the map: the file opened and checked here (as a variation's source), decoded,
        encoded and placed by the worker, which owns the model; queued as one kick."""
        missing = self._no_map()
        if missing is not None:
            reply(osc_api.error(osc_api.NO_ID, missing))
            return
        try:
            source = open_source(req.source, self.house.cfg.out_dir, self.house.cfg.read_root_dirs)
        except SourceError as e:
            log.info("refused locate: %s", e)
            reply(osc_api.error(osc_api.NO_ID, str(e)))
            return
        job = jobs.Locate(id=osc_api.NO_ID, seeds=[osc_api.NO_SEED], client=self._client(addr),
                          source=jobs.Opened(source),
                          answer=answering(self.front.replier(addr, work=True)), name=req.source)
        self._submit(job, osc_api.NO_ID, reply)

    def _resolve(self, job: jobs.Job) -> None:
        """The job's settings, once, against the serving model and the server's steps policy."""
        job.resolve(self.house.worker.gen, self.house.worker.policy)

    def _id(self, req: osc_api.Generate | osc_api.Interpolate) -> int:
        """The request's id, else a server-assigned one: -2, -3, ... down to int32's minimum, then -2 again.
        Clients choose ids >= 0 and -1 means "no id", so the two can never be mistaken for each other."""
        return req.id if req.id is not None else -2 - next(self._ids) % (2**31 - 1)

    def _submit(self, job: jobs.Job, named: int, reply: Reply) -> None:
        """Queue a job; a refusal (busy, shutting down) carries the id its request named (else -1), not the
        server-assigned one: those are for kicks actually queued."""
        refused = self.house.worker.submit(job)
        if refused is not None:
            job.close()
            self._refused += 1
            if not refused.startswith("busy") or self._refused % 100 == 1:
                log.info("refused request %d: %s (%d refused so far)", named, refused, self._refused)
            reply(osc_api.error(named, refused))


def _folder_sig(folder: Path) -> tuple:
    """What changes when a file is added to, removed from or renamed in folder (its path, inode and mtime)."""
    try:
        st = os.stat(folder)
    except OSError:
        return (str(folder), None)
    return (str(folder), st.st_dev, st.st_ino, st.st_mtime_ns)


def _named(req: osc_api.Generate | osc_api.Interpolate) -> int:
    """What a refusal of the request carries: its id, else -1 (README: one rule)."""
    return req.id if req.id is not None else osc_api.NO_ID
