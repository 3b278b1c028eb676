"""The daemon's log format: one line per event, at most MAX_MESSAGE characters of message.

Messages often carry what a client sent (an address, a file name, a reason built from them) or what a file
held (an artifact's error text). The formatter escapes control characters, so no message can start a
forged log line, and clips the message, so no request can make journald store kilobytes per line. A
traceback (attached only at log level debug) is kept as is.
"""

from __future__ import annotations

import logging
import sys

MAX_MESSAGE = 500
FORMAT = "%(levelname)s %(name)s: %(message)s"
_CONTROL = {c: f"\\x{c:02x}" for c in range(32)} | {0x7F: "\\x7f", ord("\n"): "\\n", ord("\r"): "\\r",
                                                    ord("\t"): " "}


def one_line(text: str, limit: int = MAX_MESSAGE) -> str:
    """text with control characters escaped, clipped to limit characters (saying how much was cut)."""
    text = str(text).translate(_CONTROL)
    if len(text) <= limit:
        return text
    cut = len(text) - limit
    return f"{text[:limit]}... [{cut} more characters]"


class OneLineFormatter(logging.Formatter):
    def __init__(self, fmt: str = FORMAT, limit: int = MAX_MESSAGE) -> None:
        super().__init__(fmt)
        self.limit = limit

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging's name
        record.message = one_line(record.message, self.limit)
        return super().formatMessage(record)


def setup(level: str = "info", stream=None) -> None:  # noqa: ANN001 - a text stream
    """Log to stderr (journald adds the time) through OneLineFormatter; replaces any earlier handlers."""
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(OneLineFormatter())
    logging.basicConfig(level=level.upper(), handlers=[handler], force=True)
