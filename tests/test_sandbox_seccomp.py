"""The sandbox's seccomp filter, on the real kernel: inside a bubblewrap sandbox that loads it,
denied syscalls fail with EPERM while what honest code does still works.

Plain tests, no database: `pytest tests/test_sandbox_seccomp.py`.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import os
import platform
import shutil
import signal
import subprocess
import textwrap

import pytest

from workers.sandbox import seccomp
from workers.sandbox.seccomp import (
    DENIED,
    SeccompUnavailable,
    bpf_program,
    docker_profile,
    docker_security_opt,
)

PYTHON = "/usr/bin/python3"
BWRAP = shutil.which("bwrap") or ("/usr/bin/bwrap" if os.path.exists("/usr/bin/bwrap") else None)
SANDBOX = [
    "--unshare-all",
    "--die-with-parent",
    "--new-session",
    "--cap-drop",
    "ALL",
    "--ro-bind",
    "/usr",
    "/usr",
    "--symlink",
    "usr/bin",
    "/bin",
    "--symlink",
    "usr/lib",
    "/lib",
    "--symlink",
    "usr/lib64",
    "/lib64",
    "--proc",
    "/proc",
    "--dev",
    "/dev",
    "--tmpfs",
    "/tmp",
]

# Each probe makes one syscall through ctypes and prints [return value, errno name]. `nr` maps
# syscall names to this architecture's numbers; `libc` has use_errno.
PRELUDE = """
import ctypes, errno, json, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
nr = json.loads({numbers!r})

def call(name, *args):
    # syscall(2) is variadic: a Python int would go as a 32-bit int, whose register's upper
    # half is undefined (a flags argument read as garbage: EINVAL once in a CI run).
    return libc.syscall(ctypes.c_long(nr[name]),
                        *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])

def report(result):
    print(json.dumps([result, errno.errorcode.get(ctypes.get_errno(), "0") if result < 0 else "0"]))
"""
PROBES = {
    "ptrace": """
PTRACE_TRACEME = 0
report(call("ptrace", PTRACE_TRACEME, 0, 0, 0))
""",
    "add_key": """
KEY_SPEC_PROCESS_KEYRING = -2
report(call("add_key", b"user", b"probe", b"secret", 6, KEY_SPEC_PROCESS_KEYRING))
""",
    "shmget": """
IPC_PRIVATE, IPC_CREAT = 0, 0o1000
report(libc.shmget(IPC_PRIVATE, 4096, IPC_CREAT | 0o600))
""",
    "io_uring_setup": """
params = ctypes.create_string_buffer(120)  # struct io_uring_params, zeroed
report(call("io_uring_setup", 8, params))
""",
    "process_vm_readv": """
class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
source, target = ctypes.create_string_buffer(b"x" * 16), ctypes.create_string_buffer(16)
remote = iovec(ctypes.cast(source, ctypes.c_void_p), 16)
local = iovec(ctypes.cast(target, ctypes.c_void_p), 16)
report(call("process_vm_readv", os.getpid(), ctypes.byref(local), 1, ctypes.byref(remote), 1, 0))
""",
}

HONEST = {
    "subprocess": """
import subprocess
assert subprocess.run(["/usr/bin/true"]).returncode == 0
""",
    "multiprocessing_pool": """
import multiprocessing
with multiprocessing.get_context("fork").Pool(2) as pool:
    assert pool.map(abs, [-1, -2, -3, 4]) == [1, 2, 3, 4]
""",
    "thread": """
import threading
seen = []
worker = threading.Thread(target=seen.append, args=(42,))
worker.start()
worker.join()
assert seen == [42]
""",
    "posix_semaphore": """
import multiprocessing
lock = multiprocessing.Lock()
with lock:
    pass
assert lock.acquire(timeout=1)
lock.release()
""",
    "tmp_file": """
from pathlib import Path
path = Path("/tmp/solution.txt")
path.write_text("written inside the sandbox")
assert path.read_text() == "written inside the sandbox"
""",
}


@pytest.fixture(scope="module")
def program() -> bytes:
    try:
        return bpf_program()
    except SeccompUnavailable as exc:
        pytest.skip(f"libseccomp is missing, cannot compile the filter: {exc}")


@pytest.fixture(scope="module")
def bwrap() -> str:
    if BWRAP is None:
        pytest.skip("bubblewrap (bwrap) is not installed: apt-get install bubblewrap")
    if not os.path.exists(PYTHON):
        pytest.skip(f"{PYTHON} is missing: the sandbox runs the system interpreter")
    return BWRAP


@pytest.fixture(scope="module")
def numbers(program: bytes) -> dict[str, int]:
    """This architecture's syscall numbers, from libseccomp's own table."""
    lib = ctypes.CDLL(ctypes.util.find_library("seccomp") or "libseccomp.so.2")
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_syscall_resolve_name.restype = ctypes.c_int
    return {name: lib.seccomp_syscall_resolve_name(name.encode()) for name in PROBES}


def sandboxed(bwrap: str, code: str, program: bytes | None) -> subprocess.CompletedProcess:
    """Run `code` in a bubblewrap sandbox, under the filter unless `program` is None."""
    argv = [bwrap, *SANDBOX]
    fds: tuple[int, ...] = ()
    if program is not None:
        read_end, write_end = os.pipe()
        os.write(write_end, program)  # far below a pipe's capacity
        os.close(write_end)
        argv += ["--seccomp", str(read_end)]
        fds = (read_end,)
    try:
        return subprocess.run(
            [*argv, "--", PYTHON, "-I", "-c", code],
            pass_fds=fds,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        for fd in fds:
            os.close(fd)


def probe(bwrap: str, numbers: dict[str, int], name: str, program: bytes | None) -> list:
    code = PRELUDE.format(numbers=json.dumps(numbers)) + PROBES[name]
    result = sandboxed(bwrap, code, program)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.parametrize("name", list(PROBES))
def test_a_denied_syscall_fails_with_eperm_inside_the_sandbox(
    bwrap: str, program: bytes, numbers: dict[str, int], name: str
) -> None:
    assert name in DENIED
    assert probe(bwrap, numbers, name, program) == [-1, "EPERM"]


@pytest.mark.parametrize("name", ["ptrace", "shmget", "process_vm_readv"])
def test_the_same_syscall_succeeds_in_the_sandbox_without_the_filter(
    bwrap: str, numbers: dict[str, int], name: str
) -> None:
    # So the EPERM above is the filter's doing, not the namespaces' or the dropped capabilities'.
    result, error = probe(bwrap, numbers, name, None)
    assert result >= 0, error


@pytest.mark.parametrize("name", list(HONEST))
def test_honest_code_still_works_under_the_filter(bwrap: str, program: bytes, name: str) -> None:
    code = textwrap.dedent(HONEST[name]) + "\nprint('ok')\n"
    result = sandboxed(bwrap, code, program)
    assert (result.returncode, result.stdout, result.stderr) == (0, "ok\n", "")


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the x32 ABI exists only on x86_64")
def test_a_syscall_through_the_x32_abi_kills_the_sandboxed_process(
    bwrap: str, program: bytes
) -> None:
    x32_getpid = 0x40000000 | 39
    code = f"import ctypes, sys\nctypes.CDLL(None).syscall({x32_getpid})\nsys.exit(3)\n"
    # bwrap reports a child killed by signal N as exit status 128 + N.
    assert sandboxed(bwrap, code, program).returncode == 128 + signal.SIGSYS
    assert sandboxed(bwrap, code, None).returncode == 3


def test_the_program_is_an_array_of_sock_filter_compiled_once(program: bytes) -> None:
    assert isinstance(program, bytes)
    assert len(program) % 8 == 0 and len(program) > 8 * len(seccomp.resolved_names())
    assert bpf_program() is program


def test_only_names_this_architecture_lacks_are_left_out_of_the_program(program: bytes) -> None:
    resolved = seccomp.resolved_names()
    assert set(resolved) <= set(DENIED)
    assert {"ptrace", "add_key", "io_uring_setup", "bpf", "unshare", "mount"} <= set(resolved)


def test_the_deny_list_has_no_duplicates_and_spares_what_cpython_needs() -> None:
    assert len(set(DENIED)) == len(DENIED)
    needed = {"clone", "clone3", "prctl", "personality", "mbind", "set_mempolicy", "get_mempolicy"}
    assert not needed & set(DENIED)
    assert not {"futex", "openat", "mmap", "execve", "wait4", "socketpair"} & set(DENIED)


def test_the_docker_profile_denies_every_name_and_allows_the_rest() -> None:
    profile = json.loads(json.dumps(docker_profile()))
    assert profile["defaultAction"] == "SCMP_ACT_ALLOW"
    rule, clone3, *clone = profile["syscalls"]
    assert rule == {"names": list(DENIED), "action": "SCMP_ACT_ERRNO", "errnoRet": 1}
    # clone3's flags cannot be read by a filter: ENOSYS sends the C library to clone, whose
    # namespace flags are refused one by one.
    assert clone3 == {"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": 38}
    flags = {arg["value"] for r in clone for arg in r["args"]}
    assert 0x10000000 in flags and all(r["names"] == ["clone"] for r in clone)


def test_the_docker_profile_covers_the_machines_architectures() -> None:
    expected = {
        "x86_64": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"],
        "aarch64": ["SCMP_ARCH_AARCH64", "SCMP_ARCH_ARM"],
    }
    machine = platform.machine()
    if machine in expected:
        assert docker_profile()["architectures"] == expected[machine]


def test_the_docker_security_opt_carries_the_profile_inline() -> None:
    option = docker_security_opt()
    assert option.startswith("seccomp=")
    assert json.loads(option.removeprefix("seccomp=")) == docker_profile()


def test_the_unavailable_error_says_what_to_install() -> None:
    assert "apt-get install libseccomp2" in str(SeccompUnavailable("libseccomp is not installed"))
