"""The deeper flags on function tasks, from behaviour runs, mutant runs and the prompts (plain
data in, findings out; no ORM).

On top of the rules on outcomes (flags.py): `weak_tests` (mutants of the reference that the check
lets through and that behave differently), `ambiguous` (samples that split into consistent
readings of which the check accepts only some), a refined `mislabeled` (a reference that passes
its check yet disagrees with a clear majority of passing samples), `no_signal` (every sample
has the same outcome), `duplicate` (near-identical prompts), `answer_leak` (the prompt holds the
reference's distinctive lines) and `anomaly` (an odd task no rule flagged). Each finding has a
confidence and evidence a reviewer can judge.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from inspector.detect.behaviour import BehaviourVector, parse_behaviour
from inspector.detect.codes import SEVERITY, FlagCode
from inspector.detect.examples import example_contradictions, prompt_examples
from inspector.detect.flags import FlagFinding

MAX_SURVIVORS_SHOWN = 3
# A check real task sets ship (HumanEval's own, for one) often lets one mutant in five through
# on inputs it never tried; a weak one lets most through. Two survivors at least, so one odd
# mutant never flags a task.
MIN_SURVIVORS = 2
# A check that calls the solution on this many distinct inputs or fewer (as read from its
# source) is weak whatever its mutants do: a solution that returns the expected answer for that
# input alone passes it.
THIN_CHECK_INPUTS = 1
THIN_CHECK_CONFIDENCE = 0.8
# IsolationForest scores about 0.5 for an ordinary task; below this an "odd" task is noise.
ANOMALY_MIN_SCORE = 0.7


# A prompt example the reference (which passes its check) contradicts is a defect of the task.
EXAMPLE_CONFIDENCE = 0.9
MAX_DISAGREEMENTS_SHOWN = 3


@dataclass(frozen=True)
class DepthSettings:
    survivor_share: float = 0.4
    duplicate_similarity: float = 0.9
    per_call_seconds: float = 0.5


@dataclass(frozen=True, slots=True)
class DepthStats:
    learnability: float | None
    survivor_share: float | None
    cluster_count: int | None


@dataclass(frozen=True)
class DepthAnalysis:
    findings: list[FlagFinding]
    stats: dict[int, DepthStats]


def severity(code: FlagCode, confidence: float) -> int:
    """A flag's place in the queue: its kind's severity, lowered by up to half for doubt."""
    return max(1, round(SEVERITY[code] * (0.5 + 0.5 * max(0.0, min(1.0, confidence)))))


def analyse_depth(
    tasks: list[dict[str, Any]],
    runs: list[dict[str, Any]],
    *,
    other_prompts: Mapping[Hashable, str] | None = None,
    flagged: Mapping[int, set[str]] | None = None,
    settings: DepthSettings = DepthSettings(),
) -> DepthAnalysis:
    """`tasks`: task_key, task_id, prompt, canonical_solution, inputs (the behaviour inputs),
    and optionally test and entry_point (to count the inputs the check itself tries and to read
    the prompt's examples) and sample_models (sample id -> model name).
    `runs`: run_id, task_key, kind (reference, sample, probe, mutant, behaviour), key (the
    sample id, probe, mutant id, or for behaviour runs the solution: "reference",
    "sample:<id>", "mutant:<id>"), outcome, stdout (behaviour runs) and detail (mutant runs:
    diff, description). `other_prompts`: prompts of other task sets, for duplicates across
    sets. `flagged`: the codes the outcome rules already raised, per task.

    The same as `tasks_depth` on every task, then `set_findings` on them all: a caller with
    more tasks than it wants in memory at once runs the first on a chunk of tasks at a time."""
    flagged = flagged or {}
    part = tasks_depth(tasks, runs, flagged=flagged, settings=settings)
    findings = list(part.findings)
    findings.extend(
        set_findings(
            [(t["task_key"], t["prompt"]) for t in tasks],
            feature_frame(part.feature_keys, part.feature_rows),
            raised={f.task_key for f in findings} | {k for k, codes in flagged.items() if codes},
            names_of={t["task_key"]: t["task_id"] for t in tasks},
            evidence_of=part.evidence,
            other_prompts=other_prompts,
            settings=settings,
        )
    )
    findings.sort(key=lambda f: (f.task_key, -f.severity))
    return DepthAnalysis(findings=findings, stats=part.stats)


# The figures the anomaly forest compares tasks on, one row a task.
FEATURES = (
    "reference_pass_rate",
    "sample_pass_rate",
    "flake_rate",
    "survivor_share",
    "cluster_count",
    "mean_seconds",
)

# What an anomaly shows, per task: the mutant evidence (a dict for the flag's evidence, the
# survivors' runs) and the task's reference and sample runs.
AnomalyEvidence = tuple[dict, list[int], list[int]]


@dataclass(frozen=True)
class TasksDepth:
    """The deeper rules that look at one task at a time, on some tasks: their findings (each
    task's own rules, then the answer leaks; unsorted), figures, and anomaly features (rows in
    the tasks' order); `evidence` only when asked for (`keep_evidence`)."""

    findings: list[FlagFinding]
    stats: dict[int, DepthStats]
    feature_keys: list[int]
    feature_rows: list[tuple[float, ...]]
    evidence: dict[int, AnomalyEvidence]


def tasks_depth(
    tasks: list[dict[str, Any]],
    runs: list[dict[str, Any]],
    *,
    flagged: Mapping[int, set[str]],
    settings: DepthSettings = DepthSettings(),
    keep_evidence: bool = True,
) -> TasksDepth:
    """The per-task deeper rules on `tasks` and their `runs` (as `analyse_depth` takes them).
    Without `keep_evidence` the anomaly evidence is not kept (a caller re-reads it for the few
    tasks the forest picks: `set_findings`'s `evidence_of`)."""
    by_task: dict[int, list[dict]] = {}
    for run in runs:
        by_task.setdefault(run["task_key"], []).append(run)
    findings: list[FlagFinding] = []
    stats: dict[int, DepthStats] = {}
    keys: list[int] = []
    rows: list[tuple[float, ...]] = []
    evidence: dict[int, AnomalyEvidence] = {}
    for task in tasks:
        key = task["task_key"]
        found, task_stats, task_features, task_evidence = _task_signals(
            task, by_task.get(key, []), flagged.get(key, set()), settings
        )
        findings.extend(found)
        stats[key] = task_stats
        keys.append(key)
        rows.append(tuple(float(task_features[name]) for name in FEATURES))
        if keep_evidence:
            evidence[key] = task_evidence
    findings.extend(_answer_leaks(tasks))
    return TasksDepth(findings, stats, keys, rows, evidence)


def feature_frame(keys: list[int], rows) -> Any:
    """The anomaly features as the forest takes them: one row a task, indexed by task key.
    `rows`: a row of `FEATURES` a task, or all of them one after the other (a flat array)."""
    import numpy as np
    import pandas as pd

    matrix = np.asarray(rows, dtype=np.float64).reshape(len(keys), len(FEATURES))
    return pd.DataFrame(matrix, index=pd.Index(keys), columns=list(FEATURES))


def set_findings(
    prompts: Iterable[tuple[int, str]],
    features,
    *,
    raised: set[int],
    names_of: Mapping[int, str] | Callable[[list[int]], Mapping[int, str]],
    evidence_of: Mapping[int, AnomalyEvidence] | Callable[[list[int]], Mapping],
    other_prompts: Mapping[Hashable, str] | Iterable[tuple[Hashable, str]] | None = None,
    settings: DepthSettings = DepthSettings(),
) -> list[FlagFinding]:
    """The deeper rules that compare a task with the rest of its set: `duplicate` over
    `prompts` ((task key, prompt), in the set's order) and `other_prompts` ((set name, task id)
    -> prompt, or such pairs), then `anomaly` over `features` (`feature_frame`) among the tasks
    no rule flagged (`raised`, to which the duplicates are added). Both kinds of prompts are
    read once, so a caller may stream them. `names_of` gives the task ids of the tasks a
    duplicate names, and `evidence_of` the picked tasks' anomaly evidence: each a mapping, or a
    function of the task keys that reads it."""
    found = _duplicates(prompts, other_prompts or {}, names_of, settings)
    raised = raised | {f.task_key for f in found}
    found.extend(_anomalies(features, raised, evidence_of))
    return found


def _finding(
    task_key: int, code: FlagCode, confidence: float, explanation: str, evidence: dict, runs=()
) -> FlagFinding:
    return FlagFinding(
        task_key=task_key,
        code=code,
        severity=severity(code, confidence),
        explanation=explanation,
        evidence_run_ids=tuple(runs),
        confidence=round(float(confidence), 3),
        evidence=evidence,
    )


def _rate(runs: list[dict]) -> float | None:
    counted = [r for r in runs if r["outcome"] != "sandbox_error"]
    if not counted:
        return None
    return sum(r["outcome"] == "passed" for r in counted) / len(counted)


def _checked_inputs(task: dict) -> list[str]:
    """The inputs the task's check calls the solution with when they are at most
    THIN_CHECK_INPUTS, from a few call sites (the same input is often called twice: once to
    test, once for the message) none in a loop; otherwise empty (no claim)."""
    from inspector.detect.behaviour import call_sites, inputs_from_tests

    test, entry_point = task.get("test"), task.get("entry_point")
    if not test or not entry_point:
        return []
    sites, in_loop = call_sites(test, entry_point)
    if in_loop or sites > 3 * THIN_CHECK_INPUTS:
        return []  # calls that may run on many inputs: no claim
    found = inputs_from_tests(test, entry_point, limit=THIN_CHECK_INPUTS + 1)
    return found if len(found) <= THIN_CHECK_INPUTS else []


def _task_signals(task: dict, runs: list[dict], flagged: set[str], settings: DepthSettings):
    from inspector.detect import signals

    key = task["task_key"]
    inputs = task.get("inputs") or []
    reference_rate = _rate([r for r in runs if r["kind"] == "reference"])
    sample_runs: dict[str, list[dict]] = {}
    for run in runs:
        if run["kind"] == "sample":
            sample_runs.setdefault(run["key"], []).append(run)
    sample_rates = {sid: rate for sid, rs in sample_runs.items() if (rate := _rate(rs)) is not None}
    mutant_runs = {r["key"]: r for r in runs if r["kind"] == "mutant"}
    vectors: dict[str, BehaviourVector | None] = {}
    behaviour_run_of: dict[str, int] = {}
    for run in runs:
        if run["kind"] == "behaviour":
            vectors[run["key"]] = (
                parse_behaviour(run.get("stdout") or "", inputs) if inputs else None
            )
            behaviour_run_of[run["key"]] = run["run_id"]
    reference = vectors.get("reference")
    sample_vectors = {
        sid: vectors.get(f"sample:{sid}") for sid in sample_rates if f"sample:{sid}" in vectors
    }

    models = {str(k): v or "" for k, v in (task.get("sample_models") or {}).items()}
    entry_point = task.get("entry_point") or ""
    examples = prompt_examples(task["prompt"], entry_point) if entry_point and inputs else []
    ruled_out = {
        sid
        for sid, vector in sample_vectors.items()
        if vector is not None and example_contradictions(examples, vector)
    }

    found: list[FlagFinding] = []
    sample_values = list(sample_rates.values())
    mean_rate = sum(sample_values) / len(sample_values) if sample_values else None
    survivor_share = None
    cluster_count = None
    mutant_evidence: tuple[dict, list[int]] = ({}, [])

    # weak_tests: only a reference that passes its check says what the check should demand.
    accepted = None
    if reference is not None and reference_rate == 1.0:
        accepted = signals.accepted_disagreements(
            reference, sample_vectors, sample_rates, models=models
        )
    if reference is not None and reference_rate == 1.0 and (mutant_runs or accepted):
        mutants = {
            mid: (
                run["outcome"] == "passed",
                vectors.get(f"mutant:{mid}"),
            )
            for mid, run in mutant_runs.items()
            if run["outcome"] != "sandbox_error"
        }
        result = signals.surviving_mutants(reference, mutants, threshold=settings.survivor_share)
        survivor_share = result.survivor_share
        checked = _checked_inputs(task)
        thin = bool(checked)
        by_mutants = result.weak and len(result.survivors) >= MIN_SURVIVORS
        shown = []
        for survivor in result.survivors[:MAX_SURVIVORS_SHOWN]:
            detail = mutant_runs[survivor.mutant_id].get("detail") or {}
            shown.append(
                {
                    "mutant_id": survivor.mutant_id,
                    "description": detail.get("description", ""),
                    "diff": detail.get("diff", ""),
                    "input": survivor.difference.input,
                    "reference_output": survivor.difference.left,
                    "mutant_output": survivor.difference.right,
                }
            )
        # What an anomaly on the survivor share shows: the mutants that survived, and where.
        mutant_evidence = (
            {
                "survivor_share": result.survivor_share,
                "survivors": shown,
                "survivor_count": len(result.survivors),
                "killed": result.killed,
                "equivalent": result.equivalent,
            },
            [mutant_runs[s["mutant_id"]]["run_id"] for s in shown],
        )
        if thin or by_mutants or accepted is not None:
            # Each reason that holds, strongest evidence first; the confidence is the best one's.
            reasons: list[tuple[float, str]] = []
            if thin:
                called = "; ".join(f"{entry_point or 'f'}({c})" for c in checked)
                reasons.append(
                    (
                        THIN_CHECK_CONFIDENCE,
                        f"the check calls the solution on {len(checked)} input only ({called}): "
                        "a solution that returns the expected answer for it alone passes",
                    )
                )
            if accepted is not None:
                reasons.append((accepted.confidence, accepted.explanation))
            if by_mutants:
                reasons.append((result.confidence, result.explanation))
            confidence = max(c for c, _ in reasons)
            explanation = "; ".join(text for _, text in reasons)
            found.append(
                _finding(
                    key,
                    FlagCode.WEAK_TESTS,
                    confidence,
                    explanation,
                    {
                        "checked_inputs": checked,
                        "survivor_share": result.survivor_share,
                        "survivors": shown,
                        "survivor_count": len(result.survivors),
                        "killed": result.killed,
                        "equivalent": result.equivalent,
                        "accepted_wrong": _accepted_evidence(accepted),
                        "accepted_wrong_count": len(accepted.disagreements) if accepted else 0,
                    },
                    [mutant_runs[s["mutant_id"]]["run_id"] for s in shown]
                    + [
                        behaviour_run_of[f"sample:{d.sample_id}"]
                        for d in (accepted.disagreements if accepted else [])[
                            :MAX_DISAGREEMENTS_SHOWN
                        ]
                        if f"sample:{d.sample_id}" in behaviour_run_of
                    ],
                )
            )

    # ambiguous, by the prompt's own examples: the reference passes its check, yet contradicts
    # what the prompt says a call returns (the example, or the check, is wrong).
    contradicted = (
        example_contradictions(examples, reference)
        if reference is not None and reference_rate == 1.0
        else []
    )
    if contradicted:
        first = contradicted[0]
        agreeing = sorted(
            (
                sid
                for sid, vector in sample_vectors.items()
                if vector is not None and sid not in ruled_out
            ),
            key=str,
        )
        found.append(
            _finding(
                key,
                FlagCode.AMBIGUOUS,
                min(1.0, EXAMPLE_CONFIDENCE + 0.05 * (len(contradicted) - 1)),
                f"the prompt's example says {first.example.line.lstrip('> ')!s} "
                f"(line {first.example.line_number}), but the reference, which passes the check, "
                f"gives {first.got}"
                + (
                    f"; {len(contradicted) - 1} more example"
                    f"{'s' if len(contradicted) > 2 else ''} contradicted"
                    if len(contradicted) > 1
                    else ""
                )
                + ": the instruction and the check disagree",
                {
                    "source": "example",
                    "examples": [
                        {
                            "line": c.example.line,
                            "line_number": c.example.line_number,
                            "input": c.example.input,
                            "expected": c.example.expected_text,
                            "reference_output": c.got,
                        }
                        for c in contradicted
                    ],
                    "samples_matching_examples": agreeing,
                },
                [behaviour_run_of["reference"]] if "reference" in behaviour_run_of else [],
            )
        )

    # ambiguous: sample groups that behave alike within and differently between, with the check
    # accepting only some.
    if len([v for v in sample_vectors.values() if v is not None]) >= 2:
        groups = signals.sample_groups(
            sample_vectors, sample_rates, reference=reference, ruled_out=ruled_out, models=models
        )
        cluster_count = groups.cluster_count
        if (
            groups.ambiguous
            and not contradicted
            and "mislabeled" not in flagged
            and "unsolvable" not in flagged
        ):
            difference = groups.difference
            found.append(
                _finding(
                    key,
                    FlagCode.AMBIGUOUS,
                    groups.confidence,
                    groups.explanation,
                    {
                        "groups": [
                            {
                                "members": list(g.members),
                                "representative": g.representative,
                                "pass_rate": g.pass_rate,
                                "verdict": g.verdict,
                            }
                            for g in groups.groups
                            if len(g.members) >= 2
                        ],
                        "input": difference.input if difference else "",
                        "accepted_output": difference.left if difference else "",
                        "rejected_output": difference.right if difference else "",
                    },
                    [
                        behaviour_run_of[f"sample:{g.representative}"]
                        for g in (groups.accepted, groups.rejected)
                        if g is not None and f"sample:{g.representative}" in behaviour_run_of
                    ],
                )
            )

    # mislabeled, refined: the reference passes its check but a clear majority of the passing
    # samples agree with each other and not with it.
    if reference is not None and "mislabeled" not in flagged and "unsolvable" not in flagged:
        disagreement = signals.reference_disagrees(
            reference, sample_vectors, sample_rates, models=models
        )
        if disagreement is not None:
            d = disagreement.difference
            found.append(
                _finding(
                    key,
                    FlagCode.MISLABELED,
                    disagreement.confidence,
                    disagreement.explanation,
                    {
                        "input": d.input,
                        "reference_output": d.left,
                        "majority_output": d.right,
                        "agreeing": list(disagreement.agreeing),
                    },
                    [behaviour_run_of["reference"]] if "reference" in behaviour_run_of else [],
                )
            )

    # slow_reference: the reference runs out of time where passing samples answer.
    if reference is not None and reference_rate == 1.0:
        slow = signals.slow_reference(
            reference, sample_vectors, sample_rates, per_call_seconds=settings.per_call_seconds
        )
        if slow is not None:
            found.append(
                _finding(
                    key,
                    FlagCode.SLOW_REFERENCE,
                    slow.confidence,
                    slow.explanation,
                    {"slow_inputs": slow.inputs[:5], "answered_by": list(slow.answered_by)},
                    [behaviour_run_of["reference"]] if "reference" in behaviour_run_of else [],
                )
            )

    # no_signal: a group-relative policy gradient learns nothing from a task all samples pass
    # or all fail.
    # A flaky check makes the samples' outcomes noise: whatever they share says nothing.
    quiet = signals.no_signal(sample_rates)
    if quiet is not None and "flaky" not in flagged:
        found.append(
            _finding(
                key,
                FlagCode.NO_SIGNAL,
                quiet.confidence,
                quiet.explanation,
                {"outcome": quiet.outcome, "samples": quiet.samples},
                # One run of each sample: every one ends the same way.
                [rs[0]["run_id"] for _, rs in sorted(sample_runs.items()) if rs],
            )
        )

    stats = DepthStats(
        learnability=signals.learnability(mean_rate),
        survivor_share=survivor_share,
        cluster_count=cluster_count,
    )
    durations = [r.get("duration") or 0.0 for r in runs if r["kind"] in ("reference", "sample")]
    task_features = {
        "reference_pass_rate": reference_rate if reference_rate is not None else 0.0,
        "sample_pass_rate": mean_rate if mean_rate is not None else 0.0,
        "flake_rate": _flake_rate(runs),
        "survivor_share": survivor_share or 0.0,
        "cluster_count": float(cluster_count or 0),
        "mean_seconds": sum(durations) / len(durations) if durations else 0.0,
    }
    # What an anomaly on a run feature (durations, pass and flake rates) shows: the runs.
    check_runs = [r["run_id"] for r in runs if r["kind"] in ("reference", "sample")]
    return found, stats, task_features, (*mutant_evidence, check_runs)


def _accepted_evidence(accepted) -> list[dict]:
    if accepted is None:
        return []
    return [
        {
            "sample_id": d.sample_id,
            "model": d.model,
            "input": d.difference.input,
            "reference_output": d.difference.left,
            "sample_output": d.difference.right,
            "differing_inputs": d.differing_inputs,
            "with_reference": d.with_reference,
            "with_sample": d.with_sample,
        }
        for d in accepted.disagreements[:MAX_DISAGREEMENTS_SHOWN]
    ]


def _flake_rate(runs: list[dict]) -> float:
    by_solution: dict[tuple[str, str], set[str]] = {}
    for run in runs:
        if run["kind"] in ("reference", "sample") and run["outcome"] != "sandbox_error":
            by_solution.setdefault((run["kind"], run["key"]), set()).add(
                "passed" if run["outcome"] == "passed" else "failed"
            )
    if not by_solution:
        return 0.0
    return sum(len(v) > 1 for v in by_solution.values()) / len(by_solution)


def _answer_leaks(tasks: list[dict]) -> list[FlagFinding]:
    from inspector.detect import signals

    found: list[FlagFinding] = []
    for task in tasks:
        leak = signals.answer_leak(task["prompt"], task.get("canonical_solution") or "")
        if leak is not None:
            found.append(
                _finding(
                    task["task_key"],
                    FlagCode.ANSWER_LEAK,
                    leak.confidence,
                    leak.explanation,
                    {"line": leak.line, "lines": leak.lines, "distinctive": leak.distinctive},
                )
            )
    return found


def _duplicates(
    tasks: Iterable[tuple[int, str]],
    other_prompts: Mapping[Hashable, str] | Iterable[tuple[Hashable, str]],
    names_of: Mapping[int, str] | Callable[[list[int]], Mapping[int, str]],
    settings: DepthSettings,
) -> list[FlagFinding]:
    from inspector.detect import signals

    found: list[FlagFinding] = []
    others = other_prompts.items() if isinstance(other_prompts, Mapping) else other_prompts

    def prompts():  # read once, as the search goes: no prompt's text is kept
        for key, prompt in tasks:
            yield ("task", key), prompt
        for other, prompt in others:
            yield ("other", other), prompt

    best: dict[int, tuple[float, Hashable, Any]] = {}
    for a, b, similarity in signals.near_duplicates(
        prompts(), threshold=settings.duplicate_similarity
    ):
        for mine, theirs in ((a, b), (b, a)):
            if mine[0] != "task":
                continue
            if best.get(mine[1], (0.0,))[0] < similarity:
                best[mine[1]] = (similarity, theirs, mine)
    named = [theirs[1] for _, theirs, _ in best.values() if theirs[0] == "task"]
    names = names_of(named) if callable(names_of) else names_of
    for task_key, (similarity, theirs, _mine) in best.items():
        if theirs[0] == "task":
            name = names[theirs[1]]
            where = "in this task set"
        else:
            name = str(theirs[1][1]) if isinstance(theirs[1], tuple) else str(theirs[1])
            where = f"in task set {theirs[1][0]}" if isinstance(theirs[1], tuple) else "elsewhere"
        confidence = min(1.0, max(0.0, (similarity - 0.5) / 0.5))
        found.append(
            _finding(
                task_key,
                FlagCode.DUPLICATE,
                confidence,
                f"its prompt is {similarity:.0%} similar (TF-IDF cosine) to {name} {where}",
                {
                    "other": name,
                    "other_taskset": None if theirs[0] == "task" else _taskset_of(theirs[1]),
                    "where": where,
                    "similarity": similarity,
                },
            )
        )
    return found


def _taskset_of(other: Hashable) -> str | None:
    """The task set of another set's prompt key ((set name, task id)), if it names one."""
    return str(other[0]) if isinstance(other, tuple) else None


def _anomalies(
    features,
    raised: set[int],
    evidence_of: Mapping[int, AnomalyEvidence] | Callable[[list[int]], Mapping],
) -> list[FlagFinding]:
    """Odd tasks no rule flagged, among `features` (a frame, one row a task indexed by its key,
    or a dict of task key -> {feature: value}). The evidence is each named feature's value beside
    the set's median; when the survivor share is one of them, the mutants that survived (and
    their runs); when another is, the task's reference and sample runs (`evidence_of`: a mapping,
    or a function of the picked tasks' keys that reads it)."""
    if len(features) < 10:
        return []
    import pandas as pd

    from inspector.detect import signals

    frame = (
        features
        if isinstance(features, pd.DataFrame)
        else pd.DataFrame.from_dict(features, orient="index")
    )
    picked = [
        (task_key, score)
        for task_key, score in signals.anomalies(frame).items()
        if task_key not in raised and score.score >= ANOMALY_MIN_SCORE
    ]
    if not picked:
        return []
    evidence_by_task = (
        evidence_of([int(key) for key, _ in picked]) if callable(evidence_of) else evidence_of
    )
    found = []
    for task_key, score in picked:
        named = ", ".join(
            f"{name} {score.values.get(name, 0):.2f} where the set's median is "
            f"{(score.usual or {}).get(name, 0):.2f} (robust z {score.zscores.get(name, 0):+.1f})"
            for name in score.features
        )
        evidence: dict[str, Any] = {
            "score": score.score,
            "features": score.features,
            "values": score.values,
            "feature_rows": [
                {
                    "name": name,
                    "value": score.values.get(name),
                    "usual": (score.usual or {}).get(name),
                    "z": score.zscores.get(name),
                }
                for name in score.features
            ],
        }
        extra, mutant_runs, check_runs = evidence_by_task.get(int(task_key), ({}, [], []))
        runs: list[int] = []
        if "survivor_share" in score.features:
            evidence.update(extra)
            runs.extend(mutant_runs)
        if set(score.features) - {"survivor_share", "cluster_count"}:
            runs.extend(check_runs)
        found.append(
            _finding(
                int(task_key),
                FlagCode.ANOMALY,
                score.confidence,
                f"odd among its task set (isolation score {score.score:.2f}): {named}",
                evidence,
                runs,
            )
        )
    return found
