"""Terminal tasks' runs: the reference and probe runs a task gets, executing claimed runs in
Docker (a task's image built once per message) and recording each outcome exactly once, and
sweeping the run containers that killed workers left behind.

The Docker work itself is in workers/sandbox/terminal/ and the plain-data analysis of the
outcomes in inspector/detect/terminal.py."""

from __future__ import annotations

import functools
import logging
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from inspector.models import Run, TaskSet, runs_transaction
from inspector.services.lifecycle import runs_execute_in_images

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
    from inspector.detect.terminal_probes import TERMINAL_PROBES

    if not runs:
        return
    executor = _executor()

    def execute(run: Run, tag: str) -> dict:
        mode = _mode(run)
        if run.kind == Run.REFERENCE:
            return executor.run(run.task.source, tag, mode=mode)
        script = run.sample.completion if run.kind == Run.SAMPLE else None
        if run.kind == Run.PROBE:
            script = TERMINAL_PROBES[run.probe]
        return executor.run(run.task.source, tag, script=script, mode=mode)

    runs_execute_in_images(
        runs,
        token=token,
        span=_lease_span(runs),
        image_for=executor.image_for,
        execute=execute,
        record=_terminal_runs_record,
        parallel=settings.TERMINAL_PARALLEL,
        name="terminal",
        mode_of=_mode,
    )


def _mode(run: Run) -> str:
    """The mode a terminal run is in: its own, or faithful for runs made before modes."""
    return run.mode or TaskSet.FAITHFUL


def _terminal_runs_record(results: list[tuple[Run, dict]]) -> int:
    """Record outcomes in one transaction, guarded like the function runs' records so that a
    swept and re-queued run is never recorded twice."""
    from inspector.services.lifecycle import inspection_progress

    finished = timezone.now()
    recorded: dict[int, int] = {}
    with runs_transaction():
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
        inspection_progress(inspection_id, count, release=False)
    return sum(recorded.values())
