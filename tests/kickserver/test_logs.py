"""The daemon's log lines: one per event, bounded."""

from __future__ import annotations

import io
import logging

from kickserver import logs


def test_messages_are_one_clipped_line():
    stream = io.StringIO()
    logs.setup("info", stream=stream)
    try:
        log = logging.getLogger("kickserver.test")
        log.info("refused %s: %s", "/kick/x\nINFO kickserver: forged line", "y" * 9000)
        log.warning("short")
    finally:
        logging.basicConfig(force=True)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2, lines
    assert lines[0].startswith("INFO kickserver.test: refused /kick/x\\nINFO kickserver: forged line: yyy")
    escaped = len("refused /kick/x\\nINFO kickserver: forged line: ") + 9000
    assert lines[0].endswith(f"y... [{escaped - logs.MAX_MESSAGE} more characters]")
    assert len(lines[0]) < logs.MAX_MESSAGE + 80
    assert lines[1] == "WARNING kickserver.test: short"


def test_one_line_escapes_control_characters():
    assert logs.one_line("a\rb\x00c\x7fd\te") == "a\\rb\\x00c\\x7fd e"
    assert logs.one_line("x" * 10, limit=4) == "xxxx... [6 more characters]"
