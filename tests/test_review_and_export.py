"""Triage in the web pages and the clean manifest that comes out of it."""

from __future__ import annotations

import html
import json
import re

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from inspector import selectors
from inspector.models import Flag, ReviewEvent, Task

pytestmark = pytest.mark.django_db


@pytest.fixture
def inspected(planted_inspected):
    return planted_inspected


def manifest_ids() -> list[str]:
    return [line["task_id"] for line in selectors.manifest_lines(taskset_name="planted")]


def test_everything_but_the_login_page_asks_an_anonymous_visitor_to_log_in(inspected):
    client = Client()
    for url in (
        "/",
        "/queue/",
        "/tasksets/planted/",
        "/tasksets/planted/manifest.jsonl",
        f"/tasks/{Task.objects.first().pk}/",
        "/assets/plotly.min.js",
    ):
        response = client.get(url)
        assert response.status_code == 302, url
        assert response["Location"].startswith("/accounts/login/"), url
    assert client.get("/accounts/login/").status_code == 200


def test_the_queue_lists_flagged_tasks_most_severe_first(reviewer_client, inspected):
    page = reviewer_client.get("/queue/").content.decode()

    order = [
        page.index(t)
        for t in ("planted/unsolvable", "planted/mislabeled", "planted/hackable", "planted/flaky")
    ]
    assert order == sorted(order)
    assert "planted/clean" not in page


def test_the_queue_filters_by_flag_status_and_task_set(reviewer_client, inspected, reviewer):
    Task.objects.get(task_id="planted/flaky").quarantine(by=reviewer, reason="random check")

    by_flag = reviewer_client.get("/queue/?flag=mislabeled").content.decode()
    quarantined = reviewer_client.get("/queue/?status=quarantined").content.decode()
    other_set = reviewer_client.get("/queue/?taskset=planted&flag=unsolvable").content.decode()

    assert "planted/mislabeled" in by_flag and "planted/unsolvable" not in by_flag
    assert "planted/flaky" in quarantined and "planted/unsolvable" not in quarantined
    assert "planted/unsolvable" in other_set and "<strong>1</strong> task matches" in other_set


def test_the_task_page_shows_the_prompt_tests_flags_and_the_runs_that_prove_them(
    reviewer_client, inspected
):
    task = Task.objects.get(task_id="planted/mislabeled")
    page = reviewer_client.get(f"/tasks/{task.pk}/").content.decode()

    assert "mislabeled" in page
    assert "reference passed 0 of 12 runs" in page
    assert "AssertionError" in page  # the failing reference's output tail
    text = html.unescape(re.sub(r"<[^>]+>", "", page))  # as shown: highlighting adds spans
    assert "def check(candidate)" in text
    assert "return x - 1" in text


def test_quarantine_needs_a_reason_and_is_recorded_with_who_and_when(
    reviewer_client, inspected, reviewer
):
    task = Task.objects.get(task_id="planted/unsolvable")
    reviewer_client.post(f"/tasks/{task.pk}/quarantine", {"reason": "  "})
    task.refresh_from_db()
    assert task.status == Task.ACTIVE

    reviewer_client.post(f"/tasks/{task.pk}/quarantine", {"reason": "tests contradict each other"})
    task.refresh_from_db()
    event = task.events.get()
    page = reviewer_client.get(f"/tasks/{task.pk}/").content.decode()

    assert task.status == Task.QUARANTINED
    assert (event.actor, event.action, event.note) == (
        reviewer,
        ReviewEvent.QUARANTINE,
        "tests contradict each other",
    )
    assert "tests contradict each other" in page and "reviewer" in page


def test_dismissing_a_flag_needs_a_note_and_lets_the_task_into_the_manifest(
    reviewer_client, inspected
):
    flag = Flag.objects.get(code="reward_hackable")
    reviewer_client.post(f"/flags/{flag.pk}/dismiss", {"note": ""})
    assert "planted/hackable" not in manifest_ids()

    reviewer_client.post(f"/flags/{flag.pk}/dismiss", {"note": "smoke test is intended"})
    flag.refresh_from_db()

    assert flag.status == Flag.DISMISSED
    assert "planted/hackable" in manifest_ids()
    assert flag.task.events.get().action == ReviewEvent.DISMISS


def test_a_confirmed_flag_keeps_blocking_the_task(reviewer_client, inspected):
    flag = Flag.objects.get(code="mislabeled")
    reviewer_client.post(f"/flags/{flag.pk}/confirm", {})

    assert Flag.objects.get(pk=flag.pk).status == Flag.CONFIRMED
    assert "planted/mislabeled" not in manifest_ids()


def test_release_brings_a_quarantined_task_back(reviewer_client, inspected, reviewer):
    task = Task.objects.get(task_id="planted/clean")
    task.quarantine(by=reviewer, reason="suspicious")
    assert "planted/clean" not in manifest_ids()

    reviewer_client.post(f"/tasks/{task.pk}/release", {"note": "false alarm"})

    assert "planted/clean" in manifest_ids()
    assert [e.action for e in task.events.all()] == [ReviewEvent.RELEASE, ReviewEvent.QUARANTINE]


def test_state_changes_refuse_get_and_requests_without_the_csrf_token(inspected, reviewer):
    task = Task.objects.get(task_id="planted/unsolvable")
    client = Client(enforce_csrf_checks=True)
    client.force_login(reviewer)

    assert client.get(f"/tasks/{task.pk}/quarantine").status_code == 405
    assert client.post(f"/tasks/{task.pk}/quarantine", {"reason": "x"}).status_code == 403
    task.refresh_from_db()
    assert task.status == Task.ACTIVE


def test_uploaded_html_is_shown_escaped(reviewer_client, import_taskset):
    from tests.builders import task

    version = import_taskset(
        name="xss",
        tasks=[
            task(
                "xss/1",
                body="    return 1\n",
                test="def check(c):\n    pass\n",
                prompt="<script>alert(1)</script>",
            )
        ],
        samples=[],
    )
    page = reviewer_client.get(f"/tasks/{version.tasks.get().pk}/").content.decode()

    assert "<script>alert(1)</script>" not in page
    shown = html.unescape(re.sub(r"<[^>]+>", "", page.split('<pre id="prompt">')[1]))
    assert shown.startswith("<script>alert(1)</script>")  # shown as text, highlighted or not


def test_the_manifest_holds_only_clean_inspected_tasks_with_their_own_fields_and_quality(
    inspected, reviewer, tmp_path
):
    Task.objects.get(task_id="planted/clean").quarantine(by=reviewer, reason="manual check")
    out = tmp_path / "manifest.jsonl"
    call_command("export_manifest", "planted", "-o", str(out))
    lines = [json.loads(line) for line in out.read_text().splitlines()]

    assert lines == []  # every other planted task carries a flag
    Task.objects.get(task_id="planted/clean").release(by=reviewer)
    call_command("export_manifest", "planted", "-o", str(out))
    (line,) = [json.loads(line) for line in out.read_text().splitlines()]

    clean = Task.objects.get(task_id="planted/clean")
    assert {k: v for k, v in line.items() if k != "quality"} == clean.source
    assert line["quality"] == {
        "content_hash": clean.content_hash,
        "taskset": "planted",
        "taskset_version": 1,
        "inspection_id": inspected.pk,
        "reference_pass_rate": 1.0,
        "sample_pass_rate": 0.5,
    }


def test_a_version_not_yet_inspected_is_refused_rather_than_exported_empty(
    inspected, import_taskset, tmp_path
):
    import_taskset()  # v2, not inspected
    out = tmp_path / "manifest.jsonl"

    with pytest.raises(CommandError, match="planted v2 has not been inspected yet"):
        call_command("export_manifest", "planted", "-o", str(out))
    assert not out.exists()


def test_the_manifest_download_streams_the_same_lines_in_the_same_order(lead_client, inspected):
    Flag.objects.get(code="reward_hackable").dismiss(by=None, note="fine")
    response = lead_client.get("/tasksets/planted/manifest.jsonl")
    body = b"".join(response.streaming_content).decode()

    assert response["Content-Disposition"] == (
        f'attachment; filename="planted-v1-inspection{inspected.pk}-manifest.jsonl"'
    )
    assert response["X-Inspection-Id"] == str(inspected.pk)
    assert [json.loads(x)["task_id"] for x in body.splitlines()] == [
        "planted/clean",
        "planted/hackable",
    ]


def test_the_report_has_a_line_per_task_with_flags_status_and_stats(inspected, tmp_path):
    out = tmp_path / "report.jsonl"
    call_command("export_report", "planted", "-o", str(out))
    report = {r["task_id"]: r for r in map(json.loads, out.read_text().splitlines())}

    assert len(report) == 5
    assert report["planted/mislabeled"]["flags"] == ["mislabeled"]
    assert report["planted/clean"]["flags"] == []
    assert report["planted/clean"]["status"] == "active"
    stats = report["planted/mislabeled"]["stats"]
    assert stats["runs"] == 12 + 2 + 4  # reference, a sample twice, four probes once
    assert (stats["reference_pass_rate"], stats["sample_pass_rate"]) == (0.0, 1.0)
    assert report["planted/unsolvable"]["stats"]["sample_pass_rate"] == 0.0


def test_a_task_without_samples_has_no_sample_pass_rate(import_taskset, inspect_now):
    from tests.builders import task

    inspect_now(
        import_taskset(
            tasks=[
                task("alone/1", body="    return x\n", test="def check(c):\n    assert c(1) == 1\n")
            ],
            samples=[],
        )
    )
    (line,) = selectors.report_lines(taskset_name="planted")

    assert line["stats"]["sample_pass_rate"] is None
    assert line["stats"]["reference_pass_rate"] == 1.0


def test_the_task_set_page_shows_progress_flag_counts_and_the_chart(reviewer_client, inspected):
    page = reviewer_client.get("/tasksets/planted/").content.decode()
    progress = reviewer_client.get(f"/inspections/{inspected.pk}/progress").json()

    assert "finished" in page and "unsolvable: 1" in page
    assert "chart-pass-rates" in page and "/assets/plotly.min.js" in page
    assert progress["runs_done"] == progress["runs_total"] > 0
    assert progress["status"] == "finished"


def test_the_task_page_highlights_code_and_keeps_uploaded_html_inert(
    reviewer_client, import_taskset
):
    from tests.builders import PLANTED_TASKS

    hostile = dict(PLANTED_TASKS[0])
    hostile["canonical_solution"] = "    return '<script>alert(1)</script>'\n"
    import_taskset(name="hl", tasks=[hostile], samples=[])
    task = Task.objects.get(version__taskset__name="hl")

    page = reviewer_client.get(task.get_absolute_url()).content.decode()
    reference = page.split('<pre id="reference">')[1].split("</pre>")[0]
    assert '<span class="hl-k">return</span>' in reference
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in reference and "<script>" not in reference


def test_a_reviewer_comments_on_a_task_and_the_comment_joins_its_trail(
    reviewer_client, inspected, reviewer
):
    task = Task.objects.get(task_id="planted/flaky")
    reviewer_client.post(f"/tasks/{task.pk}/comment", {"text": "asked the author about the seed"})
    empty = reviewer_client.post(f"/tasks/{task.pk}/comment", {"text": "  "}, follow=True)

    page = reviewer_client.get(task.get_absolute_url()).content.decode()
    assert "commented" in page and "asked the author about the seed" in page
    assert "A comment needs some text." in empty.content.decode()
    assert task.events.filter(action="comment", actor=reviewer).count() == 1
