"""Benchmark: does an inspection grow linearly with the task set? (issue 15's fourth target)

For each size (1,000, 10,000 and 100,000 tasks by default) a synthetic set of cheap tasks is made
(`f(x) = x + k` with two asserts, each prompt a different few words so that the duplicate search
has real work and finds nothing), then, on a fresh INSPECTOR_DATA_DIR with the embedded defaults
(SQLite, the file-system broker, the local sandbox), imported with `import_tasks` and inspected
with `inspect --wait` by a real Celery worker (-c 2). The inspection is made cheap per task so
that 100,000 tasks fit in minutes: the reference once (`--reference-repeats`, 1), no probes, no
mutants, no behaviour programs; what grows with the set (creating the runs, dispatching them,
recording them, the analysis, the duplicate search over every prompt) is all there.

Printed for each size: the import's wall seconds and peak memory; the inspection's wall seconds,
runs/s and seconds per 1,000 tasks; its phases from the worker log (the command and creating the
runs, dispatch to the first run, the runs, the analysis); the peak memory of the `inspect`
command and of the worker (its largest process, and the sum over its process tree, sampled every
second). Linear means the seconds per 1,000 tasks stay flat; bounded means the worker's memory
does not grow with the set.

Run: .venv/bin/python bench/scale.py [--sizes 1000,10000,100000] [--reference-repeats 1]
[--concurrency 2]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from humaneval import CELERY, PY, ROOT, start_worker, stop
from inspection_speed import phases

_LETTERS = random.Random(0)
WORDS = [
    "".join(_LETTERS.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(7)) for _ in range(5000)
]


def write_tasks(path: Path, size: int) -> None:
    rng = random.Random(size)
    with path.open("w") as out:
        for n in range(size):
            words = " ".join(rng.sample(WORDS, 8))
            k = n % 97
            out.write(
                json.dumps(
                    {
                        "task_id": f"synthetic/{n}",
                        "prompt": f'def f(x):\n    """Return x plus {k}: {words}."""\n',
                        "canonical_solution": f"    return x + {k}\n",
                        "test": f"def check(candidate):\n    assert candidate(1) == {1 + k}\n"
                        f"    assert candidate(5) == {5 + k}\n",
                        "entry_point": "f",
                    }
                )
                + "\n"
            )


def timed_manage(env: dict[str, str], *args: str) -> tuple[float, int, str]:
    """`manage.py ARGS` under /usr/bin/time: (wall seconds, peak RSS in MB, stdout)."""
    start = time.monotonic()
    done = subprocess.run(
        ["/usr/bin/time", "-f", "MAXRSS_KB %M", PY, "manage.py", *args],
        cwd=ROOT, env=env, capture_output=True,
    )  # fmt: skip
    seconds = time.monotonic() - start
    out, err = done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace")
    if done.returncode != 0:
        raise SystemExit(f"manage.py {' '.join(args)} failed:\n{out[-3000:]}\n{err[-5000:]}")
    peak = int(re.findall(r"MAXRSS_KB (\d+)", err)[-1]) // 1024
    return seconds, peak, out


class TreeMemory(threading.Thread):
    """Samples the resident memory of a process tree every second: the largest single process
    and the largest sum over the tree, in MB."""

    def __init__(self, root: int) -> None:
        super().__init__(daemon=True)
        self.root, self.largest, self.total = root, 0, 0
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.wait(1.0):
            sizes = list(_tree_rss_kb(self.root).values())
            if sizes:
                self.largest = max(self.largest, max(sizes) // 1024)
                self.total = max(self.total, sum(sizes) // 1024)

    def finish(self) -> None:
        self._done.set()
        self.join(5)


def _tree_rss_kb(root: int) -> dict[int, int]:
    parent: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent[int(entry.name)] = int(
                    (entry / "stat").read_text().rsplit(")", 1)[-1].split()[1]
                )
            except (OSError, ValueError, IndexError):
                pass
    tree, frontier = {root}, [root]
    while frontier:
        current = frontier.pop()
        kids = [c for c, p in parent.items() if p == current and c not in tree]
        tree.update(kids)
        frontier.extend(kids)
    rss: dict[int, int] = {}
    for pid in tree:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    rss[pid] = int(line.split()[1])
        except OSError:
            pass
    return rss


def one_size(size: int, args: argparse.Namespace) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix=f"bench-scale-{size}-"))
    env = {**os.environ, "INSPECTOR_DATA_DIR": str(tmp), "PYTHONUNBUFFERED": "1"}
    for name in ("DATABASE_URL", "CELERY_BROKER_URL", "SANDBOX_BACKEND"):
        env.pop(name, None)  # the embedded defaults
    env.update(
        INSPECT_REFERENCE_REPEATS=str(args.reference_repeats),
        INSPECT_PROBES="",
        INSPECT_MUTANTS="0",
        INSPECT_BEHAVIOUR="False",
    )
    tasks = tmp / "tasks.jsonl"
    write_tasks(tasks, size)
    timed_manage(env, "migrate", "--no-input", "-v0")
    import_s, import_mb, _ = timed_manage(env, "import_tasks", str(tasks), "--taskset", "scale")
    log = tmp / "worker.log"
    worker, _ = start_worker(env, args.concurrency, log)
    memory = TreeMemory(worker.pid)
    memory.start()
    try:
        inspect_s, inspect_mb, said = timed_manage(env, "inspect", "scale", "--wait")
    finally:
        memory.finish()
        stop(worker)
    runs = int(re.findall(r"(\d+)/\d+ runs \(100%\)", said)[-1])
    parts = phases(log.read_text(errors="replace"))
    return {
        "size": size,
        "import_s": import_s,
        "import_mb": import_mb,
        "inspect_s": inspect_s,
        "runs": runs,
        "inspect_mb": inspect_mb,
        "worker_largest_mb": memory.largest,
        "worker_tree_mb": memory.total,
        "phases": parts,
        "flags": [line for line in said.splitlines() if "finished in" in line][-1:],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--reference-repeats", type=int, default=1)
    parser.add_argument("--concurrency", type=int, default=2)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    print(
        f"synthetic cheap tasks; reference x{args.reference_repeats}, no probes, no mutants, "
        f"no behaviour runs; worker -c {args.concurrency}; embedded defaults; "
        f"celery {' '.join(CELERY[-2:])}"
    )
    rows = []
    for size in sizes:
        row = one_size(size, args)
        rows.append(row)
        print(f"  {size} tasks done: {json.dumps(row)}", flush=True)

    print(
        f"\n{'tasks':>8}{'import s':>10}{'import MB':>11}{'inspect s':>11}{'runs':>9}"
        f"{'runs/s':>8}{'s/1k tasks':>12}{'inspect MB':>12}{'worker MB':>11}{'tree MB':>9}"
    )
    for r in rows:
        print(
            f"{r['size']:8}{r['import_s']:10.1f}{r['import_mb']:11}{r['inspect_s']:11.1f}"
            f"{r['runs']:9}{r['runs'] / r['inspect_s']:8.1f}"
            f"{1000 * r['inspect_s'] / r['size']:12.2f}{r['inspect_mb']:12}"
            f"{r['worker_largest_mb']:11}{r['worker_tree_mb']:9}"
        )
    print("\nphases (worker log), seconds and seconds per 1,000 tasks:")
    labels = list(rows[0]["phases"]) if rows else []
    print(f"{'tasks':>8}" + "".join(f"{label[:28]:>30}" for label in labels))
    for r in rows:
        print(
            f"{r['size']:8}"
            + "".join(
                f"{r['phases'][label]:>18.1f} ({1000 * r['phases'][label] / r['size']:6.2f}/1k)"
                for label in labels
            )
        )
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    sys.exit(main())
