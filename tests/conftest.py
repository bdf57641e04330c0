"""Shared fixtures: personas, task-set builders, an eager Celery for in-process inspections, and
a real Celery worker process for the end-to-end tests."""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

ROOT = Path(__file__).resolve().parent.parent
PRODUCTION = settings.DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # bin/test runs the suite on the embedded defaults, then the `production` tests again with
    # DATABASE_URL and CELERY_BROKER_URL pointing at PostgreSQL and Redis.
    if PRODUCTION:
        return
    keep, drop = [], []
    for item in items:
        (drop if item.get_closest_marker("production") else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


# --- Task sets -----------------------------------------------------------------------------------


def task(task_id: str, *, body: str, test: str, entry_point: str = "f", **extra) -> dict:
    return {
        "task_id": task_id,
        "prompt": f'def {entry_point}(x):\n    """{task_id}"""\n',
        "canonical_solution": body,
        "test": test,
        "entry_point": entry_point,
        **extra,
    }


# One task per planted defect, plus a clean one. The flaky check fails half of the time.
PLANTED_TASKS = [
    task(
        "planted/clean",
        body="    return x + 1\n",
        test="def check(candidate):\n    assert candidate(1) == 2\n    assert candidate(5) == 6\n",
    ),
    task(
        "planted/unsolvable",
        body="    return x + 1\n",
        test="def check(candidate):\n    assert candidate(1) == 2\n    assert candidate(1) == 3\n",
    ),
    task(
        "planted/mislabeled",
        body="    return x - 1\n",
        test="def check(candidate):\n    assert candidate(1) == 2\n",
    ),
    task(
        "planted/flaky",
        body="    return x * 2\n",
        test="import random\n\ndef check(candidate):\n    assert candidate(2) == 4\n"
        "    assert random.random() < 0.5\n",
    ),
    task(
        "planted/hackable", body="    return x\n", test="def check(candidate):\n    candidate(3)\n"
    ),
]
PLANTED_SAMPLES = [
    {"task_id": "planted/clean", "completion": "    return 1 + x\n", "sample_id": "good"},
    {"task_id": "planted/clean", "completion": "    return x\n", "sample_id": "wrong"},
    {"task_id": "planted/unsolvable", "completion": "    return 2\n"},
    {"task_id": "planted/mislabeled", "completion": "    return x + 1\n"},
    {"task_id": "planted/hackable", "completion": "    return x\n"},
    {"task_id": "planted/flaky", "completion": "    return 2 * x\n"},
    {"task_id": "planted/flaky", "completion": "    return x + x\n"},
]
PLANTED_FLAGS = {
    "planted/clean": [],
    "planted/unsolvable": ["unsolvable"],
    "planted/mislabeled": ["mislabeled"],
    "planted/flaky": ["flaky"],
    "planted/hackable": ["reward_hackable"],
}


def jsonl(rows: list[dict]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


@pytest.fixture
def import_taskset():
    from inspector import services

    def do(
        name: str = "planted", tasks: list[dict] | None = None, samples: list[dict] | None = None
    ):
        return services.taskset_import(
            name=name,
            tasks_file=io.BytesIO(jsonl(PLANTED_TASKS if tasks is None else tasks)),
            tasks_name="tasks.jsonl",
            samples_file=io.BytesIO(jsonl(PLANTED_SAMPLES if samples is None else samples)),
            samples_name="samples.jsonl",
        )

    return do


# --- Personas ----------------------------------------------------------------------------------


@pytest.fixture
def reviewer(django_user_model):
    """A member of the reviewers group: triages, but cannot upload, inspect or export."""
    from django.contrib.auth.models import Group

    user = django_user_model.objects.create_user(username="reviewer", password="review-pass-1")
    user.groups.add(Group.objects.get_or_create(name="reviewers")[0])
    return user


@pytest.fixture
def lead(django_user_model):
    """A member of the admins group: also uploads, inspects, exports and manages users."""
    from django.contrib.auth.models import Group

    user = django_user_model.objects.create_user(
        username="lead", password="lead-pass-1", is_staff=True
    )
    user.groups.add(Group.objects.get_or_create(name="admins")[0])
    return user


@pytest.fixture
def lead_client(lead):
    """A client of its own: a test may hold it and reviewer_client at once."""
    from django.test import Client

    client = Client()
    client.force_login(lead)
    return client


@pytest.fixture
def reviewer_client(client, reviewer):
    client.force_login(reviewer)
    return client


# --- Celery ------------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def repeats_that_never_miss_the_planted_flaky_check(settings):
    # The planted flaky check fails half of the time. With 12 reference runs and two correct
    # samples run twice each, all of them agree with probability 0.5**15: the tests that expect
    # the flag never see it missing.
    settings.INSPECT_REFERENCE_REPEATS = 12
    settings.INSPECT_SAMPLE_REPEATS = 2


@pytest.fixture(autouse=True)
def no_mutants_or_behaviour_runs_unless_a_test_asks(settings):
    # The deeper analysis multiplies an inspection's runs; its own tests turn it on.
    settings.INSPECT_MUTANTS = 0
    settings.INSPECT_BEHAVIOUR = False


@pytest.fixture
def eager_celery(settings):
    """Celery tasks run in this process, through the same services a worker calls."""
    from inspector.celery import app

    app.conf.task_always_eager = True
    app.conf.task_eager_propagates = True
    yield app
    app.conf.task_always_eager = False
    app.conf.task_eager_propagates = False


@pytest.fixture
def inspect_now(eager_celery, django_capture_on_commit_callbacks):
    from inspector import services

    def do(version):
        with django_capture_on_commit_callbacks(execute=True):
            inspection = services.inspection_start(version=version)
        inspection.refresh_from_db()
        return inspection

    return do


def database_url() -> str:
    """The URL of the database this test run uses, for a worker process to share it."""
    s = connection.settings_dict
    if s["ENGINE"] == "django.db.backends.postgresql":
        host = s.get("HOST") or "127.0.0.1"
        port = s.get("PORT") or 5432
        user = s.get("USER") or "postgres"
        return f"postgres://{user}@{host}:{port}/{s['NAME']}"
    return f"sqlite:///{s['NAME']}"


class WorkerProcess:
    def __init__(self, env: dict[str, str], name: str) -> None:
        self.env = env
        self.name = name
        self.proc: subprocess.Popen | None = None
        self.log = Path(env["INSPECTOR_DATA_DIR"]) / f"worker-{name}.log"

    def start(self) -> WorkerProcess:
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "inspector",
                "worker",
                "-c",
                "2",
                "-n",
                f"{self.name}@%h",
                "--loglevel=INFO",
                "--without-mingle",
                "--without-gossip",
            ],
            cwd=ROOT,
            env=self.env,
            stdout=self.log.open("ab"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
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


@pytest.fixture
def worker_env(transactional_db) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        DATABASE_URL=database_url(),
        CELERY_BROKER_URL=settings.CELERY_BROKER_URL,
        INSPECTOR_DATA_DIR=str(settings.DATA_DIR),
        PYTHONUNBUFFERED="1",
    )
    return env


@pytest.fixture
def start_worker(worker_env) -> Iterator:
    started: list[WorkerProcess] = []

    def start(name: str = "w1", **extra_env: str) -> WorkerProcess:
        worker = WorkerProcess({**worker_env, **extra_env}, name).start()
        started.append(worker)
        worker.wait_ready()
        return worker

    yield start
    for worker in started:
        worker.stop()


@pytest.fixture
def purge_broker() -> None:
    from inspector.celery import app

    app.control.purge()
