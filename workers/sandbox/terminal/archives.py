"""The tar streams the terminal runs send to the engine (a build context, a stage's files, the
tests): built in memory, root-owned, with fixed file times; folders come with their parents."""

from __future__ import annotations

import io
import tarfile

CONTEXT_MTIME = 1577836800  # 2020-01-01: file times in the build context (not in the hash)


def tar(entries: list[tuple[str, bytes | None, int]]) -> bytes:
    """A tar of (name, data or None for a folder, mode); root-owned, fixed times."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for name, data, mode in entries:
            info = tarfile.TarInfo(name)
            info.mode = mode
            info.mtime = CONTEXT_MTIME
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            if data is None:
                info.type = tarfile.DIRTYPE
                archive.addfile(info)
            else:
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def folder_entries(*paths: str) -> list[tuple[str, None, int]]:
    """Tar entries for folders and their parents (relative to /), parents first."""
    seen: dict[str, None] = {}
    for path in paths:
        parts = path.strip("/").split("/")
        for i in range(1, len(parts) + 1):
            seen["/".join(parts[:i]) + "/"] = None
    return [(name, None, 0o755) for name in seen]


__all__ = ["CONTEXT_MTIME", "folder_entries", "tar"]
