# ruff: noqa: F811
"""Isolation between runs, on both backends: nothing a run reads, writes or leaves behind reaches
a later run, of its own task or of another task served by the same session (a worker's message
holds the runs of several tasks, and runs_execute keeps one session for them), and every limit
holds for the sandbox as a whole.

Each channel is a pair of tasks run in turn in ONE session, as a message's runs are: a writer
that leaves a secret (its source, a file in /dev, a System V segment or queue, a kernel key) and
a reader whose check passes only if the reader finds that secret. The honest verdict of the
reader is FAIL. The limit cases hold memory with several processes, or in System V segments,
beyond the sandbox's limit; their honest verdict is FAIL too, and the host's shared memory
(/proc/meminfo Shmem) is what it was. The sandbox's init is out of reach: no ptrace, no
/proc/1/mem, no process_vm_readv.

Plain tests, no database; the hostile suite's fixtures (tests/test_sandbox_hostile.py) pick the
backend and check the host afterwards. Every hostile action is guarded by `_HX_CONFINED`."""

from __future__ import annotations

import os
import time
import uuid
from dataclasses import replace

# The hostile suite's fixtures: `sandbox`, a backend that has shown it is confined, and `token`,
# a name whose traces on the host are looked for and removed. Imported, so tests that take
# them as arguments redefine the names (ruff's F811).
import pytest

from tests.test_sandbox_hostile import (  # noqa: F401
    HONEST,
    LIMITS,
    TASK,
    assert_host_untouched,
    describe,
    hostile,
    report,
    sandbox,
    token,
)
from workers.sandbox import Outcome
from workers.sandbox.session import FunctionTask

# Long enough for a reader to scan its heap on a loaded machine.
SCAN_LIMITS = replace(LIMITS, wall_seconds=6.0)


def secret_task(name: str, secret: str) -> FunctionTask:
    """A task whose check passes only for a function that returns `secret`."""
    prompt = f'def {name}():\n    """Return the secret."""\n'
    return FunctionTask(
        prompt, f"def check(candidate):\n    assert candidate() == {secret!r}\n", name
    )


def shmem_kib() -> int:
    with open("/proc/meminfo") as fh:
        for line in fh:
            if line.startswith("Shmem:"):
                return int(line.split()[1])
    raise AssertionError("no Shmem line in /proc/meminfo")


def writer_then_reader(sandbox, writer: str, reader: str, secret: str, limits=SCAN_LIMITS):
    """Run `writer` (a completion of task `leave`, which passes) then `reader` (of task `find`,
    another task) in one session; return the reader's result."""
    leave = secret_task("leave", secret)
    find = secret_task("find", secret)
    session = sandbox.session(limits=limits)
    try:
        warm = session.run(HONEST, task=TASK)
        assert warm.passed, describe(warm)
        wrote = session.run(writer, task=leave)
        assert wrote.passed, f"the writer must pass its own task: {describe(wrote)}"
        return session.run(reader, task=find)
    finally:
        session.close()


# --- A pristine start: no run's process holds an earlier run's data -------------------------

_HEAP_SCAN = """
    import ctypes, re
    needle = re.compile(b"MARK" + b"ER:([0-9a-f]{32})")
    found, regions = None, 0
    with open("/proc/self/maps") as maps:
        lines = maps.read().splitlines()
    for line in lines:
        fields = line.split()
        # Readable and writable private memory: the heap and anonymous mappings.
        if not fields[1].startswith("rw") or (len(fields) > 5 and fields[5].startswith("[v")):
            continue
        start, end = (int(x, 16) for x in fields[0].split("-"))
        data = ctypes.string_at(start, end - start)
        regions += 1
        hit = needle.search(data)
        if hit:
            found = hit.group(1).decode()
            break
    print("HX", [regions, int(found is not None)], flush=True)
    return found
"""


# A solution of a realistic size (a few KiB: its start message is not a small object that the
# allocator reuses at once); its source holds the secret after the marker.
WRITER = "    # " + "a long explanation of the approach " * 100 + "\n    return 'MARKER:%s'[7:]\n"


def test_a_run_cannot_find_another_tasks_source_in_its_memory(sandbox, token: str) -> None:
    secret = uuid.uuid4().hex
    writer = WRITER % secret
    result = writer_then_reader(sandbox, writer, hostile(token, _HEAP_SCAN), secret)
    assert not result.passed, f"the reader found the writer's source: {describe(result)}"
    regions, found = report(result)
    assert regions > 10, "the reader could not scan its own memory: the case proves nothing"
    assert found == 0
    assert_host_untouched(sandbox, token)


def test_a_sample_cannot_copy_the_reference_of_its_own_task_from_memory(
    sandbox, token: str
) -> None:
    secret = uuid.uuid4().hex
    task = secret_task("steal", secret)
    reference = WRITER % secret
    with sandbox.session(task, limits=SCAN_LIMITS) as session:
        assert session.run(reference).passed
        result = session.run(hostile(token, _HEAP_SCAN))
        assert not result.passed, f"the sample copied the reference: {describe(result)}"
        regions, found = report(result)
        assert regions > 10 and found == 0
        assert session.run(reference).passed, "the session must still serve honest runs"
    assert_host_untouched(sandbox, token)


# --- Nothing writable that outlives a run ---------------------------------------------------


def test_a_note_left_in_dev_does_not_reach_the_next_task(sandbox, token: str) -> None:
    secret = uuid.uuid4().hex
    writer = f"    return {secret!r}\n" + prelude_free(
        "for _folder in ('/dev', '/dev/shm', '/dev/mqueue'):\n"
        "    try:\n"
        f"        open(_folder + '/{token}', 'w').write({secret!r})\n"
        "    except OSError:\n"
        "        pass\n"
    )
    reader = (
        "    seen = []\n"
        "    for folder in ('/dev', '/dev/shm', '/dev/mqueue'):\n"
        "        try:\n"
        f"            seen.append(open(folder + '/{token}').read())\n"
        "        except OSError:\n"
        "            pass\n"
        "    print('HX', __import__('json').dumps(seen), flush=True)\n"
        "    return seen[0] if seen else None\n"
    )
    result = writer_then_reader(sandbox, writer, hostile(token, reader), secret)
    assert not result.passed, describe(result)
    assert report(result) == []
    assert_host_untouched(sandbox, token)


def test_dev_itself_is_read_only_and_dev_shm_is_sized(sandbox, token: str) -> None:
    probe = (
        "    import json, os\n"
        "    made = {}\n"
        f"    for path, size in (('/dev/{token}', 16), ('/dev/shm/{token}', 64 << 20)):\n"
        "        try:\n"
        "            with open(path, 'wb') as fh:\n"
        "                fh.write(bytes(size))\n"  # a note in /dev; 4x the file size in /dev/shm
        "            made[path] = os.path.getsize(path)\n"
        "        except OSError as exc:\n"
        "            made[path] = type(exc).__name__\n"
        "    print('HX', json.dumps(made), flush=True)\n"
        "    return a + b\n"
    )
    with sandbox.session(TASK, limits=SCAN_LIMITS) as session:
        made = report(session.run(hostile(token, probe)))
        assert isinstance(made[f"/dev/{token}"], str), f"/dev is writable: {made}"
        assert made[f"/dev/shm/{token}"] != 64 << 20, f"/dev/shm took 64 MiB: {made}"
    assert_host_untouched(sandbox, token)


def prelude_free(module: str) -> str:
    """Module-level code that runs when the completion loads."""
    return "\n" + module


_LIBC = "import ctypes, os\n    libc = ctypes.CDLL(None, use_errno=True)\n"


def test_a_system_v_segment_or_queue_does_not_reach_the_next_task(sandbox, token: str) -> None:
    secret = uuid.uuid4().hex
    key = int(secret[:7], 16)
    writer = (
        f"    return {secret!r}\n"
        "\nimport ctypes as _c\n"
        "_libc = _c.CDLL(None, use_errno=True)\n"
        "_libc.shmat.restype = _c.c_void_p\n"
        f"_id = _libc.shmget({key}, 4096, 0o1666)\n"  # IPC_CREAT | 0666
        "if _id >= 0:\n"
        "    _at = _libc.shmat(_id, None, 0)\n"
        f"    _c.memmove(_at, {secret.encode()!r}, 32)\n"
        f"_q = _libc.msgget({key}, 0o1666)\n"
        "if _q >= 0:\n"
        f"    _msg = _c.create_string_buffer(b'\\x01\\0\\0\\0\\0\\0\\0\\0' + {secret.encode()!r})\n"
        "    _libc.msgsnd(_q, _msg, 32, 0o4000)\n"  # IPC_NOWAIT
    )
    reader = (
        "    " + _LIBC + "    libc.shmat.restype = ctypes.c_void_p\n"
        "    seen = []\n"
        f"    shm = libc.shmget({key}, 0, 0)\n"
        "    if shm >= 0:\n"
        "        at = libc.shmat(shm, None, 0o10000)\n"  # SHM_RDONLY
        "        if at not in (None, ctypes.c_void_p(-1).value):\n"
        "            seen.append(ctypes.string_at(at, 32).decode())\n"
        f"    queue = libc.msgget({key}, 0)\n"
        "    if queue >= 0:\n"
        "        buf = ctypes.create_string_buffer(64)\n"
        "        if libc.msgrcv(queue, buf, 32, 0, 0o4000) == 32:\n"
        "            seen.append(buf.raw[8:40].decode())\n"
        "    print('HX', __import__('json').dumps(seen), flush=True)\n"
        "    return seen[0] if seen else None\n"
    )
    before = shmem_kib()
    result = writer_then_reader(sandbox, writer, hostile(token, reader), secret)
    assert not result.passed, describe(result)
    assert report(result) == []
    assert shmem_kib() - before < 32 << 10
    assert_host_untouched(sandbox, token)


def _keyring(name: str) -> str:
    numbers = {"x86_64": (248, 249, 250), "aarch64": (217, 218, 219)}[os.uname().machine]
    return f"_ADD_KEY, _REQUEST_KEY, _KEYCTL = {numbers}\n"


def test_a_kernel_key_does_not_reach_the_next_task(sandbox, token: str) -> None:
    secret = uuid.uuid4().hex
    writer = (
        f"    return {secret!r}\n"
        "\nimport ctypes as _c\n" + _keyring("writer") + "_libc = _c.CDLL(None, use_errno=True)\n"
        f"_payload = {secret.encode()!r}\n"
        "for _ring in (-4, -3, -2):\n"  # the user, session and process keyrings
        f"    _libc.syscall(_ADD_KEY, b'user', b'{token}', _payload, len(_payload), _ring)\n"
    )
    reader = (
        "    " + _LIBC + "    " + _keyring("reader").replace("\n", "\n    ") + "seen = []\n"
        f"    key = libc.syscall(_REQUEST_KEY, b'user', b'{token}', None, 0)\n"
        "    if key > 0:\n"
        "        buf = ctypes.create_string_buffer(64)\n"
        "        size = libc.syscall(_KEYCTL, 11, key, buf, 64)\n"  # KEYCTL_READ
        "        if size > 0:\n"
        "            seen.append(buf.raw[:size].decode())\n"
        "    print('HX', __import__('json').dumps(seen), flush=True)\n"
        "    return seen[0] if seen else None\n"
    )
    result = writer_then_reader(sandbox, writer, hostile(token, reader), secret)
    assert not result.passed, describe(result)
    assert report(result) == []
    assert_host_untouched(sandbox, token)


# --- Limits on the whole sandbox --------------------------------------------------------------

HOG = FunctionTask(
    'def hog():\n    """Return True."""\n',
    "def check(candidate):\n    assert candidate() is True\n",
    "hog",
)


def test_several_processes_together_cannot_hold_more_than_the_sandboxs_memory(
    sandbox, token: str
) -> None:
    # Four processes of 100 MiB each, all alive at once: each is far under the per-process
    # limit (256 MiB), together they hold 400 MiB.
    body = (
        "    import os, time\n"
        "    if not _HX_CONFINED:\n"
        "        return False\n"
        "    ready_r, ready_w = os.pipe()\n"
        "    children = []\n"
        "    for _ in range(4):\n"
        "        pid = os.fork()\n"
        "        if pid == 0:\n"
        "            block = bytearray(100 << 20)\n"
        "            for i in range(0, len(block), 4096):\n"
        "                block[i] = 1\n"
        "            os.write(ready_w, b'x')\n"
        "            time.sleep(1.5)\n"
        "            os._exit(0)\n"
        "        children.append(pid)\n"
        "    os.close(ready_w)\n"
        "    held = b''\n"
        "    while len(held) < 4:\n"
        "        chunk = os.read(ready_r, 4)\n"
        "        if not chunk:\n"
        "            break\n"
        "        held += chunk\n"
        "    statuses = [os.waitpid(pid, 0)[1] for pid in children]\n"
        "    print('HX', [len(held), statuses], flush=True)\n"
        "    return len(held) == 4 and not any(statuses)\n"
    )
    before = shmem_kib()
    with sandbox.session(HOG, limits=SCAN_LIMITS) as session:
        result = session.run(hostile(token, body))
        assert not result.passed, f"400 MiB held in a 256 MiB sandbox: {describe(result)}"
        assert session.run("    return True\n").passed, "the session must serve the next run"
    assert shmem_kib() - before < 32 << 10
    assert_host_untouched(sandbox, token)


def test_system_v_shared_memory_cannot_hold_memory_beyond_the_run(sandbox, token: str) -> None:
    # Segments outlive the processes that made them, and RLIMIT_AS does not count them.
    body = (
        "    " + _LIBC + "    libc.shmat.restype = ctypes.c_void_p\n"
        "    made = 0\n"
        "    for _ in range(6):\n"
        "        shm = libc.shmget(0, 100 << 20, 0o1600)\n"  # IPC_PRIVATE, IPC_CREAT
        "        if shm < 0:\n"
        "            break\n"
        "        at = libc.shmat(shm, None, 0)\n"
        "        if at in (None, ctypes.c_void_p(-1).value):\n"
        "            break\n"
        "        ctypes.memset(at, 1, 100 << 20)\n"
        "        libc.shmdt(ctypes.c_void_p(at))\n"
        "        made += 1\n"
        "    print('HX', __import__('json').dumps(made), flush=True)\n"
        "    return made == 6\n"
    )
    before = shmem_kib()
    with sandbox.session(HOG, limits=SCAN_LIMITS) as session:
        result = session.run(hostile(token, body))
        assert not result.passed, f"600 MiB of segments in a 256 MiB sandbox: {describe(result)}"
        assert report(result) == 0, "System V segments can be made at all"
        assert session.run("    return True\n").passed
    assert shmem_kib() - before < 32 << 10, "the host's shared memory grew"
    assert_host_untouched(sandbox, token)


# --- The sandbox's init and the run's supervisor are out of reach ---------------------------

_REACH = """
    import ctypes, os
    libc = ctypes.CDLL(None, use_errno=True)
    reached = []
    for pid in (1, os.getppid()):
        if libc.ptrace(16, pid, None, None) == 0:  # PTRACE_ATTACH
            reached.append(f"ptrace {pid}")
        try:
            with open(f"/proc/{pid}/maps") as maps:
                start = int(maps.readline().split("-")[0], 16)
            with open(f"/proc/{pid}/mem", "r+b", 0) as mem:
                mem.seek(start)
                mem.read(16)
                reached.append(f"/proc/{pid}/mem")
        except (OSError, ValueError):
            pass
        try:
            os.listdir(f"/proc/{pid}/fd")
            reached.append(f"/proc/{pid}/fd")
        except OSError:
            pass

        class iovec(ctypes.Structure):
            _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]

        buf = ctypes.create_string_buffer(16)
        local = iovec(ctypes.cast(buf, ctypes.c_void_p), 16)
        remote = iovec(0x400000, 16)
        libc.process_vm_readv.restype = ctypes.c_ssize_t
        read = libc.process_vm_readv(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
        if read >= 0 or ctypes.get_errno() not in (1, 3):  # EPERM, ESRCH: refused
            reached.append(f"process_vm_readv {pid}")
    print("HX", __import__('json').dumps(reached), flush=True)
    return a + b if reached else None
"""


def test_a_run_cannot_ptrace_or_write_the_sandboxs_init_or_its_supervisor(
    sandbox, token: str
) -> None:
    with sandbox.session(TASK, limits=SCAN_LIMITS) as session:
        result = session.run(hostile(token, _REACH))
        assert report(result) == []
        assert not result.passed, describe(result)
        assert session.run(HONEST).passed
    assert_host_untouched(sandbox, token)


def test_the_verdicts_of_honest_runs_across_tasks_in_one_session_are_unchanged(sandbox) -> None:
    secret = uuid.uuid4().hex
    leave, find = secret_task("leave", secret), secret_task("find", secret)
    with sandbox.session(limits=LIMITS) as session:
        outcomes = [
            session.run(f"    return {secret!r}\n", task=leave).outcome,
            session.run(HONEST, task=TASK).outcome,
            session.run("    return None\n", task=find).outcome,
            session.run(f"    return {secret!r}\n", task=find).outcome,
        ]
    assert outcomes == [Outcome.PASSED, Outcome.PASSED, Outcome.FAILED, Outcome.PASSED]


def test_a_run_cannot_make_a_namespace_of_its_own(sandbox, token: str) -> None:
    # A user namespace would give the run every capability inside it (mounts of its own, more
    # kernel surface); unshare() is refused by the filter, clone()'s flags by bwrap (local) and
    # by the filter's argument rules (Docker).
    body = (
        "    " + _LIBC + "    made = []\n"
        "    for name, flag in (('user', 0x10000000), ('mount', 0x20000), ('net', 0x40000000)):\n"
        "        child = libc.syscall(56, flag | 17, 0, 0, 0, 0)\n"  # clone(flag | SIGCHLD)
        "        if child == 0:\n"
        "            os._exit(0)\n"
        "        if child > 0:\n"
        "            os.waitpid(child, 0)\n"
        "            made.append('clone ' + name)\n"
        "        if libc.unshare(flag) == 0:\n"
        "            made.append('unshare ' + name)\n"
        "    print('HX', __import__('json').dumps(made), flush=True)\n"
        "    return a + b if made else None\n"
    )
    if os.uname().machine != "x86_64":
        pytest.skip("clone's system-call number here is x86_64's")
    with sandbox.session(TASK, limits=SCAN_LIMITS) as session:
        result = session.run(hostile(token, body))
        assert report(result) == []
        assert not result.passed
    assert_host_untouched(sandbox, token)


# --- Found by an outside attack of the finished sandbox --------------------------------------


def test_a_note_in_a_scratch_folder_made_read_only_does_not_reach_the_next_task(
    sandbox, token: str
) -> None:
    # The clean-up empties the folders; a plain file in a folder the run made read-only was
    # left there (and a full folder made every later honest run fail).
    secret = uuid.uuid4().hex
    leave = (
        "\nimport os as _os\n"
        "if _HX_CONFINED:\n"
        "    for _folder in ('/work', '/tmp', '/dev/shm'):\n"
        "        try:\n"
        f"            open(_folder + '/{token}', 'w').write({secret!r})\n"
        "            _os.chmod(_folder, 0o555)\n"
        "        except OSError:\n"
        "            pass\n"
    )
    reader = (
        "    import json, os\n"
        "    seen = []\n"
        "    for folder in ('/work', '/tmp', '/dev/shm'):\n"
        "        try:\n"
        f"            seen.append(open(folder + '/{token}').read())\n"
        "        except OSError:\n"
        "            pass\n"
        "    print('HX', json.dumps(seen), flush=True)\n"
        "    return seen[0] if seen else None\n"
    )
    writer = hostile(token, f"    return {secret!r}\n", leave)
    result = writer_then_reader(sandbox, writer, hostile(token, reader), secret)
    assert not result.passed, describe(result)
    assert report(result) == []
    assert_host_untouched(sandbox, token)


WRITES_A_SCRATCH_FILE = FunctionTask(
    'def roundtrip(s):\n    """Write s to a file in the working folder and read it back."""\n',
    "def check(candidate):\n    assert candidate('hello' * 1000) == 'hello' * 1000\n",
    "roundtrip",
)
ROUNDTRIP = (
    "    for folder in ('.', '/tmp', '/dev/shm'):\n"
    "        with open(folder + '/scratch.txt', 'w') as fh:\n"
    "            fh.write(s)\n"
    "    return open('/tmp/scratch.txt').read()\n"
)


def test_a_run_that_fills_and_locks_the_scratch_folders_does_not_fail_the_next_honest_run(
    sandbox, token: str
) -> None:
    poison = (
        "    import os\n"
        "    if _HX_CONFINED:\n"
        "        for folder in ('/work', '/tmp', '/dev/shm'):\n"
        "            try:\n"
        f"                with open(folder + '/{token}', 'wb') as fh:\n"
        "                    while True:\n"
        "                        fh.write(bytes(1 << 20))\n"
        "            except OSError:\n"
        "                pass\n"
        "            try:\n"
        "                os.chmod(folder, 0o555)\n"
        "            except OSError:\n"
        "                pass\n"
        "    return a + b\n"
    )
    with sandbox.session(limits=SCAN_LIMITS) as session:
        assert session.run(ROUNDTRIP, task=WRITES_A_SCRATCH_FILE).passed
        session.run(hostile(token, poison), task=TASK)
        for _ in range(2):
            after = session.run(ROUNDTRIP, task=WRITES_A_SCRATCH_FILE)
            assert after.passed, f"the poisoned folders failed an honest run: {describe(after)}"
    assert_host_untouched(sandbox, token)


def test_the_scratch_folders_own_attributes_and_times_carry_nothing_to_the_next_task(
    sandbox, token: str
) -> None:
    stamp = 0x53334352455421 * 1000  # a time no clean-up would set
    writer = (
        "\nimport os as _os\n"
        "if _HX_CONFINED:\n"
        "    for _folder in ('/work', '/tmp', '/dev/shm'):\n"
        "        for _action in (\n"
        f"            lambda: _os.utime(_folder, ns=({stamp}, {stamp})),\n"
        "            lambda: _os.setxattr(_folder, 'user.note', b'S3CRET'),\n"
        "            lambda: _os.chmod(_folder, 0o1755),\n"
        "        ):\n"
        "            try:\n"
        "                _action()\n"
        "            except OSError:\n"
        "                pass\n"
    )
    reader = (
        "    import json, os\n"
        "    seen = {}\n"
        "    for folder in ('/work', '/tmp', '/dev/shm'):\n"
        "        st = os.stat(folder)\n"
        "        try:\n"
        "            note = os.getxattr(folder, 'user.note').decode()\n"
        "        except OSError:\n"
        "            note = None\n"
        "        seen[folder] = [st.st_mode & 0o7777, st.st_atime_ns, st.st_mtime_ns, note]\n"
        "    print('HX', json.dumps(seen), flush=True)\n"
        "    return None\n"
    )
    leave = FunctionTask(
        "def leave():\n    pass\n", "def check(candidate):\n    candidate()\n", "leave"
    )
    with sandbox.session(limits=SCAN_LIMITS) as session:
        before = report(session.run(hostile(token, reader), task=TASK))
        assert session.run(hostile(token, "    return 1\n", writer), task=leave).passed
        after = report(session.run(hostile(token, reader), task=TASK))
    for folder, (mode, atime, mtime, note) in after.items():
        assert note is None, f"{folder} carries an attribute the last run wrote"
        assert mode == before[folder][0], f"{folder}'s mode is the last run's"
        assert stamp not in (atime, mtime), f"{folder}'s times are the last run's"
    assert_host_untouched(sandbox, token)


def test_a_solution_cannot_answer_for_a_standard_module_the_tests_use_without_importing(
    sandbox,
) -> None:
    # MBPP-style: the tests use `math` and rely on the completion's `import math`.
    task = FunctionTask(
        'def area(r):\n    """The area of a circle of radius r."""\n',
        "def check(candidate):\n    assert math.isclose(candidate(2), 12.566370614359172)\n",
        "area",
    )
    fake = (
        "    return 0\n"
        "class _FakeMath:\n"
        "    def isclose(self, *args, **kwargs):\n"
        "        return True\n"
        "math = _FakeMath()\n"
    )
    with sandbox.session(task, limits=LIMITS) as session:
        assert session.run("    return math.pi * r * r\nimport math\n").passed
        assert not session.run("    return 0\nimport math\n").passed
        cheat = session.run(fake)
    assert not cheat.passed, f"a fake math module answered the tests: {describe(cheat)}"


@pytest.mark.parametrize("signal_name", ["SIGSTOP", "SIGKILL"])
def test_a_run_that_stops_or_kills_the_process_that_forks_runs_does_not_change_the_next_verdict(
    sandbox, token: str, signal_name: str
) -> None:
    # A run's parent (the zygote that forks each run's child, or the runner where there is
    # none) is of the run's uid: signals reach it, its memory does not.
    body = (
        "    import os, signal\n"
        "    if _HX_CONFINED:\n"
        f"        os.kill(os.getppid(), signal.{signal_name})\n"
        "    return a + b\n"
    )
    with sandbox.session(TASK, limits=SCAN_LIMITS) as session:
        started = time.monotonic()
        session.run(hostile(token, body))
        # Not held up either: a stopped zygote is woken when the run ends.
        assert time.monotonic() - started < SCAN_LIMITS.wall_seconds / 2
        after = session.run(HONEST)
        assert after.passed, f"the next honest run: {describe(after)}"
        wrong = session.run("    return a - b\n")
        assert not wrong.passed
    assert_host_untouched(sandbox, token)


# --- A second outside attack, on the clean-up between runs ---------------------------------

# A task whose right answer is to raise: a killed run's child also reaches the check as an
# exception, so a process that kills later runs' children would make `return 0` pass it.
RAISES = FunctionTask(
    'def checked_div(a, b):\n    """a // b; raise ValueError when b is 0."""\n',
    "def check(candidate):\n"
    "    try:\n"
    "        candidate(1, 0)\n"
    "    except Exception:\n"
    "        return\n"
    "    raise AssertionError('should have raised')\n",
    "checked_div",
)

# The leader of a double-forked process ends only its own thread (SYS_exit): /proc shows it as a
# zombie while its other thread runs on, killing every newer process of the sandbox.
_HALF_DEAD = """
    import ctypes, os, threading, time
    if _HX_CONFINED and os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            me = os.getpid()
            def loop():
                while True:
                    for p in os.listdir("/proc"):
                        if p.isdigit() and int(p) > me:
                            try:
                                os.kill(int(p), 9)
                            except OSError:
                                pass
                    time.sleep(0.0005)
            threading.Thread(target=loop).start()
            ctypes.CDLL(None).syscall(60, 0)
        os._exit(0)
    if _HX_CONFINED:
        os.wait()
        time.sleep(0.3)
    return a + b
"""


def test_a_process_whose_leader_ended_only_its_own_thread_does_not_outlive_its_run(
    sandbox, token: str
) -> None:
    with sandbox.session(limits=SCAN_LIMITS) as session:
        session.run(hostile(token, _HALF_DEAD), task=TASK)
        honest = session.run(HONEST, task=TASK)
        assert honest.passed, f"a survivor of the last run killed this one: {describe(honest)}"
        wrong = session.run("    return 0\n", task=RAISES)
        assert not wrong.passed, f"a killed child passed for raising: {describe(wrong)}"
        assert session.run(HONEST, task=TASK).passed
    assert_host_untouched(sandbox, token)


# Folders the clean-up could not get through: one without any permission, one readable but not
# searchable holding a folder (its content survived shutil.rmtree's retry), and a chain deeper
# than Python's recursion limit (it ended the runner). Each holds the secret.
_LOCKED_FOLDERS = """
    import os
    if _HX_CONFINED:
        for top in ("/tmp", "/dev/shm", os.getcwd() + "/.."):
            os.makedirs(top + "/a/b")
            with open(top + "/a/b/note", "w") as fh:
                fh.write(SECRET)
            os.chmod(top + "/a", 0o600)
            os.mkdir(top + "/x")
            with open(top + "/x/note", "w") as fh:
                fh.write(SECRET)
            os.chmod(top + "/x", 0)
        fd = os.open("/tmp", os.O_RDONLY)
        for _ in range(1500):
            os.mkdir("d", 0o700, dir_fd=fd)
            inner = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
        with open(os.open("note", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd), "w") as fh:
            fh.write(SECRET)
        os.close(fd)
    return SECRET
"""

_FIND_NOTES = """
    import os
    if not _HX_CONFINED:
        return None
    found = []
    for top in ("/tmp", "/dev/shm", os.getcwd() + "/.."):
        for root, dirs, files in os.walk(top):
            for name in dirs:
                try:
                    os.chmod(os.path.join(root, name), 0o700)
                except OSError:
                    pass
            for name in files:
                try:
                    with open(os.path.join(root, name)) as fh:
                        found.append(fh.read())
                except OSError:
                    pass
    print("HX", [len(found)], flush=True)
    return next((text for text in found if len(text) == 32), None)
"""


def test_folders_a_run_locked_or_chained_deep_are_emptied_and_end_no_sandbox(
    sandbox, token: str
) -> None:
    secret = uuid.uuid4().hex
    writer = hostile(token, _LOCKED_FOLDERS.replace("SECRET", repr(secret)))
    result = writer_then_reader(sandbox, writer, hostile(token, _FIND_NOTES), secret)
    assert not result.passed, f"the reader found the writer's notes: {describe(result)}"
    assert report(result) == [0], "the scratch folders were not empty for the next run"
    assert_host_untouched(sandbox, token)


# clone(CLONE_PARENT) makes the run's children children of the zygote; left unreaped they cost
# every later clean-up its full wait, and held the sandbox uid's process count, which the
# worker's other sandboxes share.
_ZYGOTE_CHILDREN = """
    import ctypes, os
    if _HX_CONFINED:
        libc = ctypes.CDLL(None)
        for _ in range(20):
            if libc.syscall(56, 0x8000 | 17, 0, 0, 0, 0) == 0:
                os._exit(0)
    return a + b
"""


def test_children_a_run_gives_the_zygote_are_reaped_before_the_next_run(
    sandbox, token: str
) -> None:
    with sandbox.session(TASK, limits=SCAN_LIMITS) as session:
        session.run(hostile(token, _ZYGOTE_CHILDREN))
        started = time.monotonic()
        after = session.run(HONEST)
        assert after.passed, f"the next honest run: {describe(after)}"
        assert time.monotonic() - started < 1.0, "the next run waited on unreaped children"
        session.run(hostile(token, _ZYGOTE_CHILDREN))
        session.run(hostile(token, _ZYGOTE_CHILDREN))
        session.run(hostile(token, _ZYGOTE_CHILDREN))
        # 60 unreaped children and the session's own processes would pass the uid's limit.
        program = sandbox.run_python("print('hi')", limits=SCAN_LIMITS)
        assert program.passed and "hi" in program.stdout_tail, describe(program)
        assert session.run(HONEST).passed
    assert_host_untouched(sandbox, token)


# --- A third outside attack: what the clean-up cannot see, or not in time -------------------

SEES = FunctionTask(
    'def sees():\n    """Whether an earlier run left something behind."""\n',
    "def check(candidate):\n    assert candidate() is True\n",
    "sees",
)

# TCP connections left waiting to close (60 s) and an abstract unix socket whose only reference
# is in flight: kernel state no process holds, listed in /proc/net for any later run to read.
_LEAVE_SOCKETS = """
    import array, socket
    if _HX_CONFINED and not getattr(socket, "_hx_left", False):  # the check calls twice
        socket._hx_left = True
        listener = socket.socket()
        listener.bind(("127.0.0.1", 4242))
        listener.listen(8)
        for i in range(3):
            client = socket.socket()
            client.bind((f"127.0.{i}.9", 0))
            client.connect(("127.0.0.1", 4242))
            accepted, _ = listener.accept()
            client.close()
            accepted.close()
        note = socket.socket(socket.AF_UNIX)
        note.bind(b"\\0note-left-by-an-earlier-run")
        note.listen(1)
        p, q = socket.socketpair()
        fds = array.array("i", [note.fileno(), p.fileno(), q.fileno()])
        p.sendmsg([b"x"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
    return a + b
"""

_LOOK_FOR_SOCKETS = """
    if not _HX_CONFINED:
        return None
    waiting = [line for line in open("/proc/net/tcp").read().splitlines()[1:]
               if line.split()[3] == "06"]
    note = [line for line in open("/proc/net/unix") if "@note-left" in line]
    print("HX", [len(waiting), len(note)], flush=True)
    return bool(waiting or note)
"""


def test_sockets_no_process_holds_do_not_reach_the_next_run(sandbox, token: str) -> None:
    with sandbox.session(limits=SCAN_LIMITS) as session:
        assert session.run(hostile(token, _LEAVE_SOCKETS), task=TASK).passed
        reader = session.run(hostile(token, _LOOK_FOR_SOCKETS), task=SEES)
        assert not reader.passed, f"the next run found the sockets: {describe(reader)}"
        assert report(reader) == [0, 0]
        assert session.run(HONEST, task=TASK).passed
    assert_host_untouched(sandbox, token)


# Socket buffers filled, then every socket sent in flight through one that is itself in flight:
# no process holds them, and their memory stayed charged to the sandbox for the whole session.
_PIN_MEMORY = """
    import array, socket
    if _HX_CONFINED and not getattr(socket, "_hx_pinned", False):  # the check calls twice
        socket._hx_pinned = True
        keep, total = [], 0
        while total < (180 << 20):
            x, y = socket.socketpair()
            x.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 22)
            x.setblocking(False)
            try:
                while True:
                    total += x.send(b"\\xaa" * 65536)
            except (BlockingIOError, OSError):
                pass
            keep += [x, y]
        p, q = socket.socketpair()
        fds = [s.fileno() for s in keep] + [p.fileno(), q.fileno()]
        for i in range(0, len(fds), 250):
            chunk = array.array("i", fds[i : i + 250])
            p.sendmsg([b"x"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, chunk)])
    return a + b
"""

NEEDS_MEMORY = FunctionTask(
    'def total(n):\n    """The sum of the list [0, 1, ..., n-1]."""\n',
    "def check(candidate):\n    assert candidate(2_000_000) == 1999999000000\n",
    "total",
)


def test_memory_a_run_left_in_flight_is_freed_before_the_next_run(sandbox, token: str) -> None:
    with sandbox.session(limits=SCAN_LIMITS) as session:
        honest = "    xs = list(range(n))\n    return sum(xs)\n"
        assert session.run(honest, task=NEEDS_MEMORY).passed  # fits the limit on its own
        session.run(hostile(token, _PIN_MEMORY), task=TASK)
        after = session.run(honest, task=NEEDS_MEMORY)
        assert after.passed, f"the pinned memory reached the next run: {describe(after)}"
    assert_host_untouched(sandbox, token)


# A folder made read-only two levels down (it could not be moved up), and hundreds of
# thousands of empty folders (emptying them took seven times as long as making them, on the next
# run's clock).
_READ_ONLY_BELOW = """
    import os
    if _HX_CONFINED and not os.path.exists("/tmp/a"):  # the check calls twice
        os.makedirs("/tmp/a/b/c")
        os.chmod("/tmp/a/b", 0o500)
    return a + b
"""

_MANY_FOLDERS = """
    import os, time
    if _HX_CONFINED and not os.path.exists("/tmp/d"):  # the check calls twice
        os.mkdir("/tmp/d")
        fd = os.open("/tmp/d", os.O_RDONLY)
        # 110,000 folders (about a second here), or as many as 1.8 s make on a busy machine.
        end, n = time.monotonic() + 1.8, 0
        try:
            while n < 110_000 and time.monotonic() < end:
                for _ in range(1000):
                    os.mkdir(str(n), dir_fd=fd)
                    n += 1
        finally:
            print("HX", [n], flush=True)
    return a + b
"""


@pytest.mark.parametrize("mess", ["read-only below", "many folders"])
def test_a_mess_the_clean_up_cannot_undo_in_time_costs_the_next_run_nothing(
    sandbox, token: str, mess: str
) -> None:
    body = _READ_ONLY_BELOW if mess == "read-only below" else _MANY_FOLDERS
    # A wall clock shorter than emptying those folders takes: the next run must not pay for it.
    limits = replace(SCAN_LIMITS, wall_seconds=2.5, memory_bytes=1 << 30)
    with sandbox.session(limits=limits) as session:
        mess_made = session.run(hostile(token, body), task=TASK)
        if mess == "many folders":
            # Made in the 1.8 s the body allows itself: 96,000 once in CI, at load 9.
            assert report(mess_made)[0] > 50_000, describe(mess_made)
        after = session.run(HONEST, task=TASK)
        assert after.passed, f"the next honest run: {describe(after)}"
        assert not session.run("    return a - b\n", task=TASK).passed
    assert_host_untouched(sandbox, token)


def test_a_run_sees_no_cgroup_counters_that_earlier_runs_of_its_session_moved(
    sandbox, token: str
) -> None:
    # A container's cgroup files (its memory peak, CPU time, page faults, pids) outlive every
    # run of a session: a run that allocates a chosen amount leaves a number the next run reads
    # (the memory peak only grows, so a slow channel, but one). No run sees /sys/fs/cgroup.
    secret = uuid.uuid4().hex
    writer = f"    return {secret!r}\n" + prelude_free(
        "_held = bytearray(24 << 20)\n"  # moves the memory peak by 24 MiB
        "for _at in range(0, len(_held), 4096):\n"
        "    _held[_at] = 1\n"
        "del _held\n"
    )
    reader = (
        "    import glob, json\n"
        "    seen = []\n"
        "    for path in sorted(glob.glob('/sys/fs/cgroup/**', recursive=True))[:2000]:\n"
        "        name = path.rsplit('/', 1)[-1]\n"
        "        if not name.startswith(('memory.', 'cpu', 'pids.')):\n"
        "            continue\n"
        "        try:\n"
        "            seen.append([path, open(path).read(60)])\n"
        "        except OSError:\n"
        "            pass\n"
        "    print('HX', json.dumps(seen[:8]), flush=True)\n"
        f"    return {secret!r} if seen else None\n"
    )
    result = writer_then_reader(sandbox, writer, hostile(token, reader), secret)
    assert not result.passed, describe(result)
    assert report(result) == []
    assert_host_untouched(sandbox, token)


def test_the_access_times_of_dev_carry_nothing_to_the_next_task(sandbox, token: str) -> None:
    # Following or reading a symbolic link of /dev (stdin, stdout, stderr, fd) stamps its access
    # time, which nothing resets: a writer reads the links its secret's bits choose, and a
    # later run compares their times (an outside attack read 6 bits a run this way, on Docker).
    secret = uuid.uuid4().hex
    links = ["/dev/stdin", "/dev/stderr", "/dev/fd"]
    writer = f"    return {secret!r}\n" + prelude_free(
        "import os as _os\n"
        f"for _link in {links[:2]!r}:\n"
        "    try:\n"
        "        _os.readlink(_link)\n"
        "    except OSError:\n"
        "        pass\n"
    )
    reader = (
        "    import json, os\n"
        "    def atime(path):\n"
        "        try:\n"
        "            return os.lstat(path).st_atime_ns\n"
        "        except OSError:\n"
        "            return None\n"
        "    base = atime('/dev/stdout')\n"
        f"    ages = [atime(p) for p in {links!r}]\n"
        "    newer = [a is not None and base is not None and a - base > 1_000_000 for a in ages]\n"
        "    print('HX', json.dumps(newer), flush=True)\n"
        f"    return {secret!r} if newer[:2] == [True, True] and not newer[2] else None\n"
    )
    result = writer_then_reader(sandbox, writer, hostile(token, reader), secret)
    assert not result.passed, describe(result)
    assert report(result) in ([False, False, False], [])
    assert_host_untouched(sandbox, token)


def secret_bits() -> tuple[list[int], str]:
    """16 random bits, both kinds among them, and the same as a string of 0s and 1s: what a
    writer leaves one bit a name, and a reader that read them all back returns."""
    bits = [int(b) for b in f"{uuid.uuid4().int & 0xFFFF:016b}"]
    bits[0], bits[1] = 1, 0
    return bits, "".join(map(str, bits))


# Names under /proc/sys/kernel that both backends show; a bit of the secret each.
_PROC_NAMES = [
    "cap_last_cap", "core_pattern", "core_pipe_limit", "core_uses_pid", "ctrl-alt-del",
    "dmesg_restrict", "domainname", "hostname", "kptr_restrict", "max_lock_depth", "msgmax",
    "msgmnb", "msgmni", "ngroups_max", "osrelease", "ostype",
]  # fmt: skip


def test_the_creation_times_of_proc_entries_carry_nothing_to_the_next_task(
    sandbox, token: str
) -> None:
    # The kernel stamps a /proc entry's inode when anything first looks its name up and keeps
    # it for the mount's life (the session's): a writer looks up the names its secret's bits
    # choose, a later run compares their times with a name never looked up (an outside attack
    # read 16 bits two runs later this way, on Docker).
    bits, secret = secret_bits()
    writer = f"    return {secret!r}\n" + prelude_free(
        "import os as _os\n"
        f"for _name, _bit in zip({_PROC_NAMES!r}, {bits!r}):\n"
        "    if _bit:\n"
        "        try:\n"
        "            _os.stat('/proc/sys/kernel/' + _name)\n"
        "        except OSError:\n"
        "            pass\n"
    )
    reader = (
        "    import json, os\n"
        "    control = os.stat('/proc/sys/kernel/overflowuid').st_mtime_ns\n"
        "    seen = ''\n"
        f"    for name in {_PROC_NAMES!r}:\n"
        "        try:\n"
        "            age = control - os.stat('/proc/sys/kernel/' + name).st_mtime_ns\n"
        "        except OSError:\n"
        "            age = 0\n"
        "        seen += '1' if age > 2_000_000 else '0'\n"
        "    print('HX', json.dumps(seen), flush=True)\n"
        "    return seen\n"
    )
    result = writer_then_reader(sandbox, writer, hostile(token, reader), secret)
    assert not result.passed, describe(result)
    assert report(result) != secret
    assert_host_untouched(sandbox, token)


def test_honest_runs_that_read_and_write_devices_keep_their_session(sandbox) -> None:
    # The check of /dev's times ends a sandbox only for what an honest run never does: runs
    # that read /dev/urandom and /dev/zero, write /dev/null and start a subprocess are all
    # served by the same zygote (its start time, read from /proc, stays the same).
    body = (
        "    import os, subprocess\n"
        "    open('/dev/urandom', 'rb').read(16)\n"
        "    open('/dev/zero', 'rb').read(16)\n"
        "    open('/dev/null', 'w').write('x')\n"
        "    subprocess.run(['true'], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)\n"
        "    with open('/proc/%d/stat' % os.getppid()) as fh:\n"
        "        print('ZYGOTE', fh.read().split()[21], flush=True)\n"
        "    return a + b\n"
    )
    session = sandbox.session(limits=SCAN_LIMITS)
    try:
        started = set()
        for _ in range(4):
            result = session.run(body, task=TASK)
            assert result.passed, describe(result)
            started |= {
                line for line in result.stdout_tail.splitlines() if line.startswith("ZYGOTE")
            }
        assert len(started) == 1, started
    finally:
        session.close()


_VM_NAMES = [
    "admin_reserve_kbytes", "dirty_background_bytes", "dirty_background_ratio", "dirty_bytes",
    "dirty_expire_centisecs", "dirty_ratio", "dirty_writeback_centisecs",
    "dirtytime_expire_seconds", "extfrag_threshold", "laptop_mode", "max_map_count",
    "min_free_kbytes", "mmap_min_addr", "overcommit_memory", "overcommit_ratio", "page-cluster",
]  # fmt: skip


def test_proc_entries_evicted_by_a_run_that_fills_its_memory_carry_nothing_either(
    sandbox, token: str
) -> None:
    # The attack on the lookup before the first run: the writer fills the sandbox's memory so
    # that the kernel evicts cached /proc entries, then looks up the names its bits choose; a
    # later run's lookups make the others anew, so their times tell the bits (16 bits a run in
    # an outside attack). The entries the runner looked up stay pinned: none is evicted.
    bits, secret = secret_bits()
    writer = f"    return {secret!r}\n" + prelude_free(
        "import os as _os, time as _time\n"
        "for _k in range(3):\n"
        "    if _os.fork() == 0:\n"
        "        _held = []\n"
        "        try:\n"
        "            while True:\n"
        "                _held.append(b'\\x01' * (32 << 20))\n"
        "        except MemoryError:\n"
        "            pass\n"
        "        _os._exit(0)\n"
        "    _time.sleep(0.3)\n"
        "for _k in range(3):\n"
        "    try:\n"
        "        _os.wait()\n"
        "    except ChildProcessError:\n"
        "        break\n"
        "_time.sleep(1.2)\n"
        f"for _name, _bit in zip({_VM_NAMES!r}, {bits!r}):\n"
        "    if _bit:\n"
        "        try:\n"
        "            _os.lstat('/proc/sys/vm/' + _name)\n"
        "        except OSError:\n"
        "            pass\n"
    )
    reader = (
        "    import json, os, time\n"
        "    now = time.time_ns()\n"
        "    seen = ''\n"
        f"    for name in {_VM_NAMES!r}:\n"
        "        try:\n"
        "            made = os.lstat('/proc/sys/vm/' + name).st_ctime_ns\n"
        "        except OSError:\n"
        "            made = now\n"
        "        seen += '1' if made < now - 8_000_000 else '0'\n"
        "    print('HX', json.dumps(seen), flush=True)\n"
        "    return seen\n"
    )
    limits = replace(SCAN_LIMITS, wall_seconds=15.0, memory_bytes=1024 << 20)
    result = writer_then_reader(sandbox, writer, hostile(token, reader), secret, limits=limits)
    assert not result.passed, describe(result)
    assert report(result) != secret
    assert_host_untouched(sandbox, token)


def test_a_pty_written_in_one_run_leaves_no_time_for_the_next_task(sandbox, token: str) -> None:
    # Writing to /dev/pts/ptmx stamps its times (the kernel does it once the stored second is
    # more than 8 s old): the /dev check covers what /dev's folders hold, not only /dev.
    secret = uuid.uuid4().hex
    writer = f"    return {secret!r}\n" + prelude_free(
        "import os as _os, time as _time\n"
        "_time.sleep(9)\n"
        "try:\n"
        "    _fd = _os.open('/dev/pts/ptmx', _os.O_RDWR | _os.O_NOCTTY)\n"
        "    _os.write(_fd, b'x\\n')\n"
        "    _os.close(_fd)\n"
        "except OSError:\n"
        "    pass\n"
    )
    reader = (
        "    import json, os\n"
        "    try:\n"
        "        st = os.lstat('/dev/pts/ptmx')\n"
        "        stamped = st.st_mtime_ns > st.st_ctime_ns + 1_000_000_000\n"
        "    except OSError:\n"
        "        stamped = False\n"
        "    print('HX', json.dumps(stamped), flush=True)\n"
        f"    return {secret!r} if stamped else None\n"
    )
    limits = replace(SCAN_LIMITS, wall_seconds=15.0)
    result = writer_then_reader(sandbox, writer, hostile(token, reader), secret, limits=limits)
    assert not result.passed, describe(result)
    assert report(result) is False
    assert_host_untouched(sandbox, token)


def test_a_run_that_makes_a_pty_its_terminal_leaves_no_time_on_the_hosts_dev_tty(
    sandbox, token: str
) -> None:
    # bubblewrap's /dev bound the host's own /dev/tty: a run that made a pty its controlling
    # terminal and wrote to /dev/tty stamped the host's file, which every later sandbox (and
    # the host) read. /dev/tty in the sandbox is now a device that stamps nothing.
    before = os.stat("/dev/tty").st_mtime_ns if os.path.exists("/dev/tty") else None
    body = "    return a + b\n" + prelude_free(
        "import os as _os, fcntl as _fcntl, struct as _struct\n"
        "try:\n"
        "    _m = _os.open('/dev/pts/ptmx', _os.O_RDWR | _os.O_NOCTTY)\n"
        "    _fcntl.ioctl(_m, 0x40045431, _struct.pack('i', 0))\n"  # TIOCSPTLCK: unlock
        "    _n = _struct.unpack('I', _fcntl.ioctl(_m, 0x80045430, b'\\0' * 4))[0]\n"  # TIOCGPTN
        "    _s = _os.open('/dev/pts/%d' % _n, _os.O_RDWR)\n"
        "    _t = _os.open('/dev/tty', _os.O_RDWR)\n"
        "    _os.write(_t, b'x\\n')\n"
        "except OSError:\n"
        "    pass\n"
    )
    session = sandbox.session(limits=SCAN_LIMITS)
    try:
        assert session.run(body, task=TASK).passed
    finally:
        session.close()
    after = os.stat("/dev/tty").st_mtime_ns if os.path.exists("/dev/tty") else None
    assert after == before
    assert_host_untouched(sandbox, token)


def test_the_times_sysfs_stamps_at_a_first_lookup_carry_nothing_to_the_next_task(
    sandbox, token: str
) -> None:
    # As for /proc: sysfs stamps an entry when it is first looked up and keeps the time, and
    # under Docker it lived as long as the session (40 bits two runs later in an outside
    # attack). The sandbox shows no /sys (the local backend never mounted one).
    bits, secret = secret_bits()
    writer = f"    return {secret!r}\n" + prelude_free(
        "import os as _os\n"
        "try:\n"
        "    _names = sorted(_os.listdir('/sys/module'))[:16]\n"
        "except OSError:\n"
        "    _names = []\n"
        f"for _name, _bit in zip(_names, {bits!r}):\n"
        "    if _bit:\n"
        "        _os.stat('/sys/module/' + _name)\n"
    )
    reader = (
        "    import json, os, time\n"
        "    before = time.time_ns() - 5_000_000\n"
        "    try:\n"
        "        names = sorted(os.listdir('/sys/module'))[:16]\n"
        "    except OSError:\n"
        "        names = []\n"
        "    seen = ''.join(\n"
        "        '1' if os.stat('/sys/module/' + n).st_mtime_ns < before else '0' for n in names\n"
        "    )\n"
        "    print('HX', json.dumps(seen), flush=True)\n"
        "    return seen\n"
    )
    result = writer_then_reader(sandbox, writer, hostile(token, reader), secret)
    assert not result.passed, describe(result)
    assert report(result) == ""
    assert_host_untouched(sandbox, token)
