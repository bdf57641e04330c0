"""The instruction's own examples, as checks: what the prompt says a call returns (plain data in,
findings out; nothing here runs a solution).

Forms read (`prompt_examples`), each on one line of the prompt:
- doctests: `>>> f(x)` with the expected value on the next line, or `>>> f(x) == y`;
- prose: `f(x) == y`, `f(x) ==> y`, `f(x) => y`, `f(x) -> y`, `f(x) ➞ y`, `f(x) = y`,
  `f(x) returns y`, `f(x) should return y`, `f(x)  # returns y`, `f(x) # => y`;
- an `Input:` line of `name = value` (or `name: value`) pairs naming every parameter, followed
  by an `Output:` line.
The call must be the whole left-hand side (`round(f(x), 2)` is not an example of `f`), its
arguments and the expected value literals (`ast.literal_eval`; `true`/`false` read as
`True`/`False`, a closing full stop dropped). Anything else is not an example: prose that merely
resembles one ("tri(n) = 1 + n / 2") is skipped rather than misread.

`example_contradictions` compares what a solution returned on an example's input (its behaviour
vector) with the example: digests first (`value_digest`, the behaviour program's own
canonical form), then, when the outputs were kept as text, by value with a tolerance for floats
(an example prints a rounded number) and with lists and tuples alike (an author's
`("Venus")` means a one-element tuple). An expected value of a type the solution never
returns on any input is taken for prose about something else, not an example.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from inspector.detect.behaviour import (
    SKIPPED,
    TIMEOUT,
    BehaviourVector,
    is_value,
    literal_source,
    parse_arguments,
    value_digest,
)

__all__ = [
    "Contradiction",
    "Example",
    "example_contradictions",
    "parameters",
    "prompt_examples",
]

_ARROWS = (
    "should return",
    "# returns",
    "# =>",
    "#=>",
    "returns",
    "==>",
    "==",
    "=>",
    "->",
    "➞",
    "→",
    "=",
)
_WORDS = re.compile(r"\b(true|false|none|null)\b")
_WORD_VALUES = {"true": "True", "false": "False", "none": "None", "null": "None"}


@dataclass(frozen=True)
class Example:
    input: str  # the argument list, as behaviour inputs write it
    expected: Any  # the value the prompt says the call returns
    line: str  # the example as written in the prompt
    line_number: int  # 1-based, in the prompt

    @property
    def expected_text(self) -> str:
        return literal_source(self.expected) or repr(self.expected)


@dataclass(frozen=True)
class Contradiction:
    example: Example
    got: str  # what the solution gave: a repr, "raised X", or a digest


def prompt_examples(prompt: str, entry_point: str, *, limit: int = 20) -> list[Example]:
    """The examples the prompt gives of calls of `entry_point` (see the module's docstring)."""
    lines = prompt.splitlines()
    found: list[Example] = []
    seen: set[str] = set()
    for number, raw in enumerate(lines, start=1):
        if len(found) >= limit:
            break
        text = raw.strip()
        if text.startswith(("def ", "async def ")):
            continue
        example = _call_example(text, lines, number, entry_point)
        if example is None:
            example = _input_output_example(lines, number, entry_point, prompt)
        if example is not None and example.input not in seen:
            seen.add(example.input)
            found.append(example)
    return found


def _call_example(text: str, lines: list[str], number: int, entry_point: str) -> Example | None:
    doctest = text.startswith(">>>")
    body = text[3:].strip() if doctest else text
    call = f"{entry_point}("
    at = body.find(call)
    if at < 0:
        return None
    before = body[:at].strip()
    if doctest and before:
        return None  # `>>> round(f(x), 2)`: not a call of f alone
    if before and (before[-1].isalnum() or before[-1] in "_.(,[{"):
        return None  # part of a bigger expression, or another name ending in entry_point
    end = _closing(body, at + len(entry_point))
    if end is None:
        return None
    arguments = body[at + len(call) : end - 1]
    try:
        args, kwargs = parse_arguments(arguments)
    except ValueError:
        return None
    rest = body[end:].strip()
    expected_text = None
    if rest:
        for arrow in _ARROWS:
            if rest.startswith(arrow):
                expected_text = rest[len(arrow) :].strip()
                break
        if expected_text is None:
            expected_text = rest if doctest else None  # `>>> f(x) [0, 1]`, a lost `==`
    elif doctest and number < len(lines):
        following = lines[number].strip()
        if following and not following.startswith(">>>"):
            expected_text = following
    if not expected_text:
        return None
    expected = _literal(expected_text)
    if expected is _MISSING:
        return None
    source = _arguments_text(args, kwargs)
    if source is None:
        return None
    return Example(input=source, expected=expected, line=text, line_number=number)


def _input_output_example(
    lines: list[str], number: int, entry_point: str, prompt: str
) -> Example | None:
    text = lines[number - 1].strip()
    if not text.lower().startswith("input:"):
        return None
    output = next(
        (
            line.strip()
            for line in lines[number : number + 3]
            if line.strip().lower().startswith("output:")
        ),
        None,
    )
    if output is None:
        return None
    names = parameters(prompt, entry_point)
    if not names:
        return None
    values: dict[str, Any] = {}
    pairs = re.split(r",\s*(?=[A-Za-z_]\w*\s*[:=])", text[len("input:") :].strip())
    for pair in pairs:
        match = re.match(r"\s*([A-Za-z_]\w*)\s*[:=]\s*(.+)$", pair)
        if match is None:
            return None
        value = _literal(match.group(2))
        if value is _MISSING:
            return None
        values[match.group(1)] = value
    if set(values) != set(names):
        return None
    expected = _literal(output[len("output:") :].strip())
    if expected is _MISSING:
        return None
    source = _arguments_text(tuple(values[name] for name in names), {})
    if source is None:
        return None
    return Example(input=source, expected=expected, line=f"{text} {output}", line_number=number)


def parameters(prompt: str, entry_point: str) -> list[str]:
    """The names of the entry point's positional parameters, from the prompt's `def`."""
    try:
        tree = ast.parse(prompt + "\n    pass\n")
    except SyntaxError:
        return []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == entry_point:
            return [arg.arg for arg in node.args.args]
    return []


def _closing(text: str, opening: int) -> int | None:
    depth = 0
    quote = None
    for index in range(opening, len(text)):
        char = text[index]
        if quote:
            if char == quote and text[index - 1] != "\\":
                quote = None
            continue
        if char in "'\"":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
            if depth == 0:
                return index + 1
    return None


_MISSING = object()


def _literal(text: str) -> Any:
    text = text.strip()
    candidates = [text]
    if text.endswith("."):
        candidates.append(text[:-1].rstrip())
    for candidate in list(candidates):
        words = _WORDS.sub(lambda m: _WORD_VALUES[m.group(1)], candidate)
        if words != candidate:
            candidates.append(words)
    for candidate in candidates:
        try:
            return ast.literal_eval(candidate)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
    return _MISSING


def _arguments_text(args: Sequence[Any], kwargs: dict[str, Any]) -> str | None:
    parts = [literal_source(value) for value in args]
    parts += [f"{name}={text}" for name, value in kwargs.items() if (text := literal_source(value))]
    if any(part is None for part in parts) or len(parts) != len(args) + len(kwargs):
        return None
    return ", ".join(parts)  # type: ignore[arg-type]


# --- Comparing a solution with the examples ------------------------------------------------------


def _family(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, list | tuple):
        return "sequence"
    return type(value).__name__


def _close(got: Any, expected: Any) -> bool:
    """Equal, with lists and tuples alike, a one-element tuple like its element, and numbers
    within the precision an example prints."""
    if isinstance(got, tuple) and len(got) == 1 and not isinstance(expected, list | tuple):
        got = got[0]
    if isinstance(got, bool) or isinstance(expected, bool):
        return got == expected
    if isinstance(got, int | float) and isinstance(expected, int | float):
        if isinstance(expected, float) or isinstance(got, float):
            return math.isclose(got, expected, rel_tol=1e-6, abs_tol=_printed_tolerance(expected))
        return got == expected
    if isinstance(got, list | tuple) and isinstance(expected, list | tuple):
        return len(got) == len(expected) and all(
            _close(a, b) for a, b in zip(got, expected, strict=True)
        )
    if isinstance(got, dict) and isinstance(expected, dict):
        return got.keys() == expected.keys() and all(_close(got[k], expected[k]) for k in got)
    return got == expected


def _printed_tolerance(expected: float | int) -> float:
    text = repr(expected)
    if "." in text and "e" not in text:
        decimals = len(text.split(".", 1)[1])
        return 0.5 * 10 ** (-decimals) + 1e-12
    return 1e-9


def example_contradictions(
    examples: Sequence[Example], vector: BehaviourVector
) -> list[Contradiction]:
    """The examples that `vector` (a solution's behaviour on inputs that include the examples'
    inputs) contradicts: it raised where the example returns a value, or returned another value.
    Where it timed out, or the input is not in the vector, nothing is said."""
    position = {text: index for index, text in enumerate(vector.inputs)}
    families = set()
    for shown in vector.reprs:
        value = _literal(shown) if shown else _MISSING
        if value is not _MISSING:
            families.add(_family(value))
            if isinstance(value, tuple) and len(value) == 1:
                families.add(_family(value[0]))
    found = []
    for example in examples:
        index = position.get(example.input)
        if index is None:
            continue
        digest = vector.digests[index]
        if digest in (SKIPPED, TIMEOUT) or digest == value_digest(example.expected):
            continue
        if families and _family(example.expected) not in families:
            continue  # the prompt speaks of something else than what the solution returns
        shown = vector.reprs[index]
        if is_value(digest):
            if shown is None:
                continue  # no text to compare within a tolerance: no claim
            got = _literal(shown)
            if got is _MISSING or _close(got, example.expected):
                continue  # a cut or unreadable text: no claim
            found.append(Contradiction(example, shown))
        else:
            found.append(Contradiction(example, shown or f"raised {digest[1:]}"))
    return found
