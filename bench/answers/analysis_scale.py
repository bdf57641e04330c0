"""Benchmark: the analysis of an answer-graded inspection alone, on databases built once.

`build` writes the synthetic set of `bench/answers/scale.py` (N questions, 16 samples each),
imports and inspects it end to end (a real worker, the embedded defaults) in DATA_DIR, and keeps
the folder; `analyse` re-runs only the analysis of its latest inspection
(`services.answer_runs.answer_analysis`: the runs read from the database, then
`detect.answers.analyse_answers`) in a fresh process, and prints its seconds (the read and the
detection apart), seconds per 1,000 questions and peak RSS; `--flags FILE` writes the findings
(code, task, severity, confidence, explanation, evidence runs and evidence) as JSON lines, for
comparing two versions of the analysis. `build --direct` does not inspect: it prepares the
inspection's runs as a worker does and writes the verdicts the verifier would give them in SQL
(see DIRECT), so a 100,000-question database takes minutes instead of hours.

Run: .venv/bin/python bench/answers/analysis_scale.py build DATA_DIR --size 10000 [--direct]
     .venv/bin/python bench/answers/analysis_scale.py analyse DATA_DIR [--flags out.jsonl]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))


def _env(folder: Path) -> dict[str, str]:
    env = {**os.environ, "INSPECTOR_DATA_DIR": str(folder), "PYTHONUNBUFFERED": "1"}
    for name in ("DATABASE_URL", "CELERY_BROKER_URL", "SANDBOX_BACKEND"):
        env.pop(name, None)  # the embedded defaults
    return env


# `build --direct`: prepares the inspection as a worker does, then gives every run the verdict the
# verifier would give it, in SQL (the sample's own answer, compared with the label as text; probes
# earn nothing). No sandbox runs: the 100,000-question database takes minutes, not hours.
DIRECT = """
from django.db import connection, transaction
from inspector.models import Inspection, Run, TaskSet
from inspector.services.inspections import inspection_prepare, inspection_start
version = TaskSet.objects.get(name="scale").versions.order_by("-number").first()
inspection = inspection_start(version=version)
inspection_prepare(inspection_id=inspection.pk, worker="bench")
run, task, sample = (m._meta.db_table for m in (Run, Run.task.field.related_model,
                     Run.sample.field.related_model))
with transaction.atomic(), connection.cursor() as c:
    c.execute(f'''UPDATE {run} SET status = 'done', duration = 0.01,
        outcome = CASE WHEN (SELECT s.answer = t.canonical_solution FROM {sample} s, {task} t
                             WHERE s.id = {run}.sample_id AND t.id = {run}.task_id)
                  THEN 'passed' ELSE 'failed' END,
        detail = (SELECT json_object('status', 'ok', 'extracted', s.answer, 'canonical',
                  s.answer, 'why', '', 'label', t.canonical_solution)
                  FROM {sample} s, {task} t WHERE s.id = {run}.sample_id AND t.id = {run}.task_id)
        WHERE inspection_id = %s AND kind = 'sample' ''', [inspection.pk])
    c.execute(f'''UPDATE {run} SET status = 'done', duration = 0.01, outcome = 'passed',
        detail = (SELECT json_object('status', 'ok', 'extracted', t.canonical_solution,
                  'canonical', t.canonical_solution, 'why', '', 'label', t.canonical_solution)
                  FROM {task} t WHERE t.id = {run}.task_id)
        WHERE inspection_id = %s AND kind = 'reference' ''', [inspection.pk])
    c.execute(f'''UPDATE {run} SET status = 'done', duration = 0.01, outcome = 'failed',
        detail = json_object('status', 'no_answer', 'extracted', '', 'canonical', '',
                             'why', 'no final answer', 'label', '')
        WHERE inspection_id = %s AND kind = 'probe' ''', [inspection.pk])
total = Run.objects.filter(inspection=inspection).count()
Inspection.objects.filter(pk=inspection.pk).update(
    status=Inspection.RUNNING, runs_total=total, runs_done=total)
print("INSPECTION", inspection.pk, total)
"""


def build(folder: Path, size: int, samples: int, direct: bool = False) -> None:
    """Write, import and inspect; a folder already imported is not imported again, and an
    inspection stopped half-way (a worker that did not answer) is resumed by a new worker.
    `direct`: the verdicts are written in SQL (DIRECT), not made by the verifier."""
    from humaneval import start_worker, stop
    from scale import timed_manage

    from bench.answers.scale import write

    folder.mkdir(parents=True, exist_ok=True)
    env = _env(folder)
    if not (folder / "imported").exists():
        write(folder, size, samples)
        timed_manage(env, "migrate", "--no-input", "-v0")
        seconds, mb, _ = timed_manage(
            env, "import_tasks", str(folder / "tasks.jsonl"), "--samples",
            str(folder / "samples.jsonl"), "--taskset", "scale",
        )  # fmt: skip
        (folder / "imported").write_text(f"{seconds:.1f} s, {mb} MB\n")
        print(f"imported {size} questions in {seconds:.1f} s ({mb} MB)", flush=True)
    if direct:
        seconds, _, said = timed_manage(env, "shell", "-c", DIRECT)
        print(f"verdicts written in {seconds:.1f} s: {said.strip().splitlines()[-1]}", flush=True)
        return
    worker, _ = start_worker(env, 2, folder / "worker.log")
    try:
        if (folder / "inspected").exists():
            said = _resume(env)
        else:
            (folder / "inspected").write_text("started\n")
            _, _, said = timed_manage(env, "inspect", "scale", "--wait", "--stall-seconds", "3600")
    finally:
        stop(worker)
    print(f"inspected: {said.strip().splitlines()[-1]}", flush=True)


def _resume(env: dict[str, str]) -> str:
    """Wait for the latest inspection (a worker is running) to finish."""
    code = (
        "import time\n"
        "from inspector.models import Inspection\n"
        "while True:\n"
        "    i = Inspection.objects.order_by('-pk').first()\n"
        "    if i.status in (Inspection.FINISHED, Inspection.FAILED):\n"
        "        print(f'Inspection #{i.pk} {i.status}: {i.runs_done}/{i.runs_total} runs')\n"
        "        break\n"
        "    time.sleep(2)\n"
    )
    from scale import timed_manage

    return timed_manage(env, "shell", "-c", code)[2]


def analyse(folder: Path, flags_path: Path | None) -> None:
    os.environ.update(_env(folder))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "inspector.settings")
    import django

    django.setup()
    import inspector.detect.answers as detect
    from inspector.models import Inspection, Task
    from inspector.services.answer_runs import answer_analysis

    inspection = Inspection.objects.order_by("-pk").first()
    questions = Task.objects.filter(version_id=inspection.version_id).count()
    base_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    timing: dict[str, float] = {}
    original = detect.analyse_answers

    def timed(*args, **kwargs):
        started, cpu = time.perf_counter(), time.process_time()
        try:
            return original(*args, **kwargs)
        finally:
            timing["detect"] = time.perf_counter() - started
            timing["detect_cpu"] = time.process_time() - cpu

    detect.analyse_answers = timed
    started, cpu = time.perf_counter(), time.process_time()
    analysis, _runs_of = answer_analysis(inspection)
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    codes: dict[str, int] = {}
    for f in analysis.findings:
        codes[str(f.code)] = codes.get(str(f.code), 0) + 1
    print(
        json.dumps(
            {
                "questions": questions,
                "seconds": round(seconds, 2),
                "read_seconds": round(seconds - timing["detect"], 2),
                "detect_seconds": round(timing["detect"], 2),
                "seconds_per_1000": round(1000 * seconds / questions, 3),
                # CPU seconds: what the analysis costs, whatever else shares the machine
                "cpu_seconds": round(cpu, 2),
                "detect_cpu_seconds": round(timing["detect_cpu"], 2),
                "cpu_per_1000": round(1000 * cpu / questions, 3),
                "peak_mb": round(peak_mb),
                "mb_before": round(base_mb),
                "flags": codes,
            }
        ),
        flush=True,
    )
    if flags_path is not None:
        ids = dict(
            Task.objects.filter(version_id=inspection.version_id).values_list("pk", "task_id")
        )
        with open(flags_path, "w") as out:
            for f in analysis.findings:
                out.write(
                    json.dumps(
                        {
                            "task": ids.get(f.task_key, f.task_key),
                            "code": str(f.code),
                            "severity": f.severity,
                            "confidence": f.confidence,
                            "explanation": f.explanation,
                            "runs": list(f.evidence_run_ids),
                            "evidence": f.evidence,
                        },
                        sort_keys=True,
                        default=str,
                    )
                    + "\n"
                )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=("build", "analyse"))
    parser.add_argument("folder", type=Path)
    parser.add_argument("--size", type=int, default=2000)
    parser.add_argument("--samples", type=int, default=16)
    parser.add_argument("--flags", type=Path, default=None)
    parser.add_argument(
        "--direct",
        action="store_true",
        help="build: write the verifier's verdicts in SQL instead of inspecting (minutes at 100k)",
    )
    args = parser.parse_args()
    if args.action == "build":
        build(args.folder, args.size, args.samples, args.direct)
    else:
        analyse(args.folder, args.flags)


if __name__ == "__main__":
    sys.exit(main())
