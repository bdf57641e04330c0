"""Shared fixtures: personas, a task-set importer, an eager Celery for in-process inspections,
and real Celery worker processes for the end-to-end tests. The builders they use are in
tests/builders.py, the worker process in tests/worker_process.py."""

from __future__ import annotations

import functools
import io
import os
from collections.abc import Iterator

import pytest
from django.conf import settings

from tests.builders import PLANTED_SAMPLES, PLANTED_TASKS, jsonl
from tests.worker_process import BeatProcess, WorkerProcess, database_url

PRODUCTION = settings.DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql"
DOCKER_BASE_IMAGE = "inspector-sandbox:bookworm"
DOCKER_SWE_IMAGE = "inspector-sandbox:bookworm-swe"


@functools.cache
def docker_engine_problem(image: str) -> str:
    """Why the Docker tests cannot run ("" when they can): no engine answers, or `image` is
    missing. Asked once per image and session."""
    import docker

    try:
        client = docker.from_env(timeout=10)
        client.ping()
        client.images.get(image)
    except docker.errors.ImageNotFound:
        return f"the image {image} is missing (bin/docker-up builds it)"
    except Exception as exc:  # noqa: BLE001 (any failure to reach the engine)
        return f"the Docker engine does not answer ({exc}); bin/docker-up starts one"
    return ""


@pytest.fixture
def docker_engine() -> None:
    """A Docker engine with the base sandbox image. Like the rest of the suite, a missing engine
    fails the test with the reason; it never skips."""
    problem = docker_engine_problem(DOCKER_BASE_IMAGE)
    if problem:
        pytest.fail(problem)


@pytest.fixture
def swe_docker_engine() -> None:
    """A Docker engine with the SWE sandbox image (git and patch besides the base)."""
    problem = docker_engine_problem(DOCKER_SWE_IMAGE)
    if problem:
        pytest.fail(problem)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # bin/test runs the suite on the embedded defaults, then the `production` tests again with
    # DATABASE_URL and CELERY_BROKER_URL pointing at PostgreSQL and Redis, then the `compose`
    # tests (the compose stack) only when asked for by name (-m compose).
    compose = "compose" in (config.option.markexpr or "")
    keep, drop = [], []
    for item in items:
        left_out = (not PRODUCTION and item.get_closest_marker("production")) or (
            not compose and item.get_closest_marker("compose")
        )
        (drop if left_out else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


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


class _RowCopies:
    """Rows of the tables an import and an inspection write, as they stood after one real
    inspection, keyed by the settings it ran with: restored by later tests in place of the same
    inspection run again (its sandbox runs were most of the time of the tests that only read an
    inspected set: the queue, the dashboard, review and exports)."""

    TABLES = ("taskset", "tasksetversion", "task", "sample", "inspection", "run", "flag")

    def __init__(self) -> None:
        self.copies: dict[str, tuple[int, list[tuple[str, list[str], list[tuple]]]]] = {}

    @staticmethod
    def key(name: str) -> str:
        from django.conf import settings as live

        # Every setting an inspection reads (repeats, probes, limits, the sandbox): a test that
        # changed one gets a real inspection of its own.
        return name + repr(sorted(
            (k, repr(getattr(live, k))) for k in dir(live)
            if k.startswith(("INSPECT_", "BEHAVIOUR_", "SANDBOX_", "RUN_", "ANALYSIS_"))
        ))  # fmt: skip

    @classmethod
    def tables(cls) -> list[str]:
        from inspector import models

        names = {m._meta.model_name: m._meta.db_table for m in (
            models.TaskSet, models.TaskSetVersion, models.Task, models.Sample,
            models.Inspection, models.Run, models.Flag,
        )}  # fmt: skip
        return [names[t] for t in cls.TABLES]

    @classmethod
    def empty(cls) -> bool:
        from django.db import connection

        with connection.cursor() as cursor:
            for table in cls.tables():
                cursor.execute(f"SELECT 1 FROM {connection.ops.quote_name(table)} LIMIT 1")
                if cursor.fetchone():
                    return False
        return True

    def take(self, key: str, inspection_id: int) -> None:
        from django.db import connection

        dump = []
        with connection.cursor() as cursor:
            for table in self.tables():
                cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")
                columns = [c[0] for c in cursor.description]
                dump.append((table, columns, cursor.fetchall()))
        self.copies[key] = (inspection_id, dump)

    def restore(self, key: str) -> int | None:
        """The copied inspection's id, its rows written back; None when there is no copy or it
        cannot be written here (another engine than SQLite, or rows already in the tables)."""
        from django.db import connection

        if key not in self.copies or connection.vendor != "sqlite" or not self.empty():
            return None
        inspection_id, dump = self.copies[key]
        quote = connection.ops.quote_name
        with connection.cursor() as cursor:
            for table, columns, rows in dump:
                if rows:
                    cursor.executemany(
                        f"INSERT INTO {quote(table)} ({', '.join(map(quote, columns))}) "
                        f"VALUES ({', '.join(['%s'] * len(columns))})",
                        rows,
                    )
        return inspection_id


_planted_copies = _RowCopies()


@pytest.fixture
def planted_inspected(import_taskset, inspect_now):
    """The planted set (tasks and samples) after one inspection with the test's settings, as
    `inspect_now(import_taskset())` leaves it. The first test in a session to ask runs it for
    real, in the sandbox; later tests with the same settings get a copy of the rows it wrote
    (on SQLite, into empty tables; otherwise they run it too)."""
    from inspector.models import Inspection

    key = _planted_copies.key("planted")
    copied = _planted_copies.restore(key)
    if copied is not None:
        return Inspection.objects.get(pk=copied)
    fresh = _RowCopies.empty()
    inspection = inspect_now(import_taskset())
    if fresh and inspection.status == Inspection.FINISHED:
        _planted_copies.take(key, inspection.pk)
    return inspection


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
def lead_key(lead) -> str:
    """The key of an API token of the lead (an admin)."""
    from inspector.models import ApiToken

    return ApiToken.issue(user=lead, name="trainer CI")[1]


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
def start_beat(worker_env) -> Iterator:
    started: list[BeatProcess] = []

    def start(name: str = "b1", **extra_env: str) -> BeatProcess:
        beat = BeatProcess({**worker_env, **extra_env}, name).start()
        started.append(beat)
        return beat

    yield start
    for beat in started:
        beat.stop()


@pytest.fixture
def purge_broker() -> None:
    from inspector.celery import app

    app.control.purge()


@pytest.fixture(scope="session")
def swe_fixture(tmp_path_factory):
    """The SWE-bench fixture set of bench/swe/fixtures.py (instances, environments, predictions,
    truth), built once per session."""
    from bench.swe import fixtures

    return fixtures.build(tmp_path_factory.mktemp("swe-fixtures"))
