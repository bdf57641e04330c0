"""Correct variants of a solution: light rewrites of the canonical solution that keep its
behaviour (renamed locals, the returned value held in a variable first, mirrored comparisons,
and their combinations), each checked to parse to the tree it should."""

from __future__ import annotations

import ast
import builtins
import re
from collections.abc import Callable

from bench.planted.editing import (
    WRAPPER,
    body_nodes,
    node_at,
    parse,
    parse_body,
    same_tree,
    unwrapped,
    wrapped,
)


def _names(text: str) -> set[str]:
    return set(re.findall(r"[A-Za-z_]\w*", text))


_RENAMES = {
    "i": "idx",
    "j": "jdx",
    "k": "kdx",
    "x": "item",
    "s": "part",
    "n": "num",
    "c": "ch",
    "res": "result",
    "result": "res",
    "ans": "answer",
    "ret": "out",
    "count": "total",
}
_MIRROR = {ast.Lt: ">", ast.Gt: "<", ast.LtE: ">=", ast.GtE: "<=", ast.Eq: "==", ast.NotEq: "!="}
_MIRROR_NODE = {ast.Lt: ast.Gt, ast.Gt: ast.Lt, ast.LtE: ast.GtE, ast.GtE: ast.LtE}


def renamed(completion: str, prompt: str) -> str | None:
    """The completion with its local variables renamed; None when there is nothing to rename."""
    parsed = parse_body(completion)
    if parsed is None:
        return None
    source, tree, function = parsed
    if any(isinstance(node, ast.Global | ast.Nonlocal) for node in ast.walk(function)):
        return None
    arguments = {node.arg for node in ast.walk(function) if isinstance(node, ast.arg)}
    handlers = {n.name for n in ast.walk(function) if isinstance(n, ast.ExceptHandler) and n.name}
    in_fstrings = {
        inner.id
        for node in ast.walk(function)
        if isinstance(node, ast.JoinedStr)
        for inner in ast.walk(node)
        if isinstance(inner, ast.Name)
    }
    bound = {
        node.id
        for node in ast.walk(function)
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del)
    }
    bound -= arguments | handlers | in_fstrings | _names(prompt)
    if not bound:
        return None
    taken = _names(completion) | _names(prompt) | set(dir(builtins))
    mapping: dict[str, str] = {}
    for name in sorted(bound):
        new = _RENAMES.get(name, f"{name}_value")
        while new in taken:
            new += "_"
        taken.add(new)
        mapping[name] = new
    expected = parse(source.text)
    for node in ast.walk(expected):
        if isinstance(node, ast.Name) and node.id in mapping:
            node.id = mapping[node.id]
    edits = [
        (*source.span(node), mapping[node.id])
        for node in ast.walk(function)
        if isinstance(node, ast.Name) and node.id in mapping
    ]
    return _checked(source.edited(edits), expected)


def returned_via_variable(completion: str, prompt: str) -> str | None:
    """`return EXPR` at the end of the body becomes `result = EXPR` and `return result`."""
    parsed = parse_body(completion)
    if parsed is None:
        return None
    source, tree, function = parsed
    last = function.body[-1]
    if not isinstance(last, ast.Return) or last.value is None:
        return None
    taken = _names(completion) | _names(prompt) | set(dir(builtins))
    name = next(n for n in ("result", "answer", "value", "out", "result_") if n not in taken)
    indent = " " * last.col_offset
    start, end = source.span(last)
    new = f"{name} = {source.segment(last.value)}\n{indent}return {name}"
    expected = parse(source.text)
    wrapper = expected.body[0]
    value = wrapper.body[-1].value
    wrapper.body[-1:] = [
        ast.Assign(targets=[ast.Name(id=name, ctx=ast.Store())], value=value, lineno=0),
        ast.Return(value=ast.Name(id=name, ctx=ast.Load())),
    ]
    return _checked(source.edited([(start, end, new)]), expected)


def mirrored(completion: str, prompt: str) -> str | None:
    """Every single comparison written the other way round (`a < b` as `b > a`)."""
    parsed = parse_body(completion)
    if parsed is None:
        return None
    source, tree, function = parsed
    sites = [
        node
        for node in body_nodes(function)
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _MIRROR
    ]
    if not sites:
        return None
    expected = parse(source.text)
    edits = []
    for node in sites:
        op = type(node.ops[0])
        left, right = node.left, node.comparators[0]
        text = f"{wrapped(source, right)} {_MIRROR[op]} {wrapped(source, left)}"
        edits.append((*source.span(node), text))
        twin = node_at(expected, node)
        twin.left, twin.comparators = twin.comparators[0], [twin.left]
        twin.ops = [_MIRROR_NODE.get(op, op)()]
    return _checked(source.edited(edits), expected)


def _checked(text: str, expected: ast.Module) -> str | None:
    """The edited body if it parses to the expected tree, else the expected tree unparsed."""
    for candidate in (text, WRAPPER + ast.unparse(expected.body[0]).split("\n", 1)[1]):
        if same_tree(candidate, expected):
            return unwrapped(candidate)
    return None


def correct_candidates(task: dict) -> list[str]:
    """Light rewrites of the canonical solution, the canonical first; not yet verified: renamed
    locals (r), the returned value held in a variable (v), mirrored comparisons (m), their
    combinations, and the canonical reformatted (comments dropped)."""
    canonical, prompt = task["canonical_solution"], task["prompt"]
    found = [canonical]

    def step(function: Callable[[str, str], str | None], text: str | None) -> str | None:
        new = None if text is None else function(text, prompt)
        if new is not None and new not in found:
            found.append(new)
        return new if new is not None else text

    r = step(renamed, canonical)
    step(returned_via_variable, canonical)
    m = step(mirrored, canonical)
    step(returned_via_variable, r)
    rm = step(mirrored, r)
    step(returned_via_variable, m)
    step(returned_via_variable, rm)
    parsed = parse_body(canonical)
    if parsed is not None:
        flat = _checked("", parsed[1])
        if flat is not None and flat not in found:
            found.append(flat)
    return found
