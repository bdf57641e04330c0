"""The containers of terminal runs, from creation to removal, and who owns them.

Every container is `sleep infinity` under docker-init, as root, with no network (unless the task
allows the internet and the executor names a run network), the task's memory and CPU limits
(swap off) and a pids limit. It is labelled `inspector.run=1` with its owner process (the labels
of `workers.sandbox.owners`), recorded as under way in this process while a run uses it, and
removed (force) when its run ends; `sweep()` removes the leftovers of gone workers.
"""

from __future__ import annotations

import logging
import os
import threading

from docker.errors import NotFound

from workers.sandbox.owners import OwnerLabels
from workers.sandbox.terminal.engine import ENGINE_ERRORS

logger = logging.getLogger(__name__)

RUN_LABEL = "inspector.run"
OWNER_LABEL = "inspector.run.owner"  # "<host>:<pid>"
STARTED_LABEL = "inspector.run.started"  # the owner's start time (/proc/<pid>/stat field 22)
PIDNS_LABEL = "inspector.run.pidns"  # the owner's pid namespace
OWNERS = OwnerLabels(RUN_LABEL, OWNER_LABEL, STARTED_LABEL, PIDNS_LABEL)


class RunContainers:
    """Creates, prepares and removes the containers of runs, and sweeps the leftovers, through
    one process's client. `labels` are this process's owner labels; `settings` is the executor:
    its `run_network`, `pids_limit` and `default_memory_mb` are read at each use."""

    def __init__(self, api, labels: dict[str, str], settings) -> None:
        self._api = api
        self._labels = labels
        self._settings = settings

    def host_config(self, source: dict) -> dict:
        memory_mb = source.get("memory_mb") or self._settings.default_memory_mb
        cpus = source.get("cpus")
        network = "none"
        if self._settings.run_network != "none" and source.get("allow_internet"):
            network = self._settings.run_network
        options: dict = {
            "init": True,
            "network_mode": network,
            "pids_limit": self._settings.pids_limit,
            "log_config": {"type": "none", "config": {}},
        }
        if memory_mb:
            options["mem_limit"] = int(memory_mb) * 1024 * 1024
            options["memswap_limit"] = int(memory_mb) * 1024 * 1024  # no swap
        if cpus:
            options["nano_cpus"] = int(float(cpus) * 1e9)
        return self._api.create_host_config(**options)

    def create(self, image_tag: str, host_config: dict, containers: list[str]) -> str:
        """A container for a run, recorded in `containers` (and as under way) at once."""
        created = self._api.create_container(
            image_tag,
            command=["sleep", "infinity"],
            user="0",
            labels=dict(self._labels),
            host_config=host_config,
        )
        container_id = created["Id"]
        containers.append(container_id)
        with _ACTIVE_LOCK:
            _ACTIVE.add(container_id)
        return container_id

    def prepare(
        self, image_tag: str, host_config: dict, files: bytes | None, containers: list
    ) -> str:
        """A check's container, created, given `files` (a tar; None: nothing yet), started."""
        container_id = self.create(image_tag, host_config, containers)
        if files is not None:
            self._api.put_archive(container_id, "/", files)
        self._api.start(container_id)
        return container_id

    def remove(self, container_id: str) -> None:
        try:
            self._api.remove_container(container_id, force=True)
        except NotFound:
            pass
        except ENGINE_ERRORS as exc:
            logger.warning("could not remove run container %s: %s", container_id[:12], exc)
        finally:
            with _ACTIVE_LOCK:
                _ACTIVE.discard(container_id)

    def sweep(self, older_than_seconds: float = 0, *, all_of_this_host: bool = False) -> int:
        """Remove the run containers left behind: this process's that no run uses, and
        those of this host's gone processes (same pid namespace). With `all_of_this_host`,
        those of live processes of this host too (for a machine where no other worker runs).
        Returns how many were removed."""

        def in_use(container_id: str) -> bool:
            with _ACTIVE_LOCK:
                return container_id in _ACTIVE  # a run of this process is using it

        api = self._api
        return OWNERS.sweep(
            api,
            OWNERS.listed(api),
            older_than_seconds=older_than_seconds,
            all_of_this_host=all_of_this_host,
            own_too=True,
            errors=ENGINE_ERRORS,
            in_use=in_use,
        )


# Containers of this process's runs under way (of every executor): sweep() leaves them alone.
_ACTIVE: set[str] = set()
_ACTIVE_LOCK = threading.Lock()


def _forget_after_fork() -> None:
    global _ACTIVE_LOCK
    _ACTIVE_LOCK = threading.Lock()  # the parent's: maybe held by one of its threads
    _ACTIVE.clear()


os.register_at_fork(after_in_child=_forget_after_fork)


__all__ = [
    "OWNERS",
    "OWNER_LABEL",
    "PIDNS_LABEL",
    "RUN_LABEL",
    "STARTED_LABEL",
    "RunContainers",
]
