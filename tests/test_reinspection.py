"""Keep inspecting: scheduled re-inspection and the `drift` flag between two inspections."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings as django_settings
from django.utils import timezone

from inspector import services
from inspector.detect.drift import Outcomes, drift_findings
from inspector.models import Flag, Inspection, Task, TaskSet

pytestmark = pytest.mark.django_db


def drift(before: Outcomes, after: Outcomes):
    return drift_findings({1: after}, {1: before}, current_id=2, previous_id=1)


def test_a_reference_that_passed_and_now_fails_drifts():
    (finding,) = drift(Outcomes(6, 6, 3, 6), Outcomes(0, 6, 3, 6))
    assert "the reference passed 6/6 runs in #1 and passes 0/6 in #2" in finding.explanation
    assert finding.evidence["previous_inspection"] == 1 and finding.evidence["inspection"] == 2


def test_a_check_that_became_flaky_drifts():
    (finding,) = drift(Outcomes(6, 6, 3, 6), Outcomes(4, 6, 3, 6, frozenset({"flaky"})))
    assert "steady in #1 and is flaky in #2" in finding.explanation


def test_a_check_flaky_in_both_inspections_does_not_drift_on_its_coin():
    flaky = frozenset({"flaky"})
    assert drift(Outcomes(12, 12, 4, 4, flaky), Outcomes(0, 12, 0, 4, flaky)) == []
    assert drift(Outcomes(6, 12, 40, 40, flaky), Outcomes(6, 12, 0, 40, flaky)) == []


def test_a_sample_pass_rate_drifts_only_beyond_noise():
    assert drift(Outcomes(6, 6, 1, 2), Outcomes(6, 6, 2, 2)) == []
    assert drift(Outcomes(6, 6, 20, 40), Outcomes(6, 6, 24, 40)) == []
    (finding,) = drift(Outcomes(6, 6, 38, 40), Outcomes(6, 6, 1, 40))
    assert "Fisher's exact test" in finding.explanation and finding.confidence > 0.99


def test_a_check_that_rots_between_two_inspections_is_flagged_drift_with_both_as_evidence(
    import_taskset, inspect_now, reviewer_client
):
    version = import_taskset()
    first = inspect_now(version)
    clean = Task.objects.get(task_id="planted/clean")
    assert not clean.flags.exists()
    # The environment changes under the task: its check now demands something else.
    Task.objects.filter(pk=clean.pk).update(
        test="def check(candidate):\n    assert candidate(1) == 3\n"
    )
    second = inspect_now(version)

    flag = Flag.objects.get(task=clean, inspection=second, code="drift")
    assert flag.evidence["previous_inspection"] == first.pk
    assert flag.evidence["inspection"] == second.pk
    assert "the reference passed 12/12 runs" in flag.explanation
    others = Flag.objects.filter(inspection=second, code="drift").exclude(task=clean)
    assert not others.exists(), [(f.task.task_id, f.explanation) for f in others]
    page = reviewer_client.get(clean.get_absolute_url()).content.decode()
    assert f"Compared with inspection #{first.pk}" in page
    clean.refresh_from_db()
    assert "drift" in clean.open_flag_list


def test_beat_starts_an_inspection_of_each_active_set_that_is_due(
    import_taskset, inspect_now, settings, django_capture_on_commit_callbacks
):
    settings.REINSPECT_EVERY_HOURS = 24
    due = inspect_now(import_taskset(name="due"))
    recent = inspect_now(import_taskset(name="recent"))
    never = inspect_now(import_taskset(name="never"))
    paused = inspect_now(import_taskset(name="paused"))
    import_taskset(name="not-inspected-yet")
    TaskSet.objects.filter(name="never").update(reinspect_hours=0)
    TaskSet.objects.filter(name="paused").update(active=False)
    Inspection.objects.filter(pk__in=[due.pk, never.pk, paused.pk]).update(
        created_at=timezone.now() - timedelta(hours=25)
    )
    Inspection.objects.filter(pk=recent.pk).update(created_at=timezone.now() - timedelta(hours=23))

    with django_capture_on_commit_callbacks(execute=False):
        started = services.reinspect_due()

    assert [i.version.taskset.name for i in started] == ["due"]
    assert started[0].config["trigger"] == "scheduled"
    # Its inspection is under way: beat does not start a second one.
    with django_capture_on_commit_callbacks(execute=False):
        assert services.reinspect_due() == []
    assert "reinspect-due" in django_settings.CELERY_BEAT_SCHEDULE


def test_an_admin_sets_a_sets_schedule_and_a_reviewer_cannot(
    import_taskset, lead_client, reviewer_client
):
    import_taskset()
    assert (
        reviewer_client.post("/tasksets/planted/schedule", {"reinspect_hours": "1"}).status_code
        == 403
    )
    lead_client.post("/tasksets/planted/schedule", {"active": "1", "reinspect_hours": "6"})
    taskset = TaskSet.objects.get(name="planted")
    assert (taskset.active, taskset.reinspect_every_hours) == (True, 6.0)
    page = lead_client.get("/tasksets/planted/").content.decode()
    assert "Re-inspected every 6 hours" in page
    bad = lead_client.post(
        "/tasksets/planted/schedule", {"active": "1", "reinspect_hours": "soon"}, follow=True
    )
    assert "Hours must be a number" in bad.content.decode()


def test_a_new_version_keeps_the_review_of_each_task_id(
    import_taskset, lead, lead_client, eager_celery, django_capture_on_commit_callbacks
):
    from tests.builders import PLANTED_TASKS

    import_taskset()
    v1 = {t.task_id: t for t in Task.objects.all()}
    v1["planted/flaky"].quarantine(by=lead, reason="random check")
    v1["planted/unsolvable"].quarantine(by=lead, reason="contradicting asserts")
    fixed = [dict(t) for t in PLANTED_TASKS]
    for t in fixed:
        if t["task_id"] == "planted/unsolvable":
            t["test"] = "def check(candidate):\n    assert candidate(1) == 2\n"
    import_taskset(tasks=fixed)

    v2 = {t.task_id: t for t in Task.objects.filter(version__number=2)}
    assert v2["planted/flaky"].status == Task.QUARANTINED  # came back unchanged
    assert v2["planted/flaky"].quarantine_reason == "random check"
    assert v2["planted/unsolvable"].status == Task.ACTIVE  # came back fixed
    page = lead_client.get(v2["planted/unsolvable"].get_absolute_url()).content.decode()
    assert "contradicting asserts" in page and "(in v1)" in page
    assert "replaces v1&#x27;s quarantined task" in page
    assert 'id="reinspect"' in page

    with django_capture_on_commit_callbacks(execute=True):
        response = lead_client.post(f"/tasks/{v2['planted/unsolvable'].pk}/reinspect", follow=True)
    assert "started to re-check planted/unsolvable" in response.content.decode()
    rechecked = Task.objects.get(pk=v2["planted/unsolvable"].pk)
    assert rechecked.last_inspection is not None and "unsolvable" not in rechecked.open_flag_list
