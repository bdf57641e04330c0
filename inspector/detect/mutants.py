"""Mutants of a function task's reference solution, for mutation testing of its check.

A mutant is the reference with one small change (a swapped operator, a changed constant, a
flipped condition, a dropped statement, an early return). Running the task's own check on each
mutant shows how much of the reference's behaviour the check pins down: a mutant that passes the
check although it behaves differently (see `inspector.detect.behaviour`) is a surviving mutant.

Only the `ast` module is used, and nothing is executed here: every mutant is checked to parse
and compile, never run.

How a mutant's text is made: the change is spliced into the reference's own source text (the
changed node's span is replaced by `ast.unparse` of the changed node, or by `pass`, or a
`return` line is inserted), and the result is parsed again and compared with the changed syntax
tree, so the text is exactly the intended mutant. Everything outside the changed span stays
character for character, so the prompt is untouched and `completion = mutated[len(prompt):]`:
`prompt + mutant.completion` is the mutated function, in the shape of `canonical_solution`.
Only code inside the canonical solution is mutated, never the prompt (a sample could not change
the prompt either).
"""

from __future__ import annotations

import ast
import difflib
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass

__all__ = ["OPERATORS", "Mutant", "generate_mutants"]

# The mutation operators, in the order mutants are listed and picked (round robin).
OPERATORS = ("cmp", "arith", "bool", "const", "flip", "drop", "return")
MAX_CANDIDATES = 2000  # sites examined per solution, so a huge reference stays cheap
MAX_DIFF_LINES = 12
_SHOWN = 60  # characters of code quoted in a description

_CMP_SWAPS: dict[type, type] = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}
_ARITH_SWAPS: dict[type, tuple[type, ...]] = {
    ast.Add: (ast.Sub,),
    ast.Sub: (ast.Add,),
    ast.Mult: (ast.FloorDiv,),
    ast.FloorDiv: (ast.Div, ast.Mult),
    ast.Div: (ast.FloorDiv, ast.Mult),
    ast.Mod: (ast.FloorDiv,),
    ast.Pow: (ast.Mult,),
    ast.LShift: (ast.RShift,),
    ast.RShift: (ast.LShift,),
    ast.BitAnd: (ast.BitOr,),
    ast.BitOr: (ast.BitAnd,),
    ast.BitXor: (ast.BitOr,),
}
_BOOL_SWAPS: dict[type, type] = {ast.And: ast.Or, ast.Or: ast.And}
# Statements never dropped: dropping them only makes a NameError (trivially killed) or breaks
# the function's structure.
_KEPT = (
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
    ast.Import,
    ast.ImportFrom,
    ast.Global,
    ast.Nonlocal,
    ast.Pass,
)
_DEFAULTS_BY_TYPE: dict[str, tuple[object, ...]] = {
    "bool": (False, True),
    "int": (0,),
    "float": (0.0,),
    "str": ("",),
    "list": ([],),
    "List": ([],),
    "tuple": ((),),
    "Tuple": ((),),
    "dict": ({},),
    "Dict": ({},),
}


@dataclass(frozen=True)
class Mutant:
    mutant_id: str  # operator and number, e.g. "cmp-3": stable for the same prompt and solution
    operator: str  # one of OPERATORS
    description: str  # one line, e.g. "line 7: `a < b` → `a <= b`"
    completion: str  # canonical_solution-shaped: prompt + completion is the mutated function
    diff: str  # unified diff against the reference (prompt + canonical_solution), a few lines
    line: int  # 1-based line of the change in prompt + completion


@dataclass
class _Site:
    operator: str
    line: int
    col: int
    apply: Callable[[], None]
    undo: Callable[[], None]
    # Given the tree with the change applied: (start, end, text, parenthesize-able) to splice.
    splice: Callable[[], tuple[int, int, str, bool]]
    describe: Callable[[str], str]  # new text -> description (without "line N: ")


def generate_mutants(
    solution_source: str,
    *,
    prompt: str,
    entry_point: str,
    limit: int = 40,
    seed: int = 0,
) -> list[Mutant]:
    """Up to `limit` distinct mutants of `prompt + solution_source` (the canonical solution).

    Every mutant parses and compiles, differs from the reference's syntax tree and from every
    other mutant's. Ids number all valid mutants of one operator in source order, so a mutant's
    id does not depend on `limit` or `seed`; when there are more than `limit`, a seeded pick takes
    them round robin over the operators. Returns them ordered by operator, then number. An
    empty list when the reference does not parse or nothing in the solution can be mutated.
    """
    if limit <= 0:
        return []
    source = prompt + solution_source
    try:
        tree = ast.parse(source)
        compile(tree, "<reference>", "exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    text = _Text(source)
    reference_dump = ast.dump(tree)
    sites = _Finder(tree, text, len(prompt), entry_point).sites()

    seen = {reference_dump}
    by_operator: dict[str, list[Mutant]] = {name: [] for name in OPERATORS}
    reference_lines = source.splitlines(keepends=True)
    for site in sites[:MAX_CANDIDATES]:
        made = _make(site, tree, source, text, len(prompt))
        if made is None:
            continue
        mutated, dump, new_text = made
        if dump in seen:
            continue
        seen.add(dump)
        found = by_operator[site.operator]
        mutant_id = f"{site.operator}-{len(found) + 1}"
        found.append(
            Mutant(
                mutant_id=mutant_id,
                operator=site.operator,
                description=f"line {site.line}: {site.describe(new_text)}",
                completion=mutated[len(prompt) :],
                diff=_diff(reference_lines, mutated, mutant_id),
                line=site.line,
            )
        )

    if sum(len(found) for found in by_operator.values()) <= limit:
        return [mutant for name in OPERATORS for mutant in by_operator[name]]
    rng = random.Random(seed)
    queues = []
    for name in OPERATORS:
        shuffled = list(by_operator[name])
        rng.shuffle(shuffled)
        queues.append(shuffled)
    chosen: set[str] = set()
    while len(chosen) < limit:
        for queue in queues:
            if queue and len(chosen) < limit:
                chosen.add(queue.pop().mutant_id)
    return [
        mutant for name in OPERATORS for mutant in by_operator[name] if mutant.mutant_id in chosen
    ]


def _make(
    site: _Site, tree: ast.Module, source: str, text: _Text, prompt_chars: int
) -> tuple[str, str, str] | None:
    """(mutated source, its tree's dump, the spliced text), or None if it cannot be made."""
    site.apply()
    try:
        expected = ast.dump(tree)
        start, end, new_text, may_wrap = site.splice()
    except (ValueError, TypeError, AttributeError, RecursionError):
        return None
    finally:
        site.undo()
    if start < prompt_chars:
        return None
    options = [new_text]
    if may_wrap:
        options.append(f"({new_text})")
    for option in options:
        mutated = source[:start] + option + source[end:]
        try:
            parsed = ast.parse(mutated)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        if ast.dump(parsed) != expected:
            continue
        try:
            compile(parsed, "<mutant>", "exec")
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None
        return mutated, expected, option
    return None


def _diff(reference_lines: list[str], mutated: str, mutant_id: str) -> str:
    lines = list(
        difflib.unified_diff(
            [line.rstrip("\n") for line in reference_lines],
            [line.rstrip("\n") for line in mutated.splitlines()],
            "reference",
            mutant_id,
            n=1,
            lineterm="",
        )
    )
    if len(lines) > MAX_DIFF_LINES:
        lines = [*lines[:MAX_DIFF_LINES], "..."]
    return "\n".join(lines)


def _shown(code: str) -> str:
    first = " ".join(code.split())
    if len(first) > _SHOWN:
        first = first[: _SHOWN - 1] + "…"
    return f"`{first}`"


class _Text:
    """Converts the `ast` positions (line, UTF-8 byte column) to offsets into the source."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.lines = source.splitlines(keepends=True)
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line))

    def offset(self, line: int, byte_col: int) -> int:
        text = self.lines[line - 1] if line - 1 < len(self.lines) else ""
        chars = len(text.encode("utf-8", "surrogatepass")[:byte_col].decode("utf-8", "replace"))
        return self.starts[line - 1] + chars

    def span(self, node: ast.AST) -> tuple[int, int]:
        end_line, end_col = node.end_lineno, node.end_col_offset  # type: ignore[attr-defined]
        if end_line is None or end_col is None:
            raise ValueError("node without an end position")
        return self.offset(node.lineno, node.col_offset), self.offset(end_line, end_col)  # type: ignore[attr-defined]

    def segment(self, node: ast.AST) -> str:
        start, end = self.span(node)
        return self.source[start:end]

    def line_start(self, line: int) -> int:
        return self.starts[line - 1]


class _Finder:
    """Walks the tree in source order and lists every mutation site in the solution."""

    def __init__(self, tree: ast.Module, text: _Text, prompt_chars: int, entry_point: str):
        self.tree = tree
        self.text = text
        self.prompt_chars = prompt_chars
        self.entry_point = entry_point
        self.found: list[_Site] = []

    def sites(self) -> list[_Site]:
        self._walk(self.tree, in_fstring=False)
        self._early_returns()
        order = {name: position for position, name in enumerate(OPERATORS)}
        # Stable: source order, and for one position the order the sites were found.
        return sorted(self.found, key=lambda site: (site.line, site.col, order[site.operator]))

    # --- traversal ---------------------------------------------------------------------------

    def _in_solution(self, node: ast.AST) -> bool:
        if not hasattr(node, "lineno") or getattr(node, "end_lineno", None) is None:
            return False
        return self.text.offset(node.lineno, node.col_offset) >= self.prompt_chars  # type: ignore[attr-defined]

    def _walk(self, node: ast.AST, *, in_fstring: bool) -> None:
        if isinstance(node, ast.JoinedStr):
            in_fstring = True  # positions inside f-strings are not reliable before 3.12
        for field, value in ast.iter_fields(node):
            if isinstance(value, list):
                for index, child in enumerate(value):
                    if isinstance(child, ast.AST):
                        if not in_fstring:
                            self._visit(node, field, index, child)
                        self._walk(child, in_fstring=in_fstring)
            elif isinstance(value, ast.AST):
                if not in_fstring:
                    self._visit(node, field, None, value)
                self._walk(value, in_fstring=in_fstring)

    def _visit(self, parent: ast.AST, field: str, index: int | None, node: ast.AST) -> None:
        if isinstance(node, ast.comprehension):  # has no position of its own
            for position, condition in enumerate(node.ifs):
                self._flip(node, "ifs", position, condition)
            return
        if not self._in_solution(node):
            return
        if isinstance(node, ast.Compare):
            self._compare(node)
        elif isinstance(node, ast.BinOp):
            self._binop(node)
        elif isinstance(node, ast.BoolOp):
            self._boolop(node)
        elif isinstance(node, ast.Constant):
            self._constant(parent, field, index, node)
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            self._drop_not(parent, field, index, node)
        if isinstance(node, ast.AugAssign):
            self._augassign(node)
        if isinstance(node, ast.stmt) and index is not None:
            self._drop(parent, field, index, node)
        # Conditions to flip: an if's or a conditional expression's test (and, above, a
        # comprehension's filters).
        if isinstance(node, ast.If | ast.IfExp):
            self._flip(node, "test", None, node.test)

    # --- operators ---------------------------------------------------------------------------

    def _expression_site(
        self,
        operator: str,
        node: ast.AST,
        apply: Callable[[], None],
        undo: Callable[[], None],
        shown_node: Callable[[], ast.AST],
        describe: Callable[[str], str] | None = None,
    ) -> None:
        """A change whose text is `ast.unparse(shown_node())` in place of `node`'s span."""
        old = self.text.segment(node)
        start, end = self.text.span(node)

        def splice() -> tuple[int, int, str, bool]:
            return start, end, ast.unparse(shown_node()), True

        self.found.append(
            _Site(
                operator=operator,
                line=node.lineno,  # type: ignore[attr-defined]
                col=node.col_offset,  # type: ignore[attr-defined]
                apply=apply,
                undo=undo,
                splice=splice,
                describe=describe or (lambda new: f"{_shown(old)} → {_shown(new)}"),
            )
        )

    def _compare(self, node: ast.Compare) -> None:
        for position, op in enumerate(node.ops):
            swapped = _CMP_SWAPS.get(type(op))
            if swapped is None:
                continue

            def apply(node=node, position=position, swapped=swapped) -> None:
                node.ops[position] = swapped()

            def undo(node=node, position=position, op=op) -> None:
                node.ops[position] = op

            self._expression_site("cmp", node, apply, undo, lambda node=node: node)

    def _binop(self, node: ast.BinOp) -> None:
        original = node.op
        for swapped in _ARITH_SWAPS.get(type(original), ()):

            def apply(node=node, swapped=swapped) -> None:
                node.op = swapped()

            def undo(node=node, original=original) -> None:
                node.op = original

            self._expression_site("arith", node, apply, undo, lambda node=node: node)

    def _augassign(self, node: ast.AugAssign) -> None:
        original = node.op
        for swapped in _ARITH_SWAPS.get(type(original), ()):

            def apply(node=node, swapped=swapped) -> None:
                node.op = swapped()

            def undo(node=node, original=original) -> None:
                node.op = original

            old = self.text.segment(node)
            start, end = self.text.span(node)

            def splice(node=node, start=start, end=end) -> tuple[int, int, str, bool]:
                return start, end, ast.unparse(node), False

            self.found.append(
                _Site(
                    operator="arith",
                    line=node.lineno,
                    col=node.col_offset,
                    apply=apply,
                    undo=undo,
                    splice=splice,
                    describe=lambda new, old=old: f"{_shown(old)} → {_shown(new)}",
                )
            )

    def _boolop(self, node: ast.BoolOp) -> None:
        original = node.op
        swapped = _BOOL_SWAPS[type(original)]

        def apply() -> None:
            node.op = swapped()

        def undo() -> None:
            node.op = original

        self._expression_site("bool", node, apply, undo, lambda: node)

    def _constant(self, parent: ast.AST, field: str, index: int | None, node: ast.Constant) -> None:
        value = node.value
        if type(value) is not int:  # not bool, not float, not a string
            return
        for new in dict.fromkeys((value + 1, value - 1, 0)):
            if new == value:
                continue
            # Source text has no negative literals: -1 parses as the negation of 1.
            replacement: ast.expr = (
                ast.Constant(new)
                if new >= 0
                else ast.UnaryOp(op=ast.USub(), operand=ast.Constant(-new))
            )

            def apply(replacement=replacement) -> None:
                _set_child(parent, field, index, replacement)

            def undo() -> None:
                _set_child(parent, field, index, node)

            self._expression_site(
                "const",
                node,
                apply,
                undo,
                lambda replacement=replacement: replacement,
                describe=lambda _new, new=new: f"constant {value} → {new}",
            )

    def _flip(self, parent: ast.AST, field: str, index: int | None, condition: ast.expr) -> None:
        if not self._in_solution(condition):
            return
        flipped = ast.UnaryOp(op=ast.Not(), operand=condition)

        def apply() -> None:
            _set_child(parent, field, index, flipped)

        def undo() -> None:
            _set_child(parent, field, index, condition)

        old = self.text.segment(condition)
        self._expression_site(
            "flip",
            condition,
            apply,
            undo,
            lambda: flipped,
            describe=lambda new: f"condition {_shown(old)} → {_shown(new)}",
        )

    def _drop_not(self, parent: ast.AST, field: str, index: int | None, node: ast.UnaryOp) -> None:
        operand = node.operand

        def apply() -> None:
            _set_child(parent, field, index, operand)

        def undo() -> None:
            _set_child(parent, field, index, node)

        self._expression_site("flip", node, apply, undo, lambda: operand)

    def _drop(self, parent: ast.AST, field: str, index: int, node: ast.stmt) -> None:
        if isinstance(node, _KEPT) or _is_docstring(node):
            return
        if isinstance(node, ast.Return) and _only_return(self.tree, node):
            return
        body = getattr(parent, field)
        replacement = ast.Pass()
        old = self.text.segment(node)
        start, end = self.text.span(node)

        def apply() -> None:
            body[index] = replacement

        def undo() -> None:
            body[index] = node

        self.found.append(
            _Site(
                operator="drop",
                line=node.lineno,
                col=node.col_offset,
                apply=apply,
                undo=undo,
                splice=lambda: (start, end, "pass", False),
                describe=lambda _new: f"dropped {_shown(old)}",
            )
        )

    def _early_returns(self) -> None:
        function = next(
            (
                node
                for node in self.tree.body
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
                and node.name == self.entry_point
            ),
            None,
        )
        if function is None:
            return
        body = function.body
        position = next(
            (
                i
                for i, stmt in enumerate(body)
                if self._in_solution(stmt) and not _is_docstring(stmt)
            ),
            None,
        )
        if position is None:
            return
        first = body[position]
        line_start = self.text.line_start(first.lineno)
        indent = self.text.source[line_start : self.text.offset(first.lineno, first.col_offset)]
        if indent.strip():  # the statement does not start its line
            return
        for value in _defaults(function):
            returned = ast.Return(value=ast.parse(repr(value), mode="eval").body)
            code = ast.unparse(returned)

            def apply(returned=returned) -> None:
                body.insert(position, returned)

            def undo() -> None:
                del body[position]

            def splice(code=code) -> tuple[int, int, str, bool]:
                return line_start, line_start, f"{indent}{code}\n", False

            self.found.append(
                _Site(
                    operator="return",
                    line=first.lineno,
                    col=-1,
                    apply=apply,
                    undo=undo,
                    splice=splice,
                    describe=lambda _new, code=code: f"`{code}` at the top of {self.entry_point}",
                )
            )


def _set_child(parent: ast.AST, field: str, index: int | None, child: ast.AST) -> None:
    if index is None:
        setattr(parent, field, child)
    else:
        getattr(parent, field)[index] = child


def _is_docstring(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


def _only_return(tree: ast.Module, node: ast.Return) -> bool:
    """Whether `node` is the only return statement of the function it belongs to."""
    for function in ast.walk(tree):
        if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            returns = list(_returns_of(function))
            if any(found is node for found in returns):
                return len(returns) == 1
    return False


def _returns_of(function: ast.AST) -> Iterator[ast.Return]:
    """The return statements of `function` itself, not of functions nested in it."""
    stack = list(ast.iter_child_nodes(function))
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Return):
            yield node
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            stack.extend(ast.iter_child_nodes(node))


def _defaults(function: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[object, ...]:
    """What an early return returns: by the return annotation, else by what the reference
    returns, else None."""
    annotation = function.returns
    if isinstance(annotation, ast.Subscript):
        annotation = annotation.value
    if isinstance(annotation, ast.Attribute):
        annotation = ast.Name(id=annotation.attr)
    if isinstance(annotation, ast.Name) and annotation.id in _DEFAULTS_BY_TYPE:
        return _DEFAULTS_BY_TYPE[annotation.id]
    kinds = set()
    for found in _returns_of(function):
        value = found.value
        if isinstance(value, ast.Constant) and isinstance(value.value, bool):
            kinds.add("bool")
        elif isinstance(value, ast.List | ast.ListComp):
            kinds.add("list")
        elif isinstance(value, ast.JoinedStr) or (
            isinstance(value, ast.Constant) and isinstance(value.value, str)
        ):
            kinds.add("str")
        elif isinstance(value, ast.Compare) or (
            isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.Not)
        ):
            kinds.add("bool")
    if len(kinds) == 1:
        return _DEFAULTS_BY_TYPE[kinds.pop()]
    return (None,)
