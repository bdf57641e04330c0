"""Comparing behaviour vectors, shared by the signals that compare a reference with samples or
mutants: where two vectors differ, the one difference a reviewer is shown, the passing samples,
and the natural order of ids and the clipped text the explanations use.

Behaviour vectors come from `inspector.detect.behaviour`. Two digests are compared only where
both are known: `~skipped` never counts, and where the reference timed out, nothing is compared
with it.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from inspector.detect.behaviour import SKIPPED, TIMEOUT, BehaviourVector

_SHOWN = 80


# --- Comparing vectors ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Difference:
    """One input on which two behaviours differ, with what each did there."""

    index: int  # position in the input list
    input: str  # the input's text (or "input #n" when the vectors do not carry the inputs)
    left: str  # what the first returned: a repr, "raised ValueError: ...", "timed out", or a
    right: str  # digest when the repr was not kept

    def describe(self, left_name: str, right_name: str) -> str:
        return (
            f"on input ({clip(self.input)}) {left_name} gives {self.left}, "
            f"{right_name} gives {self.right}"
        )


def outcome_text(vector: BehaviourVector, index: int) -> str:
    shown = vector.reprs[index] if index < len(vector.reprs) else None
    if shown is not None:
        return shown
    digest = vector.digests[index]
    if digest == TIMEOUT:
        return "timed out"
    if digest.startswith("!"):
        return f"raised {digest[1:]}"
    return f"a value not kept as text (digest {digest})"


def same_inputs(vectors: Iterable[BehaviourVector]) -> None:
    keys = {(vector.inputs_key, len(vector.digests)) for vector in vectors}
    if len(keys) > 1:
        raise ValueError("behaviour vectors made on different inputs cannot be compared")


def differences(reference: BehaviourVector, other: BehaviourVector) -> list[int]:
    """Positions where both are known (and the reference did not time out) and they differ
    (beyond float rounding, where both outputs were kept as text)."""
    return [
        index
        for index, (mine, theirs) in enumerate(zip(reference.digests, other.digests, strict=True))
        if mine not in (SKIPPED, TIMEOUT)
        and theirs != SKIPPED
        and mine != theirs
        and not _close_numbers(reference.reprs[index], other.reprs[index])
    ]


def _close_numbers(left: str | None, right: str | None) -> bool:
    """Both texts are numbers (or equal-length lists of numbers) within float rounding: a
    checker compares floats with a tolerance, so such outputs do not differ."""
    if left is None or right is None:
        return False
    try:
        a, b = ast.literal_eval(left), ast.literal_eval(right)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False
    return _numbers_close(a, b)


def _numbers_close(a: Any, b: Any) -> bool:
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_numbers_close(x, y) for x, y in zip(a, b, strict=True))
    numbers = (int, float)
    if type(a) in numbers and type(b) in numbers and (float in (type(a), type(b))):
        return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9)
    return False


def best_difference(
    left: BehaviourVector, right: BehaviourVector, positions: Sequence[int]
) -> Difference:
    """The first of `positions` where both outputs were kept as text, else the first."""
    chosen = next(
        (i for i in positions if left.reprs[i] is not None and right.reprs[i] is not None),
        positions[0],
    )
    return Difference(
        index=chosen,
        input=left.input_text(chosen) if left.inputs else right.input_text(chosen),
        left=outcome_text(left, chosen),
        right=outcome_text(right, chosen),
    )


def passing(
    vectors: Mapping[str, BehaviourVector | None], passed: Mapping[str, float], threshold: float
) -> tuple[list[str], list[BehaviourVector]]:
    """The samples (natural order) with a vector whose pass rate is at least `threshold`, and
    their vectors."""
    ids = [
        key
        for key in sorted(vectors, key=natural)
        if vectors[key] is not None and float(passed.get(key, 0.0)) >= threshold
    ]
    return ids, [vectors[key] for key in ids]  # type: ignore[misc]


# --- Helpers -------------------------------------------------------------------------------------


def natural(key: Any) -> tuple[tuple[int, int | str], ...]:
    return tuple(
        (0, int(part)) if part.isdigit() else (1, part)
        for part in re.split(r"(\d+)", str(key))
        if part
    )


def clip(text: str, limit: int = _SHOWN) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
