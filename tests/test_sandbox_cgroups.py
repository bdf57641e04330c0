"""Sandbox cgroups on the real kernel: a whole sandbox, however many processes and whatever
pages it uses (tmpfs, /dev/shm), stays under one memory limit and one process count.

The real tests need root and a cgroup v1 memory hierarchy (what this project's hosts have); the
cgroup v2 test checks the files written into a fake tree only. Every leaf is removed in a
finally. Plain tests, no database: `pytest tests/test_sandbox_cgroups.py`.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import subprocess
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from workers.sandbox import cgroups

PYTHON = "/usr/bin/python3"
MiB = 1 << 20
LIMIT = 64 * MiB
PROCESSES = 8

needs_v1 = pytest.mark.skipif(
    os.geteuid() != 0 or not os.path.exists("/sys/fs/cgroup/memory/memory.limit_in_bytes"),
    reason=(
        "needs root and a cgroup v1 memory hierarchy at /sys/fs/cgroup/memory: cgroup v1 "
        "hierarchies belong to root, and this kernel's limits are what is under test"
    ),
)


@pytest.fixture(scope="module")
def controller() -> cgroups.Controller:
    found = cgroups.detect()
    assert found is not None, cgroups.unavailable_reason()
    assert found.version == 1
    return found


@pytest.fixture
def leaf(controller: cgroups.Controller) -> Iterator[cgroups.SandboxCgroup]:
    made = controller.create("test", memory_bytes=LIMIT, max_processes=PROCESSES)
    try:
        yield made
    finally:
        assert made.remove()


def run_inside(
    leaf: cgroups.SandboxCgroup, argv: list[str], timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    files = leaf.procs_files
    return subprocess.run(
        argv,
        preexec_fn=lambda: cgroups.join(files),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def python_inside(
    leaf: cgroups.SandboxCgroup, code: str, *args: str
) -> subprocess.CompletedProcess[str]:
    return run_inside(leaf, [PYTHON, "-c", textwrap.dedent(code), *args])


def gone(pid: int, timeout: float = 5) -> bool:
    """pid has exited (no process, or a zombie nobody has reaped yet)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                if fh.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.02)
    return False


# --- Memory ---------------------------------------------------------------------------------


TOUCH = """
import sys
chunks = [bytes([1]) * (1 << 20) for _ in range(int(sys.argv[1]))]
print("survived", flush=True)
"""


@needs_v1
def test_a_process_touching_more_than_the_limit_is_oom_killed(leaf):
    small = python_inside(leaf, TOUCH, "16")
    assert small.returncode == 0, small.stderr
    before = leaf.oom_kills()

    big = python_inside(leaf, TOUCH, "200")

    assert big.returncode == -signal.SIGKILL, (big.returncode, big.stderr)
    assert "survived" not in big.stdout
    assert leaf.oom_kills() > before
    assert 48 * MiB < leaf.memory_peak() <= LIMIT


TOGETHER = """
import json, os, select, sys, time
count, size = int(sys.argv[1]), int(sys.argv[2])
ready_r, ready_w = os.pipe()
go_r, go_w = os.pipe()
kids = []
for _ in range(count):
    pid = os.fork()
    if pid == 0:
        os.close(ready_r); os.close(go_w)
        held = bytes([1]) * (size << 20)   # touched: every page is charged
        os.write(ready_w, b"+")
        os.read(go_r, 1)                   # hold it until all have theirs (or one died)
        os._exit(0)
    kids.append(pid)
os.close(ready_w); os.close(go_r)
ready, statuses, deadline = 0, {}, time.monotonic() + 20
while ready < count and not statuses and time.monotonic() < deadline:
    if select.select([ready_r], [], [], 0.02)[0]:
        ready += len(os.read(ready_r, count))
    pid, status = os.waitpid(-1, os.WNOHANG)
    if pid:
        statuses[pid] = status
os.close(go_w)
for pid in kids:
    if pid not in statuses:
        statuses[pid] = os.waitpid(pid, 0)[1]
statuses = list(statuses.values())
print(json.dumps({
    "ready": ready,
    "killed": sum(os.WIFSIGNALED(s) and os.WTERMSIG(s) == 9 for s in statuses),
    "ok": sum(os.WIFEXITED(s) and os.WEXITSTATUS(s) == 0 for s in statuses),
}))
"""


@needs_v1
def test_four_processes_each_under_the_limit_cannot_all_hold_their_memory_together(leaf):
    alone = python_inside(leaf, TOGETHER, "1", "24")
    assert alone.returncode == 0, alone.stderr
    assert json.loads(alone.stdout) == {"ready": 1, "killed": 0, "ok": 1}
    before = leaf.oom_kills()

    together = python_inside(leaf, TOGETHER, "4", "24")

    assert leaf.oom_kills() > before
    if together.returncode == -signal.SIGKILL:
        return  # the OOM killer chose the parent: the four did not all finish either
    assert together.returncode == 0, together.stderr
    seen = json.loads(together.stdout)
    assert seen["killed"] >= 1 and seen["ok"] < 4, seen


FILL = """
import sys
with open(sys.argv[1], "wb") as fh:
    for _ in range(int(sys.argv[2])):
        fh.write(bytes([1]) * (1 << 20))
        fh.flush()
print("wrote", flush=True)
"""


@needs_v1
def test_a_file_on_dev_shm_counts_against_the_sandbox_memory(leaf):
    path = f"/dev/shm/inspector-cgroups-test-{os.getpid()}"
    try:
        small = python_inside(leaf, FILL, path, "4")
        assert small.returncode == 0 and "wrote" in small.stdout, small.stderr
        os.unlink(path)
        before = leaf.oom_kills()

        big = python_inside(leaf, FILL, path, "200")

        assert "wrote" not in big.stdout
        # The writer is OOM-killed, or its write fails with ENOMEM.
        assert (
            big.returncode == -signal.SIGKILL
            or "MemoryError" in big.stderr
            or ("No space" in big.stderr or "Cannot allocate memory" in big.stderr)
        ), (big.returncode, big.stderr)
        assert os.path.getsize(path) <= LIMIT
        if big.returncode == -signal.SIGKILL:
            assert leaf.oom_kills() > before
    finally:
        if os.path.exists(path):
            os.unlink(path)


@needs_v1
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")
def test_a_bubblewrap_sandbox_filling_its_own_tmpfs_is_killed_at_the_limit(leaf):
    bwrap = [
        "bwrap",
        "--dev-bind",
        "/",
        "/",
        "--tmpfs",
        "/tmp",
        "--unshare-pid",
        "--die-with-parent",
    ]
    small = run_inside(leaf, [*bwrap, PYTHON, "-c", FILL, "/tmp/fill", "4"])
    assert small.returncode == 0 and "wrote" in small.stdout, small.stderr

    big = run_inside(leaf, [*bwrap, PYTHON, "-c", FILL, "/tmp/fill", "200"])

    assert big.returncode != 0 and "wrote" not in big.stdout, big
    assert leaf.oom_kills() > 0


# --- Processes ------------------------------------------------------------------------------


FORKS = """
import json, os
r, w = os.pipe()
kids, error = [], None
try:
    for _ in range(100):
        pid = os.fork()
        if pid == 0:
            os.close(w)
            os.read(r, 1)
            os._exit(0)
        kids.append(pid)
except OSError as exc:
    error = [type(exc).__name__, exc.errno]
os.close(w)
for pid in kids:
    os.waitpid(pid, 0)
print(json.dumps({"forked": len(kids), "error": error}))
"""


@needs_v1
def test_forking_past_the_process_limit_fails_with_eagain(leaf):
    result = python_inside(leaf, FORKS)

    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout)
    assert seen == {"forked": PROCESSES - 1, "error": ["BlockingIOError", errno.EAGAIN]}


# --- Cleanup --------------------------------------------------------------------------------


ESCAPE = """
import os, sys, time
if os.fork() == 0:
    os.setsid()                          # a session and process group of its own
    if os.fork() == 0:
        time.sleep(120)
    os._exit(0)
os.wait()
print(os.getpid(), flush=True)
time.sleep(120)
"""


@needs_v1
def test_remove_kills_what_is_left_even_outside_the_process_group_and_leaves_no_directory(
    controller,
):
    leaf = controller.create("remove", memory_bytes=LIMIT, max_processes=PROCESSES)
    files = leaf.procs_files
    proc = subprocess.Popen(
        [PYTHON, "-c", ESCAPE],
        preexec_fn=lambda: cgroups.join(files),
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        assert int(proc.stdout.readline()) == proc.pid
        inside = leaf.pids()
        assert proc.pid in inside and len(inside) == 2, inside
        (escaped,) = inside - {proc.pid}
        assert os.getpgid(escaped) != os.getpgid(proc.pid)

        started = time.monotonic()
        assert leaf.remove()
        elapsed = time.monotonic() - started

        assert proc.wait(timeout=5) == -signal.SIGKILL
        assert gone(escaped)
        assert not any(os.path.exists(d) for d in leaf.directories)
        assert elapsed < cgroups.REMOVE_SECONDS
    finally:
        proc.kill()
        proc.wait()
        leaf.remove()


@needs_v1
def test_create_and_remove_of_an_empty_leaf_take_milliseconds(controller):
    started = time.monotonic()
    for _ in range(10):
        made = controller.create("timing", memory_bytes=LIMIT, max_processes=PROCESSES)
        try:
            limits = [
                Path(made.directories[0], "memory.limit_in_bytes").read_text().strip(),
                Path(made.directories[0], "memory.memsw.limit_in_bytes").read_text().strip(),
                Path(made.directories[0], "memory.swappiness").read_text().strip(),
                Path(made.directories[1], "pids.max").read_text().strip(),
            ]
            assert limits == [str(LIMIT), str(LIMIT), "0", str(PROCESSES)]
            assert (
                "oom_kill_disable 0" in Path(made.directories[0], "memory.oom_control").read_text()
            )
            assert os.path.basename(made.directories[0]).startswith(
                cgroups.leaf_prefix(os.getpid())
            )
        finally:
            assert made.remove()
    per_leaf = (time.monotonic() - started) / 10
    print(f"create+remove: {per_leaf * 1000:.1f} ms per leaf")
    assert per_leaf < 0.5


@needs_v1
def test_sweep_removes_the_leaf_of_a_dead_worker_and_keeps_the_leaf_of_a_live_one(controller):
    dead_worker = subprocess.Popen(["true"])
    dead_worker.wait()
    live_worker = subprocess.Popen(["sleep", "120"])
    dead = controller.leaf(f"{cgroups.leaf_prefix(dead_worker.pid)}0-orphan")
    live = controller.leaf(f"{cgroups.leaf_prefix(live_worker.pid)}0-running")
    mine = controller.create("mine", memory_bytes=LIMIT, max_processes=PROCESSES)
    orphan = None
    try:
        for directory in (*dead.directories, *live.directories):
            os.mkdir(directory)
        files = dead.procs_files
        orphan = subprocess.Popen(["sleep", "120"], preexec_fn=lambda: cgroups.join(files))
        assert dead.pids() == {orphan.pid}

        assert cgroups.sweep(controller) >= 1

        assert not any(os.path.exists(d) for d in dead.directories)
        assert orphan.wait(timeout=5) == -signal.SIGKILL
        assert all(os.path.isdir(d) for d in live.directories)
        assert all(os.path.isdir(d) for d in mine.directories)
    finally:
        if orphan is not None:
            orphan.kill()
            orphan.wait()
        live_worker.kill()
        live_worker.wait()
        for made in (dead, live, mine):
            assert made.remove()


@needs_v1
def test_a_v1_root_is_a_name_made_under_both_the_memory_and_the_pids_hierarchy(monkeypatch):
    monkeypatch.setattr(cgroups, "_cache", {})
    name = f"inspector-test-{os.getpid()}"
    parents = [f"/sys/fs/cgroup/memory/{name}", f"/sys/fs/cgroup/pids/{name}"]
    try:
        found = cgroups.detect(name)
        assert found is not None, cgroups.unavailable_reason()
        assert cgroups.unavailable_reason() == ""
        assert (found.version, list(found.parents)) == (1, parents)
        made = found.create("x", memory_bytes=LIMIT, max_processes=PROCESSES)
        assert [os.path.dirname(d) for d in made.directories] == parents
        assert made.remove()
    finally:
        for parent in parents:
            if os.path.isdir(parent):
                os.rmdir(parent)


# --- Without a usable hierarchy, and cgroup v2 ----------------------------------------------


def test_without_root_and_without_a_root_setting_the_reason_says_limits_are_per_process(
    monkeypatch,
):
    monkeypatch.setattr(cgroups, "_cache", {})
    monkeypatch.setattr(cgroups.os, "geteuid", lambda: 1000)

    assert cgroups.detect(None) is None
    assert cgroups.unavailable_reason().startswith(
        "not root and SANDBOX_CGROUP_ROOT is not set: memory and process limits are per process only"
    )
    assert cgroups.sweep() == 0


def test_a_root_that_is_no_cgroup_is_refused_with_the_reason(monkeypatch, tmp_path):
    monkeypatch.setattr(cgroups, "_cache", {})

    assert cgroups.detect(str(tmp_path / "nothing" / "here")) is None
    assert "is neither a cgroup2 directory" in cgroups.unavailable_reason()


def test_the_v2_layout_written_into_a_fake_tree_only(monkeypatch, tmp_path):
    """No cgroup2 hierarchy with memory exists here: this checks which files are written, not
    that the kernel enforces them."""
    monkeypatch.setattr(cgroups, "_cache", {})
    root = tmp_path / "delegated"
    root.mkdir()
    (root / "cgroup.controllers").write_text("cpuset cpu io memory hugetlb pids rdma misc\n")
    (root / "cgroup.subtree_control").write_text("")

    found = cgroups.detect(str(root))

    assert found is not None, cgroups.unavailable_reason()
    assert (found.version, found.parents) == (2, (str(root),))
    assert (root / "cgroup.subtree_control").read_text() == "+memory +pids"

    made = found.create("layout/../x", memory_bytes=LIMIT, max_processes=PROCESSES)
    (directory,) = made.directories
    leaf = Path(directory)
    assert leaf.parent == root
    assert leaf.name.startswith(cgroups.leaf_prefix(os.getpid())) and "/" not in leaf.name
    written = {p.name: p.read_text() for p in leaf.iterdir()}
    assert written == {"memory.max": str(LIMIT), "memory.swap.max": "0", "pids.max": "8"}
    assert made.procs_files == (str(leaf / "cgroup.procs"),)

    assert (made.oom_kills(), made.memory_peak()) == (0, 0)
    (leaf / "memory.events").write_text("low 0\nhigh 0\nmax 9\noom 3\noom_kill 2\n")
    (leaf / "memory.current").write_text("1000\n")
    assert (made.oom_kills(), made.memory_peak()) == (2, 1000)
    (leaf / "memory.peak").write_text("5000\n")
    assert made.memory_peak() == 5000


def test_a_v2_root_without_the_memory_controller_is_refused_with_the_reason(monkeypatch, tmp_path):
    monkeypatch.setattr(cgroups, "_cache", {})
    (tmp_path / "cgroup.controllers").write_text("hugetlb\n")
    (tmp_path / "cgroup.subtree_control").write_text("")

    assert cgroups.detect(str(tmp_path)) is None
    assert "lacks the memory and pids controller" in cgroups.unavailable_reason()
