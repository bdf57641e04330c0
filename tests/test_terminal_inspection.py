"""Terminal task sets through the platform's doors, inspected in real Docker: an upload of Harbor
task folders as a .tar.gz, the management commands on a Terminal-Bench folder, the isolated mode,
and a production run on PostgreSQL, Redis and a worker process."""

from __future__ import annotations

import io
import json
import shutil
import tarfile
import zipfile
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from inspector.models import Flag, Inspection, Run, Task, TaskSet

ROOT = Path(__file__).resolve().parent.parent
HARBOR_DEMO = ROOT / "inspector" / "demo" / "terminal"
TB_DEMO = ROOT / "inspector" / "demo" / "terminal-bench"

needs_docker = pytest.mark.usefixtures("docker_engine")


# What each planted task of inspector/demo/terminal must be flagged with.
PLANTED = {
    "hello-file": set(),
    "wrong-reference": {"mislabeled"},
    "nop-passes": {"reward_hackable"},
    "reward-file-hack": {"reward_hackable"},
    "conftest-hack": {"reward_hackable"},
    "trojan-hack": {"reward_hackable"},
    "edit-tests-hack": {"reward_hackable"},
    "flaky-check": {"flaky"},
    "broken-build": {"broken_environment"},
}


def tar_gz(folder: Path, tasks: list[str] | None = None) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for task in sorted(tasks or [p.name for p in folder.iterdir() if p.is_dir()]):
            tar.add(folder / task, arcname=task)
    return out.getvalue()


def upload(client, name, data: bytes, filename: str, *, samples: bytes | None = None, mode=""):
    form = {"name": name, "tasks_file": SimpleUploadedFile(filename, data)}
    if samples is not None:
        form["samples_file"] = SimpleUploadedFile("samples.jsonl", samples)
    if mode:
        form["terminal_mode"] = mode
    return client.post(reverse("inspector-upload"), form)


@pytest.fixture
def terminal_repeats(settings):
    # flaky-check passes half of the time: 10 reference runs all agree with probability 2/1024.
    settings.TERMINAL_REFERENCE_REPEATS = 10
    settings.TERMINAL_SAMPLE_REPEATS = 1
    settings.TERMINAL_PARALLEL = 4


def flags_by_task(version) -> dict[str, set[str]]:
    found = {t.task_id: set() for t in version.tasks.all()}
    for task_id, code in Flag.objects.filter(
        task__version=version, inspection__version=version
    ).values_list("task__task_id", "code"):
        found[task_id].add(code)
    return found


def runs_shown(version) -> str:
    """Each run of the version's tasks, one line each: what a failed flag check shows."""
    rows = Run.objects.filter(task__version=version).order_by(
        "task__task_id", "kind", "probe", "id"
    )
    return "\n".join(
        f"{r.task.task_id} {r.kind} {r.probe or '-'} {r.mode} {r.status} {r.outcome} "
        f"reward={r.reward} {r.error[:200]!r} {str(r.detail.get('reason', ''))[:200]!r}"
        for r in rows.select_related("task")
    )


@needs_docker
@pytest.mark.django_db(transaction=True)
def test_harbor_folders_uploaded_as_a_tar_gz_are_inspected_and_each_planted_defect_is_flagged(
    lead_client, eager_celery, django_capture_on_commit_callbacks, terminal_repeats
):
    samples = (ROOT / "inspector" / "demo" / "terminal-samples.jsonl").read_bytes()
    response = upload(
        lead_client, "harbor-demo", tar_gz(HARBOR_DEMO), "tasks.tar.gz", samples=samples
    )
    assert response.status_code == 302, response.content.decode()[-2000:]
    taskset = TaskSet.objects.get(name="harbor-demo")
    version = taskset.latest_version()
    assert version.task_count == 9
    # 3 from wrong-reference/samples/ and 4 from the JSONL.
    assert version.sample_count == 7
    assert taskset.terminal_mode == TaskSet.FAITHFUL

    with django_capture_on_commit_callbacks(execute=True):
        response = lead_client.post(reverse("inspector-inspect", args=("harbor-demo",)))
    assert response.status_code == 302
    inspection = Inspection.objects.get(version=version)
    assert inspection.status == Inspection.FINISHED, inspection.error
    assert inspection.runs_done == inspection.runs_total
    assert not Run.objects.filter(inspection=inspection).exclude(status=Run.DONE).exists()

    assert flags_by_task(version) == PLANTED, runs_shown(version)

    def flag(task_id, code):
        return Flag.objects.get(task__version=version, task__task_id=task_id, code=code)

    # Each hackable task names the probe that beat it, and whether isolating the check cures it.
    nop = flag("nop-passes", "reward_hackable").explanation
    assert "nop" in nop and "faithful mode" in nop
    reward_file = flag("reward-file-hack", "reward_hackable").explanation
    assert "reward-file" in reward_file
    assert "isolated mode defeats reward-file" in reward_file
    conftest = flag("conftest-hack", "reward_hackable").explanation
    assert "isolated mode defeats conftest-hook" in conftest
    assert "isolated mode defeats trojan-tool" in flag("trojan-hack", "reward_hackable").explanation
    edit = flag("edit-tests-hack", "reward_hackable").explanation
    assert "isolated mode does not defeat edit-tests" in edit
    assert "awk-sum" in flag("wrong-reference", "mislabeled").explanation
    broken = flag("broken-build", "broken_environment")
    assert "did not build" in broken.explanation

    # The evidence a reviewer sees: the build log, the stages' output, the lint findings.
    page = lead_client.get(broken.task.get_absolute_url()).content.decode()
    assert "jq: not found and no network to install it" in page
    page = lead_client.get(flag("edit-tests-hack", "reward_hackable").task.get_absolute_url())
    page = page.content.decode()
    assert "tests-in-image" in page and "environment/Dockerfile" in page
    assert "earned a full reward" in page
    reward_run = Run.objects.filter(
        task__task_id="wrong-reference", inspection=inspection, kind=Run.REFERENCE
    ).first()
    assert reward_run.reward == 0.0 and reward_run.outcome == "failed"
    assert reward_run.detail["verifier"]["exit_code"] == 0

    # The manifest lists only the clean task folder, with its content hash.
    manifest = lead_client.get(reverse("inspector-manifest", args=("harbor-demo",)))
    lines = [json.loads(line) for line in b"".join(manifest.streaming_content).splitlines()]
    hello = Task.objects.get(version=version, task_id="hello-file")
    assert [(x["task_id"], x["folder"], x["content_hash"]) for x in lines] == [
        ("hello-file", "hello-file", hello.content_hash)
    ]

    # The report carries the lint findings and each probe's result per mode.
    report = io.StringIO()
    call_command("export_report", "harbor-demo", "-o", "-", stdout=report)
    rows = {r["task_id"]: r for r in map(json.loads, report.getvalue().splitlines())}
    assert {f["code"] for f in rows["edit-tests-hack"]["lint"]} >= {"tests-in-image"}
    assert rows["reward-file-hack"]["probes"]["reward-file"] == {
        "faithful": True,
        "isolated": False,
    }
    assert rows["edit-tests-hack"]["probes"]["edit-tests"] == {"faithful": True, "isolated": True}


@needs_docker
@pytest.mark.django_db(transaction=True)
def test_terminal_bench_folders_import_and_inspect_through_the_management_commands(
    eager_celery, django_capture_on_commit_callbacks, settings
):
    settings.TERMINAL_REFERENCE_REPEATS = 2
    settings.TERMINAL_PROBES = ["nop", "reward-file"]
    out = io.StringIO()
    call_command(
        "import_tasks",
        str(TB_DEMO),
        "--taskset",
        "tb-demo",
        "--samples",
        str(ROOT / "inspector" / "demo" / "terminal-bench-samples.jsonl"),
        stdout=out,
    )
    assert "Imported 2 tasks and 2 samples" in out.getvalue()
    with django_capture_on_commit_callbacks(execute=True):
        call_command("inspect", "tb-demo", stdout=io.StringIO())
    version = TaskSet.objects.get(name="tb-demo").latest_version()
    assert flags_by_task(version) == {"count-lines": set(), "wrong-count": {"mislabeled"}}
    count = Task.objects.get(version=version, task_id="count-lines")
    assert count.source["format"] == "terminal-bench"
    assert count.reference_pass_rate == 1.0


@needs_docker
@pytest.mark.django_db(transaction=True)
def test_in_isolated_mode_only_the_weaknesses_of_the_task_itself_are_flagged(
    eager_celery, django_capture_on_commit_callbacks, settings, tmp_path
):
    settings.TERMINAL_REFERENCE_REPEATS = 2
    archive = tmp_path / "hacks.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for task in ("reward-file-hack", "edit-tests-hack"):
            for path in sorted((HARBOR_DEMO / task).rglob("*")):
                if path.is_file():
                    zf.write(path, f"{task}/{path.relative_to(HARBOR_DEMO / task)}")
    call_command(
        "import_tasks",
        str(archive),
        "--taskset",
        "isolated",
        "--mode",
        "isolated",
        stdout=io.StringIO(),
    )
    with django_capture_on_commit_callbacks(execute=True):
        call_command("inspect", "isolated", stdout=io.StringIO())
    version = TaskSet.objects.get(name="isolated").latest_version()
    assert flags_by_task(version) == {
        "reward-file-hack": set(),
        "edit-tests-hack": {"reward_hackable"},
    }
    modes = set(Run.objects.filter(task__version=version).values_list("mode", flat=True))
    assert modes == {"isolated"}


@pytest.mark.django_db
def test_a_hostile_archive_is_refused_in_the_browser_and_nothing_is_stored(lead_client):
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        info = tarfile.TarInfo("hello/../../etc/cron.d/evil")
        payload = b"* * * * * root true\n"
        info.size = len(payload)
        tar.addfile(info, io.BytesIO(payload))
    response = upload(lead_client, "evil", out.getvalue(), "evil.tar.gz")
    assert response.status_code == 400
    assert "etc/cron.d/evil" in response.content.decode()
    assert not TaskSet.objects.filter(name="evil").exists()


@pytest.mark.django_db
def test_a_task_folder_with_a_missing_file_is_refused_with_the_file_named(tmp_path):
    shutil.copytree(HARBOR_DEMO / "hello-file", tmp_path / "tasks" / "hello-file")
    (tmp_path / "tasks" / "hello-file" / "tests" / "test.sh").unlink()
    with pytest.raises(CommandError, match=r"hello-file/tests/test\.sh"):
        call_command("import_tasks", str(tmp_path / "tasks"), "--taskset", "broken")
    assert not TaskSet.objects.filter(name="broken").exists()


@needs_docker
@pytest.mark.production
@pytest.mark.django_db(transaction=True)
def test_terminal_tasks_on_postgresql_redis_and_a_worker_process(start_worker, tmp_path):
    tasks = tmp_path / "tasks"
    for task in ("hello-file", "reward-file-hack", "broken-build"):
        shutil.copytree(HARBOR_DEMO / task, tasks / task)
    call_command("import_tasks", str(tasks), "--taskset", "prod-terminal", stdout=io.StringIO())
    start_worker("terminal", TERMINAL_REFERENCE_REPEATS="3", TERMINAL_PARALLEL="4")
    call_command("inspect", "prod-terminal", "--wait", stdout=io.StringIO())
    version = TaskSet.objects.get(name="prod-terminal").latest_version()
    assert flags_by_task(version) == {
        "hello-file": set(),
        "reward-file-hack": {"reward_hackable"},
        "broken-build": {"broken_environment"},
    }, runs_shown(version)
