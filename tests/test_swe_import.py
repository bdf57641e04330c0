"""Importing repository tasks (SWE-bench instances) through every door: `manage.py import_tasks`,
the JSON API and the browser's upload form, with their environments (an archive of folders, a
folder, or an image the user already has) and predictions. The instances are the 14 fixture
instances of bench/swe/fixtures.py; a bad upload stores nothing, whatever the door."""

from __future__ import annotations

import copy
import io
import json
import os
import tarfile

import docker
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command

from bench.swe import fixtures
from inspector import services
from inspector.formats.humaneval import TaskSetFormatError
from inspector.models import Sample, Task, TaskSet, TaskSetVersion
from workers.sandbox.terminal.containers import OWNERS

pytestmark = pytest.mark.django_db

CLEAN = "jpvanhal__inflection-clean"
VAGUE = "jpvanhal__inflection-vague-statement"


def jsonl(rows: list[dict]) -> bytes:
    return b"".join(json.dumps(row).encode() + b"\n" for row in rows)


def upload(
    swe_fixture,
    name: str = "swe",
    *,
    lines: list[dict] | None = None,
    environments: bytes | None = None,
    predictions: bool = True,
):
    """Import through the service, as every door does."""
    return services.taskset_import(
        name=name,
        tasks_file=io.BytesIO(jsonl(swe_fixture.instances if lines is None else lines)),
        tasks_name="instances.jsonl",
        environments=io.BytesIO(
            swe_fixture.environments_path.read_bytes() if environments is None else environments
        ),
        environments_name="environments.tar.gz",
        samples_file=io.BytesIO(swe_fixture.predictions_path.read_bytes()) if predictions else None,
        samples_name="predictions.jsonl" if predictions else "",
    )


def assert_the_fixture_set_is_stored(swe_fixture, name: str) -> TaskSetVersion:
    version = TaskSetVersion.objects.get(taskset__name=name)
    assert (version.task_count, version.sample_count) == (14, 32)
    tasks = {t.task_id: t for t in version.tasks.all()}
    assert list(tasks) == [line["instance_id"] for line in swe_fixture.instances]
    assert {t.kind for t in tasks.values()} == {Task.REPO}
    line = next(i for i in swe_fixture.instances if i["instance_id"] == CLEAN)
    task = tasks[CLEAN]
    assert task.prompt == line["problem_statement"]
    assert task.canonical_solution == line["patch"] and task.test == line["test_patch"]
    assert task.domain == "jpvanhal/inflection"
    assert task.fail_to_pass == (
        json.loads(line["FAIL_TO_PASS"])
        if isinstance(line["FAIL_TO_PASS"], str)
        else line["FAIL_TO_PASS"]
    )
    assert len(task.pass_to_pass) == 103
    assert task.metadata["base_commit"] == line["base_commit"]
    assert task.metadata["version"] == "0.5"
    assert task.metadata["environment"] == {"folder": "inflection-ordinal"}
    assert task.source["line"] == line  # to be written back in the schema it came in
    assert task.source["files"]["Dockerfile"]["text"].startswith("FROM inspector-sandbox")
    assert ".git/HEAD" in task.source["files"]
    # The statement lint runs at import, as terminal tasks' lint does.
    assert [f["code"] for f in tasks[VAGUE].lint] == ["statement_names_nothing_tested"]
    assert task.lint == []
    samples = Sample.objects.filter(task=task).order_by("position")
    assert [(s.sample_id, s.model) for s in samples] == [
        ("s1", "swe-agent-a"),
        ("s2", "swe-agent-b"),
        ("s3", "swe-agent-c"),
        ("s4", "swe-agent-d"),
    ]
    assert samples[0].completion == swe_fixture.predictions[0]["model_patch"]
    return version


def spoiled(swe_fixture) -> list[dict]:
    """The fixture lines, the last one with a gold patch that no longer applies."""
    lines = copy.deepcopy(swe_fixture.instances)
    lines[-1]["patch"] = lines[-1]["patch"].replace("time > curr.expires", "time >= curr.expires")
    return lines


SPOILED_PROBLEM = (
    "instances.jsonl, line 14, instance 'tkem__cachetools-leak-dangling', field 'patch': does not "
    "apply to the repository at base_commit: src/cachetools/__init__.py, hunk @@ -472,7 +472,7 @@ class TTLCache(_TimedCache):: its context and removed lines do "
    "not match near line 472"
)


# --- The doors -------------------------------------------------------------------------------


def test_the_fixture_instances_import_through_the_command_with_their_predictions(swe_fixture):
    out = io.StringIO()
    call_command(
        "import_tasks",
        str(swe_fixture.instances_path),
        "--taskset",
        "swe",
        "--environments",
        str(swe_fixture.environments_path),
        "--samples",
        str(swe_fixture.predictions_path),
        stdout=out,
    )

    assert out.getvalue().strip() == "Imported 14 tasks and 32 samples as swe v1."
    version = assert_the_fixture_set_is_stored(swe_fixture, "swe")
    assert version.uploaded_files == [
        "instances.jsonl",
        "environments.tar.gz",
        "predictions.jsonl",
    ]


def test_the_fixture_instances_import_through_the_api_alike(swe_fixture, client, lead_key):
    response = client.post(
        "/api/v1/tasksets",
        {
            "name": "swe-api",
            "tasks_file": SimpleUploadedFile("instances.jsonl", jsonl(swe_fixture.instances)),
            "environments_file": SimpleUploadedFile(
                "environments.tar.gz", swe_fixture.environments_path.read_bytes()
            ),
            "samples_file": SimpleUploadedFile(
                "predictions.jsonl", swe_fixture.predictions_path.read_bytes()
            ),
        },
        HTTP_AUTHORIZATION=f"Bearer {lead_key}",
    )

    assert response.status_code == 201, response.content
    assert response.json() == {
        "taskset": "swe-api",
        "version": 1,
        "task_count": 14,
        "sample_count": 32,
    }
    assert_the_fixture_set_is_stored(swe_fixture, "swe-api")


def test_the_fixture_instances_import_through_the_browser_form(swe_fixture, lead_client):
    page = lead_client.get("/").content.decode()
    assert 'name="environments_file"' in page and "Environments (SWE-bench instances)" in page

    response = lead_client.post(
        "/tasksets/upload",
        {
            "name": "swe-web",
            "tasks_file": SimpleUploadedFile("instances.jsonl", jsonl(swe_fixture.instances)),
            "environments_file": SimpleUploadedFile(
                "environments.tar.gz", swe_fixture.environments_path.read_bytes()
            ),
            "samples_file": SimpleUploadedFile(
                "predictions.jsonl", swe_fixture.predictions_path.read_bytes()
            ),
        },
    )

    assert response.status_code == 302
    assert response["Location"] == "/tasksets/swe-web/"
    assert_the_fixture_set_is_stored(swe_fixture, "swe-web")


def test_an_environments_folder_on_disk_imports_like_the_archive(swe_fixture, tmp_path):
    with tarfile.open(swe_fixture.environments_path) as archive:
        archive.extractall(tmp_path / "environments", filter="data")
    upload(swe_fixture, "from-archive")

    call_command(
        "import_tasks",
        str(swe_fixture.instances_path),
        "--taskset",
        "from-folder",
        "--environments",
        str(tmp_path / "environments"),
        stdout=io.StringIO(),
    )

    def hashes(name: str) -> list[str]:
        return list(
            Task.objects.filter(version__taskset__name=name)
            .order_by("position")
            .values_list("content_hash", flat=True)
        )

    assert hashes("from-folder") == hashes("from-archive")
    assert len(set(hashes("from-folder"))) == 14


# --- Bad input stores nothing --------------------------------------------------------------------


def test_one_instance_whose_patch_does_not_apply_stores_nothing_and_keeps_the_earlier_version(
    swe_fixture,
):
    upload(swe_fixture)

    with pytest.raises(TaskSetFormatError) as caught:
        upload(swe_fixture, lines=spoiled(swe_fixture))

    (problem,) = [str(issue) for issue in caught.value.issues]
    assert problem.startswith(SPOILED_PROBLEM)
    assert TaskSetVersion.objects.filter(taskset__name="swe").count() == 1
    assert Task.objects.count() == 14 and Sample.objects.count() == 32


def test_a_bad_upload_is_refused_whole_by_every_door_naming_instance_and_field(
    swe_fixture, tmp_path, client, lead_key, lead_client
):
    bad = tmp_path / "instances.jsonl"
    bad.write_bytes(jsonl(spoiled(swe_fixture)))
    files = {
        "tasks_file": SimpleUploadedFile("instances.jsonl", bad.read_bytes()),
        "environments_file": SimpleUploadedFile(
            "environments.tar.gz", swe_fixture.environments_path.read_bytes()
        ),
    }

    with pytest.raises(CommandError) as caught:
        call_command(
            "import_tasks",
            str(bad),
            "--taskset",
            "bad",
            "--environments",
            str(swe_fixture.environments_path),
        )
    assert "1 problem in the upload; nothing was stored" in str(caught.value)
    assert "line 14, instance 'tkem__cachetools-leak-dangling', field 'patch'" in str(caught.value)

    response = client.post(
        "/api/v1/tasksets", {"name": "bad", **files}, HTTP_AUTHORIZATION=f"Bearer {lead_key}"
    )
    assert response.status_code == 400
    assert response.json()["issues"][0].startswith(SPOILED_PROBLEM)

    for upload_file in files.values():
        upload_file.seek(0)
    response = lead_client.post("/tasksets/upload", {"name": "bad", **files})
    assert response.status_code == 400
    assert "instance &#x27;tkem__cachetools-leak-dangling&#x27;, field &#x27;patch&#x27;" in (
        response.content.decode()
    )
    assert not TaskSet.objects.filter(name="bad").exists()


@pytest.mark.django_db
def test_an_instance_whose_first_line_is_several_mib_is_read_as_swe_bench_and_checked(swe_fixture):
    lines = copy.deepcopy(swe_fixture.instances)
    listed = json.loads(lines[0]["PASS_TO_PASS"])  # a JSON string of a list, as published
    where = listed[0].split("::", 1)[0]
    listed += [f"{where}::test_never_{i:06d}" for i in range(80_000)]
    lines[0]["PASS_TO_PASS"] = json.dumps(listed)
    assert len(json.dumps(lines[0])) > 3 << 20

    with pytest.raises(TaskSetFormatError) as caught:
        upload(swe_fixture, lines=lines, predictions=False)

    issues = [str(issue) for issue in caught.value.issues]
    assert len(issues) == 80_000
    assert issues[0] == (
        "instances.jsonl, line 1, instance 'jpvanhal__inflection-clean', field 'PASS_TO_PASS': "
        f"'{where}::test_never_000000': no test test_never_000000 in {where}"
    )
    assert not TaskSet.objects.exists()


@pytest.mark.django_db
def test_a_first_line_nested_too_deeply_is_an_error_with_its_line_not_a_crash(swe_fixture):
    with pytest.raises(TaskSetFormatError) as caught:
        services.taskset_import(
            name="deep",
            tasks_file=io.BytesIO(b"[" * 200_000 + b"\n"),
            tasks_name="instances.jsonl",
        )
    assert [str(issue) for issue in caught.value.issues][0] == (
        "instances.jsonl, line 1: not JSON: nested too deeply"
    )
    assert not TaskSet.objects.filter(name="deep").exists()


def test_a_prediction_for_an_unknown_instance_stores_nothing(swe_fixture):
    predictions = [*swe_fixture.predictions, dict(swe_fixture.predictions[0], instance_id="x-1")]

    with pytest.raises(TaskSetFormatError) as caught:
        services.taskset_import(
            name="swe",
            tasks_file=io.BytesIO(jsonl(swe_fixture.instances)),
            tasks_name="instances.jsonl",
            environments=swe_fixture.environments_path,
            environments_name="environments.tar.gz",
            samples_file=io.BytesIO(jsonl(predictions)),
            samples_name="predictions.jsonl",
        )

    assert [str(i) for i in caught.value.issues] == [
        "predictions.jsonl, line 33, instance 'x-1', field 'instance_id': no instance 'x-1' in "
        "instances.jsonl"
    ]
    assert not TaskSet.objects.exists()


def test_an_environments_archive_with_tasks_that_are_not_instances_is_refused(swe_fixture):
    with pytest.raises(services.ServiceError, match="environments go with repository tasks"):
        services.taskset_import(
            name="humaneval",
            tasks_file=io.BytesIO(
                jsonl(
                    [
                        {
                            "task_id": "t/0",
                            "prompt": "def f():\n",
                            "canonical_solution": "    return 1\n",
                            "test": "def check(c):\n    assert c() == 1\n",
                            "entry_point": "f",
                        }
                    ]
                )
            ),
            tasks_name="tasks.jsonl",
            environments=swe_fixture.environments_path,
            environments_name="environments.tar.gz",
        )
    assert not TaskSet.objects.exists()


# --- Hostile environments archives -------------------------------------------------------------


def tar_gz(*members: tarfile.TarInfo | tuple[str, bytes]) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as archive:
        for member in members:
            if isinstance(member, tarfile.TarInfo):
                archive.addfile(member)
            else:
                path, data = member
                info = tarfile.TarInfo(path)
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
    return raw.getvalue()


def link(path: str, target: str, kind: bytes = tarfile.SYMTYPE) -> tarfile.TarInfo:
    info = tarfile.TarInfo(path)
    info.type, info.linkname = kind, target
    return info


@pytest.mark.parametrize(
    ("members", "refusal"),
    [
        ([("inflection-ordinal/../../escape.py", b"x")], "'inflection-ordinal/../../escape.py' climbs out of the archive's root"),
        ([("/etc/cron.d/evil", b"x")], "'/etc/cron.d/evil' has an absolute path"),
        ([link("inflection-ordinal/setup.py", "/etc/passwd")], "is a symbolic link to '/etc/passwd', outside the archive"),
        ([link("inflection-ordinal/.git/config", "../../../.ssh/config")], "climbs out of the archive"),
        ([link("inflection-ordinal/x", "/etc/shadow", tarfile.LNKTYPE)], "is a link to '/etc/shadow', outside the archive"),
        ([(f"inflection-ordinal/f{i}.py", b"") for i in range(11)], "more than 10 files"),
    ],
)  # fmt: skip
def test_a_hostile_environments_archive_is_refused_naming_the_member(
    swe_fixture, settings, members, refusal
):
    settings.ARCHIVE_MAX_FILES = 10

    with pytest.raises(services.ServiceError) as caught:
        upload(swe_fixture, environments=tar_gz(*members), predictions=False)

    assert str(caught.value).startswith("environments.tar.gz: ")
    assert refusal in str(caught.value)
    assert not TaskSet.objects.exists()


def test_an_environments_bomb_is_refused_without_being_unpacked(swe_fixture, settings):
    settings.ARCHIVE_MAX_BYTES = 5_000_000
    bomb = tar_gz(("inflection-ordinal/zeros.bin", bytes(10_000_000)))

    with pytest.raises(services.ServiceError, match="more than 5000000 bytes unpacked"):
        upload(swe_fixture, environments=bomb, predictions=False)
    assert len(bomb) < 50_000 and not TaskSet.objects.exists()


# --- Images the user already has ---------------------------------------------------------------


@pytest.fixture(scope="module")
def inflection_image(swe_fixture) -> str:
    """The inflection environment built into an image (as a user would have one), its tag."""
    from workers.sandbox.swe import SweExecutor

    built = SweExecutor().image_for(fixtures.sources(swe_fixture)[CLEAN])
    assert built.ok, built.log or built.reason
    return built.tag


def snapshot_containers() -> set[str]:
    """The containers this test process owns (the import's snapshot containers are labelled with
    their owner; other processes' containers may come and go meanwhile)."""
    owner = OWNERS.for_process(os.getpid())[OWNERS.owner]
    client = docker.from_env()
    return {
        c.id for c in client.containers.list(all=True, filters={"label": f"{OWNERS.owner}={owner}"})
    }


def test_instances_that_name_an_image_the_user_has_are_checked_inside_it(
    swe_fixture, inflection_image
):
    lines = []
    for line in swe_fixture.instances[:8]:  # the inflection instances
        line = {k: v for k, v in line.items() if k != "environment"}
        lines.append(dict(line, image=inflection_image))
    lines = [line for line in lines if line["instance_id"] != "jpvanhal__inflection-broken-build"]
    before = snapshot_containers()

    version = services.taskset_import(
        name="swe-images", tasks_file=io.BytesIO(jsonl(lines)), tasks_name="instances.jsonl"
    )

    assert version.task_count == 7
    task = version.tasks.get(task_id=CLEAN)
    assert task.source["docker_image"] == inflection_image and task.source["files"] == {}
    assert task.metadata["environment"] == {"image": inflection_image}
    # Read through a container that was created, never started, and removed.
    assert snapshot_containers() == before

    lines[0]["patch"] = lines[0]["patch"].replace("in (11, 12, 13)", "in (11, 12, 14)", 1)
    lines[1]["image"] = "inspector-no-such-image:never"
    with pytest.raises(TaskSetFormatError) as caught:
        services.taskset_import(
            name="swe-images", tasks_file=io.BytesIO(jsonl(lines)), tasks_name="instances.jsonl"
        )
    problems = [str(issue) for issue in caught.value.issues]
    assert problems[0].startswith(
        f"instances.jsonl, line 1, instance '{CLEAN}', field 'patch': does not apply to the "
        "repository at base_commit: inflection/__init__.py, hunk @@ -223,7 +223,7 @@"
    )
    assert problems[1] == (
        "instances.jsonl, line 2, instance 'jpvanhal__inflection-unsolvable', field 'image': no "
        "image inspector-no-such-image:never on this Docker engine; images are never pulled "
        "(load it with `docker load` or build it first)"
    )
    assert TaskSetVersion.objects.filter(taskset__name="swe-images").count() == 1
    assert snapshot_containers() == before


# --- The pages ---------------------------------------------------------------------------------


def test_the_set_page_the_queue_and_a_task_page_show_an_imported_instance(
    swe_fixture, reviewer_client
):
    version = upload(swe_fixture)
    task = version.tasks.get(task_id=CLEAN)

    page = reviewer_client.get("/tasksets/swe/")
    assert page.status_code == 200 and "environments.tar.gz" in page.content.decode()
    assert reviewer_client.get("/queue/?all=1").status_code == 200
    # Before any inspection: the statement, both lists of tests, the patches, no report yet.
    page = reviewer_client.get(f"/tasks/{task.pk}/")
    text = page.content.decode()
    assert page.status_code == 200 and CLEAN in text
    assert 'id="fail-to-pass"' in text and task.fail_to_pass[0] in text
    assert 'id="pass-to-pass"' in text and "Not inspected yet." in text
