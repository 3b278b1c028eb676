"""The one OSC client of the daemon: `kickserver send`, the bench and the tests talk to it through this module.

    from kickserver.client import Client
    c = Client("127.0.0.1", 9000)
    c.send("/kick/generate", 4, "decay", 0.8, expect=4)     # [("/kick/done", [id, path, seed]), ...]
    with c.open() as conv:                                  # one socket: send, then read as replies come
        conv.send(build_message("/kick/status", []))
        for address, args in conv.receive(timeout=2.0): ...

Arguments are typed the python-osc way (int -> i, float -> f, str -> s, bool -> T/F, None -> N); a tuple
`(tag, value)` forces a type tag, e.g. `("d", 0.5)` or `("h", 2**40)`. Every wait has a timeout: nothing here
blocks for ever. Replies are (address, [args]); a datagram that is not OSC reads as ("<not OSC>", [its bytes]).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterable
from typing import Any

from pythonosc.osc_message_builder import OscMessageBuilder
from pythonosc.osc_packet import OscPacket, ParseError

Reply = tuple[str, list]
NOT_OSC = "<not OSC>"
PROOF, MAP_PROOF = "/kick/proof", "/kick/map/proof"  # kickserver.osc_api's (not imported: the client stays light)
RECV_BUFFER = 1 << 20  # room for a burst of replies (a kit map is dozens of datagrams)


def build_message(address: str, args: Iterable[Any]) -> bytes:
    """One OSC message; plain args auto-typed, (tag, value) tuples typed explicitly."""
    b = OscMessageBuilder(address=address)
    for a in args:
        if isinstance(a, tuple) and len(a) == 2 and isinstance(a[0], str) and len(a[0]) == 1:
            b.add_arg(a[1], a[0])
        else:
            b.add_arg(a)
    return b.build().dgram


def parse_replies(data: bytes) -> list[Reply]:
    """Messages in one datagram (a message or a bundle) as (address, [args]); ("<not OSC>", [data]) otherwise."""
    try:
        packet = OscPacket(data)
    except ParseError:
        return [(NOT_OSC, [data])]
    return [(m.message.address, list(m.message.params)) for m in packet.messages]


def receive(sock: socket.socket, expect: int, timeout: float) -> list[Reply]:
    """Read replies from sock until `expect` arrived or `timeout` seconds passed."""
    out: list[Reply] = []
    deadline = time.monotonic() + timeout
    while len(out) < expect:
        got = receive_datagram(sock, deadline - time.monotonic())
        if got is None:
            break
        out.extend(parse_replies(got))
    return out


def receive_datagram(sock: socket.socket, timeout: float, *, refused_raises: bool = False) -> bytes | None:
    """The next datagram on sock within timeout seconds, else None. An ICMP "port unreachable" from an earlier
    send is skipped, or raised as ConnectionRefusedError with refused_raises (nothing listens there)."""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        sock.settimeout(left)
        try:
            data, _ = sock.recvfrom(65536)
        except TimeoutError:
            return None
        except ConnectionRefusedError:
            if refused_raises:
                raise
            continue
        return data


class Conversation:
    """One client socket: send datagrams to the daemon and read what comes back to that socket."""

    def __init__(self, sock: socket.socket, addr: tuple) -> None:
        self.sock = sock
        self.addr = addr

    def send(self, data: bytes) -> None:
        self.sock.sendto(data, self.addr)

    def send_message(self, address: str, *args: Any) -> None:
        self.send(build_message(address, args))

    def datagram(self, timeout: float, *, refused_raises: bool = False) -> bytes | None:
        """The next reply datagram as it came (None after timeout seconds)."""
        return receive_datagram(self.sock, timeout, refused_raises=refused_raises)

    def receive(self, expect: int = 1, timeout: float = 10.0) -> list[Reply]:
        """Replies until `expect` arrived or timeout seconds passed."""
        return receive(self.sock, expect, timeout)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Conversation:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Client:
    """The daemon at host:port. `bind`: the local address to send from (default: any, a fresh port per socket)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 9000, *, bind: tuple[str, int] | None = None) -> None:
        self.host = host
        self.port = port
        self.bind = bind

    def open(self) -> Conversation:
        """A fresh socket for one exchange (the caller closes it, or uses it as a context manager)."""
        family, _, _, _, addr = socket.getaddrinfo(self.host, self.port, type=socket.SOCK_DGRAM)[0]
        s = socket.socket(family, socket.SOCK_DGRAM)
        try:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECV_BUFFER)
            if self.bind is not None:
                s.bind(self.bind)
        except BaseException:
            s.close()
            raise
        return Conversation(s, addr)

    def send_raw(self, data: bytes, *, expect: int = 1, timeout: float = 10.0) -> list[Reply]:
        """Send one datagram from a fresh socket; the replies to that socket (up to `expect`, within timeout s).

        A `/kick/map/proof <token>` (the daemon sends the kit map only to an address that proved it receives its
        replies: docs/daemon.md, "Exposure") is answered here, once: the token echoed (`/kick/proof <token>`), the
        datagram sent again; it is not one of the replies returned."""
        with self.open() as conv:
            conv.send(data)
            out: list[Reply] = []
            proved = False
            deadline = time.monotonic() + timeout
            while len(out) < expect:
                got = conv.datagram(deadline - time.monotonic())
                if got is None:
                    break
                for reply in parse_replies(got):
                    if reply[0] == MAP_PROOF and not proved and len(reply[1]) == 1:
                        proved = True
                        conv.send(build_message(PROOF, [("i", reply[1][0])]))
                        conv.send(data)
                    else:
                        out.append(reply)
            return out

    def send(self, address: str, *args: Any, expect: int = 1, timeout: float = 10.0) -> list[Reply]:
        """Send one message and wait for `expect` replies (or `timeout` s); return what came."""
        return self.send_raw(build_message(address, args), expect=expect, timeout=timeout)


__all__ = ["NOT_OSC", "Client", "Conversation", "Reply", "build_message", "parse_replies", "receive",
           "receive_datagram"]
