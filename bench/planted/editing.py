"""Editing source without losing its look: `Source` (text with AST positions turned into byte
offsets, and edits on it), parsing helpers, and a completion (the body of the entry point)
parsed inside a wrapper function; shared by the rewrites, the mutations and the check edits."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator


class Source:
    """Text with AST positions (UTF-8 byte columns) turned into offsets, and edits on it."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.data = text.encode()
        self.starts = [0]
        for index, byte in enumerate(self.data):
            if byte == 10:
                self.starts.append(index + 1)

    def span(self, node: ast.AST) -> tuple[int, int]:
        return (
            self.starts[node.lineno - 1] + node.col_offset,
            self.starts[node.end_lineno - 1] + node.end_col_offset,
        )

    def segment(self, node: ast.AST) -> str:
        start, end = self.span(node)
        return self.data[start:end].decode()

    def edited(self, edits: Iterable[tuple[int, int, str]]) -> str:
        data = self.data
        for start, end, new in sorted(edits, reverse=True):
            data = data[:start] + new.encode() + data[end:]
        return data.decode()


def parse(text: str) -> ast.Module | None:
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError):
        return None


def same_tree(text: str, expected: ast.AST) -> bool:
    tree = parse(text)
    return tree is not None and ast.dump(tree) == ast.dump(expected)


def node_at(tree: ast.AST, like: ast.AST) -> ast.AST:
    """The node of `tree` at the position and of the type of `like` (from another parse)."""
    for node in ast.walk(tree):
        if (
            type(node) is type(like)
            and getattr(node, "lineno", None) == like.lineno
            and node.col_offset == like.col_offset
            and node.end_lineno == like.end_lineno
            and node.end_col_offset == like.end_col_offset
        ):
            return node
    raise LookupError("node not found")


WRAPPER = "def __planted__():\n"


def parse_body(completion: str) -> tuple[Source, ast.Module, ast.FunctionDef] | None:
    """A completion (the body of the entry point) parsed inside a wrapper function."""
    source = Source(WRAPPER + completion)
    tree = parse(source.text)
    if tree is None or len(tree.body) != 1 or not isinstance(tree.body[0], ast.FunctionDef):
        return None
    return source, tree, tree.body[0]


def unwrapped(text: str) -> str:
    assert text.startswith(WRAPPER)
    body = text[len(WRAPPER) :]
    return body if body.endswith("\n") else body + "\n"


def body_nodes(function: ast.FunctionDef) -> Iterator[ast.AST]:
    """Nodes of the function's body, outside f-strings and the docstring, in a stable order."""
    skip: set[int] = set()
    for node in ast.walk(function):
        if isinstance(node, ast.JoinedStr):
            skip.update(id(inner) for inner in ast.walk(node))
    body = function.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        skip.update(id(inner) for inner in ast.walk(body[0]))
    for statement in body:
        for node in ast.walk(statement):
            if id(node) not in skip:
                yield node


_LOOSE = (ast.BoolOp, ast.IfExp, ast.Lambda, ast.NamedExpr, ast.Compare, ast.UnaryOp)


def wrapped(source: Source, node: ast.expr) -> str:
    text = source.segment(node)
    return f"({text})" if isinstance(node, _LOOSE) or "\n" in text else text
