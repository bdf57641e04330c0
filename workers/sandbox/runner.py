"""The program that runs INSIDE a sandbox: one per sandbox, serving every run of one task.

It is sent as source text to a bootstrap (`BOOTSTRAP`) on the sandbox's stdin, so it must use
the standard library only and import nothing of the project. The worker imports it too, for the
codec and the framing.

Two roles, each in a sandbox of its own:
- `solution`: per run, forks a child that executes the prompt and the completion, then answers
  calls to the entry point with plain data. Whatever the solution does (exit, patch builtins,
  return an object whose __eq__ is always true) stays on this side.
- `check`: per run, forks a child that executes the prompt and the tests and calls
  `check(candidate)`, where `candidate` is a proxy that sends each call, as plain data, through
  the worker to the solution's sandbox. The child's exit status is the verdict; nothing the
  solution controls can produce it.

Between runs the runner kills every other process of its sandbox and empties the run's work
folder and /tmp, so each run starts clean (a fork of a fresh interpreter, not a reused one).

Frames: a 4-byte big-endian length, then UTF-8 JSON. Values cross as tagged JSON of literals
only (None, bool, int, float, str, bytes, list, tuple, dict, set, frozenset, complex), checked
by exact type: a subclass of int with a custom __eq__ does not cross. Never pickle.
"""

from __future__ import annotations

import base64
import builtins
import json
import math
import os
import selectors
import shutil
import signal
import struct
import sys
import time
import traceback

MAX_FRAME = 64 << 20
MAX_DEPTH = 200
CHUNK = 1 << 16

# Reads the runner's source from stdin with os.read, not sys.stdin: a buffered reader would
# swallow the frames that follow it.
BOOTSTRAP = """import os, struct
def _read(n):
    data = b""
    while len(data) < n:
        chunk = os.read(0, n - len(data))
        if not chunk:
            raise SystemExit("inspector-runner: stdin closed")
        data += chunk
    return data
exec(compile(_read(struct.unpack(">I", _read(4))[0]), "inspector-runner", "exec"))
"""


class BoundaryError(Exception):
    """A value that is not plain data, or a frame that breaks the protocol."""


# --- Codec ---------------------------------------------------------------------------------------


def encode(value, depth=0):
    if depth > MAX_DEPTH:
        raise BoundaryError("value nested too deeply to cross the sandbox boundary")
    kind = type(value)
    if value is None or kind is bool or kind is str:
        return value
    if kind is int:
        return value if -(2**53) < value < 2**53 else {"i": str(value)}
    if kind is float:
        return value if math.isfinite(value) else {"f": repr(value)}
    if kind is list:
        return [encode(v, depth + 1) for v in value]
    if kind is tuple:
        return {"t": [encode(v, depth + 1) for v in value]}
    if kind is dict:
        return {"d": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in value.items()]}
    if kind is set:
        return {"s": [encode(v, depth + 1) for v in value]}
    if kind is frozenset:
        return {"fs": [encode(v, depth + 1) for v in value]}
    if kind is bytes:
        return {"b": base64.b64encode(value).decode("ascii")}
    if kind is complex:
        return {"c": [encode(value.real), encode(value.imag)]}
    raise BoundaryError(f"a {kind.__module__}.{kind.__qualname__} is not plain data")


def decode(data, depth=0):
    if depth > MAX_DEPTH:
        raise BoundaryError("value nested too deeply")
    kind = type(data)
    if data is None or kind in (bool, str, int, float):
        return data
    if kind is list:
        return [decode(v, depth + 1) for v in data]
    if kind is dict and len(data) == 1:
        ((tag, body),) = data.items()
        if tag == "i" and type(body) is str:
            return int(body)
        if tag == "f" and body in ("nan", "inf", "-inf"):
            return float(body)
        if tag == "b" and type(body) is str:
            return base64.b64decode(body, validate=True)
        if type(body) is list:
            items = [decode(v, depth + 1) for v in body] if tag != "d" else None
            if tag == "t":
                return tuple(items)
            if tag == "s":
                return set(items)
            if tag == "fs":
                return frozenset(items)
            if tag == "c" and len(items) == 2:
                return complex(items[0], items[1])
            if tag == "d":
                out = {}
                for pair in body:
                    if type(pair) is not list or len(pair) != 2:
                        raise BoundaryError("malformed dict entry")
                    out[decode(pair[0], depth + 1)] = decode(pair[1], depth + 1)
                return out
    raise BoundaryError(f"malformed value: {str(data)[:80]}")


# --- Framing -------------------------------------------------------------------------------------


def frame(message: dict) -> bytes:
    body = json.dumps(message, separators=(",", ":"), allow_nan=False).encode()
    if len(body) > MAX_FRAME:
        raise BoundaryError(f"message of {len(body)} bytes exceeds {MAX_FRAME}")
    return struct.pack(">I", len(body)) + body


def write_frame(fd: int, message: dict) -> None:
    data = memoryview(frame(message))
    while data:
        data = data[os.write(fd, data) :]


def _read_exact(fd: int, n: int) -> bytes | None:
    parts, got = [], 0
    while got < n:
        chunk = os.read(fd, n - got)
        if not chunk:
            return None
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


def read_frame(fd: int) -> dict | None:
    """The next message, or None at end of stream."""
    head = _read_exact(fd, 4)
    if head is None:
        return None
    (size,) = struct.unpack(">I", head)
    if size > MAX_FRAME:
        raise BoundaryError(f"frame of {size} bytes exceeds {MAX_FRAME}")
    body = _read_exact(fd, size)
    if body is None:
        return None
    message = json.loads(body)
    if type(message) is not dict:
        raise BoundaryError("a frame must hold an object")
    return message


# --- Inside the children -------------------------------------------------------------------------

CALL_IN, CALL_OUT = 3, 4  # the child's protocol descriptors
PRELOAD = (
    "typing", "math", "re", "collections", "itertools", "functools", "string", "random",
    "hashlib", "heapq", "bisect", "statistics", "fractions", "decimal", "datetime", "copy",
    "operator", "fcntl", "resource",
)  # fmt: skip


def _exception_name(exc: BaseException) -> str:
    kind = type(exc)
    # Only ordinary builtin exceptions keep their type on the other side: SystemExit or
    # KeyboardInterrupt raised there would end the check as if it had finished, and a
    # StopIteration would silently end a check's loop over map(candidate, ...).
    if kind.__module__ == "builtins" and issubclass(kind, Exception) and kind not in _STOPS:
        return kind.__name__
    return "Exception"


_STOPS = (StopIteration, StopAsyncIteration)


def _serve_solution(source: str, entry_point: str) -> None:
    namespace = {"__name__": "__main__", "__builtins__": builtins}
    exec(compile(source, "solution.py", "exec"), namespace)
    target = namespace.get(entry_point)
    while True:
        request = read_frame(CALL_IN)
        if request is None:
            os._exit(0)
        try:
            if not callable(target):
                raise NameError(f"the solution defines no function {entry_point!r}")
            args = decode(request["args"])
            kwargs = decode(request["kwargs"])
            reply = {"ok": encode(target(*args, **kwargs))}
        except BaseException as exc:  # noqa: BLE001 (every failure is the candidate's answer)
            reply = {"raise": [_exception_name(exc), str(exc)[:2000]]}
        _flush()
        write_frame(CALL_OUT, reply)


class Candidate:
    """What the check calls: each call crosses to the solution's sandbox as plain data."""

    def __init__(self, name: str) -> None:
        self.__name__ = name

    def __call__(self, *args, **kwargs):
        write_frame(CALL_OUT, {"args": encode(list(args)), "kwargs": encode(kwargs)})
        reply = read_frame(CALL_IN)
        if reply is None or "gone" in reply:
            why = (reply or {}).get("gone", "the connection closed")
            raise RuntimeError(f"the candidate's process ended during the call: {why}")
        if "ok" in reply:
            return decode(reply["ok"])
        name, message = reply["raise"]
        kind = getattr(builtins, str(name), None)
        if not (isinstance(kind, type) and issubclass(kind, Exception)) or kind in _STOPS:
            kind = RuntimeError
        raise kind(message)


def check_code(prompt: str, test: str):
    """The prompt (it may define helpers the tests use) and the tests, compiled for the check's
    side; raises the SyntaxError of the task's own code."""
    source = prompt + "\n" + test + "\n"
    try:
        return compile(source, "check.py", "exec")
    except SyntaxError as original:
        # A prompt that ends with a bare signature has no body on this side: give it one.
        stubbed = prompt.rstrip("\n") + "\n    pass\n\n" + test + "\n"
        try:
            return compile(stubbed, "check.py", "exec")
        except SyntaxError:
            raise original from None


def _run_check(code, prompt: str, test: str, entry_point: str) -> None:
    candidate = Candidate(entry_point)
    namespace = {"__name__": "__main__", "__builtins__": builtins}
    try:
        exec(code or check_code(prompt, test), namespace)
        # Tests that name the entry point instead of using `candidate` reach the solution too.
        namespace[entry_point] = candidate
        namespace["check"](candidate)
    except BaseException:  # noqa: BLE001
        traceback.print_exc()
        _flush()
        os._exit(1)
    _flush()
    os._exit(0)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001, S110 (a closed or replaced stream loses its output)
            pass


# --- The runner ----------------------------------------------------------------------------------


class Runner:
    def __init__(self, init: dict) -> None:
        self.role = init["role"]
        self.limits = init["limits"]
        self.namespace = bool(init.get("pid_namespace", True))
        self.work = init.get("work", "/work")
        # A pipe pair straight to the other sandbox's runner (local backend): the check's calls
        # reach the solution's runner without a detour through the worker.
        self.peer = init.get("peer")  # [read fd, write fd] or None
        self.count = 0
        self.child = None
        self.compiled: dict = {}

    def _check_code(self, message: dict):
        """Compiled once per task, here, so that every run's fork has it; None when it does
        not compile (the run's child then reports the error)."""
        key = (message["prompt"], message["test"])
        if key not in self.compiled:
            if len(self.compiled) >= 16:
                self.compiled.clear()
            try:
                self.compiled[key] = check_code(*key)
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                self.compiled[key] = None
        return self.compiled[key]

    def _limit_child(self) -> None:
        import resource

        memory = self.limits["memory_bytes"]
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        cpu = int(self.limits["wall_seconds"]) + 1
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))

    def start(self, message: dict) -> None:
        self.count += 1
        # A name no earlier run could have taken in advance.
        folder = os.path.join(self.work, f"run{self.count}-{os.urandom(8).hex()}")
        os.mkdir(folder, 0o700)
        code = self._check_code(message) if self.role == "check" else None
        direct = bool(self.peer) and self.role == "check"
        if self.peer:
            # Whatever an earlier run left in the pair (its processes are all dead by now) is
            # not this run's to read.
            _drain(self.peer[0])
        if direct:
            # The check's child talks to the solution's runner itself.
            call_in_r, call_out_w = os.dup(self.peer[0]), os.dup(self.peer[1])
            call_in_w = call_out_r = None
        else:
            call_in_r, call_in_w = os.pipe()  # runner -> child
            call_out_r, call_out_w = os.pipe()  # child -> runner
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                import fcntl

                os.setsid()
                os.chdir(folder)
                # Park the four ends above any descriptor in use, then put them in place.
                wanted = ((out_w, 1), (err_w, 2), (call_in_r, CALL_IN), (call_out_w, CALL_OUT))
                parked = [(fcntl.fcntl(src, fcntl.F_DUPFD, 1000), dst) for src, dst in wanted]
                for src, dst in parked:
                    os.dup2(src, dst)
                os.closerange(CALL_OUT + 1, 65536)
                devnull = os.open(os.devnull, os.O_RDONLY)
                os.dup2(devnull, 0)
                os.close(devnull)
                # Line-buffered, and flushed before every answer and exit: output is evidence.
                sys.stdout = open(1, "w", 1, encoding="utf-8", errors="replace", closefd=False)
                sys.stderr = open(2, "w", 1, encoding="utf-8", errors="replace", closefd=False)
                self._limit_child()
                if self.role == "solution":
                    _serve_solution(message["source"], message["entry_point"])
                else:
                    _run_check(code, message["prompt"], message["test"], message["entry_point"])
            except BaseException:  # noqa: BLE001
                traceback.print_exc()
            finally:
                _flush()
                os._exit(1)
        for fd in (call_in_r, call_out_w, out_w, err_w):
            os.close(fd)
        self.child = {
            "pid": pid,
            "pidfd": os.pidfd_open(pid),
            "to": call_in_w,
            "from": call_out_r,
            "out": out_r,
            "err": err_r,
            "tails": {out_r: bytearray(), err_r: bytearray()},
            "bytes": 0,
            "exit": None,
            "killed_for": "",
            "folder": folder,
            "started": time.monotonic(),
        }

    def _drain(self, fd: int) -> bool:
        child = self.child
        chunk = os.read(fd, CHUNK)
        if not chunk:
            return False
        child["bytes"] += len(chunk)
        tail = child["tails"][fd]
        tail += chunk
        keep = self.limits["tail_bytes"]
        if len(tail) > keep:
            del tail[: len(tail) - keep]
        if child["bytes"] > self.limits["output_bytes"] and not child["killed_for"]:
            child["killed_for"] = "output"
            self._kill_child()
        return True

    def _kill_child(self) -> None:
        try:
            os.killpg(self.child["pid"], signal.SIGKILL)
        except OSError:
            pass

    def wait_child_message(self) -> dict | None:
        """Pump the child's output until it sends a frame (returned) or exits (None)."""
        child = self.child
        sel = child.get("selector")
        if sel is None:
            # One selector for the whole run: a call is answered many times per run.
            sel = child["selector"] = selectors.DefaultSelector()
            for fd in (child["from"], child["out"], child["err"], child["pidfd"]):
                if fd is not None:
                    sel.register(fd, selectors.EVENT_READ)
            child["open"] = {child["out"], child["err"]}
        open_fds = child["open"]
        if child["exit"] is not None:
            return None
        while True:
            for key, _ in sel.select():
                fd = key.fd
                if fd == child["from"]:
                    try:
                        message = read_frame(fd)
                    except (BoundaryError, ValueError) as exc:
                        self._kill_child()
                        child["protocol_error"] = str(exc)
                        message = None
                    if message is not None:
                        return message
                    sel.unregister(fd)
                elif fd == child["pidfd"]:
                    sel.unregister(fd)
                    self._reap_child()
                    for other in list(open_fds):
                        while self._drain_nonblocking(other):
                            pass
                    return None
                elif not self._drain(fd):
                    sel.unregister(fd)
                    open_fds.discard(fd)

    def _drain_nonblocking(self, fd: int) -> bool:
        """Read what is buffered, if anything; True while there may be more."""
        os.set_blocking(fd, False)
        try:
            return self._drain(fd)
        except BlockingIOError:
            return False
        finally:
            os.set_blocking(fd, True)

    def _reap_child(self) -> None:
        child = self.child
        if child["exit"] is None:
            _, status = os.waitpid(child["pid"], 0)
            child["exit"] = os.waitstatus_to_exitcode(status)

    def finish(self) -> dict:
        """End the run: kill whatever it left, clean its traces, report its output."""
        child = self.child
        self._kill_child()
        if self.namespace:
            # Every process of this sandbox but the runner (and the init above it).
            try:
                os.kill(-1, signal.SIGKILL)
            except OSError:
                pass
        self._reap_child()
        for fd in (child["out"], child["err"]):
            while self._drain_nonblocking(fd):
                pass
        if self.namespace:
            # The runner is the subreaper: every process the run left is its child by now.
            while True:
                try:
                    os.waitpid(-1, 0)
                except ChildProcessError:
                    break
        if child.get("selector") is not None:
            child["selector"].close()
        for fd in (child["to"], child["from"], child["out"], child["err"], child["pidfd"]):
            if fd is None:
                continue
            try:
                os.close(fd)
            except OSError:
                pass
        # Nothing of this run is left for the next: the whole work folder and the scratch
        # folders are emptied, read-only subfolders included.
        scratch = [self.work]
        if self.namespace:
            scratch += ["/tmp", "/dev/shm", "/dev/mqueue"]
        for folder in scratch:
            _empty(folder)
        self.child = None
        return {
            "exit": child["exit"],
            "stdout": base64.b64encode(bytes(child["tails"][child["out"]])).decode(),
            "stderr": base64.b64encode(bytes(child["tails"][child["err"]])).decode(),
            "killed_for": child["killed_for"],
            "protocol_error": child.get("protocol_error", ""),
            "duration": time.monotonic() - child["started"],
        }

    def answer(self, call: dict) -> dict:
        """Hand a call to the solution's child; its answer, or why there is none."""
        child = self.child
        message = None
        if child["exit"] is None and self.send_to_child(call):
            message = self.wait_child_message()
        if message is None:
            why = f"exit status {child['exit']}" if child["exit"] is not None else "no answer"
            if child["killed_for"]:
                why = f"killed: output over {self.limits['output_bytes']} bytes"
            message = {"gone": why}
        return message

    def serve_peer(self, stdin: int, stdout: int) -> bool:
        """A solution run with a peer: answer the check's calls until the worker says end.
        Returns False when the worker is gone."""
        peer_in, peer_out = self.peer
        sel = selectors.DefaultSelector()
        sel.register(stdin, selectors.EVENT_READ)
        sel.register(peer_in, selectors.EVENT_READ)
        try:
            while True:
                for key, _ in sel.select():
                    if key.fd == stdin:
                        request = read_frame(stdin)
                        if request is None:
                            return False
                        if request.get("op") != "end":
                            sys.exit(f"inspector-runner: unexpected {request.get('op')!r}")
                        write_frame(stdout, {"op": "ended", **self.finish()})
                        return True
                    try:
                        call = read_frame(peer_in)
                    except (BoundaryError, ValueError):
                        call = None
                    if call is None:
                        sel.unregister(peer_in)  # the check's side is gone; wait for the end
                        continue
                    try:
                        write_frame(peer_out, self.answer(call))
                    except OSError:
                        pass
        finally:
            sel.close()

    def send_to_child(self, message: dict) -> bool:
        try:
            write_frame(self.child["to"], message)
            return True
        except OSError:
            return False


def _drain(fd: int) -> None:
    os.set_blocking(fd, False)
    try:
        while os.read(fd, CHUNK):
            pass
    except BlockingIOError:
        pass
    finally:
        os.set_blocking(fd, True)


def _empty(folder: str) -> None:
    def writable_and_retry(func, path, _exc) -> None:
        try:
            os.chmod(os.path.dirname(path), 0o700)
            if os.path.isdir(path) and not os.path.islink(path):
                os.chmod(path, 0o700)
            func(path)
        except OSError:
            pass

    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        path = os.path.join(folder, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, onerror=writable_and_retry)
        else:
            try:
                os.unlink(path)
            except OSError:
                pass


def serve(stdin: int = 0, stdout: int = 1) -> None:
    """The runner's loop: one request from the worker at a time."""
    try:
        import ctypes

        # Not dumpable: a run's processes (same uid) cannot ptrace the runner or read its memory.
        libc = ctypes.CDLL(None)
        libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE
        # Orphans of a run become the runner's children, so it can reap them between runs.
        libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except Exception:  # noqa: BLE001
        pass
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    # As pid 1 (Docker) the runner receives only the signals it handles: Python's own SIGINT
    # handler would let a run's process interrupt it.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    init = read_frame(stdin)
    if init is None or init.get("op") != "init":
        sys.exit("inspector-runner: expected an init message")
    runner = Runner(init)
    # Imported once here, every run's fork has them for free: the modules tasks import most.
    for name in PRELOAD:
        try:
            __import__(name)
        except ImportError:
            pass
    import gc

    # Forked children then leave the runner's objects alone: the collector would otherwise
    # touch (and so copy) every page of them in each run.
    gc.freeze()
    write_frame(stdout, {"op": "ready", "pid": os.getpid()})
    while True:
        request = read_frame(stdin)
        if request is None:
            return
        op = request.get("op")
        if op == "start":
            runner.start(request)
            if runner.role == "solution":
                write_frame(stdout, {"op": "started"})
                if runner.peer and not runner.serve_peer(stdin, stdout):
                    return
                continue
            # The check drives the run: relay its calls until it exits.
            while True:
                message = runner.wait_child_message()
                if message is None:
                    write_frame(stdout, {"op": "verdict", **runner.finish()})
                    break
                write_frame(stdout, {"op": "call", "call": message})
                reply = read_frame(stdin)
                if reply is None:
                    return
                runner.send_to_child(reply.get("reply", {"gone": "no reply"}))
        elif op == "call":
            write_frame(stdout, {"op": "reply", "reply": runner.answer(request["call"])})
        elif op == "end":
            write_frame(stdout, {"op": "ended", **runner.finish()})
        else:
            sys.exit(f"inspector-runner: unknown op {op!r}")


if __name__ == "inspector-runner" or __name__ == "__main__":
    serve()
