"""Git-style unified diffs (SWE-bench `patch`, `test_patch`, `model_patch`): parse, render, apply.

Plain standard library: diffs in as text, files out as dataclasses; trees are dicts path -> text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

_HUNK_RE = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(.*)$")
_HEADER_PREFIXES = (
    "index ",
    "new file mode ",
    "deleted file mode ",
    "old mode ",
    "new mode ",
    "similarity index ",
    "dissimilarity index ",
    "rename from ",
    "rename to ",
    "copy from ",
    "copy to ",
    "Binary files ",
    "GIT binary patch",
)
DEV_NULL = "/dev/null"


class DiffError(ValueError):
    """A malformed diff; `line` is the 1-based line of the diff text."""

    def __init__(self, message: str, line: int):
        super().__init__(f"line {line}: {message}")
        self.message = message
        self.line = line


class PatchError(ValueError):
    """A patch that does not apply to the tree, naming the file and hunk."""

    def __init__(self, path: str, hunk_header: str, reason: str):
        where = f"{path}, hunk {hunk_header}" if hunk_header else path
        super().__init__(f"{where}: {reason}")
        self.path = path
        self.hunk_header = hunk_header
        self.reason = reason


@dataclass
class Hunk:
    header: str
    old_start: int
    old_len: int
    new_start: int
    new_len: int
    lines: list[str] = field(default_factory=list)


@dataclass
class FilePatch:
    old_path: str
    new_path: str
    is_new: bool = False
    is_deleted: bool = False
    is_binary: bool = False
    hunks: list[Hunk] = field(default_factory=list)
    header_lines: list[str] = field(default_factory=list)

    @property
    def path(self) -> str:
        return self.old_path if self.is_deleted else self.new_path


def _strip_prefix(path: str) -> str:
    path = path.split("\t", 1)[0]
    if path.startswith(("a/", "b/")):
        return path[2:]
    return path


def _git_paths(line: str, lineno: int) -> tuple[str, str]:
    rest = line[len("diff --git ") :]
    if rest.startswith("a/") and " b/" in rest:
        # For equal paths (the usual case) split in the middle; else at the last " b/".
        half = (len(rest) - 1) // 2
        if rest[half] == " " and rest[2:half] == rest[half + 3 :]:
            return rest[2:half], rest[half + 3 :]
        cut = rest.rindex(" b/")
        return rest[2:cut], rest[cut + 3 :]
    raise DiffError(f"cannot read the paths of {line!r}", lineno)


def _parse_hunk_header(line: str, lineno: int) -> Hunk:
    match = _HUNK_RE.match(line)
    if not match:
        raise DiffError(f"malformed hunk header {line!r}", lineno)
    a, b, c, d, _ = match.groups()
    return Hunk(
        header=line,
        old_start=int(a),
        old_len=1 if b is None else int(b),
        new_start=int(c),
        new_len=1 if d is None else int(d),
    )


# A line of a GIT binary patch's body: a block's header, a base85 line (its first character
# says how many bytes it holds: A-Z 1-26, a-z 27-52), or the empty line that ends a block.
_BINARY_LINE = re.compile(
    r"^(?:(?:literal|delta) \d+|[A-Za-z][0-9A-Za-z!#$%&()*+\-;<=>?@^_`{|}~]+|)$"
)


def parse(text: str) -> list[FilePatch]:
    """Parse a diff; raises DiffError naming the 1-based line of anything malformed."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    files: list[FilePatch] = []
    current: FilePatch | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        lineno = i + 1
        if line.startswith("diff --git "):
            old, new = _git_paths(line, lineno)
            current = FilePatch(old_path=old, new_path=new, header_lines=[line])
            files.append(current)
        elif line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            if (
                current is None
                or current.hunks
                or any(h.startswith("--- ") for h in current.header_lines)
            ):
                current = FilePatch(old_path="", new_path="")
                files.append(current)
            old = line[4:].split("\t", 1)[0]
            new = lines[i + 1][4:].split("\t", 1)[0]
            if old == DEV_NULL:
                current.is_new = True
            else:
                current.old_path = _strip_prefix(old)
            if new == DEV_NULL:
                current.is_deleted = True
            else:
                current.new_path = _strip_prefix(new)
            if current.is_new and not current.old_path:
                current.old_path = current.new_path
            if current.is_deleted and not current.new_path:
                current.new_path = current.old_path
            current.header_lines += [line, lines[i + 1]]
            i += 1
        elif current is not None and not current.hunks and line.startswith(_HEADER_PREFIXES):
            if line.startswith("new file mode "):
                current.is_new = True
            elif line.startswith("deleted file mode "):
                current.is_deleted = True
            elif line.startswith("rename from "):
                current.old_path = line[len("rename from ") :]
            elif line.startswith("rename to "):
                current.new_path = line[len("rename to ") :]
            elif line.startswith(("Binary files ", "GIT binary patch")):
                current.is_binary = True
            current.header_lines.append(line)
            if line.startswith("GIT binary patch"):
                # git's binary body: "literal N" / "delta N" blocks of base85 lines, each block
                # ended by an empty line (the forward change, then the reverse one).
                while i + 1 < len(lines) and _BINARY_LINE.match(lines[i + 1]):
                    i += 1
                    current.header_lines.append(lines[i])
        elif line.startswith("@@"):
            if current is None or not any(h.startswith("--- ") for h in current.header_lines):
                raise DiffError("hunk outside any file (no '---'/'+++' lines before it)", lineno)
            hunk = _parse_hunk_header(line, lineno)
            i = _read_hunk_body(hunk, lines, i + 1)
            current.hunks.append(hunk)
            continue
        else:
            raise DiffError(f"text outside any file or hunk: {line[:60]!r}", lineno)
        i += 1
    return files


def _read_hunk_body(hunk: Hunk, lines: list[str], i: int) -> int:
    old_left, new_left = hunk.old_len, hunk.new_len
    start = i
    while old_left > 0 or new_left > 0:
        if i >= len(lines):
            raise DiffError(
                f"hunk {hunk.header!r} ends early: {old_left} old and {new_left} new lines missing",
                start,  # the hunk header's line (1-based)
            )
        line = lines[i]
        kind = line[:1]
        if kind == " ":
            old_left -= 1
            new_left -= 1
        elif kind == "-":
            old_left -= 1
        elif kind == "+":
            new_left -= 1
        elif kind != "\\":
            raise DiffError(
                f"hunk {hunk.header!r} has {old_left} old and {new_left} new lines left"
                f" but line is not ' ', '-', '+' or '\\': {line[:60]!r}",
                i + 1,
            )
        if old_left < 0 or new_left < 0:
            raise DiffError(f"hunk {hunk.header!r} has more lines than its counts", i + 1)
        hunk.lines.append(line)
        i += 1
    if i < len(lines) and lines[i].startswith("\\"):
        hunk.lines.append(lines[i])
        i += 1
    return i


def render(files: list[FilePatch]) -> str:
    out: list[str] = []
    for f in files:
        header = f.header_lines or _default_header(f)
        out.extend(header)
        for h in f.hunks:
            out.append(h.header)
            out.extend(h.lines)
    return "".join(line + "\n" for line in out)


def _default_header(f: FilePatch) -> list[str]:
    old = DEV_NULL if f.is_new else f"a/{f.old_path}"
    new = DEV_NULL if f.is_deleted else f"b/{f.new_path}"
    return [f"diff --git a/{f.old_path} b/{f.new_path}", f"--- {old}", f"+++ {new}"]


def hunks(files: list[FilePatch]) -> list[tuple[str, str]]:
    return [(f.path, h.header) for f in files for h in f.hunks]


def drop_hunk(files: list[FilePatch], index: int) -> list[FilePatch]:
    """The diff without hunk `index` (0-based over all files); an emptied modification is dropped."""
    total = sum(len(f.hunks) for f in files)
    if not 0 <= index < total:
        raise IndexError(f"hunk {index} out of range (the diff has {total})")
    out: list[FilePatch] = []
    seen = 0
    for f in files:
        if seen <= index < seen + len(f.hunks):
            kept = f.hunks[: index - seen] + f.hunks[index - seen + 1 :]
            if kept or f.is_new or f.is_deleted:
                out.append(replace(f, hunks=kept))
        else:
            out.append(f)
        seen += len(f.hunks)
    return out


def files_touched(files: list[FilePatch]) -> list[str]:
    seen: dict[str, None] = {}
    for f in files:
        for p in (f.old_path, f.new_path):
            if p:
                seen.setdefault(p, None)
    return list(seen)


def _sides(hunk: Hunk) -> tuple[list[str], list[str]]:
    """The hunk's old and new lines, each ending in '\\n' unless marked 'No newline'."""
    old: list[str] = []
    new: list[str] = []
    last: list[str] | None = None
    for line in hunk.lines:
        kind, body = line[:1], line[1:]
        if kind == "\\":
            for side in (old, new) if last is None else (last,):
                if side and side[-1].endswith("\n"):
                    side[-1] = side[-1][:-1]
            continue
        if kind == " ":
            old.append(body + "\n")
            new.append(body + "\n")
            last = None
        elif kind == "-":
            old.append(body + "\n")
            last = old
        else:
            new.append(body + "\n")
            last = new
    return old, new


def _apply_hunks(path: str, f: FilePatch, text: str) -> str:
    lines = text.splitlines(keepends=True)
    floor = 0
    delta = 0
    for h in f.hunks:
        old, new = _sides(h)
        want = h.old_start - 1 + delta if h.old_len else h.old_start + delta
        want = max(want, floor)
        pos = None
        for off in range(len(lines) + 1):
            for cand in (want - off, want + off) if off else (want,):
                if floor <= cand <= len(lines) - len(old) and lines[cand : cand + len(old)] == old:
                    pos = cand
                    break
            if pos is not None:
                break
        if pos is None:
            raise PatchError(
                path,
                h.header,
                f"its context and removed lines do not match near line {h.old_start}",
            )
        lines[pos : pos + len(old)] = new
        stated = h.old_start - 1 if h.old_len else h.old_start
        delta = pos - stated + len(new) - len(old)
        floor = pos + len(new)
    return "".join(lines)


def apply(files: list[FilePatch], tree: dict[str, str]) -> dict[str, str]:
    """The tree after the patch; raises PatchError naming the file and hunk that fails."""
    out = dict(tree)
    for f in files:
        if f.is_binary:
            raise PatchError(f.path, "", "binary changes cannot be applied")
        if f.is_new:
            if f.new_path in out:
                raise PatchError(f.new_path, "", "new file already exists")
            out[f.new_path] = _apply_hunks(f.new_path, f, "")
            continue
        if f.old_path not in out:
            raise PatchError(f.old_path, "", "file does not exist")
        result = _apply_hunks(f.old_path, f, out[f.old_path])
        if f.is_deleted:
            if result:
                raise PatchError(
                    f.old_path, "", "deleted file has content the diff does not remove"
                )
            del out[f.old_path]
            continue
        if f.old_path != f.new_path:
            if f.new_path in out:
                raise PatchError(f.new_path, "", "rename target already exists")
            del out[f.old_path]
        out[f.new_path] = result
    return out
