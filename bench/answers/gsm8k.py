"""Benchmark: real GSM8K with eight real model output sets, inspected end to end (issue 17).

The 1,319 questions of GSM8K's test set (their own lines: the label after `#### `) and the eight
output sets in ../shared/data/answers/ (its README gives their sources), joined into one samples
file (each model's response to a question is the sample named by the model), are imported with
`import_tasks` on a fresh INSPECTOR_DATA_DIR with the embedded defaults (SQLite, the file-system
broker, the local sandbox) and inspected with `inspect --wait` by a real Celery worker (-c 2):
every response and every label through the verifier in the sandbox, and the verifier probes.

Printed: the import's and the inspection's wall seconds (the target: under two minutes), the
runs by kind and outcome, verifications per second, the flags per code with up to ten examples
each (the label, the answers the samples gave with their counts), and the set's findings about
its verifier. Nothing here is tuned on GSM8K: the thresholds come from the planted benchmark's
development seed.

Run: .venv/bin/python bench/answers/gsm8k.py [--rule auto|given|...] [--concurrency 2]
[--examples 10] [--keep]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from humaneval import PY, ROOT, start_worker, stop  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "answers"

REPORT = r"""
import json
from collections import Counter
from inspector.models import Flag, Inspection, Run
inspection = Inspection.objects.order_by("-id").first()
runs = Counter(
    f"{kind}/{outcome}"
    for kind, outcome in Run.objects.filter(inspection=inspection).values_list("kind", "outcome")
)
answers = {}
for task_id, model, canonical, outcome in Run.objects.filter(
    inspection=inspection, kind="sample"
).values_list("task__task_id", "sample__model", "detail__canonical", "outcome"):
    answers.setdefault(task_id, Counter())[canonical or "(none)"] += 1
flags = {}
for flag in Flag.objects.filter(inspection=inspection).select_related("task").order_by("task__position"):
    flags.setdefault(flag.code, []).append(
        {
            "task_id": flag.task.task_id,
            "label": flag.task.label,
            "confidence": round(flag.confidence, 3),
            "answers": answers.get(flag.task.task_id, Counter()).most_common(4),
            "explanation": flag.explanation[:300],
        }
    )
print(json.dumps({
    "status": inspection.status,
    "runs": sorted(runs.items()),
    "flags": flags,
    "findings": inspection.findings,
    "tasks": inspection.version.task_count,
}))
"""


def write_inputs(folder: Path) -> tuple[Path, Path, int]:
    """The questions as published, and the eight output sets as one samples file."""
    tasks = folder / "gsm8k_test.jsonl"
    with gzip.open(DATA / "gsm8k_test.jsonl.gz", "rb") as src, tasks.open("wb") as out:
        shutil.copyfileobj(src, out)
    samples = folder / "gsm8k_samples.jsonl"
    count = 0
    with samples.open("w") as out:
        for path in sorted(DATA.glob("samples_*.jsonl.gz")):
            with gzip.open(path, "rt") as src:
                for line in src:
                    row = json.loads(line)
                    row["sample_id"] = row["model"]
                    out.write(json.dumps(row) + "\n")
                    count += 1
    return tasks, samples, count


def manage(env: dict[str, str], *args: str) -> tuple[float, str]:
    start = time.monotonic()
    done = subprocess.run([PY, "manage.py", *args], cwd=ROOT, env=env, capture_output=True)
    seconds = time.monotonic() - start
    out = done.stdout.decode(errors="replace")
    if done.returncode != 0:
        err = done.stderr.decode(errors="replace")
        raise SystemExit(f"manage.py {' '.join(args)} failed:\n{out[-3000:]}\n{err[-5000:]}")
    return seconds, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rule", default="auto")
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--examples", type=int, default=10)
    parser.add_argument("--keep", action="store_true", help="keep the data folder")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-gsm8k-"))
    env = {**os.environ, "INSPECTOR_DATA_DIR": str(tmp), "PYTHONUNBUFFERED": "1"}
    for name in ("DATABASE_URL", "CELERY_BROKER_URL", "SANDBOX_BACKEND"):
        env.pop(name, None)  # the embedded defaults
    tasks, samples, sample_count = write_inputs(tmp)
    manage(env, "migrate", "--no-input", "-v0")
    import_s, said = manage(
        env, "import_tasks", str(tasks), "--samples", str(samples), "--taskset", "gsm8k",
        "--answer-rule", args.rule,
    )  # fmt: skip
    print(said.strip())
    log = tmp / "worker.log"
    worker, _ = start_worker(env, args.concurrency, log)
    try:
        inspect_s, said = manage(env, "inspect", "gsm8k", "--wait")
    finally:
        stop(worker)
    _, out = manage(env, "shell", "-c", REPORT)
    report = json.loads(out.strip().splitlines()[-1])
    runs = dict(report["runs"])
    total = sum(runs.values())
    print(
        f"\nGSM8K test: {report['tasks']} questions, {sample_count} responses of 8 models, "
        f"rule {args.rule}, worker -c {args.concurrency}, embedded defaults"
    )
    print(f"import {import_s:.1f} s; inspection {inspect_s:.1f} s wall ({report['status']})")
    print(f"runs {total} ({total / inspect_s:.0f} verifications/s):")
    for key, count in sorted(runs.items()):
        print(f"  {key:32} {count}")
    print("\nflags:")
    for code, rows in sorted(report["flags"].items(), key=lambda kv: -len(kv[1])):
        print(f"  {code}: {len(rows)} tasks")
        for row in rows[: args.examples]:
            shown = ", ".join(f"{a} x{n}" for a, n in row["answers"])
            print(f"    {row['task_id']:12} label {row['label']!r:10} conf {row['confidence']:.2f}"
                  f"  answers: {shown}")  # fmt: skip
    print("\nfindings about the set:")
    for finding in report["findings"] or ["(none)"]:
        print(f"  {json.dumps(finding)[:400] if not isinstance(finding, str) else finding}")
    line = [x for x in said.splitlines() if re.search(r"finished in", x)]
    if line:
        print(f"\n{line[-1]}")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.keep:
        print(f"data kept in {tmp}")
    else:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
