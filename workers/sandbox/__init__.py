"""Sandboxes that run untrusted Python under limits; pick one with get_sandbox()."""

from __future__ import annotations

import logging
import os

from workers.sandbox.base import Execution, Limits, Outcome, Sandbox, SandboxUnavailable
from workers.sandbox.local import LocalSandbox, UnsandboxedSandbox

logger = logging.getLogger(__name__)

__all__ = [
    "Execution",
    "Limits",
    "LocalSandbox",
    "Outcome",
    "Sandbox",
    "SandboxUnavailable",
    "UnsandboxedSandbox",
    "get_sandbox",
]

BACKENDS = ("local", "docker")
# pid -> this process's DockerSandbox: its warm pool and threads are per process.
_docker: dict[int, Sandbox] = {}


def get_sandbox(
    backend: str = "local",
    *,
    allow_unsandboxed: bool = False,
    python: str | None = None,
    cgroups: str | None = None,
    cgroup_root: str | None = None,
    verifier_lib: str | None = None,
) -> Sandbox:
    """The backend asked for. `cgroups` (auto, required, off) and `cgroup_root` say how the
    local backend limits a whole sandbox; unset, they come from SANDBOX_CGROUPS and
    SANDBOX_CGROUP_ROOT in the environment (Docker limits each container by itself).
    `verifier_lib` is the host folder of the answer verifier's libraries (default
    $VERIFIER_LIB, else .verifier-lib); the Docker backend's verifier image carries its own."""
    if backend not in BACKENDS:
        raise SandboxUnavailable(
            f"unknown sandbox backend {backend!r}: accepted values are {', '.join(BACKENDS)}"
        )
    if backend == "docker":
        # No unsandboxed fallback, and `python` names a host interpreter: the container's is
        # the image's /usr/bin/python3. Raises SandboxUnavailable when the engine or image is
        # missing.
        pid = os.getpid()
        if pid not in _docker:
            from workers.sandbox.docker import DockerSandbox

            _docker.clear()  # a parent's, inherited through fork
            _docker[pid] = DockerSandbox()
        return _docker[pid]
    isolation = {
        "cgroup_mode": cgroups or os.environ.get("SANDBOX_CGROUPS") or "auto",
        "cgroup_root": cgroup_root or os.environ.get("SANDBOX_CGROUP_ROOT") or None,
        # SANDBOX_POOL_SIZE=0 starts every sandbox when it is needed, on both backends.
        "park_ahead": min(int(os.environ.get("SANDBOX_POOL_SIZE") or 1), 1),
        "verifier_lib": verifier_lib,
    }
    try:
        return LocalSandbox(python=python, **isolation)
    except SandboxUnavailable as exc:
        if not allow_unsandboxed:
            raise
        logger.warning("bubblewrap sandbox unavailable (%s); falling back to unsandboxed", exc)
        return UnsandboxedSandbox(python=python, **isolation)
