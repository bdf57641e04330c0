"""Signals beyond pass and fail, as pure functions over plain data (pandas and scikit-learn; no
database, no sandbox): surviving mutants (weak tests), behaviour groups (an ambiguous prompt), a
reference that disagrees with the passing samples (a wrong reference), learnability (no
learning signal), near-duplicate prompts, an answer leaked in the prompt, and anomalies.

Behaviour vectors come from `inspector.detect.behaviour`. Two digests are compared only where
both are known: `~skipped` never counts, and where the reference timed out, nothing is compared
with it. Every result carries a confidence in [0, 1] and a one-line explanation that names what
a reviewer can check (an input, two outputs, sample ids).
"""

from __future__ import annotations

import ast
import math
import re
from collections import Counter
from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from inspector.detect.behaviour import SKIPPED, TIMEOUT, BehaviourVector, is_value

__all__ = [
    "ACCEPTED",
    "AcceptedDisagreement",
    "AcceptedWrong",
    "REJECTED",
    "AnomalyScore",
    "AnswerLeak",
    "Difference",
    "Disagreement",
    "DuplicatePair",
    "Group",
    "GroupsResult",
    "MutationResult",
    "NoSignal",
    "SlowReference",
    "Survivor",
    "accepted_disagreements",
    "anomalies",
    "answer_leak",
    "learnability",
    "learnability_distribution",
    "near_duplicates",
    "no_signal",
    "reference_disagrees",
    "sample_groups",
    "slow_reference",
    "surviving_mutants",
]

ACCEPTED = 0.75  # a behaviour group whose mean pass rate is at least this is accepted
REJECTED = 0.25  # ... at most this, rejected; in between, mixed
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
            f"on input ({_clip(self.input)}) {left_name} gives {self.left}, "
            f"{right_name} gives {self.right}"
        )


def _outcome_text(vector: BehaviourVector, index: int) -> str:
    shown = vector.reprs[index] if index < len(vector.reprs) else None
    if shown is not None:
        return shown
    digest = vector.digests[index]
    if digest == TIMEOUT:
        return "timed out"
    if digest.startswith("!"):
        return f"raised {digest[1:]}"
    return f"a value not kept as text (digest {digest})"


def _same_inputs(vectors: Iterable[BehaviourVector]) -> None:
    keys = {(vector.inputs_key, len(vector.digests)) for vector in vectors}
    if len(keys) > 1:
        raise ValueError("behaviour vectors made on different inputs cannot be compared")


def _differences(reference: BehaviourVector, other: BehaviourVector) -> list[int]:
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


def _best_difference(
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
        left=_outcome_text(left, chosen),
        right=_outcome_text(right, chosen),
    )


def _passing(
    vectors: Mapping[str, BehaviourVector | None], passed: Mapping[str, float], threshold: float
) -> tuple[list[str], list[BehaviourVector]]:
    """The samples (natural order) with a vector whose pass rate is at least `threshold`, and
    their vectors."""
    ids = [
        key
        for key in sorted(vectors, key=_natural)
        if vectors[key] is not None and float(passed.get(key, 0.0)) >= threshold
    ]
    return ids, [vectors[key] for key in ids]  # type: ignore[misc]


# --- Surviving mutants ---------------------------------------------------------------------------


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
    _same_inputs(vectors)
    survivors: list[Survivor] = []
    killed = equivalent = unknown = 0
    for mutant_id in sorted(mutants, key=_natural):
        passed, vector = mutants[mutant_id]
        if not passed:
            killed += 1
            continue
        if vector is None:
            unknown += 1
            continue
        positions = _differences(reference, vector)
        if not positions:
            equivalent += 1
            continue
        survivors.append(
            Survivor(
                mutant_id=mutant_id,
                difference=_best_difference(reference, vector, positions),
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


# --- Behaviour groups (ambiguous) ----------------------------------------------------------------


@dataclass(frozen=True)
class Group:
    label: int  # 0 for the largest group, then by size
    members: tuple[str, ...]  # sample ids, natural order
    representative: str  # the first member
    pass_rate: float  # mean of the members' pass rates
    verdict: str  # "accepted" (>= ACCEPTED), "rejected" (<= REJECTED) or "mixed"


@dataclass(frozen=True)
class GroupsResult:
    groups: list[Group]  # largest first
    cluster_count: int  # groups of any size, singletons included
    sizeable: int  # groups with at least min_group members and min_share of the samples
    ambiguous: bool
    accepted: Group | None  # the pair behind `ambiguous`
    rejected: Group | None
    difference: Difference | None  # left: the accepted representative, right: the rejected one
    confidence: float
    explanation: str


def sample_groups(
    vectors: Mapping[str, BehaviourVector | None],
    passed: Mapping[str, float],
    *,
    reference: BehaviourVector | None = None,
    min_group: int = 2,
    min_share: float = 0.2,
    tolerance: float = 0.0,
    ruled_out: frozenset[str] | set[str] = frozenset(),
    models: Mapping[str, str] | None = None,
    min_reading: int = 3,
) -> GroupsResult:
    """Groups samples by behaviour and says whether the prompt reads two ways.

    Clustering: complete-linkage agglomerative clustering (scikit-learn) over the share of
    compared inputs on which two samples differ; two samples share a group only when every
    pair in it differs on at most `tolerance` of the inputs (0: identical behaviour). Identical
    vectors always share a group. With `reference`, inputs on which the reference raised or
    timed out are left out: outside the task's domain, differences say nothing about readings.

    Ambiguous when there are a sizeable accepted group A and a sizeable rejected group R
    (sizeable: at least `min_group` members and `min_share` of the samples with a vector;
    accepted: mean pass rate >= ACCEPTED, rejected: <= REJECTED) such that R reads like a
    reading rather than a crash: on every input where A returns a value, R returns one too, and
    R's outputs are not one constant unless A's are. The pair with the highest confidence is
    the evidence.
    Confidence: min(1, 2 * smaller / (|A| + |R|)) * (pass rate of A - pass rate of R).

    A common bug shared by a sizeable share of the samples looks the same as a second reading;
    `ruled_out` names the samples that contradict one of the prompt's own examples: a rejected
    group most of whose members are among them is a mistake, not a reading. A rejected group
    whose members come from one model (or from unnamed ones; `models`: sample id -> model name)
    needs at least `min_reading` members: two samples of one model sharing a behaviour is one
    model's habit, two models sharing it is a reading. Other shared bugs
    the rule cannot tell apart, the reviewer can (the explanation shows both outputs).
    """
    ids = [key for key in sorted(vectors, key=_natural) if vectors[key] is not None]
    ids = [key for key in ids if key in passed]
    if not ids:
        return _no_groups(0, "no samples with a behaviour vector")
    present: list[BehaviourVector] = [vectors[key] for key in ids]  # type: ignore[misc]
    _same_inputs(present + ([reference] if reference is not None else []))
    width = len(present[0].digests)
    columns = list(range(width))
    if reference is not None:
        columns = [i for i in columns if is_value(reference.digests[i])]
    codes, known = _encode(present, columns)

    unique_rows, inverse = _unique_rows(codes, known)
    labels_of_unique = _cluster(codes[unique_rows], known[unique_rows], tolerance)
    labels = labels_of_unique[inverse]

    rates = np.array([float(passed[key]) for key in ids])
    groups: list[Group] = []
    for label in np.unique(labels).tolist():
        members = tuple(ids[i] for i in np.flatnonzero(labels == label))
        rate = float(rates[labels == label].mean())
        verdict = "accepted" if rate >= ACCEPTED else "rejected" if rate <= REJECTED else "mixed"
        groups.append(Group(label, members, members[0], round(rate, 4), verdict))
    groups.sort(key=lambda group: (-len(group.members), _natural(group.representative)))
    groups = [replace(group, label=position) for position, group in enumerate(groups)]
    total = len(ids)
    big = [g for g in groups if len(g.members) >= min_group and len(g.members) >= min_share * total]

    index_of = {key: i for i, key in enumerate(ids)}
    best: tuple[float, Group, Group, list[int]] | None = None
    for accepted in (g for g in big if g.verdict == "accepted"):
        for rejected in (g for g in big if g.verdict == "rejected"):
            if 2 * sum(m in ruled_out for m in rejected.members) > len(rejected.members):
                continue  # the prompt's examples rule this group out: a mistake
            sources = {(models or {}).get(m, "") for m in rejected.members} - {""}
            if len(sources) < 2 and len(rejected.members) < min_reading:
                continue
            a_rows = [index_of[m] for m in accepted.members]
            r_rows = [index_of[m] for m in rejected.members]
            positions = _separating(present, a_rows, r_rows, columns)
            if not positions or not _reads_like_a_reading(present, a_rows, r_rows, columns):
                continue
            smaller = min(len(accepted.members), len(rejected.members))
            balance = min(1.0, 2 * smaller / (len(accepted.members) + len(rejected.members)))
            confidence = balance * (accepted.pass_rate - rejected.pass_rate)
            if best is None or confidence > best[0]:
                best = (confidence, accepted, rejected, positions)

    summary = (
        f"{len(groups)} behaviour group{'s' if len(groups) != 1 else ''} among {total} samples"
    )
    if best is None:
        return GroupsResult(
            groups=groups,
            cluster_count=len(groups),
            sizeable=len(big),
            ambiguous=False,
            accepted=None,
            rejected=None,
            difference=None,
            confidence=0.0,
            explanation=summary + "; no sizeable group the check rejects beside one it accepts",
        )
    confidence, accepted, rejected, positions = best
    a_vector = present[index_of[accepted.representative]]
    r_vector = present[index_of[rejected.representative]]
    difference = _best_difference(a_vector, r_vector, positions)
    explanation = (
        f"{summary}: {len(accepted.members)} like {accepted.representative} pass the check "
        f"{accepted.pass_rate:.0%}, {len(rejected.members)} like {rejected.representative} "
        f"pass {rejected.pass_rate:.0%}; "
        + difference.describe(accepted.representative, rejected.representative)
    )
    return GroupsResult(
        groups=groups,
        cluster_count=len(groups),
        sizeable=len(big),
        ambiguous=True,
        accepted=accepted,
        rejected=rejected,
        difference=difference,
        confidence=round(confidence, 4),
        explanation=explanation,
    )


def _no_groups(count: int, why: str) -> GroupsResult:
    return GroupsResult([], count, 0, False, None, None, None, 0.0, why)


def _encode(vectors: Sequence[BehaviourVector], columns: Sequence[int]) -> tuple[Any, Any]:
    """Integer codes per (sample, input) — equal codes, equal outcome — and a known mask."""
    table = np.array([[v.digests[i] for i in columns] for v in vectors], dtype=object)
    if table.size == 0:
        empty = np.zeros((len(vectors), 0), dtype=np.int64)
        return empty, empty.astype(bool)
    codes = np.empty(table.shape, dtype=np.int64)
    for j in range(table.shape[1]):
        codes[:, j] = pd.factorize(table[:, j])[0]
    return codes, table != SKIPPED


def _unique_rows(codes: Any, known: Any) -> tuple[list[int], Any]:
    """The first row of each distinct vector, and for every row the index of its distinct one."""
    first: dict[tuple[int, ...], int] = {}
    rows: list[int] = []
    inverse = np.empty(codes.shape[0], dtype=np.int64)
    for i in range(codes.shape[0]):
        key = tuple(np.where(known[i], codes[i], -1).tolist())
        if key not in first:
            first[key] = len(rows)
            rows.append(i)
        inverse[i] = first[key]
    return rows, inverse


def _distances(codes: Any, known: Any) -> Any:
    """Share of the inputs known to both on which two rows differ (0 when none is shared);
    in blocks of rows, so memory stays small for many samples."""
    count = codes.shape[0]
    result = np.zeros((count, count))
    for start in range(0, count, 64):
        block_codes, block_known = codes[start : start + 64], known[start : start + 64]
        both = block_known[:, None, :] & known[None, :, :]
        differ = ((block_codes[:, None, :] != codes[None, :, :]) & both).sum(axis=2)
        shared = both.sum(axis=2)
        result[start : start + 64] = np.where(shared > 0, differ / np.maximum(shared, 1), 0.0)
    return result


def _cluster(codes: Any, known: Any, tolerance: float) -> Any:
    count = codes.shape[0]
    if count == 1:
        return np.zeros(1, dtype=np.int64)
    from sklearn.cluster import AgglomerativeClustering

    model = AgglomerativeClustering(
        n_clusters=None,
        metric="precomputed",
        linkage="complete",
        distance_threshold=tolerance + 1e-9,
    )
    return model.fit_predict(_distances(codes, known))


def _consensus(vectors: Sequence[BehaviourVector], rows: Sequence[int], column: int) -> str | None:
    """The outcome every member with a known outcome shares there, or None."""
    seen = {vectors[row].digests[column] for row in rows} - {SKIPPED}
    return seen.pop() if len(seen) == 1 else None


def _separating(
    vectors: Sequence[BehaviourVector],
    a_rows: Sequence[int],
    r_rows: Sequence[int],
    columns: Sequence[int],
) -> list[int]:
    positions = []
    for column in columns:
        mine, theirs = _consensus(vectors, a_rows, column), _consensus(vectors, r_rows, column)
        if mine is not None and theirs is not None and mine != theirs:
            positions.append(column)
    return positions


def _reads_like_a_reading(
    vectors: Sequence[BehaviourVector],
    a_rows: Sequence[int],
    r_rows: Sequence[int],
    columns: Sequence[int],
) -> bool:
    a_values, r_values = [], []
    for column in columns:
        mine, theirs = _consensus(vectors, a_rows, column), _consensus(vectors, r_rows, column)
        if mine is None or theirs is None or not is_value(mine):
            continue
        if not is_value(theirs):
            return False  # the rejected group crashes or hangs where the accepted one answers
        a_values.append(mine)
        r_values.append(theirs)
    if not r_values:
        return False
    return len(set(r_values)) > 1 or len(set(a_values)) == 1


# --- A wrong reference ---------------------------------------------------------------------------


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
    ids, present = _passing(vectors, passed, pass_threshold)
    _same_inputs([reference, *present])
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
        left=_outcome_text(reference, index),
        right=_outcome_text(example, index),
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


# --- Wrong solutions the check accepts ----------------------------------------------------------


@dataclass(frozen=True)
class AcceptedDisagreement:
    sample_id: str
    model: str
    difference: Difference  # left: the reference, right: the sample
    differing_inputs: int


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
    ids, present = _passing(vectors, passed, 1.0)
    _same_inputs([reference, *present])
    found: list[AcceptedDisagreement] = []
    patterns: set[tuple[tuple[int, str], ...]] = set()
    for key, vector in zip(ids, present, strict=True):
        positions = [
            index
            for index in _differences(reference, vector)
            if is_value(reference.digests[index]) and vector.digests[index] != TIMEOUT
        ]
        if not positions:
            continue
        patterns.add(tuple((index, vector.digests[index]) for index in positions))
        found.append(
            AcceptedDisagreement(
                sample_id=key,
                model=(models or {}).get(key, ""),
                difference=_best_difference(reference, vector, positions),
                differing_inputs=len(positions),
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
    )
    return AcceptedWrong(
        disagreements=found,
        passing=len(ids),
        behaviours=len(patterns),
        models=named,
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
    _same_inputs([reference, *answering.values()])
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
    by = tuple(sorted(who, key=_natural))
    return SlowReference(
        inputs=shown,
        answered_by=by,
        confidence=round(min(1.0, 0.5 + 0.1 * len(positions) + 0.1 * len(by)), 4),
        explanation=(
            f"the reference runs out of its {per_call_seconds:g} s a call on "
            f"{len(positions)} input{'s' if len(positions) != 1 else ''} where "
            f"{len(by)} passing sample{'s' if len(by) != 1 else ''} answer, e.g. "
            f"({_clip(shown[0])})"
        ),
    )


# --- Learning signal -----------------------------------------------------------------------------


def learnability(p: float | None) -> float | None:
    """p(1 - p) for a sample pass rate p: the variance of a pass/fail reward, 0 when every
    rollout gets the same reward (a group-relative policy gradient then learns nothing)."""
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return None
    return float(p) * (1.0 - float(p))


def learnability_distribution(pass_rates: Iterable[float | None]) -> dict[str, Any]:
    """A task set's learnability: count, mean, quartiles, the share with none, and a histogram
    over [0, 0.25] (the maximum, at p = 0.5) in five bins."""
    values = np.array([v for v in map(learnability, pass_rates) if v is not None], dtype=float)
    if values.size == 0:
        return {"tasks": 0, "mean": None, "quartiles": None, "zero_share": None, "histogram": []}
    edges = np.linspace(0.0, 0.25, 6)
    counts, _ = np.histogram(values, bins=edges)
    return {
        "tasks": int(values.size),
        "mean": round(float(values.mean()), 4),
        "quartiles": [round(float(q), 4) for q in np.quantile(values, [0.25, 0.5, 0.75])],
        "zero_share": round(float((values == 0).mean()), 4),
        "histogram": [
            {"from": round(float(lo), 4), "to": round(float(hi), 4), "tasks": int(count)}
            for lo, hi, count in zip(edges[:-1], edges[1:], counts, strict=True)
        ],
    }


@dataclass(frozen=True)
class NoSignal:
    outcome: str  # "pass" or "fail": what every sample did
    samples: int
    confidence: float  # 1 - 2 * 0.5**n: how unlikely one outcome would be at p = 0.5
    explanation: str


def no_signal(
    sample_outcomes: Mapping[Any, float | bool] | Iterable[float | bool], *, min_samples: int = 2
) -> NoSignal | None:
    """Every sample shares one outcome: all passed every run (rate 1) or all failed every run
    (rate 0), with at least `min_samples` samples. Takes pass rates (or booleans), as a mapping
    from sample id or as a plain iterable. A sample that both passed and failed gives signal."""
    values = list(
        sample_outcomes.values() if isinstance(sample_outcomes, Mapping) else sample_outcomes
    )
    rates = [float(value) for value in values if value is not None]
    if len(rates) < max(min_samples, 1):
        return None
    if all(rate == 1.0 for rate in rates):
        outcome = "pass"
    elif all(rate == 0.0 for rate in rates):
        outcome = "fail"
    else:
        return None
    count = len(rates)
    return NoSignal(
        outcome=outcome,
        samples=count,
        confidence=round(1.0 - 2 * 0.5**count, 4),
        explanation=(
            f"all {count} samples {'pass' if outcome == 'pass' else 'fail'} on every run: "
            "learnability p(1-p) = 0, a group-relative policy gradient learns nothing here"
        ),
    )


# --- Duplicates and leaks ------------------------------------------------------------------------


class DuplicatePair(NamedTuple):
    key_a: Hashable
    key_b: Hashable
    similarity: float  # TF-IDF cosine, rounded to 4 places

    @property
    def confidence(self) -> float:
        # 0.5 at the default threshold 0.9, 1.0 for identical prompts.
        return round(min(1.0, max(0.0, 0.5 + 5.0 * (self.similarity - 0.9))), 4)

    @property
    def explanation(self) -> str:
        return f"prompts of {self.key_a} and {self.key_b} are {self.similarity:.0%} alike (TF-IDF cosine)"


def near_duplicates(
    prompts: Mapping[Hashable, str],
    *,
    threshold: float = 0.9,
    max_pairs: int = 10_000,
    chunk_rows: int = 1024,
) -> list[DuplicatePair]:
    """Pairs of prompts whose TF-IDF vectors (words, sublinear tf, unit length; bigrams would
    cost seven times the time for little gain at a 0.9 threshold) have a cosine similarity of at least `threshold`: most similar first, then by
    position in `prompts`; at most `max_pairs`. Empty prompts are left out. Keys may be anything
    hashable, e.g. (taskset, task_id) to look across task sets.

    Exact, and sparse all the way (all-pairs prefix filtering): the features of each prompt are
    ordered from the most common to the rarest, and the longest run of common ones that cannot
    reach `threshold` on their own is left out of a candidate index (their contribution to a
    cosine is at most min(sum of weight x the feature's largest weight anywhere, the norm of
    those weights)). Two prompts at or over the threshold must share their rarest common
    feature in both indexes, so the sparse product of the index with itself, in chunks of
    `chunk_rows` rows, finds every such pair among far fewer candidates than n², and each
    candidate's cosine is then computed exactly (or, for a chunk with candidates nearly
    everywhere, the chunk's full sparse product is). No dense n x n matrix is ever made.
    """
    from sklearn.feature_extraction.text import TfidfVectorizer

    keys = [key for key, text in prompts.items() if isinstance(text, str) and text.strip()]
    if len(keys) < 2:
        return []
    vectorizer = TfidfVectorizer(token_pattern=r"(?u)\b\w+\b", sublinear_tf=True, dtype=np.float64)
    try:
        matrix = vectorizer.fit_transform([prompts[key] for key in keys]).tocsr()
    except ValueError:  # no words at all
        return []
    matrix.sort_indices()
    index = _prefix_index(matrix, threshold)
    index_t = index.T.tocsr()
    matrix_t = None
    found_rows: list[Any] = []
    found_cols: list[Any] = []
    found_sims: list[Any] = []
    for start in range(0, matrix.shape[0], chunk_rows):
        block = (index[start : start + chunk_rows] @ index_t).tocoo()
        rows = block.row.astype(np.int64) + start
        keep = block.col > rows
        rows, cols = rows[keep], block.col[keep].astype(np.int64)
        if len(rows) > 64 * chunk_rows:
            # Candidates nearly everywhere (a vocabulary without rare words): the chunk's full
            # product is cheaper than looking each candidate up.
            if matrix_t is None:
                matrix_t = matrix.T.tocsr()
            full = (matrix[start : start + chunk_rows] @ matrix_t).tocoo()
            rows = full.row.astype(np.int64) + start
            keep = full.col > rows
            rows, cols, sims = rows[keep], full.col[keep].astype(np.int64), full.data[keep]
        else:
            sims = np.empty(len(rows))
            for at in range(0, len(rows), 200_000):
                left = matrix[rows[at : at + 200_000]]
                right = matrix[cols[at : at + 200_000]]
                sims[at : at + 200_000] = np.asarray(left.multiply(right).sum(axis=1)).ravel()
        keep = sims >= threshold - 1e-9
        found_rows.append(rows[keep])
        found_cols.append(cols[keep])
        found_sims.append(np.minimum(sims[keep], 1.0))
    rows = np.concatenate(found_rows)
    cols = np.concatenate(found_cols)
    sims = np.concatenate(found_sims)
    order = np.lexsort((cols, rows, -np.round(sims, 6)))[:max_pairs]
    return [
        DuplicatePair(keys[rows[i]], keys[cols[i]], round(float(sims[i]), 4))
        for i in order.tolist()
    ]


def _prefix_index(matrix: Any, threshold: float) -> Any:
    """`matrix` without, in each row, the longest run of its most common features whose
    contribution to any cosine is bounded below `threshold` (see `near_duplicates`)."""
    from scipy import sparse

    counts = np.diff(matrix.indptr)
    rows = np.repeat(np.arange(matrix.shape[0]), counts)
    features = matrix.indices
    df = np.bincount(features, minlength=matrix.shape[1])
    largest = matrix.max(axis=0).toarray().ravel()
    # Within each row: most common feature first (ties by feature number, for determinism).
    order = np.lexsort((features, -df[features], rows))
    data, features, rows = matrix.data[order], features[order], rows[order]
    starts = matrix.indptr[:-1]

    def running(values: Any) -> Any:
        total = np.cumsum(values)
        before = np.concatenate(([0.0], total))[starts]
        return total - np.repeat(before, counts)

    bound = np.minimum(running(data * largest[features]), np.sqrt(running(data * data)))
    keep = bound >= threshold - 1e-6
    return sparse.csr_matrix((data[keep], (rows[keep], features[keep])), shape=matrix.shape)


@dataclass(frozen=True)
class AnswerLeak:
    line: str  # the longest reference line found in the prompt (whitespace collapsed)
    lines: int  # distinctive reference lines found in the prompt
    distinctive: int  # distinctive lines the reference has
    confidence: float  # 0.5 + 0.5 * lines / distinctive
    explanation: str

    def __str__(self) -> str:
        return self.line


MIN_LEAK_CHARS = 20
_CONTROL = ("for ", "async for ", "while ", "if ", "elif ", "else", "try", "except", "with ")
_OPERATOR = re.compile(r"[-+*/%<>=!&|^~]|\b(and|or|not|is)\b")
_STRING = re.compile(r"""(['"])((?:\\.|(?!\1).){5,})\1""")


def _distinctive(line: str) -> bool:
    if len(line) < MIN_LEAK_CHARS or line.startswith(
        ("#", "def ", "class ", "import ", "from ", "@")
    ):
        return False
    if line.startswith(('"""', "'''", 'r"""', "r'''")):
        return False
    if _STRING.search(line):
        return True
    # A loop or branch header that only names things (`for i, x in enumerate(xs):`) says how to
    # walk the input, not what to compute.
    return not (line.startswith(_CONTROL) and not _OPERATOR.search(line))


def answer_leak(prompt: str, reference: str) -> AnswerLeak | None:
    """A distinctive line of the reference that appears word for word in the prompt (both with
    whitespace collapsed). Distinctive: at least 20 characters; not a comment, decorator, def,
    class, import or docstring; and not a loop or branch header without an operator or a string
    literal (`for i, x in enumerate(xs):` is not distinctive, `if abs(a - b) < threshold:` is).
    Confidence: 0.5 + 0.5 x the share of the distinctive lines that leaked."""
    flat_prompt = " ".join(prompt.split())
    if not flat_prompt:
        return None
    lines = list(dict.fromkeys(" ".join(raw.split()) for raw in reference.splitlines()))
    distinctive = [line for line in lines if _distinctive(line)]
    leaked = [line for line in distinctive if line in flat_prompt]
    if not leaked:
        return None
    longest = max(leaked, key=len)
    return AnswerLeak(
        line=longest,
        lines=len(leaked),
        distinctive=len(distinctive),
        confidence=round(0.5 + 0.5 * len(leaked) / len(distinctive), 4),
        explanation=(
            f"the prompt contains {len(leaked)} of the reference's {len(distinctive)} distinctive "
            f"line{'s' if len(distinctive) != 1 else ''} word for word, e.g. {_clip(longest)}"
        ),
    )


# --- Anomalies -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class AnomalyScore:
    """Unpacks as (score, features)."""

    score: float  # IsolationForest anomaly score in (0, 1]: about 0.5 is ordinary, near 1 odd
    features: list[str]  # the strongest features, by robust z-score, strongest first
    zscores: dict[str, float]  # robust z-score of each named feature
    values: dict[str, float]  # the task's value of each named feature

    def __iter__(self) -> Iterator[Any]:
        return iter((self.score, self.features))

    @property
    def confidence(self) -> float:
        """0 at the ordinary score 0.5, 1 from 0.8 up."""
        return round(min(1.0, max(0.0, (self.score - 0.5) / 0.3)), 4)

    @property
    def explanation(self) -> str:
        parts = [
            f"{name}={_number(self.values.get(name))} (robust z {self.zscores.get(name, 0):+.1f})"
            for name in self.features
        ]
        return f"unusual task (isolation score {self.score:.2f}): " + ", ".join(parts)


MIN_ANOMALY_ROWS = 10


ANOMALY_SECONDS_FLOOR = 0.5  # seconds: below this, durations differ by jitter
ANOMALY_VALUE_FLOOR = 0.05  # rates and shares


def anomalies(
    features: pd.DataFrame,
    *,
    contamination: float | str = "auto",
    seed: int = 0,
    top: int = 3,
) -> dict[Hashable, AnomalyScore]:
    """Tasks an IsolationForest (200 trees, seeded) isolates as outliers, keyed by the frame's
    index (one row per task; numeric columns such as pass rates, flake rate, survivor share,
    cluster count, durations; missing values take the column's median; constant columns are
    dropped). Each outlier names up to `top` features with the largest robust z-score
    |x - median| / (1.4826 * MAD) (the mean absolute deviation when the MAD is 0, and never less
    than a floor: ANOMALY_SECONDS_FLOOR for durations, ANOMALY_VALUE_FLOOR otherwise; capped at
    99) of at least 2; an outlier with no such feature is not reported. Fewer than
    MIN_ANOMALY_ROWS rows: no outliers (too few to say what is usual).
    """
    from sklearn.ensemble import IsolationForest

    numeric = features.select_dtypes(include=["number", "bool"]).astype(float)
    if len(numeric) < MIN_ANOMALY_ROWS or numeric.shape[1] == 0:
        return {}
    numeric = numeric.fillna(numeric.median()).fillna(0.0)
    numeric = numeric.loc[:, numeric.nunique() > 1]
    if numeric.shape[1] == 0:
        return {}
    model = IsolationForest(n_estimators=200, contamination=contamination, random_state=seed)
    matrix = numeric.to_numpy()
    outlier = model.fit_predict(matrix) == -1
    scores = -model.score_samples(matrix)

    median = numeric.median()
    mad = (numeric - median).abs().median() * 1.4826
    mean_dev = (numeric - median).abs().mean()
    scale = mad.where(mad > 0, mean_dev)
    # A difference smaller than these is noise whatever the spread: a quarter second of timing
    # jitter among identical tasks, a few points of a rate.
    floor = pd.Series(
        [
            ANOMALY_SECONDS_FLOOR if str(c).endswith("seconds") else ANOMALY_VALUE_FLOOR
            for c in numeric
        ],
        index=numeric.columns,
    )
    scale = np.maximum(scale, floor).replace(0, np.nan)
    z = ((numeric - median) / scale).fillna(0.0).clip(-99, 99)

    found: dict[Hashable, AnomalyScore] = {}
    for position in np.flatnonzero(outlier).tolist():
        row = z.iloc[position]
        order = row.abs().sort_values(ascending=False, kind="stable")
        names = [name for name in order.index[:top] if abs(row[name]) >= 2.0]
        if not names:
            continue  # isolated only by differences within the noise floors
        found[numeric.index[position]] = AnomalyScore(
            score=round(float(scores[position]), 4),
            features=[str(name) for name in names],
            zscores={str(name): round(float(row[name]), 2) for name in names},
            values={str(name): float(numeric.iloc[position][name]) for name in names},
        )
    return found


# --- Helpers -------------------------------------------------------------------------------------


def _natural(key: Any) -> tuple[tuple[int, int | str], ...]:
    return tuple(
        (0, int(part)) if part.isdigit() else (1, part)
        for part in re.split(r"(\d+)", str(key))
        if part
    )


def _clip(text: str, limit: int = _SHOWN) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _number(value: float | None) -> str:
    if value is None:
        return "?"
    return f"{value:.3g}"
