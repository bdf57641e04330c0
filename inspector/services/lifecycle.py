"""The run lifecycle around execution: counting runs done (and queueing the analysis at the last),
and sweeping runs whose lease ran out."""

from __future__ import annotations

import logging
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
