"""A real Celery worker process for the end-to-end tests, sharing the test run's database."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from django.db import connection

from tests.builders import ROOT


def database_url() -> str:
    """The URL of the database this test run uses, for a worker process to share it."""
    s = connection.settings_dict
    if s["ENGINE"] == "django.db.backends.postgresql":
        host = s.get("HOST") or "127.0.0.1"
        port = s.get("PORT") or 5432
        user = s.get("USER") or "postgres"
        return f"postgres://{user}@{host}:{port}/{s['NAME']}"
    return f"sqlite:///{s['NAME']}"


def output_since(log: Path, offset: int) -> str:
    with log.open("rb") as fh:
        fh.seek(offset)
        return fh.read().decode(errors="replace")


def wait_for(predicate, timeout: float, what: str, step: float = 0.2):
    """Ask `predicate` every `step` seconds until it gives something true, and return that; fail
    the test, saying what it waited for, after `timeout` seconds."""
    import pytest

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    pytest.fail(f"gave up after {timeout:.0f} s waiting for {what}")


class CeleryProcess:
    """A `celery -A inspector ...` process in a session of its own, writing to a log file that
    the processes of one name share."""

    def __init__(self, env: dict[str, str], name: str, log: Path) -> None:
        self.env = env
        self.name = name
        self.log = log
        self.proc: subprocess.Popen | None = None

    def spawn(self, *args: str) -> None:
        self.log_from = self.log.stat().st_size if self.log.exists() else 0
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "inspector", *args],
            cwd=ROOT,
            env=self.env,
            stdout=self.log.open("ab"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def output(self) -> str:
        """What this process wrote to its log (a log file is shared by the runs of a name)."""
        return output_since(self.log, self.log_from)

    def stop(self) -> None:
        # SIGTERM to the main process only: a warm shutdown. Pool children that get SIGTERM
        # themselves die mid-task and can leave the main process waiting for them.
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                pass
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)


class WorkerProcess(CeleryProcess):
    def __init__(self, env: dict[str, str], name: str) -> None:
        super().__init__(env, name, Path(env["INSPECTOR_DATA_DIR"]) / f"worker-{name}.log")

    def start(self) -> WorkerProcess:
        self.spawn(
            "worker",
            "-c",
            "2",
            "-n",
            f"{self.name}@%h",
            "--loglevel=INFO",
            "--without-mingle",
            "--without-gossip",
        )
        return self

    def wait_ready(self, timeout: float = 60) -> None:
        from inspector import services

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"worker exited: {self.log.read_text()[-3000:]}")
            if any(n.startswith(self.name + "@") for n in services.workers_alive(timeout=1.0)):
                return
        raise RuntimeError(f"worker not ready after {timeout} s: {self.log.read_text()[-3000:]}")

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)
            self.proc.wait(timeout=30)


class BeatProcess(CeleryProcess):
    """A real `celery beat` process with a schedule file of its own (several may run at once,
    as when a second beat is started by mistake)."""

    def __init__(self, env: dict[str, str], name: str) -> None:
        data = Path(env["INSPECTOR_DATA_DIR"])
        super().__init__(env, name, data / f"beat-{name}.log")
        self.schedule = data / f"beat-{name}.schedule"

    def start(self) -> BeatProcess:
        self.spawn("beat", "--schedule", str(self.schedule), "--loglevel=INFO")
        return self
