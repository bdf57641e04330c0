"""The tar streams the terminal runs send to the engine (a build context, a stage's files that
its wrapper cannot write, an isolated check's tests with the agent's work folder): built
root-owned, with fixed file times; folders come with their parents."""

from __future__ import annotations

import io
import tarfile

CONTEXT_MTIME = 1577836800  # 2020-01-01: file times in the build context (not in the hash)


def tar(entries: list[tuple[str, bytes | None, int]]) -> bytes:
    """A tar of (name, data or None for a folder, mode); root-owned, fixed times."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        add_entries(archive, entries)
    return buffer.getvalue()


def add_entries(
    archive: tarfile.TarFile,
    entries: list[tuple[str, bytes | None, int]],
    *,
    mtime: int = CONTEXT_MTIME,
) -> None:
    """Adds (name, data or None for a folder, mode) entries to `archive`, root-owned, at
    `mtime`."""
    for name, data, mode in entries:
        info = tarfile.TarInfo(name)
        info.mode = mode
        info.mtime = mtime
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        if data is None:
            info.type = tarfile.DIRTYPE
            archive.addfile(info)
        else:
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))


def staged_archive(entries, work, prefix: str, out) -> None:
    """Writes to `out` one tar of `entries` (as `tar` takes them) followed by every member of
    the tar stream `work` (an engine's archive of a folder; None: nothing) moved under
    `prefix` (e.g. ".inspector-work/"): names, and hard links' targets, get the prefix; a
    symbolic link's target is left as it is. Streamed: a member's data is never held whole."""
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as archive:
        add_entries(archive, entries)
        if work is None:
            return
        with tarfile.open(fileobj=work, mode="r|") as source:
            for member in source:
                # A long name or link target came in the PAX header: it would win over the
                # new one when the engine unpacks, so it goes; tarfile writes the new one.
                member.pax_headers.pop("path", None)
                member.pax_headers.pop("linkpath", None)
                member.name = prefix + member.name.lstrip("/")
                if member.islnk():
                    member.linkname = prefix + member.linkname.lstrip("/")
                data = source.extractfile(member) if member.isreg() else None
                archive.addfile(member, data)


def folder_entries(*paths: str) -> list[tuple[str, None, int]]:
    """Tar entries for folders and their parents (relative to /), parents first."""
    seen: dict[str, None] = {}
    for path in paths:
        parts = path.strip("/").split("/")
        for i in range(1, len(parts) + 1):
            seen["/".join(parts[:i]) + "/"] = None
    return [(name, None, 0o755) for name in seen]


__all__ = ["CONTEXT_MTIME", "add_entries", "folder_entries", "staged_archive", "tar"]
