"""Starting an inspection, preparing it in a worker (its runs, the deeper analysis's mutant and
behaviour runs), dispatching its runs, and the scheduled re-inspections."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta

from django.conf import settings
from django.db import InterfaceError, OperationalError, transaction
from django.db.models import Q
from django.utils import timezone

from inspector import enqueue
from inspector.models import (
    Inspection,
    Run,
    Sample,
    Task,
    TaskSet,
    TaskSetVersion,
    rows_update,
)
from inspector.services import lifecycle
from inspector.services.errors import ServiceError
from inspector.services.function_runs import behaviour_config
from inspector.services.repo_runs import repo_config, repo_runs_plan
from inspector.services.terminal_runs import terminal_runs_plan

logger = logging.getLogger(__name__)


def inspection_config() -> dict:
    return {
        "reference_repeats": settings.INSPECT_REFERENCE_REPEATS,
        "sample_repeats": settings.INSPECT_SAMPLE_REPEATS,
        "probe_repeats": settings.INSPECT_PROBE_REPEATS,
        "probes": list(settings.INSPECT_PROBES),
        "sandbox_backend": settings.SANDBOX_BACKEND,
        "wall_seconds": settings.RUN_WALL_SECONDS,
        # Fixed here, so that every worker gives a run the same clock (run_wall_seconds).
        "sample_wall_seconds": settings.INSPECT_SAMPLE_WALL_SECONDS,
        "mutant_wall_seconds": settings.INSPECT_MUTANT_WALL_SECONDS,
        # The behaviour programs' limits: the reference's, then the samples' and mutants'.
        "behaviour_limits": behaviour_config(),
        "memory_mb": settings.RUN_MEMORY_MB,
        "max_processes": settings.RUN_MAX_PROCESSES,
        "output_bytes": settings.RUN_OUTPUT_BYTES,
        "mutants": settings.INSPECT_MUTANTS,
        "behaviour": settings.INSPECT_BEHAVIOUR,
        "answer": {
            "probes": list(settings.ANSWER_PROBES),
            "per_answer_seconds": settings.ANSWER_PER_ANSWER_SECONDS,
        },
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
    """Create the inspection (queued, its runs not made yet) and, once committed, hand its
    preparation to a worker (`inspection_prepare`: the runs, then their dispatch). Returns at
    once, whatever the size of the set. `trigger` says why it runs ("scheduled"; empty:
    someone asked)."""
    running = version.inspections.filter(status__in=Inspection.ACTIVE).first()
    if running is not None:
        doing = (
            "queued (preparing its runs)"
            if running.is_preparing
            else f"{running.status} ({running.runs_done}/{running.runs_total} runs)"
        )
        raise ServiceError(
            f"Inspection #{running.pk} of {version} is still {doing}; wait for it to finish."
        )
    config = inspection_config()
    if trigger:
        config["trigger"] = trigger
    repo = version.tasks.filter(kind=Task.REPO).exists()
    terminal = not repo and version.tasks.filter(kind=Task.TERMINAL).exists()
    answer = not repo and not terminal and version.tasks.filter(kind=Task.ANSWER).exists()
    if repo:
        # The config says what the runs were: no fix and gold repeats, samples, the probes of
        # detect/swe_probes.py and a leak scan per instance, in the set's mode (in Docker).
        config["kind"] = Task.REPO
        config["repo"] = {**repo_config(), "mode": version.taskset.terminal_mode}
    if terminal:
        config["mode"] = version.taskset.terminal_mode
    if answer:
        # The config says what the runs were: the set's rule, verifications, no repeats (a
        # verifier is deterministic), no mutants or behaviour programs.
        config["answer"]["rule"] = version.taskset.answer_rule
        config["kind"] = Task.ANSWER
    else:
        del config["answer"]
    inspection = Inspection.objects.create(
        version=version, created_by=by, config=config, prepared_at=None
    )
    enqueue.inspection_prepare_after_commit(inspection.pk)
    logger.info("inspection %s of %s created; a worker prepares its runs", inspection.pk, version)
    return inspection


class PreparationTaken(Exception):
    """Raised inside the preparing transaction when, at its end, the inspection is no longer
    this worker's to prepare (another worker prepared it, it failed meanwhile): the runs made
    here are rolled back."""


def inspection_prepare(*, inspection_id: int, worker: str = "") -> int:
    """Create every run of a queued inspection, set `runs_total` and queue the dispatch once
    committed; returns how many runs were made (0: nothing to do).

    Safe against a message delivered twice and two workers at once: a worker first takes the
    preparation (one conditional update: not prepared, and no other worker preparing it with
    a sign of life within the stall span), then makes the runs in one transaction that ends by
    marking the inspection prepared, again conditionally on its being this worker's: a crash
    or a lost race leaves no run behind. While it works its `updated_at` moves
    (lifecycle.preparation_alive), so no sweeper takes a long preparation for a lost one; if
    the worker dies the marks stop, and a sweeper queues the preparation again
    (lifecycle.runs_sweep). A preparation that raises anything but a lost or busy database
    (which the sweep's next attempt may not meet) fails the inspection with the error: a bug
    does not go away by trying again."""
    token = f"{worker or 'prepare'}#{uuid.uuid4().hex[:12]}"
    now = timezone.now()
    unprepared = Inspection.objects.filter(
        pk=inspection_id, status=Inspection.QUEUED, prepared_at__isnull=True
    )
    taken = unprepared.filter(
        Q(preparer="") | Q(updated_at__lt=now - lifecycle.stall_span())
    ).update(preparer=token, updated_at=now)
    if not taken:
        logger.info("inspection %s: already prepared, or being prepared", inspection_id)
        return 0
    started = time.monotonic()
    try:
        with lifecycle.preparation_alive(inspection_id, token):
            total = _inspection_runs_create(inspection_id, token)
    except PreparationTaken:
        logger.warning(
            "inspection %s: prepared by another worker meanwhile (or ended); runs rolled back",
            inspection_id,
        )
        return 0
    except (OperationalError, InterfaceError):
        raise  # the database away or busy for a while: a sweep queues the preparation again
    except Exception as exc:
        logger.exception("inspection %s: preparing its runs failed", inspection_id)
        unprepared.filter(preparer=token).update(
            status=Inspection.FAILED,
            error=f"Preparing the runs failed: {type(exc).__name__}: {exc}"[:5000],
            finished_at=timezone.now(),
            updated_at=timezone.now(),
        )
        return 0
    logger.info(
        "inspection %s prepared: %s runs in %.1f s",
        inspection_id,
        total,
        time.monotonic() - started,
    )
    return total


@transaction.atomic
def _inspection_runs_create(inspection_id: int, token: str) -> int:
    """The runs of an inspection, made in the order they always were, and the inspection marked
    prepared with their count, in one transaction (the caller's)."""
    inspection = Inspection.objects.select_related("version__taskset").get(pk=inspection_id)
    version = inspection.version
    config = inspection.config
    repo = config.get("kind") == Task.REPO
    answer = config.get("kind") == Task.ANSWER
    terminal = not repo and "mode" in config
    samples_of: dict[int, list[int]] = {}
    for sample_pk, task_pk in Sample.objects.filter(task__version=version).values_list(
        "pk", "task_id"
    ):
        samples_of.setdefault(task_pk, []).append(sample_pk)

    if terminal:
        term = config["terminal"]
        plan = terminal_runs_plan(
            mode=config["mode"],
            probes=term["probes"],
            repeats={"reference": term["reference_repeats"], "probe": term["probe_repeats"]},
        )

    sources: dict[int, dict] = {}
    if repo:
        sources = dict(version.tasks.values_list("pk", "source"))

    def runs_of(task_pk: int) -> Iterator[Run]:
        base = {"inspection": inspection, "task_id": task_pk}
        if repo:
            rc = config["repo"]
            for kind, probe, mode, repeat in repo_runs_plan(
                sources[task_pk], config=rc, mode=rc["mode"]
            ):
                yield Run(kind=kind, probe=probe, mode=mode, repeat=repeat, **base)
            for sample_pk in samples_of.get(task_pk, ()):
                for r in range(1, rc["sample_repeats"] + 1):
                    yield Run(
                        kind=Run.SAMPLE, sample_id=sample_pk, mode=rc["mode"], repeat=r, **base
                    )
            return
        if terminal:
            for kind, probe, mode, repeat in plan:
                yield Run(kind=kind, probe=probe, mode=mode, repeat=repeat, **base)
            for sample_pk in samples_of.get(task_pk, ()):
                for r in range(1, term["sample_repeats"] + 1):
                    yield Run(
                        kind=Run.SAMPLE, sample_id=sample_pk, mode=config["mode"], repeat=r, **base
                    )
            return
        if answer:
            # The label itself (can the verifier read it?), each sample once, each probe once.
            yield Run(kind=Run.REFERENCE, repeat=1, **base)
            for sample_pk in samples_of.get(task_pk, ()):
                yield Run(kind=Run.SAMPLE, sample_id=sample_pk, repeat=1, **base)
            for probe in config["answer"]["probes"]:
                yield Run(kind=Run.PROBE, probe=probe, repeat=1, **base)
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
    if not repo and not terminal and not answer and (config["mutants"] or config["behaviour"]):
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
    now = timezone.now()
    if not Inspection.objects.filter(
        pk=inspection_id, status=Inspection.QUEUED, prepared_at__isnull=True, preparer=token
    ).update(runs_total=total, prepared_at=now, updated_at=now):
        raise PreparationTaken(inspection_id)
    enqueue.inspection_dispatch_after_commit(inspection_id)
    return total


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
    rows_update(changed, ("behaviour_inputs",))
    return runs


def inspection_dispatch(*, inspection_id: int) -> int:
    """Send every queued run of a prepared inspection to the sandbox queue, moving it to
    running; returns how many."""
    now = timezone.now()
    # A redelivered dispatch (or a sweep's, of one whose message was lost) sends the queued runs
    # again, which is safe: runs are claimed. One whose inspection is not prepared yet sends
    # nothing (the preparation dispatches it when its runs are committed).
    if not Inspection.objects.filter(pk=inspection_id, prepared_at__isnull=False).exists():
        logger.info("inspection %s: not prepared yet, nothing to dispatch", inspection_id)
        return 0
    queued = Run.objects.filter(inspection_id=inspection_id, status=Run.QUEUED)
    # A function task's first reference runs go first; the rest are held back until they are
    # recorded (lifecycle.inspection_release_held), in whatever order messages are redelivered.
    kinds = set(
        Task.objects.filter(version__inspections=inspection_id)
        .exclude(kind=Task.FUNCTION)
        .order_by()
        .values_list("kind", flat=True)
        .distinct()[:2]
    )
    first = queued.filter(kind=Run.REFERENCE, repeat=1)
    hold = not kinds and first.exists() and queued.exclude(kind=Run.REFERENCE, repeat=1).exists()
    started = Inspection.objects.filter(pk=inspection_id, status=Inspection.QUEUED).update(
        status=Inspection.RUNNING, started_at=now, updated_at=now, runs_held=hold
    )
    if not started:  # a redelivered dispatch: runs still held back stay so
        hold = Inspection.objects.filter(pk=inspection_id, runs_held=True).exists()
    if hold:
        sent = enqueue.function_runs_send(first)
        logger.info("inspection %s: dispatched %s first reference runs", inspection_id, sent)
        return sent
    terminal = Task.TERMINAL in kinds
    if Task.REPO in kinds:
        # An instance's runs together: its image is built once per message.
        rows = queued.order_by("pk").values_list("pk", "task_id").iterator(chunk_size=5000)
        per_message = settings.SWE_RUNS_PER_MESSAGE
    elif Task.ANSWER in kinds:
        # Verifications in order: a message holds a few dozen tasks' verifications, one sandbox
        # start for all of them.
        rows = (
            (pk, task_id)
            for pk, task_id in queued.order_by("task_id", "pk")
            .values_list("pk", "task_id")
            .iterator(chunk_size=5000)
        )
        per_message = settings.ANSWER_RUNS_PER_MESSAGE
    elif terminal:
        # A task's runs together: its image is built once per message.
        rows = queued.order_by("pk").values_list("pk", "task_id").iterator(chunk_size=5000)
        per_message = settings.TERMINAL_RUNS_PER_MESSAGE
    else:
        sent = enqueue.function_runs_send(queued)
        logger.info("inspection %s: dispatched %s runs", inspection_id, sent)
        return sent
    sent = enqueue.runs_send(rows, per_message=per_message)
    logger.info("inspection %s: dispatched %s runs", inspection_id, sent)
    return sent


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
