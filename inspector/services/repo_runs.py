"""Repository tasks' runs (SWE-bench instances): the runs an instance gets, executing claimed runs
in Docker (an instance's image built once per message) and recording each outcome exactly once,
and the plain data the analysis reads back from them.

The Docker work is in workers/sandbox/swe/ (SweExecutor), the probes in
inspector/detect/swe_probes.py and the flags in inspector/detect/swe.py."""

from __future__ import annotations

import functools
import logging
import threading
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from inspector.models import Inspection, Run, runs_transaction
from inspector.services.lifecycle import run_sandbox_error, runs_execute_in_images

logger = logging.getLogger(__name__)

# The executor's outcome -> the run's: a resolved instance is a passed run (the rates, the
# manifest's figures and drift count passes), an unresolved one a failed run; the others
# (apply_failed, broken, timed_out, build_failed, sandbox_error) keep their names.
OUTCOMES = {"resolved": "passed", "unresolved": "failed"}
DROP_HUNK_FAMILY = "drop-hunk"


def repo_config() -> dict:
    return {
        "reference_repeats": settings.SWE_REFERENCE_REPEATS,
        "sample_repeats": settings.SWE_SAMPLE_REPEATS,
        "probe_repeats": settings.SWE_PROBE_REPEATS,
        "probes": list(settings.SWE_PROBES),
        "parallel": settings.SWE_PARALLEL,
    }


def probe_wanted(name: str, wanted: list[str]) -> bool:
    """Is the probe among the configured names (empty: all; "drop-hunk": every drop-hunk-<i>)?"""
    if not wanted:
        return True
    from inspector.detect.swe_probes import DROP_HUNK

    return name in wanted or (name.startswith(DROP_HUNK) and DROP_HUNK_FAMILY in wanted)


def repo_runs_plan(source: dict, *, config: dict, mode: str) -> list[tuple[str, str, str, int]]:
    """(kind, probe, mode, repeat) of one instance's runs besides its samples: the tests with no
    fix and with the gold patch, each `reference_repeats` times; each probe `probe_repeats`
    times; one leak scan. Every run is in the set's mode."""
    from inspector.detect.swe_probes import swe_probes

    refs = range(1, config["reference_repeats"] + 1)
    plan = [(Run.NOFIX, "", mode, r) for r in refs]
    plan += [(Run.REFERENCE, "", mode, r) for r in refs]
    for probe in swe_probes(source):
        if probe_wanted(probe["name"], config["probes"]):
            plan += [
                (Run.PROBE, probe["name"], mode, r) for r in range(1, config["probe_repeats"] + 1)
            ]
    plan.append((Run.LEAK_SCAN, "", mode, 1))
    return plan


@functools.cache
def _executor():
    from workers.sandbox.swe import SweExecutor

    return SweExecutor(
        build_network=settings.TERMINAL_BUILD_NETWORK,
        output_tail_bytes=settings.RUN_TAIL_BYTES,
    )


def _lease_span(runs: list[Run]) -> timedelta:
    worst = max(float(r.task.source.get("timeout_sec") or 0) for r in runs)
    build = max(float(r.task.source.get("build_timeout_sec") or 0) for r in runs)
    # The agent stage and the test stage each have the instance's timeout.
    return timedelta(seconds=2 * worst + build + settings.RUN_LEASE_SLACK_SECONDS)


def repo_runs_execute(runs: list[Run], *, token: str) -> None:
    """Execute claimed repository runs, SWE_PARALLEL at a time, and record each outcome exactly
    once. An instance's image is built (or found by its content hash) once per message."""
    from inspector.detect.swe_probes import swe_probes

    if not runs:
        return
    executor = _executor()
    probes: dict[int, dict[str, dict]] = {}
    lock = threading.Lock()

    def probe_of(run: Run) -> dict | None:
        with lock:
            if run.task_id not in probes:
                probes[run.task_id] = {p["name"]: p for p in swe_probes(run.task.source)}
            return probes[run.task_id].get(run.probe)

    def execute(run: Run, tag: str) -> dict:
        source = run.task.source
        mode = _mode(run)
        if run.kind == Run.LEAK_SCAN:
            return _leak_result(executor.leak_scan(source, tag))
        if run.kind == Run.NOFIX:
            return executor.run(source, tag, mode=mode)
        if run.kind == Run.REFERENCE:
            return executor.run(source, tag, patch=source.get("patch") or "", mode=mode)
        if run.kind == Run.SAMPLE:
            return executor.run(source, tag, patch=run.sample.completion or "", mode=mode)
        probe = probe_of(run)
        if probe is None:
            return {
                "outcome": "skipped",
                "reason": f"no probe {run.probe!r} for this instance",
                "seconds": 0.0,
            }
        given = {"script": probe["script"]} if "script" in probe else {"patch": probe["patch"]}
        return executor.run(source, tag, mode=mode, **given)

    runs_execute_in_images(
        runs,
        token=token,
        span=_lease_span(runs),
        image_for=executor.image_for,
        execute=execute,
        record=_repo_runs_record,
        parallel=settings.SWE_PARALLEL,
        name="swe",
        mode_of=_mode,
    )


def _mode(run: Run) -> str:
    """The mode a repository run is in: its own, or isolated for runs made before modes."""
    return run.mode or "isolated"


def _leak_result(scan: dict) -> dict:
    """The leak scan as a run: outcome `leak` or `no_leak` (`sandbox_error` when the engine
    failed), the scan itself in `leak`."""
    reason = scan.get("reason") or ""
    if reason.startswith("docker:"):
        return run_sandbox_error(reason)
    return {
        "outcome": "leak" if scan.get("leak") else "no_leak",
        "reason": reason,
        "seconds": float(scan.get("seconds") or 0.0),
        "leak": {k: v for k, v in scan.items() if k != "seconds"},
    }


# What a run keeps of the executor's result in Run.detail (plain JSON).
_DETAIL_KEYS = (
    "outcome",
    "resolved",
    "swebench_resolved",
    "tests",
    "report",
    "apply",
    "collection_error",
    "restored_config",
    "build",
    "agent",
    "verifier",
    "leak",
)


def _repo_runs_record(results: list[tuple[Run, dict]]) -> int:
    """Record outcomes in one transaction, guarded like the other runs' records so that a swept
    and re-queued run is never recorded twice."""
    from inspector.services.lifecycle import inspection_progress

    finished = timezone.now()
    recorded: dict[int, int] = {}
    with runs_transaction():
        for run, result in results:
            agent = result.get("agent") or {}
            verifier = result.get("verifier") or {}
            apply = result.get("apply") or {}
            detail = {key: result[key] for key in _DETAIL_KEYS if result.get(key) is not None}
            outcome = OUTCOMES.get(str(result["outcome"]), str(result["outcome"]))
            updated = Run.objects.filter(
                pk=run.pk, status=Run.RUNNING, attempts=run.attempts
            ).update(
                status=Run.DONE,
                outcome=outcome,
                exit_code=verifier.get("exit_code", agent.get("exit_code")),
                duration=float(result.get("seconds") or 0.0),
                detail=detail,
                stdout_tail=str(verifier.get("output_tail") or ""),
                stderr_tail=str(agent.get("output_tail") or apply.get("output_tail") or ""),
                error=str(result.get("reason") or "")[:2000],
                finished_at=finished,
                lease_expires_at=None,
            )
            if updated:
                run.outcome = outcome
                recorded[run.inspection_id] = recorded.get(run.inspection_id, 0) + 1
    for inspection_id, count in recorded.items():
        inspection_progress(inspection_id, count, release=False)
    return sum(recorded.values())


# -- what the analysis reads ------------------------------------------------------------------

# The run kinds as inspector/detect/swe.py names the solutions.
_SOLUTION_KIND = {Run.NOFIX: "nofix", Run.REFERENCE: "reference", Run.SAMPLE: "sample"}


def repo_analysis(inspection: Inspection):
    """The inspection's repository runs as plain data, analysed by inspector/detect/swe.py:
    returns (RepoAnalysis, runs per task). Each task's statement lint is run again and stored
    (it is what the task page and the report show)."""
    from inspector.detect.swe import analyse_repo_runs, statement_lint
    from inspector.detect.swe_probes import DROP_HUNK, swe_probes
    from inspector.models import Task, rows_update

    records: list[dict] = []
    leaks: dict[int, dict] = {}
    runs_of: dict[int, int] = {}
    rows = Run.objects.filter(inspection_id=inspection.pk).values_list(
        "pk", "task_id", "kind", "sample__sample_id", "sample__model", "probe", "repeat",
        "outcome", "mode", "error", "detail",
    )  # fmt: skip
    for row in rows.iterator(chunk_size=2000):
        pk, task_pk, kind, sample_id, model, probe, repeat, outcome, mode, error, detail = row
        runs_of[task_pk] = runs_of.get(task_pk, 0) + 1
        detail = detail or {}
        if kind == Run.LEAK_SCAN:
            if outcome in ("leak", "no_leak"):
                leaks[task_pk] = detail.get("leak") or {}
            elif outcome == "build_failed":
                records.append(_build_failed(pk, task_pk, "nofix", "", repeat, error, detail))
            continue
        solution_kind = _SOLUTION_KIND.get(kind, "probe")
        key = sample_id if kind == Run.SAMPLE else (probe or solution_kind)
        if outcome == "build_failed":
            records.append(_build_failed(pk, task_pk, solution_kind, key, repeat, error, detail))
            continue
        records.append(
            {
                "run_id": pk,
                "task_key": task_pk,
                "solution_kind": solution_kind,
                "solution_key": key,
                "repeat": repeat,
                "outcome": detail.get("outcome") or outcome,
                "tests": detail.get("tests") or {},
                "collection_error": detail.get("collection_error") or "",
                "reason": error,
                "mode": mode,
                "model": model or "",
            }
        )
    tasks: dict[int, dict] = {}
    linted: list[Task] = []
    for task in Task.objects.filter(version_id=inspection.version_id, kind=Task.REPO).only(
        "pk", "source", "fail_to_pass", "pass_to_pass", "lint"
    ):
        hunks = {
            p["name"]: {"file": p["file"], "header": p["header"]}
            for p in swe_probes(task.source)
            if p["name"].startswith(DROP_HUNK)
        }
        tasks[task.pk] = {
            "fail_to_pass": task.fail_to_pass,
            "pass_to_pass": task.pass_to_pass,
            "leak": leaks.get(task.pk),
            "hunks": hunks,
        }
        lint = statement_lint(task.source)
        if lint != task.lint:
            task.lint = lint
            linted.append(task)
    rows_update(linted, ("lint",))
    analysis = analyse_repo_runs(
        records,
        tasks,
        harness_share=settings.HARNESS_FINDING_SHARE,
        harness_min_tasks=settings.HARNESS_FINDING_MIN_TASKS,
    )
    return analysis, runs_of


def _build_failed(pk, task_pk, solution_kind, key, repeat, error, detail) -> dict:
    build = detail.get("build") or {}
    return {
        "run_id": pk,
        "task_key": task_pk,
        "solution_kind": solution_kind,
        "solution_key": key,
        "repeat": repeat,
        "outcome": "build_failed",
        "tests": {},
        "collection_error": "",
        "reason": build.get("log") or error,
    }
