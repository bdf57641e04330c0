"""Terminal tasks' runs: the reference and probe runs a task gets, executing claimed runs in
Docker (a task's image built once per message) and recording each outcome exactly once, and
sweeping the run containers that killed workers left behind.

The Docker work itself is in workers/sandbox/terminal/ and the plain-data analysis of the
outcomes in inspector/detect/terminal.py."""

from __future__ import annotations

import functools
import logging
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from inspector.models import Inspection, Run, TaskSet
from inspector.services.lifecycle import runs_hand_back, worker_stopping

logger = logging.getLogger(__name__)


def terminal_runs_plan(*, mode: str, probes: list[str], repeats: dict[str, int]):
    """(kind, probe, mode) triples for one task's runs besides its samples: reference runs in
    the set's mode, and each probe in that mode and, when faithful, in isolated mode too (so the
    report says whether isolating the check defeats it)."""
    plan = [(Run.REFERENCE, "", mode, r) for r in range(1, repeats["reference"] + 1)]
    modes = [mode] + ([TaskSet.ISOLATED] if mode == TaskSet.FAITHFUL else [])
    for probe in probes:
        for probe_mode in modes:
            plan.extend((Run.PROBE, probe, probe_mode, r) for r in range(1, repeats["probe"] + 1))
    return plan


@functools.cache
def _executor():
    from workers.sandbox.terminal import TerminalExecutor

    return TerminalExecutor(
        build_network=settings.TERMINAL_BUILD_NETWORK,
        run_network=settings.TERMINAL_RUN_NETWORK,
        output_tail_bytes=settings.RUN_TAIL_BYTES,
    )


def terminal_sweep() -> int:
    """Remove run containers that killed workers left behind."""
    return _executor().sweep()


def _lease_span(runs: list[Run]) -> timedelta:
    worst = max(
        float(r.task.source.get("agent_timeout_sec") or 0)
        + float(r.task.source.get("verifier_timeout_sec") or 0)
        for r in runs
    )
    build = max(float(r.task.source.get("build_timeout_sec") or 0) for r in runs)
    return timedelta(seconds=worst + build + settings.RUN_LEASE_SLACK_SECONDS)


def terminal_runs_execute(runs: list[Run], *, token: str) -> None:
    """Execute claimed terminal runs, TERMINAL_PARALLEL at a time, and record each outcome
    exactly once. A task's image is built (or found by its content hash) once per message."""
    from inspector import enqueue
    from inspector.detect.terminal_probes import TERMINAL_PROBES

    if not runs:
        return
    executor = _executor()
    span = _lease_span(runs)
    lease = timezone.now() + span
    ids = [r.pk for r in runs]
    Run.objects.filter(pk__in=ids, status=Run.RUNNING, worker=token).update(lease_expires_at=lease)

    builds: dict[int, Future] = {}
    builds_lock = threading.Lock()
    build_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="terminal-build")

    def build_of(run: Run):
        with builds_lock:
            future = builds.get(run.task_id)
            if future is None:
                future = builds[run.task_id] = build_pool.submit(
                    executor.image_for, run.task.source
                )
        return future.result()

    def one(run: Run) -> tuple[Run, dict]:
        if worker_stopping():
            return run, _HANDED_BACK
        source = run.task.source
        try:
            build = build_of(run)
        except Exception as exc:  # noqa: BLE001 - an engine fault is the run's sandbox error
            return run, _sandbox_error(f"building the image failed: {exc}")
        build_detail = {
            "tag": build.tag,
            "cached": build.cached,
            "seconds": round(build.seconds, 3),
        }
        if not build.ok and build.sandbox_error:  # the engine's fault, not the task's
            return run, _sandbox_error(f"building the image failed: {build.reason}")
        if not build.ok:
            return run, {
                "outcome": "build_failed",
                "reward": None,
                "reason": build.reason,
                "mode": run.mode,
                "seconds": round(build.seconds, 3),
                "build": {**build_detail, "log": build.log, "reason": build.reason},
            }
        if inspection_failed(run):
            return run, _sandbox_error(f"inspection #{run.inspection_id} failed")
        try:
            if run.kind == Run.REFERENCE:
                result = executor.run(source, build.tag, mode=run.mode or TaskSet.FAITHFUL)
            else:
                script = run.sample.completion if run.kind == Run.SAMPLE else None
                if run.kind == Run.PROBE:
                    script = TERMINAL_PROBES[run.probe]
                result = executor.run(
                    source, build.tag, script=script, mode=run.mode or TaskSet.FAITHFUL
                )
        except Exception as exc:  # noqa: BLE001
            logger.exception("terminal run %s failed in the executor", run.pk)
            result = _sandbox_error(f"{type(exc).__name__}: {exc}")
        result["build"] = build_detail
        return run, result

    pending: list[tuple[Run, dict]] = []
    handed_back: list[Run] = []  # not started: this worker is stopping
    flushed = time.monotonic()
    try:
        with ThreadPoolExecutor(
            max_workers=max(1, settings.TERMINAL_PARALLEL), thread_name_prefix="terminal-run"
        ) as pool:
            futures = [pool.submit(one, run) for run in runs]
            for future in as_completed(futures):
                run, result = future.result()
                if result is _HANDED_BACK:
                    handed_back.append(run)
                    continue
                if (
                    result["outcome"] == "sandbox_error"
                    and run.attempts < settings.RUN_MAX_ATTEMPTS
                ):
                    logger.warning("run %s: sandbox error, retrying: %s", run.pk, result["reason"])
                    if Run.objects.filter(
                        pk=run.pk, status=Run.RUNNING, attempts=run.attempts
                    ).update(status=Run.QUEUED, error=str(result.get("reason", ""))[:2000]):
                        enqueue.runs_requeue_after_commit([run.pk])
                    continue
                pending.append((run, result))
                now = timezone.now()
                if len(pending) >= 8 or time.monotonic() - flushed > 0.5:
                    _terminal_runs_record(pending)
                    pending, flushed = [], time.monotonic()
                if lease - now < span / 2:
                    lease = now + span
                    Run.objects.filter(pk__in=ids, status=Run.RUNNING, worker=token).update(
                        lease_expires_at=lease
                    )
    finally:
        build_pool.shutdown(wait=False, cancel_futures=True)
        if pending:
            _terminal_runs_record(pending)
        runs_hand_back(handed_back, token=token)


def inspection_failed(run: Run) -> bool:
    return run.inspection.status == Inspection.FAILED


# What `one` returns for a run it did not start because the worker is stopping.
_HANDED_BACK: dict = {"outcome": "handed_back"}


def _sandbox_error(reason: str) -> dict:
    return {"outcome": "sandbox_error", "reward": None, "reason": reason, "seconds": 0.0}


def _terminal_runs_record(results: list[tuple[Run, dict]]) -> int:
    """Record outcomes in one transaction, guarded like the function runs' records so that a
    swept and re-queued run is never recorded twice."""
    from inspector.services.lifecycle import inspection_progress

    finished = timezone.now()
    recorded: dict[int, int] = {}
    with transaction.atomic():
        for run, result in results:
            agent = result.get("agent") or {}
            verifier = result.get("verifier") or {}
            detail = {
                key: result[key]
                for key in ("build", "agent", "verifier", "rewards")
                if result.get(key) is not None
            }
            updated = Run.objects.filter(
                pk=run.pk, status=Run.RUNNING, attempts=run.attempts
            ).update(
                status=Run.DONE,
                outcome=str(result["outcome"]),
                exit_code=verifier.get("exit_code", agent.get("exit_code")),
                duration=float(result.get("seconds") or 0.0),
                reward=result.get("reward"),
                detail=detail,
                error=str(result.get("reason") or "")[:2000],
                finished_at=finished,
                lease_expires_at=None,
            )
            if updated:
                run.outcome = str(result["outcome"])
                recorded[run.inspection_id] = recorded.get(run.inspection_id, 0) + 1
    for inspection_id, count in recorded.items():
        inspection_progress(inspection_id, count)
    return sum(recorded.values())
