"""Surviving mutants (weak tests): mutants of the reference that the check lets through
although they behave differently from the reference on some input."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from inspector.detect.behaviour import BehaviourVector
from inspector.detect.signals.compare import (
    Difference,
    best_difference,
    differences,
    natural,
    same_inputs,
)


@dataclass(frozen=True)
class Survivor:
    mutant_id: str
    difference: Difference  # left: the reference, right: the mutant
    differing_inputs: int


@dataclass(frozen=True)
class MutationResult:
    survivors: list[Survivor]  # by mutant id (natural order)
    killed: int  # the check failed them
    equivalent: int  # passed the check and behaved like the reference on every input: not counted
    unknown: int  # passed the check but have no behaviour vector: not counted
    survivor_share: float | None  # survivors / (survivors + killed); None when both are 0
    weak: bool  # survivor_share >= threshold (and at least one survivor)
    confidence: float  # P(true share >= threshold) under a uniform prior: Beta(1+s, 1+k)
    explanation: str


def surviving_mutants(
    reference: BehaviourVector,
    mutants: Mapping[str, tuple[bool, BehaviourVector | None]],
    *,
    threshold: float = 0.2,
) -> MutationResult:
    """Mutants the check lets through although they behave differently from the reference.

    `mutants` maps a mutant id to (whether it passed the check, its behaviour vector or None).
    A mutant the check fails is killed. One that passes is a survivor when it differs from the
    reference on some input, and equivalent (never counted, either way) when it does not; one
    that passes without a vector is unknown (not counted). `survivor_share` = survivors /
    (survivors + killed). The confidence is the probability that the true survivor share is at
    least `threshold`, given s survivors and k killed (Beta(1 + s, 1 + k)).
    """
    vectors = [reference] + [vector for _, vector in mutants.values() if vector is not None]
    same_inputs(vectors)
    survivors: list[Survivor] = []
    killed = equivalent = unknown = 0
    for mutant_id in sorted(mutants, key=natural):
        passed, vector = mutants[mutant_id]
        if not passed:
            killed += 1
            continue
        if vector is None:
            unknown += 1
            continue
        positions = differences(reference, vector)
        if not positions:
            equivalent += 1
            continue
        survivors.append(
            Survivor(
                mutant_id=mutant_id,
                difference=best_difference(reference, vector, positions),
                differing_inputs=len(positions),
            )
        )
    counted = len(survivors) + killed
    share = len(survivors) / counted if counted else None
    weak = share is not None and bool(survivors) and share >= threshold
    confidence = _beta_above(threshold, len(survivors), killed) if counted else 0.0
    if share is None:
        explanation = f"no counted mutants ({equivalent} equivalent, {unknown} without behaviour)"
    else:
        explanation = (
            f"{len(survivors)} of {counted} non-equivalent mutants pass the check "
            f"({share:.0%}; {equivalent} equivalent not counted)"
        )
        if survivors:
            first = survivors[0]
            explanation += f"; e.g. {first.mutant_id}: " + first.difference.describe(
                "the reference", "the mutant"
            )
    return MutationResult(
        survivors=survivors,
        killed=killed,
        equivalent=equivalent,
        unknown=unknown,
        survivor_share=share,
        weak=weak,
        confidence=round(confidence, 4),
        explanation=explanation,
    )


def _beta_above(threshold: float, successes: int, failures: int) -> float:
    from scipy.stats import beta  # scikit-learn's own dependency

    return float(beta.sf(threshold, 1 + successes, 1 + failures))
