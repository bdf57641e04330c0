"""Benchmark: the analysis of a function-task inspection alone, at 1k to 100k tasks (issue 15's
fourth target: the worker's memory stays bounded).

`build` writes `bench/scale.py`'s synthetic set (N cheap tasks, each prompt a different few
words), imports it on a fresh INSPECTOR_DATA_DIR with the embedded defaults, prepares an
inspection as a worker does (the reference once a task, no probes, mutants or behaviour runs:
scale.py's settings) and writes every run's outcome in SQL as the sandbox would give it (passed,
0.01 s), so a 100,000-task database takes a minute instead of a quarter of an hour. `analyse`
then runs what the worker runs after the last run (`services.analysis.inspection_analyse`: read
the runs, the detection, the duplicate search over every prompt, the flags and per-task figures
written back) in a fresh process, and prints its seconds, its CPU seconds and its peak RSS
(the process's own, and above what Django and the imports take before it starts); `--flags FILE`
writes the flags as JSON lines, for comparing two versions of the analysis.

Run: .venv/bin/python bench/analysis_scale.py build DATA_DIR --size 100000
     .venv/bin/python bench/analysis_scale.py analyse DATA_DIR [--flags out.jsonl]
     .venv/bin/python bench/analysis_scale.py sizes --sizes 1000,10000,100000  (both, per size)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

SETTINGS = {
    "INSPECT_REFERENCE_REPEATS": "1",
    "INSPECT_PROBES": "",
    "INSPECT_MUTANTS": "0",
    "INSPECT_BEHAVIOUR": "False",
}

# Prepares the inspection as a worker does, then gives every run the outcome the sandbox gives a
# right reference of `f(x) = x + k`.
DIRECT = """
from django.db import connection, transaction
from inspector.models import Inspection, Run, TaskSet
from inspector.services.inspections import inspection_prepare, inspection_start
version = TaskSet.objects.get(name="scale").versions.order_by("-number").first()
inspection = inspection_start(version=version)
inspection_prepare(inspection_id=inspection.pk, worker="bench")
with transaction.atomic(), connection.cursor() as c:
    c.execute(f'''UPDATE {Run._meta.db_table} SET status = 'done', duration = 0.01,
        outcome = 'passed', exit_code = 0 WHERE inspection_id = %s''', [inspection.pk])
total = Run.objects.filter(inspection=inspection).count()
Inspection.objects.filter(pk=inspection.pk).update(
    status=Inspection.RUNNING, runs_total=total, runs_done=total)
print("INSPECTION", inspection.pk, total)
"""


def _env(folder: Path) -> dict[str, str]:
    env = {**os.environ, "INSPECTOR_DATA_DIR": str(folder), "PYTHONUNBUFFERED": "1", **SETTINGS}
    for name in ("DATABASE_URL", "CELERY_BROKER_URL", "SANDBOX_BACKEND"):
        env.pop(name, None)  # the embedded defaults
    return env


def build(folder: Path, size: int) -> None:
    from scale import timed_manage, write_tasks

    folder.mkdir(parents=True, exist_ok=True)
    env = _env(folder)
    write_tasks(folder / "tasks.jsonl", size)
    timed_manage(env, "migrate", "--no-input", "-v0")
    seconds, mb, _ = timed_manage(
        env, "import_tasks", str(folder / "tasks.jsonl"), "--taskset", "scale"
    )
    print(f"imported {size} tasks in {seconds:.1f} s ({mb} MB)", flush=True)
    seconds, _, said = timed_manage(env, "shell", "-c", DIRECT)
    print(f"runs prepared and given outcomes in {seconds:.1f} s: {said.strip()}", flush=True)


def analyse(folder: Path, flags_path: Path | None) -> dict:
    os.environ.update(_env(folder))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "inspector.settings")
    import django

    django.setup()
    import pandas  # noqa: F401  what the worker has imported before its first analysis
    import sklearn.feature_extraction.text  # noqa: F401

    import inspector.detect.flags  # noqa: F401
    from inspector.models import Flag, Inspection, Task
    from inspector.services.analysis import inspection_analyse

    inspection = Inspection.objects.order_by("-pk").first()
    Inspection.objects.filter(pk=inspection.pk).update(status=Inspection.RUNNING)
    tasks = Task.objects.filter(version_id=inspection.version_id).count()
    base_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    started, cpu = time.perf_counter(), time.process_time()
    inspection_analyse(inspection_id=inspection.pk)
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    codes: dict[str, int] = {}
    for code in Flag.objects.filter(inspection_id=inspection.pk).values_list("code", flat=True):
        codes[code] = codes.get(code, 0) + 1
    row = {
        "tasks": tasks,
        "seconds": round(seconds, 2),
        "cpu_seconds": round(cpu, 2),
        "seconds_per_1000": round(1000 * seconds / tasks, 3),
        "peak_mb": round(peak_mb),
        "mb_before": round(base_mb),
        "peak_above_start_mb": round(peak_mb - base_mb),
        "flags": codes,
    }
    if flags_path is not None:
        with open(flags_path, "w") as out:
            for task_id, code, severity, confidence, explanation, runs, evidence in (
                Flag.objects.filter(inspection_id=inspection.pk)
                .order_by("task__task_id", "code")
                .values_list(
                    "task__task_id", "code", "severity", "confidence", "explanation",
                    "evidence_run_ids", "evidence",
                )
            ):  # fmt: skip
                out.write(
                    json.dumps(
                        {
                            "task": task_id,
                            "code": code,
                            "severity": severity,
                            "confidence": confidence,
                            "explanation": explanation,
                            "runs": runs,
                            "evidence": evidence,
                        },
                        sort_keys=True,
                        default=str,
                    )
                    + "\n"
                )
    return row


def sizes(numbers: list[int]) -> None:
    rows = []
    for size in numbers:
        folder = Path(tempfile.mkdtemp(prefix=f"bench-analysis-{size}-"))
        build(folder, size)
        done = subprocess.run(
            [sys.executable, __file__, "analyse", str(folder)],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        row = json.loads(done.stdout.strip().splitlines()[-1])
        rows.append(row)
        print(f"  {size} tasks: {json.dumps(row)}", flush=True)
    print(
        f"\n{'tasks':>8}{'analysis s':>12}{'CPU s':>8}{'s/1k':>8}{'peak MB':>9}"
        f"{'before MB':>11}{'above MB':>10}{'KB/task above':>15}"
    )
    for r in rows:
        print(
            f"{r['tasks']:8}{r['seconds']:12.1f}{r['cpu_seconds']:8.1f}"
            f"{r['seconds_per_1000']:8.2f}{r['peak_mb']:9}{r['mb_before']:11}"
            f"{r['peak_above_start_mb']:10}{1024 * r['peak_above_start_mb'] / r['tasks']:15.2f}"
        )
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("build")
    one.add_argument("folder", type=Path)
    one.add_argument("--size", type=int, default=100_000)
    two = sub.add_parser("analyse")
    two.add_argument("folder", type=Path)
    two.add_argument("--flags", type=Path)
    three = sub.add_parser("sizes")
    three.add_argument("--sizes", default="1000,10000,100000")
    args = parser.parse_args()
    if args.command == "build":
        build(args.folder, args.size)
    elif args.command == "analyse":
        print(json.dumps(analyse(args.folder, args.flags)), flush=True)
    else:
        sizes([int(s) for s in args.sizes.split(",") if s.strip()])


if __name__ == "__main__":
    sys.exit(main())
