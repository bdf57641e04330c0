"""Worker and sandbox control: which workers answer, warming and closing a worker's sandbox,
sweeping what dead workers left."""

from __future__ import annotations

import logging
import threading

from django.conf import settings

from inspector.services.function_runs import run_limits, sandbox_backend
from inspector.services.terminal_runs import terminal_sweep
from workers.sandbox import SandboxUnavailable

logger = logging.getLogger(__name__)


def workers_alive(*, timeout: float = 1.0) -> list[str]:
    """Names of the Celery workers answering a ping on the configured broker."""
    from inspector.celery import app

    # limit=1: one answer is enough to know the inspection will move; no need to wait it out.
    replies = app.control.ping(timeout=timeout, limit=1) or []
    return sorted(name for reply in replies for name in reply)


def sandbox_warm() -> None:
    """Start a worker process's sandboxes ahead of its first message, and load the analysis's
    libraries (pandas, scikit-learn, scipy: about a second) before an inspection waits for
    them: the analysis is the last step of every inspection, when the other worker processes
    have nothing left to do."""
    from inspector.detect import load_libraries

    load_libraries()

    if settings.SANDBOX_BACKEND == "docker":
        try:
            sandbox_backend().warm(run_limits())
        except SandboxUnavailable as exc:
            logger.error("cannot warm the sandbox pool: %s", exc)


def sandbox_close(*, timeout: float = 10.0) -> None:
    """Remove what this worker process holds (its warm pool): pool processes exit without
    running atexit hooks. At most `timeout` seconds: a Docker engine that does not answer
    (each call may wait a minute) kept a stopping worker up until it was killed; what is left
    is removed by the next worker's sandbox_sweep on this machine."""
    if not sandbox_backend.cache_info().currsize:
        return
    close = getattr(sandbox_backend(), "close", None)
    if close is None:
        return
    closing = threading.Thread(target=close, name="sandbox-close", daemon=True)
    closing.start()
    closing.join(timeout)
    if closing.is_alive():
        logger.error("the sandbox did not close in %.0f s: left for the next sweep", timeout)


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
        swept["terminal_containers"] = terminal_sweep()
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
