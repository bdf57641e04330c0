"""Workflows over several rows: importing a task set, running an inspection, turning its runs
into flags, sweeping lost runs, and exporting what is clean. Views, Celery tasks and management
commands call these; they hold no logic of their own."""

from __future__ import annotations

import functools
import logging
import re
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import BinaryIO

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, F, OuterRef
from django.utils import timezone

from inspector import enqueue, services_terminal
from inspector.detect.codes import combined_severity
from inspector.detect.probes import PROBES
from inspector.formats.humaneval import read_taskset
from inspector.models import (
    Flag,
    Inspection,
    ReviewEvent,
    Run,
    Sample,
    Task,
    TaskSet,
    TaskSetVersion,
)
from workers.sandbox import Execution, Limits, Outcome, SandboxUnavailable, get_sandbox
from workers.sandbox.session import FunctionSession, FunctionTask

logger = logging.getLogger(__name__)

TASKSET_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")


class ServiceError(Exception):
    """A request the platform refuses, with a message the user can act on."""


# --- Import ------------------------------------------------------------------------------------


def taskset_import(
    *,
    name: str,
    tasks_file: BinaryIO | None = None,
    tasks_name: str,
    tasks_folder: Path | None = None,
    samples_file: BinaryIO | None = None,
    samples_name: str = "",
    terminal_mode: str = "",
    by=None,
) -> TaskSetVersion:
    """Parse an upload whole, then store it as the next version of the named task set.

    The upload is a HumanEval-style JSONL (plain or .gz) of function tasks, or terminal task
    folders: a folder on disk (`tasks_folder`), a .zip or a .tar.gz. Raises TaskSetFormatError
    (every bad line, with file, line and field) or ServiceError; either way nothing is stored."""
    name = name.strip()
    if not TASKSET_NAME_RE.match(name):
        raise ServiceError(
            f"Task-set name {name!r} is not valid: use letters, digits, '.', '_' and '-' "
            "(up to 200 characters, starting with a letter or digit)."
        )
    if terminal_mode and terminal_mode not in (TaskSet.FAITHFUL, TaskSet.ISOLATED):
        raise ServiceError(
            f"Mode {terminal_mode!r} is not one of {TaskSet.FAITHFUL}, {TaskSet.ISOLATED}."
        )
    tasks_input: Path | BinaryIO | None = tasks_folder
    if tasks_input is None:
        if tasks_file is None:
            raise ServiceError("Nothing to import: give a tasks file or a folder of tasks.")
        head = tasks_file.read(4096)
        tasks_file.seek(0)
        if services_terminal.is_terminal_upload(head):
            tasks_input = tasks_file
    if tasks_input is not None:
        from inspector.formats.archive import ArchiveError

        try:
            parsed = services_terminal.terminal_parse(
                tasks=tasks_input,
                tasks_name=tasks_name,
                samples_file=samples_file,
                samples_name=samples_name,
            )
        except ArchiveError as exc:
            raise ServiceError(str(exc)) from None
        task_rows, sample_rows = parsed.tasks, parsed.samples
    else:
        function_set = read_taskset(
            tasks_file,
            tasks_name=tasks_name,
            samples_file=samples_file,
            samples_name=samples_name,
            max_bytes=settings.UPLOAD_MAX_BYTES,
        )
        task_rows = [
            {
                "task_id": t.task_id,
                "prompt": t.prompt,
                "canonical_solution": t.canonical_solution,
                "test": t.test,
                "entry_point": t.entry_point,
                "domain": t.domain,
                "metadata": t.metadata,
                "source": t.source,
                "content_hash": t.content_hash,
            }
            for t in function_set.tasks
        ]
        sample_rows = [
            {
                "task_id": s.task_id,
                "sample_id": s.sample_id,
                "completion": s.completion,
                "model": s.model,
            }
            for s in function_set.samples
        ]
    with transaction.atomic():
        taskset, _ = TaskSet.objects.get_or_create(name=name, defaults={"created_by": by})
        taskset = TaskSet.objects.select_for_update().get(pk=taskset.pk)
        if terminal_mode and taskset.terminal_mode != terminal_mode:
            taskset.terminal_mode = terminal_mode
            taskset.save(update_fields=("terminal_mode",))
        last = taskset.versions.order_by("-number").values_list("number", flat=True).first()
        version = TaskSetVersion.objects.create(
            taskset=taskset,
            number=(last or 0) + 1,
            created_by=by,
            tasks_filename=tasks_name[:300],
            samples_filename=samples_name[:300],
            task_count=len(task_rows),
            sample_count=len(sample_rows),
        )
        # The queue lists the latest version's tasks by an indexed column of their own.
        Task.objects.filter(version__taskset=taskset, in_latest_version=True).update(
            in_latest_version=False
        )
        tasks = Task.objects.bulk_create(
            [Task(version=version, position=i, **row) for i, row in enumerate(task_rows)],
            batch_size=500,
        )
        pk_of = {t.task_id: t.pk for t in tasks}
        Sample.objects.bulk_create(
            [
                Sample(
                    task_id=pk_of[s["task_id"]],
                    sample_id=s["sample_id"],
                    position=i,
                    completion=s["completion"],
                    model=s.get("model", ""),
                )
                for i, s in enumerate(sample_rows)
            ],
            batch_size=500,
        )
        _carry_review_over(version, tasks, by=by)
    logger.info(
        "imported task set %s v%s: %s tasks, %s samples",
        name,
        version.number,
        version.task_count,
        version.sample_count,
    )
    return version


def _carry_review_over(version: TaskSetVersion, tasks: list[Task], *, by) -> None:
    """A new version keeps the review of its task ids: a task quarantined in the previous version
    stays quarantined when it came back unchanged (same content hash); one that changed comes
    back active, with a line in its trail saying it replaces a quarantined task and can be
    inspected again. Each task page shows the trail of its task id across versions."""
    previous = (
        TaskSetVersion.objects.filter(taskset_id=version.taskset_id, number__lt=version.number)
        .order_by("-number")
        .first()
    )
    if previous is None:
        return
    quarantined = {
        task_id: (content_hash, reason)
        for task_id, content_hash, reason in previous.tasks.filter(
            status=Task.QUARANTINED
        ).values_list("task_id", "content_hash", "quarantine_reason")
    }
    events = []
    for task in tasks:
        before = quarantined.get(task.task_id)
        if before is None:
            continue
        content_hash, reason = before
        if content_hash == task.content_hash:
            Task.objects.filter(pk=task.pk).update(
                status=Task.QUARANTINED, quarantine_reason=reason
            )
            note = f"unchanged since v{previous.number}, where it was quarantined: {reason}"
            events.append(
                ReviewEvent(task=task, actor=by, action=ReviewEvent.QUARANTINE, note=note)
            )
        else:
            note = (
                f"replaces v{previous.number}'s quarantined task ({reason}) with changed "
                "content: inspect again to re-check it"
            )
            events.append(
                ReviewEvent(task=task, actor=by, action=ReviewEvent.NEW_VERSION, note=note)
            )
    ReviewEvent.objects.bulk_create(events)


def task_trail(task: Task):
    """The audit trail of the task's id across every version of its set, newest first."""
    return (
        ReviewEvent.objects.filter(
            task__version__taskset_id=task.version.taskset_id, task__task_id=task.task_id
        )
        .select_related("actor", "flag", "task__version")
        .order_by("-created_at", "-id")
    )


def taskset_latest_version(*, name: str) -> TaskSetVersion:
    version = (
        TaskSetVersion.objects.filter(taskset__name=name)
        .select_related("taskset")
        .order_by("-number")
    ).first()
    if version is None:
        known = ", ".join(TaskSet.objects.values_list("name", flat=True)[:20]) or "none yet"
        raise ServiceError(f"No task set named {name!r} (task sets: {known}).")
    return version


# --- Inspection --------------------------------------------------------------------------------


def inspection_config() -> dict:
    return {
        "reference_repeats": settings.INSPECT_REFERENCE_REPEATS,
        "sample_repeats": settings.INSPECT_SAMPLE_REPEATS,
        "probe_repeats": settings.INSPECT_PROBE_REPEATS,
        "probes": list(settings.INSPECT_PROBES),
        "sandbox_backend": settings.SANDBOX_BACKEND,
        "wall_seconds": settings.RUN_WALL_SECONDS,
        "memory_mb": settings.RUN_MEMORY_MB,
        "max_processes": settings.RUN_MAX_PROCESSES,
        "output_bytes": settings.RUN_OUTPUT_BYTES,
        "mutants": settings.INSPECT_MUTANTS,
        "behaviour": settings.INSPECT_BEHAVIOUR,
        "terminal": {
            "reference_repeats": settings.TERMINAL_REFERENCE_REPEATS,
            "sample_repeats": settings.TERMINAL_SAMPLE_REPEATS,
            "probe_repeats": settings.TERMINAL_PROBE_REPEATS,
            "probes": list(settings.TERMINAL_PROBES),
            "parallel": settings.TERMINAL_PARALLEL,
        },
    }


@transaction.atomic
def inspection_start(*, version: TaskSetVersion, by=None, trigger: str = "") -> Inspection:
    """Create every run of an inspection and hand them to the workers once committed.
    `trigger` says why it runs ("scheduled"; empty: someone asked)."""
    running = version.inspections.filter(
        status__in=(Inspection.QUEUED, Inspection.RUNNING, Inspection.ANALYSING)
    ).first()
    if running is not None:
        raise ServiceError(
            f"Inspection #{running.pk} of {version} is still {running.status} "
            f"({running.runs_done}/{running.runs_total} runs); wait for it to finish."
        )
    config = inspection_config()
    if trigger:
        config["trigger"] = trigger
    terminal = version.tasks.filter(kind=Task.TERMINAL).exists()
    if terminal:
        config["mode"] = version.taskset.terminal_mode
    inspection = Inspection.objects.create(version=version, created_by=by, config=config)
    samples_of: dict[int, list[int]] = {}
    for sample_pk, task_pk in Sample.objects.filter(task__version=version).values_list(
        "pk", "task_id"
    ):
        samples_of.setdefault(task_pk, []).append(sample_pk)

    if terminal:
        term = config["terminal"]
        plan = services_terminal.terminal_runs_plan(
            mode=config["mode"],
            probes=term["probes"],
            repeats={"reference": term["reference_repeats"], "probe": term["probe_repeats"]},
        )

    def runs_of(task_pk: int) -> Iterator[Run]:
        base = {"inspection": inspection, "task_id": task_pk}
        if terminal:
            for kind, probe, mode, repeat in plan:
                yield Run(kind=kind, probe=probe, mode=mode, repeat=repeat, **base)
            for sample_pk in samples_of.get(task_pk, ()):
                for r in range(1, term["sample_repeats"] + 1):
                    yield Run(
                        kind=Run.SAMPLE, sample_id=sample_pk, mode=config["mode"], repeat=r, **base
                    )
            return
        for r in range(1, config["reference_repeats"] + 1):
            yield Run(kind=Run.REFERENCE, repeat=r, **base)
        for sample_pk in samples_of.get(task_pk, ()):
            for r in range(1, config["sample_repeats"] + 1):
                yield Run(kind=Run.SAMPLE, sample_id=sample_pk, repeat=r, **base)
        for probe in config["probes"]:
            for r in range(1, config["probe_repeats"] + 1):
                yield Run(kind=Run.PROBE, probe=probe, repeat=r, **base)
        yield from deeper.get(task_pk, ())

    deeper: dict[int, list[Run]] = {}
    if not terminal and (config["mutants"] or config["behaviour"]):
        deeper = _deeper_runs(inspection, version, config, samples_of)
    task_pks = list(version.tasks.order_by("position").values_list("pk", flat=True))
    batch: list[Run] = []
    total = 0
    for task_pk in task_pks:
        batch.extend(runs_of(task_pk))
        if len(batch) >= 5000:
            Run.objects.bulk_create(batch)
            total += len(batch)
            batch = []
    Run.objects.bulk_create(batch)
    total += len(batch)
    inspection.runs_total = total
    inspection.save(update_fields=("runs_total",))
    enqueue.inspection_dispatch_after_commit(inspection.pk)
    logger.info("inspection %s of %s created with %s runs", inspection.pk, version, total)
    return inspection


def _deeper_runs(inspection, version, config, samples_of) -> dict[int, list[Run]]:
    """Per task: its mutants' check runs, and a behaviour run for the reference, each sample and
    each mutant on the task's behaviour inputs (stored on the task)."""
    from inspector.detect.behaviour import behaviour_inputs
    from inspector.detect.mutants import generate_mutants

    sample_ids = dict(Sample.objects.filter(task__version=version).values_list("pk", "sample_id"))
    runs: dict[int, list[Run]] = {}
    changed: list[Task] = []
    for task in version.tasks.only(
        "pk", "prompt", "canonical_solution", "test", "entry_point", "source"
    ):
        base = {"inspection": inspection, "task_id": task.pk, "repeat": 1}
        mine: list[Run] = []
        mutants = []
        if config["mutants"]:
            try:
                mutants = generate_mutants(
                    task.canonical_solution,
                    prompt=task.prompt,
                    entry_point=task.entry_point,
                    limit=config["mutants"],
                )
            except (SyntaxError, ValueError) as exc:
                logger.info("no mutants for %s: %s", task.task_id, exc)
        for mutant in mutants:
            mine.append(
                Run(
                    kind=Run.MUTANT,
                    probe=mutant.mutant_id,
                    detail={
                        "completion": mutant.completion,
                        "diff": mutant.diff,
                        "description": mutant.description,
                    },
                    **base,
                )
            )
        if config["behaviour"]:
            try:
                inputs = behaviour_inputs(
                    task.test,
                    task.entry_point,
                    limit=settings.BEHAVIOUR_INPUTS,
                    prompt=task.prompt,
                    contract=bool((task.source or {}).get("contract")),
                )
            except (SyntaxError, ValueError):
                inputs = []
            task.behaviour_inputs = inputs
            changed.append(task)
            if inputs:
                mine.append(Run(kind=Run.BEHAVIOUR, probe=Run.REFERENCE, **base))
                for sample_pk in samples_of.get(task.pk, ()):
                    mine.append(
                        Run(
                            kind=Run.BEHAVIOUR,
                            probe=f"sample:{sample_ids[sample_pk]}",
                            sample_id=sample_pk,
                            **base,
                        )
                    )
                for mutant in mutants:
                    mine.append(
                        Run(
                            kind=Run.BEHAVIOUR,
                            probe=f"mutant:{mutant.mutant_id}",
                            detail={"completion": mutant.completion},
                            **base,
                        )
                    )
        runs[task.pk] = mine
    Task.objects.bulk_update(changed, ("behaviour_inputs",), batch_size=1000)
    return runs


def inspection_dispatch(*, inspection_id: int) -> int:
    """Send every queued run of the inspection to the sandbox queue; returns how many."""
    now = timezone.now()
    Inspection.objects.filter(pk=inspection_id, status=Inspection.QUEUED).update(
        status=Inspection.RUNNING, started_at=now, updated_at=now
    )
    queued = Run.objects.filter(inspection_id=inspection_id, status=Run.QUEUED)
    terminal = Task.objects.filter(version__inspections=inspection_id, kind=Task.TERMINAL).exists()
    if terminal:
        # A task's runs together: its image is built once per message.
        rows = queued.order_by("pk").values_list("pk", "task_id").iterator(chunk_size=5000)
    else:
        # Repeat by repeat: a task's repeats land in different messages, so in sessions with
        # different hash seeds (see runs_execute).
        rows = (
            (pk, (repeat, task_id))
            for pk, repeat, task_id in queued.order_by("repeat", "task_id", "pk")
            .values_list("pk", "repeat", "task_id")
            .iterator(chunk_size=5000)
        )
    sent = enqueue.runs_send(
        rows,
        per_message=settings.TERMINAL_RUNS_PER_MESSAGE if terminal else settings.RUNS_PER_MESSAGE,
    )
    logger.info("inspection %s: dispatched %s runs", inspection_id, sent)
    return sent


@functools.cache
def _sandbox():
    return get_sandbox(
        settings.SANDBOX_BACKEND,
        allow_unsandboxed=settings.SANDBOX_ALLOW_UNSANDBOXED,
        python=settings.SANDBOX_PYTHON or None,
        cgroups=settings.SANDBOX_CGROUPS,
        cgroup_root=settings.SANDBOX_CGROUP_ROOT or None,
    )


def run_limits() -> Limits:
    return Limits(
        wall_seconds=settings.RUN_WALL_SECONDS,
        memory_bytes=settings.RUN_MEMORY_MB * 1024 * 1024,
        max_processes=settings.RUN_MAX_PROCESSES,
        output_bytes=settings.RUN_OUTPUT_BYTES,
        tail_bytes=settings.RUN_TAIL_BYTES,
    )


def run_completion(run: Run) -> str:
    """The completion a run executes (for a behaviour run: the solution it observes)."""
    if run.kind == Run.MUTANT or (run.kind == Run.BEHAVIOUR and run.probe.startswith("mutant:")):
        return run.detail["completion"]
    if run.kind == Run.SAMPLE or (run.kind == Run.BEHAVIOUR and run.sample_id):
        return run.sample.completion
    if run.kind == Run.PROBE:
        return PROBES[run.probe]
    return run.task.canonical_solution


def _behaviour_execute(run: Run) -> Execution:
    """Call the run's solution on the task's behaviour inputs in a one-off sandbox; the
    analysis reads the behaviour vector from its stdout."""
    from inspector.detect.behaviour import TAIL_BYTES, behaviour_program, wall_seconds

    task = run.task
    program = behaviour_program(
        task.prompt,
        run_completion(run),
        task.entry_point,
        task.behaviour_inputs,
        per_call_seconds=settings.BEHAVIOUR_PER_CALL_SECONDS,
        total_seconds=settings.BEHAVIOUR_TOTAL_SECONDS,
        contract=(task.source or {}).get("contract") or "",
    )
    limits = run_limits()
    limits = Limits(
        wall_seconds=wall_seconds(
            per_call_seconds=settings.BEHAVIOUR_PER_CALL_SECONDS,
            total_seconds=settings.BEHAVIOUR_TOTAL_SECONDS,
        ),
        memory_bytes=limits.memory_bytes,
        max_processes=limits.max_processes,
        output_bytes=limits.output_bytes,
        tail_bytes=max(limits.tail_bytes, TAIL_BYTES),
    )
    return _sandbox().run_python(program, limits=limits)


def runs_execute(*, run_ids: list[int], worker: str = "") -> list[Run]:
    """Claim the queued runs among `run_ids`, execute them in turn in one sandbox session (a
    clean fork per run) and record each outcome exactly once. Returns the runs this worker
    executed; runs another worker holds (a redelivered message) are skipped."""
    now = timezone.now()
    # Claimed under a token of this call, so one query tells which runs are ours.
    token = f"{worker[:180]}#{uuid.uuid4().hex[:12]}"
    lease_span = timedelta(seconds=settings.RUN_WALL_SECONDS + settings.RUN_LEASE_SLACK_SECONDS)
    lease = now + lease_span
    claimed = Run.objects.filter(pk__in=run_ids, status=Run.QUEUED).update(
        status=Run.RUNNING,
        attempts=F("attempts") + 1,
        lease_expires_at=lease,
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
    terminal = [run for run in runs if run.task.kind == Task.TERMINAL]
    if terminal:
        services_terminal.terminal_runs_execute(terminal, token=token)
        runs_done = runs
        runs = [run for run in runs if run.task.kind != Task.TERMINAL]
        if not runs:
            return runs_done
    else:
        runs_done = runs
    tasks: dict[int, FunctionTask] = {}
    failed: dict[int, str] = {}
    session: FunctionSession | None = None
    session_repeat = None
    # Outcomes are written a few at a time: a commit per run cost as much as the run itself.
    # A worker that dies loses only unwritten outcomes, whose runs its lease hands back.
    pending: list[tuple[Run, Execution]] = []
    flushed = time.monotonic()
    try:
        for index, run in enumerate(runs):
            if pending and (len(pending) >= 20 or time.monotonic() - flushed > 0.5):
                _runs_record(pending)
                pending, flushed = [], time.monotonic()
            # The lease covers the runs still ahead: renewed while this worker lives, it runs
            # out soon after it dies, and the sweeper re-queues what it held.
            now = timezone.now()
            if lease - now < lease_span / 2:
                lease = now + lease_span
                ahead = [r.pk for r in runs[index:]]
                Run.objects.filter(pk__in=ahead, status=Run.RUNNING, worker=token).update(
                    lease_expires_at=lease
                )
            if run.inspection.status == Inspection.FAILED or run.inspection_id in failed:
                why = failed.get(run.inspection_id) or run.inspection.error
                pending.append(
                    (run, _error_execution(f"inspection #{run.inspection_id} failed: {why}"))
                )
                continue
            if run.kind == Run.BEHAVIOUR:
                try:
                    execution = _behaviour_execute(run)
                except SandboxUnavailable as exc:
                    execution = _error_execution(f"sandbox unavailable: {exc}")
                pending.append((run, execution))
                continue
            if run.task_id not in tasks:
                t = run.task
                tasks[run.task_id] = FunctionTask(
                    prompt=t.prompt, test=t.test, entry_point=t.entry_point
                )
            if session is not None and run.repeat != session_repeat:
                # Each repeat in a session of its own, so with a hash seed of its own.
                session.close()
                session = None
            try:
                if session is None:
                    session, session_repeat = _sandbox().session(limits=run_limits()), run.repeat
                execution = session.run(run_completion(run), task=tasks[run.task_id])
            except SandboxUnavailable as exc:
                message = f"sandbox unavailable: {exc}"
                logger.error("run %s of inspection %s: %s", run.pk, run.inspection_id, message)
                Inspection.objects.filter(
                    pk=run.inspection_id, status__in=(Inspection.QUEUED, Inspection.RUNNING)
                ).update(status=Inspection.FAILED, error=message, finished_at=timezone.now())
                failed[run.inspection_id] = message
                pending.append((run, _error_execution(message)))
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
            _runs_record(pending)
    return runs_done


def run_execute(*, run_id: int, worker: str = "") -> Run | None:
    """One run, as runs_execute does it; None when another worker has it."""
    runs = runs_execute(run_ids=[run_id], worker=worker)
    return runs[0] if runs else None


def _runs_record(results: list[tuple[Run, Execution]]) -> int:
    """Record outcomes in one transaction (one commit, not one per run); returns how many were
    recorded. The attempts guard keeps a stale worker, whose run was swept and re-queued, from
    overwriting the newer attempt's result."""
    finished = timezone.now()
    recorded: dict[int, int] = {}
    with transaction.atomic():
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
    for inspection_id, count in recorded.items():
        inspection_progress(inspection_id, count)
    return sum(recorded.values())


def _run_record(run: Run, execution: Execution) -> None:
    _runs_record([(run, execution)])


def _error_execution(message: str) -> Execution:
    return Execution(
        outcome=Outcome.SANDBOX_ERROR,
        exit_code=None,
        duration=0.0,
        stdout_tail="",
        stderr_tail="",
        error=message,
    )


def _run_record_error(run: Run, message: str) -> None:
    _run_record(run, _error_execution(message))


def inspection_progress(inspection_id: int, count: int = 1) -> None:
    now = timezone.now()
    Inspection.objects.filter(pk=inspection_id).update(
        runs_done=F("runs_done") + count, updated_at=now
    )
    # Each run is counted once (its record is guarded), so done == total means all are done;
    # the one update that moves the status wins, however many workers finish at once.
    moved = Inspection.objects.filter(
        pk=inspection_id,
        status__in=(Inspection.QUEUED, Inspection.RUNNING),
        runs_done__gte=F("runs_total"),
    ).update(status=Inspection.ANALYSING, updated_at=now)
    if moved:
        enqueue.inspection_analyse(inspection_id)


def inspection_analyse(*, inspection_id: int) -> Inspection:
    """Turn the inspection's runs into flags and per-task figures (pandas, in detect/)."""
    from inspector.detect.flags import analyse_runs  # pandas: only the analysis needs it

    inspection = Inspection.objects.select_related("version").get(pk=inspection_id)
    rows = Run.objects.filter(inspection_id=inspection_id).values_list(
        "pk",
        "task_id",
        "kind",
        "sample__sample_id",
        "probe",
        "outcome",
        "mode",
        "error",
        "duration",
    )
    records = []
    deeper_runs: list[dict] = []
    for pk, task_pk, kind, sample_id, probe, outcome, mode, error, duration in rows.iterator(
        chunk_size=5000
    ):
        if kind in (Run.MUTANT, Run.BEHAVIOUR):
            deeper_runs.append(
                {"run_id": pk, "task_key": task_pk, "kind": kind, "key": probe, "outcome": outcome}
            )
            continue
        key = sample_id if kind == Run.SAMPLE else (probe or Run.REFERENCE)
        records.append(
            {
                "run_id": pk,
                "task_key": task_pk,
                "solution_kind": kind,
                "solution_key": key,
                "outcome": outcome,
                "mode": mode,
                "reason": error,
            }
        )
        if kind in (Run.REFERENCE, Run.SAMPLE):
            deeper_runs.append(
                {
                    "run_id": pk,
                    "task_key": task_pk,
                    "kind": kind,
                    "key": key,
                    "outcome": outcome,
                    "duration": duration,
                }
            )
    harness_findings: list[dict] = []
    depth = None
    if inspection.config.get("mode"):  # terminal tasks
        from inspector.detect.terminal import analyse_terminal_runs

        analysis = analyse_terminal_runs(
            records,
            mode=inspection.config["mode"],
            harness_share=settings.HARNESS_FINDING_SHARE,
            harness_min_tasks=settings.HARNESS_FINDING_MIN_TASKS,
        )
        harness_findings = analysis.harness_findings
        findings = list(analysis.findings)
    else:
        for record in records:
            del record["mode"]  # the reason stays: it tells a run the sandbox boundary decided
        analysis = analyse_runs(records)
        depth = _analyse_depth(inspection, deeper_runs, analysis)
        findings = sorted(
            [*analysis.findings, *depth.findings], key=lambda f: (f.task_key, -f.severity)
        )
        if analysis.boundary:
            from inspector.detect.flags import boundary_findings

            names = dict(
                Task.objects.filter(pk__in=list(analysis.boundary)).values_list("pk", "task_id")
            )
            harness_findings = boundary_findings(analysis, names)
    findings.extend(_drift(inspection, findings))
    with transaction.atomic():
        Flag.objects.filter(inspection_id=inspection_id).delete()
        # A reviewer's dismissal holds across re-inspections of the same task.
        dismissed = {
            (task_pk, code): (note, reviewer)
            for task_pk, code, note, reviewer in Flag.objects.filter(
                task__version_id=inspection.version_id, status=Flag.DISMISSED
            )
            .order_by("reviewed_at")
            .values_list("task_id", "code", "note", "reviewed_by")
        }
        flags = []
        seen: set[tuple[int, str]] = set()
        for finding in findings:
            if (finding.task_key, str(finding.code)) in seen:
                continue  # one flag of a kind per task: the outcome rules' comes first
            seen.add((finding.task_key, str(finding.code)))
            carried = dismissed.get((finding.task_key, str(finding.code)))
            flags.append(
                Flag(
                    task_id=finding.task_key,
                    inspection_id=inspection_id,
                    code=str(finding.code),
                    severity=finding.severity,
                    confidence=finding.confidence,
                    explanation=finding.explanation,
                    evidence_run_ids=list(finding.evidence_run_ids),
                    evidence=finding.evidence,
                    status=Flag.DISMISSED if carried else Flag.OPEN,
                    note=f"(kept from an earlier dismissal) {carried[0]}" if carried else "",
                    reviewed_by_id=carried[1] if carried else None,
                    reviewed_at=timezone.now() if carried else None,
                )
            )
        Flag.objects.bulk_create(flags, batch_size=1000)
        blocking: dict[int, list[Flag]] = {}
        for flag in flags:
            if flag.status in Flag.BLOCKING:
                blocking.setdefault(flag.task_id, []).append(flag)
        tasks = list(
            Task.objects.filter(version_id=inspection.version_id).only(
                "pk", "severity", "open_flags", "pending_review", "last_inspection", "runs_count"
            )
        )
        for task in tasks:
            stats = analysis.stats.get(task.pk)
            mine = sorted(blocking.get(task.pk, []), key=lambda f: (-f.severity, f.code))
            task.last_inspection_id = inspection_id
            task.severity = combined_severity([f.severity for f in mine])
            task.open_flags = ",".join(f.code for f in mine)
            task.pending_review = any(f.status == Flag.OPEN for f in mine)
            task.runs_count = stats.runs if stats else 0
            task.reference_pass_rate = stats.reference_pass_rate if stats else None
            task.sample_pass_rate = stats.sample_pass_rate if stats else None
            deep = depth.stats.get(task.pk) if depth else None
            task.learnability = deep.learnability if deep else None
            task.survivor_share = deep.survivor_share if deep else None
            task.cluster_count = deep.cluster_count if deep else None
        Task.objects.bulk_update(
            tasks,
            (
                "last_inspection",
                "severity",
                "open_flags",
                "pending_review",
                "runs_count",
                "reference_pass_rate",
                "sample_pass_rate",
                "learnability",
                "survivor_share",
                "cluster_count",
            ),
            batch_size=1000,
        )
        now = timezone.now()
        Inspection.objects.filter(pk=inspection_id).update(
            status=Inspection.FINISHED,
            findings=harness_findings,
            finished_at=now,
            updated_at=now,
        )
    logger.info(
        "inspection %s analysed: %s flags on %s tasks", inspection_id, len(flags), len(tasks)
    )
    inspection.refresh_from_db()
    return inspection


def reinspect_due(*, now=None) -> list[Inspection]:
    """Start a scheduled inspection of every active task set whose latest version was last
    inspected longer ago than its re-inspection period (TaskSet.reinspect_every_hours). A set
    never inspected, or with an inspection under way, is left alone."""
    now = now or timezone.now()
    started = []
    for taskset in TaskSet.objects.filter(active=True).order_by("name"):
        hours = taskset.reinspect_every_hours
        version = taskset.latest_version()
        if hours <= 0 or version is None:
            continue
        last = version.inspections.order_by("-pk").first()
        if last is None or last.is_active or last.created_at > now - timedelta(hours=hours):
            continue
        try:
            started.append(inspection_start(version=version, trigger="scheduled"))
        except ServiceError as exc:  # one started in between
            logger.info("scheduled inspection of %s skipped: %s", version, exc)
    return started


def _outcomes(inspection_id: int) -> dict[int, dict[str, int]]:
    """Per task of an inspection: reference and sample runs passed and counted (sandbox errors
    and build failures are not counted)."""
    from django.db.models import Count, Q

    counted = ~Q(outcome__in=("sandbox_error", "build_failed"))
    rows = (
        Run.objects.filter(
            inspection_id=inspection_id, kind__in=(Run.REFERENCE, Run.SAMPLE), status=Run.DONE
        )
        .filter(counted)
        .values("task_id", "kind")
        .annotate(total=Count("id"), passed=Count("id", filter=Q(outcome="passed")))
    )
    out: dict[int, dict[str, int]] = {}
    for row in rows:
        mine = out.setdefault(row["task_id"], {})
        mine[f"{row['kind']}_passed"] = row["passed"]
        mine[f"{row['kind']}_total"] = row["total"]
    return out


def _drift(inspection: Inspection, findings) -> list:
    """`drift` against the previous finished inspection of the same version (detect/drift.py)."""
    from inspector.detect.drift import Outcomes, drift_findings

    previous = (
        Inspection.objects.filter(
            version_id=inspection.version_id, status=Inspection.FINISHED, pk__lt=inspection.pk
        )
        .order_by("-pk")
        .first()
    )
    if previous is None:
        return []
    before_flags: dict[int, set[str]] = {}
    for task_pk, code in Flag.objects.filter(inspection=previous).values_list("task_id", "code"):
        before_flags.setdefault(task_pk, set()).add(code)
    now_flags: dict[int, set[str]] = {}
    for finding in findings:
        now_flags.setdefault(finding.task_key, set()).add(str(finding.code))

    def table(counts: dict[int, dict[str, int]], flags: dict[int, set[str]]):
        return {
            task_pk: Outcomes(
                reference_passed=c.get("reference_passed", 0),
                reference_total=c.get("reference_total", 0),
                sample_passed=c.get("sample_passed", 0),
                sample_total=c.get("sample_total", 0),
                flags=frozenset(flags.get(task_pk, ())),
            )
            for task_pk, c in counts.items()
        }

    return drift_findings(
        table(_outcomes(inspection.pk), now_flags),
        table(_outcomes(previous.pk), before_flags),
        current_id=inspection.pk,
        previous_id=previous.pk,
        p_value=settings.DRIFT_P_VALUE,
    )


def _analyse_depth(inspection: Inspection, deeper_runs: list[dict], analysis):
    """The deeper flags (inspector/detect/depth.py): behaviour and mutant runs, the prompts of
    this version and of the other task sets' latest versions."""
    from inspector.detect.depth import DepthSettings, analyse_depth

    by_pk = {run["run_id"]: run for run in deeper_runs}
    for pk, stdout, detail in (
        Run.objects.filter(inspection_id=inspection.pk, kind__in=(Run.BEHAVIOUR, Run.MUTANT))
        .values_list("pk", "stdout_tail", "detail")
        .iterator(chunk_size=2000)
    ):
        by_pk[pk]["stdout"] = stdout
        by_pk[pk]["detail"] = {k: v for k, v in (detail or {}).items() if k != "completion"}
    tasks = [
        {
            "task_key": pk,
            "task_id": task_id,
            "prompt": prompt,
            "canonical_solution": solution,
            "inputs": inputs,
            "test": test,
            "entry_point": entry_point,
        }
        for pk, task_id, prompt, solution, inputs, test, entry_point in Task.objects.filter(
            version_id=inspection.version_id
        ).values_list(
            "pk",
            "task_id",
            "prompt",
            "canonical_solution",
            "behaviour_inputs",
            "test",
            "entry_point",
        )
    ]
    models: dict[int, dict[str, str]] = {}
    for task_pk, sample_id, model in Sample.objects.filter(
        task__version_id=inspection.version_id
    ).values_list("task_id", "sample_id", "model"):
        models.setdefault(task_pk, {})[sample_id] = model
    for task in tasks:
        task["sample_models"] = models.get(task["task_key"], {})
    latest_others = TaskSetVersion.objects.filter(
        number=TaskSetVersion.objects.filter(taskset=OuterRef("taskset"))
        .order_by("-number")
        .values("number")[:1]
    ).exclude(taskset_id=inspection.version.taskset_id)
    other_prompts = {
        (taskset, task_id): prompt
        for taskset, task_id, prompt in Task.objects.filter(
            version__in=latest_others.values("pk")
        ).values_list("version__taskset__name", "task_id", "prompt")
    }
    flagged: dict[int, set[str]] = {}
    for finding in analysis.findings:
        flagged.setdefault(finding.task_key, set()).add(str(finding.code))
    return analyse_depth(
        tasks,
        deeper_runs,
        other_prompts=other_prompts,
        flagged=flagged,
        settings=DepthSettings(
            survivor_share=settings.WEAK_TESTS_SURVIVOR_SHARE,
            duplicate_similarity=settings.DUPLICATE_SIMILARITY,
            per_call_seconds=settings.BEHAVIOUR_PER_CALL_SECONDS,
        ),
    )


def runs_sweep(*, now=None) -> dict[str, int]:
    """Finish or re-queue runs whose worker vanished, and wake inspections that stalled."""
    now = now or timezone.now()
    requeued: list[int] = []
    abandoned = 0
    for run_id, attempts, inspection_id in Run.objects.filter(
        status=Run.RUNNING, lease_expires_at__lt=now
    ).values_list("pk", "attempts", "inspection_id"):
        stale = Run.objects.filter(pk=run_id, status=Run.RUNNING, attempts=attempts)
        if attempts >= settings.RUN_MAX_ATTEMPTS:
            reason = f"worker lost: the run never finished in {attempts} attempts"
            if stale.update(
                status=Run.DONE, outcome=str(Outcome.SANDBOX_ERROR), error=reason, finished_at=now
            ):
                logger.warning("run %s of inspection %s: %s", run_id, inspection_id, reason)
                abandoned += 1
                inspection_progress(inspection_id)
        elif stale.update(status=Run.QUEUED, error="re-queued: its worker stopped answering"):
            logger.warning(
                "run %s of inspection %s: lease expired, re-queued", run_id, inspection_id
            )
            requeued.append(run_id)
    # A broker that lost messages (a worker killed while holding them) leaves runs queued
    # with nobody working on them; sending them again is safe because runs are claimed.
    stall = timedelta(seconds=settings.RUN_WALL_SECONDS + settings.RUN_LEASE_SLACK_SECONDS)
    stalled = Inspection.objects.filter(status=Inspection.RUNNING, updated_at__lt=now - stall)
    resent = 0
    for inspection_id in stalled.values_list("pk", flat=True):
        ids = list(
            Run.objects.filter(inspection_id=inspection_id, status=Run.QUEUED).values_list(
                "pk", flat=True
            )
        )
        Inspection.objects.filter(pk=inspection_id).update(updated_at=now)
        requeued.extend(ids)
        resent += len(ids)
    stuck = Inspection.objects.filter(status=Inspection.ANALYSING, updated_at__lt=now - stall)
    reanalysed = 0
    for inspection_id in stuck.values_list("pk", flat=True):
        Inspection.objects.filter(pk=inspection_id).update(updated_at=now)
        enqueue.inspection_analyse(inspection_id)
        reanalysed += 1
    if requeued:
        enqueue.runs_requeue_after_commit(sorted(set(requeued)))
    return {
        "requeued": len(requeued) - resent,
        "resent": resent,
        "abandoned": abandoned,
        "reanalysed": reanalysed,
    }


# --- Review ------------------------------------------------------------------------------------


# --- Export ------------------------------------------------------------------------------------


def clean_tasks(*, version: TaskSetVersion):
    """Active, inspected (its reference really ran), and with no flag still blocking it."""
    from inspector.detect.codes import ADVISORY

    advisory = ADVISORY - set(settings.ADVISORY_FLAGS_THAT_BLOCK)
    blocking = Flag.objects.filter(
        task=OuterRef("pk"), inspection=OuterRef("last_inspection"), status__in=Flag.BLOCKING
    ).exclude(code__in=advisory)
    return (
        version.tasks.filter(
            status=Task.ACTIVE,
            last_inspection__status=Inspection.FINISHED,
            reference_pass_rate__isnull=False,
        )
        .exclude(Exists(blocking))
        .order_by("position")
    )


def manifest_lines(*, taskset_name: str) -> Iterator[dict]:
    """The clean tasks of the latest version, each line the task's own fields plus `quality`."""
    version = taskset_latest_version(name=taskset_name)
    for task in clean_tasks(version=version).iterator(chunk_size=1000):
        if task.kind == Task.TERMINAL:
            # A task folder is named, not inlined: the trainer holds the folders already, and
            # the content hash says the folder is the one that was inspected.
            line = {
                "task_id": task.task_id,
                "kind": Task.TERMINAL,
                "format": task.source.get("format"),
                "folder": task.task_id,
                "content_hash": task.content_hash,
            }
        else:
            line = dict(task.source)
        line["quality"] = {
            "content_hash": task.content_hash,
            "taskset": version.taskset.name,
            "taskset_version": version.number,
            "inspection_id": task.last_inspection_id,
            "reference_pass_rate": task.reference_pass_rate,
            "sample_pass_rate": task.sample_pass_rate,
        }
        yield line


def report_lines(*, taskset_name: str) -> Iterator[dict]:
    """One line per task of the latest version: its flags, status and figures."""
    version = taskset_latest_version(name=taskset_name)
    flags_of: dict[int, list[Flag]] = {}
    for flag in Flag.objects.filter(
        task__version=version, inspection_id=F("task__last_inspection_id")
    ).order_by("-severity", "code"):
        flags_of.setdefault(flag.task_id, []).append(flag)
    probes_of = terminal_probe_results(version=version)
    for task in version.tasks.order_by("position").defer("source").iterator(chunk_size=1000):
        flags = flags_of.get(task.pk, [])
        line = {
            "task_id": task.task_id,
            "flags": [f.code for f in flags],
            "flag_status": {f.code: f.status for f in flags},
            "flag_explanations": {f.code: f.explanation for f in flags},
            "flag_confidence": {f.code: f.confidence for f in flags},
            "flag_evidence": {f.code: f.evidence for f in flags},
            "status": task.status,
            "stats": {
                "runs": task.runs_count,
                "reference_pass_rate": task.reference_pass_rate,
                "sample_pass_rate": task.sample_pass_rate,
                "learnability": task.learnability,
                "survivor_share": task.survivor_share,
                "cluster_count": task.cluster_count,
                "inspection_id": task.last_inspection_id,
                "content_hash": task.content_hash,
            },
        }
        if task.kind == Task.TERMINAL:
            line["lint"] = task.lint
            line["probes"] = probes_of.get(task.pk, {})
        yield line


def terminal_probe_results(*, version: TaskSetVersion) -> dict[int, dict[str, dict[str, bool]]]:
    """Per task of the version's terminal tasks, per probe, per mode: did it earn a full reward
    in the task's latest inspection?"""
    results: dict[int, dict[str, dict[str, bool]]] = {}
    rows = Run.objects.filter(
        task__version=version,
        task__kind=Task.TERMINAL,
        inspection_id=F("task__last_inspection_id"),
        kind=Run.PROBE,
        status=Run.DONE,
    ).values_list("task_id", "probe", "mode", "outcome")
    for task_pk, probe, mode, outcome in rows.iterator(chunk_size=5000):
        if outcome in ("sandbox_error", "build_failed"):
            continue
        modes = results.setdefault(task_pk, {}).setdefault(probe, {})
        modes[mode] = modes.get(mode, False) or outcome == "passed"
    return results


# --- Workers -----------------------------------------------------------------------------------


def workers_alive(*, timeout: float = 1.0) -> list[str]:
    """Names of the Celery workers answering a ping on the configured broker."""
    from inspector.celery import app

    # limit=1: one answer is enough to know the inspection will move; no need to wait it out.
    replies = app.control.ping(timeout=timeout, limit=1) or []
    return sorted(name for reply in replies for name in reply)


def sandbox_warm() -> None:
    """Start a worker process's sandboxes ahead of its first message, and load the analysis
    (pandas takes most of a second) before an inspection waits for it."""
    import inspector.detect.flags  # noqa: F401

    if settings.SANDBOX_BACKEND == "docker":
        try:
            _sandbox().warm(run_limits())
        except SandboxUnavailable as exc:
            logger.error("cannot warm the sandbox pool: %s", exc)


def sandbox_close() -> None:
    """Remove what this worker process holds (its warm pool): pool processes exit without
    running atexit hooks."""
    if _sandbox.cache_info().currsize:
        close = getattr(_sandbox(), "close", None)
        if close is not None:
            close()


def sandbox_sweep() -> dict[str, int]:
    """Remove what workers killed before they could clean up left behind on this machine:
    local work folders, sandbox cgroups and Docker containers of worker processes that are
    gone."""
    from workers.sandbox import cgroups
    from workers.sandbox.local import sweep_work_folders

    swept = {"work_folders": sweep_work_folders()}
    if settings.SANDBOX_CGROUPS != "off":
        swept["cgroups"] = cgroups.sweep(cgroups.detect(settings.SANDBOX_CGROUP_ROOT or None))
    try:
        swept["terminal_containers"] = services_terminal.terminal_sweep()
    except Exception as exc:  # noqa: BLE001 - no Docker engine here: nothing of ours to sweep
        logger.info("no terminal containers swept: %s", exc)
    if settings.SANDBOX_BACKEND == "docker":
        from workers.sandbox.docker import sweep

        try:
            swept["containers"] = sweep()  # no pool of its own: the main process runs nothing
        except SandboxUnavailable as exc:
            logger.error("cannot sweep sandbox containers: %s", exc)
    if any(swept.values()):
        logger.warning("swept sandbox leftovers of dead workers: %s", swept)
    return swept
