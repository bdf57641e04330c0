"""docker-compose.yml run the way a user runs it: the stack up under a project of its own, a task
set uploaded, inspected and its manifest downloaded through the JSON API on 127.0.0.1, then more
sandbox workers with --scale that take runs, and the stack removed with its volumes.

Needs the images bin/compose-images builds (bin/test builds them first) and the sandbox image on
the host's engine (bin/docker-up). Marked `compose`: bin/test runs these apart, after the
production tests; the embedded and production runs leave them out."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import uuid
from pathlib import Path

import pytest
import requests

from tests.builders import PLANTED_SAMPLES, PLANTED_TASKS, jsonl, task

pytestmark = pytest.mark.compose

ROOT = Path(__file__).resolve().parent.parent
SANDBOX_IMAGE = "inspector-sandbox:bookworm"
# The script a user would type into `manage.py shell`: the first admin and an API token for it.
MAKE_TOKEN = """
from django.contrib.auth.models import Group, User
from inspector.models import ApiToken
user = User.objects.create_superuser("lead", password="lead-pass-1")
user.groups.add(Group.objects.get_or_create(name="admins")[0])
print(ApiToken.issue(user=user, name="trainer")[1])
"""
# Which container (host name) claimed each run of an inspection: {host: runs}.
RUN_HOSTS = """
import collections, json, sys
from inspector.models import Run
runs = Run.objects.filter(inspection_id={id})
print(json.dumps(collections.Counter(r.worker.split(":")[0] for r in runs if r.worker)))
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Stack:
    """docker-compose (Debian's 1.29, or `docker compose`) on the checkout's compose file, under
    a project name and a .env file of its own."""

    def __init__(self, tmp: Path):
        self.project = f"inspector-test-{uuid.uuid4().hex[:8]}"
        self.port = free_port()
        self.env_file = tmp / ".env"
        self.env_file.write_text(f"SECRET_KEY={uuid.uuid4().hex}{uuid.uuid4().hex}\n")
        self.env = {
            **os.environ,
            "COMPOSE_PROJECT_NAME": self.project,
            "WEB_PORT": str(self.port),
            # For bin/compose-images --load, which runs docker-compose without --env-file.
            "SECRET_KEY": "unused-by-exec",
        }
        self.url = f"http://127.0.0.1:{self.port}"

    def compose(self, *args: str, timeout: float = 240, input: bytes | None = None) -> str:
        cmd = [
            "docker-compose",
            "--project-directory",
            str(ROOT),
            "-f",
            str(ROOT / "docker-compose.yml"),
            "--env-file",
            str(self.env_file),
            *args,
        ]
        done = subprocess.run(
            cmd, cwd=ROOT, env=self.env, capture_output=True, timeout=timeout, input=input
        )
        if done.returncode != 0:
            pytest.fail(
                f"{' '.join(args)} failed ({done.returncode}):\n"
                f"{done.stdout.decode(errors='replace')[-3000:]}\n"
                f"{done.stderr.decode(errors='replace')[-3000:]}"
            )
        return done.stdout.decode()

    def shell(self, code: str) -> str:
        return self.compose("exec", "-T", "web", "python3", "manage.py", "shell", "-c", code)

    def containers(self, service: str) -> list[str]:
        return self.compose("ps", "-q", service).split()

    def logs(self) -> str:
        done = subprocess.run(
            ["docker-compose", "-f", str(ROOT / "docker-compose.yml"), "--env-file",
             str(self.env_file), "logs", "--no-color", "--tail", "40"],
            cwd=ROOT, env=self.env, capture_output=True, timeout=60,
        )  # fmt: skip
        return done.stdout.decode(errors="replace")[-8000:]


def docker(*args: str) -> str:
    return subprocess.run(
        ["docker", *args], capture_output=True, check=True, text=True, timeout=60
    ).stdout


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    for image in ("inspector-base:bookworm", "inspector-app", SANDBOX_IMAGE):
        if subprocess.run(["docker", "image", "inspect", image], capture_output=True).returncode:
            pytest.fail(f"the image {image} is missing: bin/compose-images (and bin/docker-up)")
    s = Stack(tmp_path_factory.mktemp("compose"))
    started = time.monotonic()
    try:
        # Waits for PostgreSQL, Redis and the engine to be healthy and the migrations to finish.
        s.compose("up", "-d", "--no-build")
        up = time.monotonic() - started
        loaded = subprocess.run(
            ["bin/compose-images", "--load", SANDBOX_IMAGE],
            cwd=ROOT, env=s.env, capture_output=True, text=True, timeout=180,
        )  # fmt: skip
        assert loaded.returncode == 0, loaded.stderr
        print(f"\ncompose stack {s.project}: up in {up:.0f} s, sandbox image loaded after "
              f"{time.monotonic() - started:.0f} s")  # fmt: skip
        yield s
    finally:
        started = time.monotonic()
        s.compose("down", "-v", "--remove-orphans", "--timeout", "10", timeout=180)
        print(f"compose stack {s.project}: down -v in {time.monotonic() - started:.0f} s")


@pytest.fixture(scope="module")
def api(stack):
    key = stack.shell(MAKE_TOKEN).strip().splitlines()[-1]
    assert key.startswith("ei_")
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {key}"
    deadline = time.monotonic() + 60
    while True:  # gunicorn answers a moment after its container starts
        try:
            session.get(f"{stack.url}/api/v1/tasksets", timeout=10).raise_for_status()
            return session
        except requests.RequestException:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)


def upload(stack: Stack, api: requests.Session, name: str, tasks: list[dict], samples=()) -> dict:
    files = {"tasks_file": ("tasks.jsonl", jsonl(tasks))}
    if samples:
        files["samples_file"] = ("samples.jsonl", jsonl(list(samples)))
    response = api.post(f"{stack.url}/api/v1/tasksets", data={"name": name}, files=files)
    assert response.status_code == 201, response.text
    return response.json()


def inspect_and_wait(stack: Stack, api: requests.Session, name: str) -> dict:
    started = api.post(f"{stack.url}/api/v1/tasksets/{name}/inspections")
    assert started.status_code == 202, started.text
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        status = api.get(f"{stack.url}/api/v1/inspections/{started.json()['id']}").json()
        if status["status"] in ("finished", "failed"):
            return status
        time.sleep(1)
    pytest.fail(f"inspection {started.json()} did not finish in 3 minutes:\n{stack.logs()}")


def test_a_task_set_uploaded_to_the_stack_is_inspected_and_its_manifest_downloaded(stack, api):
    started = time.monotonic()
    created = upload(stack, api, "compose-set", PLANTED_TASKS, PLANTED_SAMPLES)
    assert (created["task_count"], created["sample_count"]) == (5, 7)

    status = inspect_and_wait(stack, api, "compose-set")
    assert (status["status"], status["percent"]) == ("finished", 100), status

    manifest = api.get(f"{stack.url}/api/v1/tasksets/compose-set/manifest.jsonl")
    assert manifest.status_code == 200, manifest.text
    ids = [json.loads(line)["task_id"] for line in manifest.text.splitlines()]
    assert "planted/clean" in ids
    assert "planted/unsolvable" not in ids and "planted/mislabeled" not in ids
    print(f"upload, inspection and manifest through the stack: {time.monotonic() - started:.0f} s")


def test_sandbox_workers_added_with_scale_take_runs_of_the_next_inspection(stack, api):
    started = time.monotonic()
    stack.compose("up", "-d", "--no-build", "--no-recreate", "--scale", "worker-sandbox=2")
    workers = stack.containers("worker-sandbox")
    assert len(workers) == 2
    hosts = {docker("inspect", "--format", "{{.Config.Hostname}}", w).strip() for w in workers}
    # Both answer a ping through the broker before the inspection starts.
    deadline = time.monotonic() + 90
    while True:
        pinged = stack.compose(
            "exec", "-T", "web", "celery", "-A", "inspector", "inspect", "ping", "--timeout", "3"
        )
        if all(f"sandbox@{h}: OK" in pinged for h in hosts):
            break
        assert time.monotonic() < deadline, f"the sandbox workers {hosts} did not answer:\n{pinged}"
        time.sleep(2)

    # Enough tasks for more messages than one worker's two processes hold at once.
    wide = [
        task(
            f"wide/{i}",
            body=f"    return x + {i}\n",
            test=f"def check(candidate):\n    assert candidate(1) == {i + 1}\n",
        )
        for i in range(12)
    ]
    upload(stack, api, "compose-wide", wide)
    status = inspect_and_wait(stack, api, "compose-wide")
    assert (status["status"], status["percent"]) == ("finished", 100), status

    taken = json.loads(stack.shell(RUN_HOSTS.format(id=status["id"])).strip().splitlines()[-1])
    assert set(taken) == hosts, (taken, hosts)
    assert sum(taken.values()) == status["runs_total"]
    print(f"runs per sandbox worker container {taken}: {time.monotonic() - started:.0f} s")
