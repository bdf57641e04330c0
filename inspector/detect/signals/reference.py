"""A wrong reference: it behaves unlike a clear majority of the passing samples on some input
(`reference_disagrees`), or runs out of its per-call time on inputs where passing samples
answer (`slow_reference`)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from inspector.detect.behaviour import SKIPPED, TIMEOUT, BehaviourVector, is_value
from inspector.detect.signals.compare import (
    Difference,
    clip,
    natural,
    outcome_text,
    passing,
    same_inputs,
)


@dataclass(frozen=True)
class Disagreement:
    difference: Difference  # left: the reference, right: the majority of the passing samples
    agreeing: tuple[str, ...]  # the samples in that majority
    passing: int  # passing samples with a behaviour vector
    inputs: int  # inputs on which the reference differs from a clear majority
    confidence: float
    explanation: str


def reference_disagrees(
    reference: BehaviourVector,
    vectors: Mapping[str, BehaviourVector | None],
    passed: Mapping[str, float],
    *,
    pass_threshold: float = 0.5,
    majority: float = 2 / 3,
    min_agreeing: int = 3,
    models: Mapping[str, str] | None = None,
    min_models: int = 2,
) -> Disagreement | None:
    """The reference behaves unlike a clear majority of the passing samples on some input.

    Real models share mistakes, so a majority of one model's samples is weak evidence against a
    reference that passes its author's tests: with `models` (sample id -> model name, "" when
    unknown), the majority must come from at least `min_models` named models.

    Passing samples: pass rate >= `pass_threshold`, with a vector. On an input, a clear majority
    is one outcome shared by at least `min_agreeing` of them and at least `majority` of all of
    them; it counts when the reference's outcome (known, not a timeout) differs from the
    majority's (not a timeout either) and at least one
    of the two is a returned value (the reference raising one exception and the samples another
    is two ways of refusing an input outside the domain, not a disagreement). The evidence is the
    input with the strongest majority, preferring one where both returned values.
    Confidence: majority share, times 0.6 when one side raised instead of returning, times 0.75
    when only one input disagrees.
    """
    ids, present = passing(vectors, passed, pass_threshold)
    same_inputs([reference, *present])
    needed = max(min_agreeing, math.ceil(majority * len(ids) - 1e-9))
    if not ids or len(ids) < needed:
        return None
    found: list[tuple[float, bool, int, str]] = []
    for index, mine in enumerate(reference.digests):
        if mine in (SKIPPED, TIMEOUT):
            continue
        counts = Counter(vector.digests[index] for vector in present)
        counts.pop(SKIPPED, None)
        if not counts:
            continue
        top, count = counts.most_common(1)[0]
        # Samples that ran out of time say nothing about what the answer is (a slower rewrite
        # of the reference under load), however many of them.
        if count < needed or top in (mine, TIMEOUT) or not (is_value(mine) or is_value(top)):
            continue
        if models is not None:
            sources = {
                models.get(key, "")
                for key, vector in zip(ids, present, strict=True)
                if vector.digests[index] == top
            } - {""}
            if len(sources) < min_models:
                continue
        found.append((count / len(ids), is_value(mine) and is_value(top), index, top))
    if not found:
        return None
    found.sort(
        key=lambda item: (
            -item[1],
            -item[0],
            reference.reprs[item[2]] is None,
            item[2],
        )
    )
    share, both_values, index, top = found[0]
    agreeing = tuple(
        key for key, vector in zip(ids, present, strict=True) if vector.digests[index] == top
    )
    example = present[ids.index(agreeing[0])]
    difference = Difference(
        index=index,
        input=reference.input_text(index) if reference.inputs else example.input_text(index),
        left=outcome_text(reference, index),
        right=outcome_text(example, index),
    )
    confidence = share * (1.0 if both_values else 0.6) * (1.0 if len(found) > 1 else 0.75)
    named = sorted({models.get(key, "") for key in agreeing} - {""}) if models else []
    explanation = (
        f"the reference differs from {len(agreeing)} of {len(ids)} passing samples"
        + (f" ({len(named)} models: {', '.join(named)})" if named else "")
        + f" on {len(found)} input{'s' if len(found) != 1 else ''} inside the task's domain: "
        + difference.describe("the reference", f"{agreeing[0]} and the majority")
    )
    return Disagreement(
        difference=difference,
        agreeing=agreeing,
        passing=len(ids),
        inputs=len(found),
        confidence=round(confidence, 4),
        explanation=explanation,
    )


@dataclass(frozen=True)
class SlowReference:
    inputs: list[str]  # where the reference ran out of time and samples answered
    answered_by: tuple[str, ...]
    confidence: float
    explanation: str


def slow_reference(
    reference: BehaviourVector,
    vectors: Mapping[str, BehaviourVector | None],
    passed: Mapping[str, float],
    *,
    per_call_seconds: float,
) -> SlowReference | None:
    """The reference runs out of its per-call time on inputs inside the domain where samples
    that pass the check answer: a reference too slow for inputs the task admits."""
    answering = {
        key: vector
        for key, vector in vectors.items()
        if vector is not None and float(passed.get(key, 0.0)) >= 0.5
    }
    same_inputs([reference, *answering.values()])
    positions, who = [], set()
    for index, digest in enumerate(reference.digests):
        if digest != TIMEOUT:
            continue
        answered = [key for key, v in answering.items() if is_value(v.digests[index])]
        if answered:
            positions.append(index)
            who.update(answered)
    if not positions:
        return None
    shown = [reference.input_text(i) for i in positions]
    by = tuple(sorted(who, key=natural))
    return SlowReference(
        inputs=shown,
        answered_by=by,
        confidence=round(min(1.0, 0.5 + 0.1 * len(positions) + 0.1 * len(by)), 4),
        explanation=(
            f"the reference runs out of its {per_call_seconds:g} s a call on "
            f"{len(positions)} input{'s' if len(positions) != 1 else ''} where "
            f"{len(by)} passing sample{'s' if len(by) != 1 else ''} answer, e.g. "
            f"({clip(shown[0])})"
        ),
    )
