"""The local (bubblewrap) sandbox, seen from the outside: what a run returns and what it can't do.

Plain tests, no database; run with `pytest tests/test_sandbox_local.py -p no:django`.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from workers.sandbox import (
    Execution,
    Limits,
    LocalSandbox,
    Outcome,
    SandboxUnavailable,
    UnsandboxedSandbox,
    base,
    get_sandbox,
    local,
)

PROJECT = Path(__file__).resolve().parent.parent
QUICK = Limits(wall_seconds=5)
SLACK = 1.5


@pytest.fixture(scope="module")
def sandbox() -> LocalSandbox:
    chosen = get_sandbox("local")
    assert isinstance(chosen, LocalSandbox)
    return chosen


def run(sandbox: LocalSandbox, program: str, limits: Limits = QUICK) -> tuple[Execution, float]:
    start = time.monotonic()
    result = sandbox.run_python(program, limits=limits)
    return result, time.monotonic() - start


def _parking(pid: int) -> bool:
    """A sandbox being started ahead of need: bwrap, or its child, waiting on --block-fd for
    a program (a run's own bwrap is reaped before the run returns)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return argv[0].endswith(b"bwrap") and b"--block-fd" in argv


def live_processes_of(uid: int, sandbox: LocalSandbox | None = None) -> list[int]:
    """Processes of `uid` (zombies too), but for the sandboxes parked, or being parked, for the
    next program."""
    parked = sandbox.parked_pids() if sandbox is not None else set()
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            if (
                entry.name.isdigit()
                and int(entry.name) not in parked
                and entry.stat().st_uid == uid
                and not _parking(int(entry.name))
            ):
                pids.append(int(entry.name))
        except OSError:
            continue
    return pids


def test_a_passing_program_passes(sandbox: LocalSandbox) -> None:
    result, _ = run(sandbox, "print('hello from the sandbox')")
    assert result.outcome is Outcome.PASSED and result.passed
    assert result.exit_code == 0
    assert result.stdout_tail == "hello from the sandbox\n"
    assert result.stderr_tail == "" and result.error == ""


def test_exit_3_fails_with_exit_code_3_and_its_stderr(sandbox: LocalSandbox) -> None:
    result, _ = run(sandbox, "import sys\nprint('broken', file=sys.stderr)\nsys.exit(3)")
    assert result.outcome is Outcome.FAILED and not result.passed
    assert result.exit_code == 3
    assert result.stderr_tail == "broken\n"


def test_an_exception_fails_with_its_traceback(sandbox: LocalSandbox) -> None:
    result, _ = run(sandbox, "raise ValueError('bad input')")
    assert result.outcome is Outcome.FAILED
    assert result.exit_code == 1
    assert "ValueError: bad input" in result.stderr_tail


def test_a_program_killed_by_a_signal_reports_that_signal(sandbox: LocalSandbox) -> None:
    result, _ = run(sandbox, "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)")
    assert result.outcome is Outcome.FAILED
    assert result.exit_code == -signal.SIGSEGV


@pytest.mark.parametrize(
    "program",
    [
        "while True:\n    pass",
        "import time\ntime.sleep(60)",
        # Closing its pipes must not let a program escape the deadline.
        "import os, time\nos.close(1)\nos.close(2)\ntime.sleep(60)",
    ],
    ids=["busy loop", "sleep", "closed pipes"],
)
def test_a_program_that_never_ends_times_out_at_the_limit(
    sandbox: LocalSandbox, program: str
) -> None:
    result, elapsed = run(sandbox, program, Limits(wall_seconds=1))
    assert result.outcome is Outcome.TIMED_OUT and result.timed_out
    assert 1 <= elapsed < 1 + SLACK
    assert "wall-clock" in result.error


def test_a_background_child_does_not_hold_the_run_open(sandbox: LocalSandbox) -> None:
    program = "import os, time\nif os.fork() == 0:\n    time.sleep(60)\nprint('parent done')"
    result, elapsed = run(sandbox, program)
    assert result.outcome is Outcome.PASSED
    assert result.stdout_tail == "parent done\n"
    assert elapsed < 1


def test_a_fork_bomb_ends_and_the_host_is_fine_afterwards(sandbox: LocalSandbox) -> None:
    bomb = (
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    )
    result, elapsed = run(sandbox, bomb, Limits(wall_seconds=2))
    assert result.outcome in (Outcome.TIMED_OUT, Outcome.FAILED)
    assert elapsed < 2 + SLACK
    uid = sandbox.run_uid()
    if uid is not None:
        assert live_processes_of(uid, sandbox) == []
    after, _ = run(sandbox, "print('still fine')")
    assert after.passed and after.stdout_tail == "still fine\n"


def test_a_stopped_sandbox_that_takes_a_while_to_end_is_waited_for_not_orphaned(
    tmp_path: Path,
) -> None:
    # bwrap ends only once the kernel has ended every process of its pid namespace, which can
    # take over a second on a loaded machine; killing it then would orphan the sandbox's pid 1
    # to the host's init, which in a container may never reap it. A plain host process (no
    # sandbox needed) stands in for bwrap: told to stop, it takes 1.5 s to end.
    ended = tmp_path / "ended"
    program = (
        "import signal, sys, time\n"
        "def end(*_):\n"
        "    time.sleep(1.5)\n"
        f"    open({str(ended)!r}, 'w').close()\n"
        "    sys.exit(0)\n"
        "signal.signal(signal.SIGUSR1, end)\n"
        "print('ready', flush=True)\n"
        "while True:\n"
        "    time.sleep(1)\n"
    )
    run = base.execute(
        [sys.executable, "-c", program],
        cwd=str(tmp_path),
        env={},
        limits=Limits(wall_seconds=1),
        preexec=lambda: None,
        stop=lambda pid: os.kill(pid, signal.SIGUSR1),
    )
    assert run.killed_for == "timeout"
    assert ended.exists()
    assert run.exit_code == 0


def test_the_process_limit_stops_forking_early(sandbox: LocalSandbox) -> None:
    program = (
        "import os, time\nn = 0\ntry:\n    while True:\n        if os.fork() == 0:\n"
        "            time.sleep(5)\n            os._exit(0)\n        n += 1\n"
        "except OSError:\n    print(n)\n"
    )
    result, _ = run(sandbox, program, Limits(wall_seconds=5, max_processes=16))
    assert result.passed
    assert int(result.stdout_tail) < 16


def test_allocating_4_gb_ends_out_of_memory(sandbox: LocalSandbox) -> None:
    result, _ = run(sandbox, "block = bytearray(4 << 30)\nprint('allocated')")
    assert result.outcome is Outcome.OUT_OF_MEMORY
    assert "allocated" not in result.stdout_tail
    assert "MemoryError" in result.stderr_tail


def test_printing_50_mb_is_cut_short_with_a_bounded_tail(sandbox: LocalSandbox) -> None:
    program = "import sys\nfor _ in range(50):\n    sys.stdout.write('x' * (1 << 20))\nprint('END')"
    result, elapsed = run(sandbox, program)
    assert result.outcome is Outcome.OUTPUT_TRUNCATED
    assert elapsed < 2
    assert 0 < len(result.stdout_tail) <= QUICK.tail_bytes
    assert "END" not in result.stdout_tail


def test_the_tail_keeps_the_end_of_each_stream(sandbox: LocalSandbox) -> None:
    program = "import sys\nfor i in range(5000):\n    print(i)\n    print(-i, file=sys.stderr)"
    result, _ = run(sandbox, program, Limits(wall_seconds=5, tail_bytes=100))
    assert result.passed
    assert len(result.stdout_tail) <= 100 and result.stdout_tail.endswith("4998\n4999\n")
    assert len(result.stderr_tail) <= 100 and result.stderr_tail.endswith("-4999\n")


def test_the_platform_environment_does_not_leak_in(
    sandbox: LocalSandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SECRET_KEY", "do-not-leak-this-secret")
    monkeypatch.setenv("DATABASE_URL", "postgres://user:hunter2@db/inspector")
    result, _ = run(sandbox, "import json, os\nprint(json.dumps(dict(os.environ)))")
    seen = json.loads(result.stdout_tail)
    assert "SECRET_KEY" not in seen and "DATABASE_URL" not in seen
    assert "hunter2" not in result.stdout_tail and "do-not-leak" not in result.stdout_tail
    assert set(seen) <= set(local.SANDBOX_ENV) | {"PWD"}
    assert seen["HOME"] == "/work" and seen["PYTHONHASHSEED"] == "0"


def test_writing_to_etc_usr_and_the_project_folder_fails(sandbox: LocalSandbox) -> None:
    targets = ["/etc/pwned", "/usr/pwned", "/usr/lib/python3/pwned", str(PROJECT / "pwned")]
    program = (
        "import json\nresults = {}\n"
        f"for path in {targets!r}:\n"
        "    try:\n        open(path, 'w').write('x')\n        results[path] = 'written'\n"
        "    except OSError as exc:\n        results[path] = type(exc).__name__\n"
        "print(json.dumps(results))"
    )
    result, _ = run(sandbox, program)
    assert result.passed
    assert "written" not in json.loads(result.stdout_tail).values()
    assert not (PROJECT / "pwned").exists()


def test_the_project_and_home_folders_are_not_visible(sandbox: LocalSandbox) -> None:
    program = (
        f"import os\nprint([p for p in ({str(PROJECT)!r}, '/root', '/home') if os.path.exists(p)])"
    )
    result, _ = run(sandbox, program)
    assert result.stdout_tail == "[]\n"


def test_the_sandbox_sees_only_loopback_and_cannot_reach_redis(sandbox: LocalSandbox) -> None:
    # Only ever loopback: the sandbox's own, empty one.
    program = (
        "import socket\nprint(socket.if_nameindex())\n"
        "try:\n    socket.create_connection(('127.0.0.1', 6379), timeout=1)\n"
        "    print('connected')\n"
        "except OSError as exc:\n    print(type(exc).__name__)"
    )
    result, _ = run(sandbox, program)
    interfaces, connection = result.stdout_tail.splitlines()
    assert interfaces == "[(1, 'lo')]"
    assert connection != "connected"


def test_the_program_runs_as_a_non_root_user(sandbox: LocalSandbox) -> None:
    result, _ = run(sandbox, "import os\nprint(os.getuid(), os.geteuid())")
    uid, euid = map(int, result.stdout_tail.split())
    assert uid != 0 and euid != 0


def test_the_work_folder_is_removed_after_the_run(
    sandbox: LocalSandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[str] = []
    real_mkdtemp = local.tempfile.mkdtemp
    me = threading.current_thread()

    def recording_mkdtemp(*args: object, **kwargs: object) -> str:
        # tempfile is one module for the whole process: record this test's thread only (a
        # sandbox an earlier test left parking its next session makes folders too).
        folder = real_mkdtemp(*args, **kwargs)  # type: ignore[arg-type]
        if threading.current_thread() is me:
            made.append(folder)
        return folder

    sandbox.close()  # so the run's sandbox starts now, in a folder made while we record
    monkeypatch.setattr(local.tempfile, "mkdtemp", recording_mkdtemp)
    program = "import os\nos.makedirs('a/b')\nopen('a/b/f', 'w').write('x')\nos.chmod('a', 0o500)"
    result = sandbox.run_python(program, limits=QUICK, park_next=False)
    assert result.passed
    assert made and not os.path.exists(made[0])

    def broken_supervise(*args: object, **kwargs: object) -> None:
        raise RuntimeError("the worker broke mid-run")

    monkeypatch.setattr(local, "supervise", broken_supervise)
    with pytest.raises(RuntimeError):
        sandbox.run_python("print(1)", limits=QUICK, park_next=False)
    assert len(made) == 2 and not os.path.exists(made[1])
    # Nothing parked by this sandbox (another test's sandboxes of this process may be parking).
    with sandbox._park_lock:
        assert not sandbox._parked


def test_a_one_off_programs_files_are_bounded_in_total_and_its_main_py_is_read_only(
    sandbox: LocalSandbox,
) -> None:
    # Before, /work was a host folder: the file-size limit held per file only, so a run could
    # fill the host's disk, or leave it extents to free for minutes (an outside attack).
    program = """
import os
print(open("main.py").read().strip().splitlines()[0])
for i in range(3):
    try:
        with open(f"part{i}", "wb") as fh:
            fh.write(b"x" * 600_000)
        print("wrote", i)
    except OSError as exc:
        print("refused", i, exc.strerror)
try:
    open("main.py", "a")
except OSError as exc:
    print("main.py:", exc.strerror)
"""
    result = sandbox.run_python(program, limits=Limits(wall_seconds=5, file_bytes=1 << 20))

    assert result.passed, result
    assert result.stdout_tail.splitlines() == [
        "import os", "wrote 0", "refused 1 No space left on device",
        "refused 2 No space left on device", "main.py: Read-only file system",
    ]  # fmt: skip


def test_a_chain_of_folders_deeper_than_pythons_recursion_is_made_and_left_without_harm(
    sandbox: LocalSandbox,
) -> None:
    program = (
        "import os\nfor _ in range(3000):\n    os.mkdir('d')\n    os.chdir('d')\nprint('deep')"
    )
    result, took = run(sandbox, program)

    assert result.passed and result.stdout_tail == "deep\n", result
    assert took < QUICK.wall_seconds


def deep_chain(root: Path, depth: int) -> None:
    """Folders nested `depth` deep under root, made through folder descriptors (the path is
    longer than the system's limit on one)."""
    root.mkdir()
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir("d", dir_fd=fd)
            inner = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = inner
    finally:
        os.close(fd)


def test_a_work_folder_deeper_than_pythons_recursion_is_removed_from_the_host(tmp_path) -> None:
    # shutil.rmtree recurses on Python 3.11: it raised RecursionError, which left the folder
    # and the run's cgroup behind and ended the sweep's pass.
    from workers.sandbox.local import _remove_tree, sweep_work_folders

    deep_chain(tmp_path / "mine", 3000)
    _remove_tree(str(tmp_path / "mine"))
    assert not (tmp_path / "mine").exists()

    dead = subprocess.Popen(["true"])
    dead.wait()
    deep_chain(tmp_path / f"sandbox-{dead.pid}-deep", 3000)
    (tmp_path / f"sandbox-{dead.pid}-next").mkdir()
    assert sweep_work_folders(str(tmp_path)) == 2
    assert list(tmp_path.iterdir()) == []


def test_an_interpreter_that_cannot_start_makes_the_sandbox_unavailable() -> None:
    with pytest.raises(SandboxUnavailable, match="no-such-python"):
        get_sandbox("local", python="/usr/bin/no-such-python")


def test_an_interpreter_gone_missing_later_is_a_sandbox_error_not_a_failure() -> None:
    broken = LocalSandbox()
    broken.python = "/usr/bin/no-such-python"
    result, _ = run(broken, "print(1)")
    assert result.outcome is Outcome.SANDBOX_ERROR
    assert "no-such-python" in result.error


def test_without_bwrap_the_local_sandbox_is_unavailable_with_the_install_hint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(shutil, "which", lambda name, *args, **kwargs: None)
    with pytest.raises(SandboxUnavailable, match="apt-get install bubblewrap"):
        get_sandbox("local")


def test_without_bwrap_allow_unsandboxed_gives_the_unsandboxed_backend(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(shutil, "which", lambda name, *args, **kwargs: None)
    monkeypatch.setattr(local, "_warned", local.threading.Event())
    monkeypatch.setenv("SECRET_KEY", "do-not-leak-this-secret")
    with caplog.at_level(logging.WARNING):
        fallback = get_sandbox("local", allow_unsandboxed=True)
    assert isinstance(fallback, UnsandboxedSandbox) and fallback.name == "unsandboxed"
    assert "WITHOUT isolation" in caplog.text
    result = fallback.run_python("import os\nprint(sorted(os.environ))", limits=QUICK)
    assert result.passed and "SECRET_KEY" not in result.stdout_tail
    slow = fallback.run_python("import time\ntime.sleep(60)", limits=Limits(wall_seconds=1))
    assert slow.timed_out


def test_an_unknown_backend_names_the_accepted_values() -> None:
    with pytest.raises(SandboxUnavailable, match="accepted values are local.*docker"):
        get_sandbox("kubernetes")


def test_a_sweep_removes_the_work_folders_of_dead_workers_and_keeps_the_living_ones(tmp_path):
    from workers.sandbox.local import sweep_work_folders

    dead = subprocess.Popen(["true"])
    dead.wait()
    (tmp_path / f"sandbox-{dead.pid}-abc").mkdir()
    (tmp_path / f"sandbox-{os.getpid()}-def").mkdir()
    (tmp_path / "unrelated").mkdir()

    assert sweep_work_folders(str(tmp_path)) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"sandbox-{os.getpid()}-def", "unrelated"]


def test_a_prompt_that_is_only_a_signature_still_reaches_its_check():
    from workers.sandbox import get_sandbox
    from workers.sandbox.session import FunctionTask

    task = FunctionTask(
        prompt="def add(a, b):\n",
        test="def check(candidate):\n    assert candidate(2, 3) == 5\n",
        entry_point="add",
    )
    with get_sandbox("local").session(task, limits=Limits(wall_seconds=5)) as session:
        right = session.run("    return a + b\n")
        wrong = session.run("    return a - b\n")

    assert (right.outcome, wrong.outcome) == (Outcome.PASSED, Outcome.FAILED)
    assert "AssertionError" in wrong.stderr_tail


# A prompt of nine lines before the tests and the completion: what a traceback's line numbers
# would be off by if they counted it.
DOCUMENTED_ADD = (
    "import math\n\n\ndef add(a, b):\n"
    '    """Add two numbers.\n\n    >>> add(2, 3)\n    5\n    """\n'
)


def run_function(prompt: str, test: str, *completions: str) -> list[Execution]:
    from workers.sandbox.session import FunctionTask

    task = FunctionTask(prompt=prompt, test=test, entry_point="add")
    with get_sandbox("local").session(task, limits=Limits(wall_seconds=5)) as session:
        return [session.run(completion) for completion in completions]


def test_a_failing_check_names_its_own_line_and_shows_it_not_a_line_of_prompt_and_check():
    test = (
        "def check(candidate):\n"
        "    assert candidate(2, 3) == 5\n"
        "    assert candidate(0, 0) == 1, 'zero'\n"
    )
    right, wrong = run_function(DOCUMENTED_ADD, test, "    return a + b\n", "    return a - b\n")

    # The verdicts are the check's as before: the tests fail on their line 3 for both.
    assert (right.outcome, wrong.outcome) == (Outcome.FAILED, Outcome.FAILED)
    assert 'File "check.py", line 3, in check\n' in right.stderr_tail
    assert "    assert candidate(0, 0) == 1, 'zero'\n" in right.stderr_tail
    assert 'File "check.py", line 2, in check\n' in wrong.stderr_tail
    assert "line 12" not in right.stderr_tail + wrong.stderr_tail


def test_a_syntax_error_in_the_check_is_reported_at_the_checks_own_line():
    test = "def check(candidate):\n    assert candidate(2, 3) = 5\n"
    (result,) = run_function(DOCUMENTED_ADD, test, "    return a + b\n")

    assert result.outcome is Outcome.FAILED
    assert 'File "check.py", line 2\n' in result.stderr_tail
    assert "SyntaxError" in result.stderr_tail


def test_a_helper_the_prompt_defines_fails_at_the_prompts_own_line():
    prompt = DOCUMENTED_ADD + "\n\ndef expected(a, b):\n    return a + b + undefined\n"
    test = "def check(candidate):\n    assert candidate(2, 3) == expected(2, 3)\n"
    (result,) = run_function(prompt, test, "    return a + b\n")

    assert result.outcome is Outcome.FAILED
    assert 'File "prompt.py", line 13, in expected\n' in result.stderr_tail
    assert "    return a + b + undefined\n" in result.stderr_tail
    assert 'File "check.py", line 2, in check\n' in result.stderr_tail


def test_a_solution_that_does_not_run_names_the_completions_own_lines():
    broken, raising = run_function(
        DOCUMENTED_ADD,
        "def check(candidate):\n    assert candidate(2, 3) == 5\n",
        "    c = a +\n    return c\n",
        "    return a + b\n\n\nraise ValueError('at import')\n",
    )

    assert (broken.outcome, raising.outcome) == (Outcome.FAILED, Outcome.FAILED)
    # The completion's first line is line 1 of solution.py, not line 10 after the prompt.
    assert 'File "solution.py", line 1\n' in broken.stderr_tail
    assert "SyntaxError" in broken.stderr_tail
    assert 'File "solution.py", line 4, in <module>\n' in raising.stderr_tail
    assert "    raise ValueError('at import')\n" in raising.stderr_tail


# --- The bootstrap: the runner arrives compiled, and as source ----------------------------------


def _bootstrap(payload: bytes) -> str:
    """BOOTSTRAP run by this interpreter on `payload` (our own code, never a run's)."""
    from workers.sandbox.runner import BOOTSTRAP

    done = subprocess.run(
        [sys.executable, "-I", "-c", BOOTSTRAP], input=payload, capture_output=True, timeout=30
    )
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode()


def _framed(*parts: bytes) -> bytes:
    return b"".join(len(part).to_bytes(4, "big") + part for part in parts)


def _frames(payload: bytes) -> list[bytes]:
    parts = []
    while payload:
        size = int.from_bytes(payload[:4], "big")
        parts.append(payload[4 : 4 + size])
        payload = payload[4 + size :]
    return parts


def test_the_bootstrap_runs_the_code_the_worker_compiled_when_the_interpreter_matches():
    from workers.sandbox.session import bootstrap_payload

    tag, compiled, source = _frames(bootstrap_payload(b"print('compiled by the worker')"))
    assert tag == sys.implementation.cache_tag.encode()
    assert source == b"print('compiled by the worker')"
    # The compiled code beside another source: the compiled code is what runs.
    assert _bootstrap(_framed(tag, compiled, b"print('the source')")) == "compiled by the worker\n"


def test_the_bootstrap_compiles_the_source_for_an_interpreter_of_another_tag():
    payload = _framed(b"cpython-29", b"not marshal data", b"print('the source')")
    assert _bootstrap(payload) == "the source\n"
