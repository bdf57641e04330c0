"""Isolated mode: the changes a solution made to the repository's working tree, carried from the
agent's container into the check's, and nothing else.

The engine, not the container, says what changed: `docker diff` lists the paths the agent's
container added, changed or deleted against its image. Under the work folder, .git excepted,
each added or changed file (an added folder as a whole) is read with the engine's archive API
into one tar, and the deleted paths are listed; the check's container, made from the same image,
gets the tar and removes the deleted paths. Nothing the container could have tampered with (its
tar, its git, its shell) takes part. Byte-code (`__pycache__`, `*.pyc`) is never carried: Python
would run a planted .pyc whose recorded source time and size match a restored test file.

`carry()` also names, among the carried and deleted paths, those the check restores to the base
commit's version (`patches.restored_in_isolation`): the test configuration files (the names of
`patches.CONFIG_NAMES`), the test suite's files, and added files that shadow what the test run
imports (a top-level pytest.py, a module named like the standard library's, package metadata
whose entry points pytest would load as plugins).
"""

from __future__ import annotations

import posixpath
import tarfile
import tempfile
from dataclasses import dataclass, field

from docker.errors import NotFound

from workers.sandbox.swe.patches import restored_in_isolation

ADDED, CHANGED, DELETED = 1, 0, 2  # docker diff's kinds


class CarryTooLarge(Exception):
    """The solution's changes are larger than the carry allows."""


@dataclass
class Carried:
    archive: tempfile.SpooledTemporaryFile | None  # a tar to put at "/", or None: nothing
    files: int = 0
    bytes: int = 0
    deleted: list[str] = field(default_factory=list)  # relative to the work folder
    config: list[str] = field(default_factory=list)  # carried or deleted configuration files


def _skipped(rel: str) -> bool:
    parts = rel.split("/")
    return (
        not rel
        or parts[0] == ".git"
        or "__pycache__" in parts
        or rel.endswith((".pyc", ".pyo"))
        or ".." in parts
    )


def carry(api, container_id: str, workdir: str, max_bytes: int) -> Carried:
    """The working-tree changes of `container_id` (paused or stopped) under `workdir`."""
    prefix = workdir.rstrip("/") + "/"
    kinds: dict[str, int] = {}
    for change in api.diff(container_id) or []:
        path = change.get("Path") or ""
        if path.startswith(prefix) and not _skipped(path[len(prefix) :]):
            kinds[path[len(prefix) :]] = change.get("Kind")
    deleted = sorted(rel for rel, kind in kinds.items() if kind == DELETED)
    every_folder: set[str] = set()
    for rel in kinds:
        parts = rel.split("/")
        every_folder.update("/".join(parts[:i]) for i in range(1, len(parts)))

    def under_added(rel: str) -> bool:
        parent = posixpath.dirname(rel)
        while parent:
            if kinds.get(parent) == ADDED:
                return True
            parent = posixpath.dirname(parent)
        return False

    fetch = [
        rel
        for rel, kind in sorted(kinds.items())
        if kind in (ADDED, CHANGED)
        and not under_added(rel)
        and not (kind == CHANGED and rel in every_folder)  # a folder: its changes are listed
    ]
    carried = Carried(archive=None, deleted=deleted)
    carried.config = sorted({rel for rel in deleted if restored_in_isolation(rel, added=False)})
    if not fetch:
        return carried

    out = tempfile.SpooledTemporaryFile(max_size=16 << 20)
    config: set[str] = set(carried.config)
    root = prefix.strip("/")
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as target:
        for rel in fetch:
            try:
                stream, _ = api.get_archive(container_id, prefix + rel)
            except NotFound:
                continue
            with tempfile.SpooledTemporaryFile(max_size=16 << 20) as raw:
                size = 0
                for chunk in stream:
                    size += len(chunk)
                    if carried.bytes + size > max_bytes + (1 << 20):
                        raise CarryTooLarge(
                            f"the solution's changes to the working tree pass {max_bytes >> 20} MB"
                        )
                    raw.write(chunk)
                raw.seek(0)
                parent = posixpath.dirname(rel)
                with tarfile.open(fileobj=raw, mode="r|") as source:
                    for member in source:
                        name = posixpath.join(parent, member.name) if parent else member.name
                        name = posixpath.normpath(name)
                        if _skipped(name) or not (
                            member.isreg() or member.isdir() or member.issym() or member.islnk()
                        ):
                            continue
                        if member.islnk():
                            link = (
                                posixpath.join(parent, member.linkname)
                                if parent
                                else member.linkname
                            )
                            member.linkname = f"{root}/{posixpath.normpath(link)}"
                        member.name = f"{root}/{name}"
                        if member.isreg():
                            carried.bytes += member.size
                            if carried.bytes > max_bytes:
                                raise CarryTooLarge(
                                    "the solution's changes to the working tree pass "
                                    f"{max_bytes >> 20} MB"
                                )
                            carried.files += 1
                            target.addfile(member, source.extractfile(member))
                        else:
                            target.addfile(member)
                        added = kinds.get(name) == ADDED or under_added(name)
                        if not member.isdir() and restored_in_isolation(name, added=added):
                            config.add(name)
    out.seek(0)
    carried.archive = out
    carried.config = sorted(config)
    return carried


__all__ = ["ADDED", "CHANGED", "DELETED", "Carried", "CarryTooLarge", "carry"]
