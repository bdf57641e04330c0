"""The run lifecycle around execution: counting runs done (and queueing the analysis at the last),
sweeping runs whose lease ran out and inspections that stalled while being prepared, dispatched
or analysed (from beat, and from every worker's own sweeper), and a stopping worker handing back
the runs it claimed but has not started."""

from __future__ import annotations

import contextlib
import logging
import mmap
import os
import random
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from datetime import timedelta

from django.conf import settings
from django.db import DatabaseError, connections
from django.db.models import F
from django.utils import timezone

from inspector import enqueue
from inspector.models import (
    Inspection,
    Run,
    lease_from_now,
    lease_ran_out,
    runs_transaction,
)
from workers.sandbox import Outcome

logger = logging.getLogger(__name__)


def stall_span() -> timedelta:
    """How long an inspection may show no sign of life (its `updated_at` unmoved) before a
    sweeper takes it for stalled: its queued runs are sent again, its analysis queued again."""
    return timedelta(seconds=settings.RUN_WALL_SECONDS + settings.RUN_LEASE_SLACK_SECONDS)


@contextlib.contextmanager
def periodically(seconds: float, action: Callable[[], object], what: str) -> Iterator[None]:
    """While the block runs, a thread calls `action` every `seconds` (a lease renewed, a sign of
    life written). A call that fails on the database is logged and tried again at the next;
    the thread's own database connections are closed when it ends, with the block."""
    stop = threading.Event()

    def beat() -> None:
        try:
            while not stop.wait(seconds):
                try:
                    action()
                except DatabaseError as exc:
                    logger.warning("%s: not written this time: %s", what, exc)
        finally:
            connections.close_all()  # this thread's own

    thread = threading.Thread(target=beat, name=what, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=10)


@contextlib.contextmanager
def analysis_alive(inspection_id: int) -> Iterator[None]:
    """While an inspection is analysed, its `updated_at` moves every third of the stall span, so
    no sweeper takes a long analysis (a 100,000-question set's takes minutes) for a lost one
    and queues it again; if the worker dies, the marks stop and a sweeper does."""

    def mark() -> None:
        Inspection.objects.filter(pk=inspection_id, status=Inspection.ANALYSING).update(
            updated_at=timezone.now()
        )

    mark()
    with periodically(stall_span().total_seconds() / 3, mark, f"analysis {inspection_id}"):
        yield


@contextlib.contextmanager
def preparation_alive(inspection_id: int, token: str) -> Iterator[None]:
    """While a worker makes an inspection's runs (`token`: its claim on the preparation), the
    inspection's `updated_at` moves every third of the stall span, so no sweeper takes a long
    preparation (2.5 million runs take minutes) for a lost one and queues it again; if the
    worker dies, the marks stop and a sweeper does. (On SQLite the preparing transaction
    holds the database's one write lock, so the marks wait, and so does every sweeper.)"""

    def mark() -> None:
        Inspection.objects.filter(
            pk=inspection_id,
            status=Inspection.QUEUED,
            prepared_at__isnull=True,
            preparer=token,
        ).update(updated_at=timezone.now())

    with periodically(stall_span().total_seconds() / 3, mark, f"preparation {inspection_id}"):
        yield


def inspection_progress(inspection_id: int, count: int = 1, *, release: bool = True) -> None:
    """Count `count` more of an inspection's runs as done: the last one moves it to analysing.
    `release` says the recorded runs included a first reference run, whose record may free the
    runs held back behind it; a caller that knows it did not passes False and saves the look."""
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
    elif release:
        inspection_release_held(inspection_id)


def inspection_release_held(inspection_id: int) -> int:
    """Send an inspection's held-back runs once its references' first runs are all recorded
    (inspections.inspection_dispatch holds them back); returns how many were sent. Whichever
    caller turns `runs_held` off sends them, once."""
    if not Inspection.objects.filter(pk=inspection_id, runs_held=True).exists():
        return 0
    first = Run.objects.filter(inspection_id=inspection_id, kind=Run.REFERENCE, repeat=1)
    if first.exclude(status=Run.DONE).exists():
        return 0
    if not Inspection.objects.filter(pk=inspection_id, runs_held=True).update(runs_held=False):
        return 0
    sent = enqueue.function_runs_send(
        Run.objects.filter(inspection_id=inspection_id, status=Run.QUEUED)
    )
    logger.info("inspection %s: references recorded, dispatched %s runs", inspection_id, sent)
    return sent


def runs_not_recorded(runs) -> None:
    """Say which results a worker could not record: the runs' claims are no longer this
    worker's (a sweep re-queued them when their lease ran out, another worker took them, or
    the sweep gave up on them), so the results are dropped rather than recorded twice."""
    if runs:
        logger.warning(
            "results of runs %s not recorded: attempts %s were taken back from this worker "
            "(their lease ran out); the runs are another attempt's",
            sorted(run.pk for run in runs),
            sorted({run.attempts for run in runs}),
        )


def runs_sweep(*, now=None) -> dict[str, int]:
    """Finish or re-queue runs whose worker vanished, and wake inspections that stalled.

    Any number of sweepers may run at once (beat, each worker's own, a second beat started by
    mistake): every write is conditional on what the sweeper read (a run's status and attempts,
    an inspection's `updated_at`), so one sweeper wins each run and each stalled inspection,
    and a run is re-queued, abandoned or re-sent once."""
    now = now or timezone.now()
    requeued: list[int] = []
    abandoned: list[int] = []  # an inspection's id for each run given up on
    locked_out = 0
    for run_id, attempts, inspection_id in Run.objects.filter(
        lease_ran_out(), status=Run.RUNNING
    ).values_list("pk", "attempts", "inspection_id"):
        stale = Run.objects.filter(pk=run_id, status=Run.RUNNING, attempts=attempts)
        with runs_transaction():
            # A run whose row another session holds (a worker host cut off mid-write, whose
            # transaction the server ends after DB_IDLE_IN_TRANSACTION_SECONDS) is left for a
            # later sweep rather than waited on, so the other runs come back meanwhile.
            if not stale.select_for_update(skip_locked=True).values_list("pk", flat=True):
                locked_out += 1
                continue
            if attempts >= settings.RUN_MAX_ATTEMPTS:
                reason = f"worker lost: the run never finished in {attempts} attempts"
                if stale.update(
                    status=Run.DONE,
                    outcome=str(Outcome.SANDBOX_ERROR),
                    error=reason,
                    finished_at=now,
                ):
                    logger.warning("run %s of inspection %s: %s", run_id, inspection_id, reason)
                    abandoned.append(inspection_id)
            elif stale.update(status=Run.QUEUED, error="re-queued: its worker stopped answering"):
                logger.warning(
                    "run %s of inspection %s: lease expired, re-queued", run_id, inspection_id
                )
                requeued.append(run_id)
    for inspection_id in abandoned:
        inspection_progress(inspection_id)
    if locked_out:
        logger.warning(
            "sweep: %s runs with an expired lease are locked by another session (another "
            "sweeper's, or a worker's cut off mid-write); a later sweep takes them",
            locked_out,
        )
    # A broker that lost messages (a worker killed while holding them) leaves runs queued
    # with nobody working on them; sending them again is safe because runs are claimed.
    before = now - stall_span()
    resent = 0
    for inspection_id in _stalled_claimed(before, now, status=Inspection.RUNNING):
        if inspection_release_held(inspection_id):
            continue  # its held-back runs were just sent (their release had been lost)
        queued = Run.objects.filter(inspection_id=inspection_id, status=Run.QUEUED)
        if Inspection.objects.filter(pk=inspection_id, runs_held=True).exists():
            queued = queued.filter(kind=Run.REFERENCE, repeat=1)  # the rest stay held
        ids = list(queued.values_list("pk", flat=True))
        requeued.extend(ids)
        resent += len(ids)
    # A preparation whose message was lost, or whose worker died making the runs (its marks
    # stopped): taken back from that worker and queued again. Its transaction never committed,
    # so it left no runs; a preparation still alive keeps moving `updated_at` and is left alone.
    reprepared = 0
    for inspection_id in _stalled_claimed(
        before, now, {"preparer": ""}, status=Inspection.QUEUED, prepared_at__isnull=True
    ):
        logger.warning("inspection %s: its preparation stalled; queued again", inspection_id)
        enqueue.inspection_prepare(inspection_id)
        reprepared += 1
    # Prepared, but its dispatch never ran (the message lost, or the worker died between the
    # commit and sending it): dispatched again (it sends the runs still queued).
    redispatched = 0
    for inspection_id in _stalled_claimed(
        before, now, status=Inspection.QUEUED, prepared_at__isnull=False
    ):
        enqueue.inspection_dispatch(inspection_id)
        redispatched += 1
    reanalysed = 0
    for inspection_id in _stalled_claimed(before, now, status=Inspection.ANALYSING):
        enqueue.inspection_analyse(inspection_id)
        reanalysed += 1
    if requeued:
        enqueue.runs_requeue_after_commit(sorted(set(requeued)))
    return {
        "requeued": len(requeued) - resent,
        "resent": resent,
        "abandoned": len(abandoned),
        "reanalysed": reanalysed,
        "reprepared": reprepared,
        "redispatched": redispatched,
        "locked": locked_out,
    }


def _stalled_claimed(before, now, changes: dict | None = None, **state) -> Iterator[int]:
    """The inspections in `state` that have not moved since `before`, each claimed by this
    sweeper: only the one that moves `updated_at` from what it read (applying `changes` with
    it) gets the inspection, however many sweep at once."""
    stalled = Inspection.objects.filter(updated_at__lt=before, **state)
    for inspection_id, updated_at in stalled.values_list("pk", "updated_at"):
        if Inspection.objects.filter(pk=inspection_id, updated_at=updated_at, **state).update(
            updated_at=now, **(changes or {})
        ):
            yield inspection_id


class ImageBuilds:
    """Each task's image of one message, built (or found by its content hash) once, on a pool
    of its own, whichever of the message's runs asks first; the others wait for that build."""

    def __init__(self, build: Callable[[dict], object], *, name: str) -> None:
        self._build = build
        self._futures: dict[int, Future] = {}
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix=f"{name}-build")

    def of(self, run: Run):
        with self._lock:
            future = self._futures.get(run.task_id)
            if future is None:
                future = self._futures[run.task_id] = self._pool.submit(
                    self._build, run.task.source
                )
        return future.result()

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def runs_execute_parallel(
    runs: list[Run],
    *,
    token: str,
    span: timedelta,
    one: Callable[[Run], tuple[Run, dict]],
    record: Callable[[list[tuple[Run, dict]]], int],
    parallel: int,
    name: str,
) -> None:
    """Execute claimed runs with `one` (a run to its result), `parallel` at a time, and record
    the results with `record` in small batches (8, or every half second). A run whose result
    is a sandbox error goes back to the queue while it has attempts left; the lease of the
    runs still held is renewed when half of it is gone. In a worker that is stopping, the runs
    not started yet are handed back (those under way finish)."""
    renew_at = time.monotonic() + span.total_seconds() / 2
    ids = [r.pk for r in runs]
    Run.objects.filter(pk__in=ids, status=Run.RUNNING, worker=token).update(
        lease_expires_at=lease_from_now(span)
    )
    pending: list[tuple[Run, dict]] = []
    handed_back: list[Run] = []  # not started: this worker is stopping (runs_hand_back)
    flushed = time.monotonic()

    def started(run: Run) -> tuple[Run, dict | None]:
        if worker_stopping():
            return run, None
        return one(run)

    try:
        with ThreadPoolExecutor(
            max_workers=max(1, parallel), thread_name_prefix=f"{name}-run"
        ) as pool:
            for future in as_completed([pool.submit(started, run) for run in runs]):
                run, result = future.result()
                if result is None:
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
                if len(pending) >= 8 or time.monotonic() - flushed > 0.5:
                    record(pending)
                    pending, flushed = [], time.monotonic()
                if time.monotonic() >= renew_at:
                    renew_at = time.monotonic() + span.total_seconds() / 2
                    Run.objects.filter(pk__in=ids, status=Run.RUNNING, worker=token).update(
                        lease_expires_at=lease_from_now(span)
                    )
    finally:
        if pending:
            record(pending)
        runs_hand_back(handed_back, token=token)


def runs_execute_in_images(
    runs: list[Run],
    *,
    token: str,
    span: timedelta,
    image_for: Callable[[dict], object],
    execute: Callable[[Run, str], dict],
    record: Callable[[list[tuple[Run, dict]]], int],
    parallel: int,
    name: str,
    mode_of: Callable[[Run], str],
) -> None:
    """Execute claimed runs that each need their task's image (terminal and repository runs):
    the image is built, or found by its content hash, once per message (`ImageBuilds`). A task
    whose image does not build gives its runs `build_failed` with the build's log; an engine
    fault, or an inspection that failed meanwhile, is the run's sandbox error. Otherwise
    `execute(run, tag)` gives the result, which carries the build's detail under `build`."""
    builds = ImageBuilds(image_for, name=name)

    def one(run: Run) -> tuple[Run, dict]:
        try:
            build = builds.of(run)
        except Exception as exc:  # noqa: BLE001 - an engine fault is the run's sandbox error
            return run, run_sandbox_error(f"building the image failed: {exc}")
        detail = {"tag": build.tag, "cached": build.cached, "seconds": round(build.seconds, 3)}
        if not build.ok and build.sandbox_error:  # the engine's fault, not the task's
            return run, run_sandbox_error(f"building the image failed: {build.reason}")
        if not build.ok:
            return run, {
                "outcome": "build_failed",
                "reward": None,
                "reason": build.reason,
                "mode": mode_of(run),
                "seconds": round(build.seconds, 3),
                "build": {**detail, "log": build.log, "reason": build.reason},
            }
        if run.inspection.status == Inspection.FAILED:
            return run, run_sandbox_error(f"inspection #{run.inspection_id} failed")
        try:
            result = execute(run, build.tag)
        except Exception as exc:  # noqa: BLE001
            logger.exception("%s run %s failed in the executor", name, run.pk)
            result = run_sandbox_error(f"{type(exc).__name__}: {exc}")
        result["build"] = detail
        return run, result

    try:
        runs_execute_parallel(
            runs, token=token, span=span, one=one, record=record, parallel=parallel, name=name
        )
    finally:
        builds.close()


def run_sandbox_error(reason: str) -> dict:
    """A run's result when the sandbox or its engine failed, not the code under test."""
    return {"outcome": "sandbox_error", "reward": None, "reason": reason, "seconds": 0.0}


# --- A worker stopping ---------------------------------------------------------------------------

# One byte of memory shared by a worker's main process and every pool process forked from it
# (the worker's bootstep imports this module before the pool starts): the main process sets it
# when asked to stop, and the pool processes read it between runs. A flag in memory rather than a
# signal: a pool process may be deep in a sandbox call, and needs no handler of its own.
_stopping = mmap.mmap(-1, 1)


def worker_stop_request() -> None:
    """Tell this worker's pool processes to hand back the runs they have not started."""
    _stopping[0] = 1


def worker_stopping() -> bool:
    return _stopping[0] == 1


def runs_hand_back(runs, *, token: str) -> int:
    """Give back runs this worker claimed (under `token`) but has not started, because it is
    stopping: queued again, their attempt not counted, and sent to the other workers. A run
    another sweeper or worker took meanwhile is left alone. Returns how many went back."""
    ids = [run.pk for run in runs]
    if not ids:
        return 0
    with runs_transaction():
        mine = list(
            Run.objects.select_for_update()
            .filter(pk__in=ids, status=Run.RUNNING, worker=token)
            .values_list("pk", flat=True)
        )
        Run.objects.filter(pk__in=mine, status=Run.RUNNING, worker=token).update(
            status=Run.QUEUED,
            attempts=F("attempts") - 1,
            lease_expires_at=None,
            error="handed back: its worker was stopping",
        )
        if mine:
            enqueue.runs_requeue_after_commit(mine)
    if mine:
        logger.warning("worker stopping: handed back %s runs to the queue", len(mine))
    return len(mine)


def runs_send_again(run_ids: list[int]) -> int:
    """A stopping worker's message it will not start: its runs still queued go back to the
    broker as new messages (this one is acknowledged), for the other workers."""
    ids = list(Run.objects.filter(pk__in=run_ids, status=Run.QUEUED).values_list("pk", flat=True))
    if ids:
        enqueue.runs_requeue_after_commit(ids)
        logger.warning("worker stopping: sent %s runs back to the queue unstarted", len(ids))
    return len(ids)


# --- Each worker's own sweeper -------------------------------------------------------------------

# Held for a sweep, and by the main thread while it forks a pool process: a child never inherits
# a database connection in the middle of a sweep (each sweep closes its connection at the end).
_sweeping = threading.Lock()
_fork_guarded = False


class RunsSweeper:
    """runs_sweep every `interval` seconds (with a random spread, so that workers started
    together do not sweep together) in a daemon thread of a worker's main process, the first
    time at once: the lost runs of a dead worker come back while any worker lives, beat or
    not. The main process runs no task, so its thread is free whatever the pool is doing."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="runs-sweeper", daemon=True)

    def start(self) -> RunsSweeper:
        global _fork_guarded
        if not _fork_guarded:
            os.register_at_fork(
                before=_sweeping.acquire,
                after_in_parent=_sweeping.release,
                after_in_child=_sweeping.release,
            )
            _fork_guarded = True
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _loop(self) -> None:
        wait = 0.0
        while not self._stop.wait(wait):
            with _sweeping:
                try:
                    swept = runs_sweep()
                    if any(swept.values()):
                        logger.warning("swept runs: %s", swept)
                except Exception:  # noqa: BLE001 - a database away for a while: try again later
                    logger.exception("the runs sweep failed; trying again in %.0f s", self.interval)
                finally:
                    connections.close_all()
            wait = self.interval * random.uniform(0.75, 1.25)


def runs_sweeper_start() -> RunsSweeper | None:
    """Start the worker's own sweeper (None when WORKER_SWEEP_SECONDS is 0)."""
    if settings.WORKER_SWEEP_SECONDS <= 0:
        return None
    return RunsSweeper(settings.WORKER_SWEEP_SECONDS).start()
