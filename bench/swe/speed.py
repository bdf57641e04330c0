"""Benchmark: repository tasks (SWE-bench instances) on the platform against a plain `docker run`
of the same tests, measured in one run on this machine on the 14 fixture instances of
bench/swe/fixtures.py (real projects' sdists: inflection 0.5.1 and cachetools 5.3.3).

Rows, at total concurrency N (default 4):
- plain `docker run`: for each instance whose image builds, `docker run --rm --network none` of
  its image, which applies the gold patch and the test patch with `git apply` and runs
  `python3 -m pytest` on the listed tests' files; R times each (default 3), N at once. This is
  the floor: one container, no report, no isolation, no probes. Its images are the platform's
  own, built (or found) before the clock starts; the platform's row then finds them by their
  content hash, as a second inspection of the same set does, so neither row counts builds;
- the platform: `manage.py import_tasks instances.jsonl --environments environments.tar.gz
  --samples predictions.jsonl`, one Celery worker process (`-c 1`, SWE_PARALLEL=N,
  SANDBOX_BACKEND=docker) on a fresh INSPECTOR_DATA_DIR, and the wall clock of `manage.py
  inspect NAME --wait`. Its default inspection runs, per instance, the tests with no fix and
  with the gold patch (SWE_REFERENCE_REPEATS each), each sampled patch, each probe (in isolated
  mode: a container for the agent, a fresh one for the check) and a leak scan, so it is
  compared by runs per minute, with the runs by kind.
- the swebench harness is not run: its evaluation builds its images from a base image pulled
  from a registry and a conda environment downloaded at build time (neither reachable here),
  and it knows a repository only through its own table of specifications
  (MAP_REPO_VERSION_TO_SPECS), which holds neither fixture project.

Run: .venv/bin/python bench/swe/speed.py [--concurrency 4] [--repeats 3] [--keep]
"""

from __future__ import annotations

import argparse
import base64
import collections
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from humaneval import manage, start_worker, stop  # noqa: E402  (the platform's bench helpers)

from bench.swe import fixtures  # noqa: E402

PLAIN_SCRIPT = r"""set -e
cd "$WORKDIR"
printf %s "$GOLD" | base64 -d | git apply -
printf %s "$TESTS" | base64 -d | git apply -
set +e
$TEST_COMMAND -q $FILES >/dev/null 2>&1
echo "exit=$?"
"""

DB_SCRIPT = """
import json
from collections import Counter
from inspector.models import Flag, Inspection, Run
insp = Inspection.objects.order_by("-id").first()
runs = list(Run.objects.filter(inspection=insp).values_list("kind", "status", "outcome", "duration"))
print(json.dumps({
    "status": insp.status,
    "runs_total": insp.runs_total,
    "runs_done": insp.runs_done,
    "by_kind": sorted(Counter(k for k, *_ in runs).items()),
    "by_outcome": sorted(Counter(o or s for _, s, o, _ in runs).items()),
    "sandbox_s": sum(d or 0 for *_, d in runs),
    "flags": sorted({(t, c) for t, c in Flag.objects.filter(inspection=insp).values_list(
        "task__task_id", "code")}),
}))
"""


def plain_docker_runs(fixture, concurrency: int, repeats: int) -> dict:
    """Build (or find) each instance's image through the platform's executor, then time plain
    `docker run`s of its tests with the gold patch, `concurrency` at once."""
    from workers.sandbox.swe import SweExecutor

    executor = SweExecutor()
    jobs = []
    skipped = []
    for instance_id, source in fixtures.sources(fixture).items():
        build = executor.image_for(source)
        if not build.ok:
            skipped.append(instance_id)
            continue
        files = sorted(
            {t.split("::", 1)[0] for t in source["FAIL_TO_PASS"] + source["PASS_TO_PASS"]}
        )
        env = {
            "WORKDIR": source["workdir"],
            "GOLD": base64.b64encode(source["patch"].encode()).decode(),
            "TESTS": base64.b64encode(source["test_patch"].encode()).decode(),
            "TEST_COMMAND": source["test_command"],
            "FILES": " ".join(files),
        }
        jobs += [(instance_id, build.tag, env)] * repeats

    def one(job) -> tuple[str, float, str]:
        instance_id, tag, env = job
        argv = ["docker", "run", "--rm", "--network", "none", "--memory", "2g", "--cpus", "1"]
        for key in env:
            argv += ["-e", key]
        argv += [tag, "bash", "-c", PLAIN_SCRIPT]
        started = time.monotonic()
        done = subprocess.run(
            argv, env={**os.environ, **env}, capture_output=True, text=True, timeout=600
        )
        return instance_id, time.monotonic() - started, (done.stdout.strip() or done.stderr)[-200:]

    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        results = list(pool.map(one, jobs))
    seconds = time.monotonic() - started
    executor.sweep()
    return {
        "seconds": seconds,
        "runs": len(results),
        "median_run": statistics.median(s for _, s, _ in results) if results else 0.0,
        "exits": collections.Counter(out.splitlines()[-1] for _, _, out in results),
        "skipped": skipped,
    }


def platform_inspection(fixture, tmp: Path, concurrency: int) -> dict:
    data = tmp / "platform"
    data.mkdir()
    env = {
        **os.environ,
        "INSPECTOR_DATA_DIR": str(data),
        "PYTHONUNBUFFERED": "1",
        "SANDBOX_BACKEND": "docker",
        "SWE_PARALLEL": str(concurrency),
    }
    for key in ("DATABASE_URL", "CELERY_BROKER_URL"):
        env.pop(key, None)
    log = data / "worker.log"
    worker = None
    try:
        manage(env, "migrate", "--no-input", "-v0")
        import_s, _ = manage(
            env,
            "import_tasks",
            str(fixture.instances_path),
            "--taskset",
            "swe",
            "--environments",
            str(fixture.environments_path),
            "--samples",
            str(fixture.predictions_path),
        )
        worker, _ = start_worker(env, 1, log)
        seconds, _ = manage(env, "inspect", "swe", "--wait")
        stop(worker)
        db = json.loads(manage(env, "shell", "-c", DB_SCRIPT)[1].strip().splitlines()[-1])
    finally:
        stop(worker)
    db["seconds"] = seconds
    db["import_s"] = import_s
    return db


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3, help="plain docker runs per instance")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "inspector.settings")

    tmp = Path(tempfile.mkdtemp(prefix="bench-swe-"))
    try:
        started = time.monotonic()
        fixture = fixtures.build(tmp / "fixtures")
        print(
            f"fixtures: {len(fixture.instances)} instances built in {time.monotonic() - started:.1f} s"
        )
        plain = plain_docker_runs(fixture, args.concurrency, args.repeats)
        platform = platform_inspection(fixture, tmp, args.concurrency)
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)

    plain_rate = 60 * plain["runs"] / plain["seconds"]
    rate = 60 * platform["runs_done"] / platform["seconds"]
    print(f"\nconcurrency {args.concurrency}, {os.cpu_count()} cores")
    print(f"{'row':<28}{'runs':>6}{'wall s':>9}{'runs/min':>10}")
    print(
        f"{'plain docker run (gold)':<28}{plain['runs']:>6}{plain['seconds']:>9.1f}{plain_rate:>10.1f}"
    )
    print(
        f"{'platform inspection':<28}{platform['runs_done']:>6}{platform['seconds']:>9.1f}{rate:>10.1f}"
    )
    print(f"ratio platform / plain: {rate / plain_rate:.2f}x runs per minute")
    print(
        f"plain: median {plain['median_run']:.2f} s a run; last lines {dict(plain['exits'])}; "
        f"instances whose image does not build (left out): {plain['skipped']}"
    )
    print(
        f"platform: status {platform['status']}, {platform['runs_done']}/{platform['runs_total']} "
        f"runs, import {platform['import_s']:.1f} s, "
        f"{platform['sandbox_s'] / max(platform['runs_done'], 1):.2f} s a run in the sandbox"
    )
    print("  runs by kind: " + ", ".join(f"{k} {n}" for k, n in platform["by_kind"]))
    print("  outcomes: " + ", ".join(f"{k} {n}" for k, n in platform["by_outcome"]))
    flagged = collections.defaultdict(list)
    for task_id, code in platform["flags"]:
        flagged[task_id].append(code)
    for task_id, codes in sorted(flagged.items()):
        print(f"  {task_id}: {', '.join(codes)}")
    print(
        "swebench harness: not run (its images come from a registry's base image and a conda "
        "download at build time; neither fixture project is in its specifications table)"
    )


if __name__ == "__main__":
    main()
