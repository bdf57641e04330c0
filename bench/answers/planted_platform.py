"""Benchmark: the planted answer-graded set inspected through the platform, with the real
verifier in the sandbox (issue 17's planted figures).

`bench/answers/planted.py` writes the set (reasoning-gym questions with verified answers,
simulated models of different reliability sharing mistakes, planted wrong labels, questions with
two readings, unanswerable ones, unreadable labels, leaks, duplicates, trivial ones, and
verifier-gaming sample responses); this imports it with `import_tasks` on a fresh
INSPECTOR_DATA_DIR with the embedded defaults, inspects it with `inspect --wait` and a real
Celery worker (-c 2), reads the flags from `export_report`, and scores them against the planted
truth with `bench/answers/scoring.py`. Seed 0 is the development set (thresholds were tuned on
it, with `bench/answers/offline.py`); seed 1 is held out.

Also printed: the inspection's wall time and runs, and how many of the planted verifier-gaming
samples the verifier rewarded (none should be).

Run: .venv/bin/python bench/answers/planted_platform.py [--seed 0] [--tasks 600]
[--concurrency 2] [--samples-per-model 4]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

from humaneval import PY, ROOT, start_worker, stop  # noqa: E402

from bench.answers.planted import generate  # noqa: E402
from bench.answers.scoring import report, score  # noqa: E402

GAMING = r"""
import json, os
from inspector.models import Run
meta = json.load(open(os.environ["GAMING_META"]))
wanted = {(g["task_id"], g["sample_id"]) for g in meta["gaming_samples"]}
rows = [
    outcome
    for task_id, sample_id, outcome in Run.objects.filter(kind="sample").values_list(
        "task__task_id", "sample__sample_id", "outcome"
    )
    if (task_id, sample_id) in wanted
]
print(json.dumps({"gaming": len(rows), "rewarded": sum(1 for o in rows if o == "passed")}))
"""


def manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run([PY, "manage.py", *args], cwd=ROOT, env=env, capture_output=True)
    out = done.stdout.decode(errors="replace")
    if done.returncode != 0:
        err = done.stderr.decode(errors="replace")
        raise SystemExit(f"manage.py {' '.join(args)} failed:\n{out[-3000:]}\n{err[-5000:]}")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tasks", type=int, default=600)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--samples-per-model", type=int, default=4, help="of each of 10 models")
    parser.add_argument("--keep", action="store_true", help="keep the data folder")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix=f"bench-answers-planted-{args.seed}-"))
    env = {**os.environ, "INSPECTOR_DATA_DIR": str(tmp), "PYTHONUNBUFFERED": "1"}
    for name in ("DATABASE_URL", "CELERY_BROKER_URL", "SANDBOX_BACKEND"):
        env.pop(name, None)
    truth = generate(
        tmp, seed=args.seed, tasks=args.tasks, samples_per_model=args.samples_per_model
    )
    manage(env, "migrate", "--no-input", "-v0")
    print(manage(env, "import_tasks", str(tmp / "tasks.jsonl"), "--samples",
                 str(tmp / "samples.jsonl"), "--taskset", "planted").strip())  # fmt: skip
    worker, _ = start_worker(env, args.concurrency, tmp / "worker.log")
    try:
        said = manage(env, "inspect", "planted", "--wait")
    finally:
        stop(worker)
    print([line for line in said.splitlines() if "finished in" in line][-1])
    manage(env, "export_report", "planted", "--output", str(tmp / "report.jsonl"))
    flags = {}
    for line in (tmp / "report.jsonl").read_text().splitlines():
        row = json.loads(line)
        flags[row["task_id"]] = set(row.get("flags") or [])
    print(
        report(
            score(truth, flags),
            f"planted answer-graded set, seed {args.seed}, platform, "
            f"{args.samples_per_model} samples a model",
        )
    )
    env["GAMING_META"] = str(tmp / "meta.json")
    gaming = json.loads(manage(env, "shell", "-c", GAMING).strip().splitlines()[-1])
    print(f"verifier-gaming samples rewarded: {gaming['rewarded']} of {gaming['gaming']}")
    if args.keep:
        print(f"data kept in {tmp}")
    else:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
