"""Running the runs of one function task: a solution sandbox and a check sandbox, each with a
runner (runner.py) inside, and the worker relaying the check's calls between them.

The verdict is the exit status of the check's process, reported by the check sandbox's runner;
the solution's sandbox can only answer the check's requests with data (and handles: runner.py).
A check that failed where the boundary decided exits with runner.BOUNDARY_EXIT: the run is
`failed`, and its error is the boundary's reason ("boundary: a re.Match returned by ...").
Backends supply `Channel`s (a runner's stdin and stdout); this module drives them the same way
for every backend. A session also runs whole programs (`run_program`: behaviour programs) in
the solution's sandbox, each in a pristine fork as a run is, as the backend's one-off sandbox
would run them."""

from __future__ import annotations

import abc
import base64
import json
import logging
import marshal
import os
import selectors
import signal
import struct
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from workers.sandbox import runner
from workers.sandbox.base import MEMORY_SIGNS, Execution, Limits, Outcome, RawRun, classify

logger = logging.getLogger(__name__)


def length_prefixed(payload: bytes) -> bytes:
    """`payload` after its 4-byte big-endian length, as BOOTSTRAP's `_read` takes it."""
    return struct.pack(">I", len(payload)) + payload


def bootstrap_payload(source: bytes) -> bytes:
    """What BOOTSTRAP reads on a sandbox's stdin to run `source`: this interpreter's tag, the
    source compiled here (marshal), and the source itself, each framed by its 4-byte length.
    A sandbox interpreter of the same tag runs the compiled code; compiling the runner took
    about 30 ms of each runner's start, loading it takes under 1 ms."""
    code = marshal.dumps(compile(source, "inspector-runner", "exec", dont_inherit=True, optimize=0))
    tag = sys.implementation.cache_tag.encode()
    return b"".join(map(length_prefixed, (tag, code, source)))


RUNNER_SOURCE = Path(runner.__file__).read_bytes()
RUNNER_PAYLOAD = bootstrap_payload(RUNNER_SOURCE)
STARTED_SLACK_SECONDS = 2.0  # a runner's start of a run, past its clean-up's limit
READY_SECONDS = 30.0
SOLUTION, CHECK = "solution", "check"
# How the error of a run that failed through the boundary begins (inspector/detect/flags.py).
BOUNDARY_PREFIX = "boundary: "


@dataclass(frozen=True)
class FunctionTask:
    prompt: str
    test: str
    entry_point: str


class _EndedBeforeStart(Exception):
    """The solution's runner was gone before it started a run (FunctionSession.run)."""

    def __init__(self, started: float, message: str) -> None:
        super().__init__(message)
        self.started = started


class ChannelClosed(Exception):
    """The runner at the other end is gone (its sandbox ended)."""


class Channel(Protocol):
    def send(self, message: dict) -> None: ...
    def recv(self, deadline: float) -> dict: ...  # raises TimeoutError, ChannelClosed
    def diagnostics(self) -> str: ...
    def close(self) -> None: ...


class FrameBuffer:
    """Bytes from a runner in, whole messages out."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> None:
        self._buffer += data

    def next(self) -> dict | None:
        if len(self._buffer) < 4:
            return None
        (size,) = struct.unpack(">I", self._buffer[:4])
        if size > runner.MAX_FRAME:
            raise ChannelClosed(f"the runner sent a frame of {size} bytes")
        if len(self._buffer) < 4 + size:
            return None
        body = bytes(self._buffer[4 : 4 + size])
        del self._buffer[: 4 + size]
        try:
            message = json.loads(body)
        except (ValueError, RecursionError) as exc:
            raise ChannelClosed(f"the runner sent a malformed frame: {exc}") from None
        if type(message) is not dict:
            raise ChannelClosed("the runner sent a frame that is not an object")
        return message


class FramedChannel(abc.ABC):
    """Messages over a byte stream; subclasses say how bytes go out and come in."""

    def __init__(self) -> None:
        self._frames = FrameBuffer()

    @abc.abstractmethod
    def send_raw(self, data: bytes) -> None: ...

    @abc.abstractmethod
    def _read_more(self, deadline: float) -> None:
        """Feed self._frames; raise TimeoutError at the deadline, ChannelClosed at the end."""

    def send(self, message: dict) -> None:
        self.send_raw(runner.frame(message))

    def recv(self, deadline: float) -> dict:
        while True:
            message = self._frames.next()
            if message is not None:
                return message
            self._read_more(deadline)


class FdChannel(FramedChannel):
    """A runner reached through two file descriptors (a process's stdin and stdout)."""

    def __init__(self, write_fd: int, read_fd: int, *, on_close: Callable[[], str]) -> None:
        self.write_fd, self.read_fd = write_fd, read_fd
        super().__init__()
        self._on_close = on_close
        self._closed = False
        self._why = ""
        os.set_blocking(read_fd, False)
        self._selector = selectors.DefaultSelector()
        self._selector.register(read_fd, selectors.EVENT_READ)

    def send_raw(self, data: bytes) -> None:
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self.write_fd, view) :]
        except OSError as exc:
            raise ChannelClosed(f"cannot write to the runner: {exc}") from None

    def _read_more(self, deadline: float) -> None:
        while True:
            try:
                chunk = os.read(self.read_fd, 1 << 16)
            except BlockingIOError:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError from None
                self._selector.select(remaining)
                continue
            if not chunk:
                raise ChannelClosed("the runner's output ended")
            self._frames.feed(chunk)
            return

    def diagnostics(self) -> str:
        return self._why

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._selector.close()
        for fd in (self.write_fd, self.read_fd):
            try:
                os.close(fd)
            except OSError:
                pass
        self._why = self._on_close()


OpenPair = Callable[[Limits], tuple[Channel, Channel]]


def _boundary_reason(check_err: str) -> str:
    for line in reversed(check_err.splitlines()):
        if line.startswith(BOUNDARY_PREFIX):
            return line.strip()
    return BOUNDARY_PREFIX + "a value could not cross between the solution and the check"


def _text(b64: str, limit: int) -> str:
    raw = base64.b64decode(b64)[-limit:]
    return raw.decode("utf-8", errors="replace")


class FunctionSession:
    """Runs completions, each in a pristine fork, until closed.

    The runners know nothing of a task until a run starts; each run's child is forked from a
    process that never held another run's data, and after every run the sandbox is emptied of
    its processes and files (runner.py). Nothing one run leaves is there for the next, of its
    own task or another's: so a session may serve the runs of several tasks
    (`run(..., task=...)`), which spreads the cost of starting its two sandboxes."""

    def __init__(
        self,
        open_pair: OpenPair,
        task: FunctionTask | None,
        limits: Limits,
        *,
        one_off: dict | None = None,
    ) -> None:
        # The two sandboxes, joined to each other, are started and thrown away together.
        self._open_pair = open_pair
        self.task = task
        self.limits = limits
        # How the backend's one-off sandbox runs a program, which run_program does alike:
        # {"main_depth": the recursion depth of main.py's own code, "main_file": its name}
        # (runner.program_main).
        self.one_off = dict(one_off or {})
        self._channels: dict[str, Channel] = {}

    def __enter__(self) -> FunctionSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for role in list(self._channels):
            self._drop(role)

    def _drop(self, role: str) -> str:
        # The two sandboxes are joined to each other: both go, and the next run starts a pair.
        other = CHECK if role == SOLUTION else SOLUTION
        partner = self._channels.pop(other, None)
        if partner is not None:
            partner.close()
        channel = self._channels.pop(role, None)
        if channel is None:
            return ""
        channel.close()
        return channel.diagnostics()

    def _ensure_channels(self) -> tuple[Channel, Channel]:
        """Start the sandboxes that are missing, both at once, and wait until they are ready."""
        pending: list[tuple[str, Channel]] = []
        try:
            if len(self._channels) < 2:
                self.close()
                pending.extend(zip((SOLUTION, CHECK), self._open_pair(self.limits), strict=True))
            for role, channel in pending:
                channel.send(
                    {
                        "op": "init",
                        "role": role,
                        "limits": {
                            "memory_bytes": self.limits.memory_bytes,
                            "wall_seconds": self.limits.wall_seconds,
                            "output_bytes": self.limits.output_bytes,
                            "tail_bytes": self.limits.tail_bytes,
                        },
                        **getattr(channel, "init_extra", {}),
                    }
                )
            deadline = time.monotonic() + READY_SECONDS
            for _role, channel in pending:
                ready = channel.recv(deadline)
                if ready.get("op") != "ready":
                    raise ChannelClosed(f"it answered {ready!r} instead of ready")
        except (TimeoutError, ChannelClosed, ValueError, OSError) as exc:
            why = []
            for role, channel in pending:
                channel.close()
                why.append(f"{role}: {channel.diagnostics()}")
            raise ChannelClosed(f"a sandbox did not start: {exc!r}; {'; '.join(why)}") from None
        self._channels.update(pending)
        return self._channels[SOLUTION], self._channels[CHECK]

    def run(
        self,
        completion: str,
        *,
        task: FunctionTask | None = None,
        wall_seconds: float | None = None,
    ) -> Execution:
        """One run in a pristine fork. `wall_seconds`, at most the session's limit, shortens
        this run's wall clock (a mutant of a fast reference need not be given ten seconds to
        loop forever); a run that reaches it ends the session, as any timeout does."""
        task = task or self.task
        assert task is not None, "a session made without a task needs one per run"
        wall = self.limits.wall_seconds
        if wall_seconds is not None:
            wall = min(wall, wall_seconds)
        try:
            return self._run(completion, task, wall)
        except _EndedBeforeStart:
            # The solution's runner ended between runs: it ends its sandbox when it cannot
            # clean up after a run (or not in time). This run starts again in a fresh pair,
            # with a clock of its own: the last run's mess is no verdict against it.
            try:
                return self._run(completion, task, wall)
            except _EndedBeforeStart as exc:
                return self._result(Outcome.SANDBOX_ERROR, exc.started, error=str(exc))

    def _run(self, completion: str, task: FunctionTask, wall: float) -> Execution:
        started = time.monotonic()
        deadline = started + wall
        try:
            solution, check = self._ensure_channels()
        except ChannelClosed as exc:
            return self._result(Outcome.SANDBOX_ERROR, started, error=str(exc))
        start = {
            "op": "start",
            "source": task.prompt + completion,
            "entry_point": task.entry_point,
            # Its traceback numbers the completion's lines from 1, as the task wrote them.
            "prompt_lines": task.prompt.count("\n"),
        }
        try:
            solution.send(start)
        except ChannelClosed as exc:
            why = self._drop(SOLUTION)
            self._drop(CHECK)
            raise _EndedBeforeStart(
                started, f"the solution's sandbox had ended: {exc}; {why}"
            ) from None
        oom_before = self._oom_kills()
        solution_alive = True
        try:
            # Both sandboxes start their run at once; the solution's "started" comes before
            # any answer of its, so it is read before the check's first call is relayed.
            check.send(
                {
                    "op": "start",
                    "prompt": task.prompt,
                    "test": task.test,
                    "entry_point": task.entry_point,
                }
            )
            # The solution's runner reads this start once it has cleaned up after the last
            # run (runner.TIDY_SECONDS at most, or it ends its sandbox): the run's clock starts
            # when the run does.
            try:
                solution.recv(deadline + runner.TIDY_SECONDS + STARTED_SLACK_SECONDS)
            except (ChannelClosed, TimeoutError) as exc:
                why = self._drop(SOLUTION)
                self._drop(CHECK)  # its run has started: nothing of it may reach the next
                raise _EndedBeforeStart(
                    started,
                    "the solution's sandbox did not start the run: "
                    f"{type(exc).__name__} {exc}; {why}",
                ) from None
            started = time.monotonic()
            deadline = started + wall
            while True:
                message = check.recv(deadline)
                if message.get("op") == "verdict":
                    verdict = message
                    break
                reply = {"gone": "the solution's sandbox ended"}
                if solution_alive:
                    try:
                        solution.send({"op": "call", "call": message["call"]})
                        answer = solution.recv(deadline)
                        reply = answer.get("reply", {"gone": "the solution's runner misspoke"})
                    except ChannelClosed:
                        solution_alive = False
                check.send({"op": "reply", "reply": reply})
        except TimeoutError:
            self.close()
            return self._result(
                Outcome.TIMED_OUT,
                started,
                error=f"wall-clock limit of {wall:.3g} s reached",
            )
        except (ChannelClosed, KeyError, ValueError) as exc:
            oom = self._oom_kills() > oom_before
            why = self._drop(CHECK)
            self._drop(SOLUTION)
            if oom:
                return self._result(Outcome.OUT_OF_MEMORY, started, error=self._oom_error())
            return self._result(
                Outcome.SANDBOX_ERROR, started, error=f"check sandbox failed: {exc}; {why}"
            )
        ended = {}
        if solution_alive:
            try:
                solution.send({"op": "end"})
                # A runner the run stopped must not hold the worker past the run's limit.
                ended = solution.recv(max(deadline, time.monotonic()) + 0.5)
            except (ChannelClosed, TimeoutError):
                solution_alive = False
        execution = self._verdict(verdict, ended, started)
        if not execution.passed and self._oom_kills() > oom_before:
            # The kernel's limit on a whole sandbox: a process of the run was killed for it.
            execution = Execution(
                Outcome.OUT_OF_MEMORY,
                execution.exit_code,
                execution.duration,
                execution.stdout_tail,
                execution.stderr_tail,
                self._oom_error(),
            )
        if not solution_alive:
            self._drop(SOLUTION)  # the next run starts a fresh one
        return execution

    def run_program(self, program: str, *, limits: Limits) -> Execution:
        """Run `program` as the backend's `run_python` runs it (`python -I main.py` in /work,
        under `limits`), but in a pristine fork of this session's solution sandbox instead of
        a sandbox of its own (runner.py, "Programs"), and with the session's hash seed. Its
        wall clock, output cap and tails, memory and CPU limits are `limits`' own, not the
        session's (a behaviour program's wall clock is longer than a run's); the sandbox's
        limits (memory and processes together, file sizes) are the session's, and must be
        the same. The result is named as run_python names it. A program that reaches its wall
        clock ends its sandbox, as any timeout does."""
        mine = (limits.memory_bytes, limits.max_processes, limits.file_bytes)
        if mine != (self.limits.memory_bytes, self.limits.max_processes, self.limits.file_bytes):
            raise ValueError(
                "a program's memory, process and file limits must be its session's: "
                f"{mine} against {self.limits}"
            )
        try:
            return self._run_program(program, limits)
        except _EndedBeforeStart:
            # As for a run (see run): the last run's mess is no verdict against this one.
            try:
                return self._run_program(program, limits)
            except _EndedBeforeStart as exc:
                return self._result(Outcome.SANDBOX_ERROR, exc.started, error=str(exc))

    def _run_program(self, program: str, limits: Limits) -> Execution:
        started = time.monotonic()
        try:
            solution, _check = self._ensure_channels()
        except ChannelClosed as exc:
            return self._result(Outcome.SANDBOX_ERROR, started, error=str(exc))
        message = {
            "op": "program",
            "program": program,
            "limits": {
                "memory_bytes": limits.memory_bytes,
                "wall_seconds": limits.wall_seconds,
                "output_bytes": limits.output_bytes,
                "tail_bytes": limits.tail_bytes,
            },
            **self.one_off,
        }
        try:
            solution.send(message)
            # Read once the runner has cleaned up after the last run (see _run).
            deadline = started + limits.wall_seconds + runner.TIDY_SECONDS
            reply = solution.recv(deadline + STARTED_SLACK_SECONDS)
            if reply.get("op") != "started":
                raise ChannelClosed(f"it answered {reply.get('op')!r} instead of started")
        except (ChannelClosed, TimeoutError) as exc:
            why = self._drop(SOLUTION)  # the check's sandbox had no part in it
            raise _EndedBeforeStart(
                started,
                "the solution's sandbox did not start the program: "
                f"{type(exc).__name__} {exc}; {why}",
            ) from None
        oom_before = self._oom_kills()
        started = time.monotonic()
        try:
            ended = solution.recv(started + limits.wall_seconds)
            if ended.get("op") != "ended":
                raise ChannelClosed(f"it answered {ended.get('op')!r} instead of ended")
        except TimeoutError:
            self._drop(SOLUTION)
            return self._result(
                Outcome.TIMED_OUT,
                started,
                error=f"wall-clock limit of {limits.wall_seconds:g} s reached",
            )
        except (ChannelClosed, ValueError) as exc:
            oom = self._oom_kills() > oom_before
            why = self._drop(SOLUTION)
            if oom:
                return self._result(
                    Outcome.OUT_OF_MEMORY,
                    started,
                    error=f"memory limit of {limits.memory_bytes} bytes",
                )
            return self._result(
                Outcome.SANDBOX_ERROR,
                started,
                error=f"the solution's sandbox failed during the program: {exc}; {why}",
            )
        code = ended.get("exit")
        if type(code) is not int:
            code = None
        if code not in (0, None) and self._oom_kills() > oom_before:
            code = -signal.SIGKILL  # the sandbox's memory limit, named as run_python names it
        # As a one-off sandbox reports a program killed by signal N (an exit status of 128+N).
        if code is not None and 128 < code <= 128 + 64:
            code = 128 - code
        raw = RawRun(
            code,
            time.monotonic() - started,
            base64.b64decode(ended.get("stdout", "")),
            base64.b64decode(ended.get("stderr", "")),
            "output" if ended.get("killed_for") == "output" else "",
        )
        if code is None:
            raw.error = "the program's child left no exit status"
        return classify(raw, limits, fault_prefixes=(runner.PROGRAM_FAULT,))

    def _oom_kills(self) -> int:
        """Processes the kernel killed in this session's sandboxes for their memory limit."""
        total = 0
        for channel in self._channels.values():
            counter = getattr(channel, "oom_kills", None)
            if counter is not None:
                total += counter()
        return total

    def _oom_error(self) -> str:
        return (
            f"memory limit of the sandbox ({self.limits.memory_bytes} bytes, all its processes "
            "together) reached: the kernel killed a process of the run"
        )

    def _verdict(self, verdict: dict, ended: dict, started: float) -> Execution:
        tail = self.limits.tail_bytes
        out = _text(ended.get("stdout", ""), tail)
        check_err = _text(verdict.get("stderr", ""), tail)
        solution_err = _text(ended.get("stderr", ""), tail)
        err = check_err
        if solution_err:
            err = (check_err + "\n[solution's stderr]\n" + solution_err)[-tail:]
        code = verdict.get("exit")
        outcome, error = Outcome.FAILED, ""
        if "output" in (verdict.get("killed_for"), ended.get("killed_for")):
            outcome, error = (
                Outcome.OUTPUT_TRUNCATED,
                f"output passed {self.limits.output_bytes} bytes",
            )
        elif code == 0:
            outcome = Outcome.PASSED
        elif -signal.SIGXCPU in (code, ended.get("exit")):
            outcome, error = Outcome.TIMED_OUT, "CPU time limit reached"
        elif code == runner.BOUNDARY_EXIT:
            # The check failed where the boundary decided: a value that could not cross, or an
            # operation refused on a handle. The status is the check's runner's own; the reason
            # is the last line its child wrote.
            outcome, error = Outcome.FAILED, _boundary_reason(check_err)
        elif MEMORY_SIGNS.search(check_err) or MEMORY_SIGNS.search(solution_err):
            outcome, error = (
                Outcome.OUT_OF_MEMORY,
                f"memory limit of {self.limits.memory_bytes} bytes",
            )
        return Execution(outcome, code, time.monotonic() - started, out, err, error)

    def _result(self, outcome: Outcome, started: float, *, error: str) -> Execution:
        return Execution(outcome, None, time.monotonic() - started, "", "", error)
