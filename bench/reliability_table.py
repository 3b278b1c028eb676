"""Run the reliability suite (its slow cases included) and write what each case did into README.md's table.

    python bench/reliability_table.py            # run tests/kickserver/test_reliability.py, print the table
    python bench/reliability_table.py --readme   # run it, rewrite README.md's table and bench/results/reliability.json

Each case of tests/kickserver/test_reliability.py counts, where it acts, the faults it injects, the requests
it sends and the kicks it asks for, and how many of those kicks were never answered (lost). The suite
writes those tallies to a JSON file (KICK_RELIABILITY_JSON); this script prints them as a table and keeps
them in ~/.cache/kickserver/bench/reliability.json (--out). With --readme it writes the table between the README's
`reliability-table` markers and the figures to bench/results/reliability.json instead: tracked files change only
when asked. The suite's last test checks the README's table against the cases that ran, so the table follows
the tests.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from kickmodel.fsutil import atomic_write_bytes

REPO = Path(__file__).resolve().parents[1]
if not __package__:  # `python bench/reliability_table.py`: the suite's own package is not on the path
    sys.path.insert(0, str(REPO))

from bench import common  # noqa: E402

SUITE = "tests/kickserver/test_reliability.py"
START, END = "<!-- reliability-table:start -->", "<!-- reliability-table:end -->"


def run_suite() -> list[dict]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "tallies.json"
        env = dict(os.environ, KICK_RELIABILITY_JSON=str(out))
        # "-m": the slow cases too (pyproject's addopts leaves them out)
        r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "slow or not slow",
                            SUITE], cwd=REPO, env=env)
        if r.returncode != 0:
            raise SystemExit(f"the reliability suite failed (exit {r.returncode}); the table was not written")
        return json.loads(out.read_text())


def machine() -> str:
    """Where and when the suite ran, for the line under the table."""
    import datetime
    import platform

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.lower().startswith("model name")), cpu)
    except OSError:
        pass
    return f"{datetime.date.today().isoformat()}, {cpu} ({os.cpu_count()} cores)"


def table(tallies: list[dict], where: str | None = None) -> str:
    lines = ["| case | what is tried | faults injected | requests sent | kicks asked for | kicks lost |",
             "|---|---|---|---|---|---|"]
    for t in tallies:
        what = t["what"].replace("|", "\\|")
        lines.append(f"| `{t['case']}` | {what} | {t['faults']} | {t['requests']} | {t['kicks']} | {t['lost']} |")
    total = {k: sum(t[k] for t in tallies) for k in ("faults", "requests", "kicks", "lost")}
    lines.append(f"| **{len(tallies)} cases** | | **{total['faults']}** | **{total['requests']}** | "
                 f"**{total['kicks']}** | **{total['lost']}** |")
    if where:
        lines += ["", f"Run on {where}."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--readme", action="store_true",
                    help="write the table into README.md and the figures to bench/results/reliability.json")
    ap.add_argument("--print", action="store_true", help=argparse.SUPPRESS)  # the default now; kept for old commands
    common.add_out_option(ap, "reliability.json (without --readme)")
    ns = ap.parse_args(argv)
    tallies = run_suite()
    text = table(tallies, machine())
    print(text)
    results = (common.RESULTS if ns.readme else ns.out) / "reliability.json"
    if ns.readme:
        readme = REPO / "README.md"
        doc = readme.read_text()
        a, b = doc.index(START) + len(START), doc.index(END)
        atomic_write_bytes(readme, (doc[:a] + "\n" + text + "\n" + doc[b:]).encode())
        print(f"wrote {len(tallies)} cases into {readme}")
    results.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(results, (json.dumps(tallies, indent=1) + "\n").encode())
    print(f"wrote {results}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
