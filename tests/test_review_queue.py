"""The review queue through the browser's doors (Django's test client): roles, filters in the URL,
sorting, paging, bulk actions on a selection or on a whole filter, claims, saved filters, and
exports that follow the filter."""

from __future__ import annotations

import csv
import html
import io

import pandas as pd
import pytest
from django.contrib.auth.models import Group
from django.test import Client

from inspector.models import Flag, ReviewEvent, SavedFilter, Task
from tests.builders import task

pytestmark = pytest.mark.django_db


@pytest.fixture
def inspected(planted_inspected):
    return planted_inspected


def listed(response) -> list[str]:
    """The task ids of the queue's rows, in order."""
    import re

    return re.findall(r'data-task-id="([^"]+)"', response.content.decode())


def other_reviewer(django_user_model, name: str = "second"):
    user = django_user_model.objects.create_user(username=name, password="second-pass-1")
    user.groups.add(Group.objects.get(name="reviewers"))
    client = Client()
    client.force_login(user)
    return user, client


# --- Roles -------------------------------------------------------------------------------------


def test_a_reviewer_is_refused_uploads_inspections_and_exports(reviewer_client, inspected):
    refused = [
        reviewer_client.post("/tasksets/upload", {"name": "x"}),
        reviewer_client.post("/tasksets/planted/inspect"),
        reviewer_client.get("/tasksets/planted/manifest.jsonl"),
        reviewer_client.get("/tasksets/planted/report.csv"),
        reviewer_client.get("/queue/export.csv"),
    ]
    assert [r.status_code for r in refused] == [403] * 5
    assert "needs the admin role" in refused[0].content.decode()
    assert Task.objects.count() == 5  # nothing was uploaded


def test_a_signed_in_user_without_a_role_sees_no_task(django_user_model, client, inspected):
    nobody = django_user_model.objects.create_user(username="nobody", password="nobody-pass-1")
    client.force_login(nobody)

    assert client.get("/queue/").status_code == 403
    assert client.get(f"/tasks/{Task.objects.first().pk}/").status_code == 403


def test_every_state_change_needs_the_csrf_token(reviewer, inspected):
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(reviewer)
    target = Task.objects.get(task_id="planted/unsolvable")

    response = strict.post(f"/tasks/{target.pk}/quarantine", {"reason": "forged"})

    assert response.status_code == 403
    target.refresh_from_db()
    assert target.status == Task.ACTIVE


# --- Filters, sorting, paging ------------------------------------------------------------------


def test_the_filter_lives_in_the_url_and_each_field_narrows_the_queue(
    reviewer_client, inspected, reviewer
):
    Task.objects.filter(task_id="planted/flaky").update(domain="strings")
    Task.objects.get(task_id="planted/hackable").assign(by=reviewer, to=reviewer)

    assert listed(reviewer_client.get("/queue/?domain=strings")) == ["planted/flaky"]
    assert listed(reviewer_client.get("/queue/?assignee=reviewer")) == ["planted/hackable"]
    assert listed(reviewer_client.get("/queue/?assignee=me")) == ["planted/hackable"]
    assert "planted/hackable" not in listed(reviewer_client.get("/queue/?assignee=none"))
    assert listed(reviewer_client.get("/queue/?q=hackable")) == ["planted/hackable"]
    # Free text looks in prompts too: the clean task is listed although it has no flag.
    assert "planted/clean" in listed(reviewer_client.get("/queue/?q=planted/clean"))
    high = listed(reviewer_client.get("/queue/?severity=80"))
    assert high and all(Task.objects.get(task_id=t).severity >= 80 for t in high)
    assert listed(reviewer_client.get("/queue/?taskset=planted&version=1"))
    assert listed(reviewer_client.get("/queue/?taskset=planted&version=9")) == []


def test_the_queue_sorts_by_severity_or_task_id_and_pages_keep_the_filter(
    reviewer_client, inspected, settings
):
    by_severity = listed(reviewer_client.get("/queue/"))
    severities = [Task.objects.get(task_id=t).severity for t in by_severity]
    assert severities == sorted(severities, reverse=True)
    assert listed(reviewer_client.get("/queue/?sort=task")) == sorted(by_severity)

    settings.QUEUE_PAGE_SIZE = 2
    first = reviewer_client.get("/queue/?sort=task&review=pending").content.decode()
    assert 'href="?review=pending&amp;sort=task&page=2"' in first
    second = listed(reviewer_client.get("/queue/?sort=task&review=pending&page=2"))
    assert second and set(second).isdisjoint(
        listed(reviewer_client.get("/queue/?sort=task&review=pending"))
    )


def test_a_dismissed_flag_moves_its_task_from_awaiting_review_to_reviewed(
    reviewer_client, inspected
):
    flag = Flag.objects.get(task__task_id="planted/hackable", code="reward_hackable")
    reviewer_client.post(f"/flags/{flag.pk}/dismiss", {"note": "the probe output is expected"})

    assert "planted/hackable" not in listed(reviewer_client.get("/queue/?review=pending"))
    assert "planted/hackable" in listed(reviewer_client.get("/queue/?review=unflagged"))


def test_a_reviewer_saves_a_filter_and_finds_it_again(reviewer_client, inspected, reviewer):
    response = reviewer_client.post(
        "/queue/filters", {"name": "flaky ones", "query": "flag=flaky&sort=task"}
    )

    saved = SavedFilter.objects.get(user=reviewer)
    assert response.status_code == 302 and response["Location"] == "/queue/?flag=flaky&sort=task"
    page = reviewer_client.get("/queue/").content.decode()
    assert 'href="/queue/?flag=flaky&amp;sort=task">flaky ones</a>' in page
    assert saved.name == "flaky ones"


# --- Bulk actions ------------------------------------------------------------------------------


def test_bulk_quarantine_of_everything_the_filter_matches_reports_and_records_each_task(
    reviewer_client, inspected, reviewer
):
    matching = listed(reviewer_client.get("/queue/?review=pending"))
    response = reviewer_client.post(
        "/queue/bulk",
        {
            "query": "review=pending",
            "action": "quarantine",
            "scope": "filter",
            "expected": len(matching),
            "reason": "batch 7 is broken",
        },
        follow=True,
    )

    assert f"{len(matching)} of {len(matching)} tasks quarantined" in response.content.decode()
    quarantined = set(
        Task.objects.filter(status=Task.QUARANTINED).values_list("task_id", flat=True)
    )
    assert quarantined == set(matching)
    assert ReviewEvent.objects.filter(action="quarantine", actor=reviewer).count() == len(matching)
    assert "planted/clean" not in quarantined


def test_a_bulk_action_on_a_filter_whose_count_changed_does_nothing(reviewer_client, inspected):
    response = reviewer_client.post(
        "/queue/bulk",
        {"query": "", "action": "quarantine", "scope": "filter", "expected": 99, "reason": "x"},
        follow=True,
    )

    assert "nothing was changed" in response.content.decode()
    assert not Task.objects.filter(status=Task.QUARANTINED).exists()


def test_bulk_dismiss_needs_a_note_and_dismisses_only_the_filters_flag(reviewer_client, inspected):
    refused = reviewer_client.post(
        "/queue/bulk",
        {"query": "flag=flaky", "action": "dismiss", "scope": "filter", "expected": 1},
        follow=True,
    )
    assert "A note is required" in refused.content.decode()

    reviewer_client.post(
        "/queue/bulk",
        {
            "query": "flag=flaky",
            "action": "dismiss",
            "scope": "filter",
            "expected": 1,
            "reason": "seeded now",
        },
    )
    flaky = Task.objects.get(task_id="planted/flaky")
    assert flaky.flags.get(code="flaky").status == Flag.DISMISSED
    assert "flaky" not in flaky.open_flag_list
    assert Flag.objects.filter(status=Flag.OPEN).exclude(task=flaky).exists()


def test_bulk_assign_and_release_act_on_the_selected_tasks_only(
    reviewer_client, inspected, reviewer, django_user_model
):
    other_reviewer(django_user_model, "carol")
    picked = list(Task.objects.filter(task_id__in=["planted/flaky", "planted/hackable"]))
    reviewer_client.post(
        "/queue/bulk",
        {
            "action": "assign",
            "scope": "selected",
            "task": [t.pk for t in picked],
            "assignee": "carol",
        },
    )

    assigned = Task.objects.filter(assignee__username="carol").values_list("task_id", flat=True)
    assert sorted(assigned) == ["planted/flaky", "planted/hackable"]
    assert ReviewEvent.objects.filter(action="assign", note="to carol").count() == 2


# --- Claims ------------------------------------------------------------------------------------


def test_a_task_one_reviewer_opened_is_claimed_and_the_other_is_refused(
    reviewer_client, inspected, django_user_model
):
    target = Task.objects.get(task_id="planted/unsolvable")
    assert reviewer_client.post(f"/tasks/{target.pk}/claim").json() == {
        "claimed": True,
        "by": "reviewer",
    }
    _, second = other_reviewer(django_user_model)

    claim = second.post(f"/tasks/{target.pk}/claim")
    page = second.get(f"/tasks/{target.pk}/").content.decode()
    refused = second.post(f"/tasks/{target.pk}/quarantine", {"reason": "mine"}, follow=True)
    queue = second.get("/queue/").content.decode()

    assert claim.status_code == 409 and claim.json()["by"] == "reviewer"
    assert "reviewer is reviewing this task" in page
    assert "reviewer is reviewing planted/unsolvable" in refused.content.decode()
    target.refresh_from_db()
    assert target.status == Task.ACTIVE
    assert "reviewer is reviewing" in queue


def test_a_claim_lapses_after_the_configured_minutes(reviewer, inspected, django_user_model):
    from datetime import timedelta

    from django.utils import timezone

    target = Task.objects.get(task_id="planted/unsolvable")
    assert target.claim(by=reviewer)
    Task.objects.filter(pk=target.pk).update(claimed_at=timezone.now() - timedelta(minutes=30))
    second, _ = other_reviewer(django_user_model)

    assert Task.objects.get(pk=target.pk).claim(by=second)


def test_a_bulk_action_skips_tasks_another_reviewer_is_reviewing(
    reviewer_client, inspected, django_user_model
):
    second, _ = other_reviewer(django_user_model)
    held = Task.objects.get(task_id="planted/flaky")
    held.claim(by=second)
    matching = listed(reviewer_client.get("/queue/"))

    response = reviewer_client.post(
        "/queue/bulk",
        {
            "query": "",
            "action": "quarantine",
            "scope": "filter",
            "expected": len(matching),
            "reason": "all of them",
        },
        follow=True,
    )

    assert "1 skipped: another reviewer is reviewing them" in response.content.decode()
    held.refresh_from_db()
    assert held.status == Task.ACTIVE


# --- Exports -----------------------------------------------------------------------------------


def test_the_queue_exports_what_its_filter_matches_as_csv_and_parquet(lead_client, inspected):
    response = lead_client.get("/queue/export.csv?flag=flaky")
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert [r["task_id"] for r in rows] == ["planted/flaky"]
    assert rows[0]["flags"] == "flaky" and rows[0]["taskset"] == "planted"

    parquet = lead_client.get("/queue/export.parquet")
    frame = pd.read_parquet(io.BytesIO(parquet.content))
    assert set(frame["task_id"]) == set(
        Task.objects.filter(severity__gt=0).values_list("task_id", flat=True)
    )
    assert lead_client.get("/queue/export.xlsx").status_code == 404


def test_the_task_set_report_table_lists_every_task_of_the_version(lead_client, inspected):
    response = lead_client.get("/tasksets/planted/report.csv")
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))

    assert [r["task_id"] for r in rows] == list(
        Task.objects.order_by("position").values_list("task_id", flat=True)
    )
    assert {r["status"] for r in rows} == {"active"}


def test_an_uploaded_task_id_holding_html_is_escaped_in_the_queue(
    reviewer_client, import_taskset, inspect_now
):
    hostile = task(
        "<b>bold</b>",
        body="    return x + 1\n",
        test="def check(candidate):\n    assert candidate(1) == 3\n",
    )
    inspect_now(import_taskset(name="hostile", tasks=[hostile], samples=[]))

    page = reviewer_client.get("/queue/").content.decode()
    assert "&lt;b&gt;bold&lt;/b&gt;" in page and "<b>bold</b>" not in page


def test_a_search_matching_more_than_the_cap_says_so_and_offers_no_bulk_action_on_all(
    reviewer_client, inspected, monkeypatch
):
    from inspector.selectors import QueueFilter

    monkeypatch.setattr(QueueFilter, "SEARCH_COUNT_CAP", 2)
    page = reviewer_client.get("/queue/?q=planted").content.decode()

    assert "<strong>2+</strong>" in page and "narrow it to act on all of them" in page
    assert 'id="bulk-all"' not in page
    assert len(listed(reviewer_client.get("/queue/?q=planted"))) == 5


def test_the_queue_lists_only_the_latest_version_unless_a_version_is_asked_for(
    reviewer_client, import_taskset, inspect_now
):
    inspect_now(import_taskset())
    inspect_now(import_taskset())  # the same set again: version 2

    latest = listed(reviewer_client.get("/queue/"))
    old = reviewer_client.get("/queue/?taskset=planted&version=1").content.decode()

    assert len(latest) == len(set(latest)) == 4
    assert 'class="queue-row"' in old and "planted v1" in old
    assert "planted v1" not in reviewer_client.get("/queue/").content.decode()


def test_each_queue_row_says_in_one_line_why_each_open_flag_was_raised(reviewer_client, inspected):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    flagged = Flag.objects.filter(status=Flag.OPEN).select_related("task").first()
    with CaptureQueriesContext(connection) as queries:
        page = reviewer_client.get("/queue/").content.decode()

    line = f"{flagged.code}: {flagged.explanation[:139]}"
    assert 'class="muted flag-line"' in page
    assert html.escape(line.split("…")[0], quote=True)[:60] in page
    # One query for every row's explanations, not one a row.
    assert sum("inspector_flag" in q["sql"] for q in queries.captured_queries) <= 2
