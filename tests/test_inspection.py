"""Inspections run in this process through the real services and the real local sandbox."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from inspector import selectors, services
from inspector.models import Flag, Inspection, Run, Task
from tests.builders import PLANTED_FLAGS, task

pytestmark = pytest.mark.django_db


def prepared(inspection: Inspection) -> Inspection:
    """What a worker does with a new inspection's message: its runs made (not dispatched: the
    dispatch waits for the test's transaction to commit, which it never does)."""
    services.inspection_prepare(inspection_id=inspection.pk)
    inspection.refresh_from_db()
    return inspection


def flags_by_task(inspection: Inspection) -> dict[str, list[str]]:
    found = {t.task_id: [] for t in inspection.version.tasks.all()}
    for flag in inspection.flags.select_related("task"):
        found[flag.task.task_id].append(flag.code)
    return found


def test_it_flags_each_planted_defect_and_leaves_the_clean_task_alone(import_taskset, inspect_now):
    inspection = inspect_now(import_taskset())

    assert inspection.status == Inspection.FINISHED
    assert inspection.runs_done == inspection.runs_total
    assert flags_by_task(inspection) == PLANTED_FLAGS


def test_it_runs_the_reference_samples_and_null_probe_as_many_times_as_configured(
    import_taskset, inspect_now, settings
):
    settings.INSPECT_SAMPLE_REPEATS = 3
    inspection = inspect_now(import_taskset())
    clean = Task.objects.get(task_id="planted/clean")
    runs = Run.objects.filter(inspection=inspection, task=clean)

    assert runs.filter(kind=Run.REFERENCE).count() == 12
    assert runs.filter(kind=Run.SAMPLE, sample__sample_id="good").count() == 3
    assert runs.filter(kind=Run.PROBE, probe="null").count() == 1
    assert inspection.runs_total == Run.objects.filter(inspection=inspection).count()


def test_every_run_is_stored_with_its_outcome_exit_code_duration_and_output(
    import_taskset, inspect_now
):
    inspection = inspect_now(import_taskset())
    failing = Run.objects.filter(
        inspection=inspection, task__task_id="planted/mislabeled", kind=Run.REFERENCE
    ).first()
    passing = Run.objects.filter(
        inspection=inspection, task__task_id="planted/clean", kind=Run.REFERENCE
    ).first()

    assert (failing.status, failing.outcome, failing.exit_code) == (Run.DONE, "failed", 1)
    assert "AssertionError" in failing.stderr_tail
    assert failing.duration > 0
    assert (passing.outcome, passing.exit_code) == ("passed", 0)
    assert passing.finished_at >= passing.started_at


def test_a_flag_names_the_runs_that_prove_it(import_taskset, inspect_now):
    inspection = inspect_now(import_taskset())
    flag = Flag.objects.get(inspection=inspection, code="reward_hackable")
    runs = Run.objects.filter(pk__in=flag.evidence_run_ids)

    assert flag.task.task_id == "planted/hackable"
    assert "null" in flag.explanation
    assert {(r.kind, r.outcome) for r in runs} == {(Run.PROBE, "passed")}


def test_the_queue_columns_follow_the_latest_inspection(import_taskset, inspect_now):
    inspect_now(import_taskset())
    unsolvable = Task.objects.get(task_id="planted/unsolvable")
    clean = Task.objects.get(task_id="planted/clean")

    assert unsolvable.open_flag_list == ["unsolvable"]
    assert unsolvable.severity > 0
    assert unsolvable.reference_pass_rate == 0.0
    assert (clean.severity, clean.reference_pass_rate, clean.sample_pass_rate) == (0, 1.0, 0.5)


def test_a_dismissed_flag_stays_dismissed_when_the_task_is_inspected_again(
    import_taskset, inspect_now, reviewer
):
    version = import_taskset()
    first = inspect_now(version)
    Flag.objects.get(inspection=first, code="reward_hackable").dismiss(
        by=reviewer, note="the check is a smoke test on purpose"
    )
    second = inspect_now(version)
    again = Flag.objects.get(inspection=second, code="reward_hackable")

    assert again.status == Flag.DISMISSED
    assert "smoke test on purpose" in again.note
    assert Task.objects.get(task_id="planted/hackable").severity == 0


def test_a_second_inspection_cannot_start_while_one_runs(import_taskset, eager_celery):
    version = import_taskset()
    services.inspection_start(version=version)  # its dispatch waits for the commit

    with pytest.raises(services.ServiceError, match="still queued"):
        services.inspection_start(version=version)


def test_a_run_delivered_twice_is_executed_and_recorded_once(import_taskset, eager_celery):
    inspection = prepared(services.inspection_start(version=import_taskset()))
    run = Run.objects.filter(inspection=inspection).first()

    first = services.run_execute(run_id=run.pk, worker="a")
    second = services.run_execute(run_id=run.pk, worker="b")
    inspection.refresh_from_db()

    assert first is not None and second is None
    assert Run.objects.get(pk=run.pk).worker.startswith("a#")
    assert inspection.runs_done == 1


def test_the_sweeper_requeues_a_run_whose_worker_vanished_and_gives_up_after_the_attempts(
    import_taskset, eager_celery, settings
):
    settings.RUN_MAX_ATTEMPTS = 2
    inspection = prepared(services.inspection_start(version=import_taskset()))
    run = Run.objects.filter(inspection=inspection).first()
    past = timezone.now() - timedelta(seconds=1)
    Run.objects.filter(pk=run.pk).update(status=Run.RUNNING, attempts=1, lease_expires_at=past)

    services.runs_sweep()
    run.refresh_from_db()
    assert (run.status, run.outcome) == (Run.QUEUED, "")
    assert "re-queued" in run.error

    Run.objects.filter(pk=run.pk).update(status=Run.RUNNING, attempts=2, lease_expires_at=past)
    services.runs_sweep()
    run.refresh_from_db()
    assert (run.status, run.outcome) == (Run.DONE, "sandbox_error")
    assert "worker lost" in run.error


def test_a_sweep_sends_a_stalled_inspections_held_back_runs_only_once_its_references_are_in(
    import_taskset, eager_celery, django_capture_on_commit_callbacks
):
    inspection = prepared(services.inspection_start(version=import_taskset()))  # dispatch lost
    first = Run.objects.filter(inspection=inspection, kind=Run.REFERENCE, repeat=1)
    busy = first.first()  # another worker holds it, its lease alive
    Run.objects.filter(pk=busy.pk).update(
        status=Run.RUNNING, attempts=1, lease_expires_at=timezone.now() + timedelta(minutes=5)
    )
    long_ago = timezone.now() - timedelta(hours=1)
    Inspection.objects.filter(pk=inspection.pk).update(
        status=Inspection.RUNNING, runs_held=True, updated_at=long_ago
    )

    with django_capture_on_commit_callbacks(execute=True):
        services.runs_sweep()

    # The references' first runs were sent again and ran; everything else is still held back.
    assert set(first.exclude(pk=busy.pk).values_list("status", flat=True)) == {Run.DONE}
    rest = Run.objects.filter(inspection=inspection).exclude(kind=Run.REFERENCE, repeat=1)
    assert set(rest.values_list("status", flat=True)) == {Run.QUEUED}
    assert Inspection.objects.get(pk=inspection.pk).runs_held

    # The busy reference run is recorded, but its worker died before sending the rest.
    Run.objects.filter(pk=busy.pk).update(status=Run.DONE, outcome="passed", duration=0.01)
    Inspection.objects.filter(pk=inspection.pk).update(updated_at=long_ago)
    with django_capture_on_commit_callbacks(execute=True):
        services.runs_sweep()

    inspection.refresh_from_db()
    assert not inspection.runs_held
    assert set(rest.values_list("status", flat=True)) == {Run.DONE}


def test_a_stale_worker_cannot_overwrite_the_result_of_a_newer_attempt(
    import_taskset, eager_celery
):
    inspection = prepared(services.inspection_start(version=import_taskset()))
    run = Run.objects.filter(inspection=inspection, kind=Run.REFERENCE).first()
    Run.objects.filter(pk=run.pk).update(status=Run.RUNNING, attempts=2)
    run.refresh_from_db()
    run.attempts = 1  # what the stale worker believes

    services.run_record_error(run, "late result from a worker that was presumed dead")

    assert Run.objects.get(pk=run.pk).status == Run.RUNNING


def test_an_unavailable_sandbox_fails_the_inspection_with_a_message_instead_of_passing_tasks(
    import_taskset, inspect_now, settings
):
    settings.SANDBOX_BACKEND = "vm"  # no such backend: get_sandbox refuses it
    services.sandbox_backend.cache_clear()
    try:
        inspection = inspect_now(import_taskset())
    finally:
        services.sandbox_backend.cache_clear()

    assert inspection.status == Inspection.FAILED
    assert "sandbox unavailable" in inspection.error
    with pytest.raises(services.Conflict, match=f"inspection #{inspection.pk} failed"):
        selectors.manifest_lines(taskset_name="planted")  # refused, not an empty manifest


def test_each_repeat_of_a_run_gets_an_interpreter_with_a_hash_seed_of_its_own(
    import_taskset, inspect_now
):
    # A solution that prints hash("abc"): the same in every run of one interpreter, so it shows
    # which runs shared a hash seed.
    probe_hash = task(
        "hash/printer",
        body="    print('hash', hash('abc'))\n    return x + 1\n",
        test="def check(candidate):\n    assert candidate(1) == 2\n",
    )
    inspection = inspect_now(import_taskset(tasks=[probe_hash], samples=[]))
    references = Run.objects.filter(inspection=inspection, kind=Run.REFERENCE)

    printed = {run.stdout_tail for run in references}
    assert references.count() == 12 and all(run.passed for run in references)
    assert len(printed) >= 6, printed


def test_a_check_that_passes_or_fails_with_the_hash_seed_is_flagged_flaky(
    import_taskset, inspect_now
):
    seeded = task(
        "hash/flaky",
        body="    return x + 1\n",
        test=(
            "import random\n\ndef check(candidate):\n    assert candidate(1) == 2\n"
            "    assert random.Random(hash('hash/flaky')).random() < 0.5\n"
        ),
    )
    inspection = inspect_now(import_taskset(tasks=[seeded], samples=[]))

    assert "flaky" in flags_by_task(inspection)["hash/flaky"]


_READS_THE_HEAP = (
    "    import ctypes, re\n"
    "    needle = re.compile(b'MARK' + b'ER:([0-9a-f]{32})')\n"
    "    for line in open('/proc/self/maps').read().splitlines():\n"
    "        fields = line.split()\n"
    "        if fields[1].startswith('rw') and not (len(fields) > 5 and fields[5].startswith('[v')):\n"
    "            start, end = (int(v, 16) for v in fields[0].split('-'))\n"
    "            hit = needle.search(ctypes.string_at(start, end - start))\n"
    "            if hit:\n"
    "                return hit.group(1).decode()\n"
    "    return None\n"
)


def test_a_sample_cannot_pass_by_reading_another_tasks_reference_from_memory(
    import_taskset, inspect_now, settings
):
    # Both tasks' runs in one message, so in one session: the writer's reference runs before
    # the reader's sample, whose only way to the answer is the writer's source.
    settings.RUNS_PER_MESSAGE = 10_000
    secret = "0123456789abcdef0123456789abcdef"
    test = f"def check(candidate):\n    assert candidate(0) == {secret!r}\n"
    long_comment = "    # " + "an explanation of the approach " * 100 + "\n"
    tasks = [
        task("iso/writer", body=long_comment + f"    return 'MARKER:{secret}'[7:]\n", test=test),
        task("iso/reader", body=f"    return {secret!r}\n", test=test),
    ]
    samples = [{"task_id": "iso/reader", "completion": _READS_THE_HEAP, "sample_id": "thief"}]
    inspection = inspect_now(import_taskset(name="isolation", tasks=tasks, samples=samples))

    assert inspection.status == Inspection.FINISHED
    thief = Run.objects.filter(inspection=inspection, kind=Run.SAMPLE, sample__sample_id="thief")
    assert thief.count() == 2
    assert set(thief.values_list("outcome", flat=True)) == {"failed"}
    references = Run.objects.filter(inspection=inspection, kind=Run.REFERENCE)
    assert set(references.values_list("outcome", flat=True)) == {"passed"}


@pytest.mark.django_db(transaction=True)
def test_a_long_analysis_under_way_is_not_queued_again_by_a_sweep_and_a_dead_one_is(
    import_taskset, settings, monkeypatch
):
    import threading
    import time

    from inspector.services import analysis

    settings.RUN_WALL_SECONDS, settings.RUN_LEASE_SLACK_SECONDS = 1, 2  # stalled after 3 s
    inspection = Inspection.objects.create(
        version=import_taskset(), status=Inspection.ANALYSING, config={}
    )
    # An analysis that takes longer than the stall span (a 100,000-question set's took minutes,
    # and each sweep queued it once more).
    monkeypatch.setattr(analysis, "_inspection_analyse", lambda inspection_id: time.sleep(5))
    analysing = threading.Thread(
        target=services.inspection_analyse, kwargs={"inspection_id": inspection.pk}
    )
    analysing.start()
    time.sleep(4.0)
    during = services.runs_sweep()
    analysing.join()
    assert during["reanalysed"] == 0

    # A worker that died mid-analysis writes no more signs of life: the sweep queues it again.
    time.sleep(3.5)
    assert services.runs_sweep()["reanalysed"] == 1


def test_every_tasks_figures_are_written_when_the_analysis_writes_them_a_few_tasks_at_a_time(
    planted_inspected, monkeypatch
):
    from inspector.services import analysis

    inspection = planted_inspected
    figures = (
        "pk", "last_inspection_id", "severity", "open_flags", "pending_review", "runs_count",
        "reference_pass_rate", "sample_pass_rate", "learnability", "survivor_share",
        "cluster_count",
    )  # fmt: skip

    def written():
        return list(
            Task.objects.filter(version_id=inspection.version_id)
            .order_by("pk")
            .values_list(*figures)
        )

    at_once = written()
    assert any(row[3] for row in at_once)  # the planted set has flagged tasks
    Task.objects.filter(version_id=inspection.version_id).update(
        severity=0, open_flags="", pending_review=False, runs_count=0, last_inspection=None
    )
    monkeypatch.setattr(analysis, "_TASKS_WRITTEN_AT_ONCE", 2)
    analysis.inspection_analyse(inspection_id=inspection.pk)

    assert written() == at_once


def test_a_chunked_analysis_keeps_each_tasks_figures_as_given_and_refuses_keys_out_of_order() -> (
    None
):
    from types import SimpleNamespace as Stats

    from inspector.services.analysis import _FigureTable

    table = _FigureTable()
    table.extend(
        [{"task_key": 3}, {"task_key": 8}],
        {3: Stats(reference_pass_rate=1.0, sample_pass_rate=0.25)},
        {3: Stats(learnability=0.1875, survivor_share=None, cluster_count=4)},
        {3: 12},
    )
    table.extend([{"task_key": 20}], {}, {}, {20: 5})

    assert vars(table.get(3)) == {
        "runs": 12, "reference_pass_rate": 1.0, "sample_pass_rate": 0.25,
        "learnability": 0.1875, "survivor_share": None, "cluster_count": 4,
    }  # fmt: skip
    assert isinstance(table.get(3).cluster_count, int)
    assert set(vars(table.get(8)).values()) == {0, None}  # a task without runs: no figures
    assert table.get(5) is None and table.get(21, "absent") == "absent"
    assert (table.runs.get(3), table.runs.get(20), table.runs.get(4)) == (12, 5, 0)
    with pytest.raises(ValueError, match="task 8 comes after task 20"):
        table.extend([{"task_key": 8}], {}, {}, {})
