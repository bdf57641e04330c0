"""Kernel-enforced memory and process-count limits for a whole sandbox, with cgroups.

The rlimits a sandbox gets (RLIMIT_AS, RLIMIT_NPROC) are per process, and RLIMIT_NPROC counts
the uid's processes anywhere: four processes of 200 MiB each pass a 256 MiB RLIMIT_AS, and pages
in no process's address space (a file written on a tmpfs or on /dev/shm) pass it too. A cgroup limits the sandbox as a whole: every process started in
it, and every process those start, however they re-parent, setsid or unshare namespaces, shares
one memory limit and one process count.

What is enforced, for a leaf made by `Controller.create(name, memory_bytes=..., max_processes=...)`:

- Memory: all pages charged to the leaf together stay under `memory_bytes`. Past it the kernel
  reclaims what it can (clean page cache) and then its OOM killer SIGKILLs a process of the
  leaf, the one with the most resident memory; the OOM killer is left on, so a process over the
  limit is killed, not frozen. `oom_kills()` counts those kills, `memory_peak()` reports the
  high-water mark. No swap is allowed: v1 sets memory.memsw.limit_in_bytes (when the kernel
  accounts swap) equal to the limit and swappiness 0, v2 sets memory.swap.max to 0.
- tmpfs and shared memory: a page of a tmpfs file (a `--tmpfs` or sized tmpfs mount inside the
  sandbox, or the host's /dev/shm) or of a shared mapping is charged to the cgroup of the process
  that first touches it, and stays charged while the file exists, even after that process exits.
  So writing a file on the sandbox's own tmpfs or on /dev/shm counts against the sandbox's
  memory: at the limit a process of the sandbox is killed (the OOM killer weighs resident
  memory, which such pages are not part of, so with several processes the victim need not be
  the writer), or the write fails with ENOMEM. Killing does not free such pages; deleting the
  file (or the tmpfs going away with the sandbox's mount namespace) does. A file the sandbox leaves on the host's /dev/shm survives `remove()` and
  stays charged (to the removed leaf, which the kernel keeps until its pages are freed, and so
  to the parent) until deleted: clean /dev/shm up separately, or give the sandbox a private
  /dev (bubblewrap's `--dev`) or tmpfs, which goes away with its mount namespace.
- Processes: at most `max_processes` processes and threads in the leaf (pids.max); the fork or
  clone past it fails with EAGAIN (BlockingIOError in Python). Unlike RLIMIT_NPROC this does not
  count the uid's processes elsewhere, and it holds for root inside the sandbox too.
- Cleanup: `remove()` SIGKILLs whatever is left in the leaf (v2: cgroup.kill) and removes it,
  so nothing a sandbox started outlives it, whatever process group or session it moved to.

How a child joins: `subprocess.Popen(..., preexec_fn=...)` runs `join(leaf.procs_files)` in the
forked child before it execs bwrap (or the program), and before the child drops privileges,
since moving a process needs write access to cgroup.procs. For example::

    leaf = controller.create("run", memory_bytes=limits.memory_bytes, max_processes=64)
    try:
        apply = _limiter(limits, uid)
        files = leaf.procs_files
        proc = subprocess.Popen(argv, preexec_fn=lambda: (join(files), apply()))
        ...
    finally:
        leaf.remove()

If joining fails, the child raises and Popen fails ("Exception occurred in preexec_fn"): a run
never starts without the limits it was promised.

Which hierarchy `detect(root)` uses (root is SANDBOX_CGROUP_ROOT, read by the caller), once per
process and root:

- root given, an absolute path holding cgroup.controllers (or a missing directory whose parent
  holds one, which is then created): cgroup v2. Leaves are made directly under root, so memory
  and pids must be listed in root's cgroup.controllers (enabled by its parent); they are enabled
  for root's children by writing "+memory +pids" to root's cgroup.subtree_control when not
  already there, which the kernel refuses (EBUSY) while processes live in root itself. Without
  root privileges this is how to run: delegate a subtree to the worker's user (systemd:
  `systemd-run --user -p Delegate=yes ...`), run the worker in one child of it and point
  SANDBOX_CGROUP_ROOT at another, empty one. Moving a child into a leaf needs write access to
  the cgroup.procs of the leaf and of the common ancestor of the worker's cgroup and the leaf,
  so the worker must itself live inside the delegated subtree.
- root given otherwise: cgroup v1, and root is a name prefix such as "inspector" or
  "process_api/abc/inspector", made under both the v1 memory and the v1 pids mounts
  (/sys/fs/cgroup/memory/<root> and /sys/fs/cgroup/pids/<root>); an absolute path under one of
  those mounts is reduced to that name. A name under the worker's own memory cgroup keeps the
  sandboxes inside whatever limit that cgroup carries; the default does not.
- no root, not root (euid != 0): nothing; limits stay per process (the rlimits).
- no root, v1 memory mounted: v1 with the name "inspector", when root can create leaves there
  and write their limit files (checked once with a probe leaf). The v1 pids controller must be
  mounted too. With no cgroup namespace, the default "inspector" sits at the top of the
  hierarchy, outside the worker's own cgroup: sandbox memory is then not charged to the
  worker's cgroup (nor limited by it).
- no root, pure v2 (a cgroup2 mount whose cgroup.controllers lists memory and pids; normally
  /sys/fs/cgroup): the parent <mount>/inspector, with "+memory +pids" written to the mount's
  cgroup.subtree_control when missing (inside a container whose cgroup namespace root holds
  processes the kernel refuses this with EBUSY) and to the parent's own cgroup.subtree_control.
- otherwise None, and `unavailable_reason()` says why. A hybrid system whose cgroup2 mount
  (/sys/fs/cgroup/unified) carries no memory controller and has no v1 memory mount falls here.

Leaves are named f"{pid}-{pidns}-{counter}-{name}": the worker's pid, the inode of its pid
namespace (a pid means nothing in another namespace: two containers sharing one host hierarchy
must not sweep each other's leaves), a per-process counter and the caller's name. `sweep()`
removes the leaves, in this pid namespace, of workers that no longer run (killing what is left
in them), and the leaves carrying this process's pid that it did not make (an earlier process
that had the same pid).

Everything here reads and writes cgroup files with the standard library only.
"""

from __future__ import annotations

import errno
import itertools
import logging
import os
import re
import signal
import threading
import time

logger = logging.getLogger(__name__)

__all__ = [
    "Controller",
    "SandboxCgroup",
    "detect",
    "join",
    "leaf_prefix",
    "sweep",
    "unavailable_reason",
]

DEFAULT_NAME = "inspector"
REMOVE_SECONDS = 1.0
PROBE_BYTES = 64 << 20
NOT_ROOT = (
    "not root and SANDBOX_CGROUP_ROOT is not set: memory and process limits are per process only "
    "(with cgroup v2, point SANDBOX_CGROUP_ROOT at a delegated cgroup directory this user can "
    "write, e.g. one made by `systemd-run --user -p Delegate=yes`)"
)
_LEAF = re.compile(r"^(\d+)-(\d+)-(\d+)-")
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")

_cache: dict[str | None, tuple[Controller | None, str]] = {}
_cache_lock = threading.Lock()
_last: list[str | None] = [None]  # the root of the latest detect()
_counter = itertools.count()
_mine: set[str] = set()  # leaf names this process made (sweep keeps them)


def join(procs_files: tuple[str, ...]) -> None:
    """Move the calling process into the leaf: write "0" to each of its cgroup.procs files.

    Runs in subprocess's preexec_fn, in the forked child before exec: os calls only, no
    logging, locks or imports. An error propagates, so the child does not run unconfined."""
    for path in procs_files:
        fd = os.open(path, os.O_WRONLY)
        try:
            os.write(fd, b"0")
        finally:
            os.close(fd)


def _pidns() -> int:
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return 0


def leaf_prefix(pid: int) -> str:
    """The start of the names of the leaves worker `pid` (of this pid namespace) makes."""
    return f"{pid}-{_pidns()}-"


def _write(path: str, value: str) -> None:
    # O_CREAT lets the v2 layout be checked in a plain directory; cgroupfs cannot create files,
    # so there a missing control file is still an error (EACCES).
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as fh:
            return fh.read()
    except OSError:
        return None


def _keyed(text: str | None, key: str) -> int:
    for line in (text or "").splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == key and parts[1].isdigit():
            return int(parts[1])
    return 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class SandboxCgroup:
    """One sandbox's leaf: one directory (v2) or one per controller (v1: memory, pids)."""

    def __init__(self, version: int, directories: tuple[str, ...]) -> None:
        self.version = version
        self.directories = directories
        self.procs_files: tuple[str, ...] = tuple(
            os.path.join(d, "cgroup.procs") for d in directories
        )

    def __repr__(self) -> str:
        return f"SandboxCgroup(v{self.version}, {self.directories[0]!r})"

    def __enter__(self) -> SandboxCgroup:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.remove()

    @property
    def _memory(self) -> str:
        return self.directories[0]

    def pids(self) -> set[int]:
        """The processes in the leaf (and in any cgroup made below it), as seen from here."""
        found: set[int] = set()
        for directory in self.directories:
            for sub in _tree(directory):
                for line in (_read(os.path.join(sub, "cgroup.procs")) or "").split():
                    if line.isdigit() and int(line) > 0:
                        found.add(int(line))
        return found

    def oom_kills(self) -> int:
        """Processes the kernel's OOM killer killed in the leaf; 0 when the file does not say."""
        if self.version == 1:
            return _keyed(_read(os.path.join(self._memory, "memory.oom_control")), "oom_kill")
        return _keyed(_read(os.path.join(self._memory, "memory.events")), "oom_kill")

    def memory_peak(self) -> int:
        """The most memory charged to the leaf at once, in bytes (v2 without memory.peak: now)."""
        names = (
            ("memory.max_usage_in_bytes",)
            if self.version == 1
            else ("memory.peak", "memory.current")
        )
        for name in names:
            text = (_read(os.path.join(self._memory, name)) or "").strip()
            if text.isdigit():
                return int(text)
        return 0

    def _kill(self) -> None:
        if self.version == 2:
            kill = os.path.join(self._memory, "cgroup.kill")
            if os.path.exists(kill):
                try:
                    _write(kill, "1")
                except OSError:
                    pass
        me = os.getpid()
        for pid in self.pids():
            if pid == me:
                # Someone joined the worker itself; killing it would be worse than leaking.
                logger.warning("the worker itself is in sandbox cgroup %s", self._memory)
                continue
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass

    def remove(self) -> bool:
        """Kill what is left in the leaf and remove it (and any cgroup made below it), retrying
        for about REMOVE_SECONDS while the kernel tears processes down. Never raises: returns
        False, after a warning, when something is left."""
        deadline = time.monotonic() + REMOVE_SECONDS
        pause = 0.002
        problem: OSError | None = None
        while True:
            try:
                self._kill()
            except Exception:  # never raise from cleanup
                logger.exception("could not kill the processes of %s", self._memory)
            problem = None
            left = False
            for directory in self.directories:
                for sub in _tree(directory):
                    try:
                        os.rmdir(sub)
                    except FileNotFoundError:
                        pass
                    except OSError as exc:
                        problem, left = exc, True
            if not left:
                return True
            if time.monotonic() >= deadline:
                logger.warning(
                    "could not remove sandbox cgroup %s (processes %s left): %s",
                    self._memory,
                    sorted(self.pids()),
                    problem,
                )
                return False
            time.sleep(pause)
            pause = min(pause * 2, 0.05)


def _tree(directory: str) -> list[str]:
    """directory and the cgroups below it, deepest first (the order rmdir needs)."""
    found: list[str] = []
    try:
        for top, _dirs, _files in os.walk(directory, topdown=False):
            found.append(top)
    except OSError:
        pass
    return found or [directory]


class Controller:
    """A usable hierarchy: makes leaves under its parent directories (v1: memory, pids)."""

    def __init__(self, version: int, parents: tuple[str, ...]) -> None:
        self.version = version
        self.parents = parents

    def __repr__(self) -> str:
        return f"Controller(v{self.version}, {self.parents!r})"

    def leaf(self, name: str) -> SandboxCgroup:
        """The leaf called `name` under this controller's parents (made or not)."""
        return SandboxCgroup(self.version, tuple(os.path.join(p, name) for p in self.parents))

    def create(self, name: str, *, memory_bytes: int, max_processes: int) -> SandboxCgroup:
        """Make a leaf limited to memory_bytes and max_processes; raises OSError if the kernel
        refuses (the partial leaf is removed first)."""
        if memory_bytes <= 0 or max_processes <= 0:
            raise ValueError("memory_bytes and max_processes must be positive")
        safe = _UNSAFE.sub("_", name)[:64] or "sandbox"
        while True:
            leaf_name = f"{leaf_prefix(os.getpid())}{next(_counter)}-{safe}"
            _mine.add(leaf_name)  # before mkdir: a concurrent sweep must not take it
            leaf = self.leaf(leaf_name)
            made: list[str] = []
            try:
                for directory in leaf.directories:
                    os.mkdir(directory, 0o755)
                    made.append(directory)
            except FileExistsError:
                # An earlier process with our pid left it; sweep() will take it.
                for directory in reversed(made):
                    _rmdir_quiet(directory)
                _mine.discard(leaf_name)
                continue
            except OSError:
                for directory in reversed(made):
                    _rmdir_quiet(directory)
                _mine.discard(leaf_name)
                raise
            break
        try:
            if self.version == 1:
                self._limit_v1(leaf, memory_bytes, max_processes)
            else:
                self._limit_v2(leaf, memory_bytes, max_processes)
        except OSError:
            leaf.remove()
            _mine.discard(leaf_name)
            raise
        return leaf

    @staticmethod
    def _limit_v1(leaf: SandboxCgroup, memory_bytes: int, max_processes: int) -> None:
        memory, pids = leaf.directories
        # memsw must never be below the memory limit: a fresh leaf has both unlimited, so the
        # memory limit goes first.
        _write(os.path.join(memory, "memory.limit_in_bytes"), str(memory_bytes))
        memsw = os.path.join(memory, "memory.memsw.limit_in_bytes")
        if os.path.exists(memsw):
            _write(memsw, str(memory_bytes))
        for optional, value in (("memory.swappiness", "0"), ("memory.oom_control", "0")):
            # oom_control 0: the OOM killer stays on even if a parent turned it off (a leaf
            # inherits oom_kill_disable), so a process over the limit is killed, not frozen.
            try:
                _write(os.path.join(memory, optional), value)
            except OSError as exc:
                logger.debug("cannot write %s in %s: %s", optional, memory, exc)
        _write(os.path.join(pids, "pids.max"), str(max_processes))

    @staticmethod
    def _limit_v2(leaf: SandboxCgroup, memory_bytes: int, max_processes: int) -> None:
        (directory,) = leaf.directories
        _write(os.path.join(directory, "memory.max"), str(memory_bytes))
        try:
            # Missing when the kernel does not account swap; with no swap there is none to take.
            _write(os.path.join(directory, "memory.swap.max"), "0")
        except OSError as exc:
            logger.debug("cannot write memory.swap.max in %s: %s", directory, exc)
        _write(os.path.join(directory, "pids.max"), str(max_processes))

    def sweep(self) -> int:
        """Remove the leaves of dead workers of this pid namespace; returns how many."""
        me, ns = os.getpid(), _pidns()
        names: set[str] = set()
        for parent in self.parents:
            try:
                names.update(e.name for e in os.scandir(parent) if e.is_dir(follow_symlinks=False))
            except OSError:
                continue
        removed = 0
        for name in sorted(names):
            match = _LEAF.match(name)
            if match is None or int(match[2]) != ns:
                continue
            pid = int(match[1])
            stale = name not in _mine if pid == me else not _alive(pid)
            if stale and self.leaf(name).remove():
                removed += 1
        if removed:
            logger.info("removed %d sandbox cgroup(s) of workers no longer running", removed)
        return removed


def _rmdir_quiet(path: str) -> None:
    try:
        os.rmdir(path)
    except OSError:
        pass


def _mounts() -> list[tuple[str, str, list[str]]]:
    """(mount point, type, options) of the cgroup and cgroup2 mounts."""
    found = []
    for line in (_read("/proc/self/mounts") or "").splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[2] in ("cgroup", "cgroup2"):
            point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), parts[1])
            found.append((point, parts[2], parts[3].split(",")))
    return found


def _v1_mount(controller: str) -> str | None:
    for point, kind, options in _mounts():
        if kind == "cgroup" and controller in options:
            return point
    return None


def _controllers(directory: str, name: str) -> set[str]:
    return set((_read(os.path.join(directory, name)) or "").split())


def _enable(directory: str) -> str:
    """Enable memory and pids for directory's children; "" or why not."""
    if {"memory", "pids"} <= _controllers(directory, "cgroup.subtree_control"):
        return ""
    try:
        _write(os.path.join(directory, "cgroup.subtree_control"), "+memory +pids")
    except OSError as exc:
        why = exc.strerror or str(exc)
        if exc.errno == errno.EBUSY:
            why += " (processes live in it: a cgroup2 directory other than the root cannot hold both processes and controllers for its children)"
        return f"cannot enable memory and pids for the children of {directory}: {why}"
    return ""


def _detect_v2(parent: str, *, make_mount: str | None) -> tuple[Controller | None, str]:
    if make_mount is not None:
        if not {"memory", "pids"} <= _controllers(make_mount, "cgroup.controllers"):
            return None, f"the cgroup2 hierarchy at {make_mount} has no memory and pids controllers"
        reason = _enable(make_mount)
        if reason:
            return None, reason
    if not os.path.isdir(parent):
        above = os.path.dirname(parent.rstrip("/"))
        if not os.path.exists(os.path.join(above, "cgroup.controllers")):
            return None, f"{parent} is not a cgroup2 directory"
        try:
            os.mkdir(parent, 0o755)
        except FileExistsError:
            pass
        except OSError as exc:
            return None, f"cannot create cgroup {parent}: {exc.strerror}"
    available = _controllers(parent, "cgroup.controllers")
    missing = {"memory", "pids"} - available
    if missing:
        return None, (
            f"cgroup {parent} lacks the {' and '.join(sorted(missing))} controller(s): its "
            "parent's cgroup.subtree_control must enable them (systemd: Delegate=memory pids)"
        )
    if not os.access(parent, os.W_OK):
        return (
            None,
            f"cannot create cgroups in {parent}: no write access (not delegated to uid {os.geteuid()})",
        )
    reason = _enable(parent)
    if reason:
        return None, reason
    return Controller(2, (parent,)), ""


def _detect_v1(name: str) -> tuple[Controller | None, str]:
    memory, pids = _v1_mount("memory"), _v1_mount("pids")
    if memory is None or pids is None:
        absent = " and ".join(c for c, m in (("memory", memory), ("pids", pids)) if m is None)
        return None, f"the cgroup v1 {absent} controller is not mounted"
    parents = tuple(os.path.join(mount, name.strip("/")) for mount in (memory, pids))
    for parent in parents:
        try:
            os.makedirs(parent, 0o755, exist_ok=True)
        except OSError as exc:
            return None, f"cannot create cgroup {parent}: {exc.strerror}"
    controller = Controller(1, parents)
    try:
        probe = controller.create("probe", memory_bytes=PROBE_BYTES, max_processes=8)
    except OSError as exc:
        return None, f"cannot make a limited cgroup under {parents[0]} and {parents[1]}: {exc}"
    if not probe.remove():
        return None, f"cannot remove cgroup {probe.directories[0]}"
    return controller, ""


def _detect(root: str | None) -> tuple[Controller | None, str]:
    if root:
        if not root.startswith("/"):
            return _detect_v1(root)
        for controller in ("memory", "pids"):
            mount = _v1_mount(controller)
            if mount and (root + "/").startswith(mount.rstrip("/") + "/"):
                return _detect_v1(os.path.relpath(root, mount))
        if os.path.exists(os.path.join(root, "cgroup.controllers")) or os.path.exists(
            os.path.join(os.path.dirname(root.rstrip("/")), "cgroup.controllers")
        ):
            return _detect_v2(root.rstrip("/") or "/", make_mount=None)
        return None, (
            f"SANDBOX_CGROUP_ROOT={root} is neither a cgroup2 directory (no cgroup.controllers "
            "in it or its parent) nor under a cgroup v1 memory or pids mount; for v1 give a name "
            f"such as {DEFAULT_NAME!r}"
        )
    if os.geteuid() != 0:
        return None, NOT_ROOT
    if _v1_mount("memory") is not None:
        return _detect_v1(DEFAULT_NAME)
    for point, kind, _options in _mounts():
        if kind == "cgroup2" and {"memory", "pids"} <= _controllers(point, "cgroup.controllers"):
            return _detect_v2(os.path.join(point, DEFAULT_NAME), make_mount=point)
    v2 = [point for point, kind, _ in _mounts() if kind == "cgroup2"]
    listed = "; ".join(
        f"{p} lists {' '.join(sorted(_controllers(p, 'cgroup.controllers'))) or 'nothing'}"
        for p in v2
    )
    return None, (
        "no cgroup memory controller: no cgroup v1 memory hierarchy is mounted and no cgroup2 "
        "hierarchy offers memory and pids" + (f" ({listed})" if listed else "")
    )


def detect(root: str | None = None) -> Controller | None:
    """The hierarchy to make sandbox leaves in (see the module docstring), or None; cached per
    process and root. unavailable_reason() says why it is None."""
    with _cache_lock:
        _last[0] = root
        if root not in _cache:
            try:
                _cache[root] = _detect(root)
            except OSError as exc:  # anything unforeseen in /proc or /sys
                _cache[root] = (None, f"cannot inspect cgroups: {exc}")
            controller, reason = _cache[root]
            if controller is None:
                logger.info("sandbox cgroups unavailable: %s", reason)
        return _cache[root][0]


def unavailable_reason() -> str:
    """Why the latest detect() found nothing ("" when it found a hierarchy)."""
    if _last[0] not in _cache:
        detect(_last[0])
    return _cache[_last[0]][1]


def sweep(controller: Controller | None = None) -> int:
    """Remove the leaves of workers that no longer run, under `controller` (default: the latest
    detect()'s); returns how many."""
    if controller is None:
        controller = detect(_last[0])
    return controller.sweep() if controller is not None else 0
