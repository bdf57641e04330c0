"""Who owns a container, for the sweeps that remove what gone workers left behind.

Both Docker users label each container they start with its owner: the marker label (which
containers are ours at all), the owner "<host>:<pid>", the owner's start time (field 22 of
/proc/<pid>/stat, so that a reused pid is not mistaken for the owner) and the owner's pid
namespace (a pid means nothing in another one). `OwnerLabels` names those four labels for one
kind of container (the function sandboxes' and the terminal runs'), makes them for this process,
lists the engine's containers of that kind, and tells whether a listed container's owner is
gone."""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from docker.errors import NotFound

logger = logging.getLogger(__name__)


def proc_start_time(pid: int) -> str | None:
    """Field 22 of /proc/<pid>/stat (the start time, in clock ticks since boot); None when no
    such process runs."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return None
    # Field 22, counting from the state (field 3) after the command's closing parenthesis.
    return stat.rsplit(b")", 1)[1].split()[19].decode()


def pid_namespace() -> str:
    """The inode of this process's pid namespace, as text ("" when unknown)."""
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return ""


@dataclass(frozen=True)
class OwnerLabels:
    marker: str
    owner: str  # "<host>:<pid>"
    started: str
    pidns: str

    def for_process(self, pid: int) -> dict[str, str]:
        """The labels of a container that process `pid` (of this host) starts."""
        return {
            self.marker: "1",
            self.owner: f"{socket.gethostname()}:{pid}",
            self.started: proc_start_time(pid) or "",
            self.pidns: pid_namespace(),
        }

    def owner_gone(self, labels: dict, *, all_of_this_host: bool, own_too: bool) -> bool:
        """Whether a container with these labels may be removed: its owner, a process of this
        host, no longer runs (or the pid runs another process). This process's own containers
        count as gone only with `own_too`; with `all_of_this_host` every live owner of this
        host's counts as gone as well (for a machine where no other worker runs). Containers of
        another host, or of an owner in another pid namespace, never do."""
        owner_host, _, pid_text = labels.get(self.owner, "").rpartition(":")
        if owner_host != socket.gethostname() or not pid_text.isdigit():
            return False
        pid, me = int(pid_text), os.getpid()
        if pid == me and labels.get(self.started) == proc_start_time(me):
            return own_too
        if all_of_this_host:
            return True
        if labels.get(self.pidns) != pid_namespace():
            return False  # a worker of another pid namespace: its pid means nothing here
        started = proc_start_time(pid)
        return started is None or started != labels.get(self.started, started)

    def listed(self, api) -> list[dict]:
        """The engine's containers of this kind (those with the marker label), running or not:
        what a sweep looks at."""
        return api.containers(all=True, filters={"label": f"{self.marker}=1"})

    def sweep(
        self,
        api,
        listed: Iterable[dict],
        *,
        older_than_seconds: float,
        all_of_this_host: bool,
        own_too: bool,
        errors: tuple[type[BaseException], ...],
        in_use: Callable[[str], bool] = lambda _id: False,
    ) -> int:
        """Remove the listed containers whose owner is gone (`owner_gone`), older than
        `older_than_seconds` and not `in_use`; returns how many were removed."""
        now = time.time()
        removed = 0
        for info in listed:
            if in_use(info["Id"]) or now - info.get("Created", now) < older_than_seconds:
                continue
            gone = self.owner_gone(
                info.get("Labels") or {}, all_of_this_host=all_of_this_host, own_too=own_too
            )
            if not gone:
                continue
            try:
                api.remove_container(info["Id"], force=True)
                removed += 1
            except NotFound:
                pass
            except errors as exc:
                logger.warning("sweep: could not remove container %s: %s", info["Id"][:12], exc)
        return removed
