"""Beyond one machine, as separate hosts: a server namespace runs its own PostgreSQL, Redis and
RabbitMQ, two worker-host namespaces reach it only over their veth links, and this process (the
root namespace) imports task sets and starts inspections with `manage.py` as a third host would
(tests/hosts.py). Faults between hosts: a worker host's link cut mid-inspection and brought back
after its runs' lease ran out, a whole worker host killed, and the broker restarted. Each
inspection completes with every run recorded once.

These tests make their own services (nothing of the machine's PostgreSQL, Redis or RabbitMQ), so
they run in bin/test's embedded run. They need root, iproute2, bubblewrap and Debian's
postgresql-15, redis-server and rabbitmq-server; a missing one fails with the reason."""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from django.utils import timezone

from inspector.models import Flag, Inspection, Run
from tests import hosts
from tests.builders import PLANTED_FLAGS, PLANTED_SAMPLES, PLANTED_TASKS, jsonl, task
from tests.worker_process import wait_for

# A lease of 4 + 3 s (a run's wall clock and the slack), a sweep every 2 s on each worker; an
# inspection with no run recorded for 7 s has its queued runs sent again.
LEASE_SECONDS = 4 + 3
SETTINGS = {
    "SANDBOX_BACKEND": "local",
    "SECRET_KEY": "test-hosts-not-secret",
    "PYTHONUNBUFFERED": "1",
    "RUN_WALL_SECONDS": "4",
    "RUN_LEASE_SLACK_SECONDS": "3",
    "WORKER_SWEEP_SECONDS": "2",
    "SWEEP_EVERY_SECONDS": "2",
    "INSPECT_REFERENCE_REPEATS": "12",
    "INSPECT_SAMPLE_REPEATS": "2",
    "INSPECT_MUTANTS": "0",
    "INSPECT_BEHAVIOUR": "False",
    "DB_IDLE_IN_TRANSACTION_SECONDS": "3",
}
RUNS_PER_TASK = 12 + 2 * 2 + 4  # references, two samples twice, four probes
DB = "hosts"


@pytest.fixture(scope="module")
def network():
    if os.geteuid() != 0:
        pytest.fail("test hosts are network namespaces: run the tests as root")
    net = hosts.Network().up()
    try:
        net.host("a", "10.77.0.11")
        net.host("b", "10.77.0.12")
        yield net
    finally:
        net.down()


@pytest.fixture(scope="module")
def postgres(network, tmp_path_factory):
    """The server's PostgreSQL, with the platform's database migrated once as a template."""
    pg = hosts.Postgres(network.server_ns)
    try:
        pg.start()
        pg.sql("CREATE DATABASE migrated")
        env = client_env(pg.url("migrated"), "redis://unused", tmp_path_factory.mktemp("migrate"))
        hosts.manage(env, "migrate", "--no-input")
        yield pg
    finally:
        pg.stop()


@pytest.fixture
def database_url(postgres, request, django_db_blocker):
    """A database of the test's own on the server (task sets of other tests would be flagged
    as duplicates), and this process's connection to it (the alias DB)."""
    name = f"inspector_{abs(hash(request.node.nodeid)) % 10**8}"
    postgres.sql(f"CREATE DATABASE {name} TEMPLATE migrated")
    url = postgres.url(name)
    with django_db_blocker.unblock(), hosts.database(DB, url):
        yield url


def serving(server):
    try:
        yield server.start()
    finally:
        server.close()


@pytest.fixture(scope="module")
def redis_server(network):
    yield from serving(hosts.Redis(network.server_ns))


@pytest.fixture(scope="module")
def rabbitmq_server(network):
    yield from serving(hosts.RabbitMQ(network.server_ns))


class Broker:
    def __init__(self, name: str, server) -> None:
        self.name = name
        self.server = server
        self.url = server.url

    def purge(self) -> None:
        """Drop the messages earlier tests left (their runs are in other databases)."""
        import kombu

        with kombu.Connection(self.url) as conn:
            for queue in ("default", "sandbox"):
                with contextlib.suppress(Exception), conn.channel() as channel:
                    channel.queue_purge(queue)

    def restart(self) -> float:
        """Stop and start the broker; returns the seconds it was away."""
        started = time.monotonic()
        self.server.stop()
        self.server.start()
        return time.monotonic() - started


@pytest.fixture
def broker(request) -> Broker:
    name = getattr(request, "param", "redis")
    broker = Broker(name, request.getfixturevalue(f"{name}_server"))
    broker.purge()
    return broker


def client_env(database_url: str, broker_url: str, folder: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "CELERY_BROKER_URL", "INSPECTOR_DATA_DIR")
        and not k.startswith(("RUN_", "INSPECT_", "SANDBOX_", "WORKER_"))
    }
    return {
        **env,
        **SETTINGS,
        "DATABASE_URL": database_url,
        "CELERY_BROKER_URL": broker_url,
        "INSPECTOR_DATA_DIR": str(folder),
    }


class Cluster:
    """Two worker hosts and a client (this process's `manage.py`) on one server."""

    def __init__(self, network, database_url: str, broker: Broker, folder: Path) -> None:
        self.network = network
        self.broker = broker
        self.folder = folder
        self.env = client_env(database_url, broker.url, folder / "client")
        self.workers: list[hosts.WorkerHost] = []

    def start_workers(self) -> tuple[hosts.WorkerHost, hosts.WorkerHost]:
        for name in ("a", "b"):
            worker = hosts.WorkerHost(
                f"{hosts.PREFIX}-{name}", f"worker-{name}", self.env, self.folder / name
            )
            self.workers.append(worker.start())
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(lambda w: w.wait_ready(), self.workers))
        return self.workers[0], self.workers[1]

    def inspect(self, name: str, tasks: list[dict], samples: list[dict]) -> int:
        """Import the set and start its inspection from this host, as a user would."""
        folder = self.folder / "client"
        folder.mkdir(exist_ok=True)
        (folder / f"{name}-tasks.jsonl").write_bytes(jsonl(tasks))
        (folder / f"{name}-samples.jsonl").write_bytes(jsonl(samples))
        hosts.manage(
            self.env,
            "import_tasks",
            str(folder / f"{name}-tasks.jsonl"),
            "--taskset",
            name,
            "--samples",
            str(folder / f"{name}-samples.jsonl"),
        )
        said = hosts.manage(self.env, "inspect", name)
        return int(re.search(r"Inspection #(\d+)", said).group(1))

    def stop(self) -> None:
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(lambda w: w.stop(), self.workers))
        for ns in self.network.hosts:
            self.network.link(ns, up=True)


@pytest.fixture
def cluster(network, database_url, broker, tmp_path):
    c = Cluster(network, database_url, broker, tmp_path)
    try:
        yield c
    finally:
        c.stop()


# --- What a user reads ---------------------------------------------------------------------------


def cheap_set(prefix: str, count: int) -> tuple[list[dict], list[dict]]:
    """`count` tasks whose runs take milliseconds, each with a right and a wrong sample."""
    tasks = [
        task(
            f"{prefix}/{i:03d}",
            body="    return x + 1\n",
            test="def check(candidate):\n    assert candidate(1) == 2\n",
        )
        for i in range(count)
    ]
    samples = [
        s
        for t in tasks
        for s in (
            {"task_id": t["task_id"], "completion": "    return 1 + x\n", "sample_id": "good"},
            {"task_id": t["task_id"], "completion": "    return x\n", "sample_id": "wrong"},
        )
    ]
    return tasks, samples


def inspection(pk: int) -> Inspection:
    current = Inspection.objects.using(DB).get(pk=pk)
    assert current.status != Inspection.FAILED, current.error
    return current


def runs(pk: int):
    return Run.objects.using(DB).filter(inspection_id=pk)


def finished(pk: int) -> bool:
    return inspection(pk).status == Inspection.FINISHED


def held_by(worker: hosts.WorkerHost, pk: int) -> list[int]:
    """The runs a worker host holds: claimed, not recorded."""
    return [
        run_pk
        for run_pk, claim in runs(pk).filter(status=Run.RUNNING).values_list("pk", "worker")
        if worker.claims(claim)
    ]


def runs_per_host(pk: int) -> dict[str, int]:
    return dict(Counter(claim.split(":")[0] for claim in runs(pk).values_list("worker", flat=True)))


def assert_every_run_recorded_once(pk: int) -> None:
    current = inspection(pk)
    assert current.status == Inspection.FINISHED
    assert runs(pk).count() == current.runs_total == current.runs_done
    assert set(runs(pk).values_list("status", flat=True)) == {Run.DONE}
    errors = list(runs(pk).filter(outcome="sandbox_error").values_list("pk", "error")[:5])
    assert not errors, errors


def open_transactions_of(address: str) -> int:
    """Sessions of a host that the server holds open in the middle of a transaction."""
    from django.db import connections

    with connections[DB].cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE client_addr = %s "
            "AND state LIKE 'idle in transaction%%'",
            [address],
        )
        return cursor.fetchone()[0]


def refused(log: str) -> list[int]:
    """The runs whose result a worker's log says it could not record."""
    found = re.findall(r"results? of runs? \[([\d, ]+)\] not recorded", log)
    return [int(n) for group in found for n in group.split(", ")]


# --- The tests -----------------------------------------------------------------------------------


# On Redis only: RabbitMQ carries two hosts' whole inspection in the broker-restart test below
# (this one on RabbitMQ too cost CI 41 s and found nothing that one does not).
@pytest.mark.parametrize("broker", ["redis"], indirect=True)
def test_two_worker_hosts_share_an_inspection_of_two_thousand_runs_and_record_each_once(
    cluster, broker
):
    a, b = cluster.start_workers()
    tasks, samples = cheap_set("shared", 100)
    started = time.monotonic()
    pk = cluster.inspect(
        f"shared-{broker.name}", [*PLANTED_TASKS, *tasks], [*PLANTED_SAMPLES, *samples]
    )
    wait_for(lambda: finished(pk), 200, "the inspection to finish")
    seconds = time.monotonic() - started

    assert_every_run_recorded_once(pk)
    assert runs(pk).count() == 100 * RUNS_PER_TASK + 94
    per_host = runs_per_host(pk)
    print(f"\n{broker.name}: {runs(pk).count()} runs in {seconds:.1f} s, per host {per_host}")
    assert set(per_host) == {a.hostname, b.hostname}, per_host
    flags: dict[str, list[str]] = {}
    for task_id, code in (
        Flag.objects.using(DB)
        .filter(inspection_id=pk, severity__gt=0)
        .values_list("task__task_id", "code")
    ):
        flags.setdefault(task_id, []).append(code)
    assert flags == {k: v for k, v in PLANTED_FLAGS.items() if v}


def fault_while_holding_runs(worker: hosts.WorkerHost, pk: int, fault) -> list[int]:
    """Wait until `worker` holds runs, then apply `fault` to it; returns the runs it held."""
    wait_for(lambda: held_by(worker, pk), 60, f"runs held by {worker.hostname}", step=0.05)
    fault()
    time.sleep(0.5)  # what was under way on the link lands, or is lost
    held = held_by(worker, pk)
    assert held, f"{worker.hostname} held no run any more when the fault came"
    return held


@pytest.mark.parametrize("broker", ["redis"], indirect=True)
def test_a_worker_host_cut_off_has_its_runs_finished_by_the_other_and_its_late_results_refused(
    cluster, network, broker
):
    a, b = cluster.start_workers()
    tasks, samples = cheap_set("cut", 40)
    pk = cluster.inspect("cut", tasks, samples)
    wait_for(lambda: runs(pk).filter(status=Run.DONE).count() > 100, 60, "a hundred runs")

    # A cut may land between a record's first write and its commit: the host's session then
    # sits "idle in transaction" on the server, holding those runs' row locks. Sweeps skip the
    # locked runs, and the server ends the session after DB_IDLE_IN_TRANSACTION_SECONDS (3 s
    # here), so the other host takes them either way.
    cut_at = timezone.now()
    held = fault_while_holding_runs(b, pk, lambda: network.link(b.ns, up=False))
    mid_write = open_transactions_of("10.77.0.12")
    # The link comes back once the other host has taken every run the cut-off one held.
    wait_for(
        lambda: all(
            a.claims(claim)
            for claim in runs(pk).filter(pk__in=held).values_list("worker", flat=True)
        ),
        LEASE_SECONDS + 60,
        "the other host to take the runs of the cut-off one",
    )
    back_at = timezone.now()
    network.link(b.ns, up=True)
    wait_for(lambda: finished(pk), 120, "the inspection to finish")
    late = wait_for(lambda: refused(b.output()), 60, "the cut-off host's late results")

    assert_every_run_recorded_once(pk)
    again = runs(pk).filter(pk__in=held)
    assert set(again.values_list("attempts", flat=True)) == {2}
    assert all(a.claims(claim) for claim in again.values_list("worker", flat=True))
    assert set(late) <= set(held), (late, held)
    recovered = (max(again.values_list("finished_at", flat=True)) - cut_at).total_seconds()
    print(
        f"\nlink cut {(back_at - cut_at).total_seconds():.1f} s; {len(held)} runs held by "
        f"{b.hostname}, the last recorded by {a.hostname} {recovered:.1f} s after the cut; "
        f"{len(late)} late results refused; per host {runs_per_host(pk)}; "
        f"{mid_write} transactions of the host left open by the cut"
    )


@pytest.mark.parametrize("broker", ["redis"], indirect=True)
def test_a_worker_host_killed_whole_loses_nothing_and_doubles_nothing(cluster, broker):
    a, b = cluster.start_workers()
    tasks, samples = cheap_set("killed", 40)
    pk = cluster.inspect("killed", tasks, samples)
    wait_for(lambda: runs(pk).filter(status=Run.DONE).count() > 100, 60, "a hundred runs")

    killed_at = timezone.now()
    held = fault_while_holding_runs(b, pk, b.kill_host)
    wait_for(lambda: finished(pk), LEASE_SECONDS + 120, "the inspection to finish")

    assert_every_run_recorded_once(pk)
    again = runs(pk).filter(pk__in=held)
    assert set(again.values_list("attempts", flat=True)) == {2}
    assert all(a.claims(claim) for claim in again.values_list("worker", flat=True))
    current = inspection(pk)
    print(
        f"\n{len(held)} runs held by the killed host; the last recorded "
        f"{(max(again.values_list('finished_at', flat=True)) - killed_at).total_seconds():.1f} s "
        f"after the kill, the inspection finished "
        f"{(current.finished_at - killed_at).total_seconds():.1f} s after; "
        f"per host {runs_per_host(pk)}"
    )


@pytest.mark.parametrize("broker", ["redis", "rabbitmq"], indirect=True)
def test_an_inspection_across_hosts_completes_with_every_run_once_when_the_broker_restarts(
    cluster, broker
):
    cluster.start_workers()
    tasks, samples = cheap_set(f"restart-{broker.name}", 40)
    pk = cluster.inspect(f"restart-{broker.name}", tasks, samples)
    wait_for(lambda: runs(pk).filter(status=Run.DONE).count() > 200, 60, "two hundred runs")

    restarted_at = timezone.now()
    away = broker.restart()
    wait_for(lambda: finished(pk), 180, "the inspection to finish after the restart")

    assert_every_run_recorded_once(pk)
    current = inspection(pk)
    print(
        f"\n{broker.name} away {away:.1f} s; the inspection finished "
        f"{(current.finished_at - restarted_at).total_seconds():.1f} s after the restart began; "
        f"per host {runs_per_host(pk)}"
    )
