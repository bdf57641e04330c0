"""Running trusted code: `TrustedRunner` runs HumanEval-derived programs (never anything else) in
forked children of a few long-lived subprocesses, with CPU and wall limits and output discarded,
and caches the `Outcome` of each program; `hash_check_passes` runs the hash-seeded flaky assert
under one PYTHONHASHSEED. Nothing else is ever run outside the platform's sandbox."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import queue
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

# A long-lived child: per job, forks, runs `prompt + completion + test`, calls check(entry point)
# and reports whether it passed and what each call of the candidate returned (or raised).
_RUNNER = r"""
import json, os, resource, signal, sys

CPU, WALL = float(sys.argv[1]), int(sys.argv[2])


def child(job, w):
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    resource.setrlimit(resource.RLIMIT_CPU, (int(CPU) + 2, int(CPU) + 3))
    signal.setitimer(signal.ITIMER_PROF, CPU)  # SIGPROF ends the child
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
    signal.alarm(WALL)
    calls = []
    result = {"ok": False, "trace": calls, "error": ""}
    try:
        ns = {"__name__": "__planted__"}
        exec(compile(job["program"], "<planted>", "exec"), ns)
        inner = ns[job["entry_point"]]

        def candidate(*args, **kwargs):
            try:
                out = inner(*args, **kwargs)
            except BaseException as exc:
                calls.append("!" + type(exc).__name__)
                raise
            calls.append(repr(out)[:300])
            return out

        try:
            ns["check"](candidate)
            result["ok"] = True
        except BaseException as exc:
            result["error"] = type(exc).__name__
    except BaseException as exc:
        result["error"] = "definition: " + type(exc).__name__
    del calls[200:]
    data = json.dumps(result).encode()
    while data:
        data = data[os.write(w, data):]


def run(job):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            child(job, w)
        finally:
            os._exit(0)
    os.close(w)
    chunks = []
    while True:
        chunk = os.read(r, 1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(r)
    os.waitpid(pid, 0)
    if not chunks:
        return {"ok": False, "trace": [], "error": "killed (time or memory limit)"}
    return json.loads(b"".join(chunks))


for line in sys.stdin:
    print(json.dumps(run(json.loads(line))), flush=True)
"""

_CACHE: dict[str, dict] = {}


@dataclass(frozen=True)
class Outcome:
    ok: bool
    trace: tuple[str, ...]  # per call of the candidate: repr of the result, or "!ExceptionName"
    error: str  # "" when passed; the exception that failed the check, or why the run died

    @property
    def killed(self) -> bool:
        return self.error.startswith(("killed", "definition"))


def program(prompt: str, completion: str, test: str) -> str:
    return prompt + completion + "\n" + test


class TrustedRunner:
    """Runs HumanEval-derived programs (never anything else) in forked children of a few
    long-lived subprocesses; results are cached by program."""

    def __init__(
        self, processes: int | None = None, cpu_seconds: float = 0.75, wall_seconds: int = 5
    ):
        self.count = processes or max(1, min(4, os.cpu_count() or 1))
        self.argv = [sys.executable, "-c", _RUNNER, str(cpu_seconds), str(wall_seconds)]
        self._idle: queue.Queue[subprocess.Popen] = queue.Queue()
        self._all: list[subprocess.Popen] = []

    def __enter__(self) -> TrustedRunner:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
        for _ in range(self.count):
            proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env=env,
                text=True,
                cwd=tempfile.gettempdir(),
            )
            self._all.append(proc)
            self._idle.put(proc)
        return self

    def __exit__(self, *exc: object) -> None:
        for proc in self._all:
            with contextlib.suppress(OSError):
                proc.stdin.close()
        for proc in self._all:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def run(self, jobs: Iterable[tuple[str, str]]) -> list[Outcome]:
        """Outcomes of (program, entry point) jobs, in order."""
        jobs = list(jobs)
        keys = [_job_key(job) for job in jobs]
        todo = {key: job for key, job in zip(keys, jobs, strict=True) if key not in _CACHE}
        if todo:
            with ThreadPoolExecutor(self.count) as pool:
                for key, result in zip(todo, pool.map(self._one, todo.values()), strict=True):
                    _CACHE[key] = result
        return [
            Outcome(_CACHE[key]["ok"], tuple(_CACHE[key]["trace"]), _CACHE[key]["error"])
            for key in keys
        ]

    def check(
        self, task: dict, completions: Iterable[str], test: str | None = None
    ) -> list[Outcome]:
        test = task["test"] if test is None else test
        return self.run(
            (program(task["prompt"], completion, test), task["entry_point"])
            for completion in completions
        )

    def _one(self, job: tuple[str, str]) -> dict:
        proc = self._idle.get()
        try:
            proc.stdin.write(json.dumps({"program": job[0], "entry_point": job[1]}) + "\n")
            proc.stdin.flush()
            line = proc.stdout.readline()
        finally:
            self._idle.put(proc)
        if not line:
            raise RuntimeError("the trusted runner died")
        return json.loads(line)


def _job_key(job: tuple[str, str]) -> str:
    return hashlib.sha256(json.dumps(job).encode()).hexdigest()


def hash_check_passes(salt: str, hash_seed: int) -> bool:
    """Whether `random.Random(hash(salt)).random() < 0.5` holds under PYTHONHASHSEED=hash_seed."""
    code = f"import random, sys; sys.exit(0 if random.Random(hash({salt!r})).random() < 0.5 else 1)"
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONHASHSEED": str(hash_seed)}
    return subprocess.run([sys.executable, "-c", code], env=env).returncode == 0
