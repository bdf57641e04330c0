"""Faults with real processes: the broker restarting mid-inspection, the web server serving the
queue while an inspection of 2,000 runs goes on, and 50 uploads through the API at once.
(A worker killed with SIGKILL and the sweeper are in test_worker_e2e.py and test_inspection.py.)"""

from __future__ import annotations

import concurrent.futures
import io
import json
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from inspector import services
from inspector.models import ApiToken, Inspection, Run, Task, TaskSet, TaskSetVersion
from tests.builders import PLANTED_SAMPLES, PLANTED_TASKS, ROOT, jsonl, task
from tests.worker_process import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    """A Redis of this test's own on a free loopback port, without persistence: a restart
    loses every message the broker held."""

    def __init__(self, folder: Path) -> None:
        self.port = free_port()
        self.folder = folder
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.fail("redis-server is not installed (Debian: redis-server)")
        self.proc = subprocess.Popen(
            [
                binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.folder),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("redis-server did not start")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=10)


def test_an_inspection_completes_with_every_run_once_when_redis_restarts_midway(
    import_taskset, worker_env, tmp_path
):
    from celery import Celery

    redis = RedisServer(tmp_path)
    redis.start()
    env = {
        **worker_env,
        "CELERY_BROKER_URL": redis.url,
        "RUN_LEASE_SLACK_SECONDS": "2",
        "SWEEP_EVERY_SECONDS": "2",
        "INSPECT_MUTANTS": "0",
        "INSPECT_BEHAVIOUR": "False",
    }
    procs = []
    try:
        for argv in (
            ["worker", "-c", "2", "-n", "redis-fault@%h", "--without-mingle", "--without-gossip"],
            ["beat", "--schedule", str(tmp_path / "beat")],
        ):
            log = (tmp_path / f"{argv[0]}.log").open("ab")
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "celery", "-A", "inspector", *argv, "--loglevel=INFO"],
                    cwd=ROOT,
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )
        tasks = [
            task(
                f"redis/{i}",
                body="    return x + 1\n",
                test="def check(candidate):\n    assert candidate(1) == 2\n",
            )
            for i in range(40)
        ]
        version = import_taskset(name="redis-fault", tasks=tasks, samples=[])
        inspection = services.inspection_start(version=version)
        # The test publishes the preparation on the test's Redis; the worker does the rest
        # there (the runs, their dispatch). An app of its own, never the current one: the rest
        # of the suite keeps its broker.
        publisher = Celery(broker=redis.url, set_as_current=False)
        try:
            publisher.send_task(
                "workers.inspection_prepare",
                args=[inspection.pk],
                queue="default",
                routing_key="default",
                exchange="default",
            )
        finally:
            publisher.close()
        wait_for(lambda: not Inspection.objects.get(pk=inspection.pk).is_preparing, 60, "the runs")
        total = Inspection.objects.get(pk=inspection.pk).runs_total
        wait_for(
            lambda: Run.objects.filter(inspection=inspection, status=Run.DONE).count() > total // 5,
            120,
            "a fifth of the runs",
        )
        redis.stop()  # every queued message is lost with it
        time.sleep(3)
        redis.start()
        done = wait_for(
            lambda: Inspection.objects.get(pk=inspection.pk).status == Inspection.FINISHED,
            240,
            "the inspection to finish after the restart",
        )
        assert done
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
        redis.stop()

    runs = Run.objects.filter(inspection=inspection)
    inspection.refresh_from_db()
    assert runs.count() == total == inspection.runs_done
    assert set(runs.values_list("status", flat=True)) == {Run.DONE}
    # Every run recorded once, and each reference passed: nothing lost, nothing half-done.
    assert runs.filter(kind=Run.REFERENCE).exclude(outcome="passed").count() == 0
    flagged = Task.objects.filter(version=version, severity__gt=0)
    assert not flagged.exists(), [
        (t.task_id, list(t.flags.values_list("code", "explanation"))) for t in flagged
    ]


def get(url: str, cookies: str = "", headers: dict | None = None, timeout: float = 10):
    request = urllib.request.Request(url, headers={"Cookie": cookies, **(headers or {})})
    started = time.monotonic()
    with urllib.request.urlopen(request, timeout=timeout) as response:
        body = response.read()
        return response.status, body, time.monotonic() - started


def test_the_web_server_keeps_serving_the_queue_during_an_inspection_of_2000_runs(
    live_server, import_taskset, start_worker, reviewer, client, settings
):
    settings.INSPECT_REFERENCE_REPEATS = 36
    settings.INSPECT_SAMPLE_REPEATS = 1
    tasks = [
        task(
            f"load/{i:03d}",
            body="    return x + 1\n",
            test="def check(candidate):\n    assert candidate(1) == 2\n",
        )
        for i in range(50)
    ]
    version = import_taskset(name="load", tasks=tasks, samples=[])
    start_worker("load", INSPECT_MUTANTS="0", INSPECT_BEHAVIOUR="False")
    client.force_login(reviewer)
    cookies = "; ".join(f"{k}={v.value}" for k, v in client.cookies.items())

    inspection = services.inspection_start(version=version)  # the worker prepares it
    wait_for(lambda: not Inspection.objects.get(pk=inspection.pk).is_preparing, 60, "the runs")
    inspection.refresh_from_db()
    assert inspection.runs_total == 2_000
    timings = []
    while True:
        current = Inspection.objects.get(pk=inspection.pk)
        status, body, seconds = get(live_server.url + "/queue/", cookies)
        assert status == 200 and b"Review queue" in body
        timings.append(seconds)
        if current.status == Inspection.FINISHED:
            break
        assert current.status != Inspection.FAILED, current.error
        assert len(timings) < 2000, "the inspection did not finish"
        time.sleep(0.2)

    assert len(timings) >= 10, "the inspection ended before the queue was asked often"
    timings.sort()
    p95 = timings[round(0.95 * (len(timings) - 1))]
    print(
        f"\n{len(timings)} queue pages during the inspection: median "
        f"{statistics.median(timings) * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms, "
        f"max {timings[-1] * 1000:.0f} ms"
    )
    assert timings[-1] < 5, "a queue page took more than 5 s during the inspection"
    assert Run.objects.filter(inspection=inspection, status=Run.DONE).count() == 2_000


def multipart(fields: dict[str, str], files: dict[str, tuple[str, bytes]]) -> tuple[bytes, str]:
    boundary = "----inspector-test-boundary"
    out = io.BytesIO()
    for name, value in fields.items():
        out.write(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'.encode())
        out.write(value.encode() + b"\r\n")
    for name, (filename, data) in files.items():
        out.write(
            f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; '
            f'filename="{filename}"\r\nContent-Type: application/octet-stream\r\n\r\n'.encode()
        )
        out.write(data + b"\r\n")
    out.write(f"--{boundary}--\r\n".encode())
    return out.getvalue(), f"multipart/form-data; boundary={boundary}"


def test_fifty_concurrent_api_uploads_each_store_their_set_whole_or_not_at_all(live_server, lead):
    key = ApiToken.issue(user=lead, name="burst")[1]
    good = jsonl(PLANTED_TASKS)
    bad_line = dict(PLANTED_TASKS[0], task_id="broken/2")
    del bad_line["test"]
    bad = jsonl([*PLANTED_TASKS[1:], bad_line])  # a problem on the last line: stored nothing

    def upload(i: int):
        body, content_type = multipart(
            {"name": f"burst-{i:02d}"},
            {
                "tasks_file": ("tasks.jsonl", bad if i % 5 == 4 else good),
                "samples_file": ("samples.jsonl", jsonl(PLANTED_SAMPLES)),
            },
        )
        request = urllib.request.Request(
            live_server.url + "/api/v1/tasksets",
            data=body,
            headers={"Authorization": f"Bearer {key}", "Content-Type": content_type},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=120) as response:
                return i, response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return i, exc.code, json.loads(exc.read() or b"{}")

    with concurrent.futures.ThreadPoolExecutor(max_workers=50) as pool:
        results = list(pool.map(upload, range(50)))

    statuses = {i: status for i, status, _ in results}
    assert [i for i, s in statuses.items() if s == 400] == [i for i in range(50) if i % 5 == 4]
    assert all(s == 201 for i, s in statuses.items() if i % 5 != 4), results
    for i in range(50):
        name = f"burst-{i:02d}"
        if i % 5 == 4:
            assert not TaskSet.objects.filter(name=name, versions__isnull=False).exists()
            continue
        version = TaskSetVersion.objects.get(taskset__name=name)
        assert version.tasks.count() == version.task_count == len(PLANTED_TASKS)
        assert sum(t.samples.count() for t in version.tasks.all()) == len(PLANTED_SAMPLES)
