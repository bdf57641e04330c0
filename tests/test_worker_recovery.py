"""Recovery that needs no single process, and workers that stop in bounded time, with real
worker (and beat) processes on the embedded defaults (SQLite, the file-system broker, the local
sandbox): the runs of a worker killed with SIGKILL come back through the other worker's own
sweeper, beat stopped; sweepers at once (two beats and a worker, or threads) re-queue and record
each run once; SIGTERM ends a busy worker within a minute, its unstarted runs handed back and
run once elsewhere, and a second SIGTERM ends it at once."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from inspector import selectors, services
from inspector.models import Inspection, Run
from tests.builders import ROOT, task
from tests.worker_process import wait_for
from workers.steps import HARD_EXIT_SECONDS

pytestmark = pytest.mark.django_db(transaction=True)

# A lease of 4 + 3 s (a run's wall clock and the slack); each worker sweeps every 2 s; 3 runs a
# message, so that both workers hold some.
FAST_RECOVERY = {
    "RUN_WALL_SECONDS": "4",
    "RUN_LEASE_SLACK_SECONDS": "3",
    "WORKER_SWEEP_SECONDS": "2",
    "RUNS_PER_MESSAGE": "3",
    "INSPECT_REFERENCE_REPEATS": "2",
    "INSPECT_PROBES": "null",
}
LEASE_SECONDS = 4 + 3


def slow_check(seconds: float) -> str:
    """A check that takes `seconds` to pass (the null probe fails it at once)."""
    return f"import time\n\ndef check(candidate):\n    assert candidate(1) == 2\n    time.sleep({seconds})\n"


def start_inspection(import_taskset, settings, *, tasks: int, check_seconds: float) -> Inspection:
    """`tasks` tasks whose check takes `check_seconds` to pass, each run twice as the reference
    and once as the null probe; its runs made."""
    version = import_taskset(
        name="recovery",
        tasks=[
            task(f"slow/{i}", body="    return x + 1\n", test=slow_check(check_seconds))
            for i in range(tasks)
        ],
        samples=[],
    )
    settings.INSPECT_REFERENCE_REPEATS = 2
    settings.INSPECT_PROBES = ["null"]
    inspection = services.inspection_start(version=version)
    # Prepared here, as a worker would (a worker that took the message first makes the runs,
    # and this call makes none): the tests without a worker work on its runs at once.
    services.inspection_prepare(inspection_id=inspection.pk, worker="test")
    wait_for(lambda: not Inspection.objects.get(pk=inspection.pk).is_preparing, 60, "the runs")
    inspection.refresh_from_db()
    return inspection


def pool_tokens(worker) -> tuple[str, ...]:
    """The prefixes of the claims a worker's pool processes make (host:pid#...)."""
    pid = worker.proc.pid
    with open(f"/proc/{pid}/task/{pid}/children") as fh:
        children = fh.read().split()
    return tuple(f"{socket.gethostname()}:{child}#" for child in children)


def running_under(tokens: tuple[str, ...]) -> list[int]:
    return [
        pk
        for pk, worker in Run.objects.filter(status=Run.RUNNING).values_list("pk", "worker")
        if worker.startswith(tokens)
    ]


def finished(inspection: Inspection) -> bool:
    current = Inspection.objects.get(pk=inspection.pk)
    assert current.status != Inspection.FAILED, current.error
    return current.status == Inspection.FINISHED


def assert_every_run_recorded_once(inspection: Inspection) -> None:
    inspection.refresh_from_db()
    runs = Run.objects.filter(inspection=inspection)
    assert inspection.status == Inspection.FINISHED
    assert runs.count() == inspection.runs_total == inspection.runs_done
    assert set(runs.values_list("kind", "status", "outcome")) == {
        (Run.REFERENCE, Run.DONE, "passed"),
        (Run.PROBE, Run.DONE, "failed"),
    }
    report = list(selectors.report_lines(taskset_name="recovery"))
    assert [line["flags"] for line in report] == [[]] * len(report)


def one_of_two_workers_killed_with_beat_stopped(start_worker, import_taskset, settings) -> None:
    doomed = start_worker("doomed", **FAST_RECOVERY)
    rescuer = start_worker("rescuer", **FAST_RECOVERY)
    inspection = start_inspection(import_taskset, settings, tasks=8, check_seconds=1)
    tokens = pool_tokens(doomed)
    lost = wait_for(lambda: running_under(tokens), 60, "a run of the doomed worker")

    killed = timezone.now()
    doomed.kill()  # SIGKILL to the whole worker; no beat runs anywhere
    lost = running_under(tokens) or lost
    wait_for(lambda: finished(inspection), LEASE_SECONDS + 60, "the inspection to finish")

    assert_every_run_recorded_once(inspection)
    runs = Run.objects.filter(pk__in=lost)
    assert {run.attempts for run in runs} == {2}  # each lost run went back once, ran once more
    assert all(run.worker.startswith(pool_tokens(rescuer)) for run in runs)
    seconds = (max(run.finished_at for run in runs) - killed).total_seconds()
    print(f"\n{len(lost)} lost runs, the last recorded {seconds:.1f} s after the SIGKILL")
    assert seconds < LEASE_SECONDS + 60


def test_with_beat_stopped_the_other_worker_finishes_a_killed_workers_runs_within_the_lease_and_a_minute(  # noqa: E501
    start_worker, import_taskset, settings, purge_broker
):
    assert settings.CELERY_BROKER_URL.startswith("filesystem://")
    one_of_two_workers_killed_with_beat_stopped(start_worker, import_taskset, settings)


@pytest.mark.production
def test_on_redis_the_other_worker_finishes_a_killed_workers_runs_long_before_the_visibility_timeout(
    start_worker, import_taskset, settings, purge_broker
):
    # Redis hands a dead worker's unacknowledged messages back only after its visibility
    # timeout (CELERY_BROKER_TRANSPORT_OPTIONS); the sweep does not wait for it.
    assert settings.CELERY_BROKER_URL.startswith("redis://")
    one_of_two_workers_killed_with_beat_stopped(start_worker, import_taskset, settings)


def requeued_runs(log: str) -> list[int]:
    return [
        int(n) for n in re.findall(r"run (\d+) of inspection \d+: lease expired, re-queued", log)
    ]


def test_two_beats_and_a_workers_own_sweeper_at_once_requeue_and_record_each_lost_run_once(
    start_worker, start_beat, import_taskset, settings, purge_broker
):
    inspection = start_inspection(import_taskset, settings, tasks=6, check_seconds=0)
    # What a worker killed mid-inspection leaves: its runs claimed, their lease run out, and
    # its messages gone with it.
    from inspector.celery import app

    app.control.purge()
    past = timezone.now() - timedelta(seconds=60)
    Inspection.objects.filter(pk=inspection.pk).update(status=Inspection.RUNNING, updated_at=past)
    Run.objects.filter(inspection=inspection).update(
        status=Run.RUNNING, attempts=1, worker="gone:1#dead", lease_expires_at=past
    )
    sweep_often = {**FAST_RECOVERY, "SWEEP_EVERY_SECONDS": "0.5", "WORKER_SWEEP_SECONDS": "0.5"}
    beats = [start_beat("first", **sweep_often), start_beat("by-mistake", **sweep_often)]
    time.sleep(2)  # the beats' sweeps queue up, to be taken by the worker's pool at once
    worker = start_worker("sweeper", **sweep_often)
    wait_for(lambda: finished(inspection), 90, "the inspection to finish")

    assert_every_run_recorded_once(inspection)
    runs = Run.objects.filter(inspection=inspection)
    assert set(runs.values_list("attempts", flat=True)) == {2}
    for beat in beats:
        assert "Sending due task sweep-runs" in beat.output()
    requeued = requeued_runs(worker.output())
    assert sorted(requeued) == sorted(runs.values_list("pk", flat=True))


def test_sweepers_racing_on_the_same_expired_runs_requeue_each_once_and_abandon_each_once(
    import_taskset, settings, purge_broker
):
    inspection = start_inspection(import_taskset, settings, tasks=10, check_seconds=0)
    past = timezone.now() - timedelta(seconds=600)
    Inspection.objects.filter(pk=inspection.pk).update(status=Inspection.RUNNING, updated_at=past)
    runs = Run.objects.filter(inspection=inspection)
    ids = sorted(runs.values_list("pk", flat=True))
    last_attempt = ids[: len(ids) // 3]
    runs.update(status=Run.RUNNING, attempts=1, worker="gone:1#dead", lease_expires_at=past)
    runs.filter(pk__in=last_attempt).update(attempts=settings.RUN_MAX_ATTEMPTS)
    start = threading.Barrier(8)

    def sweep(_):
        start.wait()
        try:
            return services.runs_sweep()
        finally:
            connection.close()

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(sweep, range(8)))

    assert sum(r["requeued"] for r in results) == len(ids) - len(last_attempt)
    assert sum(r["abandoned"] for r in results) == len(last_attempt)
    assert sum(1 for r in results if r["resent"]) <= 1  # the stalled inspection woken once
    inspection.refresh_from_db()
    assert inspection.runs_done == len(last_attempt)
    assert set(runs.filter(pk__in=last_attempt).values_list("status", "outcome")) == {
        (Run.DONE, "sandbox_error")
    }
    assert set(runs.exclude(pk__in=last_attempt).values_list("status", "attempts")) == {
        (Run.QUEUED, 1)
    }


def test_leases_are_on_the_databases_clock_so_hosts_an_hour_apart_take_back_no_run_under_way(
    import_taskset, settings, purge_broker, monkeypatch
):
    """A worker whose clock is an hour slow, swept by a sweeper whose clock is an hour fast:
    on the hosts' own clocks every lease would have run out long ago."""
    inspection = start_inspection(import_taskset, settings, tasks=2, check_seconds=1.5)
    ids = list(Run.objects.filter(inspection=inspection).values_list("pk", flat=True))
    real_now = timezone.now
    worker_thread: list[threading.Thread] = []

    def skewed_now():
        hour = timedelta(hours=1)
        return (
            real_now() - hour if threading.current_thread() in worker_thread else real_now() + hour
        )

    monkeypatch.setattr(timezone, "now", skewed_now)
    worker = threading.Thread(
        target=lambda: (
            services.runs_execute(run_ids=ids, worker="slow-clock:1"),
            connection.close(),
        )
    )
    worker_thread.append(worker)
    worker.start()
    try:
        wait_for(
            lambda: Run.objects.filter(pk__in=ids, status=Run.RUNNING).exists(),
            30,
            "the slow-clock worker to claim the runs",
            step=0.05,
        )
        swept = [services.runs_sweep() for _ in range(3)]
    finally:
        worker.join(timeout=120)
    assert sum(s["requeued"] + s["abandoned"] for s in swept) == 0, swept
    assert set(Run.objects.filter(pk__in=ids).values_list("status", "attempts")) == {(Run.DONE, 1)}


# A worker host cut off between a record's write and its commit: its session sits idle in the
# transaction, holding the run's row lock. The process stops itself there (SIGSTOP), as a host
# that no longer answers.
CUT_OFF_MID_WRITE = """
import os, signal, sys
import django
django.setup()
from inspector.models import Run, runs_transaction
with runs_transaction():
    Run.objects.filter(pk=int(sys.argv[1])).update(worker="cut-off:1#1")
    print("holding", flush=True)
    os.kill(os.getpid(), signal.SIGSTOP)
"""


@pytest.mark.production
def test_a_sweep_takes_the_other_runs_past_a_row_a_cut_off_worker_holds_and_that_one_once_the_server_ends_its_session(  # noqa: E501
    worker_env, import_taskset, settings, purge_broker
):
    inspection = start_inspection(import_taskset, settings, tasks=3, check_seconds=0)
    past = timezone.now() - timedelta(seconds=600)
    runs = Run.objects.filter(inspection=inspection)
    ids = sorted(runs.values_list("pk", flat=True))
    runs.update(status=Run.RUNNING, attempts=1, worker="gone:1#dead", lease_expires_at=past)
    held = ids[0]
    holder = subprocess.Popen(
        [sys.executable, "-c", CUT_OFF_MID_WRITE, str(held)],
        cwd=ROOT,
        env={
            **worker_env,
            "DJANGO_SETTINGS_MODULE": "inspector.settings",
            "DB_IDLE_IN_TRANSACTION_SECONDS": "3",
        },
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "holding"
        started = time.monotonic()
        first = services.runs_sweep()
        assert time.monotonic() - started < 5  # not waiting on the held row
        assert first["requeued"] == len(ids) - 1 and first["locked"] == 1
        assert runs.get(pk=held).status == Run.RUNNING

        # The server ends the silent session after its 3 s; the next sweep takes the run.
        second = wait_for(
            lambda: (swept := services.runs_sweep())["requeued"] and swept,
            timeout=30,
            what="a sweep to take the run whose holder went quiet",
        )
        assert second == {
            "requeued": 1,
            "resent": 0,
            "abandoned": 0,
            "reanalysed": 0,
            "reprepared": 0,
            "redispatched": 0,
            "locked": 0,
        }
        held_run = runs.get(pk=held)
        assert (held_run.status, held_run.worker) == (Run.QUEUED, "gone:1#dead")  # not the write
    finally:
        holder.kill()
        holder.wait()


def test_sigterm_ends_a_busy_worker_within_a_minute_and_what_it_handed_back_runs_once_elsewhere(
    start_worker, import_taskset, settings, purge_broker
):
    # Two messages of 6 runs of about a second each: SIGTERM comes a run or two into them.
    env = {**FAST_RECOVERY, "RUNS_PER_MESSAGE": "6"}
    stopping = start_worker("stopping", **env)
    inspection = start_inspection(import_taskset, settings, tasks=4, check_seconds=1)
    wait_for(
        lambda: Run.objects.filter(inspection=inspection, status=Run.DONE).exists(),
        60,
        "a first run recorded",
    )

    signalled = time.monotonic()
    stopping.proc.send_signal(signal.SIGTERM)
    stopping.proc.wait(timeout=60)
    seconds = time.monotonic() - signalled
    runs = Run.objects.filter(inspection=inspection)
    handed_back = runs.filter(status=Run.QUEUED, attempts=0).count()
    print(f"\nSIGTERM to exit: {seconds:.1f} s; {handed_back} runs handed back unstarted")
    assert seconds < 60
    assert not runs.filter(status=Run.RUNNING).exists()  # nothing left claimed by the dead
    assert handed_back > 0
    assert "handed back" in stopping.output()

    start_worker("successor", **env)
    wait_for(lambda: finished(inspection), 90, "the inspection to finish")
    assert_every_run_recorded_once(inspection)
    assert set(runs.values_list("attempts", flat=True)) == {1}  # no run ran twice


def test_a_second_sigterm_ends_a_stopping_worker_at_once(
    start_worker, import_taskset, settings, purge_broker
):
    # Reference runs of 3 s (the wall clock is 4 s, the lease 7 s), one run a message.
    env = {**FAST_RECOVERY, "RUNS_PER_MESSAGE": "1"}
    stopping = start_worker("stubborn", **env)
    inspection = start_inspection(import_taskset, settings, tasks=1, check_seconds=3)
    tokens = pool_tokens(stopping)
    wait_for(lambda: running_under(tokens), 60, "a run under way")
    time.sleep(1)

    stopping.proc.send_signal(signal.SIGTERM)
    with pytest.raises(subprocess.TimeoutExpired):
        stopping.proc.wait(timeout=0.5)  # the first: its current run (3 s) may finish
    signalled = time.monotonic()
    stopping.proc.send_signal(signal.SIGTERM)
    try:
        stopping.proc.wait(timeout=HARD_EXIT_SECONDS + 15)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the worker did not exit: {stopping.log.read_text()[-3000:]}")
    seconds = time.monotonic() - signalled
    print(f"\nsecond SIGTERM to exit: {seconds:.1f} s")
    # Usually 4-5 s (Celery waits out its 2 s polls of the broker). Twice in CI, both lanes running,
    # it took over 15 s, for a cause not yet found (not reproduced under load alone): until it
    # is, the bound is the worker's last resort, HARD_EXIT_SECONDS into the cold shutdown, and
    # a failure shows the worker's log.
    assert seconds < HARD_EXIT_SECONDS + 5, stopping.log.read_text()[-3000:]
    assert not any(
        os.path.exists(f"/proc/{token.split(':')[1].rstrip('#')}") for token in tokens
    ), "a pool process outlived its worker"

    # The run cut short comes back when its lease runs out, through the next worker's sweeper.
    start_worker("successor", **env)
    wait_for(lambda: finished(inspection), LEASE_SECONDS + 60, "the inspection to finish")
    assert_every_run_recorded_once(inspection)
