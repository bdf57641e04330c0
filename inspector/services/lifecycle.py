"""The run lifecycle around execution: counting runs done (and queueing the analysis at the last),
and sweeping runs whose lease ran out."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from datetime import timedelta

from django.conf import settings
from django.db.models import F
from django.utils import timezone

from inspector import enqueue
from inspector.models import (
    Inspection,
    Run,
)
from workers.sandbox import Outcome

logger = logging.getLogger(__name__)


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
    runs still held is renewed when half of it is gone."""
    lease = timezone.now() + span
    ids = [r.pk for r in runs]
    Run.objects.filter(pk__in=ids, status=Run.RUNNING, worker=token).update(lease_expires_at=lease)
    pending: list[tuple[Run, dict]] = []
    flushed = time.monotonic()
    try:
        with ThreadPoolExecutor(
            max_workers=max(1, parallel), thread_name_prefix=f"{name}-run"
        ) as pool:
            for future in as_completed([pool.submit(one, run) for run in runs]):
                run, result = future.result()
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
                    record(pending)
                    pending, flushed = [], time.monotonic()
                if lease - now < span / 2:
                    lease = now + span
                    Run.objects.filter(pk__in=ids, status=Run.RUNNING, worker=token).update(
                        lease_expires_at=lease
                    )
    finally:
        if pending:
            record(pending)
