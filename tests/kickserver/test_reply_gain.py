"""What a bare request draws, held to what docs/daemon.md says (the doc once said a well-formed request
refused for its arguments draws up to 8 bytes per byte, while address-only messages drew up to 23).

Every address the daemon serves (and one it does not) is sent bare, with and without its type tag string; the reply
(both copies: the source port and the reply port) per byte of the datagram must stay within the figure the doc
states for it."""

from __future__ import annotations

import re
import socket

from daemon_util import REPO, make_artifact, models_folder, start_daemon

from kickserver import osc_api
from kickserver.client import build_message, receive_datagram

ADDRESSES = (osc_api.PING, osc_api.STATUS, osc_api.MODELS, osc_api.CONTROLS, osc_api.MAP, osc_api.GENERATE,
             osc_api.VARIATION, osc_api.MODEL, osc_api.INTERPOLATE, osc_api.NEAR, osc_api.LOCATE, "/kick/nosuch")


def documented_gain() -> float:
    """The most bytes of reply per byte of a well-formed request docs/daemon.md allows."""
    text = (REPO / "docs" / "daemon.md").read_text()
    m = re.search(r"draws at most (\d+(?:\.\d+)?) bytes of reply per byte", text)
    assert m, "docs/daemon.md no longer states what a bare request draws"
    return float(m.group(1))


def padded(b: bytes) -> bytes:
    return b + b"\0" * (4 - len(b) % 4)


def test_a_bare_request_draws_no_more_than_the_doc_says(tmp_path):
    models = models_folder(tmp_path / "models")
    make_artifact(models / "tiny.safetensors")
    gains = {}
    with start_daemon(tmp_path, models, model="tiny") as d:
        for address in ADDRESSES:
            for tags, data in ((True, build_message(address, [])), (False, padded(address.encode()))):
                if address == osc_api.GENERATE and tags:
                    continue  # a kick: work, not a reply
                with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                    s.bind(("127.0.0.1", 0))
                    s.sendto(data, ("127.0.0.1", d.port))
                    got = receive_datagram(s, 10.0)  # one datagram each (no route here answers bare in parts)
                gains[(address, tags)] = 2 * len(got or b"") / len(data)
    worst = max(gains, key=gains.get)
    print({f"{a}{'' if t else ' (no tags)'}": round(g, 1) for (a, t), g in gains.items()})
    assert gains[worst] <= documented_gain(), (worst, gains[worst], gains)
