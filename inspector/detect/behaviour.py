"""Behaviour vectors: what one solution of a function task returns on a fixed list of inputs.

Every solution of a task (the reference, each sample, each mutant) is called on the same inputs:
the argument lists found in the task's own tests (`inputs_from_tests`) plus type-aware
variations of them (`input_variations`). What it returns, or raises, on each input is its
behaviour vector; comparing vectors is how the signals in `inspector.detect.signals` find weak
tests, ambiguous prompts and wrong references.

Nothing here runs a solution. `behaviour_program` writes a self-contained program that the caller
runs INSIDE the platform's sandbox (`session.run_program(program, limits=...)`, a fork of the
message's session, or `sandbox.run_python(program, limits=...)`, which gives the same); the program
prints one marked JSON line, and `parse_behaviour` reads it back from the run's stdout tail.
Inputs are argument lists written as Python literals ("[1, 2], 3" or "'ab', key=2") and are only
ever read with `ast.literal_eval`, here and inside the program: never `eval`.

What the program records per input (`BehaviourVector.digests`):
- a value: 12 hex characters of the SHA-256 of a canonical text of the result, made so that
  results equal under `==` get the same digest: 1, 1.0 and True alike, dicts and sets in any
  order, floats to 10 significant digits (checks compare floats with a tolerance), -0.0 as 0;
  lists and tuples stay apart ([1] != (1,)); other objects by type and repr, addresses removed;
- `!` and the exception's type name when the call raised (SystemExit included);
- `~timeout` when one call ran over `per_call_seconds`;
- `~skipped` when the program's total budget ran out before the call, or `max_timeouts` calls
  already ran out of time (a solution that hangs costs that many calls, not the whole budget:
  the platform gives the reference 3 and samples and mutants 1), or
  the task's contract refuses the input: unknown, never compared.

The solution runs in the same process as the recording code, so a hostile solution can forge its
own vector (or leave none). That is acceptable for what vectors are used for (grouping samples,
comparing the reference and mutants); a check's verdict never comes from here.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

__all__ = [
    "MARKER",
    "MAX_INPUTS",
    "SKIPPED",
    "TIMEOUT",
    "BehaviourVector",
    "behaviour_inputs",
    "behaviour_program",
    "inputs_from_tests",
    "inputs_key",
    "is_value",
    "literal_source",
    "parse_arguments",
    "parse_behaviour",
    "value_digest",
    "wall_seconds",
]

MARKER = "@@BEHAVIOUR@@"
TIMEOUT = "~timeout"
SKIPPED = "~skipped"
MAX_INPUTS = 200  # per program: keeps the digests (at most ~25 bytes each) under 5 kB
MAX_INPUT_CHARS = 2000  # longer argument lists are left out
MAX_REPRS = 200  # the inputs whose results are also kept as text, as far as they fit
REPR_CHARS = 80
MAX_TIMEOUTS = 3  # behaviour_program's default: timed-out calls, after which the rest are skipped
OUTPUT_BUDGET = 14000  # bytes of the marked line; behaviour runs keep the last 16 KiB of stdout
TAIL_BYTES = 16384
_MAX_LOOP_ITEMS = 50  # elements of one literal loop followed by inputs_from_tests
_MAX_ENVIRONMENTS = 200
_HEX = frozenset("0123456789abcdef")


@dataclass(frozen=True)
class BehaviourVector:
    """One solution's behaviour on one list of inputs (see the module's docstring)."""

    inputs_key: str  # `inputs_key(inputs)`: vectors are comparable only when these match
    digests: tuple[str, ...]  # one per input, in order
    reprs: tuple[str | None, ...]  # same length: the result's repr (or "raised X: msg"), cut to
    # 80 characters, for the first inputs only; None where not kept
    inputs: tuple[str, ...] = ()  # the input texts, when given to `parse_behaviour`
    seconds: float = 0.0  # time spent in the calls
    error: str = ""  # why the solution could not be defined ("SyntaxError: ..."), if it could not

    def input_text(self, index: int) -> str:
        return self.inputs[index] if index < len(self.inputs) else f"input #{index + 1}"


def is_value(digest: str) -> bool:
    """Whether a digest records a returned value (not an exception, timeout or skip)."""
    return len(digest) == 12 and set(digest) <= _HEX


def inputs_key(inputs: Sequence[str]) -> str:
    return hashlib.sha256("\x00".join(inputs).encode("utf-8", "surrogatepass")).hexdigest()[:12]


def wall_seconds(*, per_call_seconds: float = 1.0, total_seconds: float = 10.0) -> float:
    """A sandbox wall-clock limit that lets a behaviour program finish: its total budget, one
    call that started just before the budget ran out, its definition, and interpreter start."""
    return total_seconds + per_call_seconds + max(2.0, per_call_seconds) + 3.0


# --- Literals and argument lists -----------------------------------------------------------------


def literal_source(value: Any) -> str | None:
    """Python source for `value` that `ast.literal_eval` reads back as an equal value, written
    the same way in every process (sets sorted), or None when there is no such source (inf, nan,
    frozenset, objects)."""
    kind = type(value)
    if value is None or kind in (bool, int, str, bytes):
        return repr(value)
    if kind is float:
        return (
            repr(value) if value == value and value not in (float("inf"), float("-inf")) else None
        )
    if kind is complex:
        if literal_source(value.real) is None or literal_source(value.imag) is None:
            return None
        return repr(value)
    if kind in (list, tuple, set):
        parts = []
        for item in value:
            text = literal_source(item)
            if text is None:
                return None
            parts.append(text)
        if kind is list:
            return "[" + ", ".join(parts) + "]"
        if kind is tuple:
            return "(" + parts[0] + ",)" if len(parts) == 1 else "(" + ", ".join(parts) + ")"
        return "{" + ", ".join(sorted(parts)) + "}" if parts else "set()"
    if kind is dict:
        parts = []
        for key, item in value.items():
            key_text, item_text = literal_source(key), literal_source(item)
            if key_text is None or item_text is None:
                return None
            parts.append(f"{key_text}: {item_text}")
        return "{" + ", ".join(parts) + "}"
    return None


def parse_arguments(text: str) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """An input's positional and keyword arguments, read with `ast.literal_eval` only.

    Raises ValueError when the text is not a plain literal argument list."""
    try:
        call = ast.parse(f"_({text})", mode="eval").body
    except (SyntaxError, RecursionError, MemoryError) as exc:
        raise ValueError(f"not an argument list: {exc}") from None
    if not isinstance(call, ast.Call) or any(isinstance(arg, ast.Starred) for arg in call.args):
        raise ValueError("not a plain argument list")
    try:
        args = tuple(ast.literal_eval(arg) for arg in call.args)
        kwargs = {}
        for keyword in call.keywords:
            if keyword.arg is None:
                raise ValueError("** arguments are not literals")
            kwargs[keyword.arg] = ast.literal_eval(keyword.value)
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError) as exc:
        raise ValueError(f"not a literal argument list: {exc}") from None
    return args, kwargs


def _arguments_source(args: Sequence[Any], kwargs: dict[str, Any]) -> str | None:
    parts = []
    for value in args:
        text = literal_source(value)
        if text is None:
            return None
        parts.append(text)
    for name, value in kwargs.items():
        text = literal_source(value)
        if text is None:
            return None
        parts.append(f"{name}={text}")
    joined = ", ".join(parts)
    return joined if len(joined) <= MAX_INPUT_CHARS else None


# --- Inputs found in the tests -------------------------------------------------------------------


def inputs_from_tests(test_source: str, entry_point: str, *, limit: int = 40) -> list[str]:
    """The argument lists the task's tests call the solution with, as literal source text.

    Looks at calls of the check's parameter (`candidate`) and of `entry_point` inside `check`
    (or, without a `check`, anywhere in the tests): in asserts, expressions, comprehensions and
    loops. Names bound to literals (`x = [1, 2]`, module-level constants) and the variables of
    `for` loops and comprehensions over literal lists, tuples, strings, dicts and `range(...)` are
    substituted; arithmetic on literals (`[1] * 3`, `-2 ** 3`) is folded. Arguments that are not
    literals after that (a call of another function, a random value) leave their call out.
    Deduplicated, in the order found, at most `limit`.
    """
    try:
        tree = ast.parse(test_source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    collector = _Collector(entry_point, limit)
    module_env: dict[str, Any] = {}
    for statement in tree.body:
        if isinstance(statement, ast.Assign):
            collector.assign(statement, [module_env])
    check = next(
        (node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == "check"),
        None,
    )
    try:
        if check is not None:
            if check.args.args:
                collector.names.add(check.args.args[0].arg)
            collector.statements(check.body, [dict(module_env)])
        else:
            collector.statements(tree.body, [{}])
    except RecursionError:
        pass
    return collector.found


def call_sites(test_source: str, entry_point: str) -> tuple[int, bool]:
    """How many places in the tests call the solution (the check's parameter or `entry_point`),
    and whether any of them is in a loop or a comprehension (so it may run on many inputs)."""
    try:
        tree = ast.parse(test_source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return 0, False
    names = {entry_point}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "check" and node.args.args:
            names.add(node.args.args[0].arg)
    loops = (ast.For, ast.AsyncFor, ast.While, ast.comprehension, ast.Lambda)
    count, in_loop = 0, False

    def visit(node: ast.AST, looped: bool) -> None:
        nonlocal count, in_loop
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id in names:
                count += 1
                in_loop = in_loop or looped
        inner = looped or isinstance(node, loops)
        if isinstance(node, ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp):
            inner = True
        for child in ast.iter_child_nodes(node):
            visit(child, inner)

    try:
        visit(tree, False)
    except RecursionError:
        return count, True
    return count, in_loop


class _Unknown(Exception):
    pass


class _Collector:
    def __init__(self, entry_point: str, limit: int) -> None:
        self.names = {entry_point}
        self.limit = limit
        self.found: list[str] = []
        self._seen: set[str] = set()

    def full(self) -> bool:
        return len(self.found) >= self.limit

    def statements(self, body: list[ast.stmt], envs: list[dict[str, Any]]) -> None:
        for statement in body:
            if self.full():
                return
            if isinstance(statement, ast.Assign):
                self.expression(statement.value, envs)
                self.assign(statement, envs)
            elif isinstance(statement, ast.AugAssign | ast.AnnAssign):
                if statement.value is not None:
                    self.expression(statement.value, envs)
                self.update(statement, envs)
            elif (
                isinstance(statement, ast.Expr)
                and isinstance(statement.value, ast.Call)
                and isinstance(statement.value.func, ast.Attribute)
                and isinstance(statement.value.func.value, ast.Name)
            ):
                # `xs.append(4)` may change xs: forget it rather than use a stale value.
                self.expression(statement.value, envs)
                for env in envs:
                    env.pop(statement.value.func.value.id, None)
            elif isinstance(statement, ast.For | ast.AsyncFor):
                self.expression(statement.iter, envs)
                inner = self.bind(statement.target, statement.iter, envs)
                self.statements(statement.body, inner)
                self.statements(statement.orelse, envs)
                for env in envs:
                    for name in _target_names(statement.target):
                        env.pop(name, None)
            elif isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                self.statements(statement.body, [dict(env) for env in envs])
            else:
                for _field, value in ast.iter_fields(statement):
                    if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
                        self.statements(value, envs)
                    elif isinstance(value, list):
                        for item in value:
                            if isinstance(item, ast.ExceptHandler):
                                self.statements(item.body, envs)
                            elif isinstance(item, ast.AST):
                                self.expression(item, envs)
                    elif isinstance(value, ast.expr):
                        self.expression(value, envs)

    def assign(self, statement: ast.Assign, envs: list[dict[str, Any]]) -> None:
        names = [name for target in statement.targets for name in _target_names(target)]
        single = len(statement.targets) == 1 and isinstance(statement.targets[0], ast.Name)
        for env in envs:
            if single:
                try:
                    env[names[0]] = _resolve(statement.value, env)
                    continue
                except _Unknown:
                    pass
            for name in names:
                env.pop(name, None)

    def update(self, statement: ast.AugAssign | ast.AnnAssign, envs: list[dict[str, Any]]) -> None:
        target = statement.target
        if not isinstance(target, ast.Name):
            return
        for env in envs:
            try:
                if isinstance(statement, ast.AugAssign):
                    env[target.id] = _fold(
                        statement.op, _resolve(target, env), _resolve(statement.value, env)
                    )
                elif statement.value is not None:
                    env[target.id] = _resolve(statement.value, env)
                else:
                    env.pop(target.id, None)
            except _Unknown:
                env.pop(target.id, None)

    def bind(
        self, target: ast.expr, iterable: ast.expr, envs: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """The environments inside a loop over `iterable`: one per element when it is a literal
        (the loop variable unknown otherwise)."""
        names = _target_names(target)
        inner: list[dict[str, Any]] = []
        for env in envs:
            try:
                items = _iterate(_resolve(iterable, env))
            except _Unknown:
                unknown = dict(env)
                for name in names:
                    unknown.pop(name, None)
                inner.append(unknown)
                continue
            for item in items[:_MAX_LOOP_ITEMS]:
                bound = dict(env)
                try:
                    _unpack(target, item, bound)
                except _Unknown:
                    for name in names:
                        bound.pop(name, None)
                inner.append(bound)
                if len(inner) >= _MAX_ENVIRONMENTS:
                    return inner
        return inner

    def expression(self, node: ast.expr, envs: list[dict[str, Any]]) -> None:
        if self.full():
            return
        if isinstance(node, ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp):
            inner = envs
            for generator in node.generators:
                self.expression(generator.iter, inner)
                inner = self.bind(generator.target, generator.iter, inner)
            parts = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
            for part in parts:
                self.expression(part, inner)
            return
        if isinstance(node, ast.Lambda):
            return
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id in self.names:
                for env in envs:
                    self.call(node, env)
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self.expression(child, envs)
            elif isinstance(child, ast.keyword):
                self.expression(child.value, envs)

    def call(self, node: ast.Call, env: dict[str, Any]) -> None:
        if self.full():
            return
        try:
            args: list[Any] = []
            for arg in node.args:
                if isinstance(arg, ast.Starred):
                    args.extend(_iterate(_resolve(arg.value, env)))
                else:
                    args.append(_resolve(arg, env))
            kwargs = {}
            for keyword in node.keywords:
                if keyword.arg is None:
                    raise _Unknown
                kwargs[keyword.arg] = _resolve(keyword.value, env)
        except _Unknown:
            return
        text = _arguments_source(args, kwargs)
        if text is not None and text not in self._seen:
            self._seen.add(text)
            self.found.append(text)


def _target_names(target: ast.expr) -> list[str]:
    return [node.id for node in ast.walk(target) if isinstance(node, ast.Name)]


def _unpack(target: ast.expr, value: Any, env: dict[str, Any]) -> None:
    if isinstance(target, ast.Name):
        env[target.id] = value
        return
    if isinstance(target, ast.Tuple | ast.List) and not any(
        isinstance(element, ast.Starred) for element in target.elts
    ):
        items = _iterate(value)
        if len(items) != len(target.elts):
            raise _Unknown
        for element, item in zip(target.elts, items, strict=True):
            _unpack(element, item, env)
        return
    raise _Unknown


def _iterate(value: Any) -> list[Any]:
    if isinstance(value, list | tuple | str | dict | range):
        if len(value) > 10_000:
            raise _Unknown
        return list(value)
    if isinstance(value, set):
        return sorted(value, key=lambda item: (type(item).__name__, literal_source(item) or ""))
    raise _Unknown


_SIZE_LIMIT = 10_000  # elements or characters a folded literal may have


def _resolve(node: ast.expr, env: dict[str, Any]) -> Any:
    """The value of a literal expression, with names from `env`; _Unknown otherwise."""
    if isinstance(node, ast.Constant):
        if node.value is Ellipsis:
            raise _Unknown
        return node.value
    if isinstance(node, ast.Name):
        if node.id in env:
            return env[node.id]
        raise _Unknown
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        items: list[Any] = []
        for element in node.elts:
            if isinstance(element, ast.Starred):
                items.extend(_iterate(_resolve(element.value, env)))
            else:
                items.append(_resolve(element, env))
        if isinstance(node, ast.List):
            return items
        if isinstance(node, ast.Tuple):
            return tuple(items)
        try:
            return set(items)
        except TypeError:
            raise _Unknown from None
    if isinstance(node, ast.Dict):
        result = {}
        for key, value in zip(node.keys, node.values, strict=True):
            if key is None:
                raise _Unknown
            try:
                result[_resolve(key, env)] = _resolve(value, env)
            except TypeError:
                raise _Unknown from None
        return result
    if isinstance(node, ast.UnaryOp):
        operand = _resolve(node.operand, env)
        if isinstance(operand, int | float | complex):
            if isinstance(node.op, ast.USub):
                return -operand
            if isinstance(node.op, ast.UAdd):
                return +operand
        raise _Unknown
    if isinstance(node, ast.BinOp):
        return _fold(node.op, _resolve(node.left, env), _resolve(node.right, env))
    if isinstance(node, ast.Subscript):
        container = _resolve(node.value, env)
        if isinstance(node.slice, ast.Slice):
            raise _Unknown
        index = _resolve(node.slice, env)
        try:
            return container[index]
        except (TypeError, KeyError, IndexError):
            raise _Unknown from None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
        args = [_resolve(arg, env) for arg in node.args]
        name = node.func.id
        if name == "range" and 1 <= len(args) <= 3 and all(type(a) is int for a in args):
            produced = range(*args)
            if len(produced) > _SIZE_LIMIT:
                raise _Unknown
            return produced
        if name in ("list", "tuple") and len(args) == 1:
            items = _iterate(args[0])
            return items if name == "list" else tuple(items)
    raise _Unknown


def _fold(op: ast.operator, left: Any, right: Any) -> Any:
    numbers = (int, float)
    if isinstance(op, ast.Add | ast.Sub) and all(type(v) in numbers for v in (left, right)):
        return left + right if isinstance(op, ast.Add) else left - right
    if isinstance(op, ast.Add) and type(left) is type(right) and type(left) in (str, list, tuple):
        if len(left) + len(right) > _SIZE_LIMIT:
            raise _Unknown
        return left + right
    if isinstance(op, ast.Mult):
        if all(type(v) in numbers for v in (left, right)):
            return left * right
        sequence, count = (left, right) if type(right) is int else (right, left)
        if type(count) is int and type(sequence) in (str, list, tuple):
            if len(sequence) * max(count, 0) > _SIZE_LIMIT:
                raise _Unknown
            return sequence * count
    if isinstance(op, ast.Div | ast.FloorDiv | ast.Mod) and all(
        type(v) in numbers for v in (left, right)
    ):
        if right == 0:
            raise _Unknown
        if isinstance(op, ast.Div):
            return left / right
        return left // right if isinstance(op, ast.FloorDiv) else left % right
    if isinstance(op, ast.Pow) and all(type(v) in numbers for v in (left, right)):
        if abs(right) > 64 or (type(left) is int and abs(left) > 2**32):
            raise _Unknown
        try:
            return left**right
        except (OverflowError, ZeroDivisionError):
            raise _Unknown from None
    raise _Unknown


# --- Variations ----------------------------------------------------------------------------------


def inputs_from_prompt(prompt: str, entry_point: str, *, limit: int = 40) -> list[str]:
    """The arguments of the prompt's doctest examples (`>>> entry_point(...)` lines): inputs the
    task's author thought of, whatever the check tries."""
    lines = []
    call = f"{entry_point}("
    for raw in prompt.splitlines():
        text = raw.strip()
        if text.startswith(("def ", "async def ")) or call not in text:
            continue
        # Doctests (`>>> f(1)`) and prose examples (`f(1) ➞ 2`, `f(1) == 2`): the call itself.
        at = text.find(call)
        if at > 0 and (text[at - 1].isalnum() or text[at - 1] in "_."):
            continue
        depth, end = 0, None
        for i in range(at + len(entry_point), len(text)):
            if text[i] in "([{":
                depth += 1
            elif text[i] in ")]}":
                depth -= 1
                if depth == 0:
                    end = i + 1
                    break
        if end is not None:
            lines.append("    " + text[at:end])
    if not lines:
        return []
    try:
        return inputs_from_tests(
            "def check(candidate):\n" + "\n".join(lines) + "\n", entry_point, limit=limit
        )
    except (SyntaxError, ValueError):
        return []


def behaviour_inputs(
    test_source: str,
    entry_point: str,
    *,
    seed: int = 0,
    limit: int = 64,
    from_tests: int = 40,
    prompt: str = "",
    contract: bool = False,
) -> list[str]:
    """The inputs to run a task's solutions on: up to `from_tests` found in its tests, the
    prompt's own examples, then new inputs inside the domain those show
    (`inspector.detect.domain`) up to `limit` in all (at most MAX_INPUTS). With a `contract`
    (which the behaviour program applies), the domain keeps only the arity and the types and
    new inputs are made loosely: the contract decides the rest."""
    from inspector.detect.domain import domain_inputs, infer_domain

    limit = min(limit, MAX_INPUTS)
    found = inputs_from_tests(test_source, entry_point, limit=min(from_tests, limit))
    names: list[str] = []
    if prompt:
        from inspector.detect.examples import parameters, prompt_examples

        names = parameters(prompt, entry_point)
        examples = [example.input for example in prompt_examples(prompt, entry_point)]
        for extra in examples + inputs_from_prompt(prompt, entry_point, limit=limit):
            if extra not in found and len(found) < limit:
                found.append(extra)
    domain = infer_domain(found, prompt, names)
    if contract:
        domain = replace(domain, loose=True)
    return found + domain_inputs(domain, given=found, seed=seed, limit=limit - len(found))


@functools.cache
def _host_canon() -> dict[str, Any]:
    namespace: dict[str, Any] = {}
    exec(_CANON_SOURCE, namespace)  # behaviour_canon.py, the program's own, on literal values
    return namespace


def value_digest(value: Any) -> str:
    """The digest a behaviour program records for a call that returned `value` (a literal)."""
    return _host_canon()["_digest"](value)


# --- The program ---------------------------------------------------------------------------------

_HERE = Path(__file__).resolve().parent
_CANON_SOURCE = (_HERE / "behaviour_canon.py").read_text()
# Runs inside the sandbox (see behaviour_program.py): its constants are written before it.
_PROGRAM_BODY = (_HERE / "behaviour_program.py").read_text().replace("# @@CANON@@\n", _CANON_SOURCE)


@functools.lru_cache(maxsize=16)  # a message holds the programs of a task or two
def _checked_inputs(inputs: tuple[str, ...]) -> tuple[str, str]:
    """The inputs as the program's source writes them, and their key; raises ValueError for
    anything that is not a literal argument list. Cached: a task's programs (its reference,
    samples and mutants) share one list of inputs, and reading it was a fifth of a worker's
    own time."""
    if len(inputs) > MAX_INPUTS:
        raise ValueError(f"{len(inputs)} inputs: at most {MAX_INPUTS} fit in one program's output")
    for text in inputs:
        parse_arguments(text)  # raises ValueError for anything that is not a literal list
    return repr(list(inputs)), inputs_key(inputs)


def behaviour_program(
    prompt: str,
    completion: str,
    entry_point: str,
    inputs: Sequence[str],
    *,
    per_call_seconds: float = 1.0,
    total_seconds: float = 10.0,
    max_timeouts: int = MAX_TIMEOUTS,
    contract: str = "",
) -> str:
    """A self-contained program (standard library only) that defines `prompt + completion`,
    calls `entry_point` on each input and prints one line: `MARKER` and a JSON object. To be run
    in the sandbox with a wall-clock limit of at least `wall_seconds(...)`; read its stdout with
    `parse_behaviour(stdout, inputs)`.

    With a `contract` (statements that raise on an input outside the task's domain, written as
    the body of the entry point, e.g. HumanEval+'s `assert n > 0`), `prompt + contract` is
    defined first, on its own, and every input it refuses is `~skipped`, never compared.

    Each call is guarded: an exception is recorded by its type name, a call over
    `per_call_seconds` as `~timeout` (SIGALRM, which a solution that blocks signals or swallows
    BaseException can defeat: then the sandbox's wall limit ends the run and there is no
    vector); once `total_seconds` have passed, or `max_timeouts` calls have timed out, the
    remaining inputs are `~skipped`. Arguments are deep-copied for each call, so a solution
    that mutates its input does not change the next one. The line stays under `OUTPUT_BUDGET`
    bytes (ASCII): digests for every input, the results' reprs (cut to `REPR_CHARS`) for the
    first `MAX_REPRS` inputs as far as they fit (typically all of them: most results are
    short).
    """
    inputs_text, key = _checked_inputs(tuple(inputs))
    guard = f"{prompt}{contract.rstrip()}\n    return True\n" if contract.strip() else ""
    header = "\n".join(
        [
            "# Behaviour program written by inspector.detect.behaviour",
            f"_SOURCE = {prompt + completion!r}",
            f"_ENTRY_POINT = {entry_point!r}",
            f"_CONTRACT = {guard!r}",
            f"_INPUTS = {inputs_text}",
            f"_KEY = {key!r}",
            f"_MARKER = {MARKER!r}",
            f"_PER_CALL_SECONDS = {float(per_call_seconds)!r}",
            f"_DEFINE_SECONDS = {max(2.0, float(per_call_seconds))!r}",
            f"_TOTAL_SECONDS = {float(total_seconds)!r}",
            f"_MAX_TIMEOUTS = {int(max_timeouts)!r}",
            f"_MAX_REPRS = {MAX_REPRS!r}",
            f"_REPR_CHARS = {REPR_CHARS!r}",
            f"_OUTPUT_BUDGET = {OUTPUT_BUDGET!r}",
        ]
    )
    return header + "\n" + _PROGRAM_BODY


def parse_behaviour(stdout: str, inputs: Sequence[str] | None = None) -> BehaviourVector | None:
    """The vector in a behaviour program's stdout (its last marked line), or None when there is
    none or it is malformed (the program was killed, or the solution ended the process early).

    With `inputs`, the vector must have been made for exactly those inputs (else None), and
    carries them for evidence."""
    at = stdout.rfind(MARKER)
    if at < 0:
        return None
    line = stdout[at + len(MARKER) :].split("\n", 1)[0]
    try:
        report = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(report, dict) or report.get("v") != 1:
        return None
    digests, reprs = report.get("d"), report.get("r")
    key, seconds, error = report.get("key"), report.get("t", 0.0), report.get("e", "")
    if (
        not isinstance(digests, list)
        or not all(isinstance(digest, str) for digest in digests)
        or not isinstance(reprs, list)
        or not all(isinstance(shown, str) for shown in reprs)
        or len(reprs) > len(digests)
        or not isinstance(key, str)
        or not isinstance(seconds, int | float)
        or not isinstance(error, str)
    ):
        return None
    if inputs is not None and (key != inputs_key(inputs) or len(inputs) != len(digests)):
        return None
    return BehaviourVector(
        inputs_key=key,
        digests=tuple(digests),
        reprs=tuple(shown or None for shown in reprs) + (None,) * (len(digests) - len(reprs)),
        inputs=tuple(inputs) if inputs is not None else (),
        seconds=float(seconds),
        error=error,
    )
