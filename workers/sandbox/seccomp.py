"""A system-call filter for the sandboxes: refuse the kernel interfaces no honest solution needs.

Untrusted code runs inside bubblewrap locally (`bwrap --seccomp FD` reads `bpf_program()`) and
inside Docker containers in production (`docker_security_opt()`). Both get the same policy:
every syscall in DENIED fails with EPERM, everything else is allowed, and the deny list cannot
be sidestepped by switching syscall tables: under bwrap a syscall made through a foreign ABI
(x32 or i386 from an x86_64 process, arm32 from aarch64) kills the process; Docker's profile
names those ABIs (`_DOCKER_ARCHITECTURES`), so there the same calls are refused through them.

What it does NOT do: it is a deny list, not an allow list. It narrows the kernel's attack
surface (debugging other processes, keyrings, mounts, new namespaces, eBPF, io_uring, System V
IPC, module loading, clocks) on top of the isolation that actually contains a run: the
namespaces, dropped capabilities, rlimits and cgroups of the sandbox. It does not limit CPU,
memory, processes, files or the network, and a syscall added to the kernel after this list was
written is allowed. It does not inspect arguments either: `unshare` and `setns` are denied, but
clone and clone3 stay allowed (threads and processes need them), so `clone(CLONE_NEWUSER)` can
still create a namespace; keeping that out is the sandbox's job (bwrap --disable-userns, Docker's
user namespace settings), not this filter's.

Docker: a profile passed with `--security-opt seccomp=...` replaces the engine's default profile
(an allow list) rather than adding to it, so in production this policy is the whole filter.

Standard library only: libseccomp (`libseccomp.so.2`, which apt depends on, so any Debian
image has it) is loaded through ctypes and compiles the policy for the running architecture.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import functools
import json
import os
import platform
import tempfile

__all__ = [
    "DENIED",
    "SeccompUnavailable",
    "bpf_program",
    "docker_profile",
    "docker_security_opt",
]

DENIED: tuple[str, ...] = (
    # Reading, writing or stealing from other processes: debuggers and memory inspection.
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "kcmp",
    "pidfd_getfd",
    "process_madvise",
    # Kernel keyrings: shared state outside the sandbox's namespaces, and a long bug history.
    "keyctl",
    "add_key",
    "request_key",
    # Changing the file system view: the sandbox's mounts are set up before the code runs.
    "mount",
    "umount",
    "umount2",
    "mount_setattr",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "move_mount",
    "open_tree",
    "pivot_root",
    "chroot",
    # New namespaces: a fresh user namespace hands back capabilities and much kernel surface.
    "unshare",
    "setns",
    # eBPF, performance counters and userfaultfd: rich kernel interfaces, common exploit tools.
    "bpf",
    "perf_event_open",
    "userfaultfd",
    # System V IPC: its objects outlive the run and escape per-process memory limits.
    "shmget",
    "shmat",
    "shmdt",
    "shmctl",
    "msgget",
    "msgsnd",
    "msgrcv",
    "msgctl",
    "semget",
    "semop",
    "semtimedop",
    "semctl",
    "ipc",
    # POSIX message queues: kernel objects that outlive the run, like System V IPC.
    "mq_open",
    "mq_unlink",
    "mq_timedsend",
    "mq_timedreceive",
    "mq_notify",
    "mq_getsetattr",
    # io_uring: the operations it performs are not seen by seccomp, so it would bypass the filter.
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    # Administering the machine: kernels and modules, power, swap, accounting, quotas, file
    # handles that skip path checks, raw I/O ports, the kernel log, terminals, clocks, host
    # names, NUMA page migration of other processes, and file system wide event monitoring.
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "reboot",
    "swapon",
    "swapoff",
    "acct",
    "quotactl",
    "quotactl_fd",
    "open_by_handle_at",
    "name_to_handle_at",
    "lookup_dcookie",
    "iopl",
    "ioperm",
    "syslog",
    "vhangup",
    "uselib",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "sethostname",
    "setdomainname",
    "migrate_pages",
    "move_pages",
    "fanotify_init",
)
# Deliberately allowed, because CPython, glibc, subprocess, multiprocessing (POSIX semaphores
# are futexes on a file in /dev/shm), threading or numpy use them: clone, clone3, prctl,
# personality, mbind, set_mempolicy, get_mempolicy.

INSTALL_HINT = "apt-get install libseccomp2"

# From <seccomp.h>.
_SCMP_ACT_ALLOW = 0x7FFF0000
_SCMP_ACT_ERRNO = 0x00050000  # | (errno & 0xffff)

# platform.machine() -> the Docker profile's architectures: native first, then the ABIs the
# kernel also accepts from such a process.
_DOCKER_ARCHITECTURES = {
    "x86_64": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"],
    "amd64": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"],
    "aarch64": ["SCMP_ARCH_AARCH64", "SCMP_ARCH_ARM"],
    "arm64": ["SCMP_ARCH_AARCH64", "SCMP_ARCH_ARM"],
    "ppc64le": ["SCMP_ARCH_PPC64LE"],
    "s390x": ["SCMP_ARCH_S390X", "SCMP_ARCH_S390"],
    "riscv64": ["SCMP_ARCH_RISCV64"],
}


class SeccompUnavailable(Exception):
    """libseccomp is missing or could not compile the filter."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"cannot build the sandbox's seccomp filter: {reason}; {INSTALL_HINT}")


def _load() -> ctypes.CDLL:
    name = ctypes.util.find_library("seccomp") or "libseccomp.so.2"
    try:
        lib = ctypes.CDLL(name, use_errno=True)
    except OSError as exc:
        raise SeccompUnavailable(f"libseccomp is not installed ({exc})") from exc
    try:
        lib.seccomp_init.argtypes = [ctypes.c_uint32]
        lib.seccomp_init.restype = ctypes.c_void_p
        lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
        lib.seccomp_syscall_resolve_name.restype = ctypes.c_int
        # Variadic: the fixed arguments only, since no rule here compares arguments.
        lib.seccomp_rule_add.argtypes = [
            ctypes.c_void_p,
            ctypes.c_uint32,
            ctypes.c_int,
            ctypes.c_uint,
        ]
        lib.seccomp_rule_add.restype = ctypes.c_int
        lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
        lib.seccomp_export_bpf.restype = ctypes.c_int
        lib.seccomp_release.argtypes = [ctypes.c_void_p]
        lib.seccomp_release.restype = None
    except AttributeError as exc:
        raise SeccompUnavailable(f"{name} lacks a libseccomp function ({exc})") from exc
    return lib


def _resolved(lib: ctypes.CDLL) -> dict[str, int]:
    """DENIED names that exist on this architecture, with their numbers. Unknown names and
    libseccomp's pseudo-syscalls (e.g. `ipc` on x86_64) come back negative and are skipped."""
    numbers = {}
    for name in DENIED:
        number = lib.seccomp_syscall_resolve_name(name.encode())
        if number >= 0:
            numbers[name] = number
    return numbers


def _compile() -> tuple[bytes, dict[str, int]]:
    lib = _load()
    # The default bad-architecture action stays (kill): a syscall through another ABI is refused.
    ctx = lib.seccomp_init(_SCMP_ACT_ALLOW)
    if not ctx:
        raise SeccompUnavailable("seccomp_init failed")
    try:
        numbers = _resolved(lib)
        deny = _SCMP_ACT_ERRNO | (errno.EPERM & 0xFFFF)
        for name, number in numbers.items():
            rc = lib.seccomp_rule_add(ctx, deny, number, 0)
            if rc < 0:
                raise SeccompUnavailable(f"seccomp_rule_add({name}) failed: {os.strerror(-rc)}")
        with tempfile.TemporaryFile() as out:
            rc = lib.seccomp_export_bpf(ctx, out.fileno())
            if rc < 0:
                raise SeccompUnavailable(f"seccomp_export_bpf failed: {os.strerror(-rc)}")
            out.seek(0)
            program = out.read()
    finally:
        lib.seccomp_release(ctx)
    if not program or len(program) % 8:  # an array of struct sock_filter, 8 bytes each
        raise SeccompUnavailable(f"libseccomp exported a malformed program ({len(program)} bytes)")
    return program, numbers


@functools.cache
def _compiled() -> tuple[bytes, dict[str, int]]:
    return _compile()


def bpf_program() -> bytes:
    """The filter as classic BPF for this architecture: what `bwrap --seccomp FD` reads from FD
    (an array of struct sock_filter). Compiled once per process."""
    return _compiled()[0]


def resolved_names() -> tuple[str, ...]:
    """The DENIED names the compiled filter actually refuses on this architecture."""
    return tuple(_compiled()[1])


# clone()'s flags that make a namespace. bwrap keeps a run from making a user namespace
# (--disable-userns) and, without one, the others need capabilities a run lacks; in a container
# nothing does, so the Docker profile refuses them by argument (as the engine's own profile
# does), and clone3, whose flags sit in memory a filter cannot read, fails with ENOSYS so that
# the C library falls back to clone.
CLONE_NAMESPACE_FLAGS = {
    "CLONE_NEWNS": 0x00020000,
    "CLONE_NEWCGROUP": 0x02000000,
    "CLONE_NEWUTS": 0x04000000,
    "CLONE_NEWIPC": 0x08000000,
    "CLONE_NEWUSER": 0x10000000,
    "CLONE_NEWPID": 0x20000000,
    "CLONE_NEWNET": 0x40000000,
    "CLONE_NEWTIME": 0x00000080,
}


def docker_profile() -> dict:
    """The same policy as a Docker seccomp profile (the JSON of `--security-opt seccomp=`),
    plus clone()'s namespace flags refused (see CLONE_NAMESPACE_FLAGS). The engine skips names
    its architectures do not have."""
    # x86_64 and aarch64 both take clone's flags as the first argument.
    clone_rules = [
        {
            "names": ["clone"],
            "action": "SCMP_ACT_ERRNO",
            "errnoRet": errno.EPERM,
            "args": [{"index": 0, "value": flag, "valueTwo": flag, "op": "SCMP_CMP_MASKED_EQ"}],
        }
        for flag in CLONE_NAMESPACE_FLAGS.values()
    ]
    return {
        "defaultAction": "SCMP_ACT_ALLOW",
        "architectures": list(_DOCKER_ARCHITECTURES.get(platform.machine().lower(), [])),
        "syscalls": [
            {"names": list(DENIED), "action": "SCMP_ACT_ERRNO", "errnoRet": errno.EPERM},
            {"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": errno.ENOSYS},
            *clone_rules,
        ],
    }


def docker_security_opt() -> str:
    """A `security_opt` entry for the docker SDK, which hands it to the engine as is; the
    engine accepts the profile's JSON inline."""
    return "seccomp=" + json.dumps(docker_profile(), separators=(",", ":"))
