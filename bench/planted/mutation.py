"""Wrong variants of a solution: every single mutation of its body (`mutants`): a flipped
comparison or condition, an off-by-one constant, a swapped operator, a changed string constant,
`min` for `max` and the like, each an exact edit of one token or expression."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from bench.planted.editing import Source, body_nodes, parse, parse_body, unwrapped, wrapped

_COMPARE_OPS = {
    ast.Lt: ("<", "<="),
    ast.LtE: ("<=", "<"),
    ast.Gt: (">", ">="),
    ast.GtE: (">=", ">"),
    ast.Eq: ("==", "!="),
    ast.NotEq: ("!=", "=="),
    ast.In: ("in", "not in"),
    ast.NotIn: ("not in", "in"),
}
_BIN_OPS = {
    ast.Add: ("+", "-"),
    ast.Sub: ("-", "+"),
    ast.Mult: ("*", "+"),
    ast.FloorDiv: ("//", "/"),
    ast.Div: ("/", "//"),
    ast.Mod: ("%", "//"),
}
_BOOL_OPS = {ast.And: ("and", "or"), ast.Or: ("or", "and")}
_METHODS = {
    "startswith": "endswith",
    "endswith": "startswith",
    "lower": "upper",
    "upper": "lower",
    "isupper": "islower",
    "islower": "isupper",
    "swapcase": "lower",
}


def _other_string(value: str) -> str | None:
    """A string constant a slip away: '' and ' ' swap, one character changes case or digit,
    a longer one loses its last character."""
    if value in ("", " "):
        return " " if value == "" else ""
    if len(value) == 1:
        if value.isdigit():
            return str((int(value) + 1) % 10)
        if value.isalpha() and value.swapcase() != value:
            return value.swapcase()
        return None
    return value[:-1] if len(value) <= 40 else None


def _token(op: str) -> re.Pattern[bytes]:
    if op.isalpha() or " " in op:
        return re.compile(rb"\b" + re.escape(op.encode()).replace(rb"\ ", rb"\s+") + rb"\b")
    return re.compile(rb"(?<![-+*/%<>=!])" + re.escape(op.encode()) + rb"(?![-+*/%<>=])")


def _gap_edit(source: Source, before: ast.AST, after: ast.AST, old: str, new: str):
    """Replace the operator `old` between two nodes by `new`; None unless it is found once."""
    start = source.span(before)[1]
    end = source.span(after)[0]
    gap = source.data[start:end]
    if b"#" in gap:
        return None
    if old == "in":  # "not in" also contains "in"
        matches = [
            m for m in _token("in").finditer(gap) if not re.search(rb"not\s+$", gap[: m.start()])
        ]
    else:
        matches = list(_token(old).finditer(gap))
    if len(matches) != 1:
        return None
    return (start + matches[0].start(), start + matches[0].end(), new)


@dataclass(frozen=True)
class Mutant:
    completion: str
    description: str


def mutants(completion: str, prompt: str) -> list[Mutant]:
    """Every single mutation of the completion's body, in a stable order (not run): comparison,
    arithmetic and boolean operators swapped, integer constants off by one, booleans, string
    constants and conditions flipped, `len(x)` one less, `min` for `max`, `lower` for `upper`,
    `startswith` for `endswith`. Each is an exact edit of one token or expression."""
    parsed = parse_body(completion)
    if parsed is None:
        return []
    source, _, function = parsed
    local = {
        node.id
        for node in ast.walk(function)
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)
    }
    found: list[Mutant] = []
    seen = {completion}

    def add(edit: tuple[int, int, str] | None, node: ast.AST, what: str) -> None:
        if edit is None:
            return
        text = source.edited([edit])
        body = unwrapped(text)
        if body not in seen and parse(text) is not None:
            seen.add(body)
            found.append(Mutant(body, f"line {node.lineno - 1}: {what}"))

    nodes = list(body_nodes(function))
    conditions = [node.test for node in nodes if isinstance(node, ast.If | ast.IfExp)]
    conditions += [c for node in nodes if isinstance(node, ast.comprehension) for c in node.ifs]
    for condition in conditions:
        edit = (*source.span(condition), f"not ({source.segment(condition)})")
        add(edit, condition, "condition negated")
    for node in nodes:
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            for index, op in enumerate(node.ops):
                if type(op) in _COMPARE_OPS:
                    old, new = _COMPARE_OPS[type(op)]
                    edit = _gap_edit(source, operands[index], operands[index + 1], old, new)
                    add(edit, node, f"`{old}` -> `{new}`")
        elif isinstance(node, ast.BinOp) and type(node.op) in _BIN_OPS:
            old, new = _BIN_OPS[type(node.op)]
            add(_gap_edit(source, node.left, node.right, old, new), node, f"`{old}` -> `{new}`")
        elif isinstance(node, ast.AugAssign) and type(node.op) in (ast.Add, ast.Sub):
            old, new = _BIN_OPS[type(node.op)]
            edit = _gap_edit(source, node.target, node.value, old + "=", new + "=")
            add(edit, node, f"`{old}=` -> `{new}=`")
        elif isinstance(node, ast.BoolOp) and type(node.op) in _BOOL_OPS:
            if len(node.values) == 2:
                old, new = _BOOL_OPS[type(node.op)]
                edit = _gap_edit(source, node.values[0], node.values[1], old, new)
                add(edit, node, f"`{old}` -> `{new}`")
        elif isinstance(node, ast.Constant) and type(node.value) is int:
            for value in (node.value + 1, node.value - 1):
                if 0 <= value < 10**6:
                    add((*source.span(node), str(value)), node, f"{node.value} -> {value}")
        elif isinstance(node, ast.Constant) and type(node.value) is bool:
            edit = (*source.span(node), str(not node.value))
            add(edit, node, f"`{node.value}` -> `{not node.value}`")
        elif isinstance(node, ast.Constant) and type(node.value) is str:
            value = _other_string(node.value)
            if value is not None:
                edit = (*source.span(node), repr(value))
                add(edit, node, f"{node.value!r} -> {value!r}")
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            add((*source.span(node), wrapped(source, node.operand)), node, "`not` dropped")
        elif isinstance(node, ast.Attribute) and node.attr in _METHODS:
            end = source.span(node)[1]
            other = _METHODS[node.attr]
            add((end - len(node.attr), end, other), node, f"`.{node.attr}` -> `.{other}`")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            name = node.func.id
            if name == "len" and name not in local:
                edit = (*source.span(node), f"({source.segment(node)} - 1)")
                add(edit, node, "`len(...)` one less")
        elif isinstance(node, ast.Name) and node.id in ("min", "max") and node.id not in local:
            if isinstance(node.ctx, ast.Load):
                other = "max" if node.id == "min" else "min"
                add((*source.span(node), other), node, f"`{node.id}` -> `{other}`")
    return found
