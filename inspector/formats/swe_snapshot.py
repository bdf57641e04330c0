"""Static checks of a SWE-bench instance against its repository snapshot, pure Python on the host:
nothing of the repository runs, and git is never called. A snapshot is read through a function
`read(path) -> bytes | None` (a file relative to the repository's root; None when there is no
such file), so the same checks serve an environment folder of an upload and an image the user
already has.

- `repository_head`: the commit the snapshot's `.git` is at (HEAD, a loose ref or packed-refs);
- `apply_patch`: a diff applied to the snapshot's files (`unified_diff.apply`), the files it
  touches after it, or why it does not apply (the file and hunk named);
- `TestIds`: FAIL_TO_PASS / PASS_TO_PASS ids (pytest node ids, `path::name` or
  `path::Class::name`, a parameter suffix `[...]` allowed) whose file is not in the snapshot
  after the test_patch, or whose function or class is nowhere in that file. A method a test
  class inherits is looked for in the classes it inherits from the repository (cachetools'
  tests take most of theirs from a mixin in tests/__init__.py); a base from outside the
  repository may hold anything, so a method behind one is not refused.
"""

from __future__ import annotations

import ast
import functools
import posixpath
import re
from collections.abc import Callable

from inspector.formats import unified_diff
from inspector.formats.humaneval import short_text

__all__ = [
    "Reader",
    "TestIds",
    "apply_patch",
    "cached_reader",
    "repository_head",
    "safe_path",
]

Reader = Callable[[str], bytes | None]

_SHA = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")
# Modules whose classes hold no test methods: a base imported from one adds none.
_NO_TESTS_FROM = frozenset(
    {"unittest", "unittest2", "pytest", "_pytest", "django", "twisted", "typing", "abc"}
)
_MAX_INHERITANCE_DEPTH = 4
_MAX_LISTED_IDS = 3
_WORD = re.compile(r"\w+")
_CLASS_LINE = re.compile(r"^[ \t]*class[ \t]+(\w+)", re.MULTILINE)


def safe_path(path: str) -> bool:
    """A path relative to the repository's root that stays inside it."""
    parts = path.split("/")
    return bool(path) and not path.startswith("/") and ".." not in parts and "" not in parts


def cached_reader(read: Reader) -> Reader:
    """`read`, each path asked once, paths that leave the repository never asked."""
    cache: dict[str, bytes | None] = {}

    def cached(path: str) -> bytes | None:
        if path not in cache:
            cache[path] = read(path) if safe_path(path) else None
        return cache[path]

    return cached


def repository_head(read: Reader) -> tuple[str, str]:
    """(the commit HEAD is at, "") or ("", why it cannot be told)."""
    head = read(".git/HEAD")
    if head is None:
        if read(".git") is not None:
            return "", (
                "its .git is a file pointing elsewhere (a worktree or submodule), not the "
                "repository itself"
            )
        return "", (
            "it has no .git/HEAD: the environment must hold the repository with its .git at "
            "base_commit (the runs restore the test files from base_commit with git)"
        )
    text = head.decode("utf-8", "replace").strip()
    if text.startswith("ref:"):
        ref = text[4:].strip()
        if not ref.startswith("refs/") or not safe_path(ref):
            return "", f"its .git/HEAD names {short_text(ref)}, which is not a ref"
        loose = read(f".git/{ref}")
        sha = loose.decode("utf-8", "replace").strip() if loose is not None else ""
        if not sha:
            packed = read(".git/packed-refs") or b""
            for line in packed.decode("utf-8", "replace").splitlines():
                value, _, name = line.partition(" ")
                if name.strip() == ref:
                    sha = value.strip()
                    break
        if not sha:
            return "", f"its HEAD names {ref}, which has no commit"
    else:
        sha = text
    sha = sha.lower()
    if not _SHA.match(sha):
        return "", f"its HEAD is not a commit hash ({short_text(sha)})"
    return sha, ""


def apply_patch(text: str, read: Reader) -> tuple[dict[str, str | None] | None, str]:
    """(the files the diff touches, as text after it, None for one it deletes; "") or (None,
    why it is not a diff or does not apply). Binary file changes are left out (they cannot be
    checked here; git applies them in the runs)."""
    try:
        files = unified_diff.parse(text)
    except unified_diff.DiffError as exc:
        return None, f"not a unified diff ({exc})"
    files = [f for f in files if not f.is_binary]
    tree: dict[str, str] = {}
    for path in unified_diff.files_touched(files):
        if not safe_path(path):
            return None, f"it touches {short_text(path)}, outside the repository"
        data = read(path)
        if data is not None:
            tree[path] = data.decode("utf-8", "surrogateescape")
    try:
        after = unified_diff.apply(files, tree)
    except unified_diff.PatchError as exc:
        return None, f"does not apply to the repository at base_commit: {exc}"
    return {path: after.get(path) for path in unified_diff.files_touched(files)}, ""


class TestIds:
    """Checks test ids against one snapshot after its test_patch; each file is read, tokenised
    and parsed once, whichever list and id ask. `read_text(path)`: the file, None if absent."""

    def __init__(self, read_text: Callable[[str], str | None]) -> None:
        self._read_text = read_text
        self._modules: dict[str, _Module | None] = {}
        self._methods: dict[tuple[str, str, str], bool] = {}

    def problems(self, test_ids: list[str]) -> list[str]:
        """Why each listed test does not exist (one reason per missing file, one per missing
        name), in list order; [] when all do."""
        problems: list[str] = []
        missing: dict[str, list[str]] = {}
        for test_id in test_ids:
            parts = test_id.split("[", 1)[0].split("::")
            path, names = parts[0], parts[1:]
            if len(parts) < 2 or not path or not all(name.strip() for name in names):
                problems.append(
                    f"{short_text(test_id)} is not a pytest test id (path::name or "
                    "path::Class::name): the runs select the tests by their file"
                )
                continue
            if not safe_path(path):
                problems.append(f"{short_text(test_id)} names a file outside the repository")
                continue
            module = self._module(path)
            if module is None:
                if path not in missing:
                    missing[path] = []
                    problems.append(path)  # replaced by the reason below, in this place
                missing[path].append(test_id)
                continue
            reason = self._name_problem(test_id, path, names, module)
            if reason:
                problems.append(reason)
        for index, item in enumerate(problems):
            if item in missing:
                ids = missing[item]
                shown = ", ".join(short_text(i) for i in ids[:_MAX_LISTED_IDS])
                more = (
                    f" and {len(ids) - _MAX_LISTED_IDS} more" if len(ids) > _MAX_LISTED_IDS else ""
                )
                problems[index] = (
                    f"the test file {item} ({shown}{more}) is not in the repository after the "
                    "test_patch"
                )
        return problems

    def _module(self, path: str) -> _Module | None:
        if path not in self._modules:
            text = self._read_text(path) if safe_path(path) else None
            self._modules[path] = None if text is None else _Module(text)
        return self._modules[path]

    def _name_problem(self, test_id: str, path: str, names: list[str], module: _Module) -> str:
        *classes, test = names
        for cls in classes:
            if cls not in module.class_lines:
                return f"{short_text(test_id)}: no class {cls} in {path}"
        # A doctest item is named by its dotted path; its last part is what the file defines.
        name = test.rsplit(".", 1)[-1]
        if not classes:
            if not module.mentions(name):
                return f"{short_text(test_id)}: no test {name} in {path}"
            return ""
        if not self._method_may_exist(path, classes[-1], name, depth=0):
            return (
                f"{short_text(test_id)}: no test {name} in class {classes[-1]} of {path}, nor "
                "in the classes it inherits from the repository"
            )
        return ""

    def _method_may_exist(self, path: str, cls: str, name: str, *, depth: int) -> bool:
        key = (path, cls, name)
        if key not in self._methods:
            self._methods[key] = self._find_method(path, cls, name, depth)
        return self._methods[key]

    def _find_method(self, path: str, cls: str, name: str, depth: int) -> bool:
        """False only when `name` is in none of the files `cls` and its bases are in, every
        base being found in the repository (or known to hold no tests)."""
        module = self._module(path)
        if module is None or module.mentions(name) or depth >= _MAX_INHERITANCE_DEPTH:
            return True
        if module.tree is None:
            return True  # not Python we can parse: cannot tell; the runs will
        node = module.classes.get(cls)
        if node is None:
            return True  # defined some other way (an assignment, a re-export): cannot tell
        for base in node.bases:
            dotted = _dotted(base)
            if dotted is None:
                return True  # a call or subscript (a class factory): cannot tell
            head, _, rest = dotted.partition(".")
            if not rest and head in module.classes:
                continue  # in this file, which does not name the method
            origin = module.imports.get(head)
            if origin is None:
                if head in ("object", "Exception") or "*" not in module.imports:
                    continue  # a builtin
                origin = (*module.imports["*"][:2], head)
            source, level, attribute = origin
            if rest:  # `import tests.base` or `from tests import base`, then `base.Mixin`
                *more, last = rest.split(".")
                source = ".".join(p for p in (source, attribute, *more) if p)
                attribute = last
            found = [p for p in _module_files(source, level, path, attribute) if self._module(p)]
            if not found:
                if not level and source.split(".")[0] in _NO_TESTS_FROM:
                    continue
                return True  # from outside the repository
            if any(self._method_may_exist(p, attribute, name, depth=depth + 1) for p in found):
                return True
        return False


class _Module:
    """One file of the snapshot: its words, and (for Python) its classes and imports."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._words: set[str] | None = None
        self._parsed = False
        self._tree: ast.Module | None = None
        self.class_lines = set(_CLASS_LINE.findall(text))

    def mentions(self, name: str) -> bool:
        if self._words is None:
            self._words = set(_WORD.findall(self.text))
        if _WORD.fullmatch(name):
            return name in self._words
        return re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", self.text) is not None

    @property
    def tree(self) -> ast.Module | None:
        if not self._parsed:
            self._parsed = True
            try:
                self._tree = ast.parse(self.text)
            except (SyntaxError, ValueError):
                self._tree = None
        return self._tree

    @functools.cached_property
    def classes(self) -> dict[str, ast.ClassDef]:
        tree = self.tree
        if tree is None:
            return {}
        return {n.name: n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}

    @functools.cached_property
    def imports(self) -> dict[str, tuple[str, int, str]]:
        """Local name -> (module, level, the name in that module); "*" for a star import."""
        found: dict[str, tuple[str, int, str]] = {}
        for node in self.tree.body if self.tree is not None else []:
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    found[alias.asname or alias.name] = (node.module or "", node.level, alias.name)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        found[alias.asname] = (alias.name, 0, "")
                    else:
                        top = alias.name.split(".")[0]
                        found[top] = (top, 0, "")
        return found


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f"{inner}.{node.attr}" if inner else None
    return None


def _module_files(module: str, level: int, path: str, attribute: str) -> list[str]:
    """Where a module (and `attribute` as a submodule of it) may be in the repository: beside
    the test file for a relative import; at the root, under src/ or beside the test file (the
    folder pytest puts on sys.path) for an absolute one."""
    parts = [p for p in module.split(".") if p]
    if level:
        folder = posixpath.dirname(path)
        for _ in range(level - 1):
            folder = posixpath.dirname(folder)
        roots = [folder]
    else:
        roots = ["", "src", posixpath.dirname(path)]
    out: list[str] = []
    for root in dict.fromkeys(roots):
        stem = posixpath.join(root, *parts) if parts else root
        if parts:
            out.append(stem + ".py")
        out.append(posixpath.join(stem, "__init__.py") if stem else "__init__.py")
        if attribute:
            out.append(posixpath.join(stem, attribute + ".py") if stem else attribute + ".py")
    return [p for p in dict.fromkeys(out) if safe_path(p)]
