"""Separate hosts on one machine, for tests of what crosses a network: network namespaces made
with `ip netns`, joined by veth pairs to a bridge inside the server namespace.

- the server (`SERVER`, 10.77.0.1 on the bridge) runs its own PostgreSQL cluster, Redis and
  RabbitMQ, listening on that address only: never the machine's services on loopback;
- each worker host has one veth (`eth0`) to the bridge, an address of its own, no default
  route, and a host name of its own (a UTS namespace per worker process);
- the root namespace, where pytest runs, has a veth to the bridge too (`ROOT_ADDRESS`), to
  import task sets, start inspections and read the server's database.

Traffic stays on these links: the root namespace routes 10.77.0.0/16 nowhere but the bridge (an
`unreachable` route, removed at the end), the namespaces have no route out. `Network.down`
removes everything, even after a failure; a run that crashed leaves names that the next run
removes first (under a lock, so two test runs never share the names)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.builders import ROOT

PREFIX = "ih19"
GUARD = "10.77.0.0/16"
SERVER = "10.77.0.1"
ROOT_ADDRESS = "10.77.0.10"
PREFIX_LENGTH = 24
ROOT_VETH = f"{PREFIX}-root"
LOCK = Path(tempfile.gettempdir()) / "inspector-test-hosts.lock"
PG_BIN = Path("/usr/lib/postgresql/15/bin")
RABBITMQ_SERVER = Path("/usr/lib/rabbitmq/bin/rabbitmq-server")
RABBITMQCTL = Path("/usr/lib/rabbitmq/bin/rabbitmqctl")


def sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(argv, capture_output=True, text=True)
    if check and done.returncode:
        raise RuntimeError(f"{' '.join(argv)}: {done.stderr.strip() or done.stdout.strip()}")
    return done


def in_ns(ns: str, *argv: str, check: bool = True) -> subprocess.CompletedProcess:
    return sh("ip", "netns", "exec", ns, *argv, check=check)


def ns_pids(ns: str) -> list[int]:
    done = sh("ip", "netns", "pids", ns, check=False)
    return [int(p) for p in done.stdout.split()] if done.returncode == 0 else []


def kill_all_in(ns: str, timeout: float = 10) -> int:
    """SIGKILL every process of a namespace (again, for those forked meanwhile) until none is
    left; returns how many were killed."""
    killed: set[int] = set()
    deadline = time.monotonic() + timeout
    while pids := ns_pids(ns):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            killed.add(pid)
        if time.monotonic() > deadline:
            raise RuntimeError(f"processes of {ns} would not die: {pids}")
        time.sleep(0.05)
    return len(killed)


def wait_port(address: str, port: int, timeout: float, proc=None, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        try:
            with socket.create_connection((address, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{what} does not listen on {address}:{port} after {timeout:.0f} s")


def tail(path: Path, chars: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return "(no log)"


class Network:
    """The server namespace with its bridge, the root namespace's link to it, and the worker
    hosts added with `host()`."""

    def __init__(self) -> None:
        self.server_ns = f"{PREFIX}-server"
        self.hosts: dict[str, str] = {}  # namespace -> address
        self._lock = None

    def up(self) -> Network:
        self._lock = LOCK.open("w")
        fcntl.flock(self._lock, fcntl.LOCK_EX)
        try:
            self._remove_leftovers()
            self._up()
        except BaseException:
            self.down()
            raise
        return self

    def _up(self) -> None:
        sh("ip", "route", "add", "unreachable", GUARD)
        ns = self.server_ns
        sh("ip", "netns", "add", ns)
        self._tune(ns)
        in_ns(ns, "ip", "link", "add", "br0", "type", "bridge")
        in_ns(ns, "ip", "addr", "add", f"{SERVER}/{PREFIX_LENGTH}", "dev", "br0")
        in_ns(ns, "ip", "link", "set", "br0", "up")
        sh("ip", "link", "add", ROOT_VETH, "type", "veth", "peer", "name", "to-root", "netns", ns)
        in_ns(ns, "ip", "link", "set", "to-root", "master", "br0", "up")
        sh("ip", "addr", "add", f"{ROOT_ADDRESS}/{PREFIX_LENGTH}", "dev", ROOT_VETH)
        sh("ip", "link", "set", ROOT_VETH, "up")
        check_route(SERVER)

    def host(self, name: str, address: str) -> str:
        """A worker host: a namespace whose only link is `eth0` to the server's bridge."""
        ns = f"{PREFIX}-{name}"
        sh("ip", "netns", "add", ns)
        self.hosts[ns] = address
        self._tune(ns)
        sh(
            "ip", "link", "add", "eth0", "netns", ns, "type", "veth",
            "peer", "name", f"to-{name}", "netns", self.server_ns,
        )  # fmt: skip
        in_ns(self.server_ns, "ip", "link", "set", f"to-{name}", "master", "br0", "up")
        in_ns(ns, "ip", "addr", "add", f"{address}/{PREFIX_LENGTH}", "dev", "eth0")
        in_ns(ns, "ip", "link", "set", "eth0", "up")
        return ns

    @staticmethod
    def _tune(ns: str) -> None:
        in_ns(ns, "ip", "link", "set", "lo", "up")
        # A link cut for 15 s: TCP's retransmissions back off to 120 s apart by default, so a
        # host would hear from the server up to a minute after its link came back. 1 s apart
        # keeps the test short; what crosses the link is the same. A connection still gives up
        # after minutes of silence, as by default (15 retransmissions backed off take 15 min;
        # here 255, the most it allows, 1 s apart).
        if Path("/proc/sys/net/ipv4/tcp_rto_max_ms").exists():
            in_ns(ns, "sysctl", "-q", "-w", "net.ipv4.tcp_rto_max_ms=1000")
            in_ns(ns, "sysctl", "-q", "-w", "net.ipv4.tcp_retries2=255")

    def link(self, ns: str, up: bool) -> None:
        """Cut (or restore) a host's only link, from inside the host."""
        in_ns(ns, "ip", "link", "set", "eth0", "up" if up else "down")

    def down(self) -> None:
        problems = []
        for ns in [*self.hosts, self.server_ns]:
            try:
                kill_all_in(ns)
            except RuntimeError as exc:
                problems.append(str(exc))
        for ns in [*self.hosts, self.server_ns]:
            sh("ip", "netns", "del", ns, check=False)
        # The root's end of the link goes with the server namespace, asynchronously.
        deadline = time.monotonic() + 10
        while sh("ip", "link", "show", ROOT_VETH, check=False).returncode == 0:
            if time.monotonic() > deadline:
                sh("ip", "link", "del", ROOT_VETH, check=False)
                break
            time.sleep(0.1)
        sh("ip", "route", "del", "unreachable", GUARD, check=False)
        if self._lock is not None:
            self._lock.close()
            self._lock = None
        if problems:
            raise RuntimeError("; ".join(problems))

    def _remove_leftovers(self) -> None:
        listed = sh("ip", "netns", "list").stdout.split("\n")
        for line in listed:
            ns = line.split(" ")[0]
            if ns.startswith(f"{PREFIX}-"):
                kill_all_in(ns)
                sh("ip", "netns", "del", ns, check=False)
        sh("ip", "link", "del", ROOT_VETH, check=False)
        sh("ip", "route", "del", "unreachable", GUARD, check=False)


def check_route(address: str) -> None:
    """The route to the server goes over the root's veth, nowhere else."""
    route = sh("ip", "route", "get", address).stdout
    if f"dev {ROOT_VETH}" not in route:
        raise RuntimeError(f"the route to {address} is not over {ROOT_VETH}: {route}")


# --- The server's services -----------------------------------------------------------------------


class Postgres:
    """A PostgreSQL cluster of its own (initdb into a temporary folder, trust auth), run as the
    postgres user in the server namespace, on SERVER:5432."""

    def __init__(self, ns: str) -> None:
        self.ns = ns
        self.folder = Path(tempfile.mkdtemp(prefix="inspector-hosts-pg-"))
        self.data = self.folder / "data"
        self.log = self.folder / "postgres.log"
        self.proc: subprocess.Popen | None = None

    def url(self, name: str) -> str:
        return f"postgres://postgres@{SERVER}:5432/{name}"

    def start(self) -> Postgres:
        if not (PG_BIN / "initdb").exists():
            raise RuntimeError(f"no PostgreSQL 15 server in {PG_BIN} (Debian: postgresql-15)")
        shutil.chown(self.folder, "postgres", "postgres")
        if not self.data.exists():
            sh(
                "setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", "--",
                str(PG_BIN / "initdb"), "-D", str(self.data), "--auth=trust", "-U", "postgres",
                "-E", "UTF8", "--no-sync",
            )  # fmt: skip
            with (self.data / "pg_hba.conf").open("a") as fh:
                fh.write(f"host all all 10.77.0.0/{PREFIX_LENGTH} trust\n")
        self.proc = subprocess.Popen(
            [
                "ip", "netns", "exec", self.ns,
                "setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", "--",
                str(PG_BIN / "postgres"), "-D", str(self.data),
                "-c", f"listen_addresses={SERVER}", "-c", f"unix_socket_directories={self.folder}",
                "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
                "-c", "max_connections=200",
            ],
            stdout=self.log.open("ab"),
            stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            wait_port(SERVER, 5432, 30, self.proc, "PostgreSQL")
        except RuntimeError as exc:
            raise RuntimeError(f"{exc}: {tail(self.log)}") from None
        return self

    def sql(self, statement: str) -> str:
        return sh(
            str(PG_BIN / "psql"), "-h", SERVER, "-U", "postgres", "-d", "postgres",
            "-v", "ON_ERROR_STOP=1", "-At", "-c", statement,
        ).stdout  # fmt: skip

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # a fast shutdown
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


class Redis:
    """redis-server in the server namespace on SERVER:6379, keeping nothing: a restart loses
    every message it held."""

    def __init__(self, ns: str) -> None:
        self.ns = ns
        self.folder = Path(tempfile.mkdtemp(prefix="inspector-hosts-redis-"))
        self.log = self.folder / "redis.log"
        self.proc: subprocess.Popen | None = None
        self.url = f"redis://{SERVER}:6379/0"

    def start(self) -> Redis:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed (Debian: redis-server)")
        self.proc = subprocess.Popen(
            [
                "ip", "netns", "exec", self.ns, binary, "--bind", SERVER, "--port", "6379",
                "--save", "", "--appendonly", "no", "--protected-mode", "no",
                "--dir", str(self.folder),
            ],
            stdout=self.log.open("ab"),
            stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            wait_port(SERVER, 6379, 20, self.proc, "redis-server")
        except RuntimeError as exc:
            raise RuntimeError(f"{exc}: {tail(self.log)}") from None
        return self

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=20)

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.folder, ignore_errors=True)


class RabbitMQ:
    """A rabbitmq-server node of its own in the server namespace (its epmd there too), on
    SERVER:5672, its database and logs in a temporary folder; guest may connect from other
    hosts. Its queues and persistent messages survive a restart."""

    NODE = "ih19@localhost"

    def __init__(self, ns: str) -> None:
        self.ns = ns
        self.folder = Path(tempfile.mkdtemp(prefix="inspector-hosts-rabbitmq-"))
        self.log = self.folder / "startup.log"
        self.proc: subprocess.Popen | None = None
        self.url = f"amqp://guest:guest@{SERVER}:5672//"
        (self.folder / "home").mkdir()
        (self.folder / "rabbitmq.conf").write_text(
            f"loopback_users = none\nlisteners.tcp.default = {SERVER}:5672\n"
        )
        (self.folder / "enabled_plugins").write_text("[].\n")
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"),
            "HOME": str(self.folder / "home"),  # its own Erlang cookie
            "RABBITMQ_NODENAME": self.NODE,
            "RABBITMQ_NODE_IP_ADDRESS": SERVER,
            "RABBITMQ_NODE_PORT": "5672",
            "RABBITMQ_DIST_PORT": "25672",
            "RABBITMQ_MNESIA_BASE": str(self.folder / "mnesia"),
            "RABBITMQ_LOG_BASE": str(self.folder / "log"),
            "RABBITMQ_CONFIG_FILE": str(self.folder / "rabbitmq.conf"),
            "RABBITMQ_ADVANCED_CONFIG_FILE": str(self.folder / "advanced.config"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(self.folder / "enabled_plugins"),
        }

    def start(self, timeout: float = 90) -> RabbitMQ:
        if not RABBITMQ_SERVER.exists():
            raise RuntimeError("rabbitmq-server is not installed (Debian: rabbitmq-server)")
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", self.ns, str(RABBITMQ_SERVER)],
            cwd=self.folder,
            env=self.env,
            stdout=self.log.open("ab"),
            stderr=subprocess.STDOUT,
        )
        try:
            wait_port(SERVER, 5672, timeout, self.proc, "rabbitmq-server")
            self._wait_amqp(timeout)
        except RuntimeError as exc:
            logs = "\n".join(tail(p, 1500) for p in [self.log, *self.folder.glob("log/*.log")])
            raise RuntimeError(f"{exc}: {logs}") from None
        return self

    def _wait_amqp(self, timeout: float) -> None:
        import kombu

        deadline = time.monotonic() + timeout
        while True:
            try:
                with kombu.Connection(self.url, connect_timeout=2) as conn:
                    conn.connect()
                    return
            except Exception as exc:  # noqa: BLE001 - still booting
                if time.monotonic() > deadline:
                    raise RuntimeError(f"RabbitMQ does not accept AMQP: {exc}") from None
                time.sleep(0.2)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        subprocess.run(
            ["ip", "netns", "exec", self.ns, str(RABBITMQCTL), "-n", self.NODE, "stop"],
            env=self.env,
            cwd=self.folder,
            capture_output=True,
            timeout=60,
        )
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def close(self) -> None:
        try:
            self.stop()
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)


# --- Worker hosts and the client ---------------------------------------------------------------


class WorkerHost:
    """A Celery worker (both queues, two pool processes) on a worker host, with a host name and
    a data folder of its own; its runs' claims read `<hostname>:<pid>#...`."""

    def __init__(
        self, ns: str, hostname: str, env: dict[str, str], folder: Path, wrap: tuple = ()
    ) -> None:
        self.ns = ns
        self.hostname = hostname
        # A command the host's processes run under (`taskset -c 0`, say), outside its namespace:
        # `ip netns exec` mounts a /sys of the namespace's own, without the cgroup file systems.
        self.wrap = tuple(wrap)
        self.env = {**env, "INSPECTOR_DATA_DIR": str(folder)}
        folder.mkdir(parents=True, exist_ok=True)
        self.log = folder / "worker.log"
        self.proc: subprocess.Popen | None = None

    def start(self) -> WorkerHost:
        self.proc = subprocess.Popen(
            [
                *self.wrap,
                "ip", "netns", "exec", self.ns, "unshare", "--uts", "--",
                "sh", "-c", 'hostname "$0" && exec "$@"', self.hostname,
                sys.executable, "-m", "celery", "-A", "inspector", "worker",
                "-Q", "sandbox,default", "-c", "2", "-n", "w@%h",
                "--loglevel=INFO", "--without-mingle", "--without-gossip",
            ],
            cwd=ROOT,
            env=self.env,
            stdout=self.log.open("ab"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        return self

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_ready(self, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"worker {self.hostname} exited: {tail(self.log)}")
            if f"w@{self.hostname} ready." in self.output():
                return
            time.sleep(0.2)
        raise RuntimeError(f"worker {self.hostname} not ready after {timeout} s: {tail(self.log)}")

    def claims(self, worker: str) -> bool:
        """Whether a run's `worker` field is a claim of this host."""
        return worker.startswith(f"{self.hostname}:")

    def kill_host(self) -> int:
        """SIGKILL every process of the host: the worker, its pool, its sandboxes."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        killed = kill_all_in(self.ns)
        self.proc.wait(timeout=10)
        return killed

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                pass
        if self.proc:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=10)


def manage(env: dict[str, str], *args: str, timeout: float = 300) -> str:
    """`manage.py ARGS` in the root namespace, as a user on a third host would run it."""
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if done.returncode:
        raise RuntimeError(
            f"manage.py {' '.join(args)}: {done.stdout[-2000:]}{done.stderr[-3000:]}"
        )
    return done.stdout


@contextlib.contextmanager
def database(alias: str, url: str):
    """The server's database as a Django connection alias of this process (the test's own
    database stays as it is), for `Model.objects.using(alias)`."""
    import dj_database_url
    from django.db import connections

    configured = connections.configure_settings(
        {"default": {"ENGINE": "django.db.backends.dummy"}, alias: dj_database_url.parse(url)}
    )
    connections.settings[alias] = configured[alias]
    try:
        yield alias
    finally:
        with contextlib.suppress(Exception):
            connections[alias].close()
        with contextlib.suppress(AttributeError):
            del connections[alias]
        connections.settings.pop(alias, None)
