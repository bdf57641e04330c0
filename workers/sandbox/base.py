"""What every sandbox backend promises (limits, the result of one run), and the plumbing they
share: running one command under a deadline and an output cap, and naming what happened."""

from __future__ import annotations

import logging
import os
import re
import selectors
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

logger = logging.getLogger(__name__)

_CHUNK = 1 << 16
# Best effort, from what the run leaves behind: RLIMIT_AS turns most over-allocation into a
# Python MemoryError (or a C library's ENOMEM message) on stderr; the kernel OOM killer shows
# up as a SIGKILL that we did not send.
MEMORY_SIGNS = re.compile(r"^[\w.]*MemoryError\b|Cannot allocate memory|out of memory", re.M)


@dataclass(frozen=True)
class Limits:
    wall_seconds: float = 10.0  # wall-clock; ends the whole process tree
    memory_bytes: int = 1 << 30  # address space (RLIMIT_AS)
    max_processes: int = 64  # RLIMIT_NPROC for the sandbox uid
    output_bytes: int = 1 << 20  # stdout+stderr total before the run is killed as output_truncated
    tail_bytes: int = 4096  # how much of the END of each stream is kept in the result
    file_bytes: int = 64 << 20  # RLIMIT_FSIZE


class Outcome(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    OUT_OF_MEMORY = "out_of_memory"
    OUTPUT_TRUNCATED = "output_truncated"
    SANDBOX_ERROR = "sandbox_error"
    # Never said by a sandbox: the platform did not run the program, because its result could
    # not change anything (a behaviour program of a mutant its check had already killed).
    SKIPPED = "skipped"


@dataclass(frozen=True)
class Execution:
    outcome: Outcome
    exit_code: int | None  # negative = killed by that signal; None if it never started
    duration: float  # seconds, wall clock of the sandboxed program
    stdout_tail: str  # last tail_bytes of stdout, decoded utf-8 with errors="replace"
    stderr_tail: str
    error: str = ""  # why, for SANDBOX_ERROR / TIMED_OUT / OUT_OF_MEMORY / OUTPUT_TRUNCATED

    @property
    def passed(self) -> bool:
        return self.outcome is Outcome.PASSED

    @property
    def timed_out(self) -> bool:
        return self.outcome is Outcome.TIMED_OUT


class SandboxUnavailable(Exception):
    """The backend cannot run on this machine; the message says what to install or set."""


class Sandbox(Protocol):
    name: str

    def run_python(self, program: str, *, limits: Limits) -> Execution: ...


@dataclass
class RawRun:
    exit_code: int | None
    duration: float
    stdout: bytes
    stderr: bytes
    killed_for: str = ""  # "timeout" or "output" when we ended it
    error: str = ""


def _keep_tail(buf: bytearray, chunk: bytes, keep: int) -> None:
    buf += chunk
    if len(buf) > keep:
        del buf[: len(buf) - keep]


# How long a stopped process gets to end before its process group is killed. bwrap ends once
# the kernel has ended every process of the sandbox's pid namespace and bwrap has reaped its
# pid 1; a fork bomb on a loaded machine can take over a second. Killing bwrap sooner hands that
# pid 1 to the host's init, and an init that does not reap (a container's) keeps it for good: a
# process of the run's uid that outlives the run.
STOP_GRACE_SECONDS = 10.0


def kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def execute(
    argv: list[str],
    *,
    cwd: str,
    env: dict[str, str],
    limits: Limits,
    preexec: Callable[[], None],
    stop: Callable[[int], None] = kill_group,
    pass_fds: tuple[int, ...] = (),
) -> RawRun:
    """Run argv in a session of its own, keep the ends of its output, and `stop(pid)` it at
    the limits; whatever is left of its process group is killed when it ends."""
    start = time.monotonic()
    try:
        proc = spawn(argv, cwd=cwd, env=env, preexec=preexec, pass_fds=pass_fds)
    except (OSError, subprocess.SubprocessError) as exc:
        error = f"cannot start {argv[0]}: {exc}"
        return RawRun(None, time.monotonic() - start, b"", b"", error=error)
    return supervise(proc, limits=limits, stop=stop, start=start)


def spawn(
    argv: list[str],
    *,
    cwd: str,
    env: dict[str, str],
    preexec: Callable[[], None],
    pass_fds: tuple[int, ...] = (),
) -> subprocess.Popen:
    """Start argv in a session of its own, stdin closed, stdout and stderr piped."""
    return subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=preexec,
        start_new_session=True,
        pass_fds=pass_fds,
    )


def supervise(
    proc: subprocess.Popen,
    *,
    limits: Limits,
    stop: Callable[[int], None] = kill_group,
    start: float | None = None,
) -> RawRun:
    """Keep the ends of a started process's output and `stop(pid)` it at the limits, counted
    from `start` (default: now); whatever is left of its process group is killed when it ends."""
    start = time.monotonic() if start is None else start
    deadline = start + limits.wall_seconds
    argv = proc.args if isinstance(proc.args, list) else [str(proc.args)]
    assert proc.stdout is not None and proc.stderr is not None
    out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
    tails = {out_fd: bytearray(), err_fd: bytearray()}
    total, killed_for, exited = 0, "", False
    # A pidfd tells us the child exited without reaping it, so its pgid cannot be reused
    # before we kill what is left of the group.
    try:
        pidfd = os.pidfd_open(proc.pid)
    except OSError as exc:
        kill_group(proc.pid)
        proc.wait()
        proc.stdout.close()
        proc.stderr.close()
        return RawRun(None, time.monotonic() - start, b"", b"", error=f"pidfd_open: {exc}")
    selector = selectors.DefaultSelector()
    try:
        selector.register(pidfd, selectors.EVENT_READ)
        for fd in tails:
            selector.register(fd, selectors.EVENT_READ)
        open_streams = len(tails)
        while not killed_for and (open_streams or not exited):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                killed_for = "timeout"
                break
            # Once the child is gone, only drain what is already buffered: a leftover
            # grandchild holding the pipes open must not keep us here.
            events = selector.select(0 if exited else remaining)
            if exited and not events:
                break
            for key, _ in events:
                if key.fd == pidfd:
                    exited = True
                    selector.unregister(pidfd)
                    continue
                chunk = os.read(key.fd, _CHUNK)
                if not chunk:
                    selector.unregister(key.fd)
                    open_streams -= 1
                    continue
                total += len(chunk)
                _keep_tail(tails[key.fd], chunk, limits.tail_bytes)
                if total > limits.output_bytes:
                    killed_for = "output"
                    break
        if killed_for:
            stop(proc.pid)
            try:
                proc.wait(timeout=STOP_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                logger.warning("%s outlived its stop; killing its process group", argv[0])
    finally:
        selector.close()
        os.close(pidfd)
        if proc.returncode is None:  # not reaped yet, so its pgid is still its own
            kill_group(proc.pid)
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()
    return RawRun(
        proc.returncode,
        time.monotonic() - start,
        bytes(tails[out_fd]),
        bytes(tails[err_fd]),
        killed_for,
    )


def _decode(tail: bytes, limits: Limits) -> str:
    if len(tail) >= limits.tail_bytes:
        # Cut from a longer stream: drop the rest of a character whose start was cut off.
        tail = tail[:3].lstrip(bytes(range(0x80, 0xC0))) + tail[3:]
    return tail.decode("utf-8", errors="replace")


def classify(run: RawRun, limits: Limits, *, fault_prefixes: tuple[str, ...] = ()) -> Execution:
    """Name what happened; `fault_prefixes` mark stderr written by the sandbox's own tooling."""
    out, err = _decode(run.stdout, limits), _decode(run.stderr, limits)

    def result(outcome: Outcome, error: str = "") -> Execution:
        return Execution(outcome, run.exit_code, run.duration, out, err, error)

    code = run.exit_code
    if code is None:
        return result(Outcome.SANDBOX_ERROR, run.error)
    if run.killed_for == "output":
        return result(Outcome.OUTPUT_TRUNCATED, f"output passed {limits.output_bytes} bytes")
    if run.killed_for == "timeout":
        return result(Outcome.TIMED_OUT, f"wall-clock limit of {limits.wall_seconds:g} s reached")
    if code == 0:
        return result(Outcome.PASSED)
    if code in (1, 126, 127) and fault_prefixes and err.startswith(fault_prefixes):
        return result(Outcome.SANDBOX_ERROR, err.strip())
    if code == -signal.SIGKILL or MEMORY_SIGNS.search(err):
        return result(Outcome.OUT_OF_MEMORY, f"memory limit of {limits.memory_bytes} bytes")
    if code == -signal.SIGXCPU:
        return result(Outcome.TIMED_OUT, "CPU time limit reached")
    return result(Outcome.FAILED)
