"""Hostile uploads: archives built to escape the root, plant links or devices, or exhaust memory.

Every one is refused with an ArchiveError naming the upload and the offending member, and none
is unpacked to disk."""

from __future__ import annotations

import io
import os
import re
import stat
import struct
import tarfile
import time
import zipfile
from pathlib import Path

import pytest

from inspector.formats.archive import ArchiveError, ArchiveLimits, FileEntry, read_tree

# --- Builders ------------------------------------------------------------------------------


def tar_member(
    name: str,
    data: bytes = b"",
    *,
    kind: bytes = tarfile.REGTYPE,
    linkname: str = "",
    mode: int = 0o644,
) -> tuple[tarfile.TarInfo, bytes | None]:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode = mode
    info.linkname = linkname
    if kind == tarfile.REGTYPE:
        info.size = len(data)
        return info, data
    return info, None


def tar_bytes(*members: tuple[tarfile.TarInfo, bytes | None], compression: str = "gz") -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode=f"w:{compression}" if compression else "w") as archive:
        for info, data in members:
            archive.addfile(info, io.BytesIO(data) if data is not None else None)
    return buffer.getvalue()


def zip_bytes(
    *members: tuple[str, bytes] | zipfile.ZipInfo | tuple[zipfile.ZipInfo, bytes],
) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for member in members:
            if isinstance(member[0], zipfile.ZipInfo):
                archive.writestr(member[0], member[1])
            else:
                archive.writestr(member[0], member[1])
    return buffer.getvalue()


def zip_link(name: str, target: str) -> tuple[zipfile.ZipInfo, bytes]:
    info = zipfile.ZipInfo(name)
    info.create_system = 3
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    return info, target.encode()


def zip_special(name: str, kind: int) -> tuple[zipfile.ZipInfo, bytes]:
    info = zipfile.ZipInfo(name)
    info.create_system = 3
    info.external_attr = (kind | 0o644) << 16
    return info, b""


def refusal(data: bytes, name: str = "upload.tar.gz", **kwargs) -> str:
    with pytest.raises(ArchiveError) as caught:
        read_tree(data, name=name, **kwargs)
    message = str(caught.value)
    assert message.startswith(f"{name}: "), message
    return message


GOOD = tar_member("task/ok.txt", b"fine")


# --- Paths ----------------------------------------------------------------------------------


def test_a_member_that_climbs_out_with_dot_dot_is_refused_in_a_tar_and_a_zip():
    message = refusal(tar_bytes(GOOD, tar_member("../evil", b"x")))
    assert "'../evil'" in message and "climbs out" in message
    message = refusal(zip_bytes(("ok.txt", b"ok"), ("a/../../evil", b"x")), name="up.zip")
    assert "'a/../../evil'" in message and "climbs out" in message


def test_a_dot_dot_that_stays_inside_the_root_is_read_as_the_path_it_names():
    tree = read_tree(tar_bytes(tar_member("a/../b.txt", b"b")), name="t.tgz")
    assert tree == {"b.txt": FileEntry(mode=0o644, data=b"b")}


def test_an_absolute_member_path_is_refused():
    message = refusal(tar_bytes(GOOD, tar_member("/etc/passwd", b"root:x:0:0")))
    assert "'/etc/passwd'" in message and "absolute path" in message
    message = refusal(zip_bytes(("/etc/passwd", b"root")), name="up.zip")
    assert "'/etc/passwd'" in message and "absolute path" in message


def test_a_member_nested_deeper_than_the_limit_is_refused():
    deep = "/".join(["d"] * 25) + "/f.txt"
    message = refusal(tar_bytes(tar_member(deep, b"x")))
    assert deep in message and "nested more than 20 levels" in message


def test_a_member_that_appears_twice_is_refused():
    message = refusal(tar_bytes(tar_member("a.txt", b"1"), tar_member("./a.txt", b"2")))
    assert "'./a.txt'" in message and "appears twice" in message


# --- Links ----------------------------------------------------------------------------------


def test_a_symlink_to_etc_passwd_is_refused_in_a_tar_and_a_zip():
    message = refusal(
        tar_bytes(GOOD, tar_member("task/pw", kind=tarfile.SYMTYPE, linkname="/etc/passwd"))
    )
    assert "'task/pw'" in message and "'/etc/passwd'" in message and "outside" in message
    message = refusal(zip_bytes(("ok", b"ok"), zip_link("task/pw", "/etc/passwd")), name="up.zip")
    assert "'task/pw'" in message and "'/etc/passwd'" in message


def test_a_symlink_that_climbs_out_of_the_root_is_refused():
    message = refusal(tar_bytes(tar_member("a/x", kind=tarfile.SYMTYPE, linkname="../../x")))
    assert "'a/x'" in message and "'../../x'" in message and "climbs out" in message
    message = refusal(zip_bytes(zip_link("a/x", "../../x")), name="up.zip")
    assert "'a/x'" in message and "climbs out" in message


def test_a_hard_link_to_a_file_outside_the_root_is_refused():
    message = refusal(tar_bytes(tar_member("a/h", kind=tarfile.LNKTYPE, linkname="../outside")))
    assert "'a/h'" in message and "'../outside'" in message
    message = refusal(tar_bytes(tar_member("a/h", kind=tarfile.LNKTYPE, linkname="/etc/shadow")))
    assert "'a/h'" in message and "'/etc/shadow'" in message and "outside" in message


def test_links_that_stay_inside_are_replaced_by_a_copy_of_their_target():
    data = tar_bytes(
        tar_member("t/tests/test.sh", b"#!/bin/sh\n", mode=0o755),
        tar_member("t/run.sh", kind=tarfile.SYMTYPE, linkname="tests/test.sh"),
        tar_member("t/hard.sh", kind=tarfile.LNKTYPE, linkname="t/tests/test.sh"),
        tar_member("t/alltests", kind=tarfile.SYMTYPE, linkname="tests"),
    )
    tree = read_tree(data, name="t.tgz")
    assert set(tree) == {"t/tests/test.sh", "t/run.sh", "t/hard.sh", "t/alltests/test.sh"}
    assert {entry.data for entry in tree.values()} == {b"#!/bin/sh\n"}
    assert tree["t/run.sh"].mode == 0o755


def test_a_link_to_nothing_or_a_loop_of_links_is_refused():
    message = refusal(tar_bytes(tar_member("a", kind=tarfile.SYMTYPE, linkname="missing")))
    assert "'a'" in message and "not a file or folder" in message
    message = refusal(
        tar_bytes(
            tar_member("a", kind=tarfile.SYMTYPE, linkname="b"),
            tar_member("b", kind=tarfile.SYMTYPE, linkname="a"),
        )
    )
    assert "loop" in message
    message = refusal(tar_bytes(tar_member("d/self", kind=tarfile.SYMTYPE, linkname="..")))
    assert "'d/self'" in message and "loop" in message


def test_thousands_of_links_or_a_long_chain_of_links_are_refused_quickly():
    links = [tar_member(f"l{i}", kind=tarfile.SYMTYPE, linkname="f") for i in range(5000)]
    started = time.monotonic()
    message = refusal(tar_bytes(tar_member("f", b"x"), *links))
    assert "more than 2000 files" in message and "'l1999'" in message
    chain = [tar_member(f"c{i}", kind=tarfile.SYMTYPE, linkname=f"c{i + 1}") for i in range(60)]
    message = refusal(tar_bytes(*chain, tar_member("c60", b"end")))
    assert "chain of more than 40 links" in message
    assert time.monotonic() - started < 5.0


# --- Special files --------------------------------------------------------------------------


def test_a_character_device_member_is_refused():
    message = refusal(tar_bytes(GOOD, tar_member("dev/null", kind=tarfile.CHRTYPE)))
    assert "'dev/null'" in message and "character device" in message
    message = refusal(zip_bytes(zip_special("dev/tty", stat.S_IFCHR)), name="up.zip")
    assert "'dev/tty'" in message and "character device" in message


def test_a_fifo_member_is_refused():
    message = refusal(tar_bytes(tar_member("task/pipe", kind=tarfile.FIFOTYPE)))
    assert "'task/pipe'" in message and "FIFO" in message
    message = refusal(zip_bytes(zip_special("task/pipe", stat.S_IFIFO)), name="up.zip")
    assert "'task/pipe'" in message and "FIFO" in message


# --- Sizes ----------------------------------------------------------------------------------


def test_more_files_than_the_limit_is_refused_at_the_first_file_over():
    members = [tar_member(f"t/f{i:02}.txt", b"x") for i in range(11)]
    message = refusal(tar_bytes(*members), limits=ArchiveLimits(max_files=10))
    assert "more than 10 files" in message and "'t/f10.txt'" in message


def zeros_zip(path: Path, members: dict[str, int]) -> None:
    """A zip of files full of zeros, written in 1 MiB chunks: memory stays low."""
    chunk = bytes(1 << 20)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        for name, size in members.items():
            with archive.open(name, "w", force_zip64=True) as member:
                for _ in range(size // len(chunk)):
                    member.write(chunk)


def test_a_zip_bomb_of_200_mb_of_zeros_is_refused_without_unpacking_it(tmp_path):
    bomb = tmp_path / "bomb.zip"
    zeros_zip(bomb, {"task/ok.txt": 0, "task/zeros.bin": 200 << 20})
    assert bomb.stat().st_size < 1 << 20
    started = time.monotonic()
    with pytest.raises(ArchiveError) as caught:
        read_tree(bomb, name="bomb.zip")
    assert time.monotonic() - started < 1.0
    message = str(caught.value)
    assert "'task/zeros.bin'" in message and "over the 20000000-byte limit" in message


def test_many_small_zero_files_that_unpack_too_far_beyond_their_packed_size_are_refused(tmp_path):
    bomb = tmp_path / "ratio.zip"
    zeros_zip(bomb, {f"z{i}.bin": 1 << 20 for i in range(8)})
    message = refusal(bomb.read_bytes(), name="ratio.zip")
    assert "more than 100 times its packed size" in message
    # Stopped at a member before the last one: the rest is never unpacked.
    assert re.search(r"reached at member 'z[0-6]\.bin'", message), message


def test_a_tar_gz_bomb_stops_at_the_unpacked_limit():
    zeros = tar_member("t/zeros.bin", bytes(3_000_000))
    message = refusal(
        tar_bytes(GOOD, zeros),
        limits=ArchiveLimits(max_bytes=2_000_000, max_ratio=10_000),
    )
    assert "more than 2000000 bytes unpacked" in message and "'t/zeros.bin'" in message


def test_ignored_members_cannot_hide_a_bomb_in_a_tar_gz():
    # tarfile must decompress a skipped member to get past it: the stream as a whole is bounded.
    hidden = tar_member("t/.git/objects/pack.bin", bytes(20_000_000))
    message = refusal(
        tar_bytes(GOOD, hidden), limits=ArchiveLimits(max_bytes=1_000_000, max_ratio=10**9)
    )
    assert "once decompressed" in message and "'t/.git/objects/pack.bin'" in message


def test_a_zip_member_that_lies_about_its_size_is_refused_as_corrupt():
    data = bytearray(zip_bytes(("task/lie.bin", bytes(500_000))))
    # Declare 10 bytes in the local header (offset 22) and the central directory (offset 24).
    struct.pack_into("<I", data, 22, 10)
    central = data.rindex(b"PK\x01\x02")
    struct.pack_into("<I", data, central + 24, 10)
    message = refusal(bytes(data), name="lie.zip")
    assert "'task/lie.bin'" in message and "corrupt" in message


# --- Corrupt and unknown files --------------------------------------------------------------


def test_a_truncated_gzip_is_refused_as_corrupt():
    data = tar_bytes(GOOD, tar_member("task/more.txt", os.urandom(4000)))
    message = refusal(data[: len(data) // 2])
    assert "corrupt tar.gz archive" in message


def test_a_gzip_whose_content_is_garbage_is_refused_as_corrupt():
    message = refusal(b"\x1f\x8b\x08\x00" + os.urandom(200))
    assert "corrupt tar.gz archive" in message


def test_a_damaged_zip_is_refused_as_corrupt():
    message = refusal(b"PK\x03\x04" + bytes(100), name="broken.zip")
    assert "corrupt zip archive" in message


def test_a_file_that_is_no_archive_at_all_is_refused():
    message = refusal(b'{"task_id": "x"}\n', name="tasks.jsonl")
    assert "not a zip, tar" in message


# --- Folders on disk ------------------------------------------------------------------------


def test_a_folder_with_a_symlink_out_of_it_is_refused(tmp_path):
    root = tmp_path / "set"
    (root / "task").mkdir(parents=True)
    (root / "task" / "ok.txt").write_text("ok")
    (root / "task" / "pw").symlink_to("/etc/passwd")
    with pytest.raises(ArchiveError) as caught:
        read_tree(root, name="set")
    assert "'task/pw'" in str(caught.value) and "/etc/passwd" in str(caught.value)
    (root / "task" / "pw").unlink()
    (root / "task" / "up").symlink_to("../../secret")
    with pytest.raises(ArchiveError) as caught:
        read_tree(root, name="set")
    assert "'task/up'" in str(caught.value) and "climbs out" in str(caught.value)


def test_a_folder_with_a_fifo_is_refused(tmp_path):
    (tmp_path / "task").mkdir()
    os.mkfifo(tmp_path / "task" / "pipe")
    with pytest.raises(ArchiveError) as caught:
        read_tree(tmp_path, name="set")
    assert "'task/pipe'" in str(caught.value) and "FIFO" in str(caught.value)


def test_a_folder_with_symlinks_inside_it_reads_their_targets(tmp_path):
    (tmp_path / "task" / "tests").mkdir(parents=True)
    (tmp_path / "task" / "tests" / "test.sh").write_text("exit 0\n")
    (tmp_path / "task" / "copy.sh").symlink_to("tests/test.sh")
    (tmp_path / "task" / "abs.sh").symlink_to(tmp_path / "task" / "tests" / "test.sh")
    tree = read_tree(tmp_path, name="set")
    assert tree["task/copy.sh"].data == tree["task/abs.sh"].data == b"exit 0\n"


# --- What is kept ---------------------------------------------------------------------------


def test_mac_and_git_clutter_is_left_out():
    tree = read_tree(
        zip_bytes(
            ("t/task.toml", b""),
            ("__MACOSX/t/._task.toml", b"junk"),
            ("t/.DS_Store", b"junk"),
            ("t/.git/config", b"[core]"),
            ("t/._task.toml", b"junk"),
        ),
        name="t.zip",
    )
    assert list(tree) == ["t/task.toml"]


def test_git_folders_are_kept_when_asked_and_the_rest_of_the_clutter_is_not():
    # A SWE-bench environment is a repository snapshot: its .git is part of it.
    tree = read_tree(
        zip_bytes(
            ("env/Dockerfile", b"FROM x\n"),
            ("env/.git/HEAD", b"ref: refs/heads/main\n"),
            ("env/sub/.git/config", b"[core]"),
            ("__MACOSX/env/._Dockerfile", b"junk"),
        ),
        name="environments.zip",
        keep_git=True,
    )
    assert list(tree) == ["env/.git/HEAD", "env/Dockerfile", "env/sub/.git/config"]


def test_the_format_is_told_by_content_not_by_name():
    tree = read_tree(tar_bytes(GOOD), name="misnamed.zip")
    assert list(tree) == ["task/ok.txt"]
    assert list(read_tree(tar_bytes(GOOD, compression=""), name="plain.bin")) == ["task/ok.txt"]
    assert list(read_tree(tar_bytes(GOOD, compression="xz"), name="t.txz")) == ["task/ok.txt"]


def test_a_single_top_folder_is_stripped_only_when_asked():
    data = tar_bytes(
        tar_member("tasks/hello/task.toml", b"x"), tar_member("tasks/bye/task.toml", b"y")
    )
    assert list(read_tree(data, name="t.tgz")) == ["tasks/bye/task.toml", "tasks/hello/task.toml"]
    stripped = read_tree(data, name="t.tgz", strip_single_root=True)
    assert list(stripped) == ["bye/task.toml", "hello/task.toml"]
    mixed = tar_bytes(tar_member("README", b"r"), tar_member("tasks/hello/task.toml", b"x"))
    assert list(read_tree(mixed, name="t.tgz", strip_single_root=True)) == [
        "README",
        "tasks/hello/task.toml",
    ]


def test_a_stream_that_cannot_seek_is_read_too():
    class Pipe(io.RawIOBase):
        def __init__(self, data: bytes) -> None:
            self._data = io.BytesIO(data)

        def readable(self) -> bool:
            return True

        def seekable(self) -> bool:
            return False

        def readinto(self, buffer) -> int:
            chunk = self._data.read(len(buffer))
            buffer[: len(chunk)] = chunk
            return len(chunk)

    assert list(read_tree(Pipe(tar_bytes(GOOD)), name="piped.tgz")) == ["task/ok.txt"]
