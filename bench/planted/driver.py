"""Driving the platform: the planted-defect set written out, imported, inspected by a real
Celery worker and exported (with bench/humaneval.py's helpers), and each report scored."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

from bench.planted.plantedset import PlantedSet
from bench.planted.scoring import Score
from bench.planted.write import write_planted_set

TASKSET = "planted"


def _humaneval_helpers():
    """bench/humaneval.py's manage / start_worker / stop (a script the bench scripts import by
    its bare name, from bench/ on sys.path)."""
    here = str(Path(__file__).resolve().parents[1])
    if here not in sys.path:
        sys.path.insert(0, here)
    import humaneval

    return humaneval.manage, humaneval.start_worker, humaneval.stop


def inspect_on_platform(
    planted: PlantedSet, *, seed: int, out_dir: str | None, repeats: int, concurrency: int
) -> Score:
    """Run the whole platform on the set the way bench/humaneval.py does (a fresh
    INSPECTOR_DATA_DIR, `import_tasks`, a Celery worker, `inspect --wait` `repeats` times, each
    followed by `export_report` into the set's folder, `out_dir` or a temporary one), printing each
    inspection's wall time and runs; the score of the reports against the planted truth."""
    manage, start_worker, stop = _humaneval_helpers()
    tmp = Path(tempfile.mkdtemp(prefix="bench-planted-"))
    folder = Path(out_dir) if out_dir else tmp / "set"
    tasks_path, samples_path, _ = write_planted_set(folder, planted)
    env = {**os.environ, "INSPECTOR_DATA_DIR": str(tmp), "PYTHONUNBUFFERED": "1"}
    db, broker = os.environ.get("DATABASE_URL"), os.environ.get("CELERY_BROKER_URL")
    db_said = f"DATABASE_URL ({db.split(':')[0]})" if db else "SQLite file in the data dir"
    broker_said = f"CELERY_BROKER_URL ({broker.split(':')[0]})" if broker else "file system"
    print(f"data dir {tmp}; database: {db_said}; broker: {broker_said}; set in {folder}")
    name = f"{TASKSET}-{seed}"
    worker = None
    score = Score()
    try:
        manage(env, "migrate", "--no-input", "-v0")
        imp = ["import_tasks", str(tasks_path), "--taskset", name, "--samples", str(samples_path)]
        import_s, out = manage(env, *imp)
        print(out.strip(), f"({import_s:.1f} s)")
        worker, ready_s = start_worker(env, concurrency, tmp / "worker.log")
        print(f"worker answered after {ready_s:.1f} s")
        for repeat in range(1, repeats + 1):
            seconds, out = manage(env, "inspect", name, "--wait")
            report_path = folder / f"report-{repeat}.jsonl"
            manage(env, "export_report", name, "-o", str(report_path))
            report = [json.loads(s) for s in report_path.read_text().splitlines() if s.strip()]
            counted = sum((line.get("stats") or {}).get("runs") or 0 for line in report)
            # All runs (mutant and behaviour runs too) from inspect's last line, else the stats'.
            finished = re.search(r"finished in [\d.]+ s: (\d+) runs", out)
            runs = int(finished.group(1)) if finished else counted
            rate = runs / seconds if seconds else 0.0
            print(
                f"inspection {repeat}/{repeats}: {seconds:.1f} s wall, {runs} runs "
                f"({rate:.1f} runs/s; {counted} of them reference, sample and probe runs)"
            )
            print("  " + out.split(chr(13))[-1].strip().splitlines()[-1])
            score.add(report, planted.truth, planted.kinds)
    finally:
        stop(worker)
        shutil.rmtree(tmp, ignore_errors=True)
    return score
