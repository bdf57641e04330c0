"""The JSON API as a training pipeline uses it: tokens, upload, inspect, status, tasks, quarantine,
manifest; and its OpenAPI description, checked against the running app by schemathesis."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from inspector.models import ApiToken, ReviewEvent, Task, TaskSet
from tests.builders import PLANTED_SAMPLES, PLANTED_TASKS, jsonl

pytestmark = pytest.mark.django_db


def bearer(key: str) -> dict[str, str]:
    return {"HTTP_AUTHORIZATION": f"Bearer {key}"}


@pytest.fixture
def reviewer_key(reviewer) -> str:
    return ApiToken.issue(user=reviewer, name="triage bot")[1]


def upload(client: Client, key: str, name: str = "api-set", tasks=None):
    return client.post(
        "/api/v1/tasksets",
        {
            "name": name,
            "tasks_file": SimpleUploadedFile("tasks.jsonl", jsonl(tasks or PLANTED_TASKS)),
            "samples_file": SimpleUploadedFile("samples.jsonl", jsonl(PLANTED_SAMPLES)),
        },
        **bearer(key),
    )


def test_a_request_without_a_valid_token_is_refused_with_401(client, lead):
    token, key = ApiToken.issue(user=lead, name="old")
    token.revoke()

    for headers in ({}, bearer("ei_not-a-token"), bearer(key), {"HTTP_AUTHORIZATION": key}):
        response = client.get("/api/v1/tasks", **headers)
        assert response.status_code == 401
        assert "API token is required" in response.json()["error"]
    # A browser session is not enough either: the API takes tokens only, so it needs no CSRF.
    client.force_login(lead)
    assert client.get("/api/v1/tasks").status_code == 401


def test_a_reviewers_token_cannot_upload_inspect_or_pull_the_manifest(client, reviewer_key):
    assert upload(client, reviewer_key).status_code == 403
    assert client.post("/api/v1/tasksets/x/inspections", **bearer(reviewer_key)).status_code == 403
    assert (
        client.get("/api/v1/tasksets/x/manifest.jsonl", **bearer(reviewer_key)).status_code == 403
    )
    assert not TaskSet.objects.exists()


def test_the_whole_path_through_the_api_with_every_action_in_the_audit_trail(
    client, lead, lead_key, eager_celery, django_capture_on_commit_callbacks
):
    created = upload(client, lead_key)
    assert created.status_code == 201
    assert created.json() == {
        "taskset": "api-set",
        "version": 1,
        "task_count": 5,
        "sample_count": 7,
    }

    with django_capture_on_commit_callbacks(execute=True):
        started = client.post("/api/v1/tasksets/api-set/inspections", **bearer(lead_key))
    assert started.status_code == 202
    status = client.get(f"/api/v1/inspections/{started.json()['id']}", **bearer(lead_key)).json()
    assert status["status"] == "finished" and status["percent"] == 100

    flaky = client.get("/api/v1/tasks?flag=flaky", **bearer(lead_key)).json()
    assert flaky["count"] == 1 and flaky["results"][0]["task_id"] == "planted/flaky"
    every = client.get("/api/v1/tasks?all=1&page_size=2", **bearer(lead_key)).json()
    assert (every["count"], every["pages"], len(every["results"])) == (5, 3, 2)

    pk = flaky["results"][0]["id"]
    refused = client.post(
        f"/api/v1/tasks/{pk}/quarantine", "{}", content_type="application/json", **bearer(lead_key)
    )
    assert refused.status_code == 400 and "reason" in refused.json()["error"]
    done = client.post(
        f"/api/v1/tasks/{pk}/quarantine",
        json.dumps({"reason": "random check"}),
        content_type="application/json",
        **bearer(lead_key),
    )
    assert done.json()["status"] == "quarantined"
    event = ReviewEvent.objects.get(task_id=pk)
    assert (event.actor, event.action, event.note) == (lead, "quarantine", "random check")

    manifest = client.get("/api/v1/tasksets/api-set/manifest.jsonl", **bearer(lead_key))
    ids = [
        json.loads(line)["task_id"] for line in b"".join(manifest.streaming_content).splitlines()
    ]
    assert ids == ["planted/clean"]

    detail = client.get(f"/api/v1/tasks/{pk}", **bearer(lead_key)).json()
    assert detail["flag_details"][0]["code"] == "flaky"
    released = client.post(f"/api/v1/tasks/{pk}/release", {"note": "fixed"}, **bearer(lead_key))
    assert released.json()["status"] == "active"


def test_a_bad_upload_says_what_and_where_and_stores_nothing(client, lead_key):
    bad = [dict(PLANTED_TASKS[0]), {"task_id": "x/2", "prompt": "def f(x):\n"}]
    response = upload(client, lead_key, tasks=bad)

    assert response.status_code == 400
    body = response.json()
    assert "nothing was stored" in body["error"]
    assert any("line 2" in issue and "canonical_solution" in issue for issue in body["issues"])
    assert not Task.objects.exists()


def test_tokens_are_made_shown_once_and_revoked_in_the_browser(reviewer_client, reviewer):
    made = reviewer_client.post("/tokens/", {"name": "laptop"}).content.decode()
    token = ApiToken.objects.get(user=reviewer)
    key = made.split('<pre id="new-token">')[1].split("</pre>")[0]

    assert key.startswith("ei_" + token.prefix) and token.key_hash != key
    assert ApiToken.authenticate(key) == token
    assert key not in reviewer_client.get("/tokens/").content.decode()
    reviewer_client.post(f"/tokens/{token.pk}/revoke")
    assert ApiToken.authenticate(key) is None


def test_the_openapi_description_lists_every_api_path():
    from django.urls import get_resolver

    client = Client()
    doc = client.get("/api/openapi.json").json()
    documented = set(doc["paths"])
    routed = {
        "/" + str(p.pattern).replace("<int:pk>", "{id}").replace("<str:name>", "{name}")
        for p in get_resolver().url_patterns
        if str(p.pattern).startswith("api/v1/")
    }
    assert documented == routed


@pytest.fixture
def api_schema():
    """The description, loaded from the running WSGI app. Requests keep the test's database
    connection open, as Django's own test client does."""
    import schemathesis
    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections

    from inspector.wsgi import application

    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield schemathesis.openapi.from_wsgi("/api/openapi.json", application)
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


def test_every_documented_operation_answers_as_documented(
    api_schema, lead_key, import_taskset, inspect_now
):
    """schemathesis: generated requests to every operation, each response checked against the
    description (status code documented, body matching its schema)."""
    inspect_now(import_taskset())
    from schemathesis.checks import positive_data_acceptance

    for operation in api_schema.get_all_operations():
        op = operation.ok()
        # An upload's files are task sets, which the description cannot spell out: generated
        # files are refused with 400 (tested above), so "valid data is accepted" cannot hold.
        upload = (op.method.upper(), op.path) == ("POST", "/api/v1/tasksets")
        check_operation(op, lead_key, [positive_data_acceptance] if upload else [])


def check_operation(op, key: str, excluded: list) -> None:
    from hypothesis import HealthCheck, given, settings

    @given(case=op.as_strategy())
    @settings(
        max_examples=15, deadline=None, suppress_health_check=list(HealthCheck), database=None
    )
    def check(case):
        case.call_and_validate(headers={"Authorization": f"Bearer {key}"}, excluded_checks=excluded)

    check()


@pytest.mark.production
@pytest.mark.django_db(transaction=True)
def test_the_api_and_the_review_queue_on_postgresql_redis_and_the_docker_sandbox(
    start_worker, lead, reviewer
):
    import time

    from django.conf import settings
    from django.db import connection

    assert connection.vendor == "postgresql" and settings.SANDBOX_BACKEND == "docker"
    assert settings.CELERY_BROKER_URL.startswith("redis://")
    start_worker("api-production")
    key = ApiToken.issue(user=lead, name="trainer")[1]
    api = Client()
    assert upload(api, key, name="prod-set").status_code == 201

    def inspect_and_wait(started: dict | None = None) -> dict:
        if started is None:
            started = api.post("/api/v1/tasksets/prod-set/inspections", **bearer(key)).json()
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            status = api.get(f"/api/v1/inspections/{started['id']}", **bearer(key)).json()
            if status["status"] in ("finished", "failed"):
                return status
            time.sleep(1)
        pytest.fail("the inspection did not finish in 5 minutes")

    # While the first inspection runs there is nothing to export: refused, with the reason.
    started = api.post("/api/v1/tasksets/prod-set/inspections", **bearer(key)).json()
    refused = api.get("/api/v1/tasksets/prod-set/manifest.jsonl", **bearer(key))
    assert refused.status_code == 409 and f"#{started['id']}" in refused.json()["error"]
    first = inspect_and_wait(started)
    assert first["status"] == "finished" and first["percent"] == 100
    report = api.get("/api/v1/tasksets/prod-set/report.csv", **bearer(key))
    assert report.status_code == 200
    assert b"planted/clean" in b"".join(report.streaming_content)
    # The admins group's permissions, set by migrate on PostgreSQL too.
    admin = Client()
    admin.force_login(lead)
    assert "/admin/auth/user/" in admin.get("/admin/").content.decode()
    flagged = api.get("/api/v1/tasks", **bearer(key)).json()
    assert {t["task_id"] for t in flagged["results"]} == {
        "planted/unsolvable",
        "planted/mislabeled",
        "planted/flaky",
        "planted/hackable",
    }

    # The queue on PostgreSQL: trigram search, and a bulk quarantine of the filter.
    browser = Client()
    browser.force_login(reviewer)
    found = browser.get("/queue/?q=planted/mislab").content.decode()
    assert 'data-task-id="planted/mislabeled"' in found and "<strong>1</strong>" in found
    browser.post(
        "/queue/bulk",
        {
            "query": "flag=flaky",
            "action": "quarantine",
            "scope": "filter",
            "expected": 1,
            "reason": "seeded random",
        },
    )
    manifest = api.get("/api/v1/tasksets/prod-set/manifest.jsonl", **bearer(key))
    ids = [json.loads(x)["task_id"] for x in b"".join(manifest.streaming_content).splitlines()]
    assert ids == ["planted/clean"]

    # Inspected again: both inspections are kept, and a stable task does not drift.
    second = inspect_and_wait()
    assert second["status"] == "finished"
    clean = Task.objects.get(version__taskset__name="prod-set", task_id="planted/clean")
    assert clean.last_inspection_id == second["id"] and not clean.flags.filter(code="drift")
    assert clean.version.inspections.count() == 2


def test_a_task_another_reviewer_is_reviewing_is_refused_through_the_api_too(
    client, lead_key, import_taskset, reviewer
):
    import_taskset()
    target = Task.objects.get(task_id="planted/flaky")
    target.claim(by=reviewer)

    response = client.post(
        f"/api/v1/tasks/{target.pk}/quarantine",
        json.dumps({"reason": "mine"}),
        content_type="application/json",
        **bearer(lead_key),
    )

    assert response.status_code == 409 and "reviewer is reviewing" in response.json()["error"]
    target.refresh_from_db()
    assert target.status == Task.ACTIVE
