"""Run untrusted Python on this machine: in a bubblewrap sandbox, or (opt-in) without one."""

from __future__ import annotations

import contextlib
import fcntl
import logging
import math
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from workers.sandbox import cgroups, seccomp
from workers.sandbox.base import (
    Execution,
    Limits,
    RawRun,
    SandboxUnavailable,
    classify,
    execute,
    kill_group,
    spawn,
    supervise,
)
from workers.sandbox.runner import BOOTSTRAP, ONE_OFF_INIT
from workers.sandbox.session import (
    CHECK,
    RUNNER_PAYLOAD,
    SOLUTION,
    FdChannel,
    FunctionSession,
    FunctionTask,
)

logger = logging.getLogger(__name__)

DEFAULT_UID_BASE = 200_000
_UID_SPREAD = 50_000
SANDBOX_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": "/work",
    "LANG": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONHASHSEED": "0",
}
# A session's runners draw a hash seed of their own, as a training run's interpreter would: a
# check whose verdict depends on string hashing (set order, `hash()`) then passes in one session
# and fails in another, and the inspection's repeats, spread over sessions, see it flake. One-off
# programs (behaviour vectors) keep seed 0 so that their outputs compare across programs.
RUNNER_ENV = {**SANDBOX_ENV, "PYTHONHASHSEED": "random"}
NO_BWRAP = (
    "bubblewrap (bwrap) is not installed: apt-get install bubblewrap; or set "
    "SANDBOX_ALLOW_UNSANDBOXED=True to run untrusted code WITHOUT isolation"
)
_INIT_NAME = "sandbox-init"  # prefixes the one-off init's own error messages
RUNNER_ADDRESS_SPACE = 64 << 20  # a session's runner may map this much beyond a run's limit
# Where a verifier program finds its libraries (requirements-verifier.txt) inside the sandbox.
VERIFIER_MOUNT = "/opt/verifier"
# Where a one-off sandbox sees its host folder (main.py), read-only; /work/main.py links to it.
PROGRAM_MOUNT = "/program"
CGROUP_MODES = ("auto", "required", "off")
_checks: dict[tuple[str, str, bool], str] = {}
_checks_lock = threading.Lock()
_warned = threading.Event()
_cgroups_warned = threading.Event()


def default_verifier_lib() -> str:
    """$VERIFIER_LIB, else .verifier-lib in the checkout (what bin/setup installs)."""
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return os.environ.get("VERIFIER_LIB") or os.path.join(here, ".verifier-lib")


def _no_verifier_lib(lib: str) -> str:
    return (
        f"the verifier's libraries are not installed at {lib}: run bin/setup (or set "
        "VERIFIER_LIB to the folder of `pip install --no-deps --target DIR -r "
        "requirements-verifier.txt`)"
    )


def default_python() -> str:
    if os.path.exists("/usr/bin/python3"):
        return "/usr/bin/python3"
    return os.path.realpath(getattr(sys, "_base_executable", sys.executable))


def _own_task_count() -> int:
    """Processes and threads of this uid: RLIMIT_NPROC counts them all, not only the sandbox's."""
    uid, count = os.getuid(), 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid:
                    count += max(os.stat(f"/proc/{entry.name}/task").st_nlink - 2, 1)
            except OSError:
                continue
    return count


def _limiter(
    limits: Limits, uid: int | None, cgroup: cgroups.SandboxCgroup | None = None
) -> Callable[[], None]:
    nproc = limits.max_processes
    if uid is None:
        # Not root: the sandbox keeps our uid, whose other processes count against NPROC too.
        nproc += _own_task_count()
    values = [
        (resource.RLIMIT_AS, limits.memory_bytes),
        (resource.RLIMIT_NPROC, nproc),
        (resource.RLIMIT_FSIZE, limits.file_bytes),
        (resource.RLIMIT_CORE, 0),
        (resource.RLIMIT_CPU, math.ceil(limits.wall_seconds) + 1),
    ]

    procs_files = cgroup.procs_files if cgroup is not None else ()

    def apply() -> None:
        # Into the sandbox's cgroup while still allowed to write there: every process the
        # sandbox starts is born inside it.
        if procs_files:
            cgroups.join(procs_files)
        # Root ignores RLIMIT_NPROC, so the run gets a uid of its own first.
        if uid is not None:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
        for which, value in values:
            resource.setrlimit(which, (value, value))

    return apply


def _cgroup_controller(mode: str, root: str | None) -> cgroups.Controller | None:
    """The kernel's limits on a whole sandbox (memory, process count), or None with a loud
    warning (SANDBOX_CGROUPS=auto) or a refusal (=required) when this host offers none."""
    if mode not in CGROUP_MODES:
        raise SandboxUnavailable(
            f"unknown SANDBOX_CGROUPS={mode!r}: accepted values are {', '.join(CGROUP_MODES)}"
        )
    if mode == "off":
        return None
    controller = cgroups.detect(root)
    if controller is not None:
        return controller
    why = cgroups.unavailable_reason()
    if mode == "required":
        raise SandboxUnavailable(f"SANDBOX_CGROUPS=required, but no cgroup is usable: {why}")
    if not _cgroups_warned.is_set():
        _cgroups_warned.set()
        logger.warning(
            "NOT ENFORCED: memory and process limits hold per process only, not per sandbox "
            "(%s); several processes of one run together can hold more than RUN_MEMORY_MB. "
            "Set SANDBOX_CGROUPS=required to refuse to run instead.",
            why,
        )
    return None


def _remove_tree(path: str) -> None:
    def unlock_and_retry(func: Callable[[str], object], target: str, _exc: object) -> None:
        # Without root, a folder the program made read-only would otherwise stay behind.
        os.chmod(os.path.dirname(target), 0o700)
        func(target)

    try:
        shutil.rmtree(path, onerror=unlock_and_retry)
    except RecursionError:
        # A chain of folders deeper than the interpreter's recursion (rmtree recurses on
        # Python 3.11): rm walks it without, and leaves nothing half-removed for the sweep.
        done = subprocess.run(
            ["rm", "-rf", "--one-file-system", "--", path], capture_output=True, check=False
        )
        if done.returncode != 0:
            logger.error("could not remove sandbox work folder %s: %s", path, done.stderr[-500:])
    except OSError:
        logger.exception("could not remove sandbox work folder %s", path)


@contextmanager
def work_folder(program: str, owner: int | None, parent: str | None = None) -> Iterator[str]:
    path = tempfile.mkdtemp(prefix=_folder_prefix(), dir=parent)
    try:
        main = os.path.join(path, "main.py")
        with open(main, "w", encoding="utf-8") as fh:
            fh.write(program)
        if owner is not None:
            os.chown(main, owner, owner)
            os.chown(path, owner, owner)
        yield path
    finally:
        _remove_tree(path)


def _leave_nothing(folder: str, cgroup: cgroups.SandboxCgroup | None) -> None:
    """What a sandbox that ended, or never started, leaves on the host: its folder and its
    cgroup (removing the cgroup kills whatever is still in it)."""
    if cgroup is not None:
        cgroup.remove()
    _remove_tree(folder)


def _folder_prefix() -> str:
    # The worker's pid in the name tells a sweep which folders no living worker owns.
    return f"sandbox-{os.getpid()}-"


def sweep_work_folders(root: str | None = None) -> int:
    """Remove the work folders of workers that are gone (killed before they could clean up)."""
    root = root or tempfile.gettempdir()
    removed = 0
    for entry in os.scandir(root):
        parts = entry.name.split("-")
        if len(parts) < 3 or parts[0] != "sandbox" or not parts[1].isdigit():
            continue
        if os.path.exists(f"/proc/{parts[1]}"):
            continue
        _remove_tree(entry.path)
        removed += 1
    return removed


class _LocalBase:
    name = "local"
    pid_namespace = True
    # The recursion depth of a one-off program's own code: main.py exec'd at the module level
    # of ONE_OFF_INIT (`python -c`), where a session runs a program too (runner.py).
    ONE_OFF_DEPTH = 4

    def __init__(
        self,
        *,
        python: str | None = None,
        uid_base: int = DEFAULT_UID_BASE,
        work_root: str | None = None,
        cgroup_mode: str = "auto",
        cgroup_root: str | None = None,
        park_ahead: int = 1,
        verifier_lib: str | None = None,
    ) -> None:
        self.python = python or default_python()
        self.verifier_lib = os.path.abspath(verifier_lib or default_verifier_lib())
        # One-off sandboxes kept started ahead of need, per set of limits (0: none).
        self.park_ahead = park_ahead
        self.uid_base = uid_base
        self.work_root = work_root
        self.cgroups = _cgroup_controller(cgroup_mode, cgroup_root)
        self._ready()

    def _ready(self) -> None:
        pass

    def enforced(self) -> dict[str, str]:
        """What this backend enforces, layer by layer, for a health page or a log line."""
        return {
            "namespaces": "bubblewrap" if self.pid_namespace else "none (unsandboxed)",
            "sandbox limits": repr(self.cgroups) if self.cgroups else "per process only",
            "seccomp": "on" if getattr(self, "seccomp_program", b"") else "off",
        }

    def _cgroup(self, role: str, limits: Limits) -> cgroups.SandboxCgroup | None:
        if self.cgroups is None:
            return None
        return self.cgroups.create(
            role, memory_bytes=limits.memory_bytes, max_processes=limits.max_processes
        )

    def run_uid(self) -> int | None:
        # Per worker process, so concurrent workers do not share one NPROC budget.
        if os.geteuid() != 0:
            return None
        return self.uid_base + os.getpid() % _UID_SPREAD

    def session(self, task: FunctionTask | None = None, *, limits: Limits) -> FunctionSession:
        """A solution sandbox and a check sandbox, a clean fork per run."""
        return FunctionSession(
            self._open_pair,
            task,
            limits,
            one_off={"main_depth": self.ONE_OFF_DEPTH, "main_file": "main.py"},
        )

    def _open_pair(self, limits: Limits) -> tuple[FdChannel, FdChannel]:
        """Both sandboxes, joined by a pipe pair of their own: the check's calls go straight to
        the solution's runner, which answers them; the worker only starts and ends runs."""
        calls_r, calls_w = os.pipe()
        answers_r, answers_w = os.pipe()
        ends = (calls_r, calls_w, answers_r, answers_w)
        for fd in (calls_r, answers_r):
            os.fchmod(fd, 0)  # not reopenable through /proc (see _open_runner)
        try:
            solution = self._open_runner(SOLUTION, limits, peer=(calls_r, answers_w))
            try:
                check = self._open_runner(CHECK, limits, peer=(answers_r, calls_w))
            except BaseException:
                solution.close()
                raise
        finally:
            for fd in ends:
                os.close(fd)
        return solution, check

    def _open_runner(
        self, role: str, limits: Limits, *, peer: tuple[int, int] | None = None
    ) -> FdChannel:
        uid = self.run_uid()
        if uid is not None and role == CHECK:
            uid += _UID_SPREAD  # the check's sandbox is out of the solution's reach by uid too
        folder = tempfile.mkdtemp(prefix=_folder_prefix(), dir=self.work_root)
        if uid is not None:
            os.chown(folder, uid, uid)
        to_runner_r, to_runner_w = os.pipe()
        from_runner_r, from_runner_w = os.pipe()
        # Room for the whole bootstrap payload: its write below then returns at once, and the
        # other sandbox starts while this one's interpreter boots (a 64 KiB pipe held the
        # worker until this runner had read it, about 16 ms).
        with contextlib.suppress(OSError):
            fcntl.fcntl(to_runner_w, fcntl.F_SETPIPE_SZ, len(RUNNER_PAYLOAD) + 4096)
        errors = tempfile.TemporaryFile()
        cgroup = self._cgroup(role, limits)
        filter_fd = self._seccomp_fd()
        # Nobody reopens these through /proc/PID/fd: without it, a run of the worker's own
        # uid (a worker not running as root) could write frames into the runner's channel.
        for fd in (to_runner_r, from_runner_r, errors.fileno()):
            os.fchmod(fd, 0)
        # The runner lives for many runs: its own CPU limit is the session's, not one run's.
        # Its address space may pass a run's by what it maps itself, which a program's child
        # is given on top of its own limit (runner.program_main: a one-off program's room);
        # each run's child sets the run's own limit, and the cgroup holds the whole sandbox.
        session_limits = Limits(
            wall_seconds=3600,
            memory_bytes=limits.memory_bytes + RUNNER_ADDRESS_SPACE,
            max_processes=limits.max_processes,
            file_bytes=limits.file_bytes,
        )
        try:
            proc = subprocess.Popen(
                self._runner_argv(folder, limits, filter_fd),
                cwd=folder,
                env={**RUNNER_ENV, "HOME": folder} if not self.pid_namespace else RUNNER_ENV,
                stdin=to_runner_r,
                stdout=from_runner_w,
                stderr=errors,
                preexec_fn=_limiter(session_limits, uid, cgroup),
                start_new_session=True,
                pass_fds=(*(peer or ()), *(() if filter_fd is None else (filter_fd,))),
            )
        except OSError:
            for fd in (to_runner_r, to_runner_w, from_runner_r, from_runner_w):
                os.close(fd)
            _leave_nothing(folder, cgroup)
            raise
        finally:
            if filter_fd is not None:
                os.close(filter_fd)
        os.close(to_runner_r)
        os.close(from_runner_w)

        def stop() -> str:
            self._stop(proc.pid)
            proc.wait()
            if uid is not None and not self.pid_namespace:
                _kill_uid(uid)
            _leave_nothing(folder, cgroup)
            errors.seek(0)
            text = errors.read()[-2000:].decode("utf-8", errors="replace").strip()
            errors.close()
            return f"runner stderr: {text}" if text else ""

        channel = FdChannel(to_runner_w, from_runner_r, on_close=stop)
        if cgroup is not None:
            channel.oom_kills = cgroup.oom_kills
        channel.init_extra = {"pid_namespace": self.pid_namespace, "work": self._work(folder)}
        if peer:
            channel.init_extra["peer"] = list(peer)
        channel.send_raw(RUNNER_PAYLOAD)
        return channel

    def _work(self, folder: str) -> str:
        return "/work"

    def _seccomp_fd(self) -> int | None:
        return None

    def _stop(self, pid: int) -> None:
        kill_group(pid)


# Only /usr, read-only, and what _argv adds: not /etc, /home, /root, /var or the project.
_BWRAP_OPTIONS = (
    "--unshare-all --unshare-user --disable-userns --die-with-parent --new-session"
    " --cap-drop ALL --hostname sandbox --ro-bind /usr /usr --symlink usr/bin /bin"
    " --symlink usr/lib /lib --symlink usr/lib64 /lib64 --symlink usr/sbin /sbin"
    " --proc /proc --dev /dev --ro-bind /dev/null /dev/tty"
).split()
# `--dev` binds the host's own /dev/tty, whose times the tty layer stamps on every write: a run
# that made a pty its controlling terminal left a time on the host's file that every later
# sandbox (and the host) read (an outside attack, 2026-12-05). /dev/null stands in for it: its
# driver stamps no time, and a program that opens /dev/tty gets a device that takes its output.


class LocalSandbox(_LocalBase):
    """bubblewrap: no network, read-only /usr, private /work and /tmp, a uid of its own."""

    def _ready(self) -> None:
        found = shutil.which("bwrap")
        if not found:
            raise SandboxUnavailable(NO_BWRAP)
        self.bwrap = found
        self._init_parking()
        _live.add(self)
        try:
            self.seccomp_program = seccomp.bpf_program()
        except seccomp.SeccompUnavailable as exc:
            raise SandboxUnavailable(
                f"no system-call filter for the sandbox: {exc}; or set "
                "SANDBOX_ALLOW_UNSANDBOXED=True to run untrusted code WITHOUT isolation"
            ) from None
        # Start one sandbox per process, so a host without user namespaces fails early.
        key = (self.bwrap, self.python, os.geteuid() == 0)
        with _checks_lock:
            if key not in _checks:
                probe = self.run_python("", limits=Limits(wall_seconds=10), park_next=False)
                _checks[key] = "" if probe.passed else (probe.error or probe.stderr_tail).strip()
            problem = _checks[key]
        if problem:
            raise SandboxUnavailable(
                f"bubblewrap cannot create its sandbox here: {problem}; or set "
                "SANDBOX_ALLOW_UNSANDBOXED=True to run untrusted code WITHOUT isolation"
            )

    def _seccomp_fd(self) -> int:
        """A pipe holding the filter, for `bwrap --seccomp FD` (it reads it to the end)."""
        read_end, write_end = os.pipe()
        try:
            os.write(write_end, self.seccomp_program)  # a few KiB: fits the pipe's buffer
        finally:
            os.close(write_end)
        return read_end

    def _argv(
        self,
        folder: str,
        limits: Limits,
        filter_fd: int,
        env: dict[str, str] | None = None,
        *,
        session: bool = False,
        verifier: bool = False,
    ) -> list[str]:
        """bwrap's options, up to the command that becomes the sandbox's pid 1; `verifier` binds
        the verifier's libraries read-only at VERIFIER_MOUNT (for verifier programs only)."""
        argv = [self.bwrap, *_BWRAP_OPTIONS]
        real = os.path.realpath(self.python)
        if not real.startswith("/usr/"):
            prefix = os.path.dirname(os.path.dirname(real))
            argv += ["--ro-bind", prefix, prefix]
        # Python itself needs nothing from /etc; the time zone is the only thing worth keeping.
        if os.path.exists("/etc/localtime"):
            argv += ["--ro-bind", "/etc/localtime", "/etc/localtime"]
        # Sized, or writing to them could fill the host's memory; emptied after every run. /work
        # too is a tmpfs, not a host folder: a run could otherwise fill the host's disk, or
        # leave it hundreds of thousands of extents to free, holding the worker (and the
        # processes it stopped) in the disk's waits for minutes (an outside attack, 2026-12-06).
        for tmpfs in ("/dev/shm", "/tmp", "/work"):
            argv += ["--size", str(limits.file_bytes), "--tmpfs", tmpfs]
        # A session's code arrives on stdin; a one-off program's main.py is read from its host
        # folder, bound read-only, through a link in /work.
        if not session:
            argv += ["--ro-bind", folder, PROGRAM_MOUNT]
            argv += ["--symlink", f"{PROGRAM_MOUNT}/main.py", "/work/main.py"]
        if verifier:
            argv += ["--ro-bind", self.verifier_lib, VERIFIER_MOUNT]
            env = {**(env or SANDBOX_ENV), "VERIFIER_LIB": VERIFIER_MOUNT}
        # The root is a tmpfs and /dev another (bwrap's, with its device nodes): read-only,
        # or a run could leave files there that no clean-up looks for.
        argv += ["--remount-ro", "/dev", "--remount-ro", "/", "--chdir", "/work", "--clearenv"]
        for name, value in (env or SANDBOX_ENV).items():
            argv += ["--setenv", name, value]
        # The system-call filter holds for every process of the sandbox, pid 1 included.
        argv += ["--seccomp", str(filter_fd)]
        # The command is the sandbox's pid 1 (bwrap's own init would leave a zombie per run):
        # a Python process that makes itself not dumpable before anything else runs, so no
        # process of the sandbox can ptrace it, write its memory through /proc/1/mem or read
        # its descriptors; and pid 1 gets no signal from inside unless it handles it.
        return [*argv, "--as-pid-1"]

    def _runner_argv(self, folder: str, limits: Limits, filter_fd: int | None) -> list[str]:
        assert filter_fd is not None
        argv = self._argv(folder, limits, filter_fd, RUNNER_ENV, session=True)
        return [*argv, self.python, "-I", "-c", BOOTSTRAP]

    def _stop(self, pid: int) -> None:
        _stop_bwrap(pid)

    def run_python(self, program: str, *, limits: Limits, park_next: bool = True) -> Execution:
        """Run `program` as main.py in a sandbox of its own, started ahead of need: a parked
        one (bwrap has set it up and waits on --block-fd before its pid 1 starts), else one
        started now. Parking takes the start, and the cgroup move (a kernel RCU wait of about
        15 ms under cgroup v1), off the program's path."""
        self._after_fork_check()
        parked = self._take(limits)
        if parked is None:
            try:
                parked = self._park(limits)
            except (OSError, subprocess.SubprocessError) as exc:
                error = f"cannot start {self.bwrap}: {exc}"
                return classify(RawRun(None, 0.0, b"", b"", error=error), limits)
        if park_next:
            self._want(limits)
        return self._run_parked(parked, program, limits)

    def run_verifier(self, program: str, *, limits: Limits) -> Execution:
        """Run a verifier program (workers/sandbox/verifier.py) like run_python, in a sandbox
        that also has the verifier's libraries read-only at VERIFIER_MOUNT (and
        $VERIFIER_LIB naming it). Started when asked: a batch pays one start."""
        self._after_fork_check()
        if not os.path.isdir(self.verifier_lib):
            error = _no_verifier_lib(self.verifier_lib)
            return classify(RawRun(None, 0.0, b"", b"", error=error), limits)
        try:
            parked = self._park(limits, verifier=True)
        except (OSError, subprocess.SubprocessError) as exc:
            error = f"cannot start {self.bwrap}: {exc}"
            return classify(RawRun(None, 0.0, b"", b"", error=error), limits)
        return self._run_parked(parked, program, limits)

    def _run_parked(self, parked: _Parked, program: str, limits: Limits) -> Execution:
        try:
            main = os.path.join(parked.folder, "main.py")
            with open(main, "w", encoding="utf-8") as fh:
                fh.write(program)
            if parked.uid is not None:
                os.chown(main, parked.uid, parked.uid)
            start = time.monotonic()
            try:
                os.write(parked.block, b"x")  # the sandbox's pid 1 starts now
            except OSError:
                pass  # bwrap is gone: supervise() reports what it said
            run = supervise(parked.proc, limits=limits, stop=_stop_bwrap, start=start)
        finally:
            os.close(parked.block)
            oom_killed = parked.cgroup is not None and parked.cgroup.oom_kills() > 0
            _leave_nothing(parked.folder, parked.cgroup)
        if oom_killed and run.exit_code not in (0, None):
            run.exit_code = -signal.SIGKILL  # the sandbox's memory limit: classified below
        # bwrap reports a child killed by signal N as exit status 128+N.
        if run.exit_code is not None and 128 < run.exit_code <= 128 + 64:
            run.exit_code = 128 - run.exit_code
        return classify(run, limits, fault_prefixes=("bwrap: ", f"{_INIT_NAME}: "))

    # --- One-off sandboxes started ahead of need ----------------------------------------------

    def _park(self, limits: Limits, *, verifier: bool = False) -> _Parked:
        """A one-off sandbox, set up and blocked before its pid 1 runs; its work folder (bound
        at /work) gets main.py when a program is handed to it."""
        uid = self.run_uid()
        folder = tempfile.mkdtemp(prefix=_folder_prefix(), dir=self.work_root)
        cgroup = None
        block_r = block_w = filter_fd = -1
        try:
            if uid is not None:
                os.chown(folder, uid, uid)
            cgroup = self._cgroup("program", limits)
            filter_fd = self._seccomp_fd()
            block_r, block_w = os.pipe()
            options = self._argv(
                folder, limits, filter_fd, verifier=verifier
            )  # ends with --as-pid-1
            init = ONE_OFF_INIT % {"name": _INIT_NAME}
            argv = [*options[:-1], "--block-fd", str(block_r), *options[-1:]]
            proc = spawn(
                [*argv, self.python, "-I", "-c", init],
                cwd=folder,
                env=dict(SANDBOX_ENV),
                preexec=_limiter(limits, uid, cgroup),
                pass_fds=(filter_fd, block_r),
            )
        except BaseException:
            if block_w >= 0:
                os.close(block_w)
            _leave_nothing(folder, cgroup)
            raise
        finally:
            for fd in (filter_fd, block_r):
                if fd >= 0:
                    os.close(fd)
        return _Parked(proc, folder, block_w, cgroup, uid)

    def _take(self, limits: Limits) -> _Parked | None:
        with self._park_lock:
            parked = self._parked.pop(limits, None)
        if parked is not None and parked.proc.poll() is not None:
            _discard_parked(parked)  # it ended while parked (killed from outside)
            return None
        return parked

    def _want(self, limits: Limits) -> None:
        """Park a sandbox of these limits for the next program, in the background."""
        if self.park_ahead <= 0:
            return
        with self._park_lock:
            self._wanted[limits] = None
            self._wanted.move_to_end(limits)
            while len(self._wanted) > _PARKED_KEYS:
                self._wanted.popitem(last=False)
            if self._refiller is None:
                self._refiller = threading.Thread(
                    target=_refill, args=(weakref.ref(self),), name="sandbox-park", daemon=True
                )
                self._refiller.start()
        self._wake.set()

    def _refill_once(self) -> bool:
        """Park one sandbox that is wanted and missing; False when none is."""
        with self._park_lock:
            missing = [key for key in self._wanted if key not in self._parked]
        if not missing:
            return False
        limits = missing[-1]
        try:
            parked = self._park(limits)
        except (OSError, subprocess.SubprocessError):
            logger.exception("could not start a sandbox ahead of need")
            return False
        with self._park_lock:
            if limits in self._parked or limits not in self._wanted:
                extra = parked
            else:
                self._parked[limits], extra = parked, None
        if extra is not None:
            _discard_parked(extra)
        return True

    def close(self) -> None:
        """End the sandboxes parked ahead of need; the next program parks again."""
        with self._park_lock:
            parked = list(self._parked.values())
            self._parked.clear()  # the same dict the finalizer holds
            self._wanted.clear()
        self._wake.set()
        for one in parked:
            _discard_parked(one)

    def parked_pids(self) -> set[int]:
        """The processes of the sandboxes this process parked ahead of need, by any of its
        LocalSandbox objects (they share the run uid): no program runs in them."""
        stack = []
        for sandbox in list(_live):
            if getattr(sandbox, "_pid", None) == os.getpid():
                with sandbox._park_lock:
                    stack += [one.proc.pid for one in sandbox._parked.values()]
        pids: set[int] = set()
        while stack:
            pid = stack.pop()
            pids.add(pid)
            try:
                with open(f"/proc/{pid}/task/{pid}/children") as fh:
                    stack.extend(int(child) for child in fh.read().split())
            except OSError:
                continue
        return pids

    def _after_fork_check(self) -> None:
        if self._pid != os.getpid():
            # A fork of the process that parked them (a Celery pool child): those sandboxes
            # and the thread are the parent's.
            self._init_parking()

    def _init_parking(self) -> None:
        self._pid = os.getpid()
        self._parked: dict[Limits, _Parked] = {}
        self._wanted: OrderedDict[Limits, None] = OrderedDict()
        self._park_lock = threading.Lock()
        self._wake = threading.Event()
        self._refiller: threading.Thread | None = None
        # Parked sandboxes end with their LocalSandbox, collected or at interpreter exit.
        weakref.finalize(self, _discard_all, self._parked, self._park_lock, self._pid)


_PARKED_KEYS = 4  # sets of limits kept parked at once


@dataclass
class _Parked:
    proc: subprocess.Popen
    folder: str
    block: int  # the write end of bwrap's --block-fd
    cgroup: cgroups.SandboxCgroup | None
    uid: int | None


def _discard_parked(parked: _Parked) -> None:
    try:
        os.close(parked.block)  # bwrap reads end-of-file and ends without running anything
    except OSError:
        pass
    _stop_bwrap(parked.proc.pid)
    try:
        parked.proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        kill_group(parked.proc.pid)
        parked.proc.wait()
    for stream in (parked.proc.stdout, parked.proc.stderr):
        if stream is not None:
            stream.close()
    _leave_nothing(parked.folder, parked.cgroup)


def _refill(ref: weakref.ref) -> None:
    """The parking thread: holds no reference to its sandbox while it waits."""
    while True:
        sandbox = ref()
        if sandbox is None:
            return
        wake = sandbox._wake
        while sandbox._refill_once():
            pass
        del sandbox
        wake.wait(timeout=60)
        wake.clear()


def _discard_all(parked: dict, lock: threading.Lock, pid: int) -> None:
    if pid != os.getpid():
        return  # a fork's copy: the sandboxes are the parent's
    with lock:
        ones, _ = list(parked.values()), parked.clear()
    for one in ones:
        _discard_parked(one)


_live: weakref.WeakSet = weakref.WeakSet()


def _stop_bwrap(pid: int) -> None:
    """Kill the sandbox's pid 1 (bwrap's child): the kernel then ends its whole pid namespace
    and bwrap reaps it. Killing bwrap first would hand that pid 1 to the host's init, and it
    would count against the uid's NPROC until that init gets round to reaping it."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as fh:
            children = [int(child) for child in fh.read().split()]
    except OSError:  # no CONFIG_PROC_CHILDREN, or bwrap is already gone
        children = []
    for child in children:
        try:
            os.kill(child, signal.SIGKILL)
        except ProcessLookupError:
            pass
    if not children:
        kill_group(pid)


class UnsandboxedSandbox(_LocalBase):
    """The same limits and scrubbed environment, but the program sees the whole machine."""

    name = "unsandboxed"
    pid_namespace = False
    ONE_OFF_DEPTH = 2  # `python -I main.py`

    def _runner_argv(self, folder: str, limits: Limits, filter_fd: int | None) -> list[str]:
        return [self.python, "-I", "-c", BOOTSTRAP]

    def _work(self, folder: str) -> str:
        return folder

    def _ready(self) -> None:
        if not _warned.is_set():
            _warned.set()
            logger.warning(
                "SANDBOX_ALLOW_UNSANDBOXED: untrusted code runs WITHOUT isolation (network, "
                "files and other processes are reachable); install bubblewrap to fix this"
            )

    def run_python(self, program: str, *, limits: Limits) -> Execution:
        return self._run(program, limits, {})

    def run_verifier(self, program: str, *, limits: Limits) -> Execution:
        """A verifier program, finding its libraries in self.verifier_lib ($VERIFIER_LIB)."""
        if not os.path.isdir(self.verifier_lib):
            error = _no_verifier_lib(self.verifier_lib)
            return classify(RawRun(None, 0.0, b"", b"", error=error), limits)
        return self._run(program, limits, {"VERIFIER_LIB": self.verifier_lib})

    def _run(self, program: str, limits: Limits, extra_env: dict[str, str]) -> Execution:
        uid = self.run_uid()
        cgroup = self._cgroup("program", limits)
        with work_folder(program, uid, self.work_root) as folder:
            try:
                run = execute(
                    [self.python, "-I", "main.py"],
                    cwd=folder,
                    env={**SANDBOX_ENV, "HOME": folder, **extra_env},
                    limits=limits,
                    preexec=_limiter(limits, uid, cgroup),
                )
            finally:
                if uid is not None:
                    _kill_uid(uid)
                if cgroup is not None:
                    cgroup.remove()
        return classify(run, limits)


def _kill_uid(uid: int) -> None:
    """Without a pid namespace, a child that left our process group is only reachable by uid."""

    def sweep() -> None:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
        # kill(-1) reaches every process of this uid but the caller, atomically against forks.
        os.kill(-1, signal.SIGKILL)

    try:
        subprocess.run(["true"], preexec_fn=sweep, check=False)
    except (OSError, subprocess.SubprocessError):
        logger.exception("could not end the leftover processes of uid %d", uid)
