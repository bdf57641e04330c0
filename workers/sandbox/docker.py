"""Run untrusted Python in Docker containers of the local engine, started ahead of need.

The isolation unit is one container per sandbox role per session: a `FunctionSession` (the
runs of one Celery message: one task's, or several tasks' when each run names its task) takes
one container for the solution's runner and one for the check's, and removes both when it
closes (or when a run times out; the next run takes fresh ones). The check's container is
created in the solution's network namespace (only `lo`): before either runner says ready they
meet there on an abstract unix socket of a random name and hand over the two pipes that carry
the check's calls straight to the solution's runner (runner._rendezvous), as the local backend's
pipes do; the socket is closed before any run, and nothing else of the two is shared. Within a session every run is a
clean fork of the runner, which kills every other process of its container and empties /tmp,
/dev/shm and the run's work folder between runs. A container is never handed to another
session. `run_python` uses a container of its own per program. `run_verifier` too, from the
verifier's image (`verifier_image_name()`: the sandbox image plus the verifier's libraries at
/opt/verifier, made by bin/build-sandbox-image), started when asked rather than pooled.

Every container: no network (only `lo`), read-only root, a sized tmpfs on /tmp and /work, an
empty read-only one over /sys (no cgroup counter or sysfs time stamp outlives a run where a run
sees it),
uid/gid 65534, no capabilities, no-new-privileges, a pids and a memory limit (swap off), one CPU,
core dumps off, no log driver, only the sandbox environment of local.py (`RUNNER_ENV`: a hash
seed of its own per container; `run_python`'s program gets seed 0), and the hostname `sandbox`. It runs the runner's bootstrap (`BOOTSTRAP`, python -I -c) as pid 1, which
waits on stdin for the program to become: the runner (sessions) or a small init that runs one
program (`run_python`). Pid 1 of a pid namespace gets no signal from inside it unless it has a
handler, so the command resets Python's SIGINT handler first: nothing in the container can
signal the runner, and kill(-1) from it ends every other process of the container.

The worker talks to pid 1 through the engine's attach stream (attached before the start, so no
output is lost): stdin carries frames to the runner; stdout and stderr come back multiplexed in
8-byte-header frames, stdout feeding the JSON-frame reader and stderr a diagnostics tail.

A warm pool per process keeps `pool_size` containers started per set of container limits, so a
run never waits for a container to start; a background thread refills it. Containers are named
`inspector-sbx-<host>-<pid>-<n>` and labelled with their worker (`inspector.worker=<host>:<pid>`,
plus that process's start time and pid namespace), so `sweep()` can remove those of workers that
are gone, and only those: several worker processes on one machine leave each other alone. A
container's stdin closes with its worker's connection, so the runner and the idle bootstrap of a
dead worker's containers exit by themselves; sweep() removes what is left. `close()` (and, at
interpreter exit, an atexit hook) removes every container of this process.
"""

from __future__ import annotations

import atexit
import hashlib
import itertools
import logging
import os
import re
import secrets
import selectors
import signal
import socket
import struct
import threading
import time
import weakref
from collections import OrderedDict, deque
from dataclasses import dataclass, field

import docker
from docker.errors import DockerException, ImageNotFound, NotFound
from docker.types import LogConfig, Ulimit

from workers.sandbox import seccomp
from workers.sandbox.base import (
    Execution,
    Limits,
    Outcome,
    RawRun,
    SandboxUnavailable,
    classify,
)
from workers.sandbox.local import RUNNER_ENV, VERIFIER_MOUNT
from workers.sandbox.owners import OwnerLabels
from workers.sandbox.runner import BOOTSTRAP
from workers.sandbox.session import (
    RUNNER_PAYLOAD,
    ChannelClosed,
    FramedChannel,
    FunctionSession,
    FunctionTask,
    bootstrap_payload,
    length_prefixed,
)

logger = logging.getLogger(__name__)

DEFAULT_IMAGE = "inspector-sandbox:bookworm"
VERIFIER_REQUIREMENTS = os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
    "requirements-verifier.txt",
)
VERIFIER_BASE_LABEL = "inspector.verifier.base"  # the id of the image it was made from
DEFAULT_POOL_SIZE = 2
LABEL = "inspector.sandbox"
WORKER_LABEL = "inspector.worker"  # "<host>:<pid>"
STARTED_LABEL = "inspector.worker.started"  # the worker's start time (/proc/<pid>/stat field 22)
PIDNS_LABEL = "inspector.worker.pidns"  # the worker's pid namespace (inode of /proc/self/ns/pid)
OWNERS = OwnerLabels(LABEL, WORKER_LABEL, STARTED_LABEL, PIDNS_LABEL)
NAME_PREFIX = "inspector-sbx-"
UID = "65534:65534"
WORK = "/work"
HOSTNAME = "sandbox"
ERROR_TAIL = 2000  # bytes of a runner's stderr kept for diagnostics
SEND_TIMEOUT = 60.0  # a runner that stops reading its stdin for this long is taken as gone
API_TIMEOUT = 60
MAX_POOL_KEYS = 4  # sets of container limits kept warm at once (least recently used dropped)
_CHUNK = 1 << 16
_INIT_NAME = "sandbox-init"  # prefixes the run_python init's own error messages
_STDOUT, _STDERR = 1, 2
# How run_python runs a program (`python -I main.py` in /work: _RUN_INIT), which
# FunctionSession.run_program does alike: there its code runs two levels deeper, and its
# recursion limit is two higher (runner.program_main).
ONE_OFF = {"main_depth": 2, "main_file": WORK + "/main.py"}

# Python installs a SIGINT handler, and pid 1 of a namespace does get the signals it handles:
# without this line any process of the container could end the runner with SIGINT.
_NO_SIGINT = "import signal; signal.signal(signal.SIGINT, signal.SIG_DFL); del signal\n"

# What run_python sends instead of the runner (run by BOOTSTRAP, whose `_read` it uses): pid 1
# writes the program to /work/main.py, runs `python -I main.py` as its child (stdin /dev/null,
# RLIMIT_AS like the local backend and the runner's children), reaps whatever the program
# leaves, and exits with the program's status, 128+N for a program killed by signal N.
_RUN_INIT = """import ctypes, os, resource, signal, struct
ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE: the program cannot reach pid 1
_program = _read(struct.unpack(">I", _read(4))[0])
with open("main.py", "wb") as _fh:
    _fh.write(_program)
del _program
_pid = os.fork()
if _pid == 0:
    try:
        _null = os.open("/dev/null", os.O_RDONLY)
        os.dup2(_null, 0)
        os.close(_null)
        resource.setrlimit(resource.RLIMIT_AS, (%(memory)d, %(memory)d))
        os.environ["PYTHONHASHSEED"] = "0"  # one-off programs compare across runs
        os.execv(%(python)r, [%(python)r, "-I", "main.py"])
    except BaseException as exc:
        os.write(2, ("%(name)s: cannot run %(python)s: %%s\\n" %% exc).encode())
    os._exit(127)
while True:
    _reaped, _status = os.wait()
    if _reaped == _pid:
        break
try:
    os.kill(-1, signal.SIGKILL)
except ProcessLookupError:
    pass
while True:
    try:
        os.wait()
    except ChildProcessError:
        break
_code = os.waitstatus_to_exitcode(_status)
os._exit(_code if _code >= 0 else 128 - _code)
"""


def verifier_image_name(image: str, requirements: str = VERIFIER_REQUIREMENTS) -> str:
    """The verifier's image for a sandbox image, as bin/build-sandbox-image tags it:
    <repository>:<tag>-verifier-<first 12 hex of sha256(requirements-verifier.txt)>."""
    with open(requirements, "rb") as fh:
        digest = hashlib.sha256(fh.read()).hexdigest()[:12]
    repository, _, tag = image.rpartition(":")
    if not repository or "/" in tag:
        repository, tag = image, "latest"
    return f"{repository}:{tag}-verifier-{digest}"


@dataclass(frozen=True)
class _Key:
    """What a container's configuration takes from Limits: containers are pooled per key."""

    memory_bytes: int
    max_processes: int
    file_bytes: int
    # A session's pair: a solution's container and a check's container in its network
    # namespace, started and pooled together (see _create_entry).
    pair: bool = False

    @classmethod
    def of(cls, limits: Limits, *, pair: bool = False) -> _Key:
        return cls(limits.memory_bytes, limits.max_processes, limits.file_bytes, pair)


class _Demux:
    """The engine's multiplexed attach stream: 8-byte headers (stream type, 3 zero bytes,
    big-endian length) each followed by that many bytes of the stream."""

    def __init__(self) -> None:
        self._header = bytearray()
        self._kind = 0
        self._left = 0

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        pieces: list[tuple[int, bytes]] = []
        view = memoryview(data)
        while view:
            if self._left:
                take = view[: self._left]
                pieces.append((self._kind, bytes(take)))
                self._left -= len(take)
                view = view[len(take) :]
                continue
            need = 8 - len(self._header)
            self._header += view[:need]
            view = view[need:]
            if len(self._header) == 8:
                self._kind = self._header[0]
                (self._left,) = struct.unpack(">I", self._header[4:8])
                self._header.clear()
        return pieces


@dataclass(eq=False)
class _Box:
    """One created, attached and started container, waiting for its program on stdin."""

    id: str
    name: str
    key: _Key
    stream: object  # what docker-py returned: keeps the HTTP response (and its socket) alive
    sock: socket.socket
    demux: _Demux = field(default_factory=_Demux)
    created: float = field(default_factory=time.monotonic)
    closed: bool = False

    def healthy(self) -> bool:
        """Still waiting for its program: the bootstrap writes nothing until then, so anything
        to read (its end of stream, an error) means it is gone."""
        if self.closed:
            return False
        try:
            return not selectors_ready(self.sock, 0)
        except (OSError, ValueError):
            return False

    def send(self, data: bytes) -> None:
        try:
            self.sock.sendall(data)
        except (OSError, ValueError) as exc:
            raise ChannelClosed(f"cannot write to the container: {exc}") from None

    def read(self, deadline: float) -> list[tuple[int, bytes]] | None:
        """The next pieces of output (stream type, bytes), or None at the end of the stream;
        TimeoutError at the deadline."""
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            if not selectors_ready(self.sock, remaining):
                continue
            try:
                chunk = self.sock.recv(_CHUNK)
            except (TimeoutError, BlockingIOError, InterruptedError):
                continue
            except OSError:
                return None
            if not chunk:
                return None
            pieces = self.demux.feed(chunk)
            if pieces:
                return pieces

    def close_stream(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        response = getattr(self.stream, "_response", None)
        for closable in (response, self.stream, self.sock):
            try:
                closable.close()  # type: ignore[union-attr]
            except Exception:  # noqa: BLE001, S110 (already closed through another of them)
                pass


def selectors_ready(sock: socket.socket, timeout: float) -> bool:
    pending = getattr(sock, "pending", None)  # TLS: bytes already decrypted are not selectable
    if pending is not None and pending():
        return True
    with selectors.DefaultSelector() as selector:
        selector.register(sock, selectors.EVENT_READ)
        return bool(selector.select(timeout))


class DockerChannel(FramedChannel):
    """A runner reached through a container's attach stream (session.Channel)."""

    def __init__(self, sandbox: DockerSandbox, box: _Box) -> None:
        super().__init__()
        self._sandbox = sandbox
        self._box = box
        self.container_id = box.id
        self.container_name = box.name
        self.init_extra = {"pid_namespace": True, "work": WORK}
        self._errors = bytearray()
        self._ended = False
        self._closed = False
        self._why = ""

    def send_raw(self, data: bytes) -> None:
        if self._closed:
            raise ChannelClosed("the channel is closed")
        self._box.send(data)

    def _read_more(self, deadline: float) -> None:
        if self._closed or self._ended:
            raise ChannelClosed("the runner's output ended")
        pieces = self._box.read(deadline)
        if pieces is None:
            self._ended = True
            raise ChannelClosed("the runner's output ended")
        for kind, data in pieces:
            if kind == _STDOUT:
                self._frames.feed(data)
            else:
                self._errors += data
                del self._errors[:-ERROR_TAIL]

    def diagnostics(self) -> str:
        if self._closed:
            return self._why
        text = self._errors.decode("utf-8", errors="replace").strip()
        return f"runner stderr: {text}" if text else ""

    def close(self) -> None:
        if self._closed:
            return
        why = self.diagnostics()
        state = self._sandbox._destroy(self._box, inspect=self._ended)
        self._closed = True
        self._why = "; ".join(part for part in (why, state) if part)


class DockerSandbox:
    """Containers of the local Docker engine (see the module docstring)."""

    name = "docker"
    pid_namespace = True

    def __init__(
        self,
        *,
        image: str | None = None,
        pool_size: int | None = None,
        python: str = "/usr/bin/python3",
    ) -> None:
        self.image = image or os.environ.get("SANDBOX_IMAGE") or DEFAULT_IMAGE
        if pool_size is None:
            pool_size = int(os.environ.get("SANDBOX_POOL_SIZE") or DEFAULT_POOL_SIZE)
        self.pool_size = max(0, pool_size)
        self.python = python
        self.verifier_image = os.environ.get("SANDBOX_VERIFIER_IMAGE") or ""
        self._verifier_checked = ""
        self._host = socket.gethostname()
        self._init_process()
        self._api = self._connect()
        self._check_image()
        _instances.add(self)
        self.warm(Limits())

    # --- Set-up --------------------------------------------------------------------------------

    def _init_process(self) -> None:
        """What belongs to this process (again in a forked child: nothing is shared)."""
        self._pid = os.getpid()
        self._labels = OWNERS.for_process(self._pid)
        self._counter = itertools.count(1)
        self._cond = threading.Condition()
        self._pools: dict[_Key, deque[tuple[_Box, ...]]] = {}  # see _create_entry
        self._creating: dict[_Key, int] = {}
        self._wanted: OrderedDict[_Key, None] = OrderedDict()
        self._live: dict[str, _Box] = {}  # every container this process has and has not removed
        self._in_use: set[str] = set()
        self._thread: threading.Thread | None = None
        self._closing = False
        self._bg_api = None

    def _connect(self):
        where = os.environ.get("DOCKER_HOST") or "the default socket (unix:///var/run/docker.sock)"
        try:
            client = docker.from_env(timeout=API_TIMEOUT)
            client.api.ping()
        except (DockerException, OSError) as exc:
            raise SandboxUnavailable(
                f"the Docker engine does not answer at {where}: {exc}; run bin/docker-up "
                "(it installs and starts the engine and builds the sandbox image), or set "
                "DOCKER_HOST to an engine that runs"
            ) from None
        return client.api

    def _check_image(self) -> None:
        try:
            self._api.inspect_image(self.image)
        except ImageNotFound:
            raise SandboxUnavailable(
                f"the sandbox image {self.image!r} is not on this engine (it is never pulled): "
                "run bin/docker-up (or bin/build-sandbox-image) to build it, or set "
                "SANDBOX_IMAGE to an image that is there"
            ) from None
        except (DockerException, OSError) as exc:
            raise SandboxUnavailable(f"cannot inspect the image {self.image!r}: {exc}") from None

    def _host_config(self, api, key: _Key, network_of: str = "") -> dict:
        return api.create_host_config(
            # A session's check container joins its solution container's namespace, which
            # has only `lo` (see _create_entry).
            network_mode=f"container:{network_of}" if network_of else "none",
            read_only=True,
            tmpfs={
                "/tmp": f"size={key.file_bytes},mode=1777",
                WORK: f"size={key.file_bytes},mode=0700,uid=65534,gid=65534",
                # An empty, read-only folder in place of the container's /sys, as the local
                # backend has none: its cgroup files (memory peak, CPU time, page faults) and
                # the times sysfs stamps on an entry at its first lookup outlive every run of a
                # session, so a run could leave a number there for the next (outside attacks,
                # 2026-12-05). The limits hold from outside.
                "/sys": "ro,size=4k,mode=0555",
            },
            cap_drop=["ALL"],
            # The same system-call filter as the local backend's (seccomp.py), instead of the
            # engine's default profile, which lets ptrace and process_vm_readv through.
            security_opt=["no-new-privileges", seccomp.docker_security_opt()],
            pids_limit=key.max_processes,
            mem_limit=key.memory_bytes,
            memswap_limit=key.memory_bytes,
            nano_cpus=1_000_000_000,
            log_config=LogConfig(type=LogConfig.types.NONE),
            ulimits=[
                Ulimit(name="core", soft=0, hard=0),
                Ulimit(name="fsize", soft=key.file_bytes, hard=key.file_bytes),
            ],
            ipc_mode="private",
        )

    def _create_entry(self, key: _Key, api=None) -> tuple[_Box, ...]:
        """What the pool keeps for a key: one container, or for a session's pair the solution's
        container and then the check's, which joins the solution's network namespace (only
        `lo`; the engine refuses a hostname there). Sharing it lets the two runners meet on an
        abstract unix socket before their first run and hand over the pipes the check's calls
        go through (runner._rendezvous), as the local backend's pipes do, instead of each call
        crossing the engine's attach streams four times. Nothing else is shared: each has its
        own pid, IPC, mount and UTS namespaces, file systems and limits."""
        first = self._create(key, api)
        if not key.pair:
            return (first,)
        try:
            second = self._create(key, api, network_of=first.id)
        except BaseException:
            self._destroy(first, api=api)
            raise
        return (first, second)

    def _create(
        self,
        key: _Key,
        api=None,
        *,
        image: str = "",
        environment: dict | None = None,
        network_of: str = "",
    ) -> _Box:
        """Create, attach and start one container (about 0.25 s, mostly the start)."""
        api = api or self._api
        host = re.sub(r"[^a-zA-Z0-9_.-]", "-", self._host)
        for _ in range(5):
            name = f"{NAME_PREFIX}{host}-{self._pid}-{next(self._counter)}"
            try:
                created = api.create_container(
                    image or self.image,
                    [self.python, "-I", "-c", _NO_SIGINT + BOOTSTRAP],
                    name=name,
                    hostname=None if network_of else HOSTNAME,
                    user=UID,
                    environment=dict(environment or RUNNER_ENV),
                    working_dir=WORK,
                    stdin_open=True,  # with detach=False: StdinOnce, stdin ends with our stream
                    labels=dict(self._labels),
                    host_config=self._host_config(api, key, network_of),
                )
                break
            except docker.errors.APIError as exc:
                if exc.status_code != 409:  # 409: a dead worker's container has this name
                    raise
        else:
            raise ChannelClosed("no free container name")
        cid = created["Id"]
        try:
            stream = api.attach_socket(
                cid, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
            )
            sock = getattr(stream, "_sock", stream)
            if not isinstance(sock, socket.socket):
                raise SandboxUnavailable(
                    f"the Docker backend needs a unix or tcp DOCKER_HOST, not {api.base_url}"
                )
            sock.settimeout(SEND_TIMEOUT)
            box = _Box(cid, name, key, stream, sock)
            with self._cond:
                self._live[cid] = box
            api.start(cid)
        except BaseException:
            with self._cond:
                self._live.pop(cid, None)
            try:
                api.remove_container(cid, force=True)
            except (DockerException, OSError):
                logger.warning("could not remove container %s after a failed start", name)
            raise
        return box

    # --- The pool ------------------------------------------------------------------------------

    def warm(self, limits: Limits, *, pair: bool = True) -> None:
        """Keep `pool_size` sessions' pairs of containers (with `pair=False`: single
        containers, for run_python) started for these limits (also done on first use)."""
        if self.pool_size <= 0:
            return
        self._after_fork_check()
        with self._cond:
            dropped = self._want(_Key.of(limits, pair=pair))
        for entry in dropped:
            for box in entry:
                self._destroy(box)

    def _want(self, key: _Key) -> list[tuple[_Box, ...]]:
        """Mark a key as in use (caller holds the lock); returns the pool entries of dropped
        keys."""
        dropped: list[tuple[_Box, ...]] = []
        self._wanted[key] = None
        self._wanted.move_to_end(key, last=False)
        while len(self._wanted) > MAX_POOL_KEYS:
            old, _ = self._wanted.popitem()
            dropped.extend(self._pools.pop(old, ()))
        self._closing = False
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(
                target=self._refill, name="docker-sandbox-pool", daemon=True
            )
            self._thread.start()
        self._cond.notify_all()
        return dropped

    def _take(self, limits: Limits) -> _Box:
        (box,) = self._take_entry(_Key.of(limits))
        return box

    def _take_entry(self, key: _Key) -> tuple[_Box, ...]:
        """A started pool entry for the key (see _create_entry), created now if none waits."""
        stale: list[tuple[_Box, ...]] = []
        entry = None
        self._after_fork_check()
        with self._cond:
            if self.pool_size > 0:
                stale = self._want(key)
                pool = self._pools.get(key, deque())
                while pool:
                    candidate = pool.popleft()
                    if all(box.healthy() for box in candidate):
                        entry = candidate
                        break
                    stale.append(candidate)
            if entry is not None:
                self._in_use.update(box.id for box in entry)
        for old in stale:
            for box in old:
                self._destroy(box)
        if entry is None:
            entry = self._create_entry(key)
            with self._cond:
                self._in_use.update(box.id for box in entry)
        return entry

    def _refill(self) -> None:
        """The pool's thread: keeps every wanted key at pool_size started containers."""
        api = None
        failures = 0
        try:
            api = docker.from_env(timeout=API_TIMEOUT).api  # a client of its own for this thread
            sweep(api=api)
        except (DockerException, OSError, SandboxUnavailable):
            logger.exception("docker sandbox pool: cannot reach the engine")
        while True:
            with self._cond:
                key = None
                while not self._closing:
                    key = next(
                        (
                            k
                            for k in self._wanted
                            if len(self._pools.get(k, ())) + self._creating.get(k, 0)
                            < self.pool_size
                        ),
                        None,
                    )
                    if key is not None:
                        break
                    self._cond.wait()
                if self._closing or key is None:
                    return
                self._creating[key] = self._creating.get(key, 0) + 1
            entry = None
            try:
                if api is None:
                    api = docker.from_env(timeout=API_TIMEOUT).api
                entry = self._create_entry(key, api)
                failures = 0
            except Exception:  # noqa: BLE001 (the thread must go on; the next take creates cold)
                failures += 1
                logger.exception("docker sandbox pool: cannot start a container")
            with self._cond:
                self._creating[key] -= 1
                if entry is not None and not self._closing and key in self._wanted:
                    self._pools.setdefault(key, deque()).append(entry)
                    entry = None
                self._cond.notify_all()
                if failures:
                    self._cond.wait(min(30.0, 0.5 * 2**failures))  # back off; close() wakes it
            for box in entry or ():
                self._destroy(box, api=api)

    def wait_warm(
        self, limits: Limits | None = None, timeout: float = 30.0, *, pair: bool = True
    ) -> bool:
        """Wait until the pool for these limits (sessions' pairs, or with `pair=False` single
        containers) is full (for tests and benchmarks)."""
        key = _Key.of(limits or Limits(), pair=pair)
        deadline = time.monotonic() + timeout
        self._after_fork_check()
        with self._cond:
            while len(self._pools.get(key, ())) < self.pool_size:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
        return True

    def containers(self) -> dict[str, str]:
        """This process's containers: id -> "pool" or "in use"."""
        self._after_fork_check()
        with self._cond:
            return {cid: "in use" if cid in self._in_use else "pool" for cid in self._live}

    def _destroy(self, box: _Box, *, inspect: bool = False, api=None) -> str:
        """Kill and remove a container, always; with `inspect`, say how it ended first."""
        api = api or self._api
        state = ""
        if inspect:
            try:
                info = api.inspect_container(box.id)["State"]
                state = f"container exit status {info.get('ExitCode')}" + (
                    ", killed by the kernel's OOM killer" if info.get("OOMKilled") else ""
                )
            except (DockerException, OSError):
                pass
        # Stream first: the engine does not finish a container whose output it cannot deliver
        # (a run cut at the output cap), and the removal would wait for it.
        box.close_stream()
        try:
            api.remove_container(box.id, force=True)
        except NotFound:
            pass
        except (DockerException, OSError) as exc:
            logger.warning("could not remove sandbox container %s: %s", box.name, exc)
        finally:
            with self._cond:
                self._live.pop(box.id, None)
                self._in_use.discard(box.id)
        return state

    def close(self) -> None:
        """Remove every container of this process (pooled and in use); the sandbox stays
        usable and starts a new pool on its next use."""
        if self._pid != os.getpid():
            return  # inherited through fork: those containers are the parent's
        with self._cond:
            self._closing = True
            self._wanted.clear()
            self._cond.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=API_TIMEOUT)
        with self._cond:
            boxes = list(self._live.values())
            self._pools.clear()
            self._thread = None
        for box in boxes:
            self._destroy(box)

    def _after_fork_check(self) -> None:
        if self._pid != os.getpid():
            self._forget_after_fork()

    def _forget_after_fork(self) -> None:
        # The parent's containers, connections and lock are the parent's: forget them without
        # closing anything (a shutdown would end the parent's streams too).
        self._init_process()
        self._api = docker.from_env(timeout=API_TIMEOUT).api

    # --- Sessions ------------------------------------------------------------------------------

    def session(self, task: FunctionTask | None = None, *, limits: Limits) -> FunctionSession:
        """A solution container and a check container, a clean fork per run; both are removed
        when the session closes or a run times out."""
        return FunctionSession(self._open_pair, task, limits, one_off=ONE_OFF)

    def _open_pair(self, limits: Limits) -> tuple[DockerChannel, DockerChannel]:
        """A session's two containers (see _create_entry), each runner told the name of the
        socket on which they meet (runner._rendezvous): random, so no other pair's runner,
        nor anything that could have run before, knows it."""
        try:
            boxes = self._take_entry(_Key.of(limits, pair=True))
        except ChannelClosed:
            raise
        except (DockerException, OSError, SandboxUnavailable) as exc:
            raise ChannelClosed(f"cannot start a container: {exc}") from None
        rendezvous = {"name": f"inspector-peer-{secrets.token_hex(16)}"}
        channels = [DockerChannel(self, box) for box in boxes]
        try:
            for channel in channels:
                channel.init_extra["rendezvous"] = rendezvous
                channel.send_raw(RUNNER_PAYLOAD)
        except BaseException:
            for channel in channels:
                channel.close()
            raise
        solution, check = channels
        return solution, check

    # --- One program ---------------------------------------------------------------------------

    def run_python(self, program: str, *, limits: Limits) -> Execution:
        """One program in a container of its own (from the pool), as `python -I main.py` in
        /work; the worker enforces the wall-clock limit and the output cap."""
        start = time.monotonic()
        try:
            box = self._take(limits)
        except (DockerException, OSError, SandboxUnavailable, ChannelClosed) as exc:
            run = RawRun(None, time.monotonic() - start, b"", b"", error=f"docker: {exc}")
            return classify(run, limits)
        try:
            return self._run_in(box, program, limits)
        except (DockerException, OSError, ChannelClosed) as exc:
            run = RawRun(None, time.monotonic() - start, b"", b"", error=f"docker: {exc}")
            return classify(run, limits)
        finally:
            self._destroy(box)

    def run_verifier(self, program: str, *, limits: Limits) -> Execution:
        """A verifier program (workers/sandbox/verifier.py) like run_python, in a container of
        the verifier's image (its libraries at /opt/verifier), created for it."""
        start = time.monotonic()
        try:
            image = self._verifier_ready()
            box = self._create(
                _Key.of(limits),
                image=image,
                environment={**RUNNER_ENV, "VERIFIER_LIB": VERIFIER_MOUNT},
            )
        except (DockerException, OSError, SandboxUnavailable, ChannelClosed) as exc:
            run = RawRun(None, time.monotonic() - start, b"", b"", error=f"docker: {exc}")
            return classify(run, limits)
        with self._cond:
            self._in_use.add(box.id)
        try:
            return self._run_in(box, program, limits)
        except (DockerException, OSError, ChannelClosed) as exc:
            run = RawRun(None, time.monotonic() - start, b"", b"", error=f"docker: {exc}")
            return classify(run, limits)
        finally:
            self._destroy(box)

    def _verifier_ready(self) -> str:
        """The verifier's image, once checked to be there and made from this sandbox image."""
        self._after_fork_check()
        image = self.verifier_image or verifier_image_name(self.image)
        if self._verifier_checked == image:
            return image
        rebuild = "run bin/build-sandbox-image (bin/docker-up) to make it"
        try:
            labels = self._api.inspect_image(image)["Config"].get("Labels") or {}
            base = self._api.inspect_image(self.image)["Id"]
        except ImageNotFound:
            raise SandboxUnavailable(
                f"the verifier image {image!r} is not there: {rebuild}"
            ) from None
        except (DockerException, OSError) as exc:
            raise SandboxUnavailable(f"cannot inspect the image {image!r}: {exc}") from None
        if labels.get(VERIFIER_BASE_LABEL) != base and not self.verifier_image:
            raise SandboxUnavailable(
                f"the verifier image {image!r} was made from another {self.image!r}: {rebuild}"
            )
        self._verifier_checked = image
        return image

    def _run_in(self, box: _Box, program: str, limits: Limits) -> Execution:
        init = _RUN_INIT % {
            "memory": limits.memory_bytes,
            "python": self.python,
            "name": _INIT_NAME,
        }
        start = time.monotonic()
        deadline = start + limits.wall_seconds
        box.send(
            bootstrap_payload(init.encode())
            + length_prefixed(program.encode("utf-8", errors="surrogatepass"))
        )
        tails = {_STDOUT: bytearray(), _STDERR: bytearray()}
        total, killed_for = 0, ""
        while not killed_for:
            try:
                pieces = box.read(deadline)
            except TimeoutError:
                killed_for = "timeout"
                break
            if pieces is None:
                break
            for kind, data in pieces:
                total += len(data)
                tail = tails[_STDOUT if kind == _STDOUT else _STDERR]
                tail += data
                del tail[: -limits.tail_bytes]
                if total > limits.output_bytes:
                    killed_for = "output"
                    break
        duration = time.monotonic() - start
        code, oom = -signal.SIGKILL, False  # when we end it: _destroy kills it (remove, force)
        if not killed_for:
            code = self._api.wait(box.id, timeout=API_TIMEOUT)["StatusCode"]
            if code != 0:
                oom = bool(self._api.inspect_container(box.id)["State"].get("OOMKilled"))
            if 128 < code <= 128 + 64:  # the init reports a program killed by signal N so
                code = 128 - code
        run = RawRun(code, duration, bytes(tails[_STDOUT]), bytes(tails[_STDERR]), killed_for)
        result = classify(run, limits, fault_prefixes=(f"{_INIT_NAME}: ",))
        if oom and result.outcome is Outcome.FAILED:
            result = Execution(
                Outcome.OUT_OF_MEMORY,
                result.exit_code,
                result.duration,
                result.stdout_tail,
                result.stderr_tail,
                f"memory limit of {limits.memory_bytes} bytes (killed by the OOM killer)",
            )
        return result

    # --- Leftovers -----------------------------------------------------------------------------

    def sweep(self, older_than_seconds: float = 0, *, all_of_this_host: bool = False) -> int:
        """`sweep()` of this module, through this sandbox's connection."""
        self._after_fork_check()
        return sweep(older_than_seconds, all_of_this_host=all_of_this_host, api=self._api)


def sweep(older_than_seconds: float = 0, *, all_of_this_host: bool = False, api=None) -> int:
    """Remove the sandbox containers of this host's workers that are gone (their pid is not
    running, or runs another process than the one that made them); never this process's own.
    With `all_of_this_host`, those of live workers too: only for a machine where no other worker
    runs. Containers of a worker in another pid namespace, or on another host, are left alone.
    Needs no DockerSandbox (no pool is started): fit for a Celery main process. Returns how many
    were removed; SandboxUnavailable when the engine does not answer."""
    if api is None:
        try:
            api = docker.from_env(timeout=API_TIMEOUT).api
        except (DockerException, OSError) as exc:
            raise SandboxUnavailable(f"the Docker engine does not answer: {exc}") from None
    try:
        listed = OWNERS.listed(api)
    except (DockerException, OSError) as exc:
        raise SandboxUnavailable(f"cannot list the sandbox containers: {exc}") from None
    removed = OWNERS.sweep(
        api,
        listed,
        older_than_seconds=older_than_seconds,
        all_of_this_host=all_of_this_host,
        own_too=False,  # this process's: DockerSandbox.close() removes them
        errors=(DockerException, OSError),
    )
    if removed:
        logger.info("sweep: removed %d sandbox container(s) of gone workers", removed)
    return removed


_instances: weakref.WeakSet[DockerSandbox] = weakref.WeakSet()


def _close_all() -> None:
    for sandbox in list(_instances):
        try:
            sandbox.close()
        except Exception:  # noqa: BLE001
            logger.exception("could not close a docker sandbox at exit")


def _forget_all_after_fork() -> None:
    for sandbox in list(_instances):
        sandbox._pid = -1  # re-initialised on its next use in this process


atexit.register(_close_all)
os.register_at_fork(after_in_child=_forget_all_after_fork)

__all__ = ["DockerChannel", "DockerSandbox", "sweep"]
