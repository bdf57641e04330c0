"""Modified checks, the test-side defects: a broken expectation (one literal expected value
changed), weak tests (asserts turned into bare expressions, or the check cut to its first assert)
and a flaky final assert."""

from __future__ import annotations

import ast
import math

from bench.planted.editing import Source, node_at, parse, same_tree, wrapped


def _check_function(tree: ast.Module) -> ast.FunctionDef | None:
    return next(
        (n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "check"), None
    )


def _calls_candidate(node: ast.AST, names: set[str]) -> bool:
    return any(
        isinstance(inner, ast.Call) and isinstance(inner.func, ast.Name) and inner.func.id in names
        for inner in ast.walk(node)
    )


def _candidate_names(check: ast.FunctionDef, entry_point: str) -> set[str]:
    names = {entry_point}
    if check.args.args:
        names.add(check.args.args[0].arg)
    return names


def _asserts(check: ast.FunctionDef) -> list[ast.Assert]:
    found = [node for node in ast.walk(check) if isinstance(node, ast.Assert)]
    return sorted(found, key=lambda node: (node.lineno, node.col_offset))


def _literal(node: ast.expr) -> tuple[bool, object]:
    try:
        return True, ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None


def _changed(value: object) -> tuple[bool, object]:
    """A wrong expected value next to `value`: (found, value)."""
    if isinstance(value, bool):
        return True, not value
    if isinstance(value, int):
        return True, value + 1
    if isinstance(value, float) and math.isfinite(value):
        return True, value + 1.0
    if isinstance(value, str):
        return True, value + value[-1] if value else "x"
    if isinstance(value, list | tuple):
        return True, value[:-1] if value else type(value)([0])
    if value is None:
        return True, 0
    return False, None


def broken_expectations(task: dict) -> list[tuple[str, str]]:
    """(test, description) for each assert of the check that compares a candidate call with a
    literal, the literal changed; in source order."""
    source = Source(task["test"])
    tree = parse(source.text)
    check = _check_function(tree) if tree else None
    if check is None:
        return []
    names = _candidate_names(check, task["entry_point"])
    found = []
    for node in _asserts(check):
        test = node.test
        if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
            continue
        if not isinstance(test.ops[0], ast.Eq | ast.Is):
            continue
        for literal, other in ((test.comparators[0], test.left), (test.left, test.comparators[0])):
            is_literal, value = _literal(literal)
            if not is_literal or not _calls_candidate(other, names):
                continue
            ok, new = _changed(value)
            if not ok:
                continue
            text = repr(new)
            if isinstance(new, str) and source.segment(literal).startswith('"'):
                if '"' not in new and "\\" not in text:
                    text = f'"{new}"'  # the quotes the test used
            expected = parse(source.text)
            twin = node_at(expected, literal)
            replacement = ast.parse(text, mode="eval").body
            _replace_child(expected, twin, replacement)
            edited = source.edited([(*source.span(literal), text)])
            if same_tree(edited, expected):
                old = source.segment(literal)
                short = old if len(old) <= 40 else old[:37] + "..."
                found.append(
                    (edited, f"line {node.lineno}: expected {short} changed to {text[:40]}")
                )
            break
    return found


def _replace_child(tree: ast.AST, old: ast.AST, new: ast.AST) -> None:
    for parent in ast.walk(tree):
        for name, value in ast.iter_fields(parent):
            if value is old:
                setattr(parent, name, new)
                return
            if isinstance(value, list) and any(item is old for item in value):
                value[[id(item) for item in value].index(id(old))] = new
                return
    raise LookupError("child not found")


def without_asserts(task: dict) -> str | None:
    """The check with every `assert X[, msg]` turned into the bare expression `X`."""
    source = Source(task["test"])
    tree = parse(source.text)
    check = _check_function(tree) if tree else None
    if check is None:
        return None
    asserts = _asserts(check)
    if not asserts:
        return None
    expected = parse(source.text)
    edits = []
    for node in asserts:
        edits.append((*source.span(node), wrapped(source, node.test)))
        twin = node_at(expected, node)
        _replace_child(expected, twin, ast.Expr(value=twin.test))
    return _test_checked(source.edited(edits), expected)


def one_assert(task: dict) -> str | None:
    """The check cut down to its first assert that calls the candidate; None when it has no
    second one to cut."""
    source = Source(task["test"])
    tree = parse(source.text)
    check = _check_function(tree) if tree else None
    if check is None:
        return None
    names = _candidate_names(check, task["entry_point"])
    asserts = _asserts(check)
    calling = [node for node in asserts if _calls_candidate(node, names)]
    if len(calling) < 2:
        return None
    keep = calling[0]
    dropped = {id(node) for node in asserts if node is not keep}
    # A compound statement left with nothing but dropped statements goes too.
    changed = True
    while changed:
        changed = False
        for node in ast.walk(check):
            if node is check or id(node) in dropped or not isinstance(node, ast.stmt):
                continue
            blocks = [getattr(node, name, None) for name in ("body", "orelse", "finalbody")]
            statements = [s for block in blocks if isinstance(block, list) for s in block]
            if statements and all(id(s) in dropped for s in statements):
                if not any(inner is keep for inner in ast.walk(node)):
                    dropped.add(id(node))
                    changed = True
    outermost = [
        node
        for node in ast.walk(check)
        if id(node) in dropped and not _inside_dropped(check, node, dropped)
    ]
    edits = []
    for node in outermost:
        start, end = source.span(node)
        line_start = source.data.rfind(b"\n", 0, start) + 1
        line_end = source.data.find(b"\n", end)
        line_end = len(source.data) if line_end < 0 else line_end + 1
        before = source.data[line_start:start]
        after = source.data[end:line_end]
        if before.strip() or after.strip():
            return None  # shares a line with another statement
        edits.append((line_start, line_end, ""))
    expected = parse(source.text)
    positions = {
        (n.lineno, n.col_offset, n.end_lineno, n.end_col_offset)
        for n in ast.walk(check)
        if id(n) in dropped
    }
    for parent in ast.walk(expected):
        for name in ("body", "orelse", "finalbody"):
            block = getattr(parent, name, None)
            if isinstance(block, list):
                block[:] = [
                    s
                    for s in block
                    if not isinstance(s, ast.stmt)
                    or (s.lineno, s.col_offset, s.end_lineno, s.end_col_offset) not in positions
                ]
    return _test_checked(source.edited(edits), expected)


def _inside_dropped(check: ast.FunctionDef, node: ast.AST, dropped: set[int]) -> bool:
    for outer in ast.walk(check):
        if outer is not node and id(outer) in dropped:
            if any(inner is node for inner in ast.walk(outer)):
                return True
    return False


def with_final_assert(task: dict, line: str) -> str | None:
    """`import random` on top of the test, and `line` as the check's last statement."""
    text = task["test"]
    tree = parse(text)
    check = _check_function(tree) if tree else None
    if check is None:
        return None
    last = check.body[-1]
    indent = " " * check.body[0].col_offset
    lines = text.splitlines(keepends=True)
    if not lines[last.end_lineno - 1].endswith("\n"):
        lines[last.end_lineno - 1] += "\n"
    lines.insert(last.end_lineno, f"{indent}{line}\n")
    edited = "import random\n" + "".join(lines)
    tree = parse(edited)
    check = _check_function(tree) if tree else None
    if check is None or ast.unparse(check.body[-1]) != line:
        return None
    return edited


def _test_checked(text: str, expected: ast.Module) -> str | None:
    for candidate in (text, ast.unparse(expected) + "\n"):
        if same_tree(candidate, expected):
            return candidate
    return None
