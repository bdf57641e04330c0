"""The tar streams terminal runs send to the engine, read back with tarfile (no engine)."""

from __future__ import annotations

import io
import tarfile

from workers.sandbox.terminal.archives import folder_entries, staged_archive

LONG = "n" * 150


def engine_archive() -> io.BytesIO:
    """A folder's archive as the engine sends one: PAX, long names, links of both kinds."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for name, kind, extra in (
            ("app", tarfile.DIRTYPE, None),
            (f"app/{LONG}", tarfile.REGTYPE, b"long"),
            ("app/hard", tarfile.LNKTYPE, f"app/{LONG}"),
            ("app/soft", tarfile.SYMTYPE, f"/nowhere/{LONG}"),
            ("app/fifo", tarfile.FIFOTYPE, None),
        ):
            info = tarfile.TarInfo(name)
            info.type = kind
            info.mode = 0o4710
            if kind in (tarfile.LNKTYPE, tarfile.SYMTYPE):
                info.linkname = extra
            if kind == tarfile.REGTYPE:
                info.size = len(extra)
                archive.addfile(info, io.BytesIO(extra))
            else:
                archive.addfile(info)
    buffer.seek(0)
    return buffer


def test_the_staged_archive_holds_the_tests_first_then_the_work_folder_under_the_prefix():
    out = io.BytesIO()
    tests = folder_entries("tests", "logs/verifier") + [("tests/test.sh", b"echo ok\n", 0o755)]
    staged_archive(tests, engine_archive(), ".inspector-work/", out)
    out.seek(0)
    with tarfile.open(fileobj=out) as archive:
        members = {member.name: member for member in archive.getmembers()}
        names = list(members)
        assert names[:5] == [
            "tests",
            "logs",
            "logs/verifier",
            "tests/test.sh",
            ".inspector-work/app",
        ]
        assert archive.extractfile(members[f".inspector-work/app/{LONG}"]).read() == b"long"
        assert archive.extractfile(members["tests/test.sh"]).read() == b"echo ok\n"
    assert members[".inspector-work/app/hard"].linkname == f".inspector-work/app/{LONG}"
    assert members[".inspector-work/app/soft"].linkname == f"/nowhere/{LONG}"
    assert members[".inspector-work/app/fifo"].isfifo()
    assert members[f".inspector-work/app/{LONG}"].mode == 0o4710
    assert not any(name.startswith("app") for name in names)  # no stale long name


def test_without_a_work_folder_the_staged_archive_is_the_tests_alone():
    out = io.BytesIO()
    staged_archive([("tests/", None, 0o755)], None, ".inspector-work/", out)
    out.seek(0)
    with tarfile.open(fileobj=out) as archive:
        assert archive.getnames() == ["tests"]
