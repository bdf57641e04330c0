"""Wrong solutions the check accepts: samples that pass every run yet disagree with the
reference (which passes too) on an input inside the task's domain."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from inspector.detect.behaviour import TIMEOUT, BehaviourVector, is_value
from inspector.detect.signals.compare import (
    Difference,
    best_difference,
    differences,
    passing,
    same_inputs,
)


@dataclass(frozen=True)
class AcceptedDisagreement:
    sample_id: str
    model: str
    difference: Difference  # left: the reference, right: the sample
    differing_inputs: int
    # On the difference's input, the other passing samples that give the reference's answer,
    # and those that give this sample's: who is wrong is not decided, but this is what it rests on.
    with_reference: int = 0
    with_sample: int = 0

    @property
    def sides(self) -> str:
        others = self.with_reference + self.with_sample
        if not others:
            return "no other passing sample answers that input alike with either side"
        said = (
            f"of the other passing samples, {self.with_reference} give the reference's answer "
            f"there and {self.with_sample} this sample's"
        )
        if self.with_reference == 0 and self.with_sample >= 1:
            said += " (the reference may be the wrong side: a wrong reference the check accepts)"
        return said


@dataclass(frozen=True)
class AcceptedWrong:
    disagreements: list[AcceptedDisagreement]  # by sample id, natural order
    passing: int  # samples that passed every run, with a vector
    behaviours: int  # distinct ways in which they differ from the reference
    models: tuple[str, ...]  # named models among the disagreeing samples
    confidence: float
    explanation: str


def accepted_disagreements(
    reference: BehaviourVector,
    vectors: Mapping[str, BehaviourVector | None],
    passed: Mapping[str, float],
    *,
    models: Mapping[str, str] | None = None,
) -> AcceptedWrong | None:
    """Samples the check accepts on every run that disagree with the reference (which passes it
    too) on an input: the check lets a wrong solution through, whichever side is wrong.

    Compared only where the reference returned a value and the sample returned another one or
    raised (a timeout is no answer; float outputs within rounding are equal). The inputs are the
    tests', the prompt's examples and mutations of them inside the task's domain, so an input the
    task rules out is not evidence. Confidence grows with the evidence: 0.6 for one sample on one
    input; more for samples that differ in distinct ways (independent mistakes), for two or more
    models, and for differences on several inputs; at most 0.95.
    """
    ids, present = passing(vectors, passed, 1.0)
    same_inputs([reference, *present])
    found: list[AcceptedDisagreement] = []
    patterns: set[tuple[tuple[int, str], ...]] = set()
    for key, vector in zip(ids, present, strict=True):
        positions = [
            index
            for index in differences(reference, vector)
            if is_value(reference.digests[index]) and vector.digests[index] != TIMEOUT
        ]
        if not positions:
            continue
        patterns.add(tuple((index, vector.digests[index]) for index in positions))
        difference = best_difference(reference, vector, positions)
        others = [
            other.digests[difference.index]
            for other_key, other in zip(ids, present, strict=True)
            if other_key != key
        ]
        found.append(
            AcceptedDisagreement(
                sample_id=key,
                model=(models or {}).get(key, ""),
                difference=difference,
                differing_inputs=len(positions),
                with_reference=others.count(reference.digests[difference.index]),
                with_sample=others.count(vector.digests[difference.index]),
            )
        )
    if not found:
        return None
    named = tuple(sorted({d.model for d in found} - {""}))
    widest = max(d.differing_inputs for d in found)
    confidence = min(
        0.95,
        0.6
        + 0.1 * min(len(patterns) - 1, 2)
        + (0.1 if len(named) >= 2 else 0.0)
        + (0.05 if widest >= 2 else 0.0),
    )
    first = found[0]
    explanation = (
        f"{len(found)} of {len(ids)} samples that pass every run disagree with the reference "
        f"on inputs inside the task's domain ({len(patterns)} distinct "
        f"behaviour{'s' if len(patterns) != 1 else ''}"
        + (f", models {', '.join(named)}" if named else "")
        + "): the check accepts both sides, so at least one is a wrong solution it lets "
        f"through; e.g. {first.sample_id}: "
        + first.difference.describe("the reference", first.sample_id)
        + f"; {first.sides}"
    )
    return AcceptedWrong(
        disagreements=found,
        passing=len(ids),
        behaviours=len(patterns),
        models=named,
        confidence=round(confidence, 4),
        explanation=explanation,
    )
