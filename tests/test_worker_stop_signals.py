"""workers/steps.py's stop in bounded time, in-process: a second shutdown signal is a cold
shutdown even when it arrives while the first one's handler is still running, and the last
resort exits without waiting on a lock a stuck main thread may hold."""

from __future__ import annotations

import logging
import signal
import threading

import pytest

from workers import steps


class NotStopping:
    """The services' stop flag, as it reads before Celery's handler has set it."""

    @staticmethod
    def worker_stopping() -> bool:
        return False


@pytest.fixture
def signals_sent(monkeypatch):
    sent: list[tuple[int, int]] = []
    monkeypatch.setattr(steps.os, "kill", lambda pid, signum: sent.append((pid, signum)))
    monkeypatch.setattr(steps, "_signalled", [False], raising=False)
    return sent


def test_a_signal_arriving_inside_the_first_ones_handler_is_the_cold_shutdown(signals_sent):
    handled = []

    def celerys_handler(signum, frame):
        handled.append(signum)
        # Bin/up's SIGTERM lands here, before Celery has set the services' stop flag.
        wrapper(signal.SIGTERM, None)

    wrapper = steps._second_is_cold(celerys_handler, NotStopping())
    wrapper(signal.SIGINT, None)

    assert handled == [signal.SIGINT]  # Celery's warm shutdown ran once
    assert [signum for _, signum in signals_sent] == [signal.SIGQUIT]


def test_a_second_signal_after_the_first_is_the_cold_shutdown_and_the_first_is_warm(signals_sent):
    handled = []
    wrapper = steps._second_is_cold(lambda signum, frame: handled.append(signum), NotStopping())

    wrapper(signal.SIGTERM, None)
    assert handled == [signal.SIGTERM] and signals_sent == []

    wrapper(signal.SIGINT, None)
    assert handled == [signal.SIGTERM]
    assert [signum for _, signum in signals_sent] == [signal.SIGQUIT]


def test_the_last_resort_exits_while_another_thread_holds_the_logging_locks(monkeypatch):
    exited = threading.Event()
    monkeypatch.setattr(steps.os, "_exit", lambda code: exited.set())
    monkeypatch.setattr(steps.Path, "read_text", lambda self: "")  # no pool processes to kill
    handler = logging.StreamHandler()
    logging.getLogger().addHandler(handler)
    release = threading.Event()

    def stuck_main_thread():
        with logging._lock, handler.lock:  # as a thread stuck inside a log call holds them
            release.wait(10)

    holder = threading.Thread(target=stuck_main_thread)
    holder.start()
    try:
        last_resort = threading.Thread(target=steps._hard_exit, daemon=True)
        last_resort.start()
        assert exited.wait(5), "the last resort waited on a lock"
    finally:
        release.set()
        holder.join()
        logging.getLogger().removeHandler(handler)
