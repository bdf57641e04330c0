"""Safe, in-memory reading of an uploaded archive (.zip, .tar, .tar.gz/.tgz, .tar.bz2, .tar.xz)
or of a folder on disk.

`read_tree` returns every regular file as ``{posix relative path: FileEntry(mode, data)}``. It
never writes anything to disk, and it treats the upload as hostile:

- The format is told by the content (magic bytes), not by the name: a ``.zip`` that is really a
  tar.gz is read as a tar.gz. A plain tar with no ``ustar`` magic (very old tars) is recognised
  only by a ``.tar`` name.
- A member with an absolute path (``/etc/passwd``, ``C:...``), a ``..`` that climbs above the
  root, a backslash or a NUL byte in its name is refused. ``a/../b`` stays inside the root and
  is read as ``b``.
- Links: a symbolic link whose target is absolute, or climbs above the root, is refused; so is a
  hard link to a path above the root. A link that stays inside the root is *resolved*: the
  returned tree holds a copy of the target's content under the link's path (a link to a folder
  copies the folder's files), and no link survives in the tree. A link to nothing, or a loop of
  links, is refused. In a folder on disk, an absolute symlink that points inside the folder is
  fine; one that points anywhere else is refused like the rest. Link targets are resolved within
  the tree read so far, never through the real file system.
- Device files, FIFOs, sockets and other special members are refused.
- Limits (`ArchiveLimits`): the number of files, the bytes of one file, the unpacked bytes in
  all, the depth of a path, and the ratio of unpacked to packed bytes (checked once more than
  1 MB is unpacked, when the packed size is known: always for a path or a seekable file). Sizes
  are checked against what each member declares before it is read, and again while it is read
  in 1 MiB chunks, so a decompression bomb is stopped without being unpacked. Copies made for
  links count towards the limits too. The decompressed tar stream as a whole (headers and
  skipped members included) may be at most twice `max_bytes` plus 16 MiB.
- Corrupt archives (bad zip, bad or truncated gzip/bz2/xz, bad CRC, truncated tar) are refused,
  as are encrypted zip members, duplicate member paths and a path that is both a file and a
  folder.

Ignored, without reading their data: ``__MACOSX/`` and ``.git/`` folders (at any depth),
``.DS_Store`` files and AppleDouble ``._*`` files. ``keep_git=True`` keeps the ``.git/``
folders (a repository snapshot's history, as SWE-bench environments need it), read and counted
like any other member. Folders themselves are not returned; empty
folders therefore vanish.

File modes: the permission bits (``mode & 0o777``; setuid, setgid and sticky bits are dropped).
A zip member made on a system that does not record Unix modes gets 0o644.

``strip_single_root=False`` (the default) returns the paths as they are in the upload. With
``strip_single_root=True``, when every file lies under one and the same top-level folder, that
folder is removed from the paths (``tasks/hello/task.toml`` becomes ``hello/task.toml``); a
tree with files at its top level is left alone. The terminal task-set reader
(`inspector.formats.terminal`) finds such a wrapper folder by itself and keeps the upload's own
paths in its error messages, so it does not need the stripping.

Every refusal is an `ArchiveError` whose message names the archive and the member.
"""

from __future__ import annotations

import bisect
import bz2
import gzip
import io
import lzma
import os
import re
import stat
import tarfile
import tempfile
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

__all__ = [
    "ArchiveError",
    "ArchiveLimits",
    "FileEntry",
    "archive_kind",
    "read_tree",
]

CHUNK_BYTES = 1 << 20
# Below this many unpacked bytes, the packed/unpacked ratio is not looked at: small text files
# compress very well and are harmless.
RATIO_FLOOR_BYTES = 1_000_000
# Header blocks, padding and skipped (ignored) members of a tar stream are decompressed too; they
# get this much room beside the files' own budget.
TAR_STREAM_SLACK_BYTES = 16 << 20
MAX_LINK_TARGET_BYTES = 4096
MAX_LINK_HOPS = 40
IGNORED_FOLDERS = frozenset({"__MACOSX", ".git"})
IGNORED_FILES = frozenset({".DS_Store"})

_ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06", b"PK\x07\x08")
_GZIP_MAGIC = b"\x1f\x8b"
_BZIP2_MAGIC = b"BZh"
_XZ_MAGIC = b"\xfd7zXZ\x00"
_TAR_MAGIC_OFFSET = 257
_HEAD_BYTES = 512
_DRIVE = re.compile(r"^[A-Za-z]:")


@dataclass(frozen=True)
class FileEntry:
    """One regular file: its permission bits and its content."""

    mode: int
    data: bytes


@dataclass(frozen=True)
class ArchiveLimits:
    max_files: int = 2000
    max_bytes: int = 50_000_000
    max_file_bytes: int = 20_000_000
    max_ratio: float = 100.0
    max_depth: int = 20


class ArchiveError(ValueError):
    """The archive was refused; the message says which archive, which member, and why."""

    def __init__(self, message: str) -> None:
        # The message is the only argument so that the exception survives pickling (Celery).
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


def archive_kind(head: bytes, name: str = "") -> str | None:
    """ "zip", "tar" (possibly compressed) or None, from the first bytes of a file.

    Pass at least 512 bytes to recognise an uncompressed tar by its ``ustar`` magic.
    """
    if head.startswith(_ZIP_MAGICS):
        return "zip"
    if head.startswith((_GZIP_MAGIC, _BZIP2_MAGIC, _XZ_MAGIC)):
        return "tar"
    if head[_TAR_MAGIC_OFFSET : _TAR_MAGIC_OFFSET + 5] == b"ustar":
        return "tar"
    if name.lower().endswith(".tar") and len(head) >= _HEAD_BYTES:
        return "tar"
    return None


def read_tree(
    path_or_fileobj: str | os.PathLike[str] | BinaryIO | bytes,
    *,
    name: str,
    limits: ArchiveLimits = ArchiveLimits(),  # noqa: B008 (frozen, so sharing it is safe)
    strip_single_root: bool = False,
    keep_git: bool = False,
) -> dict[str, FileEntry]:
    """Every regular file of an archive or folder, by POSIX path relative to its root.

    `path_or_fileobj` is a path (to a folder or to an archive file), a binary file object (read
    from its current position; a non-seekable one is spooled to a temporary file first, at most
    `2 * max_bytes + 16 MiB` of it), or the archive's bytes. `name` is what messages call the
    upload (its file name). The result is sorted by path. `keep_git` keeps `.git/` folders.
    """
    ignored = IGNORED_FOLDERS - {".git"} if keep_git else IGNORED_FOLDERS
    if isinstance(path_or_fileobj, str | os.PathLike):
        path = Path(path_or_fileobj)
        if path.is_dir():
            collector = _Collector(name, limits, packed_size=None, ignored_folders=ignored)
            _read_folder(path, collector)
            return collector.finish(strip_single_root)
        try:
            handle = path.open("rb")
        except OSError as exc:
            raise ArchiveError(f"{name}: cannot be opened: {exc.strerror or exc}") from None
        with handle:
            return _read_archive(handle, name, limits, strip_single_root, ignored)
    if isinstance(path_or_fileobj, bytes | bytearray | memoryview):
        return _read_archive(
            io.BytesIO(bytes(path_or_fileobj)), name, limits, strip_single_root, ignored
        )
    return _read_archive(path_or_fileobj, name, limits, strip_single_root, ignored)


# --- Archives ------------------------------------------------------------------------------------


def _read_archive(
    stream: BinaryIO,
    name: str,
    limits: ArchiveLimits,
    strip_single_root: bool,
    ignored: frozenset[str] = IGNORED_FOLDERS,
) -> dict[str, FileEntry]:
    seekable = _is_seekable(stream)
    if not seekable:
        spool = tempfile.SpooledTemporaryFile(max_size=8 << 20)
        with spool:
            ceiling = 2 * limits.max_bytes + TAR_STREAM_SLACK_BYTES
            copied = 0
            while True:
                chunk = stream.read(CHUNK_BYTES)
                if not chunk:
                    break
                copied += len(chunk)
                if copied > ceiling:
                    raise ArchiveError(
                        f"{name}: the upload is larger than {ceiling} bytes, more than any "
                        "archive within the limits can be"
                    )
                spool.write(chunk)
            spool.seek(0)
            return _read_seekable(spool, name, limits, strip_single_root, ignored)  # type: ignore[arg-type]
    return _read_seekable(stream, name, limits, strip_single_root, ignored)


def _read_seekable(
    stream: BinaryIO,
    name: str,
    limits: ArchiveLimits,
    strip_single_root: bool,
    ignored: frozenset[str] = IGNORED_FOLDERS,
) -> dict[str, FileEntry]:
    start = stream.tell()
    stream.seek(0, io.SEEK_END)
    packed_size = stream.tell() - start
    stream.seek(start)
    head = stream.read(_HEAD_BYTES)
    stream.seek(start)
    kind = archive_kind(head, name)
    if kind is None:
        if not head:
            raise ArchiveError(f"{name}: the file is empty, not an archive")
        raise ArchiveError(
            f"{name}: not a zip, tar, tar.gz, tar.bz2 or tar.xz archive (its first bytes are "
            f"{head[:8]!r})"
        )
    if start:
        stream = _Window(stream, start)  # type: ignore[assignment]
    collector = _Collector(name, limits, packed_size=packed_size, ignored_folders=ignored)
    if kind == "zip":
        _read_zip(stream, collector)
    else:
        _read_tar(stream, head, collector)
    return collector.finish(strip_single_root)


def _read_zip(stream: BinaryIO, collector: _Collector) -> None:
    name = collector.name
    try:
        archive = zipfile.ZipFile(stream)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError, ValueError) as exc:
        raise ArchiveError(f"{name}: corrupt zip archive ({exc})") from None
    with archive:
        for info in archive.infolist():
            member = info.filename
            path = collector.member_path(member)
            unix_mode = info.external_attr >> 16 if info.create_system == 3 else 0
            kind = stat.S_IFMT(unix_mode)
            if info.is_dir() or kind == stat.S_IFDIR or path is None:
                continue
            _refuse_special(collector, member, kind)
            if info.flag_bits & 0x1:
                raise ArchiveError(f"{name}: member {member!r} is encrypted")
            if kind == stat.S_IFLNK:
                target = _read_member(
                    collector, member, lambda info=info: archive.open(info), None, is_link=True
                )
                collector.add_symlink(member, path, _link_text(collector, member, target))
                continue
            collector.check_declared(member, path, info.file_size)
            data = _read_member(collector, member, lambda info=info: archive.open(info), None)
            mode = (unix_mode & 0o777) if unix_mode else 0o644
            collector.add_file(member, path, mode, data)


def _read_tar(stream: BinaryIO, head: bytes, collector: _Collector) -> None:
    name = collector.name
    limits = collector.limits
    decompressed: Any
    if head.startswith(_GZIP_MAGIC):
        decompressed, compression = gzip.GzipFile(fileobj=stream, mode="rb"), "gzip"
    elif head.startswith(_BZIP2_MAGIC):
        decompressed, compression = bz2.BZ2File(stream), "bzip2"
    elif head.startswith(_XZ_MAGIC):
        decompressed, compression = lzma.LZMAFile(stream), "xz"
    else:
        decompressed, compression = stream, ""
    budget = _Budget(decompressed, 2 * limits.max_bytes + TAR_STREAM_SLACK_BYTES)
    where = {"gzip": "tar.gz", "bzip2": "tar.bz2", "xz": "tar.xz"}.get(compression, "tar")
    current = "its first member"
    try:
        archive = tarfile.open(fileobj=budget, mode="r|")
        try:
            for info in archive:
                member = info.name
                current = f"member {member!r}"
                path = collector.member_path(member)
                if info.isdir():
                    continue
                if path is None:
                    # Ignored: tarfile decompresses its data to skip it, which the budget bounds.
                    continue
                if info.issym():
                    collector.add_symlink(member, path, info.linkname)
                elif info.islnk():
                    collector.add_hardlink(member, path, info.linkname)
                elif info.ischr() or info.isblk() or info.isfifo():
                    what = (
                        "a character device"
                        if info.ischr()
                        else "a block device"
                        if info.isblk()
                        else "a FIFO (named pipe)"
                    )
                    raise ArchiveError(
                        f"{name}: member {member!r} is {what}; only files are accepted"
                    )
                elif info.isreg():
                    collector.check_declared(member, path, info.size)
                    data = _read_member(
                        collector, member, lambda info=info: archive.extractfile(info), info.size
                    )
                    collector.add_file(member, path, info.mode & 0o777, data)
                else:
                    raise ArchiveError(
                        f"{name}: member {member!r} is of an unsupported tar type "
                        f"({info.type!r}); only files, folders and links are accepted"
                    )
            current = "the end of the archive"
            # Read to the very end, so that a truncated or corrupt compressed stream (bad CRC,
            # missing end marker) is noticed even after the last member.
            while budget.read(CHUNK_BYTES):
                pass
        finally:
            archive.close()
    except ArchiveError:
        raise
    except _OverBudget as exc:
        raise ArchiveError(
            f"{name}: more than {exc.limit} bytes once decompressed (reached at {current}); "
            "refused as a likely decompression bomb"
        ) from None
    except (tarfile.TarError, EOFError, OSError, zlib.error, lzma.LZMAError, ValueError) as exc:
        detail = str(exc) or type(exc).__name__
        raise ArchiveError(f"{name}: corrupt {where} archive at {current} ({detail})") from None


def _read_member(
    collector: _Collector,
    member: str,
    opener: Callable[[], Any],
    declared: int | None,
    *,
    is_link: bool = False,
) -> bytes:
    """A member's bytes, read in chunks and counted against the limits as they come."""
    name = collector.name
    limit = MAX_LINK_TARGET_BYTES if is_link else collector.limits.max_file_bytes
    buffer = bytearray()
    try:
        with opener() as source:
            while True:
                chunk = source.read(CHUNK_BYTES)
                if not chunk:
                    break
                buffer += chunk
                if len(buffer) > limit:
                    if is_link:
                        raise ArchiveError(
                            f"{name}: member {member!r} is a link with a target of more than "
                            f"{limit} bytes"
                        )
                    raise ArchiveError(
                        f"{name}: member {member!r} is more than {limit} bytes unpacked, over "
                        "the limit for one file"
                    )
                if not is_link:
                    collector.check_running(member, len(chunk))
    except ArchiveError:
        raise
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, OSError, zlib.error) as exc:
        raise ArchiveError(f"{name}: member {member!r} is corrupt ({exc})") from None
    except NotImplementedError as exc:
        raise ArchiveError(f"{name}: member {member!r} cannot be read: {exc}") from None
    except RuntimeError as exc:
        raise ArchiveError(f"{name}: member {member!r} cannot be read: {exc}") from None
    if declared is not None and not is_link and len(buffer) != declared:
        raise ArchiveError(
            f"{name}: member {member!r} is corrupt: it declares {declared} bytes but holds "
            f"{len(buffer)}"
        )
    return bytes(buffer)


def _link_text(collector: _Collector, member: str, target: bytes) -> str:
    try:
        return target.decode("utf-8")
    except UnicodeDecodeError:
        raise ArchiveError(
            f"{collector.name}: member {member!r} is a link whose target is not UTF-8"
        ) from None


def _refuse_special(collector: _Collector, member: str, kind: int) -> None:
    what = {
        stat.S_IFCHR: "a character device",
        stat.S_IFBLK: "a block device",
        stat.S_IFIFO: "a FIFO (named pipe)",
        stat.S_IFSOCK: "a socket",
    }.get(kind)
    if what is not None:
        raise ArchiveError(
            f"{collector.name}: member {member!r} is {what}; only files are accepted"
        )


class _OverBudget(Exception):
    def __init__(self, limit: int) -> None:
        super().__init__(limit)
        self.limit = limit


class _Budget:
    """A read-only stream that refuses to yield more than `limit` bytes in all."""

    def __init__(self, source: Any, limit: int) -> None:
        self._source = source
        self._limit = limit
        self.count = 0

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0:
            size = self._limit + 1 - self.count
        data = self._source.read(max(0, min(size, self._limit + 1 - self.count)))
        self.count += len(data)
        if self.count > self._limit:
            raise _OverBudget(self._limit)
        return data


class _Window:
    """A seekable view of `stream` from byte `start` on (an upload read from mid-file)."""

    def __init__(self, stream: BinaryIO, start: int) -> None:
        self._stream = stream
        self._start = start

    def read(self, size: int = -1) -> bytes:
        return self._stream.read(size)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_SET:
            offset += self._start
        return self._stream.seek(offset, whence) - self._start

    def tell(self) -> int:
        return self._stream.tell() - self._start

    def seekable(self) -> bool:
        return True


def _is_seekable(stream: Any) -> bool:
    try:
        return bool(stream.seekable()) and stream.tell() >= 0
    except (AttributeError, OSError, ValueError):
        return False


# --- Folders ---------------------------------------------------------------------------------


def _read_folder(root: Path, collector: _Collector) -> None:
    root_abs = os.path.abspath(root)
    # An absolute symlink may name the folder by the path it was given or by its real path.
    roots = {root_abs, os.path.realpath(root_abs)}
    name = collector.name

    def walk(folder: str, relative: str, depth: int) -> None:
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as exc:
            raise ArchiveError(
                f"{name}: folder {relative or '.'!r} cannot be read: {exc.strerror or exc}"
            ) from None
        for entry in entries:
            member = f"{relative}{entry.name}"
            if entry.is_symlink():
                path = collector.member_path(member)
                if path is None:
                    continue
                target = os.readlink(entry.path)
                if os.path.isabs(target):
                    target_abs = os.path.normpath(target)
                    base = next((r for r in roots if target_abs.startswith(r + os.sep)), None)
                    if base is not None:
                        inside = os.path.relpath(target_abs, base).replace(os.sep, "/")
                        collector.add_hardlink(member, path, inside, shown_target=target)
                        continue
                collector.add_symlink(member, path, target)
            elif entry.is_dir(follow_symlinks=False):
                if entry.name in collector.ignored_folders:
                    continue
                if depth + 1 > collector.limits.max_depth:
                    raise ArchiveError(
                        f"{name}: folder {member!r} is nested more than "
                        f"{collector.limits.max_depth} levels deep"
                    )
                walk(entry.path, member + "/", depth + 1)
            elif entry.is_file(follow_symlinks=False):
                path = collector.member_path(member)
                if path is None:
                    continue
                info = entry.stat(follow_symlinks=False)
                collector.check_declared(member, path, info.st_size)
                data = _read_member(
                    collector, member, lambda e=entry: _open_no_follow(e.path), None
                )
                collector.add_file(member, path, info.st_mode & 0o777, data)
            else:
                info = entry.stat(follow_symlinks=False)
                _refuse_special(collector, member, stat.S_IFMT(info.st_mode))
                raise ArchiveError(f"{name}: {member!r} is not a file, folder or link")

    walk(root_abs, "", 0)


def _open_no_follow(path: str) -> BinaryIO:
    # A file swapped for a symlink between listing and opening is not followed.
    return open(path, "rb", opener=lambda p, flags: os.open(p, flags | os.O_NOFOLLOW))


# --- Collecting and checking -----------------------------------------------------------------


@dataclass
class _Link:
    member: str
    path: str
    target: str  # normalised, relative to the root
    shown: str  # as written in the archive, for messages


class _Collector:
    def __init__(
        self,
        name: str,
        limits: ArchiveLimits,
        packed_size: int | None,
        ignored_folders: frozenset[str] = IGNORED_FOLDERS,
    ) -> None:
        self.name = name
        self.ignored_folders = ignored_folders
        self.limits = limits
        self.packed_size = packed_size
        self.files: dict[str, FileEntry] = {}
        self.links: list[_Link] = []
        self.members: dict[str, str] = {}  # path -> member name, for duplicates
        self.total = 0  # unpacked bytes of the kept files, as declared
        self.read = 0  # unpacked bytes actually read so far

    # Paths

    def member_path(self, member: str) -> str | None:
        """The member's normalised path; None for the root itself and for ignored members."""
        name = self.name
        if "\x00" in member:
            raise ArchiveError(f"{name}: member {member!r} has a NUL byte in its name")
        if "\\" in member:
            raise ArchiveError(
                f"{name}: member {member!r} has a backslash in its name; use / between folders"
            )
        if member.startswith("/") or _DRIVE.match(member):
            raise ArchiveError(
                f"{name}: member {member!r} has an absolute path; members must be relative to "
                "the archive's root"
            )
        parts = self._normalise(member)
        if parts is None:
            raise ArchiveError(
                f"{name}: member {member!r} climbs out of the archive's root with '..'"
            )
        if not parts:
            return None
        if len(parts) > self.limits.max_depth:
            raise ArchiveError(
                f"{name}: member {member!r} is nested more than {self.limits.max_depth} levels deep"
            )
        ignored = self.ignored_folders
        if any(part in ignored for part in parts[:-1]) or parts[-1] in ignored:
            return None
        if parts[-1] in IGNORED_FILES or parts[-1].startswith("._"):
            return None
        return "/".join(parts)

    @staticmethod
    def _normalise(path: str, base: list[str] | None = None) -> list[str] | None:
        parts = list(base or [])
        for part in path.split("/"):
            if part in ("", "."):
                continue
            if part == "..":
                if not parts:
                    return None
                parts.pop()
            else:
                parts.append(part)
        return parts

    # Limits

    def _count_file(self, member: str) -> None:
        # A link becomes at least one file once resolved.
        if len(self.files) + len(self.links) + 1 > self.limits.max_files:
            raise ArchiveError(
                f"{self.name}: more than {self.limits.max_files} files (the limit was reached "
                f"at member {member!r})"
            )

    def check_declared(self, member: str, path: str, size: int) -> None:
        """Before reading a member: is there room for the size it declares?"""
        self._claim(member, path)
        self._count_file(member)
        limits = self.limits
        if size > limits.max_file_bytes:
            raise ArchiveError(
                f"{self.name}: member {member!r} is {size} bytes unpacked, over the "
                f"{limits.max_file_bytes}-byte limit for one file"
            )
        self._check_total(member, self.total + size)
        self.total += size

    def check_running(self, member: str, more: int) -> None:
        """While reading: the bytes really unpacked, whatever the members declared."""
        self.read += more
        self._check_total(member, self.read)

    def _check_total(self, member: str, total: int) -> None:
        limits = self.limits
        if total > limits.max_bytes:
            raise ArchiveError(
                f"{self.name}: more than {limits.max_bytes} bytes unpacked (the limit was "
                f"reached at member {member!r})"
            )
        packed = self.packed_size
        if packed is not None and total > RATIO_FLOOR_BYTES and total > limits.max_ratio * packed:
            raise ArchiveError(
                f"{self.name}: unpacks to more than {limits.max_ratio:g} times its packed size "
                f"({total} bytes from {packed}, reached at member {member!r}); refused as a "
                "likely decompression bomb"
            )

    def _claim(self, member: str, path: str) -> None:
        if path in self.members:
            raise ArchiveError(
                f"{self.name}: member {member!r} appears twice (as {self.members[path]!r} before)"
            )
        self.members[path] = member

    # Adding

    def add_file(self, member: str, path: str, mode: int, data: bytes) -> None:
        self.files[path] = FileEntry(mode=mode, data=data)

    def add_symlink(self, member: str, path: str, target: str) -> None:
        name = self.name
        if "\x00" in target or not target:
            raise ArchiveError(f"{name}: member {member!r} is a link with an invalid target")
        if target.startswith("/") or _DRIVE.match(target) or "\\" in target:
            raise ArchiveError(
                f"{name}: member {member!r} is a symbolic link to {target!r}, outside the "
                "archive; links must stay inside it"
            )
        parts = self._normalise(target, path.split("/")[:-1])
        if parts is None:
            raise ArchiveError(
                f"{name}: member {member!r} is a symbolic link to {target!r}, which climbs out "
                "of the archive; links must stay inside it"
            )
        self._add_link(member, path, "/".join(parts), target)

    def add_hardlink(
        self, member: str, path: str, target: str, *, shown_target: str | None = None
    ) -> None:
        """A tar hard link (its target is relative to the root), or an absolute folder symlink
        already turned into a root-relative path."""
        name = self.name
        shown = shown_target if shown_target is not None else target
        if "\x00" in target or target.startswith("/") or _DRIVE.match(target) or "\\" in target:
            raise ArchiveError(
                f"{name}: member {member!r} is a link to {shown!r}, outside the archive; links "
                "must stay inside it"
            )
        parts = self._normalise(target)
        if parts is None:
            raise ArchiveError(
                f"{name}: member {member!r} is a link to {shown!r}, which climbs out of the "
                "archive; links must stay inside it"
            )
        self._add_link(member, path, "/".join(parts), shown)

    def _add_link(self, member: str, path: str, target: str, shown: str) -> None:
        self._claim(member, path)
        self._count_file(member)
        if not target or path == target or path.startswith(target + "/"):
            raise ArchiveError(
                f"{self.name}: member {member!r} is a link to {shown!r}, a folder that holds "
                "the link itself (a loop)"
            )
        self.links.append(_Link(member=member, path=path, target=target, shown=shown))

    # Finishing

    def finish(self, strip_single_root: bool) -> dict[str, FileEntry]:
        self._resolve_links()
        self._check_file_folder_clashes()
        files = self.files
        if strip_single_root and files:
            tops = {path.split("/", 1)[0] for path in files}
            if len(tops) == 1 and all("/" in path for path in files):
                files = {path.split("/", 1)[1]: entry for path, entry in files.items()}
        return dict(sorted(files.items()))

    def _resolve_links(self) -> None:
        # One round per link in a chain (a link to a link): at most MAX_LINK_HOPS rounds, each
        # linear in the number of links, so no arrangement of links makes this slow.
        pending = list(self.links)
        for _round in range(MAX_LINK_HOPS + 1):
            if not pending:
                return
            # Paths that are, or hold, a link not resolved yet: a link to them must wait.
            blocked = set()
            for link in pending:
                parts = link.path.split("/")
                blocked.update("/".join(parts[:depth]) for depth in range(1, len(parts) + 1))
            paths = sorted(self.files)
            waiting = [
                link for link in pending if link.target in blocked or not self._resolve(link, paths)
            ]
            if len(waiting) == len(pending):
                link = waiting[0]
                raise ArchiveError(
                    f"{self.name}: member {link.member!r} is a link to {link.shown!r}, which is "
                    "not a file or folder in the archive (or is part of a loop of links)"
                )
            pending = waiting
        link = pending[0]
        raise ArchiveError(
            f"{self.name}: member {link.member!r} is a link at the end of a chain of more than "
            f"{MAX_LINK_HOPS} links"
        )

    def _resolve(self, link: _Link, paths: list[str]) -> bool:
        """Copy the link's target under the link's path; False when it is not there yet.

        `paths` is the sorted list of file paths when this round began."""
        target = link.target
        prefix = target + "/"
        if target in self.files:
            copies = {link.path: self.files[target]}
        else:
            copies = {}
            for path in paths[bisect.bisect_left(paths, prefix) :]:
                if not path.startswith(prefix):
                    break
                copies[link.path + path[len(target) :]] = self.files[path]
            if not copies:
                return False
        for path, entry in copies.items():
            if path in self.files:
                raise ArchiveError(
                    f"{self.name}: member {link.member!r} is a link whose copy of "
                    f"{link.shown!r} would overwrite {path!r}"
                )
            if len(self.files) + 1 > self.limits.max_files:
                raise ArchiveError(
                    f"{self.name}: more than {self.limits.max_files} files once links are "
                    f"copied (the limit was reached at member {link.member!r})"
                )
            size = len(entry.data)
            if size > self.limits.max_file_bytes:
                raise ArchiveError(
                    f"{self.name}: member {link.member!r} links to {size} bytes, over the "
                    f"{self.limits.max_file_bytes}-byte limit for one file"
                )
            # Copies count towards the total but not towards the ratio: they take no packed
            # bytes, yet a link is not a decompression bomb.
            self.total += size
            if self.total > self.limits.max_bytes:
                raise ArchiveError(
                    f"{self.name}: more than {self.limits.max_bytes} bytes unpacked (the limit "
                    f"was reached at member {link.member!r}, a link to {link.shown!r})"
                )
            self.files[path] = entry
        return True

    def _check_file_folder_clashes(self) -> None:
        for path in self.files:
            parts = path.split("/")
            for depth in range(1, len(parts)):
                folder = "/".join(parts[:depth])
                if folder in self.files:
                    member = self.members.get(folder, folder)
                    raise ArchiveError(
                        f"{self.name}: member {member!r} is a file, but {path!r} needs it to be "
                        "a folder"
                    )
