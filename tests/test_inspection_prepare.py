"""An inspection is prepared by a worker: starting one creates its row and queues its
preparation (the runs, the mutants, the behaviour inputs), which a worker does, once, in one
transaction; a sweep prepares again what a lost message or a dead worker left unprepared, and
leaves a long preparation that is still alive alone."""

from __future__ import annotations

import io
import threading
import time
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from inspector import enqueue, services
from inspector.models import Inspection, Run, Sample, Task
from inspector.services import inspections
from tests.worker_process import wait_for

pytestmark = pytest.mark.django_db

STALL_SECONDS = 3  # RUN_WALL_SECONDS + RUN_LEASE_SLACK_SECONDS in the tests that sweep


def bearer(key: str) -> dict[str, str]:
    return {"HTTP_AUTHORIZATION": f"Bearer {key}"}


def run_rows(inspection: Inspection) -> list[tuple]:
    return list(
        Run.objects.filter(inspection=inspection)
        .order_by("pk")
        .values_list("task__task_id", "kind", "probe", "repeat", "sample__sample_id")
    )


def runs_as_before(inspection: Inspection) -> list[tuple]:
    """The runs inspection_start made in the caller before preparation moved to a worker, in
    its order: per task (by position) the reference repeats, each sample's repeats, each
    probe's repeats, then the task's mutants and its behaviour runs (the reference, each sample,
    each mutant)."""
    from inspector.detect.mutants import generate_mutants

    config = inspection.config
    rows = []
    for t in inspection.version.tasks.order_by("position"):
        samples = list(
            Sample.objects.filter(task=t).order_by("pk").values_list("sample_id", flat=True)
        )
        rows += [
            (t.task_id, Run.REFERENCE, "", r, None)
            for r in range(1, config["reference_repeats"] + 1)
        ]
        for s in samples:
            rows += [
                (t.task_id, Run.SAMPLE, "", r, s) for r in range(1, config["sample_repeats"] + 1)
            ]
        for probe in config["probes"]:
            rows += [
                (t.task_id, Run.PROBE, probe, r, None)
                for r in range(1, config["probe_repeats"] + 1)
            ]
        mutants = generate_mutants(
            t.canonical_solution,
            prompt=t.prompt,
            entry_point=t.entry_point,
            limit=config["mutants"],
        )
        rows += [(t.task_id, Run.MUTANT, m.mutant_id, 1, None) for m in mutants]
        if t.behaviour_inputs:
            rows.append((t.task_id, Run.BEHAVIOUR, Run.REFERENCE, 1, None))
            rows += [(t.task_id, Run.BEHAVIOUR, f"sample:{s}", 1, s) for s in samples]
            rows += [(t.task_id, Run.BEHAVIOUR, f"mutant:{m.mutant_id}", 1, None) for m in mutants]
    return rows  # fmt: skip


def test_the_request_returns_before_any_run_exists_and_says_it_is_preparing(
    client, lead_key, import_taskset, django_capture_on_commit_callbacks
):
    import_taskset(name="api-set")

    with django_capture_on_commit_callbacks(execute=False) as queued:
        started = client.post("/api/v1/tasksets/api-set/inspections", **bearer(lead_key))

    assert started.status_code == 202
    body = started.json()
    assert body["status"] == "queued" and body["preparing"] is True
    assert (body["phase"], body["runs_total"], body["percent"]) == ("preparing", 0, 0)
    assert not Run.objects.exists()
    assert len(queued) == 1  # the preparation, sent once the row is committed
    status = client.get(f"/api/v1/inspections/{body['id']}", **bearer(lead_key)).json()
    assert status["phase"] == "preparing" and status["percent"] == 0
    # A second inspection is refused while this one is prepared, and says why.
    again = client.post("/api/v1/tasksets/api-set/inspections", **bearer(lead_key))
    assert again.status_code == 409 and "preparing its runs" in again.json()["error"]


def test_a_worker_prepares_the_inspection_and_it_finishes_with_the_same_runs_as_before(
    import_taskset, inspect_now, settings
):
    settings.INSPECT_MUTANTS = 3
    settings.INSPECT_BEHAVIOUR = True
    settings.INSPECT_REFERENCE_REPEATS = 2

    inspection = inspect_now(import_taskset())  # start, then prepare, dispatch, runs, analysis

    assert inspection.status == Inspection.FINISHED, inspection.error
    assert inspection.prepared_at is not None and inspection.preparer
    rows = run_rows(inspection)
    assert rows == runs_as_before(inspection)
    assert {kind for _, kind, *_ in rows} >= {Run.MUTANT, Run.BEHAVIOUR, Run.PROBE}
    assert inspection.runs_total == inspection.runs_done == len(rows)
    assert Task.objects.filter(version=inspection.version).exclude(behaviour_inputs=[]).exists()


def test_a_redelivered_prepare_message_creates_no_duplicate_runs(import_taskset, eager_celery):
    inspection = services.inspection_start(version=import_taskset())

    made = services.inspection_prepare(inspection_id=inspection.pk, worker="first")
    again = services.inspection_prepare(inspection_id=inspection.pk, worker="second")

    inspection.refresh_from_db()
    assert made > 0 and again == 0
    assert Run.objects.filter(inspection=inspection).count() == inspection.runs_total == made
    assert inspection.preparer.startswith("first#")


def test_a_preparation_that_lost_the_inspection_to_another_worker_leaves_no_runs(
    import_taskset, eager_celery, settings, monkeypatch
):
    settings.INSPECT_MUTANTS = 1
    inspection = services.inspection_start(version=import_taskset())
    real = inspections._deeper_runs

    def taken_meanwhile(*args):
        # A sweep took the preparation back from this worker (its marks stopped) and another
        # worker took it: at the end this one's transaction must not commit its runs.
        Inspection.objects.filter(pk=inspection.pk).update(preparer="other#1")
        return real(*args)

    monkeypatch.setattr(inspections, "_deeper_runs", taken_meanwhile)
    assert services.inspection_prepare(inspection_id=inspection.pk, worker="late") == 0

    inspection.refresh_from_db()
    assert not Run.objects.filter(inspection=inspection).exists()
    assert inspection.is_preparing and inspection.runs_total == 0


@pytest.mark.django_db(transaction=True)
def test_two_workers_given_the_same_prepare_message_at_once_create_the_runs_once(
    import_taskset, settings
):
    settings.INSPECT_MUTANTS = 12
    settings.INSPECT_BEHAVIOUR = True
    inspection = services.inspection_start(version=import_taskset())  # no worker: never sent
    made: list[int] = []

    def prepare(name: str) -> None:
        from django.db import connections

        try:
            made.append(services.inspection_prepare(inspection_id=inspection.pk, worker=name))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=prepare, args=(f"w{i}",)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    inspection.refresh_from_db()
    assert sorted(made)[0] == 0 and sorted(made)[1] == inspection.runs_total > 0
    assert Run.objects.filter(inspection=inspection).count() == inspection.runs_total


def test_a_preparation_whose_worker_died_or_whose_message_was_lost_is_prepared_again_by_a_sweep(
    import_taskset, eager_celery, settings, django_capture_on_commit_callbacks
):
    settings.RUN_WALL_SECONDS, settings.RUN_LEASE_SLACK_SECONDS = 1, 2
    long_ago = timezone.now() - timedelta(seconds=STALL_SECONDS + 1)
    died = services.inspection_start(version=import_taskset(name="died"))
    lost = services.inspection_start(version=import_taskset(name="lost"))
    # A worker took the first and died making its runs (its transaction rolled back, its marks
    # stopped); the second's message never reached a worker.
    Inspection.objects.filter(pk=died.pk).update(preparer="dead-host:1#abc", updated_at=long_ago)
    Inspection.objects.filter(pk=lost.pk).update(updated_at=long_ago)

    with django_capture_on_commit_callbacks(execute=True):
        swept = services.runs_sweep()  # eager: the preparations run here, then everything

    assert swept["reprepared"] == 2
    for inspection in (died, lost):
        inspection.refresh_from_db()
        assert inspection.status == Inspection.FINISHED, inspection.error
        assert Run.objects.filter(inspection=inspection).count() == inspection.runs_total > 0
        assert inspection.preparer != "dead-host:1#abc"
    assert services.runs_sweep()["reprepared"] == 0


def test_a_prepared_inspection_whose_dispatch_was_lost_is_dispatched_by_a_sweep(
    import_taskset, eager_celery, settings, django_capture_on_commit_callbacks
):
    settings.RUN_WALL_SECONDS, settings.RUN_LEASE_SLACK_SECONDS = 1, 2
    inspection = services.inspection_start(version=import_taskset())
    services.inspection_prepare(inspection_id=inspection.pk)  # its dispatch never sent
    long_ago = timezone.now() - timedelta(seconds=STALL_SECONDS + 1)
    Inspection.objects.filter(pk=inspection.pk).update(updated_at=long_ago)

    with django_capture_on_commit_callbacks(execute=True):
        swept = services.runs_sweep()

    inspection.refresh_from_db()
    assert (swept["redispatched"], swept["reprepared"]) == (1, 0)
    assert inspection.status == Inspection.FINISHED, inspection.error
    assert inspection.runs_done == inspection.runs_total > 0


@pytest.mark.django_db(transaction=True)
def test_a_long_preparation_that_is_still_alive_is_not_prepared_twice(
    import_taskset, settings, monkeypatch
):
    settings.RUN_WALL_SECONDS, settings.RUN_LEASE_SLACK_SECONDS = 1, 2  # stalled after 3 s
    inspection = services.inspection_start(version=import_taskset())  # no worker: never sent
    real = inspections._inspection_runs_create
    sent: list[int] = []
    monkeypatch.setattr(enqueue, "inspection_prepare", sent.append)

    def slow(inspection_id: int, token: str) -> int:
        time.sleep(STALL_SECONDS + 2)  # longer than the stall span
        return real(inspection_id, token)

    monkeypatch.setattr(inspections, "_inspection_runs_create", slow)

    def prepare() -> None:
        from django.db import connections

        try:
            services.inspection_prepare(inspection_id=inspection.pk, worker="long")
        finally:
            connections.close_all()

    preparing = threading.Thread(target=prepare)
    preparing.start()
    time.sleep(STALL_SECONDS + 1)
    during = services.runs_sweep()
    redelivered = services.inspection_prepare(inspection_id=inspection.pk, worker="again")
    preparing.join()

    assert during["reprepared"] == 0 and sent == []
    assert redelivered == 0
    inspection.refresh_from_db()
    assert not inspection.is_preparing
    assert Run.objects.filter(inspection=inspection).count() == inspection.runs_total > 0


def test_a_preparation_that_raises_ends_the_inspection_failed_with_its_error(
    import_taskset, inspect_now, settings, monkeypatch, client, lead_key
):
    settings.INSPECT_MUTANTS = 1

    def broken(*args):
        raise ZeroDivisionError("a bug in making the mutants")

    monkeypatch.setattr(inspections, "_deeper_runs", broken)
    inspection = inspect_now(import_taskset())

    assert inspection.status == Inspection.FAILED
    assert "ZeroDivisionError: a bug in making the mutants" in inspection.error
    assert inspection.finished_at is not None and not inspection.is_preparing
    assert not Run.objects.filter(inspection=inspection).exists()
    status = client.get(f"/api/v1/inspections/{inspection.pk}", **bearer(lead_key)).json()
    assert status["status"] == "failed" and "a bug in making the mutants" in status["error"]
    # Not prepared again by a sweep, and a new inspection may start.
    settings.RUN_WALL_SECONDS, settings.RUN_LEASE_SLACK_SECONDS = 0, 0
    assert services.runs_sweep()["reprepared"] == 0
    assert services.inspection_start(version=inspection.version).is_preparing


def test_the_task_set_page_says_an_inspection_is_preparing_not_zero_runs(
    import_taskset, lead_client
):
    version = import_taskset()
    inspection = services.inspection_start(version=version)

    page = lead_client.get(version.taskset.get_absolute_url()).content.decode()
    progress = lead_client.get(f"/inspections/{inspection.pk}/progress").json()

    assert '<strong id="progress-status">preparing</strong>' in page
    assert "a worker is preparing its runs" in page
    assert "0 / 0 runs" not in page and ">0/0<" not in page
    assert (progress["phase"], progress["preparing"], progress["percent"]) == ("preparing", True, 0)


@pytest.mark.django_db(transaction=True)
def test_inspect_wait_says_it_is_preparing_then_follows_the_runs_to_the_end(
    import_taskset, start_worker, monkeypatch
):
    import_taskset()
    # The worker starts only once the command has said it is preparing: until then the
    # preparation waits in the queue.
    monkeypatch.setattr(services, "workers_alive", lambda: True)
    out = io.StringIO()
    failed: list[BaseException] = []

    def inspect() -> None:
        from django.db import connections

        try:
            call_command("inspect", "planted", "--wait", stdout=out)
        except (CommandError, Exception) as exc:  # noqa: BLE001 - reported by the test
            failed.append(exc)
        finally:
            connections.close_all()

    command = threading.Thread(target=inspect)
    command.start()
    wait_for(lambda: "preparing the runs" in out.getvalue(), 30, "the command to say preparing")
    assert not Run.objects.exists()
    monkeypatch.undo()  # the command asked already; starting a worker asks again
    start_worker()
    command.join(timeout=180)

    assert not command.is_alive() and not failed, (failed, out.getvalue())
    said = out.getvalue()
    assert "a worker is preparing its runs" in said
    inspection = Inspection.objects.get()
    assert f"{inspection.runs_total} sandbox runs queued." in said
    assert f"Inspection #{inspection.pk} finished" in said
    assert inspection.runs_done == inspection.runs_total == Run.objects.count() > 0
