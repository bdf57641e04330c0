"""Benchmark: `drift` on third-party data, where nothing changed between two inspections.

Real HumanEval (164 tasks) with the first N real CodeGen-16B completions a task
(../shared/data/real/samples_codegen16B_n100.jsonl.gz, third-party), inspected twice in a row,
unchanged, through a real Celery worker. Nothing changed between the two, so every `drift` flag
of the second inspection is false. Printed: the drift flags of the second inspection, and how
many the rule had before a check flagged flaky in both inspections was exempted from drifting
on its pass rates (computed from the same two inspections' stored outcomes and flags).

The deep analysis (mutants, behaviour programs) is off: drift reads only the reference and
sample runs, and the flags. Everything lives in a fresh temporary INSPECTOR_DATA_DIR.

Run: .venv/bin/python bench/drift_real.py [--samples-per-task 10] [--concurrency 2]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import tempfile
from pathlib import Path

from humaneval import PROBLEMS, manage, start_worker, stop

ROOT = Path(__file__).resolve().parent.parent
COMPLETIONS = ROOT.parent / "shared" / "data" / "real" / "samples_codegen16B_n100.jsonl.gz"
DB_SCRIPT = """
import json
from inspector import services
from inspector.detect.drift import Outcomes, drift_findings
from inspector.models import Flag, Inspection
first, second = Inspection.objects.order_by("pk")[:2]
def flags(inspection):
    out = {}
    for task, code in Flag.objects.filter(inspection=inspection).values_list("task_id", "code"):
        out.setdefault(task, set()).add(code)
    return out
def table(inspection, exempt_flaky):
    got = flags(inspection)
    rows = {}
    for task, c in services.task_outcomes(inspection.pk).items():
        codes = got.get(task, set())
        rows[task] = Outcomes(
            c.get("reference_passed", 0), c.get("reference_total", 0),
            c.get("sample_passed", 0), c.get("sample_total", 0),
            frozenset(codes if exempt_flaky else codes - {"flaky"}),
        )
    return rows
now = Flag.objects.filter(inspection=second, code="drift").select_related("task")
# The rule before: no exemption, so a task flaky in both inspections is judged on its rates
# (flaky removed from both sides: "became flaky" cannot fire for it, as in both rules).
both_flaky = {t for t, c in flags(first).items() if "flaky" in c} & {
    t for t, c in flags(second).items() if "flaky" in c}
old = [f for f in drift_findings(table(second, False), table(first, False),
       current_id=second.pk, previous_id=first.pk) if f.task_key in both_flaky]
print(json.dumps({
    "tasks": len(services.task_outcomes(second.pk)),
    "flaky_in_both": len(both_flaky),
    "drift_now": [(f.task.task_id, f.explanation) for f in now],
    "drift_before_extra": len(old),
}))
"""


def write_samples(path: Path, per_task: int) -> int:
    taken: dict[str, int] = {}
    lines = []
    with gzip.open(COMPLETIONS, "rt") as src:
        for line in src:
            row = json.loads(line)
            if taken.get(row["task_id"], 0) >= per_task:
                continue
            taken[row["task_id"]] = taken.get(row["task_id"], 0) + 1
            lines.append(
                json.dumps(
                    {
                        "task_id": row["task_id"],
                        "completion": row["completion"],
                        "sample_id": str(row["sample_id"]),
                    }
                )
                + "\n"
            )
    path.write_text("".join(lines))
    return len(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples-per-task", type=int, default=10)
    parser.add_argument("--concurrency", type=int, default=2)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-drift-"))
    env = {
        **os.environ,
        "INSPECTOR_DATA_DIR": str(tmp),
        "PYTHONUNBUFFERED": "1",
        "INSPECT_MUTANTS": "0",
        "INSPECT_BEHAVIOUR": "False",
    }
    worker = None
    try:
        samples = tmp / "samples.jsonl"
        count = write_samples(samples, args.samples_per_task)
        manage(env, "migrate", "--no-input", "-v0")
        imp = ["import_tasks", str(PROBLEMS), "--taskset", "humaneval", "--samples", str(samples)]
        print(manage(env, *imp)[1].strip(), f"({count} CodeGen-16B completions)")
        worker, _ = start_worker(env, args.concurrency, tmp / "worker.log")
        for which in ("first", "second"):
            seconds, _ = manage(env, "inspect", "humaneval", "--wait")
            print(f"{which} inspection: {seconds:.1f} s")
        stop(worker)
        worker = None
        figures = json.loads(manage(env, "shell", "-c", DB_SCRIPT)[1].strip().splitlines()[-1])
        print(
            f"\n{figures['tasks']} tasks inspected twice, unchanged; "
            f"{figures['flaky_in_both']} flagged flaky in both inspections"
        )
        print(f"drift flags now (all false): {len(figures['drift_now'])}")
        for task_id, why in figures["drift_now"]:
            print(f"  {task_id}: {why}")
        print(
            "drift flags the rule before would have added on tasks flaky in both: "
            f"{figures['drift_before_extra']}"
        )
    finally:
        stop(worker)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
