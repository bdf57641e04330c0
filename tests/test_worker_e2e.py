"""The whole path with a real Celery worker process: on the embedded defaults (SQLite, the
file-system broker) and, marked `production`, on PostgreSQL and Redis."""

from __future__ import annotations

import io
import json
import time

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.test import Client

from inspector import selectors, services
from inspector.models import Inspection, Run, Task
from tests.builders import PLANTED_FLAGS, task

pytestmark = pytest.mark.django_db(transaction=True)


def report() -> dict[str, dict]:
    return {line["task_id"]: line for line in selectors.report_lines(taskset_name="planted")}


def whole_path(import_taskset, reviewer) -> None:
    import_taskset()
    out = io.StringIO()
    call_command("inspect", "planted", "--wait", stdout=out)

    assert "finished" in out.getvalue()
    assert {tid: line["flags"] for tid, line in report().items()} == PLANTED_FLAGS
    inspection = Inspection.objects.get()
    assert inspection.runs_done == inspection.runs_total == Run.objects.count()
    assert not Run.objects.exclude(status=Run.DONE).exists()

    client = Client()
    client.force_login(reviewer)
    queue = client.get("/queue/").content.decode()
    assert "planted/unsolvable" in queue and "planted/clean" not in queue

    target = Task.objects.get(task_id="planted/hackable")
    client.post(f"/tasks/{target.pk}/quarantine", {"reason": "null probe passes"})
    client.post(f"/flags/{target.flags.get().pk}/dismiss", {"note": "quarantined; flag reviewed"})
    manifest = [line["task_id"] for line in selectors.manifest_lines(taskset_name="planted")]
    assert manifest == ["planted/clean"]
    assert report()["planted/hackable"]["status"] == "quarantined"


def test_the_whole_path_on_the_embedded_defaults(start_worker, import_taskset, reviewer):
    assert settings.CELERY_BROKER_URL.startswith("filesystem://")
    start_worker()
    whole_path(import_taskset, reviewer)


@pytest.mark.production
def test_the_whole_path_on_postgresql_redis_and_the_docker_sandbox(
    start_worker, import_taskset, reviewer
):
    assert settings.CELERY_BROKER_URL.startswith("redis://")
    assert settings.SANDBOX_BACKEND == "docker"
    start_worker()
    whole_path(import_taskset, reviewer)
    assert Inspection.objects.get().config["sandbox_backend"] == "docker"


def test_inspect_wait_without_a_worker_says_so_and_fails(import_taskset, purge_broker):
    import_taskset()

    with pytest.raises(CommandError, match="No Celery worker answers"):
        call_command("inspect", "planted", "--wait")
    assert not Inspection.objects.exists()


def test_a_worker_killed_mid_run_loses_nothing_and_records_each_run_once(
    start_worker, import_taskset, settings
):
    slow = (
        "import time\n\ndef check(candidate):\n    time.sleep(1.5)\n    assert candidate(1) == 2\n"
    )
    import_taskset(
        tasks=[task(f"slow/{i}", body="    return x + 1\n", test=slow) for i in range(4)],
        samples=[],
    )
    env = {"RUN_LEASE_SLACK_SECONDS": "3", "INSPECT_REFERENCE_REPEATS": "2"}
    first = start_worker("doomed", **env)
    settings.INSPECT_REFERENCE_REPEATS = 2
    settings.INSPECT_PROBES = ["null"]
    inspection = services.inspection_start(version=selectors.taskset_latest_version(name="planted"))
    deadline = time.monotonic() + 60
    while not Run.objects.filter(status=Run.RUNNING).exists():
        assert time.monotonic() < deadline, "no run started"
        time.sleep(0.1)
    first.kill()  # SIGKILL to the whole worker: the run it held is left `running`

    settings.RUN_LEASE_SLACK_SECONDS = 3
    time.sleep(settings.RUN_WALL_SECONDS + 3.5)
    swept = services.runs_sweep()
    start_worker("rescuer", **env)
    while Inspection.objects.get(pk=inspection.pk).status != Inspection.FINISHED:
        assert time.monotonic() < deadline + 120, "inspection did not finish"
        time.sleep(0.3)

    runs = Run.objects.filter(inspection=inspection)
    inspection.refresh_from_db()
    assert swept["requeued"] >= 1
    assert runs.count() == inspection.runs_total == 12
    assert set(runs.values_list("kind", "status", "outcome")) == {
        (Run.REFERENCE, Run.DONE, "passed"),
        (Run.PROBE, Run.DONE, "failed"),
    }
    assert runs.filter(attempts__gt=1).exists()
    assert Inspection.objects.get(pk=inspection.pk).runs_done == 12
    lines = [json.dumps(r) for r in selectors.report_lines(taskset_name="planted")]
    assert all('"flags": []' in line for line in lines)
