"""Exports and the inspection they come from, through every door (the commands, the browser's
downloads, the JSON API): refused while nothing is finished, named while a newer inspection runs,
pinned to an inspection on request; and the report through the API in JSONL, CSV and Parquet."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from inspector import selectors
from inspector.models import ApiToken, Flag, Inspection, Task

pytestmark = pytest.mark.django_db

EXPORT_PATHS = ("manifest.jsonl", "report.jsonl", "report.csv", "report.parquet")


def bearer(key: str) -> dict[str, str]:
    return {"HTTP_AUTHORIZATION": f"Bearer {key}"}


@pytest.fixture
def inspected(planted_inspected):
    assert planted_inspected.status == Inspection.FINISHED
    return planted_inspected


def running_inspection(version, *, done: int = 120, total: int = 300) -> Inspection:
    """An inspection a worker is in the middle of, without racing a real worker."""
    return Inspection.objects.create(
        version=version, status=Inspection.RUNNING, runs_done=done, runs_total=total
    )


def body(response) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


def jsonl_ids(response) -> list[str]:
    return [json.loads(line)["task_id"] for line in body(response).splitlines()]


def csv_rows(response) -> list[dict]:
    return list(csv.DictReader(io.StringIO(body(response).decode())))


def export_command(name: str, *args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command(name, *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


# --- While the first inspection runs: refused, never empty -----------------------------------


def test_the_commands_refuse_to_export_while_the_first_inspection_runs_and_name_it(
    import_taskset, tmp_path
):
    running = running_inspection(import_taskset())
    out = tmp_path / "manifest.jsonl"

    for command in ("export_manifest", "export_report"):
        with pytest.raises(CommandError) as refused:
            export_command(command, "planted", "-o", str(out))
        assert f"inspection #{running.pk} is running, 120/300 runs (40%)" in str(refused.value)
        assert "planted v1 has no finished inspection to export from" in str(refused.value)
    assert not out.exists()  # no empty file for a pipeline to pick up


def test_on_the_command_line_the_refusal_exits_non_zero_with_the_reason_on_stderr(
    import_taskset, tmp_path, capsys, monkeypatch
):
    from django.core.management import base

    from inspector.management.commands.export_manifest import Command

    # run_from_argv closes every connection when it ends: the test's own must stay open.
    monkeypatch.setattr(base.connections, "close_all", lambda: None)
    running = running_inspection(import_taskset())

    with pytest.raises(SystemExit) as exited:
        Command().run_from_argv(
            ["manage.py", "export_manifest", "planted", "-o", str(tmp_path / "m.jsonl")]
        )

    assert exited.value.code == 1
    err = capsys.readouterr().err
    assert "CommandError: planted v1 has no finished inspection" in err
    assert f"inspection #{running.pk} is running" in err


def test_the_api_refuses_every_export_with_409_naming_the_running_inspection(
    client, import_taskset, lead_key
):
    running = running_inspection(import_taskset())

    for path in EXPORT_PATHS:
        response = client.get(f"/api/v1/tasksets/planted/{path}", **bearer(lead_key))
        assert response.status_code == 409, path
        refusal = response.json()
        assert f"inspection #{running.pk} is running" in refusal["error"], path
        assert refusal["inspection"]["id"] == running.pk
        assert (refusal["inspection"]["status"], refusal["inspection"]["percent"]) == (
            "running",
            40,
        )


def test_the_browser_downloads_refuse_with_409_and_say_why_on_the_page_too(
    lead_client, import_taskset
):
    running = running_inspection(import_taskset())

    for path in EXPORT_PATHS:
        response = lead_client.get(f"/tasksets/planted/{path}")
        assert response.status_code == 409, path
        assert response["Content-Type"].startswith("text/plain")
        assert f"inspection #{running.pk} is running, 120/300 runs" in response.content.decode()
    page = lead_client.get("/tasksets/planted/").content.decode()
    assert f"Downloads open once inspection #{running.pk} has finished" in page


def test_a_version_whose_only_inspection_failed_is_refused_with_the_failure(
    client, import_taskset, lead_key
):
    failed = Inspection.objects.create(
        version=import_taskset(), status=Inspection.FAILED, error="sandbox unavailable: vm"
    )

    response = client.get("/api/v1/tasksets/planted/manifest.jsonl", **bearer(lead_key))

    assert response.status_code == 409
    assert f"inspection #{failed.pk} failed (sandbox unavailable: vm)" in response.json()["error"]


# --- A newer inspection runs after a finished one: the finished one, named -------------------


def test_while_a_newer_inspection_runs_every_door_exports_the_last_finished_one_and_says_so(
    inspected, client, lead_client, lead_key, tmp_path
):
    newer = running_inspection(inspected.version, done=30, total=94)
    out = tmp_path / "manifest.jsonl"

    _, said = export_command("export_manifest", "planted", "-o", str(out))
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [line["task_id"] for line in lines] == ["planted/clean"]
    assert lines[0]["quality"]["inspection_id"] == inspected.pk
    assert f"planted v1 by inspection #{inspected.pk}" in said
    assert f"inspection #{newer.pk} of planted v1 is running, 30/94 runs (31%)" in said

    api = client.get("/api/v1/tasksets/planted/manifest.jsonl", **bearer(lead_key))
    assert jsonl_ids(api) == ["planted/clean"]
    assert api["X-Inspection-Id"] == str(inspected.pk)
    assert api["X-Newer-Inspection-Id"] == str(newer.pk)
    assert f"this export is from inspection #{inspected.pk}" in api["X-Export-Note"]

    download = lead_client.get("/tasksets/planted/report.csv")
    assert download["Content-Disposition"] == (
        f'attachment; filename="planted-v1-inspection{inspected.pk}-report.csv"'
    )
    assert {row["inspection_id"] for row in csv_rows(download)} == {str(inspected.pk)}
    page = lead_client.get("/tasksets/planted/").content.decode()
    assert f"Downloads come from inspection #{inspected.pk}, the last finished one" in page


# --- Pinned to an inspection -------------------------------------------------------------------


def test_an_export_pinned_to_an_earlier_inspection_keeps_that_inspections_verdicts_and_figures(
    inspected, inspect_now, client, lead_client, lead_key, tmp_path
):
    first = inspected
    figures = {
        t.task_id: (t.runs_count, t.reference_pass_rate, t.sample_pass_rate)
        for t in Task.objects.all()
    }
    second = inspect_now(first.version)
    # A reviewer dismisses the hackable task's flag of the second inspection only.
    Flag.objects.get(inspection=second, code="reward_hackable").dismiss(by=None, note="intended")

    assert [t["task_id"] for t in selectors.manifest_lines(taskset_name="planted")] == [
        "planted/clean",
        "planted/hackable",
    ]
    out = tmp_path / "pinned.jsonl"
    _, said = export_command(
        "export_manifest", "planted", "-o", str(out), "--inspection", str(first.pk)
    )
    pinned = [json.loads(line) for line in out.read_text().splitlines()]
    assert [line["task_id"] for line in pinned] == ["planted/clean"]
    assert pinned[0]["quality"]["inspection_id"] == first.pk
    assert f"by inspection #{first.pk} (pinned)" in said
    query = f"?inspection={first.pk}"
    api = client.get(f"/api/v1/tasksets/planted/manifest.jsonl{query}", **bearer(lead_key))
    assert jsonl_ids(api) == ["planted/clean"] and api["X-Inspection-Id"] == str(first.pk)
    assert jsonl_ids(lead_client.get(f"/tasksets/planted/manifest.jsonl{query}")) == [
        "planted/clean"
    ]

    report, _ = export_command("export_report", "planted", "-o", "-", "--inspection", str(first.pk))
    lines = {r["task_id"]: r for r in map(json.loads, report.splitlines())}
    assert lines["planted/hackable"]["flag_status"] == {"reward_hackable": "open"}
    for task_id, (runs, reference, samples) in figures.items():
        stats = lines[task_id]["stats"]
        assert (stats["runs"], stats["reference_pass_rate"], stats["sample_pass_rate"]) == (
            runs,
            reference,
            samples,
        ), task_id
        assert stats["inspection_id"] == first.pk
    rows = {
        r["task_id"]: r for r in csv_rows(lead_client.get(f"/tasksets/planted/report.csv{query}"))
    }
    assert rows["planted/hackable"]["flags"] == "reward_hackable"
    assert rows["planted/hackable"]["pending_review"] == "True"
    assert {r["inspection_id"] for r in rows.values()} == {str(first.pk)}

    # Pinned to the latest one: the same as unpinned.
    latest = client.get(
        f"/api/v1/tasksets/planted/manifest.jsonl?inspection={second.pk}", **bearer(lead_key)
    )
    assert jsonl_ids(latest) == ["planted/clean", "planted/hackable"]


def test_a_pin_to_an_inspection_that_cannot_be_exported_says_which_and_why(
    import_taskset, client, lead_client, lead_key
):
    version = import_taskset()
    other = Inspection.objects.create(
        version=import_taskset(name="other-set"), status=Inspection.FINISHED
    )
    running = running_inspection(version)
    failed = Inspection.objects.create(version=version, status=Inspection.FAILED, error="boom")
    api = "/api/v1/tasksets/planted/manifest.jsonl?inspection="
    cases = {
        "999999": (404, "No inspection #999999"),
        str(other.pk): (404, f"Inspection #{other.pk} is of other-set v1, not of task set"),
        str(running.pk): (409, f"Inspection #{running.pk} of planted v1 is running, 120/300"),
        str(failed.pk): (409, f"Inspection #{failed.pk} of planted v1 failed (boom)"),
        "latest": (400, "inspection must be a whole number, not 'latest'"),
    }

    for pin, (status, reason) in cases.items():
        by_api = client.get(api + pin, **bearer(lead_key))
        assert (by_api.status_code, reason in by_api.json()["error"]) == (status, True), pin
        by_browser = lead_client.get(f"/tasksets/planted/report.csv?inspection={pin}")
        assert by_browser.status_code == status, pin
        assert reason in by_browser.content.decode(), pin
    for pin in ("999999", str(other.pk), str(running.pk), str(failed.pk)):
        with pytest.raises(CommandError, match=f"#{pin}"):
            export_command("export_report", "planted", "-o", "-", "--inspection", pin)
    with pytest.raises(CommandError, match="invalid int value: 'latest'"):
        export_command("export_manifest", "planted", "-o", "-", "--inspection", "latest")


# --- The report through the API ----------------------------------------------------------------


def test_the_api_serves_the_report_as_jsonl_csv_and_parquet_with_a_token(
    inspected, client, lead_key
):
    import pandas as pd

    order = list(Task.objects.order_by("position").values_list("task_id", flat=True))
    url = "/api/v1/tasksets/planted/report"

    jsonl = client.get(f"{url}.jsonl", **bearer(lead_key))
    lines = [json.loads(line) for line in body(jsonl).splitlines()]
    assert jsonl.status_code == 200 and jsonl["Content-Type"].startswith("application/jsonl")
    assert lines == list(selectors.report_lines(taskset_name="planted"))
    assert [line["task_id"] for line in lines] == order
    assert {line["task_id"]: line["flags"] for line in lines}["planted/flaky"] == ["flaky"]

    table = client.get(f"{url}.csv", **bearer(lead_key))
    rows = csv_rows(table)
    assert table.status_code == 200 and table["Content-Type"].startswith("text/csv")
    assert [row["task_id"] for row in rows] == order
    assert {row["task_id"]: row["flags"] for row in rows}["planted/mislabeled"] == "mislabeled"
    assert {row["inspection_id"] for row in rows} == {str(inspected.pk)}

    parquet = client.get(f"{url}.parquet", **bearer(lead_key))
    frame = pd.read_parquet(io.BytesIO(parquet.content))
    assert parquet["Content-Disposition"] == (
        f'attachment; filename="planted-v1-inspection{inspected.pk}-report.parquet"'
    )
    assert list(frame["task_id"]) == order
    assert list(frame.columns) == list(selectors.REPORT_COLUMNS)


def test_a_token_request_is_never_sent_to_the_login_page(client, lead, lead_key, reviewer):
    # A browser download with a token: 401 JSON naming the API path that serves it.
    browser_path = client.get("/tasksets/planted/report.csv?version=1", **bearer(lead_key))
    assert browser_path.status_code == 401
    assert "/api/v1/tasksets/planted/report.csv?version=1" in browser_path.json()["error"]
    # The API's report without a token, or with a bad one: 401 JSON.
    for headers in ({}, bearer("ei_not-a-token")):
        refused = client.get("/api/v1/tasksets/planted/report.csv", **headers)
        assert refused.status_code == 401 and "API token" in refused.json()["error"]
    # A path the API does not have: 404 JSON, not a page.
    unknown = client.get("/api/v1/tasksets/planted/report.xlsx", **bearer(lead_key))
    assert unknown.status_code == 404 and "/api/openapi.json" in unknown.json()["error"]
    # A reviewer's token is refused the report, as the browser refuses a reviewer.
    key = ApiToken.issue(user=reviewer, name="triage")[1]
    assert client.get("/api/v1/tasksets/planted/report.jsonl", **bearer(key)).status_code == 403
    # A person without a session is still sent to log in.
    assert client.get("/tasksets/planted/report.csv")["Location"].startswith("/accounts/login/")


def test_the_openapi_description_lists_the_manifest_and_report_with_the_pin_and_the_409():
    paths = Client().get("/api/openapi.json").json()["paths"]

    for path in EXPORT_PATHS:
        operation = paths[f"/api/v1/tasksets/{{name}}/{path}"]["get"]
        assert "inspection" in [p["name"] for p in operation["parameters"]], path
        assert {"200", "400", "401", "403", "404", "409"} <= set(operation["responses"]), path
        assert "X-Inspection-Id" in operation["responses"]["200"]["headers"], path
    assert (
        "text/csv"
        in paths["/api/v1/tasksets/{name}/report.csv"]["get"]["responses"]["200"]["content"]
    )
