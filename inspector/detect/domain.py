"""A function task's input domain, inferred from what the task itself shows, and new inputs that
stay inside it (plain data in, plain data out; nothing here runs a solution).

An input outside the domain (a negative `n` where the prompt says positive, an empty list where
every test and example passes a full one) is no evidence: two solutions that differ there may
both be right. So the behaviour inputs are the tests' own inputs, the prompt's examples, and
mutations of them (`domain_inputs`, type-aware as EvalPlus generates its inputs: seeded,
repeated edits of the seeds) that `Domain.contains` accepts.

What the domain holds, per positional argument (`Shape`, recursive into items, keys and values):
- the types seen (an int is accepted where floats were seen, not the other way round; a bool or
  None only where one was seen);
- for numbers: the bounds the prompt states on the argument or its items (`1 <= n <= 1000`,
  `arr[i] >= 0`); without one, no negatives when none was seen and the prompt never speaks of
  negatives, and no zero when every value seen was positive and the prompt never speaks of zero
  or non-negatives; "integers", "numbers" or "floats" in a prompt that never says positive,
  non-negative or natural admit both for the items of lists, tuples and sets (a single
  argument's sign stays as the tests show it: an "integer n" is often a count); nan and
  infinities never;
- for strings, lists, tuples, dicts and sets: the length bounds the prompt states
  (`len(arr) <= 10`); no empty one when none was seen and the prompt never speaks of an empty
  one (a "non-empty" in the prompt forbids it whatever was seen); for strings, only the kinds of
  characters seen (lower case, upper case, digits, spaces, punctuation, non-ASCII);
- between arguments: the same number of them as every seed, and equal lengths for two sequence
  arguments whose lengths were equal in every seed (and at least two seeds).

With a contract (`Domain.loose`: the task's own statements that refuse an input, run in the
sandbox before each call), only the arity and the types seen are kept here: the contract alone
decides signs, zero, empty values, characters and bounds, and new inputs are made more loosely
(empty and one-item values, negatives, the other case, digits, spaces and punctuation), as
EvalPlus makes its inputs before its contracts filter them.

New inputs start with the seeds' edge cases (`_edge_cases`: one argument at a time made empty,
cut to one item, tied, zero, one, negated, grown tenfold, its first item at an edge), then
mutations; numbers reach ten times the largest magnitude seen.

Inputs are literal argument lists (see `inspector.detect.behaviour.parse_arguments`), read with
`ast.literal_eval` only.
"""

from __future__ import annotations

import random
import re
import string
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Domain", "Shape", "domain_inputs", "infer_domain"]

_NUMBER_TYPES = ("int", "float")
_SIZED = ("str", "list", "tuple", "dict", "set", "bytes")
_MAX_SIZE = 60  # elements or characters a generated value may grow to
_NEGATIVE = re.compile(
    r"(?<![\w-])(?<!non-)(?<!non )negative|less than (?:0|zero)|below zero", re.I
)
# Zero admitted in so many words ("greater than zero" is not one of them).
_ZERO = re.compile(
    r"non-?negative|zero or|or zero|including zero|(?:is|be|are|equals?|to)\s+(?:0|zero)\b",
    re.I,
)
_NON_EMPTY = re.compile(r"non-?empty|not (?:be )?empty", re.I)
_EMPTY = re.compile(r"(?<!non-)(?<!non)(?<!not )(?<!not be )\bempty\b", re.I)


def _kind(value: Any) -> str:
    kind = type(value)
    if value is None:
        return "none"
    if kind in (bool, int, float, str, list, tuple, dict, set, bytes, complex):
        return kind.__name__
    return "other"


def _char_class(char: str) -> str:
    if char in string.ascii_lowercase:
        return "lower"
    if char in string.ascii_uppercase:
        return "upper"
    if char in string.digits:
        return "digit"
    if char in " \t\n":
        return "space"
    if char.isascii():
        return "punct"
    return "other"


@dataclass
class Shape:
    """What the values seen at one place (an argument, the items of a list, ...) look like."""

    types: set[str] = field(default_factory=set)
    count: int = 0
    low: float | None = None
    high: float | None = None
    min_len: int | None = None
    max_len: int | None = None
    chars: set[str] = field(default_factory=set)
    alphabet: set[str] = field(default_factory=set)
    items: Shape | None = None
    values: Shape | None = None  # dict values (items holds the keys)
    ints: set[int] = field(default_factory=set)
    # What the prompt states ("1 <= n <= 1000", "len(arr) <= 10", "arr[i] >= 0"), inclusive.
    stated_low: float | None = None
    stated_high: float | None = None
    stated_len_low: int | None = None
    stated_len_high: int | None = None

    def observe(self, value: Any, depth: int = 0) -> None:
        kind = _kind(value)
        self.types.add(kind)
        self.count += 1
        if kind in _NUMBER_TYPES:
            number = float(value)
            if number == number and abs(number) != float("inf"):
                self.low = number if self.low is None else min(self.low, number)
                self.high = number if self.high is None else max(self.high, number)
            if kind == "int" and len(self.ints) < 50:
                self.ints.add(value)
        if kind in _SIZED:
            size = len(value)
            self.min_len = size if self.min_len is None else min(self.min_len, size)
            self.max_len = size if self.max_len is None else max(self.max_len, size)
        if kind == "str":
            self.chars.update(_char_class(c) for c in value)
            if len(self.alphabet) < 200:
                self.alphabet.update(value[:200])
        if depth > 6:
            return
        if kind in ("list", "tuple", "set"):
            self.items = self.items or Shape()
            for item in list(value)[:200]:
                self.items.observe(item, depth + 1)
        elif kind == "dict":
            self.items, self.values = self.items or Shape(), self.values or Shape()
            for key, item in list(value.items())[:200]:
                self.items.observe(key, depth + 1)
                self.values.observe(item, depth + 1)


@dataclass
class Domain:
    """The inputs a task takes (see the module's docstring)."""

    arity: int | None
    shapes: list[Shape]
    negatives: bool  # the prompt speaks of negative values
    zero: bool  # ... of zero or non-negative values
    empty: bool  # ... of an empty value
    non_empty: bool  # ... says non-empty
    same_length: list[tuple[int, int]]
    signed_items: bool = False  # ... of a list of integers (or numbers), not positive ones
    seeds: list[tuple[Any, ...]] = field(default_factory=list)
    # The task has a contract (run in the sandbox, before each call): it alone decides, so only
    # the arity and the types seen are kept here, and new inputs are made more loosely (signs,
    # zero, empty values, other characters, larger numbers), as EvalPlus makes its own.
    loose: bool = False

    def contains(self, args: Sequence[Any], kwargs: dict[str, Any] | None = None) -> bool:
        if kwargs or self.arity is None or len(args) != self.arity:
            return not kwargs and self.arity is None
        for value, shape in zip(args, self.shapes, strict=True):
            if not self._fits(value, shape, 0):
                return False
        if self.loose:
            return True
        for left, right in self.same_length:
            if len(args[left]) != len(args[right]):
                return False
        return True

    def _fits(self, value: Any, shape: Shape, depth: int) -> bool:
        if shape.count == 0:
            return True  # nothing seen here (the items of lists that were all empty)
        kind = _kind(value)
        if kind not in shape.types and not (kind == "int" and "float" in shape.types):
            return False
        if kind in _NUMBER_TYPES:
            number = float(value)
            if number != number or abs(number) == float("inf"):
                return False
        if self.loose:
            return self._fits_items(value, shape, depth, kind)
        if kind in _NUMBER_TYPES:
            number = float(value)
            if shape.stated_low is not None and number < shape.stated_low:
                return False
            if shape.stated_high is not None and number > shape.stated_high:
                return False
            # The smallest value seen, unless the prompt states a bound (which then rules).
            seen = shape.low if shape.stated_low is None else None
            signed = self.signed_items and depth > 0
            if seen is not None and seen >= 0 and number < 0 and not (self.negatives or signed):
                return False
            if seen is not None and seen > 0 and number == 0 and not (self.zero or signed):
                return False
        if kind in _SIZED:
            size = len(value)
            if shape.stated_len_low is not None and size < shape.stated_len_low:
                return False
            if shape.stated_len_high is not None and size > shape.stated_len_high:
                return False
            seen_empty = shape.min_len == 0
            if size == 0 and (self.non_empty or not (seen_empty or self.empty)):
                return False
        if kind == "str" and any(self._char_outside(c, shape) for c in value):
            return False
        return self._fits_items(value, shape, depth, kind)

    def _fits_items(self, value: Any, shape: Shape, depth: int, kind: str) -> bool:
        if depth > 6:
            return True
        if kind in ("list", "tuple", "set") and shape.items is not None:
            return all(self._fits(item, shape.items, depth + 1) for item in value)
        if kind == "dict" and shape.items is not None and shape.values is not None:
            return all(
                self._fits(key, shape.items, depth + 1)
                and self._fits(item, shape.values, depth + 1)
                for key, item in value.items()
            )
        return True

    def _char_outside(self, char: str, shape: Shape) -> bool:
        return _char_class(char) not in shape.chars

    def contains_text(self, text: str) -> bool:
        from inspector.detect.behaviour import parse_arguments

        try:
            args, kwargs = parse_arguments(text)
        except ValueError:
            return False
        return self.contains(args, kwargs)


_NUMBER = r"(-?\d+(?:\.\d+)?(?:\s*\*\s*10\s*\*\*\s*\d+|e\d+)?)"
_TARGET = r"((?:len\(\s*)?[A-Za-z_]\w*(?:\s*\[\s*\w+\s*\])*\s*\)?)"
_RANGE = re.compile(_NUMBER + r"\s*(<=|<|≤)\s*" + _TARGET + r"\s*(<=|<|≤)\s*" + _NUMBER)
_BOUND = re.compile(r"(?<![\w<>=])" + _TARGET + r"\s*(<=|<|>=|>|≤|≥)\s*" + _NUMBER)
_INTEGERS = re.compile(r"\bintegers?\b|\bnumbers\b|\bfloats?\b", re.I)
_UNSIGNED = re.compile(r"positive|non-?negative|natural", re.I)


def _number(text: str) -> float:
    text = re.sub(r"\s+", "", text)
    if "*10**" in text:
        base, power = text.split("*10**")
        return float(base) * 10 ** int(power)
    return float(text)


def _stated(prompt: str, parameters: Sequence[str], shapes: list[Shape]) -> None:
    """Bounds the prompt states on the parameters, their lengths and their items."""

    def target(text: str) -> tuple[Shape, str] | None:
        text = re.sub(r"\s+", "", text)
        length = text.startswith("len(")
        name = re.match(r"(?:len\()?([A-Za-z_]\w*)", text).group(1)  # type: ignore[union-attr]
        if name not in parameters:
            # An abbreviation of one parameter's name ("num" for `number`).
            named = [p for p in parameters if len(name) >= 1 and p.startswith(name)]
            if len(named) != 1:
                return None
            name = named[0]
        shape: Shape | None = shapes[list(parameters).index(name)]
        for _ in range(text.count("[")):
            shape = shape.items if shape is not None else None
        if shape is None:
            return None
        return shape, "len" if length else "value"

    def bound(found: tuple[Shape, str] | None, low: float | None, high: float | None) -> None:
        if found is None:
            return
        shape, what = found
        if what == "len":
            if low is not None:
                shape.stated_len_low = int(low)
            if high is not None:
                shape.stated_len_high = int(high)
        else:
            if low is not None:
                shape.stated_low = low
            if high is not None:
                shape.stated_high = high

    strict = 1e-9
    covered: list[tuple[int, int]] = []
    for match in _RANGE.finditer(prompt):
        low, op1, name, op2, high = match.groups()
        lo, hi = _number(low), _number(high)
        bound(target(name), lo + (strict if op1 == "<" else 0), hi - (strict if op2 == "<" else 0))
        covered.append(match.span())
    for match in _BOUND.finditer(prompt):
        if any(a <= match.start() < b for a, b in covered):
            continue
        name, op, value = match.groups()
        number = _number(value)
        if op in ("<=", "≤", "<"):
            bound(target(name), None, number - (strict if op == "<" else 0))
        else:
            bound(target(name), number + (strict if op == ">" else 0), None)


def infer_domain(inputs: Sequence[str], prompt: str = "", parameters: Sequence[str] = ()) -> Domain:
    """The domain of a task whose tests and examples call it on `inputs` (argument-list texts)
    and whose instruction is `prompt` (its function's `parameters` name the arguments whose
    bounds the prompt states)."""
    from inspector.detect.behaviour import parse_arguments

    seeds: list[tuple[Any, ...]] = []
    for text in inputs:
        try:
            args, kwargs = parse_arguments(text)
        except ValueError:
            continue
        if not kwargs:
            seeds.append(args)
    arities = {len(args) for args in seeds}
    arity = arities.pop() if len(arities) == 1 else None
    shapes: list[Shape] = []
    same_length: list[tuple[int, int]] = []
    if arity is not None:
        shapes = [Shape() for _ in range(arity)]
        for args in seeds:
            for shape, value in zip(shapes, args, strict=True):
                shape.observe(value)
        if len(seeds) >= 2:
            for left in range(arity):
                for right in range(left + 1, arity):
                    if all(
                        _kind(a[left]) in _SIZED
                        and _kind(a[right]) in _SIZED
                        and len(a[left]) == len(a[right])
                        for a in seeds
                    ):
                        same_length.append((left, right))
    if arity is not None and len(parameters) == arity:
        _stated(prompt, parameters, shapes)
    # "a list of integers": its items are any integers, negative ones and zero included, unless
    # the prompt says positive, non-negative or natural. (A single "integer n" is often a count
    # or a size: its sign stays as the tests show it.)
    signed = bool(_INTEGERS.search(prompt)) and not _UNSIGNED.search(prompt)
    return Domain(
        arity=arity,
        shapes=shapes,
        negatives=bool(_NEGATIVE.search(prompt)),
        zero=bool(_ZERO.search(prompt)),
        signed_items=signed,
        empty=bool(_EMPTY.search(prompt)),
        non_empty=bool(_NON_EMPTY.search(prompt)),
        same_length=same_length,
        seeds=seeds,
    )


# --- Generating inputs inside the domain ---------------------------------------------------------


def domain_inputs(
    domain: Domain, *, given: Sequence[str] = (), seed: int = 0, limit: int = 100
) -> list[str]:
    """Up to `limit` new argument lists inside `domain`, none among `given`: first the edge
    cases of the seeds (one argument at a time made empty, cut to one item, given a tie, zero,
    one, negated, ...: `_edge_values`), up to half of them; then seeded, type-aware mutations of
    the seeds and of the inputs made so far (one to three edits each: numbers moved, negated,
    doubled or halved, or set to another number of the same input or a difference of two;
    strings and lists grown, shrunk, reordered, an item duplicated (ties) or changed; dicts and
    sets grown and shrunk). The inputs made come back smallest first, so that a solution that
    runs out of time on large ones has answered the small ones first."""
    from inspector.detect.behaviour import MAX_INPUT_CHARS, literal_source

    if not domain.seeds or domain.arity in (None, 0) or limit <= 0:
        return []
    rng = random.Random(seed)
    seen = set(given)
    pool: list[tuple[Any, ...]] = list(domain.seeds)
    made: list[str] = []
    sizes: dict[str, float] = {}

    def add(base: list[Any]) -> bool:
        for left, right in domain.same_length:
            base[left], base[right] = _same_size(base[left], base[right])
        if not domain.contains(base):
            return False
        parts = [literal_source(value) for value in base]
        if any(part is None for part in parts):
            return False
        text = ", ".join(parts)  # type: ignore[arg-type]
        if len(text) > MAX_INPUT_CHARS or text in seen:
            return False
        seen.add(text)
        made.append(text)
        sizes[text] = _size(base)
        pool.append(tuple(base))
        return True

    edges = 0
    for base in _edge_cases(domain):
        if edges >= limit // 2:
            break
        edges += add(base)
    attempts = 0
    while len(made) < limit and attempts < limit * 30:
        attempts += 1
        base = list(pool[rng.randrange(len(pool))])
        numbers = _numbers(base)
        for _ in range(rng.choice((1, 1, 1, 2, 3))):
            position = rng.randrange(len(base))
            base[position] = _mutate(
                base[position], domain.shapes[position], domain, rng, 0, numbers
            )
        add(base)
    return sorted(made, key=lambda text: sizes[text])


def _size(value: Any, depth: int = 0) -> float:
    """How large a value is, as a solution's time tends to grow with it: a number's magnitude,
    a sized value's length and its items' sizes."""
    kind = _kind(value)
    if kind in _NUMBER_TYPES:
        return min(abs(float(value)), 1e18)
    if depth > 6:
        return 0.0
    if kind in ("list", "tuple", "set"):
        return len(value) + sum(_size(item, depth + 1) for item in value)
    if kind == "dict":
        return len(value) + sum(_size(k, depth + 1) + _size(v, depth + 1) for k, v in value.items())
    if kind in ("str", "bytes"):
        return float(len(value))
    return 0.0


def _numbers(values: Any, found: list[Any] | None = None, depth: int = 0) -> list[Any]:
    """The ints and floats in an argument list (not bools), up to 50: the numbers a tie or a
    threshold can be made of."""
    found = [] if found is None else found
    if len(found) >= 50 or depth > 4:
        return found
    kind = _kind(values)
    if kind in _NUMBER_TYPES:
        found.append(values)
    elif kind in ("list", "tuple", "set"):
        for item in list(values)[:50]:
            _numbers(item, found, depth + 1)
    elif kind == "dict":
        for item in list(values.values())[:50]:
            _numbers(item, found, depth + 1)
    return found


def _edge_cases(domain: Domain) -> list[list[Any]]:
    """Seeds with one argument replaced by an edge value of its own (`_edge_values`): every
    edge of the first seed's arguments early, each later seed's a few places later (so that
    many seeds do not crowd out the last kinds of edge); an edge value once per argument (an
    empty list with one threshold, not with each)."""
    ranked: list[tuple[int, int, list[Any]]] = []
    done: set[tuple[int, str]] = set()
    for number, args in enumerate(domain.seeds[:8]):
        for position, value in enumerate(args):
            shape = domain.shapes[position]
            for index, edge in enumerate(_edge_values(value, shape, domain.loose)):
                if (position, repr(edge)) in done:
                    continue
                done.add((position, repr(edge)))
                base = list(args)
                base[position] = edge
                ranked.append((index + 4 * number, len(ranked), base))
    return [base for _, _, base in sorted(ranked, key=lambda item: item[:2])]


def _edge_values(value: Any, shape: Shape, loose: bool) -> list[Any]:
    """Where wrong solutions tend to differ from right ones: empty and one-item values, ties,
    zero, one, negatives, other characters, larger numbers (`loose`)."""
    kind = _kind(value)
    if kind == "bool":
        return [not value]
    if kind == "int":
        values = [0, 1, -value, value + 1, value - 1, -1, 2 * value]
        values += [10 * value + 1, 10 ** max(2, len(str(abs(value))) + 1) - 1]
        return values
    if kind == "float":
        return [0.0, -value, float(round(value)), value + 0.5, 1.0]
    if kind == "str":
        values = ["", value[:1], value + value[-1:], value[::-1]]
        if loose:
            values += [value.swapcase(), value.upper(), " " + value, value + " " + value]
            values += [value + "1", value + "!"]
        return values
    if kind in ("list", "tuple"):
        items = list(value)
        made = [[], items[:1], items + items[-1:], items[:1] + items, items[::-1]]
        if items:
            made.append([items[0]] * len(items))
            if shape.items is not None:  # the first item at an edge of its own
                made += [
                    [edge] + items[1:] for edge in _edge_values(items[0], shape.items, loose)[:3]
                ]
        numbers = [item for item in items if _kind(item) in _NUMBER_TYPES]
        if numbers and len(numbers) == len(items):
            made.append([-item for item in items])
            made.append([item + 1 for item in items])
            if "float" in (shape.items.types if shape.items else set()):
                made.append([float(round(item)) for item in items])
        if kind == "tuple":
            return [tuple(each) for each in made]
        return made
    if kind == "dict":
        return [{}]
    if kind == "set":
        return [set()]
    return []


def _same_size(left: Any, right: Any) -> tuple[Any, Any]:
    """Cut the longer of two sequences to the other's length (equal lengths are in the domain)."""
    try:
        size = min(len(left), len(right))
        return left[:size], right[:size]
    except TypeError:
        return left, right


def _new_value(shape: Shape | None, domain: Domain, rng: random.Random) -> Any:
    """A value like those seen at `shape`: one of the seeds' own values, mutated."""
    if shape is None or shape.count == 0:
        return rng.choice((0, 1, 2, 3))
    kind = rng.choice(sorted(shape.types))
    if kind == "int":
        choices = sorted(shape.ints) or [0, 1]
        return _mutate(rng.choice(choices), shape, domain, rng, 3)
    if kind == "float":
        low = shape.low if shape.low is not None else 0.0
        high = shape.high if shape.high is not None else 1.0
        return round(rng.uniform(low, high), 2)
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "none":
        return None
    if kind == "str":
        letters = sorted(shape.alphabet) or list("ab")
        low, high = shape.min_len or 0, max(shape.max_len or 3, 1)
        return "".join(rng.choice(letters) for _ in range(rng.randint(low, min(high, 12))))
    if kind in ("list", "tuple", "set"):
        items = [_new_value(shape.items, domain, rng) for _ in range(rng.randint(1, 4))]
        if kind == "set":
            try:
                return set(items)
            except TypeError:
                return set()
        return items if kind == "list" else tuple(items)
    if kind == "dict":
        try:
            return {
                _new_value(shape.items, domain, rng): _new_value(shape.values, domain, rng)
                for _ in range(rng.randint(1, 3))
            }
        except TypeError:
            return {}
    return 0


def _mutate(
    value: Any,
    shape: Shape,
    domain: Domain,
    rng: random.Random,
    depth: int,
    numbers: Sequence[Any] = (),
) -> Any:
    kind = _kind(value)
    if kind == "bool":
        return not value
    if kind in _NUMBER_TYPES and numbers and rng.random() < 0.2:
        # Another number of the same input, or a difference of two: ties and thresholds.
        other = rng.choice(numbers)
        if rng.random() < 0.5:
            other = abs(other - rng.choice(numbers))
        if kind == "float":
            return float(other)
        if _kind(other) == "int":
            return other
    if kind == "int":
        options = [
            value + 1,
            value - 1,
            -value,
            value * 2,
            value // 2,
            0,
            value + rng.randint(2, 9),
        ]
        if shape.ints:
            options.append(rng.choice(sorted(shape.ints)))
        # Within ten times the largest magnitude seen: wrong solutions fail on larger numbers
        # (a recursion limit, a float where an int is due), but a solution's time grows with
        # them, and a call the behaviour program gives up on is no evidence (the inputs are run
        # smallest first).
        largest = max((abs(i) for i in shape.ints), default=0)
        bound = max(10, 10 * largest)
        options += [value * 10, value * 10 + rng.randint(1, 9), -value - 1]
        low = max(-bound, shape.stated_low if shape.stated_low is not None else -bound)
        high = min(bound, shape.stated_high if shape.stated_high is not None else bound)
        if low > high:
            return value
        return int(max(low, min(high, rng.choice(options))))
    if kind == "float":
        return rng.choice(
            [value * 2, value / 2, -value, value + 0.5, value - 0.5, float(round(value)), value + 1]
        )
    if kind == "str":
        return _mutate_text(value, shape, rng, domain.loose)
    if kind in ("list", "tuple"):
        items = list(value)
        items = _mutate_items(items, shape, domain, rng, depth, numbers)
        return items if kind == "list" else tuple(items)
    if kind == "set":
        items = _mutate_items(sorted(value, key=repr), shape, domain, rng, depth, numbers)
        try:
            return set(items)
        except TypeError:
            return value
    if kind == "dict":
        pairs = list(value.items())
        choice = rng.randrange(3)
        if choice == 0 and pairs:
            pairs.pop(rng.randrange(len(pairs)))
        elif choice == 1 and len(pairs) < _MAX_SIZE:
            pairs.append(
                (_new_value(shape.items, domain, rng), _new_value(shape.values, domain, rng))
            )
        elif pairs:
            at = rng.randrange(len(pairs))
            key, item = pairs[at]
            values = shape.values or Shape()
            pairs[at] = (key, _mutate(item, values, domain, rng, depth + 1) if depth < 3 else item)
        try:
            return dict(pairs)
        except TypeError:
            return value
    return value


def _mutate_text(value: str, shape: Shape, rng: random.Random, loose: bool = False) -> str:
    letters = sorted(shape.alphabet) or list(string.ascii_lowercase)
    if loose:  # other characters too: the other case, a digit, a space, punctuation
        letters = sorted(set(letters) | {c.swapcase() for c in letters} | set(" 1!."))
    choice = rng.randrange(8)
    at = rng.randrange(len(value) + 1)
    if choice == 0 and len(value) < _MAX_SIZE:
        return value[:at] + rng.choice(letters) + value[at:]
    if choice == 1 and value:
        at = min(at, len(value) - 1)
        return value[:at] + value[at + 1 :]
    if choice == 2 and value:
        at = min(at, len(value) - 1)
        return value[:at] + rng.choice(letters) + value[at + 1 :]
    if choice == 3:
        return value[::-1]
    if choice == 4 and len(value) * 2 <= _MAX_SIZE:
        return value + value
    if choice == 5 and value:
        at = min(at, len(value) - 1)
        return value[:at] + value[at].swapcase() + value[at + 1 :]
    if choice == 6 and value:
        return value[: rng.randint(0, len(value))]
    if choice == 7 and len(value) < _MAX_SIZE:
        return value[:at] + value[at : at + 1] * 2 + value[at + 1 :]
    return value + rng.choice(letters)


def _mutate_items(
    items: list[Any],
    shape: Shape,
    domain: Domain,
    rng: random.Random,
    depth: int,
    numbers: Sequence[Any] = (),
) -> list[Any]:
    choice = rng.randrange(9)
    if choice == 0 and items:
        items.pop(rng.randrange(len(items)))
    elif choice == 1 and len(items) < _MAX_SIZE:
        items.insert(rng.randrange(len(items) + 1), _new_value(shape.items, domain, rng))
    elif choice == 2 and items and len(items) < _MAX_SIZE:
        items.insert(rng.randrange(len(items) + 1), items[rng.randrange(len(items))])  # a tie
    elif choice == 3 and len(items) > 1:
        i, j = rng.randrange(len(items)), rng.randrange(len(items))
        items[i], items[j] = items[j], items[i]
    elif choice == 4:
        try:
            items.sort(reverse=rng.random() < 0.5)
        except TypeError:
            items.reverse()
    elif choice == 5 and items and depth < 3 and shape.items is not None:
        at = rng.randrange(len(items))
        items[at] = _mutate(items[at], shape.items, domain, rng, depth + 1, numbers)
    elif choice == 6 and items and len(items) * 2 <= _MAX_SIZE:
        items = items + items[: rng.randint(1, len(items))]
    elif choice == 7 and len(items) > 1:
        items = items[: rng.randint(1, len(items) - 1)]  # down to a single item
    else:
        if len(items) < _MAX_SIZE:
            items.append(_new_value(shape.items, domain, rng))
    return items
