"""Hostile completions against every sandbox backend, run the way the platform runs them: as a
completion through `sandbox.session(task, limits=...)`, so the solution runs in one sandbox and
the task's check in another. Each case must end as expected within its limit (plus a little
slack), with this process (the worker) alive and the host untouched afterwards: no file created
or changed, no process of the sandbox left, and the next run of the same session passing.
`tests/test_sandbox_local.py` covers one-off programs (`run_python`); this file covers sessions.

Plain tests, no database. Every hostile action of a completion is guarded by `_HX_CONFINED`
(it runs unprivileged and cannot see this project): a broken sandbox makes a case fail, it never
lets a fork bomb or a kill loose on the host. Network probes only ever address loopback."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import pytest

from inspector.detect.probes import PROBES
from workers.sandbox import Execution, Limits, Outcome, SandboxUnavailable, get_sandbox
from workers.sandbox.session import FunctionTask

PROJECT = Path(__file__).resolve().parent.parent
HOST_HOME = os.path.expanduser("~")
SLACK = 1.5  # seconds a run may take past its wall-clock limit (starting and removing sandboxes)
LIMITS = Limits(
    wall_seconds=1.5,
    memory_bytes=256 << 20,
    max_processes=32,
    output_bytes=1 << 20,
    file_bytes=16 << 20,
    tail_bytes=1 << 16,  # hostile runs report what they saw on stdout: keep all of it
)

PROMPT = 'def add(a, b):\n    """Return the sum of a and b."""\n'
TEST = "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(-1, 1) == 0\n"
TASK = FunctionTask(PROMPT, TEST, "add")
HONEST = "    return a + b\n"
WRONG = "    return a - b\n"


# --- Fixtures and helpers ------------------------------------------------------------------------


class Unusable:
    """Stands for a backend that cannot be used: every case that touches it FAILS (in its
    body, not as a setup error, and never as a skip) with the reason."""

    def __init__(self, why: str) -> None:
        self.why = why

    def __getattr__(self, name: str):
        pytest.fail(self.why, pytrace=False)


@pytest.fixture(scope="module", params=["local", "docker"], ids=["local", "docker"])
def sandbox(request: pytest.FixtureRequest):
    """A backend, once it has shown that a completion runs unprivileged and blind to the host:
    only then do the hostile cases (fork bombs, kill loops) run in it."""
    try:
        chosen = get_sandbox(request.param)
    except Exception as exc:  # noqa: BLE001 (SandboxUnavailable, or a backend that cannot load)
        kind = "unavailable" if isinstance(exc, SandboxUnavailable) else "broken"
        return Unusable(f"the {request.param!r} sandbox backend is {kind}: {exc}")
    probe = (
        HONEST + "\nimport json, os\n"
        f"print(json.dumps([os.getuid(), os.geteuid(), os.path.exists({str(PROJECT)!r})]))\n"
    )
    with opened(chosen, warm=False) as session:
        result = session.run(probe)
    if not result.passed:
        return Unusable(f"the {request.param} sandbox cannot run an honest completion: {result}")
    uid, euid, sees_project = json.loads(result.stdout_tail)
    if uid == 0 or euid == 0 or sees_project:
        return Unusable(
            f"the {request.param} sandbox runs completions as uid {uid}/{euid} and "
            f"{'sees' if sees_project else 'does not see'} {PROJECT}: hostile cases not run"
        )
    return chosen


@pytest.fixture
def token(request: pytest.FixtureRequest) -> Iterator[str]:
    """A name for what one case's completion leaves around; whatever it is found on, the host
    is cleaned of it afterwards (the assertions have already failed the case then)."""
    value = "hx" + uuid.uuid4().hex[:10]
    yield value
    for path in _host_paths_with(value):
        with suppress(OSError):
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.unlink(path)


@contextmanager
def opened(sandbox, limits: Limits = LIMITS, task: FunctionTask = TASK, *, warm: bool = True):
    """A session whose sandboxes have started and passed an honest run (not timed: starting
    them is not what a case measures)."""
    session = sandbox.session(task, limits=limits)
    try:
        if warm:
            first = session.run(HONEST)
            assert first.passed, f"a fresh session fails an honest run: {describe(first)}"
        yield session
    finally:
        session.close()


def run(session, completion: str) -> tuple[Execution, float]:
    start = time.monotonic()
    result = session.run(completion)
    return result, time.monotonic() - start


def describe(result: Execution) -> str:
    return (
        f"{result.outcome} exit={result.exit_code} error={result.error!r}\n"
        f"stdout: {result.stdout_tail[-1500:]}\nstderr: {result.stderr_tail[-1500:]}"
    )


def honest_run_passes(session) -> None:
    result, took = run(session, HONEST)
    assert result.passed, f"an honest run of the same session did not pass: {describe(result)}"
    assert took < LIMITS.wall_seconds + SLACK


def prelude(tag: str) -> str:
    """Module-level code for a hostile completion: names its processes `tag` (forks inherit
    it: the host can find them) and says whether hostile actions are safe here."""
    return (
        "\nimport ctypes as _hx_ctypes, os as _hx_os\n"
        "try:\n"
        f"    _hx_ctypes.CDLL(None).prctl(15, {tag.encode()!r}, 0, 0, 0)  # PR_SET_NAME\n"
        "except Exception:\n"
        "    pass\n"
        "_HX_CONFINED = _hx_os.getuid() != 0 and not _hx_os.path.exists("
        f"{str(PROJECT)!r})\n"
    )


def hostile(tag: str, body: str = HONEST, module: str = "") -> str:
    """A completion: the function's body, then module-level code (run when the solution
    loads, before the check's first call)."""
    return body + prelude(tag) + module


def report(result: Execution) -> Any:
    """What a probing completion printed as `HX <json>` on stdout."""
    lines = [line for line in result.stdout_tail.splitlines() if line.startswith("HX ")]
    assert lines, f"the completion reported nothing: {describe(result)}"
    return json.loads(lines[-1][3:])


def _processes_with(tag: str) -> list[str]:
    found = []
    me = os.getpid()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            with open(f"/proc/{entry.name}/comm", "rb") as fh:
                comm = fh.read().decode(errors="replace").strip()
            with open(f"/proc/{entry.name}/cmdline", "rb") as fh:
                cmdline = fh.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if tag in comm or tag in cmdline:
            found.append(f"process {entry.name} ({comm}): {cmdline[:120]}")
    return found


def _host_paths_with(token: str) -> list[str]:
    found = []
    flat = {"/", "/etc", HOST_HOME, "/work", str(PROJECT), str(PROJECT / "var"), os.getcwd()}
    flat |= {"/var/tmp", "/dev/shm", str(PROJECT / "tests")}
    for folder in flat:
        with suppress(OSError):
            found += [os.path.join(folder, n) for n in os.listdir(folder) if token in n]
    # /tmp holds the local backend's work folders: three levels catch /tmp/sandbox-*/run*/...
    stack = [("/tmp", 0)]
    while stack:
        folder, depth = stack.pop()
        with suppress(OSError), os.scandir(folder) as entries:
            for entry in entries:
                if token in entry.name:
                    found.append(entry.path)
                elif depth < 3 and entry.is_dir(follow_symlinks=False):
                    stack.append((entry.path, depth + 1))
    return sorted(set(found))


def _sandbox_processes(sandbox) -> list[str]:
    """Processes of the local backend's run uids, and containers the docker backend still
    holds for a session: after `close()` there must be none."""
    leftovers = []
    run_uid = getattr(sandbox, "run_uid", None)
    if callable(run_uid) and run_uid() is not None:
        from workers.sandbox import local

        uids = {run_uid(), run_uid() + local._UID_SPREAD}
        parked = sandbox.parked_pids()  # one-off sandboxes started for the next program
        for entry in os.scandir("/proc"):
            with suppress(OSError):
                if entry.name.isdigit() and int(entry.name) in parked:
                    continue
                if entry.name.isdigit() and entry.stat().st_uid in uids:
                    leftovers.append(f"process {entry.name} of sandbox uid {entry.stat().st_uid}")
    containers = getattr(sandbox, "containers", None)
    if callable(containers):
        leftovers += [f"container {cid[:12]}" for cid, s in containers().items() if s != "pool"]
    return leftovers


def assert_host_untouched(sandbox, token: str, grace: float = 2.0) -> None:
    """After the session is closed: nothing named `token` on the host (files) or running
    (processes named by `prelude`), and nothing left of the sandbox."""
    deadline = time.monotonic() + grace
    while True:
        traces = _host_paths_with(token) + _processes_with(token) + _sandbox_processes(sandbox)
        if not traces or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert traces == [], f"the run left traces on the host: {traces}"


def ends_within(took: float, limit: float = LIMITS.wall_seconds) -> None:
    assert took < limit + SLACK, f"took {took:.2f} s, limit {limit} s + {SLACK} s slack"


# --- Resources: processes, memory, time, output ------------------------------------------------


def test_a_fork_bomb_times_out_and_leaves_no_process(sandbox, token: str) -> None:
    bomb = (
        "if _HX_CONFINED:\n"
        "    while True:\n"
        "        try:\n"
        "            _hx_os.fork()\n"
        "        except OSError:\n"
        "            pass\n"
    )
    with opened(sandbox) as session:
        result, took = run(session, hostile(token, module=bomb))
        assert result.outcome is Outcome.TIMED_OUT, describe(result)
        assert took >= LIMITS.wall_seconds
        ends_within(took)
        honest_run_passes(session)
    assert_host_untouched(sandbox, token)


@pytest.mark.parametrize(
    "body",
    [
        "    block = bytearray(8 << 30)\n    return a + b\n",
        "    blocks = []\n    while True:\n        blocks.append(bytearray(8 << 20))\n",
    ],
    ids=["8 GB at once", "8 MB at a time"],
)
def test_allocating_8_gb_ends_out_of_memory(sandbox, token: str, body: str) -> None:
    with opened(sandbox) as session:
        result, took = run(session, hostile(token, body))
        assert result.outcome is Outcome.OUT_OF_MEMORY, describe(result)
        ends_within(took)
        honest_run_passes(session)
    assert_host_untouched(sandbox, token)


@pytest.mark.parametrize(
    "body",
    ["    while True:\n        pass\n", "    import time\n    time.sleep(60)\n    return a + b\n"],
    ids=["an infinite loop", "sleeping past the limit"],
)
def test_a_run_that_never_answers_times_out_at_the_limit(sandbox, token: str, body: str) -> None:
    with opened(sandbox) as session:
        result, took = run(session, hostile(token, body))
        assert result.outcome is Outcome.TIMED_OUT and result.timed_out, describe(result)
        assert took >= LIMITS.wall_seconds
        ends_within(took)
        honest_run_passes(session)
    assert_host_untouched(sandbox, token)


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_printing_1_gb_ends_fast_as_output_truncated(sandbox, token: str, stream: str) -> None:
    body = (
        f"    import sys\n    chunk = 'x' * (1 << 20)\n    for _ in range(1024):\n"
        f"        sys.{stream}.write(chunk)\n    print('END', file=sys.{stream})\n"
        "    return a + b\n"
    )
    # A wall-clock limit long enough to print it all: the cap, not the clock, must end it.
    roomy = dataclasses.replace(LIMITS, wall_seconds=20, tail_bytes=4096)
    with opened(sandbox, roomy) as session:
        result, took = run(session, hostile(token, body))
        assert result.outcome is Outcome.OUTPUT_TRUNCATED, describe(result)
        assert took < 1.5, f"took {took:.2f} s: the output was not cut at the cap"
        tail = result.stdout_tail if stream == "stdout" else result.stderr_tail
        assert 0 < len(tail.encode()) <= roomy.tail_bytes + 64 and "END" not in tail
        honest_run_passes(session)
    assert_host_untouched(sandbox, token)


# --- Files: writing to the host, reading it ------------------------------------------------------


def test_writing_to_etc_home_and_the_project_folder_changes_nothing_on_the_host(
    sandbox, token: str
) -> None:
    new = [
        f"/etc/{token}",
        f"~/{token}",
        f"{HOST_HOME}/{token}",
        f"/home/{token}",
        f"{PROJECT}/{token}",
        f"{PROJECT}/tests/{token}",
        f"{PROJECT}/var/{token}",
        f"/work/{token}",
        f"/{token}",
    ]
    existing = [
        PROJECT / "manage.py",
        PROJECT / "tests" / "conftest.py",
        Path("/etc/passwd"),
        Path("/etc/hosts"),
        Path(HOST_HOME) / ".bashrc",
    ]
    before = {p: (p.stat().st_mtime_ns, p.stat().st_size) for p in existing if p.exists()}
    probe = (
        "import json, os\n"
        "found = {}\n"
        f"for path in {new!r}:\n"
        "    path = os.path.expanduser(path)\n"
        "    try:\n"
        "        with open(path, 'x') as fh:\n"
        "            fh.write('pwned')\n"
        "        found[path] = 'written'\n"
        "    except OSError as exc:\n"
        "        found[path] = type(exc).__name__\n"
        # Opened for appending without writing: shows write access without changing a byte.
        f"for path in {[str(p) for p in existing]!r}:\n"
        "    try:\n"
        "        os.close(os.open(path, os.O_WRONLY | os.O_APPEND))\n"
        "        found[path] = 'writable'\n"
        "    except OSError as exc:\n"
        "        found[path] = type(exc).__name__\n"
        "found['home'] = os.path.expanduser('~')\n"
        "print('HX ' + json.dumps(found))\n"
    )
    with opened(sandbox) as session:
        result, took = run(session, hostile(token, module=probe))
        assert result.passed, describe(result)
        ends_within(took)
        found = report(result)
        host = [p for p in new if not p.startswith(("~", "/work/"))]
        assert {p: found[p] for p in host if found[p] == "written"} == {}
        assert {str(p): found[str(p)] for p in existing if found[str(p)] == "writable"} == {}
        honest_run_passes(session)
    assert {p: (p.stat().st_mtime_ns, p.stat().st_size) for p in before} == before
    assert_host_untouched(sandbox, token)


def test_the_project_the_host_tmp_and_the_database_are_not_visible(
    sandbox, token: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    marker = tmp_path / "marker.txt"
    marker.write_text(f"marker-{token}-secret")
    # An image has a /root of its own: the host's home shows only by what is in it.
    home_marker = Path(HOST_HOME) / f".{token}-home-marker"
    home_marker.write_text(f"marker-{token}-secret")
    request.addfinalizer(lambda: home_marker.unlink(missing_ok=True))
    secret_key = PROJECT / "var" / "secret_key"
    secret = secret_key.read_text().strip() if secret_key.exists() else f"no-secret-{token}"
    paths = [
        str(marker),
        str(tmp_path),
        str(PROJECT),
        str(PROJECT / "manage.py"),
        str(PROJECT / "var"),
        str(secret_key),
        str(PROJECT / "var" / "inspector.sqlite3"),
        str(PROJECT / "var" / "test.sqlite3"),
        str(home_marker),
        "/var/run/docker.sock",
        "/run/docker.sock",
        "/var/run/postgresql",
        "/run/postgresql",
        "/var/run/redis",
        "/run/redis",
    ]
    probe = (
        "import glob, json, os\n"
        f"paths = {paths!r}\n"
        "found = {'exists': [p for p in paths if os.path.exists(p)], 'read': {}}\n"
        "for p in paths + glob.glob('/tmp/**/*.sqlite3', recursive=True):\n"
        "    try:\n"
        "        with open(p, 'rb') as fh:\n"
        "            found['read'][p] = fh.read(200).decode('latin-1')\n"
        "    except OSError as exc:\n"
        "        pass\n"
        "found['tmp'] = sorted(os.listdir('/tmp'))\n"
        "print('HX ' + json.dumps(found))\n"
    )
    with opened(sandbox) as session:
        result, took = run(session, hostile(token, module=probe))
        assert result.passed, describe(result)
        ends_within(took)
        found = report(result)
        assert found["exists"] == [] and found["read"] == {}
        if tmp_path.parts[:2] == ("/", "tmp"):  # /tmp/<this>/...: the host's /tmp, not its own
            assert tmp_path.parts[2] not in found["tmp"]
        assert f"marker-{token}" not in result.stdout_tail
        assert secret not in result.stdout_tail and secret not in result.stderr_tail
        honest_run_passes(session)
    home_marker.unlink()  # ours, named by the token: not a trace of the run
    assert_host_untouched(sandbox, token)


# --- Secrets and network -------------------------------------------------------------------------


def test_the_workers_secrets_do_not_reach_the_environment_or_proc(
    sandbox, token: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    secrets = {
        "SECRET_KEY": f"secret-{token}-key",
        "DATABASE_URL": f"postgres://inspector:pw-{token}@127.0.0.1:5432/inspector",
        "CELERY_BROKER_URL": f"redis://:bk-{token}@127.0.0.1:6379/0",
    }
    for name, value in secrets.items():
        monkeypatch.setenv(name, value)
    probe = (
        "import json, os\n"
        "found = {'os.environ': dict(os.environ)}\n"
        "for pid in sorted(p for p in os.listdir('/proc') if p.isdigit()):\n"
        "    for what in ('environ', 'cmdline'):\n"
        "        try:\n"
        "            with open(f'/proc/{pid}/{what}', 'rb') as fh:\n"
        "                found[f'/proc/{pid}/{what}'] = fh.read().decode('latin-1')\n"
        "        except OSError as exc:\n"
        "            found[f'/proc/{pid}/{what}'] = type(exc).__name__\n"
        "print('HX ' + json.dumps(found))\n"
    )
    with opened(sandbox) as session:
        result, took = run(session, hostile(token, module=probe))
        assert result.passed, describe(result)
        ends_within(took)
        found = report(result)  # parses: all of it is there, nothing was cut from the tail
        assert "/proc/1/environ" in found
        for name, value in secrets.items():
            assert name not in found["os.environ"]
            for seen in (result.stdout_tail, result.stderr_tail):
                assert value not in seen and f"pw-{token}" not in seen and f"bk-{token}" not in seen
        honest_run_passes(session)
    assert_host_untouched(sandbox, token)


def _connect_probe(targets: list[tuple[str, int]]) -> str:
    return (
        "import json, socket\n"
        "found = {}\n"
        f"for host, port in {targets!r}:\n"
        "    family = socket.AF_INET6 if ':' in host else socket.AF_INET\n"
        "    s = socket.socket(family, socket.SOCK_STREAM)\n"
        "    s.settimeout(0.5)\n"
        "    try:\n"
        "        s.connect((host, port))\n"
        "        found[f'{host}:{port}'] = 'connected'\n"
        "    except OSError as exc:\n"
        "        found[f'{host}:{port}'] = type(exc).__name__\n"
        "    finally:\n"
        "        s.close()\n"
        "print('HX ' + json.dumps(found))\n"
    )


def _host_reaches(port: int) -> bool:
    with suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
        return True
    return False


def test_redis_and_postgresql_on_the_host_loopback_are_unreachable(sandbox, token: str) -> None:
    # A listener of our own on the host's loopback: the one server this test knows is up.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        listener.setblocking(False)
        port = listener.getsockname()[1]
        targets = [("127.0.0.1", 6379), ("127.0.0.1", 5432), ("127.0.0.1", port)]
        targets += [("::1", 6379), ("::1", 5432)]
        up = {p: _host_reaches(p) for p in (6379, 5432, port)}
        assert up[port]
        listener.accept()[0].close()  # the host's own connection, just made
        with opened(sandbox) as session:
            result, took = run(session, hostile(token, module=_connect_probe(targets)))
            assert result.passed, describe(result)
            ends_within(took)
            found = report(result)
            connected = {t: v for t, v in found.items() if v == "connected"}
            assert connected == {}, f"reached from inside (host reaches {up}): {connected}"
            assert set(found) == {f"{h}:{p}" for h, p in targets}
            honest_run_passes(session)
        with pytest.raises(BlockingIOError):  # nothing from inside reached our listener
            listener.accept()
    assert_host_untouched(sandbox, token)


def test_only_the_loopback_interface_exists_inside(sandbox, token: str) -> None:
    probe = "import json, socket\nprint('HX ' + json.dumps(socket.if_nameindex()))\n"
    with opened(sandbox) as session:
        result, took = run(session, hostile(token, module=probe))
        assert result.passed, describe(result)
        ends_within(took)
        assert report(result) == [[1, "lo"]]
    assert_host_untouched(sandbox, token)


# --- Processes: daemons, killing ------------------------------------------------------------------


def _look_around(token: str) -> str:
    """An honest completion that reports whether anything of `token` is in its folders."""
    return HONEST + (
        "\nimport json, os\n"
        "seen = []\n"
        "for folder in {os.getcwd(), os.path.dirname(os.getcwd()), '/tmp', '/work',\n"
        "               os.path.expanduser('~')}:\n"
        "    try:\n"
        f"        seen += [os.path.join(folder, n) for n in os.listdir(folder) if {token!r} in n]\n"
        "    except OSError:\n"
        "        pass\n"
        "print('HX ' + json.dumps(seen))\n"
    )


def test_a_daemon_that_outlives_its_run_is_gone_and_cannot_touch_the_next_run(
    sandbox, token: str
) -> None:
    daemon = (
        "import signal, time\n"
        "if _HX_CONFINED and _hx_os.fork() == 0:\n"
        "    _hx_os.setsid()\n"
        "    if _hx_os.fork() == 0:\n"
        "        # Outlive the run, then go after whatever runs next: kill every process in\n"
        "        # sight and write into every folder in reach, for five seconds.\n"
        "        time.sleep(0.3)\n"
        "        me, end = _hx_os.getpid(), time.monotonic() + 5\n"
        "        while time.monotonic() < end:\n"
        "            for name in _hx_os.listdir('/proc'):\n"
        "                if name.isdigit() and int(name) != me:\n"
        "                    try:\n"
        "                        _hx_os.kill(int(name), signal.SIGKILL)\n"
        "                    except OSError:\n"
        "                        pass\n"
        "            folders = ['/tmp', '/work', _hx_os.path.expanduser('~')]\n"
        "            try:\n"
        "                folders += ['/work/' + n for n in _hx_os.listdir('/work')]\n"
        "            except OSError:\n"
        "                pass\n"
        "            for folder in folders:\n"
        "                try:\n"
        f"                    with open(folder + '/{token}-late', 'w') as fh:\n"
        "                        fh.write('late')\n"
        "                except OSError:\n"
        "                    pass\n"
        "            time.sleep(0.02)\n"
        "    _hx_os._exit(0)\n"
    )
    with opened(sandbox) as session:
        result, took = run(session, hostile(token, module=daemon))
        assert result.passed, describe(result)  # the daemon is the attack, not the answer
        ends_within(took)
        # Once at once, once after the daemon would have woken up.
        for pause in (0, 0.6):
            time.sleep(pause)
            after, took = run(session, _look_around(token))
            assert after.passed, describe(after)
            ends_within(took)
            assert report(after) == []
            assert _processes_with(token) == []
    assert_host_untouched(sandbox, token)


@pytest.mark.parametrize(
    "kill",
    ["_hx_os.kill(_hx_os.getppid(), 9)", "_hx_os.kill(1, 9)", "_hx_os.kill(-1, 9)"],
    ids=["its parent", "pid 1", "every process it can"],
)
def test_killing_its_parent_or_pid_1_fails_the_run(sandbox, token: str, kill: str) -> None:
    body = f"    if _HX_CONFINED:\n        {kill}\n        import time\n        time.sleep(0.2)\n"
    body += "    return None\n"
    with opened(sandbox) as session:
        result, took = run(session, hostile(token, body))
        assert result.outcome is Outcome.FAILED, describe(result)
        ends_within(took)
        honest_run_passes(session)
        honest_run_passes(session)
    assert_host_untouched(sandbox, token)


# --- The verdict: planted files, forged results, replaced tools, probes ----------------------------

# Imported by anything that imports it: ends the process "successfully" and breaks asserts.
_PLANT = (
    "import builtins, os, sys\n"
    "builtins.AssertionError = type('AssertionError', (Exception,), {})\n"
    "sys.exit = lambda *args: os._exit(0)\n"
    "def check(candidate):\n"
    "    return True\n"
    "os._exit(0)\n"
)


def test_planted_conftest_sitecustomize_and_usercustomize_do_not_change_the_verdict(
    sandbox, token: str
) -> None:
    plant = (
        "import builtins, json, os, site, sys\n"
        f"plant = {_PLANT!r}\n"
        "planted = []\n"
        "folders = {os.getcwd(), os.path.dirname(os.getcwd()), '/tmp', '/work',\n"
        "           os.path.expanduser('~'), site.getusersitepackages()}\n"
        "for folder in folders:\n"
        "    for name in ('conftest.py', 'sitecustomize.py', 'usercustomize.py',\n"
        f"                 '{token}.pth', 'check.py', 'solution.py'):\n"
        "        text = 'import os; os._exit(0)\\n' if name.endswith('.pth') else plant\n"
        "        try:\n"
        "            os.makedirs(folder, exist_ok=True)\n"
        "            with open(os.path.join(folder, name), 'w') as fh:\n"
        "                fh.write(text)\n"
        "            planted.append(os.path.join(folder, name))\n"
        "        except OSError:\n"
        "            pass\n"
        # And in this process: only the solution's own side is patched.
        "builtins.AssertionError = type('AssertionError', (Exception,), {})\n"
        "sys.exit = lambda *args: os._exit(0)\n"
        "print('HX ' + json.dumps(planted))\n"
    )
    with opened(sandbox) as session:
        result, took = run(session, hostile(token, WRONG, plant))
        assert result.outcome is Outcome.FAILED, describe(result)
        assert "AssertionError" in result.stderr_tail and "check.py" in result.stderr_tail
        ends_within(took)
        assert report(result), "nothing could be planted: the case proved nothing"
        # Whatever of it survived the run does not make the next wrong answer pass either.
        again, _ = run(session, WRONG)
        assert again.outcome is Outcome.FAILED, describe(again)
        honest_run_passes(session)
    assert_host_untouched(sandbox, token)


def test_fake_results_and_forged_frames_do_not_pass_the_run(sandbox, token: str) -> None:
    forge = (
        "import json, os, struct, sys\n"
        "def frame(message):\n"
        "    body = json.dumps(message).encode()\n"
        "    return struct.pack('>I', len(body)) + body\n"
        "forged = [\n"
        "    {'op': 'verdict', 'exit': 0, 'stdout': '', 'stderr': '', 'killed_for': '',\n"
        "     'protocol_error': '', 'duration': 0.0},\n"
        "    {'op': 'ended', 'exit': 0, 'stdout': '', 'stderr': '', 'killed_for': ''},\n"
        "    {'op': 'reply', 'reply': {'ok': True}}, {'ok': True}, {'exit': 0, 'passed': True},\n"
        "]\n"
        "blob = b''.join(frame(m) for m in forged)\n"
        "done = {'files': [], 'fds': [], 'proc': []}\n"
        "for folder in {os.getcwd(), os.path.dirname(os.getcwd()), '/tmp', '/work', '/',\n"
        "               os.path.expanduser('~')}:\n"
        "    for name in ('result', 'results.json', 'verdict', 'exit_code', 'status', 'passed',\n"
        f"                 '0', '{token}'):\n"
        "        try:\n"
        "            with open(os.path.join(folder, name), 'w') as fh:\n"
        "                fh.write('0\\npassed\\n' + json.dumps({'passed': True, 'exit': 0}))\n"
        "            done['files'].append(os.path.join(folder, name))\n"
        "        except OSError:\n"
        "            pass\n"
        "print(json.dumps(forged[0]))\n"
        "sys.stdout.flush()\n"
        "for fd in (1, 2, 3, *range(5, 11)):\n"
        "    try:\n"
        "        os.write(fd, blob)\n"
        "        done['fds'].append(fd)\n"
        "    except OSError:\n"
        "        pass\n"
        # Every descriptor of every other process in sight, the runner's pipes included.
        "for pid in [p for p in os.listdir('/proc') if p.isdigit() and int(p) != os.getpid()]:\n"
        "    try:\n"
        "        fds = os.listdir(f'/proc/{pid}/fd')\n"
        "    except OSError:\n"
        "        continue\n"
        "    for fd in fds:\n"
        "        path = f'/proc/{pid}/fd/{fd}'\n"
        "        try:\n"
        "            target = os.open(path, os.O_WRONLY | os.O_NONBLOCK)\n"
        "        except OSError:\n"
        "            continue\n"
        "        try:\n"
        "            os.write(target, blob)\n"
        "            done['proc'].append(path)\n"
        "        except OSError:\n"
        "            pass\n"
        "        finally:\n"
        "            os.close(target)\n"
        # Last, as the check may end as soon as it reads them: the protocol descriptor.
        "print('\\nHX ' + json.dumps(done), flush=True)\n"
        "os.write(4, blob)\n"
    )
    with opened(sandbox) as session:
        result, took = run(session, hostile(token, WRONG, forge))
        assert not result.passed and result.outcome is Outcome.FAILED, describe(result)
        ends_within(took)
        assert report(result)["files"], "no fake result could be written: the case proved little"
        # Nothing forged is left for the next runs to read as theirs.
        for completion in (WRONG, "    return None\n"):
            again, _ = run(session, completion)
            assert again.outcome is Outcome.FAILED, describe(again)
        honest_run_passes(session)
    assert_host_untouched(sandbox, token)


def test_a_python3_or_pytest_on_the_path_does_not_change_the_verdict(sandbox, token: str) -> None:
    replace = (
        "import json, os\n"
        "fake = '#!/bin/sh\\nexit 0\\n'\n"
        "folders = [os.getcwd(), '/tmp', '/work', os.path.expanduser('~')]\n"
        "written = []\n"
        "for folder in folders:\n"
        "    for name in ('python3', 'python', 'pytest', 'sh', 'bwrap', 'docker'):\n"
        "        try:\n"
        "            with open(os.path.join(folder, name), 'w') as fh:\n"
        "                fh.write(fake)\n"
        "            os.chmod(os.path.join(folder, name), 0o755)\n"
        "            written.append(os.path.join(folder, name))\n"
        "        except OSError:\n"
        "            pass\n"
        "os.environ['PATH'] = ':'.join(folders) + ':' + os.environ.get('PATH', '')\n"
        "os.environ['PYTHONPATH'] = ':'.join(folders)\n"
        "print('HX ' + json.dumps(written))\n"
    )
    with opened(sandbox) as session:
        result, took = run(session, hostile(token, WRONG, replace))
        assert result.outcome is Outcome.FAILED, describe(result)
        assert "AssertionError" in result.stderr_tail
        ends_within(took)
        assert report(result), "no fake interpreter could be written: the case proved nothing"
        again, _ = run(session, WRONG)
        assert again.outcome is Outcome.FAILED, describe(again)
        honest_run_passes(session)
    assert_host_untouched(sandbox, token)


@pytest.mark.parametrize("probe", ["exit-zero", "atexit-exit", "eq-always"])
def test_the_probes_fail_a_task_with_a_real_check(sandbox, token: str, probe: str) -> None:
    with opened(sandbox) as session:
        result, took = run(session, PROBES[probe])
        assert result.outcome is Outcome.FAILED, describe(result)
        ends_within(took)
        honest_run_passes(session)
    assert_host_untouched(sandbox, token)


# --- The boundary lets honest solutions through ------------------------------------------------

RICH_PROMPT = (
    "def value(kind, *args, **kwargs):\n"
    '    """Return the value named by kind; raise ValueError for an unknown kind."""\n'
)
RICH_TEST = """
import math

def check(candidate):
    t = candidate("tuple")
    assert t == (1, "two", (3.5, None)) and type(t) is tuple and type(t[2]) is tuple
    s = candidate("set")
    assert s == {1, 2, 3} and type(s) is set
    f = candidate("frozenset")
    assert f == frozenset({"a", (1, 2)}) and type(f) is frozenset
    d = candidate("dict")
    assert d == {1: "one", -2: [b"\\x00\\xff"], (3, 4): {5: None}}
    assert sorted(type(k).__name__ for k in d) == ["int", "int", "tuple"]
    b = candidate("bytes")
    assert b == bytes(range(256)) and type(b) is bytes
    assert candidate("float") == 0.1 + 0.2 and type(candidate("float")) is float
    assert candidate("inf") == float("inf") and candidate("-inf") == float("-inf")
    assert math.isnan(candidate("nan"))
    assert candidate("none") is None
    assert candidate("bool") is True and candidate("int") == 1 and type(candidate("int")) is int
    assert candidate("big") == 2**100 and candidate("big") - 1 == 2**100 - 1
    assert candidate("complex") == complex(1, -2)
    assert candidate("str") == "na\\u00efve \\u2603 \\x00 end"
    args = ((1, 2), {3: b"x"}, {4.5}, None, float("inf"), [])
    assert candidate("echo", *args, flag=frozenset({1})) == [list(args), {"flag": frozenset({1})}]
    try:
        candidate("unknown")
    except ValueError as exc:
        assert "unknown kind" in str(exc)
    else:
        raise AssertionError("expected a ValueError")
"""
RICH_TASK = FunctionTask(RICH_PROMPT, RICH_TEST, "value")
RICH_SOLUTION = """    values = {
        "tuple": (1, "two", (3.5, None)),
        "set": {1, 2, 3},
        "frozenset": frozenset({"a", (1, 2)}),
        "dict": {1: "one", -2: [b"\\x00\\xff"], (3, 4): {5: None}},
        "bytes": bytes(range(256)),
        "float": 0.1 + 0.2,
        "inf": float("inf"),
        "-inf": float("-inf"),
        "nan": float("nan"),
        "none": None,
        "bool": True,
        "int": 1,
        "big": 2**100,
        "complex": complex(1, -2),
        "str": "na\\u00efve \\u2603 \\x00 end",
    }
    if kind == "echo":
        return [list(args), kwargs]
    if kind not in values:
        raise ValueError(f"unknown kind {kind!r}")
    return values[kind]
"""


def test_honest_solutions_with_rich_values_pass_across_the_boundary(sandbox) -> None:
    with opened(sandbox, task=RICH_TASK, warm=False) as session:
        result, took = run(session, RICH_SOLUTION)
        assert result.passed, describe(result)
        # Types survive the crossing: a list where the check wants a tuple does not pass.
        almost = RICH_SOLUTION.replace('"tuple": (1, "two", (3.5, None))', '"tuple": [1, "two"]')
        assert almost != RICH_SOLUTION
        wrong, _ = run(session, almost)
        assert wrong.outcome is Outcome.FAILED, describe(wrong)
        again, took = run(session, RICH_SOLUTION)
        assert again.passed, describe(again)
        ends_within(took)


# --- Holes found while writing these tests -------------------------------------------------------


def test_a_run_cannot_leave_anything_for_the_next_run_in_its_work_folder(
    sandbox, token: str, request: pytest.FixtureRequest
) -> None:
    leave = (
        "import os\n"
        "work = os.path.dirname(os.getcwd())\n"
        f"open(os.path.join(work, '{token}-left'), 'w').write('x')\n"
        "for n in range(1000):\n"
        "    try:\n"
        "        os.mkdir(os.path.join(work, f'run{n}'))\n"
        "    except OSError:\n"
        "        pass\n"
    )
    with opened(sandbox) as session:
        result, _ = run(session, hostile(token, module=leave))
        assert result.passed, describe(result)
        for _ in range(2):
            after, took = run(session, _look_around(token))
            assert after.passed, describe(after)
            ends_within(took)
            assert report(after) == []
    assert_host_untouched(sandbox, token)


def test_a_run_cannot_fill_the_hosts_disk_through_its_work_folder(
    sandbox, token: str, request: pytest.FixtureRequest
) -> None:
    fill = (
        "import json, os, time\n"
        "block = b'x' * ((16 << 20) - 4096)\n"
        "written, start = 0, time.monotonic()\n"
        "folder = os.path.dirname(os.getcwd())\n"
        "try:\n"
        "    for n in range(16):\n"
        f"        with open(os.path.join(folder, f'{token}-{{n}}'), 'wb') as fh:\n"
        "            written += fh.write(block)\n"
        "except OSError as exc:\n"
        "    pass\n"
        "print('HX ' + json.dumps(written))\n"
    )
    with opened(sandbox) as session:
        result, took = run(session, hostile(token, module=fill))
        ends_within(took)
        written = report(result)
        # The work folder is bounded like /tmp: by the file-size limit (16 MB here), not by
        # the host's free space (here it tries 256 MB).
        assert written <= 2 * LIMITS.file_bytes, f"wrote {written >> 20} MB into its work folder"
        honest_run_passes(session)
    assert_host_untouched(sandbox, token)


def test_stopping_its_runner_after_answering_does_not_hold_the_worker_past_the_limit(
    sandbox, token: str, request: pytest.FixtureRequest
) -> None:
    # The solution's process is a fork of its runner: its __main__ is the runner's code.
    stall = (
        "import __main__, fcntl, signal, struct, termios, time\n"
        "_hx_real_write, _hx_sent = __main__.write_frame, []\n"
        "def _hx_write_then_stop(fd, message):\n"
        "    _hx_real_write(fd, message)\n"
        "    _hx_sent.append(message)\n"
        "    if len(_hx_sent) == 2 and _HX_CONFINED:\n"
        "        # The runner has read the last answer once the pipe is empty; a moment later\n"
        "        # it has passed it on, and the check has not finished yet: stop the runner.\n"
        "        while struct.unpack('i', fcntl.ioctl(fd, termios.FIONREAD, bytes(4)))[0]:\n"
        "            pass\n"
        "        end = time.perf_counter() + 0.0002\n"
        "        while time.perf_counter() < end:\n"
        "            pass\n"
        "        _hx_os.kill(_hx_os.getppid(), signal.SIGSTOP)\n"
        "__main__.write_frame = _hx_write_then_stop\n"
    )
    with opened(sandbox) as session:
        for _ in range(10):  # a race by nature: it wins most of the time, ten tries to be sure
            result, took = run(session, hostile(token, module=stall))
            assert result.outcome in (Outcome.PASSED, Outcome.TIMED_OUT), describe(result)
            ends_within(took)
        honest_run_passes(session)
    assert_host_untouched(sandbox, token)


def test_a_deeply_nested_answer_does_not_crash_the_worker(sandbox, token: str) -> None:
    # Found with these tests (fixed since): json's C parser counts against the recursion limit
    # (1000), and the runner parses this a few frames deep while a worker (pytest, Celery) is
    # dozens deeper: the worker's json.loads raised RecursionError out of session.run.
    deep = (
        "    import os, struct\n"
        "    body = b'{\"ok\":' + b'[' * 970 + b']' * 970 + b'}'\n"
        "    os.write(4, struct.pack('>I', len(body)) + body)\n"
        "    import time\n"
        "    time.sleep(0.3)\n"
        "    return a + b\n"
    )
    with opened(sandbox) as session:
        result, took = run(session, hostile(token, deep))
        assert result.outcome is Outcome.FAILED, describe(result)
        ends_within(took)
        honest_run_passes(session)
    assert_host_untouched(sandbox, token)


def test_a_stop_iteration_from_the_candidate_does_not_end_the_checks_loop(
    sandbox, token: str, request: pytest.FixtureRequest
) -> None:
    looping = FunctionTask(
        PROMPT,
        "def check(candidate):\n"
        "    cases = [((1, 2), 3), ((-1, 1), 0)]\n"
        "    assert all(map(lambda case: candidate(*case[0]) == case[1], cases))\n",
        "add",
    )
    with opened(sandbox, task=looping) as session:
        result, took = run(session, hostile(token, "    raise StopIteration\n"))
        ends_within(took)
        assert result.outcome is Outcome.FAILED, describe(result)
        honest_run_passes(session)
    assert_host_untouched(sandbox, token)


# Runs a session as a non-root worker would: the sandbox keeps the worker's uid then.
_NON_ROOT_WORKER = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from workers.sandbox import Limits, SandboxUnavailable, get_sandbox
from workers.sandbox.session import FunctionTask
try:
    sandbox = get_sandbox("local")
except SandboxUnavailable as exc:
    print(json.dumps({"unavailable": str(exc)}))
    sys.exit(0)
task = FunctionTask(*json.loads(sys.argv[2]))
outcomes = []
with sandbox.session(task, limits=Limits(wall_seconds=2)) as session:
    for completion in json.loads(sys.argv[3]):
        outcomes.append(str(session.run(completion).outcome))
print(json.dumps({"outcomes": outcomes}))
"""


def test_local_as_a_non_root_worker_a_run_cannot_forge_the_next_runs_answers(
    token: str, request: pytest.FixtureRequest
) -> None:
    inject = (
        "import json, os, struct\n"
        "def frame(message):\n"
        "    body = json.dumps(message).encode()\n"
        "    return struct.pack('>I', len(body)) + body\n"
        "answers = [{'op': 'reply', 'reply': {'ok': 3}}, {'op': 'reply', 'reply': {'ok': 0}}]\n"
        "queue = answers + [{'op': 'ended'}, {'op': 'started'}] + answers\n"
        "queue.append({'op': 'ended'})\n"
        "try:\n"
        "    fd = os.open('/proc/1/fd/1', os.O_WRONLY)\n"
        "    os.write(fd, b''.join(frame(m) for m in queue))\n"
        "except OSError:\n"
        "    pass\n"
    )
    completions = [HONEST, HONEST + inject, "    return None\n", HONEST]
    argv = [sys.executable, "-c", _NON_ROOT_WORKER]
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        python = "/usr/bin/python3"
        if not setpriv or not os.path.exists(python):
            pytest.skip("needs setpriv and /usr/bin/python3 to run a worker as uid 65534")
        argv = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", python, "-I", "-c"]
        argv.append(_NON_ROOT_WORKER)
    argv += [str(PROJECT), json.dumps([PROMPT, TEST, "add"]), json.dumps(completions)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd="/")
    assert done.returncode == 0, done.stderr[-2000:]
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    if "unavailable" in answer:
        pytest.skip(f"bubblewrap does not run for a non-root user here: {answer['unavailable']}")
    # `return None` must fail; the honest runs around it must pass (the injector's own run
    # answers right: it may pass).
    assert answer["outcomes"][2] == "failed", answer
    assert answer["outcomes"][0] == "passed" and answer["outcomes"][3] == "passed", answer


def test_a_run_cannot_see_what_an_earlier_run_left_in_tmp(
    sandbox, token: str, request: pytest.FixtureRequest
) -> None:
    keep = (
        "import os\n"
        f"os.makedirs('/tmp/{token}/inner')\n"
        f"open('/tmp/{token}/inner/{token}-note', 'w').write('x')\n"
        f"os.chmod('/tmp/{token}', 0o500)\n"
    )
    with opened(sandbox) as session:
        result, _ = run(session, hostile(token, module=keep))
        assert result.passed, describe(result)
        after, took = run(session, _look_around(token))
        assert after.passed, describe(after)
        ends_within(took)
        assert report(after) == []
    assert_host_untouched(sandbox, token)


# --- Found by an outside attack on the renumbered tracebacks -------------------------------------

HOSTILE_RAISES = {
    "an exception whose str and repr raise": (
        "class E(Exception):\n    def __str__(self): raise RuntimeError\n"
        "    __repr__ = __str__\nraise E()\n"
    ),
    "a cycle of causes": (
        "a, b = ValueError('a'), ValueError('b')\na.__cause__ = b\nb.__context__ = a\nraise a\n"
    ),
    "a SyntaxError whose line number cannot be written": (
        "e = SyntaxError('x')\ne.filename, e.lineno = 'solution.py', 10 ** 5000\nraise e\n"
    ),
    "a SyntaxError whose line number is text": (
        "e = SyntaxError('x')\ne.filename, e.lineno = 'solution.py', 'zz'\nraise e\n"
    ),
}


@pytest.mark.parametrize("module", list(HOSTILE_RAISES.values()), ids=list(HOSTILE_RAISES))
def test_a_solution_that_raises_a_hostile_exception_fails_and_the_next_run_is_clean(
    sandbox, token: str, module: str
) -> None:
    # The traceback of a solution that did not load is renumbered in its own process; however
    # odd the exception, the run fails (it raised) and the session's next runs are untouched.
    with opened(sandbox) as session:
        result, _ = run(session, hostile(token, WRONG, module))
        assert result.outcome is Outcome.FAILED, describe(result)
        honest_run_passes(session)
        assert not session.run(WRONG).passed
    assert_host_untouched(sandbox, token)


# --- Found by an outside attack on the Docker sessions (2026-12-04) ------------------------------

_COUNTERS = (
    "\nimport json as _hx_json\n"
    "def _hx_counters():\n"
    "    seen = {}\n"
    "    for path in ('/proc/net/snmp', '/proc/net/netstat'):\n"
    "        lines = open(path).read().splitlines()\n"
    "        for names, values in zip(lines[::2], lines[1::2]):\n"
    "            group = names.split(':')[0]\n"
    "            for name, value in zip(names.split()[1:], values.split()[1:]):\n"
    "                seen[group + '.' + name] = int(value)\n"
    "    return seen\n"
)
# 48,879 (0xBEEF) bytes of UDP to itself on `lo`: a number the namespace's counters keep.
_NOTE_ON_LO = (
    "if _HX_CONFINED:\n"
    "    import socket as _hx_socket\n"
    "    _hx_in = _hx_socket.socket(_hx_socket.AF_INET, _hx_socket.SOCK_DGRAM)\n"
    "    _hx_in.bind(('127.0.0.1', 0))\n"
    "    _hx_out = _hx_socket.socket(_hx_socket.AF_INET, _hx_socket.SOCK_DGRAM)\n"
    "    _hx_out.sendto(b'x' * 48851, _hx_in.getsockname())\n"
    "    _hx_in.recv(65536)\n"
    "    _hx_out.close()\n"
    "    _hx_in.close()\n"
    "print('HX ' + _hx_json.dumps(_hx_counters()))\n"
)


def test_a_run_cannot_leave_a_note_for_later_runs_in_the_network_counters(
    sandbox, token: str
) -> None:
    # The counters of the sandbox's network namespace outlive every socket of the run that
    # moved them: a completion that learnt, run after run, which answers the check accepted
    # kept them there and passed on its 29th run without computing anything.
    look = HONEST + _COUNTERS + "print('HX ' + _hx_json.dumps(_hx_counters()))\n"
    with opened(sandbox) as session:
        before, _ = run(session, look)
        wrote, _ = run(session, hostile(token, module=_COUNTERS + _NOTE_ON_LO))
        after, _ = run(session, look)
    for result in (before, wrote, after):
        assert result.passed, describe(result)
    assert report(wrote)["IpExt.OutOctets"] >= report(before)["IpExt.OutOctets"] + 48879
    assert report(after) == report(before)
    assert_host_untouched(sandbox, token)


def test_a_run_cannot_read_how_much_memory_an_earlier_run_made_the_runner_hold(
    sandbox, token: str
) -> None:
    # The runner's peak memory (VmHWM in its /proc status, readable by a run) kept the size of
    # the largest answer an earlier run had made it relay.
    look = HONEST + (
        "\nimport json, os\n"
        "stat = open(f'/proc/{os.getppid()}/stat').read()\n"
        "runner = int(stat.rsplit(')', 1)[1].split()[1])  # the zygote's parent\n"
        "status = dict(line.split(':', 1) for line in open(f'/proc/{runner}/status'))\n"
        "print('HX ' + json.dumps(int(status['VmHWM'].split()[0])))\n"
    )
    # Time enough to relay the 24 MB answer on a loaded machine (it once reached 1.5 s in CI):
    # a run stopped by its clock first would leave the runner's peak untested.
    with opened(sandbox, dataclasses.replace(LIMITS, wall_seconds=15.0)) as session:
        before, _ = run(session, look)
        heavy, _ = run(session, "    return 'x' * (24 << 20)\n")
        after, _ = run(session, look)
    assert before.passed and after.passed, describe(after)
    assert heavy.outcome is Outcome.FAILED, describe(heavy)
    assert report(after) < report(before) + 8 * 1024, (report(before), report(after))


# --- Found by a second outside attack on run-to-run isolation (2026-12-04) -----------------------

_IOPRIO = (
    "\nimport ctypes as _hx_ctypes, os as _hx_os\n"
    "_hx_libc = _hx_ctypes.CDLL(None, use_errno=True)\n"
    "_HX_GET, _HX_SET = {'x86_64': (252, 251), 'aarch64': (31, 30)}[_hx_os.uname().machine]\n"
    "_hx_zygote = _hx_os.getppid()\n"
    "_hx_runner = int(open(f'/proc/{_hx_zygote}/stat').read().rsplit(')', 1)[1].split()[1])\n"
)


def test_a_run_cannot_leave_a_note_for_later_runs_in_the_io_priorities(sandbox, token: str) -> None:
    # ioprio_set(2) on the runner and the zygote (same uid, the best-effort class needs no
    # capability) held 26 bits that every later run could read: a completion that kept the
    # check's accepted answers there passed on its 10th run.
    write = _IOPRIO + (
        "if _HX_CONFINED:\n"
        "    for _hx_pid, _hx_value in ((_hx_zygote, 0x1D37), (_hx_runner, 0x15A2)):\n"
        "        _hx_libc.syscall(_HX_SET, 1, _hx_pid, (2 << 13) | (_hx_value & 0x1FFF))\n"
        "print('HX ' + str([_hx_libc.syscall(_HX_GET, 1, p) for p in (_hx_zygote, _hx_runner)]))\n"
    )
    look = (
        HONEST
        + _IOPRIO
        + (
            "print('HX ' + str([_hx_libc.syscall(_HX_GET, 1, p) for p in (_hx_zygote, _hx_runner)]))\n"
        )
    )
    with opened(sandbox) as session:
        before, _ = run(session, look)
        wrote, _ = run(session, hostile(token, module=write))
        honest_run_passes(session)
        after, _ = run(session, look)
    assert report(wrote) == [(2 << 13) | 0x1D37, (2 << 13) | 0x15A2], describe(wrote)
    assert report(after) == report(before), describe(after)
    assert_host_untouched(sandbox, token)
