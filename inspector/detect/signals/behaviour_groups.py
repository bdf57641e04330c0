"""Behaviour groups (an ambiguous prompt): samples clustered by behaviour, and whether a
sizeable group the check accepts sits beside a sizeable group it rejects that reads the prompt
another way."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from inspector.detect.behaviour import SKIPPED, BehaviourVector, is_value
from inspector.detect.signals.compare import Difference, best_difference, natural, same_inputs

ACCEPTED = 0.75  # a behaviour group whose mean pass rate is at least this is accepted
REJECTED = 0.25  # ... at most this, rejected; in between, mixed


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
    is a reading only when two named models share it (`models`: sample id -> model name): one
    model's samples share its mistakes, however many of them (on real HumanEval with ten
    CodeGen-16B samples a task, groups of four and five of one model's samples that read "below
    t" as "at most t" were its habit, never a second reading); a group whose models are not
    named needs at least `min_reading` members. Other shared bugs
    the rule cannot tell apart, the reviewer can (the explanation shows both outputs).
    """
    ids = [key for key in sorted(vectors, key=natural) if vectors[key] is not None]
    ids = [key for key in ids if key in passed]
    if not ids:
        return _no_groups(0, "no samples with a behaviour vector")
    present: list[BehaviourVector] = [vectors[key] for key in ids]  # type: ignore[misc]
    same_inputs(present + ([reference] if reference is not None else []))
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
    groups.sort(key=lambda group: (-len(group.members), natural(group.representative)))
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
            if len(sources) == 1:
                continue  # one model's habit, however many of its samples share it
            if not sources and len(rejected.members) < min_reading:
                continue  # models unknown: a few samples alike are not yet a reading
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
    difference = best_difference(a_vector, r_vector, positions)
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
