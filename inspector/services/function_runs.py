"""Executing function tasks' runs in a sandbox session and recording each outcome exactly once."""

from __future__ import annotations

import functools
import logging
import time
import uuid
from datetime import timedelta
from typing import NamedTuple

from django.conf import settings
from django.db.models import F
from django.utils import timezone

from inspector import enqueue
from inspector.detect.probes import PROBES
from inspector.models import (
    Inspection,
    Run,
    Task,
    lease_from_now,
    runs_transaction,
)
from inspector.services.lifecycle import (
    inspection_progress,
    runs_hand_back,
    runs_not_recorded,
    runs_send_again,
    worker_stopping,
)
from inspector.services.terminal_runs import terminal_runs_execute
from workers.sandbox import Execution, Limits, Outcome, SandboxUnavailable, get_sandbox
from workers.sandbox.runner import MAX_FRAME
from workers.sandbox.session import FunctionSession, FunctionTask

logger = logging.getLogger(__name__)


@functools.cache
def sandbox_backend():
    return get_sandbox(
        settings.SANDBOX_BACKEND,
        allow_unsandboxed=settings.SANDBOX_ALLOW_UNSANDBOXED,
        python=settings.SANDBOX_PYTHON or None,
        cgroups=settings.SANDBOX_CGROUPS,
        cgroup_root=settings.SANDBOX_CGROUP_ROOT or None,
        verifier_lib=settings.VERIFIER_LIB or None,
    )


def run_limits() -> Limits:
    return Limits(
        wall_seconds=settings.RUN_WALL_SECONDS,
        memory_bytes=settings.RUN_MEMORY_MB * 1024 * 1024,
        max_processes=settings.RUN_MAX_PROCESSES,
        output_bytes=settings.RUN_OUTPUT_BYTES,
        tail_bytes=settings.RUN_TAIL_BYTES,
    )


# A mutant may run this many times longer than its reference's first run (see
# run_wall_seconds).
MUTANT_WALL_FACTOR = 20


def _run_crashed(run: Run, exc: Exception, session: FunctionSession | None) -> Execution:
    """A run whose execution raised (a completion too large for the sandbox's messages, a bug):
    its own sandbox error, retried like any; the session is closed, the message goes on."""
    logger.exception("run %s of inspection %s raised", run.pk, run.inspection_id)
    if session is not None:
        try:
            session.close()
        except Exception:  # noqa: BLE001
            logger.exception("closing the session after run %s", run.pk)
    return error_execution(f"{type(exc).__name__}: {str(exc)[:500]}")


def run_completion(run: Run) -> str:
    """The completion a run executes (for a behaviour run: the solution it observes)."""
    if run.kind == Run.MUTANT or (run.kind == Run.BEHAVIOUR and run.probe.startswith("mutant:")):
        return run.detail["completion"]
    if run.kind == Run.SAMPLE or (run.kind == Run.BEHAVIOUR and run.sample_id):
        return run.sample.completion
    if run.kind == Run.PROBE:
        return PROBES[run.probe]
    return run.task.canonical_solution


PROGRAM_IN_SESSION_MAX_CHARS = MAX_FRAME // 8


def _behaviour_execute(run: Run, done: dict[str, Execution], session: FunctionSession) -> Execution:
    """Call the run's solution on the task's behaviour inputs, in a pristine fork of the
    message's session (FunctionSession.run_program: as a one-off sandbox would run it, at the
    cost of a fork, not of a sandbox's start); the analysis reads the behaviour vector from its
    stdout. The same program (the same solution of the same task on the same inputs: samples
    that repeat each other or the reference) runs once a message: `done` holds what each
    program that finished printed, by its text."""
    program, limits = _behaviour_program(run)
    if program in done:
        return done[program]
    if len(program) > PROGRAM_IN_SESSION_MAX_CHARS:
        # Too large for a message to the session's runner (a frame holds 64 MiB of JSON, and
        # JSON may take 6 bytes a character): a one-off sandbox reads it from a file.
        execution = sandbox_backend().run_python(program, limits=limits)
    else:
        execution = session.run_program(program, limits=limits)
    if execution.outcome == Outcome.PASSED:
        done[program] = execution
    return execution


class BehaviourLimits(NamedTuple):
    per_call_seconds: float
    total_seconds: float
    max_timeouts: int


def behaviour_config() -> dict[str, float | int]:
    """The behaviour programs' limits as the settings give them; an inspection fixes them in its
    config when it starts (`inspection_config`), so every worker gives a program the same."""
    return {
        "per_call": settings.BEHAVIOUR_PER_CALL_SECONDS,
        "total": settings.BEHAVIOUR_TOTAL_SECONDS,
        "max_timeouts": settings.BEHAVIOUR_MAX_TIMEOUTS,
        "candidate_total": settings.BEHAVIOUR_CANDIDATE_TOTAL_SECONDS,
        "candidate_max_timeouts": settings.BEHAVIOUR_CANDIDATE_MAX_TIMEOUTS,
    }


def behaviour_limits(inspection: Inspection, *, reference: bool) -> BehaviourLimits:
    """A behaviour program's limits in `inspection`. Every program's call has the same time, so
    a timeout means what it means for the reference; a candidate's program (a sample's, a
    mutant's) stops sooner: at its first timeout, and after fewer seconds of calls; what it
    does not reach is `~skipped`, an unknown no rule compares. An inspection started before
    its config held them gives every program the reference's limits, as it did then."""
    fixed = (inspection.config or {}).get("behaviour_limits") or {
        **behaviour_config(),
        "candidate_total": settings.BEHAVIOUR_TOTAL_SECONDS,
        "candidate_max_timeouts": settings.BEHAVIOUR_MAX_TIMEOUTS,
    }
    own = "" if reference else "candidate_"
    return BehaviourLimits(
        float(fixed["per_call"]), float(fixed[own + "total"]), int(fixed[own + "max_timeouts"])
    )


def _behaviour_program(run: Run) -> tuple[str, Limits]:
    from inspector.detect.behaviour import TAIL_BYTES, behaviour_program, wall_seconds

    task = run.task
    completion = run_completion(run)
    # A sample that repeats the reference is the reference's program: its limits too, so the
    # copies share its one run (_behaviour_execute).
    reference = run.probe == Run.REFERENCE or completion == task.canonical_solution
    fixed = behaviour_limits(run.inspection, reference=reference)
    program = behaviour_program(
        task.prompt,
        completion,
        task.entry_point,
        task.behaviour_inputs,
        per_call_seconds=fixed.per_call_seconds,
        total_seconds=fixed.total_seconds,
        max_timeouts=fixed.max_timeouts,
        contract=(task.source or {}).get("contract") or "",
    )
    limits = run_limits()
    limits = Limits(
        wall_seconds=wall_seconds(
            per_call_seconds=fixed.per_call_seconds, total_seconds=fixed.total_seconds
        ),
        memory_bytes=limits.memory_bytes,
        max_processes=limits.max_processes,
        output_bytes=limits.output_bytes,
        tail_bytes=max(limits.tail_bytes, TAIL_BYTES),
    )
    return program, limits


def run_wall_seconds(
    run: Run, reference_seconds: float | None, timed_out_before: bool
) -> float | None:
    """A mutant's or a sample's wall clock, shorter than the run's limit where that is safe
    (None: the session's own limit holds). The floors come from the inspection's config,
    fixed when it started, so every worker gives a run the same clock.

    A mutant: 20 times its task's first reference run (`reference_seconds`; the references'
    first runs are recorded before any mutant is sent, see inspection_dispatch), at least
    `mutant_wall_seconds` (1 s), at most the run's limit; the run's limit when that reference
    run did not pass. A mutant runs once, and its verdict only counts it.

    A sample: `sample_wall_seconds` (3 s) only once an earlier repeat of it reached its clock
    (`timed_out_before`); so a sample gets the run's whole limit until it has shown that it
    needs more, and a right but slow sample is judged as it always was. (A clock taken from the
    reference let such a sample pass in one repeat and time out in another, a false `flaky`, or
    pass in one inspection and not in the next, a false `drift`: both found by outside attacks.)
    A sample that loops forever costs the run's limit once, then 3 s a repeat."""
    config = run.inspection.config or {}
    limit = float(config.get("wall_seconds") or settings.RUN_WALL_SECONDS)
    if run.kind == Run.SAMPLE:
        if not timed_out_before:
            return None
        floor = config.get("sample_wall_seconds", settings.INSPECT_SAMPLE_WALL_SECONDS)
        return min(limit, float(floor))
    if run.kind != Run.MUTANT or reference_seconds is None:
        return None
    floor = config.get("mutant_wall_seconds", settings.INSPECT_MUTANT_WALL_SECONDS)
    return min(limit, max(float(floor), MUTANT_WALL_FACTOR * reference_seconds))


def first_reference_seconds(runs: list[Run]) -> dict[tuple[int, int], float]:
    """(inspection, task) -> the time of the task's first reference run, where it passed and
    is recorded, for the tasks of `runs` that have mutants among them."""
    wanted = {(r.inspection_id, r.task_id) for r in runs if r.kind == Run.MUTANT}
    if not wanted:
        return {}
    rows = Run.objects.filter(
        inspection_id__in={i for i, _ in wanted},
        task_id__in={t for _, t in wanted},
        kind=Run.REFERENCE,
        repeat=1,
        status=Run.DONE,
        outcome=str(Outcome.PASSED),
    ).values_list("inspection_id", "task_id", "duration")
    return {(i, t): d for i, t, d in rows if (i, t) in wanted and d is not None}


def samples_timed_out(runs: list[Run]) -> dict[tuple[int, int], int]:
    """(inspection, sample) -> the first repeat of the sample that is recorded as timed out,
    for the samples of `runs` that run a later repeat here."""
    later = {(r.inspection_id, r.sample_id) for r in runs if r.kind == Run.SAMPLE and r.repeat > 1}
    if not later:
        return {}
    rows = (
        Run.objects.filter(
            inspection_id__in={i for i, _ in later},
            sample_id__in={s for _, s in later},
            kind=Run.SAMPLE,
            status=Run.DONE,
            outcome=str(Outcome.TIMED_OUT),
        )
        .order_by("repeat")
        .values_list("inspection_id", "sample_id", "repeat")
    )
    first: dict[tuple[int, int], int] = {}
    for inspection_id, sample_id, repeat in rows:
        if (inspection_id, sample_id) in later:
            first.setdefault((inspection_id, sample_id), repeat)
    return first


def runs_execute(*, run_ids: list[int], worker: str = "") -> list[Run]:
    """Claim the queued runs among `run_ids`, execute them in turn in one sandbox session (a
    clean fork per run, behaviour programs included) and record each outcome exactly once.
    Returns the runs this worker executed; runs another worker holds (a redelivered message)
    are skipped.

    In a worker that is stopping, a message not started yet goes back to the broker unclaimed,
    and one under way hands back the runs it has not started (the one running finishes)."""
    if worker_stopping():
        runs_send_again(run_ids)
        return []
    now = timezone.now()
    # Claimed under a token of this call, so one query tells which runs are ours.
    token = f"{worker[:180]}#{uuid.uuid4().hex[:12]}"
    lease_span = timedelta(seconds=settings.RUN_WALL_SECONDS + settings.RUN_LEASE_SLACK_SECONDS)
    renew_at = time.monotonic() + lease_span.total_seconds() / 2
    claimed = Run.objects.filter(pk__in=run_ids, status=Run.QUEUED).update(
        status=Run.RUNNING,
        attempts=F("attempts") + 1,
        lease_expires_at=lease_from_now(lease_span),
        worker=token,
        started_at=now,
    )
    if claimed < len(run_ids):
        logger.info(
            "%s of %s runs already claimed or finished, skipping them",
            len(run_ids) - claimed,
            len(run_ids),
        )
    runs = list(
        Run.objects.filter(pk__in=run_ids, status=Run.RUNNING, worker=token)
        .select_related("task", "sample", "inspection")
        .order_by("repeat", "pk")
    )
    runs_done = runs
    answer = [run for run in runs if run.task.kind == Task.ANSWER]
    if answer:
        from inspector.services.answer_runs import answer_runs_execute

        answer_runs_execute(answer, token=token)
        runs = [run for run in runs if run.task.kind != Task.ANSWER]
    repo = [run for run in runs if run.task.kind == Task.REPO]
    if repo:
        from inspector.services.repo_runs import repo_runs_execute

        repo_runs_execute(repo, token=token)
        runs = [run for run in runs if run.task.kind != Task.REPO]
    terminal = [run for run in runs if run.task.kind == Task.TERMINAL]
    if terminal:
        terminal_runs_execute(terminal, token=token)
        runs = [run for run in runs if run.task.kind != Task.TERMINAL]
    if not runs:
        return runs_done
    tasks: dict[int, FunctionTask] = {}
    failed: dict[int, str] = {}
    behaviour_done: dict[str, Execution] = {}
    # Per task: its reference's first run, for its mutants' clock; per sample: whether an
    # earlier repeat timed out, for its clock.
    reference_seconds = first_reference_seconds(runs)
    timed_out = samples_timed_out(runs)
    # (task, "mutant:<id>") of the mutants whose check run in this message did not pass.
    mutant_killed: dict[tuple[int, str], bool] = {}
    session: FunctionSession | None = None
    session_repeat = None
    # Outcomes are written a few at a time: a commit per run cost as much as the run itself.
    # A worker that dies loses only unwritten outcomes, whose runs its lease hands back.
    pending: list[tuple[Run, Execution]] = []
    flushed = time.monotonic()
    try:
        for index, run in enumerate(runs):
            if pending and (len(pending) >= 20 or time.monotonic() - flushed > 0.5):
                runs_record(pending)
                pending, flushed = [], time.monotonic()
            if worker_stopping():
                runs_hand_back(runs[index:], token=token)
                break
            # The lease covers the runs still ahead: renewed while this worker lives, it runs
            # out soon after it dies, and the sweeper re-queues what it held.
            if time.monotonic() >= renew_at:
                renew_at = time.monotonic() + lease_span.total_seconds() / 2
                ahead = [r.pk for r in runs[index:]]
                Run.objects.filter(pk__in=ahead, status=Run.RUNNING, worker=token).update(
                    lease_expires_at=lease_from_now(lease_span)
                )
            if run.inspection.status == Inspection.FAILED or run.inspection_id in failed:
                why = failed.get(run.inspection_id) or run.inspection.error
                pending.append(
                    (run, error_execution(f"inspection #{run.inspection_id} failed: {why}"))
                )
                continue
            if run.kind == Run.BEHAVIOUR and mutant_killed.get((run.task_id, run.probe)):
                # A killed mutant's behaviour is never read (only a mutant the check lets
                # through is compared with the reference): most mutants' programs are skipped.
                pending.append((run, skipped_execution("its mutant failed the check")))
                continue
            if session is not None and run.repeat != session_repeat:
                # Each repeat in a session of its own, so with a hash seed of its own.
                session.close()
                session = None
            if run.kind == Run.BEHAVIOUR:
                try:
                    if session is None:
                        session, session_repeat = (
                            sandbox_backend().session(limits=run_limits()),
                            run.repeat,
                        )
                    execution = _behaviour_execute(run, behaviour_done, session)
                except SandboxUnavailable as exc:
                    execution = error_execution(f"sandbox unavailable: {exc}")
                except Exception as exc:  # noqa: BLE001 - this run's error, not the message's
                    execution, session = _run_crashed(run, exc, session), None
                pending.append((run, execution))
                continue
            if run.task_id not in tasks:
                t = run.task
                tasks[run.task_id] = FunctionTask(
                    prompt=t.prompt, test=t.test, entry_point=t.entry_point
                )
            try:
                if session is None:
                    session, session_repeat = (
                        sandbox_backend().session(limits=run_limits()),
                        run.repeat,
                    )
                wall = run_wall_seconds(
                    run,
                    reference_seconds.get((run.inspection_id, run.task_id)),
                    timed_out.get((run.inspection_id, run.sample_id), run.repeat) < run.repeat,
                )
                execution = session.run(
                    run_completion(run), task=tasks[run.task_id], wall_seconds=wall
                )
                if run.kind == Run.MUTANT and execution.outcome != Outcome.SANDBOX_ERROR:
                    # (a sandbox error is retried: its verdict is not known yet)
                    mutant_killed[(run.task_id, f"mutant:{run.probe}")] = not execution.passed
            except SandboxUnavailable as exc:
                message = f"sandbox unavailable: {exc}"
                logger.error("run %s of inspection %s: %s", run.pk, run.inspection_id, message)
                Inspection.objects.filter(
                    pk=run.inspection_id, status__in=(Inspection.QUEUED, Inspection.RUNNING)
                ).update(status=Inspection.FAILED, error=message, finished_at=timezone.now())
                failed[run.inspection_id] = message
                pending.append((run, error_execution(message)))
                continue
            except Exception as exc:  # noqa: BLE001 - this run's error, not the message's
                pending.append((run, _run_crashed(run, exc, session)))
                session = None
                continue
            if (
                execution.outcome == Outcome.SANDBOX_ERROR
                and run.attempts < settings.RUN_MAX_ATTEMPTS
            ):
                logger.warning("run %s: sandbox error, retrying: %s", run.pk, execution.error)
                if Run.objects.filter(pk=run.pk, status=Run.RUNNING, attempts=run.attempts).update(
                    status=Run.QUEUED, error=execution.error[:2000]
                ):
                    enqueue.runs_requeue_after_commit([run.pk])
                continue
            pending.append((run, execution))
    finally:
        if session is not None:
            session.close()
        if pending:
            runs_record(pending)
    return runs_done


def run_execute(*, run_id: int, worker: str = "") -> Run | None:
    """One run, as runs_execute does it; None when another worker has it."""
    runs = runs_execute(run_ids=[run_id], worker=worker)
    return runs[0] if runs else None


def runs_record(results: list[tuple[Run, Execution]]) -> int:
    """Record outcomes in one transaction (one commit, not one per run); returns how many were
    recorded. The attempts guard keeps a stale worker, whose run was swept and re-queued, from
    overwriting the newer attempt's result."""
    finished = timezone.now()
    recorded: dict[int, int] = {}
    firsts: set[int] = set()  # inspections one of whose first reference runs was recorded
    refused: list[Run] = []
    with runs_transaction():
        for run, execution in results:
            updated = Run.objects.filter(
                pk=run.pk, status=Run.RUNNING, attempts=run.attempts
            ).update(
                status=Run.DONE,
                outcome=str(execution.outcome),
                exit_code=execution.exit_code,
                duration=execution.duration,
                stdout_tail=execution.stdout_tail,
                stderr_tail=execution.stderr_tail,
                error=execution.error[:2000],
                finished_at=finished,
                lease_expires_at=None,
            )
            if updated:
                run.outcome = str(execution.outcome)
                recorded[run.inspection_id] = recorded.get(run.inspection_id, 0) + 1
                if run.kind == Run.REFERENCE and run.repeat == 1:
                    firsts.add(run.inspection_id)
            else:
                refused.append(run)
    runs_not_recorded(refused)
    # Held-back runs wait on the first reference runs, so only a batch with one of those may
    # free them (each batch looks after its commit: the last one to commit sees them all).
    for inspection_id, count in recorded.items():
        inspection_progress(inspection_id, count, release=inspection_id in firsts)
    return sum(recorded.values())


def _run_record(run: Run, execution: Execution) -> None:
    runs_record([(run, execution)])


def not_run(outcome: Outcome, error: str) -> Execution:
    """What is recorded for a run that no sandbox ran."""
    return Execution(
        outcome=outcome, exit_code=None, duration=0.0, stdout_tail="", stderr_tail="", error=error
    )


def error_execution(message: str) -> Execution:
    return not_run(Outcome.SANDBOX_ERROR, message)


def skipped_execution(reason: str) -> Execution:
    return not_run(Outcome.SKIPPED, f"not run: {reason}")


def run_record_error(run: Run, message: str) -> None:
    _run_record(run, error_execution(message))
