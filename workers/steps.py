"""What every worker does besides running tasks, added to it by inspector/celery.py (a Celery
bootstep and a signal handler; the work itself is in the services):

- its own sweeper: a thread of the main process runs the runs sweep every WORKER_SWEEP_SECONDS,
  so the runs of a worker that died come back while any worker lives, with or without beat;
- stopping in bounded time. SIGTERM (or a first SIGINT) is Celery's warm shutdown: no new
  message, and the pool processes hand back the runs they have not started (a shared flag,
  inspector/services/lifecycle.py), finishing the one under way. A second SIGTERM or SIGINT, or
  WORKER_STOP_SECONDS without the worker gone, is a cold shutdown (SIGQUIT: the pool processes
  still busy are killed; their runs come back when their lease runs out). A worker still up 15 s
  after that (a pool process that would not die, a clean-up blocked on the Docker engine) kills
  its pool processes and exits at once.

Module level imports nothing but Celery and the standard library, as workers/tasks.py."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

from celery import bootsteps
from celery.signals import worker_shutting_down

# After a cold shutdown began, how long before the worker kills its pool and exits.
HARD_EXIT_SECONDS = 15.0


class Lifecycle(bootsteps.StartStopStep):
    """The sweeper thread, and a second SIGTERM made a cold shutdown."""

    requires = {"celery.worker.components:Pool"}
    label = "Lifecycle"

    def __init__(self, parent, **kwargs) -> None:
        super().__init__(parent, **kwargs)
        # Imported here, in the main process before the pool forks: the pool processes then
        # share the stop flag the services define.
        from inspector import services  # noqa: F401

        self.sweeper = None

    def start(self, parent) -> None:
        from inspector import services

        self.sweeper = services.runs_sweeper_start()
        # Celery installed its handlers before the steps start. A SIGTERM or SIGINT while
        # stopping already (Celery ignores a second SIGTERM, and a SIGINT after a SIGTERM only
        # arms the next one) becomes SIGQUIT, Celery's cold shutdown.
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, _second_is_cold(signal.getsignal(signum), services))

    def stop(self, parent) -> None:
        if self.sweeper is not None:
            self.sweeper.stop()

    terminate = stop


# Set on the first shutdown signal, before Celery's handler runs: a second signal can arrive
# while that handler is still running (Python runs a handler between any two bytecodes, a
# handler's own included), before it has set the services' stop flag.
_signalled = [False]


def _second_is_cold(first, services):
    def handle(signum, frame) -> None:
        if _signalled[0] or services.worker_stopping():
            os.kill(os.getpid(), signal.SIGQUIT)
            return
        _signalled[0] = True
        if callable(first):
            first(signum, frame)

    return handle


_timers: dict[str, threading.Timer] = {}


def _after(name: str, seconds: float, action) -> None:
    if name not in _timers:
        timer = _timers[name] = threading.Timer(seconds, action)
        timer.daemon = True
        timer.start()


def _say(text: str) -> None:
    """A line on stderr (the worker's log) from a timer thread: written straight to the file
    descriptor, as `logging` or `print` could wait forever on a lock the stuck main thread
    holds."""
    try:
        os.write(2, f"worker: {text}\n".encode())
    except OSError:
        pass


def _cold_shutdown() -> None:
    os.kill(os.getpid(), signal.SIGQUIT)
    _say("still stopping after WORKER_STOP_SECONDS: cutting the running tasks short")


def _hard_exit() -> None:
    """The last resort: kill the pool processes (their sandboxes are swept by the next worker
    on this machine, their runs re-queued when their lease runs out) and exit. Nothing here
    waits on a lock the main thread may hold."""
    pid = os.getpid()
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        children = []
    for child in children:
        try:
            os.kill(int(child), signal.SIGKILL)
        except OSError:
            pass
    _say(f"the worker did not stop: killed pool processes {' '.join(children) or '(none)'}")
    os._exit(1)


@worker_shutting_down.connect
def _stop_in_bounded_time(how: str = "Warm", **_: object) -> None:
    """In the main process, on each shutdown signal: tell the pool to hand back work, and
    bound how long the shutdown may take."""
    from django.conf import settings

    from inspector import services

    services.worker_stop_request()
    if how == "Cold":  # SIGQUIT, a second SIGINT or SIGTERM, or the timer below
        _after("hard", HARD_EXIT_SECONDS, _hard_exit)
    else:
        _after("cold", settings.WORKER_STOP_SECONDS, _cold_shutdown)
        # The bound holds even if the cold shutdown's signal is never handled (a main thread
        # that runs no more Python).
        _after("backstop", settings.WORKER_STOP_SECONDS + HARD_EXIT_SECONDS, _hard_exit)
