"""Benchmark: does a second worker host double the runs a second? (issue 19, "Scale")

Hosts as network namespaces (tests/hosts.py): a server namespace runs its own PostgreSQL and
Redis on its bridge address; worker hosts reach it only over their veth links; this process
imports and inspects with `manage.py` from the root namespace, as a third host. Each worker host
is one `celery worker -Q sandbox,default -c 2` with the local sandbox, limited to one CPU:

- `--limit cpuset` (default): the host's whole process tree (worker, pool, sandboxes) pinned to
  a CPU of its own with `taskset` (host a on CPU 0, host b on CPU 1). The server and the client
  are not pinned, so with two hosts they take their share of the hosts' CPUs;
- `--limit quota`: a cgroup v1 `cpu` quota of `--cpus` CPU a host (0.5 by default, so that two
  hosts leave the server a CPU of its own on a 2-core machine).

The same inspection (`--tasks` cheap function tasks, each run `--repeats` times as the reference
with two samples twice and the four probes; no mutants or behaviour programs) is run with one
host, then with two, each on a fresh database; printed: wall seconds from the inspect command to
the finished analysis, runs a second, runs per host, and the ratio of two hosts to one.

Needs root, iproute2, bubblewrap, Debian's postgresql-15 and redis-server. Traffic stays on the
links the script makes. Run: .venv/bin/python bench/hosts_scale.py [--tasks 150] [--limit cpuset]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import psycopg  # noqa: E402

from tests import hosts  # noqa: E402

SETTINGS = {
    "SANDBOX_BACKEND": "local",
    "SECRET_KEY": "bench-hosts-not-secret",
    "PYTHONUNBUFFERED": "1",
    "INSPECT_SAMPLE_REPEATS": "2",
    "INSPECT_MUTANTS": "0",
    "INSPECT_BEHAVIOUR": "False",
}
CPU_CGROUP = Path("/sys/fs/cgroup/cpu")

STATUS = (
    "SELECT status, runs_done, runs_total, error, "
    "extract(epoch FROM finished_at - created_at) FROM inspector_inspection WHERE id = %s"
)
PER_HOST = "SELECT split_part(worker, ':', 1), count(*) FROM inspector_run WHERE inspection_id = %s GROUP BY 1"


def cheap_set(count: int) -> tuple[list[dict], list[dict]]:
    tasks, samples = [], []
    for i in range(count):
        task_id = f"scale/{i:04d}"
        tasks.append(
            {
                "task_id": task_id,
                "prompt": f"def add_one_{i}(x):\n",
                "entry_point": f"add_one_{i}",
                "canonical_solution": "    return x + 1\n",
                "test": f"def check(candidate):\n    assert candidate({i}) == {i + 1}\n",
            }
        )
        samples.append({"task_id": task_id, "completion": "    return 1 + x\n", "sample_id": "ok"})
        samples.append({"task_id": task_id, "completion": "    return x\n", "sample_id": "wrong"})
    return tasks, samples


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def limiter(limit: str, index: int, cpus: float, made: list[Path]) -> tuple[str, ...]:
    """The command a worker host runs under, for its limit of one CPU (or `cpus` of one)."""
    if limit == "cpuset":
        return ("taskset", "-c", str(index % os.cpu_count()))
    if not (CPU_CGROUP / "cpu.cfs_quota_us").exists():
        sys.exit("--limit quota needs cgroup v1's cpu controller at /sys/fs/cgroup/cpu")
    group = CPU_CGROUP / f"{hosts.PREFIX}-scale-{index}"
    group.mkdir(exist_ok=True)
    made.append(group)
    (group / "cpu.cfs_period_us").write_text("100000")
    (group / "cpu.cfs_quota_us").write_text(str(int(cpus * 100000)))
    return ("sh", "-c", 'echo $$ > "$0" && exec "$@"', str(group / "cgroup.procs"))


def one_round(network, pg, redis, hosts_count: int, args, folder: Path, made: list[Path]) -> dict:
    name = f"scale{hosts_count}"
    pg.sql(f"CREATE DATABASE {name} TEMPLATE migrated")
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")},
        **SETTINGS,
        "INSPECT_REFERENCE_REPEATS": str(args.repeats),
        "DATABASE_URL": pg.url(name),
        "CELERY_BROKER_URL": redis.url,
        "INSPECTOR_DATA_DIR": str(folder / name / "client"),
    }
    (folder / name / "client").mkdir(parents=True)
    workers = []
    try:
        for index in range(hosts_count):
            host = "ab"[index]
            worker = hosts.WorkerHost(
                f"{hosts.PREFIX}-{host}",
                f"worker-{host}",
                env,
                folder / name / host,
                wrap=limiter(args.limit, index, args.cpus, made),
            )
            workers.append(worker.start())
        for worker in workers:
            worker.wait_ready()
        tasks, samples = cheap_set(args.tasks)
        write_jsonl(folder / name / "tasks.jsonl", tasks)
        write_jsonl(folder / name / "samples.jsonl", samples)
        hosts.manage(
            env,
            "import_tasks",
            str(folder / name / "tasks.jsonl"),
            "--taskset",
            name,
            "--samples",
            str(folder / name / "samples.jsonl"),
        )
        started = time.monotonic()
        said = hosts.manage(env, "inspect", name)
        pk = re.search(r"Inspection #(\d+)", said).group(1)
        # Polled over the root's own link to the server (a query, not a Django process, which
        # would take CPU from the hosts).
        with psycopg.connect(pg.url(name), autocommit=True) as db:
            while True:
                status, done, total, error, seconds = db.execute(STATUS, [pk]).fetchone()
                if status in ("finished", "failed"):
                    break
                if time.monotonic() - started > args.timeout:
                    sys.exit(f"{hosts_count} host(s): {done}/{total} runs after {args.timeout} s")
                time.sleep(0.2)
            wall = time.monotonic() - started
            per_host = dict(db.execute(PER_HOST, [pk]).fetchall())
        if status != "finished":
            sys.exit(f"{hosts_count} host(s): the inspection failed: {error}")
        return {
            "hosts": hosts_count,
            "wall": wall,
            "seconds": seconds,
            "total": total,
            "per_host": per_host,
        }
    finally:
        for worker in workers:
            worker.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=150)
    parser.add_argument("--repeats", type=int, default=12, help="reference runs a task")
    parser.add_argument("--limit", choices=("cpuset", "quota"), default="cpuset")
    parser.add_argument("--cpus", type=float, default=0.5, help="a host's quota (--limit quota)")
    parser.add_argument("--timeout", type=float, default=900)
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("worker hosts are network namespaces: run as root")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "inspector.settings")
    made: list[Path] = []
    network = hosts.Network().up()
    pg = redis = None
    try:
        network.host("a", "10.77.0.11")
        network.host("b", "10.77.0.12")
        pg = hosts.Postgres(network.server_ns).start()
        redis = hosts.Redis(network.server_ns).start()
        with tempfile.TemporaryDirectory(prefix="bench-hosts-") as tmp:
            folder = Path(tmp)
            pg.sql("CREATE DATABASE migrated")
            migrate_env = {
                **os.environ,
                **SETTINGS,
                "DATABASE_URL": pg.url("migrated"),
                "CELERY_BROKER_URL": redis.url,
                "INSPECTOR_DATA_DIR": str(folder / "migrate"),
            }
            (folder / "migrate").mkdir()
            hosts.manage(migrate_env, "migrate", "--no-input")
            rounds = [one_round(network, pg, redis, n, args, folder, made) for n in (1, 2)]
    finally:
        if redis is not None:
            redis.close()
        if pg is not None:
            pg.stop()
        network.down()
        for group in made:
            with contextlib.suppress(OSError):
                group.rmdir()

    limit = (
        "one CPU each (taskset)"
        if args.limit == "cpuset"
        else f"a cgroup cpu quota of {args.cpus:g} CPU each"
    )
    print(
        f"\nWorker hosts limited to {limit}; {os.cpu_count()} cores; load at the end "
        f"{os.getloadavg()[0]:.1f}"
    )
    print(f"{'hosts':>5} {'runs':>6} {'wall s':>8} {'runs/s':>8} {'db s':>7}  runs per host")
    for r in rounds:
        print(
            f"{r['hosts']:>5} {r['total']:>6} {r['wall']:>8.1f} {r['total'] / r['wall']:>8.1f} "
            f"{r['seconds']:>7.1f}  {r['per_host']}"
        )
    one, two = (r["total"] / r["wall"] for r in rounds)
    print(f"two hosts make {two / one:.2f}x the runs a second of one")


if __name__ == "__main__":
    main()
