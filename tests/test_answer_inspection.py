"""Answer-graded tasks end to end: import, verification of every response in the real sandbox,
the analysis's flags, and a reviewer's correction of a label."""

from __future__ import annotations

import io
import json
import time

import pytest
from django.utils import timezone

from inspector import selectors, services
from inspector.formats.humaneval import TaskSetFormatError
from inspector.models import Flag, Inspection, Run, Task, TaskSet

pytestmark = pytest.mark.django_db

MODELS = ("alpha", "beta", "gamma", "delta")


def jsonl(rows: list[dict]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def questions() -> tuple[list[dict], list[dict]]:
    """Twelve sums every model gets right, one whose label is wrong (every model says 18, the
    label 17), and one whose label the verifier cannot read."""
    tasks, samples = [], []
    for i in range(12):
        a, b = 3 + i, 7 + 2 * i
        tasks.append(
            {"task_id": f"sum/{i}", "question": f"What is {a} plus {b}?", "answer": str(a + b)}
        )
        for n, model in enumerate(MODELS):
            style = (
                f"{a} + {b} = {a + b}. The answer is \\boxed{{{a + b}}}.",
                f"Adding gives {a + b}.\n#### {a + b}",
                f"We add {a} and {b}. The answer is {a + b}.",
                f"So the total is $\\boxed{{{a + b}}}$",
            )[n]
            samples.append({"task_id": f"sum/{i}", "response": style, "model": model})
    tasks.append(
        {"task_id": "wrong-label", "question": "Tom has 9 apples and buys 9 more. How many?",
         "answer": "17"}
    )  # fmt: skip
    for model in MODELS:
        samples.append(
            {"task_id": "wrong-label", "response": "9 + 9 = 18. \\boxed{18}", "model": model}
        )
    tasks.append(
        {"task_id": "broken-label", "question": "What is half of one?", "answer": "\\frac{"}
    )
    for model in MODELS:
        samples.append(
            {"task_id": "broken-label", "response": "\\boxed{\\frac{1}{2}}", "model": model}
        )
    return tasks, samples


def import_answers(name="answers", rule="", tasks=None, samples=None):
    default_tasks, default_samples = questions()
    return services.taskset_import(
        name=name,
        tasks_file=io.BytesIO(jsonl(default_tasks if tasks is None else tasks)),
        tasks_name="questions.jsonl",
        samples_file=io.BytesIO(jsonl(default_samples if samples is None else samples)),
        samples_name="responses.jsonl",
        answer_rule=rule,
    )


def codes(inspection: Inspection) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for flag in inspection.flags.select_related("task"):
        found.setdefault(flag.task.task_id, set()).add(flag.code)
    return found


def test_an_answer_set_imports_as_answer_tasks_with_their_labels_and_responses():
    version = import_answers()

    task = version.tasks.get(task_id="wrong-label")
    assert (task.kind, task.prompt, task.label) == (
        Task.ANSWER,
        "Tom has 9 apples and buys 9 more. How many?",
        "17",
    )
    assert version.task_count == 14
    assert sorted(task.samples.values_list("model", flat=True)) == sorted(MODELS)


def test_a_bad_line_in_the_responses_names_file_line_and_field_and_stores_nothing():
    tasks, samples = questions()
    samples[5] = {"task_id": "sum/1", "model": "beta"}  # neither a response nor an answer

    with pytest.raises(TaskSetFormatError) as error:
        import_answers(tasks=tasks, samples=samples)

    assert "responses.jsonl, line 6" in str(error.value)
    assert not TaskSet.objects.filter(name="answers").exists()


def test_inspecting_verifies_every_response_and_flags_the_wrong_and_the_unreadable_label(
    inspect_now,
):
    inspection = inspect_now(import_answers())

    assert inspection.status == Inspection.FINISHED
    assert inspection.runs_done == inspection.runs_total
    right = Run.objects.filter(
        inspection=inspection, task__task_id="sum/3", kind=Run.SAMPLE
    )  # 6 + 13
    assert {r.outcome for r in right} == {"passed"}
    assert {r.detail["extracted"] for r in right} == {"19"}
    found = codes(inspection)
    assert "mislabeled" in found["wrong-label"]
    assert "unverifiable_label" in found["broken-label"]
    assert not found.get("sum/3", set()) - {"no_signal"}
    flag = Flag.objects.get(inspection=inspection, task__task_id="wrong-label", code="mislabeled")
    assert "18" in flag.explanation


def test_under_the_default_rule_only_the_last_number_probe_earns_a_reward_and_it_is_one_finding(
    inspect_now,
):
    # `auto` falls back to the last number of a response, as many RL rewards do: the probe made
    # for that reader (the label last in a list of candidates) earns the reward on every task,
    # and the inspection says so once, about the set's verifier; no other probe earns anything.
    inspection = inspect_now(import_answers())

    probes = Run.objects.filter(inspection=inspection, kind=Run.PROBE)
    assert probes.count() == 14 * len(services.inspection_config()["answer"]["probes"])
    beaten = probes.filter(outcome="passed")
    assert set(beaten.values_list("probe", flat=True)) == {"last_candidate"}
    assert beaten.values("task").distinct().count() == beaten.count() >= 12
    assert [f["probe"] for f in inspection.findings] == ["last_candidate"]
    assert not inspection.flags.filter(code="reward_hackable").exists()


def test_no_verifier_probe_earns_a_reward_under_a_rule_that_takes_only_a_committed_answer(
    inspect_now,
):
    inspection = inspect_now(import_answers(rule="boxed"))

    probes = Run.objects.filter(inspection=inspection, kind=Run.PROBE)
    assert probes.count() == 14 * len(services.inspection_config()["answer"]["probes"])
    assert not probes.filter(outcome="passed").exists()
    assert not inspection.flags.filter(code="reward_hackable").exists()
    assert inspection.findings == []


def test_a_loose_verifier_is_beaten_by_a_probe_on_every_task_and_that_is_one_finding_not_a_flag(
    inspect_now,
):
    # `contains`: a response earns the reward when the label is anywhere among its answers.
    inspection = inspect_now(import_answers(rule="contains"))

    beaten = Run.objects.filter(inspection=inspection, kind=Run.PROBE, outcome="passed")
    assert beaten.values("task").distinct().count() >= 12
    assert any("candidate_list" in str(finding) for finding in inspection.findings)
    assert not inspection.flags.filter(code="reward_hackable").exists()


def test_the_next_inspection_verifies_a_corrected_label_and_the_flag_is_gone(inspect_now, reviewer):
    first = inspect_now(import_answers())
    task = first.version.tasks.get(task_id="wrong-label")
    task.relabel(by=reviewer, label="18", reason="9 + 9 is 18")

    second = inspect_now(first.version)

    assert "mislabeled" not in codes(second).get("wrong-label", set())
    runs = Run.objects.filter(inspection=second, task=task, kind=Run.SAMPLE)
    assert {r.outcome for r in runs} == {"passed"}
    assert selectors.task_trail(task).filter(action="relabel").exists()


def test_a_verdict_of_a_run_swept_and_claimed_again_is_not_recorded_twice(inspect_now, settings):
    from inspector.services.answer_runs import answer_runs_record

    inspection = inspect_now(import_answers())
    run = Run.objects.filter(inspection=inspection, kind=Run.SAMPLE).first()
    # Swept while its worker stalled, claimed again by another worker: a second attempt.
    Run.objects.filter(pk=run.pk).update(status=Run.RUNNING, attempts=run.attempts + 1)
    stale = Run.objects.get(pk=run.pk)
    stale.attempts -= 1
    before = Inspection.objects.get(pk=inspection.pk).runs_done

    recorded = answer_runs_record([(stale, {"outcome": "failed", "detail": {"status": "ok"}})])

    assert recorded == 0
    assert Run.objects.get(pk=run.pk).status == Run.RUNNING
    assert Inspection.objects.get(pk=inspection.pk).runs_done == before


@pytest.mark.django_db(transaction=True)
def test_while_a_batch_is_verified_its_runs_lease_is_renewed_and_after_it_no_longer(settings):
    from datetime import timedelta

    from inspector.services.answer_runs import lease_renewed

    inspection = services.inspection_start(version=import_answers())  # queued, no worker
    services.inspection_prepare(inspection_id=inspection.pk)  # its runs, made here
    runs = list(Run.objects.filter(inspection=inspection).order_by("pk"))
    pks, other = [r.pk for r in runs[:3]], runs[-1]
    start = timezone.now()
    Run.objects.filter(pk__in=[*pks, other.pk]).update(
        status=Run.RUNNING, worker="this-call", lease_expires_at=start
    )
    Run.objects.filter(pk=other.pk).update(worker="another-call")

    def leases() -> dict[int, object]:
        rows = Run.objects.filter(pk__in=[*pks, other.pk]).values_list("pk", "lease_expires_at")
        return dict(rows)

    with lease_renewed(pks, "this-call", timedelta(seconds=1.5)):
        time.sleep(1.2)  # two renewals, a third of the span apart
        during = leases()
    assert all(during[pk] > start for pk in pks), during
    assert during[other.pk] == start  # another call's run is not this one's to renew
    after = leases()
    time.sleep(1.0)
    assert leases() == after  # the thread stopped with the batch


@pytest.mark.production
@pytest.mark.django_db(transaction=True)
def test_answer_tasks_inspect_end_to_end_on_postgresql_redis_and_the_docker_sandbox(
    start_worker,
):
    from django.conf import settings
    from django.core.management import call_command

    assert settings.CELERY_BROKER_URL.startswith("redis://")
    assert settings.SANDBOX_BACKEND == "docker"
    import_answers()
    start_worker()
    out = io.StringIO()
    call_command("inspect", "answers", "--wait", stdout=out)

    inspection = Inspection.objects.get()
    assert inspection.status == Inspection.FINISHED, out.getvalue()
    assert inspection.config["sandbox_backend"] == "docker"
    found = codes(inspection)
    assert "mislabeled" in found["wrong-label"]
    assert "unverifiable_label" in found["broken-label"]
    right = Run.objects.filter(inspection=inspection, task__task_id="sum/3", kind=Run.SAMPLE)
    assert {r.detail["extracted"] for r in right} == {"19"}
