"""Reading a terminal task set: finding its task folders in the tree of an upload and reading each
(Harbor or Terminal-Bench) with its samples; and telling such an upload from a JSONL one.

A set is a tree of files (``{path: FileEntry}`` from `inspector.formats.archive.read_tree`) with
one folder per task; the folder's name is the task id. A folder holding ``task.toml`` is a Harbor
task (`inspector.formats.terminal.harbor`), one holding ``task.yaml`` a Terminal-Bench task
(`inspector.formats.terminal.terminal_bench`); one holding both is read as Harbor.

Where the tasks are in the tree: each top-level folder is a task; or, when the tree has a single
top-level folder that is not itself a task, its subfolders are (a ``tasks.tar.gz`` holding
``tasks/hello/task.toml``); or, when ``task.toml`` or ``task.yaml`` is at the top, the tree is
one task whose id is the upload's name without its extension (``hello.zip`` -> ``hello``).
Loose files beside the task folders (a README) and folders whose name starts with a dot are
ignored. Problems are reported with the paths as they are in the upload.

Reading is all-or-nothing, like the HumanEval reader: `read_terminal_taskset` returns every task
and sample, or raises `TaskSetFormatError` listing every problem found.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any

from inspector.formats.archive import FileEntry, archive_kind
from inspector.formats.humaneval import FormatIssue, TaskSetFormatError, short_text
from inspector.formats.terminal.harbor import read_harbor
from inspector.formats.terminal.samples import read_folder_samples
from inspector.formats.terminal.source import file_record
from inspector.formats.terminal.terminal_bench import read_terminal_bench

__all__ = ["TerminalTaskSet", "looks_like_terminal_upload", "read_terminal_taskset"]

_ARCHIVE_SUFFIXES = (".tar.gz", ".tar.bz2", ".tar.xz", ".tgz", ".tbz2", ".txz", ".tar", ".zip")


@dataclass(frozen=True)
class TerminalTaskSet:
    tasks: list[dict[str, Any]]  # source dicts, sorted by task_id
    samples: list[dict[str, str]]  # {"task_id", "sample_id", "script"}, by task then sample id


def read_terminal_taskset(tree: dict[str, FileEntry], *, name: str) -> TerminalTaskSet:
    """Every task and sample of the set, or `TaskSetFormatError` listing every problem.

    `tree` maps POSIX paths relative to the upload's root to file entries (`read_tree`).
    `name` is the upload's file name: it names a single-task upload's task and the set in
    messages.
    """
    issues: list[FormatIssue] = []
    folders = _task_folders(tree, name, issues)
    tasks: list[dict[str, Any]] = []
    samples: list[dict[str, str]] = []
    seen: dict[str, str] = {}  # casefolded task id -> its folder
    for task_id, prefix in folders:
        folded = task_id.casefold()
        if folded in seen:
            issues.append(
                FormatIssue(
                    prefix or name,
                    None,
                    None,
                    f"duplicate task id {short_text(task_id)}: the folder {seen[folded]} has the same "
                    "name (task ids are compared ignoring case)",
                )
            )
            continue
        seen[folded] = prefix or name
        files = {
            path[len(prefix) :]: entry for path, entry in tree.items() if path.startswith(prefix)
        }
        source = _read_task(task_id, files, prefix, name, issues)
        samples.extend(read_folder_samples(task_id, files, prefix, issues))
        if source is not None:
            tasks.append(source)
    if not folders and not issues:
        issues.append(
            FormatIssue(
                name,
                None,
                None,
                "contains no tasks: expected one folder per task, holding task.toml (Harbor) "
                "or task.yaml (Terminal-Bench)",
            )
        )
    if issues:
        raise TaskSetFormatError(issues)
    tasks.sort(key=lambda source: source["task_id"])
    samples.sort(key=lambda sample: (sample["task_id"], sample["sample_id"]))
    return TerminalTaskSet(tasks=tasks, samples=samples)


def looks_like_terminal_upload(name: str, head_bytes: bytes) -> bool:
    """Whether an upload is an archive of task folders rather than (possibly gzipped) JSONL.

    `head_bytes` are the upload's first bytes: give at least 4 KiB. A zip, a bzip2 or xz file
    and a tar are archives. A gzip file is one when what it decompresses to starts like a tar,
    or, when too little of it could be decompressed to tell, when its name ends in .tar.gz or
    .tgz.
    """
    lowered = name.lower()
    if head_bytes.startswith(b"\x1f\x8b"):
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            inner = inflater.decompress(head_bytes, 1024)
        except zlib.error:
            inner = b""
        if len(inner) >= 262:
            return inner[257:262] == b"ustar"
        if inner.lstrip()[:1] in (b"{", b"["):
            return False
        return lowered.endswith((".tar.gz", ".tgz"))
    return archive_kind(head_bytes, name) is not None


# --- Finding the task folders ------------------------------------------------------------------


def _task_folders(
    tree: dict[str, FileEntry], name: str, issues: list[FormatIssue]
) -> list[tuple[str, str]]:
    """(task id, path prefix ending in "/" or "") of every task folder, by task id."""
    if _is_task(tree, ""):
        return [(_name_stem(name), "")]
    prefix = ""
    tops = _subfolders(tree, "")
    if len(tops) == 1 and not _is_task(tree, tops[0] + "/"):
        inner = _subfolders(tree, tops[0] + "/")
        if any(_is_task(tree, f"{tops[0]}/{folder}/") for folder in inner):
            prefix = tops[0] + "/"
            tops = inner
    folders: list[tuple[str, str]] = []
    for folder in tops:
        where = f"{prefix}{folder}/"
        if _is_task(tree, where):
            folders.append((folder, where))
            continue
        deeper = [sub for sub in _subfolders(tree, where) if _is_task(tree, f"{where}{sub}/")]
        hint = ""
        if deeper:
            hint = f"; it holds task folders ({', '.join(deeper[:3])}): upload those instead"
        issues.append(
            FormatIssue(
                where,
                None,
                None,
                "neither a Harbor task (no task.toml) nor a Terminal-Bench task (no task.yaml)"
                + hint,
            )
        )
    return sorted(folders)


def _is_task(tree: dict[str, FileEntry], prefix: str) -> bool:
    return f"{prefix}task.toml" in tree or f"{prefix}task.yaml" in tree


def _subfolders(tree: dict[str, FileEntry], prefix: str) -> list[str]:
    found = set()
    for path in tree:
        if path.startswith(prefix):
            rest = path[len(prefix) :]
            if "/" in rest:
                folder = rest.split("/", 1)[0]
                if not folder.startswith("."):
                    found.add(folder)
    return sorted(found)


def _name_stem(name: str) -> str:
    base = name.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
    lowered = base.lower()
    for suffix in _ARCHIVE_SUFFIXES:
        if lowered.endswith(suffix) and len(base) > len(suffix):
            return base[: -len(suffix)]
    return base or "task"


# --- One task ---------------------------------------------------------------------------------


def _read_task(
    task_id: str, files: dict[str, FileEntry], prefix: str, name: str, issues: list[FormatIssue]
) -> dict[str, Any] | None:
    before = len(issues)
    if any(ch.isspace() and ch != " " or ord(ch) < 32 for ch in task_id) or not task_id.strip():
        issues.append(
            FormatIssue(
                prefix or name,
                None,
                None,
                f"the task id {short_text(task_id)} has control characters",
            )
        )
    if "task.toml" in files:
        source = read_harbor(task_id, files, prefix, issues)
    else:
        source = read_terminal_bench(task_id, files, prefix, issues)
    if source is None or len(issues) != before:
        return None
    source["files"] = {
        path: file_record(entry)
        for path, entry in sorted(files.items())
        if not path.startswith("samples/")
    }
    return source
