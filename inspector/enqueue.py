"""The one module that puts work on the broker: nothing else in `inspector/` names a Celery task.

The tasks themselves (`workers/tasks.py`) are thin adapters that call back into the services, so
they are imported here inside each function: `inspector/` never imports `workers.tasks` at module
level, and there is no import circle. Work that depends on rows a transaction is writing is sent
after the commit (`*_after_commit`), so a worker never looks for a row it cannot see yet."""

from __future__ import annotations

from django.conf import settings
from django.db import transaction

from inspector.models import Run, Task


def inspection_prepare_after_commit(inspection_id: int) -> None:
    """Queue the preparation of a new inspection (its runs made by a worker) once its row is
    committed."""
    from workers.tasks import inspection_prepare

    inspection_prepare.delay_on_commit(inspection_id)


def inspection_prepare(inspection_id: int) -> None:
    """Queue the preparation of an inspection again (a sweep: its message or worker was lost)."""
    from workers.tasks import inspection_prepare as task

    task.delay(inspection_id)


def inspection_dispatch(inspection_id: int) -> None:
    """Queue the dispatch of a prepared inspection again (a sweep: its message was lost)."""
    from workers.tasks import inspection_dispatch as task

    task.delay(inspection_id)


def inspection_dispatch_after_commit(inspection_id: int) -> None:
    """Queue the dispatch of a new inspection's runs once its rows are committed."""
    from workers.tasks import inspection_dispatch

    inspection_dispatch.delay_on_commit(inspection_id)


def inspection_analyse(inspection_id: int) -> None:
    """Queue the analysis of an inspection whose runs are all recorded."""
    from workers.tasks import inspection_analyse as task

    task.delay(inspection_id)


def runs_send(rows, *, per_message: int | None = None) -> int:
    """Send (run id, group) pairs in messages of whole groups' runs (a task's, or a task's
    runs of one repeat), about RUNS_PER_MESSAGE.

    A message per run would spend more time in the broker than in the sandbox, and a session
    per message spreads the start of its two sandboxes over many runs; a task's runs stay in
    one message unless it alone has more. Redelivery is cheap: claimed runs are skipped."""
    from workers.tasks import runs_execute

    per_message = per_message or settings.RUNS_PER_MESSAGE
    sent = 0
    batch: list[int] = []
    batch_group = None
    with runs_execute.app.producer_or_acquire() as producer:
        for run_id, group in rows:
            if (
                batch
                and len(batch) >= per_message
                and (group != batch_group or len(batch) >= 4 * per_message)
            ):
                runs_execute.apply_async((batch,), producer=producer)
                batch = []
            batch.append(run_id)
            batch_group = group
            sent += 1
        if batch:
            runs_execute.apply_async((batch,), producer=producer)
    return sent


def function_runs_send(runs) -> int:
    """Send function tasks' queued runs (a queryset) repeat by repeat: a task's repeats land in
    different messages, so in sessions with different hash seeds (see runs_execute)."""
    rows = (
        (pk, (repeat, task_id))
        for pk, repeat, task_id in runs.order_by("repeat", "task_id", "pk")
        .values_list("pk", "repeat", "task_id")
        .iterator(chunk_size=5000)
    )
    return runs_send(rows, per_message=settings.RUNS_PER_MESSAGE)


def runs_requeue_after_commit(run_ids: list[int]) -> None:
    """Send runs back to the workers (a retry, a lease that ran out) once the transaction that
    re-queued them is committed."""

    def send() -> None:
        # Grouped as the dispatch groups them: a function task's runs repeat by repeat (a
        # message's runs of one repeat share one sandbox session, and runs_execute starts a
        # session for each repeat it meets), other tasks' runs task by task (one image build).
        # In the order of their ids, the runs sent again after a broker lost its messages mixed
        # a dozen repeats in each message and ran at a quarter of the speed.
        rows = Run.objects.filter(pk__in=run_ids).values_list(
            "pk", "repeat", "task_id", "task__kind"
        )
        keyed = sorted(
            ((0, repeat, task_id, pk) if kind == Task.FUNCTION else (1, 0, task_id, pk))
            for pk, repeat, task_id, kind in rows.iterator()
        )
        runs_send((pk, (first, repeat, task_id)) for first, repeat, task_id, pk in keyed)

    transaction.on_commit(send)
