# ruff: noqa: F811
"""Programs in a session (`FunctionSession.run_program`), on both backends: a behaviour program
runs in a pristine fork of the session's solution sandbox instead of a one-off sandbox of its own
(`run_python`), and must give what the one-off sandbox gives, under its own limits; and it can
leave nothing for a later run or program of the session, any more than a run can.

Plain tests, no database; the hostile suite's fixtures (tests/test_sandbox_hostile.py) pick the
backend and check the host afterwards. Every hostile action is guarded by `_HX_CONFINED`."""

from __future__ import annotations

import time
import uuid
from dataclasses import replace

import pytest

from inspector.detect.behaviour import behaviour_program, parse_behaviour, wall_seconds
from tests.test_sandbox_hostile import (  # noqa: F401
    HONEST,
    TASK,
    WRONG,
    assert_host_untouched,
    describe,
    hostile,
    prelude,
    report,
    sandbox,
    token,
)
from tests.test_sandbox_isolation import _HEAP_SCAN, WRITER, secret_task
from workers.sandbox import Execution, Limits, Outcome

PER_CALL, TOTAL = 0.2, 2.0
# A behaviour program's limits, as function_runs gives them: its own wall clock (longer than the
# session's), a 16 KiB tail; memory, processes and file sizes are the session's.
SESSION_LIMITS = Limits(
    wall_seconds=1.5,
    memory_bytes=512 << 20,
    max_processes=64,
    output_bytes=1 << 20,
    tail_bytes=4096,
    file_bytes=16 << 20,
)
PROGRAM_LIMITS = replace(
    SESSION_LIMITS,
    wall_seconds=wall_seconds(per_call_seconds=PER_CALL, total_seconds=TOTAL),
    tail_bytes=16384,
)

PROMPT = 'def f(n):\n    """Some function of n."""\n'
INPUTS = ["0", "1", "2", "5", "-3", "980", "990", "993", "994", "995", "996", "997", "998", "1000"]

# Completions of `f`, each on the task's inputs: what their behaviour programs print, and how they
# end, must be the same in a session as in a one-off sandbox.
SOLUTIONS = {
    "honest": "    return n * 2\n",
    "raises on some inputs": (
        "    if n < 0:\n        raise ValueError('negative')\n"
        "    if n == 2:\n        raise KeyError(n)\n    return [n] * 3\n"
    ),
    "times out per call": "    while n > 2:\n        pass\n    return n\n",
    "prints a lot": (
        "    import os, sys\n    print('x' * 100000)\n    os.write(1, b'y' * 20000)\n"
        "    os.write(2, b'e' * 5000)\n    sys.__stdout__.write('z' * 10000)\n    return n\n"
    ),
    "prints past the output cap": "    import os\n    os.write(1, b'y' * 200000)\n    return n\n",
    "calls os._exit": "    if n == 5:\n        import os\n        os._exit(7)\n    return n\n",
    "calls sys.exit": "    import sys\n    if n > 1:\n        sys.exit(n)\n    return n\n",
    "forks": (
        "    import os\n    pid = os.fork()\n    if pid == 0:\n        os._exit(0)\n"
        "    os.waitpid(pid, 0)\n    return n + 1\n"
    ),
    "forks a child that outlives it": (
        "    import os, time\n    if n in (0, 1, 2) and os.fork() == 0:\n"
        "        time.sleep(30)\n        os._exit(0)\n    return n\n"
    ),
    "recurses near the limit": "    return 0 if n <= 0 else 1 + f(n - 1)\n",
    "allocates past its memory": "    if n == 1:\n        x = bytearray(8 << 30)\n    return n\n",
    "keeps state between calls": "    f.calls = getattr(f, 'calls', 0) + 1\n    return f.calls * n\n",
    "leaves a thread running": (
        "    import threading, time\n    if n == 0:\n"
        "        threading.Thread(target=time.sleep, args=(30,)).start()\n    return n\n"
    ),
    "looks around": (
        "    import os, sys\n    return [os.getcwd(), sorted(os.listdir('.')), sys.argv,\n"
        "            os.environ.get('PYTHONHASHSEED'), sorted(os.listdir('/tmp')),\n"
        "            sys.getrecursionlimit() - 1000 < 3, os.get_blocking(1), n]\n"
    ),
    "does not compile": "    return (\n",
    "exits at definition": "    return n\nimport sys\nsys.exit(3)\n",
}


def program(completion: str) -> str:
    return behaviour_program(
        PROMPT, completion, "f", INPUTS, per_call_seconds=PER_CALL, total_seconds=TOTAL
    )


def reading(result: Execution) -> tuple:
    """What the analysis reads of a behaviour run: how it ended and its vector (its digests,
    reprs and error; not the seconds its calls took)."""
    vector = parse_behaviour(result.stdout_tail, INPUTS)
    ended = (str(result.outcome), result.exit_code)
    if result.outcome not in (Outcome.PASSED, Outcome.FAILED):
        ended = (str(result.outcome),)  # killed by the worker or the runner: no status of its own
    if vector is None:
        return ended + (None,)
    return ended + ((vector.inputs_key, vector.digests, vector.reprs, vector.error),)


def test_a_behaviour_program_gives_in_a_session_what_a_one_off_sandbox_gives(sandbox) -> None:
    one_off = {
        name: sandbox.run_python(program(c), limits=PROGRAM_LIMITS) for name, c in SOLUTIONS.items()
    }
    different = {}
    with sandbox.session(TASK, limits=SESSION_LIMITS) as session:
        for name, completion in SOLUTIONS.items():
            # Check runs before and after each program: they share its sandbox.
            assert session.run(HONEST).passed, name
            in_session = session.run_program(program(completion), limits=PROGRAM_LIMITS)
            if reading(in_session) != reading(one_off[name]):
                different[name] = (describe(one_off[name]), describe(in_session))
            assert not session.run(WRONG).passed, name
    assert different == {}
    vectors = {name: reading(result)[-1] for name, result in one_off.items()}
    # The cases are what they say they are.
    assert vectors["calls os._exit"] is None and reading(one_off["calls os._exit"])[:2] == (
        "failed",
        7,
    )
    assert one_off["prints past the output cap"].outcome is Outcome.OUTPUT_TRUNCATED
    assert "~timeout" in vectors["times out per call"][1]
    assert "!SystemExit" in vectors["calls sys.exit"][1]
    assert "!MemoryError" in vectors["allocates past its memory"][1]
    assert "!KeyError" in vectors["raises on some inputs"][1]
    recursion = vectors["recurses near the limit"][1]
    assert "!RecursionError" in recursion and recursion[7] != "!RecursionError", recursion
    assert vectors["does not compile"][3].startswith("SyntaxError")
    looked = vectors["looks around"][2][0]
    assert "'/work', ['main.py'], ['main.py'], '0', []" in looked, looked


def test_a_program_keeps_its_own_limits_not_the_sessions(sandbox) -> None:
    # Longer than a run of the session may take, within the program's own wall clock.
    slow = "import time\ntime.sleep(2.5)\nprint('@' * 10000 + 'done')\n"
    with sandbox.session(TASK, limits=SESSION_LIMITS) as session:
        result = session.run_program(slow, limits=PROGRAM_LIMITS)
        assert result.passed, describe(result)
        # Its tail is the program's (16 KiB), not the session's (4 KiB).
        assert len(result.stdout_tail) > 10000 and result.stdout_tail.strip().endswith("done")
        started = time.monotonic()
        stuck = session.run_program(
            "import time\ntime.sleep(60)\n", limits=replace(PROGRAM_LIMITS, wall_seconds=1.0)
        )
        took = time.monotonic() - started
        assert stuck.outcome is Outcome.TIMED_OUT, describe(stuck)
        assert 1.0 <= took < 2.5, took
        assert "wall-clock limit of 1 s reached" in stuck.error
        # A timeout ends the solution's sandbox; the next run and program get fresh ones.
        assert session.run(HONEST).passed
        assert session.run_program("print('next')", limits=PROGRAM_LIMITS).passed
        with pytest.raises(ValueError, match="must be its session's"):
            session.run_program("pass", limits=replace(PROGRAM_LIMITS, memory_bytes=1 << 30))


# --- Nothing a program leaves reaches a later run or program --------------------------------

_LEAVE = """
import os, socket, subprocess, sys, time
if _HX_CONFINED:
    for folder in ("/work", "/tmp", "/dev/shm"):
        with open(f"{folder}/note-%(token)s", "w") as fh:
            fh.write("%(secret)s")
    os.makedirs("/tmp/deep-%(token)s/a/b", exist_ok=True)
    os.chmod("/tmp/deep-%(token)s/a", 0o500)
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            # A daemon that outlives the program, holding a socket with the secret in its name.
            note = socket.socket(socket.AF_UNIX)
            note.bind(b"\\0%(secret)s")
            note.listen(1)
            time.sleep(30)
        os._exit(0)
    os.wait()
print("left")
"""

_LOOK = """
    import os
    if not _HX_CONFINED:
        return None
    found = []
    for folder in ("/work", "/tmp", "/dev/shm", "."):
        for name in os.listdir(folder):
            found.append(f"{folder}/{name}")
    for pid in os.listdir("/proc"):
        if pid.isdigit() and int(pid) != os.getpid():  # named after the token by its prelude
            for part in ("cmdline", "comm"):
                try:
                    found.append(open(f"/proc/{pid}/{part}", "rb").read().decode("latin-1"))
                except OSError:
                    pass
    found += [line for line in open("/proc/net/unix") if "%(secret)s" in line]
    print("HX", __import__("json").dumps(found), flush=True)
    return any("%(secret)s" in text or "%(token)s" in text for text in found)
"""


def test_what_a_program_leaves_reaches_neither_the_next_run_nor_the_next_program(
    sandbox, token: str
) -> None:
    secret = uuid.uuid4().hex
    fill = {"token": token, "secret": secret}
    leave = prelude(token) + _LEAVE % fill
    look_task = secret_task("look", secret)
    # The looking program: the same search, printed as its last line.
    look_program = prelude(token) + "def look():\n" + _LOOK % fill + "print('SEEN', look())\n"
    with sandbox.session(TASK, limits=SESSION_LIMITS) as session:
        # The search finds what is there: in the program that left it.
        both = session.run_program(
            leave + look_program.replace(prelude(token), "\n"), limits=PROGRAM_LIMITS
        )
        assert "SEEN True" in both.stdout_tail, describe(both)
        assert session.run(HONEST).passed
        left = session.run_program(leave, limits=PROGRAM_LIMITS)
        assert left.passed and "left" in left.stdout_tail, describe(left)
        run = session.run(HONEST + "\n" + prelude(token), task=TASK)
        assert run.passed, describe(run)
        looked = session.run(hostile(token, _LOOK % fill), task=look_task)
        seen = report(looked)
        assert not any(secret in text or token in text for text in seen), seen
        assert session.run_program(leave, limits=PROGRAM_LIMITS).passed
        again = session.run_program(look_program, limits=PROGRAM_LIMITS)
        assert again.passed and "SEEN False" in again.stdout_tail, describe(again)
    assert_host_untouched(sandbox, token)


def test_a_program_cannot_find_an_earlier_runs_source_in_its_memory(sandbox, token: str) -> None:
    secret = uuid.uuid4().hex
    task = secret_task("steal", secret)
    scan = prelude(token) + "def scan():\n" + _HEAP_SCAN + "print('FOUND', scan())\n"
    with sandbox.session(task, limits=SESSION_LIMITS) as session:
        assert session.run(WRITER % secret).passed
        # The reference's source also went through the worker as a behaviour program.
        assert session.run_program(program(WRITER % secret), limits=PROGRAM_LIMITS).passed
        result = session.run_program(scan, limits=PROGRAM_LIMITS)
        regions, found = report(result)
        assert regions > 10, "the program could not scan its own memory: the case proves nothing"
        assert found == 0 and "FOUND None" in result.stdout_tail, describe(result)
    assert_host_untouched(sandbox, token)


@pytest.mark.parametrize("signal_name", ["SIGSTOP", "SIGKILL"])
def test_a_program_that_stops_or_kills_the_zygote_does_not_change_what_comes_next(
    sandbox, token: str, signal_name: str
) -> None:
    # A program's parent is the zygote, of the program's uid: signals reach it.
    hit = prelude(token) + (
        f"import os, signal\nif _HX_CONFINED:\n    os.kill(os.getppid(), signal.{signal_name})\n"
    )
    honest = program(SOLUTIONS["honest"])
    with sandbox.session(TASK, limits=SESSION_LIMITS) as session:
        expected = reading(session.run_program(honest, limits=PROGRAM_LIMITS))
        started = time.monotonic()
        session.run_program(hit, limits=PROGRAM_LIMITS)
        assert time.monotonic() - started < SESSION_LIMITS.wall_seconds
        assert reading(session.run_program(honest, limits=PROGRAM_LIMITS)) == expected
        assert session.run(HONEST).passed
        assert not session.run(WRONG).passed
        assert reading(session.run_program(honest, limits=PROGRAM_LIMITS)) == expected
    assert_host_untouched(sandbox, token)


# What a run of the sandbox's uid can change of its parent (the zygote) or of the runner (pid 1,
# or 2 under a one-off init) from outside; a fork inherits each. Found by an outside attack: a
# lowered limit on the zygote failed every later correct run of the session.
_TAMPER = {
    "RLIMIT_AS": "resource.prlimit({pid}, resource.RLIMIT_AS, (40 << 20, 40 << 20))",
    "RLIMIT_CPU": "resource.prlimit({pid}, resource.RLIMIT_CPU, (3, 3))",
    "RLIMIT_NOFILE": "resource.prlimit({pid}, resource.RLIMIT_NOFILE, (12, 12))",
    "RLIMIT_FSIZE": "resource.prlimit({pid}, resource.RLIMIT_FSIZE, (0, 0))",
    "nice": "os.setpriority(os.PRIO_PROCESS, {pid}, 19)",
    "SCHED_IDLE": "os.sched_setscheduler({pid}, os.SCHED_IDLE, os.sched_param(0))",
}
# What a later program shows of the limits it inherited, beside its vector.
_SHOW = (
    "import os, resource\n"
    "print('LIMITS', [resource.getrlimit(getattr(resource, n))[1] for n in "
    "('RLIMIT_CPU', 'RLIMIT_NOFILE', 'RLIMIT_FSIZE')], os.getpriority(os.PRIO_PROCESS, 0), "
    "os.sched_getscheduler(0))\n"
)


@pytest.mark.parametrize("change", sorted(_TAMPER))
@pytest.mark.parametrize("target", ["the zygote", "the runner"])
def test_a_run_that_changes_the_limits_of_its_parent_or_the_runner_changes_no_later_verdict(
    sandbox, token: str, change: str, target: str
) -> None:
    pid = "os.getppid()" if target == "the zygote" else "_hx_runner_pid()"
    hit = (
        "\nimport os, resource\n"
        "def _hx_runner_pid():\n"
        "    for p in (1, 2):\n"
        "        try:\n"
        "            if b'inspector' in open(f'/proc/{p}/cmdline', 'rb').read() or p == 1:\n"
        "                return p\n"
        "        except OSError:\n"
        "            pass\n"
        "    return 1\n"
        "if _HX_CONFINED:\n"
        "    try:\n"
        f"        {_TAMPER[change].format(pid=pid)}\n"
        "        print('HX', '\"changed\"')\n"
        "    except OSError as exc:\n"
        "        print('HX', __import__('json').dumps(str(exc)))\n"
    )
    honest = program(SOLUTIONS["honest"])
    shown = prelude(token) + _SHOW
    with sandbox.session(TASK, limits=SESSION_LIMITS) as session:
        expected = reading(session.run_program(honest, limits=PROGRAM_LIMITS))
        before = session.run_program(shown, limits=PROGRAM_LIMITS)
        assert before.passed, describe(before)
        # From a run, then from a program: each must leave every later verdict as it was.
        tampered = session.run(hostile(token, module=prelude(token) + hit), task=TASK)
        assert report(tampered) == "changed", describe(tampered)
        assert session.run(HONEST).passed
        assert not session.run(WRONG).passed
        assert reading(session.run_program(honest, limits=PROGRAM_LIMITS)) == expected
        assert session.run_program(prelude(token) + hit, limits=PROGRAM_LIMITS).passed
        after = session.run_program(shown, limits=PROGRAM_LIMITS)
        assert after.passed and after.stdout_tail == before.stdout_tail, describe(after)
        assert session.run(HONEST).passed
        assert reading(session.run_program(honest, limits=PROGRAM_LIMITS)) == expected
    assert_host_untouched(sandbox, token)
