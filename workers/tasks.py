"""Celery tasks: thin adapters that take ids and call a service."""

from __future__ import annotations

import os
import socket

from celery import shared_task
from celery.signals import worker_process_init, worker_process_shutdown, worker_ready


def _worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


@shared_task(name="workers.inspection_prepare", acks_late=True)
def inspection_prepare(inspection_id: int) -> int:
    from inspector import services

    return services.inspection_prepare(inspection_id=inspection_id, worker=_worker_name())


@shared_task(name="workers.inspection_dispatch", acks_late=True)
def inspection_dispatch(inspection_id: int) -> int:
    from inspector import services

    return services.inspection_dispatch(inspection_id=inspection_id)


@shared_task(name="workers.runs_execute", acks_late=True)
def runs_execute(run_ids: list[int]) -> int:
    from inspector import services

    return len(services.runs_execute(run_ids=run_ids, worker=_worker_name()))


@shared_task(name="workers.inspection_analyse", acks_late=True)
def inspection_analyse(inspection_id: int) -> None:
    from inspector import services

    services.inspection_analyse(inspection_id=inspection_id)


@shared_task(name="workers.reinspect_due")
def reinspect_due() -> list[int]:
    """Beat: start the scheduled re-inspections that are due."""
    from inspector import services

    return [inspection.pk for inspection in services.reinspect_due()]


@shared_task(name="workers.runs_sweep")
def runs_sweep() -> dict[str, int]:
    from inspector import services

    return services.runs_sweep()


@worker_ready.connect
def _sweep_at_start(**_: object) -> None:
    from inspector import services

    # Containers and work folders of workers killed on this machine go; the runs they left
    # half-done are the worker's own sweeper's (workers/steps.py), at once and then periodically.
    services.sandbox_sweep()


@worker_process_init.connect
def _warm_sandbox(**_: object) -> None:
    from inspector import services

    services.sandbox_warm()


@worker_process_shutdown.connect
def _close_sandbox(**_: object) -> None:
    from inspector import services

    services.sandbox_close()
