"""Benchmark: answer-graded sets of 1,000 to 100,000 questions with 16 samples each, imported
and inspected end to end through the platform (issue 17's "must import and inspect").

For each size, the synthetic set of `bench/answers/scale.py` (sums with four simulated models'
boxed responses) is written, then, on a fresh INSPECTOR_DATA_DIR with the embedded defaults
(SQLite, the file-system broker, the local bubblewrap sandbox), imported with `import_tasks`
(the samples file streamed into the import's transaction) and inspected with `inspect --wait`
by a real Celery worker (-c 2): every response, every label and every verifier probe through the
verifier in the sandbox, then the analysis.

Printed per size: the import's wall seconds and peak memory; the inspection's wall seconds, runs
and runs/s and seconds per 1,000 questions; the peak memory of the worker (its largest process
and its whole tree) and of the `inspect` command; the flags. Linear means the seconds per 1,000
questions stay flat; bounded means the worker's memory does not grow with the set.

Run: .venv/bin/python bench/answers/inspection_scale.py [--sizes 1000,10000,100000]
[--samples 16] [--probes all|none|name,name] [--concurrency 2]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

from humaneval import start_worker, stop  # noqa: E402
from scale import TreeMemory, timed_manage  # noqa: E402

from bench.answers.scale import write  # noqa: E402


def one_size(size: int, args: argparse.Namespace) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix=f"bench-answers-{size}-"))
    env = {**os.environ, "INSPECTOR_DATA_DIR": str(tmp), "PYTHONUNBUFFERED": "1"}
    for name in ("DATABASE_URL", "CELERY_BROKER_URL", "SANDBOX_BACKEND"):
        env.pop(name, None)  # the embedded defaults
    if args.probes != "all":
        env["ANSWER_PROBES"] = "" if args.probes == "none" else args.probes
    write(tmp, size, args.samples)
    timed_manage(env, "migrate", "--no-input", "-v0")
    import_s, import_mb, _ = timed_manage(
        env, "import_tasks", str(tmp / "tasks.jsonl"), "--samples", str(tmp / "samples.jsonl"),
        "--taskset", "scale",
    )  # fmt: skip
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
    flags = [line for line in said.splitlines() if "finished in" in line][-1:]
    shutil.rmtree(tmp, ignore_errors=True)
    return {
        "size": size,
        "import_s": import_s,
        "import_mb": import_mb,
        "inspect_s": inspect_s,
        "runs": runs,
        "inspect_mb": inspect_mb,
        "worker_largest_mb": memory.largest,
        "worker_tree_mb": memory.total,
        "flags": flags,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--samples", type=int, default=16)
    parser.add_argument("--probes", default="all")
    parser.add_argument("--concurrency", type=int, default=2)
    args = parser.parse_args()
    print(
        f"synthetic sums, {args.samples} samples each (4 models), probes {args.probes}; worker "
        f"-c {args.concurrency}; embedded defaults"
    )
    rows = []
    for size in [int(s) for s in args.sizes.split(",") if s.strip()]:
        row = one_size(size, args)
        rows.append(row)
        print(f"  {size} questions done: {json.dumps(row)}", flush=True)
    print(
        f"\n{'questions':>10}{'import s':>10}{'import MB':>11}{'inspect s':>11}{'runs':>10}"
        f"{'runs/s':>8}{'s/1k q':>9}{'inspect MB':>12}{'worker MB':>11}{'tree MB':>9}"
    )
    for r in rows:
        print(
            f"{r['size']:10}{r['import_s']:10.1f}{r['import_mb']:11}{r['inspect_s']:11.1f}"
            f"{r['runs']:10}{r['runs'] / r['inspect_s']:8.0f}"
            f"{1000 * r['inspect_s'] / r['size']:9.2f}{r['inspect_mb']:12}"
            f"{r['worker_largest_mb']:11}{r['worker_tree_mb']:9}"
        )
    for r in rows:
        print(f"{r['size']}: {r['flags'][0] if r['flags'] else '(no summary)'}")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    sys.exit(main())
