"""Sandboxes that run untrusted Python under limits; pick one with get_sandbox()."""

from __future__ import annotations

import logging

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

BACKENDS = ("local",)


def get_sandbox(
    backend: str = "local", *, allow_unsandboxed: bool = False, python: str | None = None
) -> Sandbox:
    if backend not in BACKENDS:
        raise SandboxUnavailable(
            f"unknown sandbox backend {backend!r}: accepted values are {', '.join(BACKENDS)} "
            "(a 'docker' backend will come in a later issue)"
        )
    try:
        return LocalSandbox(python=python)
    except SandboxUnavailable as exc:
        if not allow_unsandboxed:
            raise
        logger.warning("bubblewrap sandbox unavailable (%s); falling back to unsandboxed", exc)
        return UnsandboxedSandbox(python=python)
