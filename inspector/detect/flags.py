"""Flags on tasks, computed from a table of recorded runs (pandas only, no ORM).

Each run executed one solution of one task: the task's reference solution, one of its samples,
or a probe (e.g. the "null" probe, a completion that does nothing). From the outcomes we flag
tasks that nothing solves, whose reference is wrong, whose results are not reproducible, or whose
tests a probe passes.

A run may also carry its `reason` (the run's error). A run that failed through the sandbox
boundary (its reason begins "boundary: ", workers/sandbox/runner.py: a value the solution
returned, or the check passed, could not cross between their two sandboxes) says nothing about
the reference: a reference whose every failure is of that kind is not flagged `unsolvable` or
`mislabeled`; `boundary_findings` names such tasks, with the type, as findings on the
inspection (a limit of how tasks are run, not of each task). It still counts as a fail
everywhere else (pass rates, samples, probes): the platform did not reward it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from inspector.detect.codes import SEVERITY, FlagCode

__all__ = [
    "OUTCOMES",
    "RUN_COLUMNS",
    "SEVERITY",
    "SOLUTION_KINDS",
    "Analysis",
    "BoundaryTask",
    "FlagCode",
    "FlagFinding",
    "TaskStats",
    "analyse_runs",
    "boundary_findings",
]

RUN_COLUMNS = ["run_id", "task_key", "solution_kind", "solution_key", "outcome"]
REASON = "reason"  # optional: the run's error
# How the reason of a run that failed through the sandbox boundary begins
# (workers/sandbox/session.py BOUNDARY_PREFIX; not imported: the analysis knows no sandbox).
BOUNDARY = "boundary: "
_BOUNDARY_TYPE = re.compile(r"^boundary: an? (\S+) (?:returned|passed) by the")
MAX_NAMED_TASKS = 20
# Order matters: it is the order in which solutions are named in explanations.
SOLUTION_KINDS = ("reference", "sample", "probe")
OUTCOMES = (
    "passed",
    "failed",
    "timed_out",
    "out_of_memory",
    "output_truncated",
    "sandbox_error",
)
# Sandbox errors are faults of our infrastructure, so they say nothing about the task.
NOT_COUNTED = "sandbox_error"
# Category codes of the kinds, as pandas.Categorical numbers them.
_REFERENCE, _SAMPLE, _PROBE = range(len(SOLUTION_KINDS))
MAX_NAMED_SAMPLES = 5


@dataclass(frozen=True)
class FlagFinding:
    task_key: int
    code: FlagCode
    severity: int
    explanation: str
    evidence_run_ids: tuple[int, ...]
    confidence: float = 1.0  # how sure the rule is, 0..1; the rules on outcomes alone are sure
    evidence: dict = field(default_factory=dict, hash=False, compare=False)


@dataclass(frozen=True, slots=True)
class TaskStats:
    task_key: int
    runs: int
    reference_runs: int
    reference_passes: int
    sample_runs: int
    sample_passes: int
    reference_pass_rate: float | None
    sample_pass_rate: float | None
    sandbox_errors: int


@dataclass(frozen=True)
class BoundaryTask:
    """A task whose reference failed only through the sandbox boundary, so was not flagged."""

    task_key: int
    types: tuple[str, ...]  # what could not cross, from the runs' reasons
    reason: str  # one of those runs' reason
    evidence_run_ids: tuple[int, ...]


@dataclass(frozen=True)
class Analysis:
    findings: list[FlagFinding]
    stats: dict[int, TaskStats]
    boundary: dict[int, BoundaryTask] = field(default_factory=dict)


def analyse_runs(
    runs: pd.DataFrame | list[dict[str, Any]], *, task_keys: Iterable[int] = ()
) -> Analysis:
    """Flag tasks from their runs (one row per run, columns `RUN_COLUMNS`).

    `task_keys` names tasks that must get stats even when they have no runs at all.
    Counts, rates and flags leave out sandbox errors; every other outcome but "passed" is a fail.
    A reference's failures through the sandbox boundary (column `reason`, optional) are left out
    of `unsolvable` and `mislabeled` only; a task they alone fail is in `Analysis.boundary`.
    Findings are sorted by task_key, then severity (highest first).
    """
    frame = _validated(runs)
    if frame.empty:
        return Analysis(findings=[], stats=_stats_without_runs(task_keys, {}))

    run_id = frame["run_id"].to_numpy(dtype=np.int64)
    kind = pd.Categorical(frame["solution_kind"], categories=SOLUTION_KINDS).codes
    outcome = frame["outcome"].to_numpy()
    counted = outcome != NOT_COUNTED
    passed = outcome == "passed"
    failed = counted & ~passed
    is_reference = kind == _REFERENCE
    is_sample = kind == _SAMPLE
    is_probe = kind == _PROBE
    through_boundary = (
        failed
        & is_reference
        & np.array(
            [isinstance(r, str) and r.startswith(BOUNDARY) for r in frame[REASON]], dtype=bool
        )
    )

    work = pd.DataFrame(
        {
            "task_key": frame["task_key"].to_numpy(dtype=np.int64),
            "kind": kind,
            "solution_key": frame["solution_key"].astype(str).to_numpy(),
            "runs": np.ones(len(frame), dtype=np.int64),
            "counted": counted,
            "passed": passed,
            "failed": failed,
            "sandbox_errors": ~counted,
            "reference_runs": counted & is_reference,
            "reference_passes": passed & is_reference,
            "reference_sandbox_errors": ~counted & is_reference,
            "reference_boundary": through_boundary,
            "sample_runs": counted & is_sample,
            "sample_passes": passed & is_sample,
            "probe_passes": passed & is_probe,
        }
    )

    by_task = work.groupby("task_key", sort=True)
    tasks = by_task[
        [
            "runs",
            "sandbox_errors",
            "reference_runs",
            "reference_passes",
            "reference_sandbox_errors",
            "reference_boundary",
            "sample_runs",
            "sample_passes",
            "probe_passes",
        ]
    ].sum()
    row_task = by_task.ngroup().to_numpy()  # row -> position in `tasks`

    by_solution = work.groupby(["task_key", "kind", "solution_key"], sort=True)
    solutions = by_solution[["counted", "passed", "failed", "sandbox_errors"]].sum()
    solutions = solutions.reset_index()
    row_solution = by_solution.ngroup().to_numpy()  # row -> position in `solutions`

    reference_runs = tasks["reference_runs"].to_numpy()
    reference_boundary = tasks["reference_boundary"].to_numpy()
    # The reference's runs that say something about it: not those the boundary decided.
    judged = reference_runs - reference_boundary
    reference_never_passed = (judged > 0) & (tasks["reference_passes"].to_numpy() == 0)
    boundary_only = (reference_boundary > 0) & (judged == 0)
    sample_passes = tasks["sample_passes"].to_numpy()
    unsolvable = reference_never_passed & (sample_passes == 0)
    hackable = tasks["probe_passes"].to_numpy() > 0
    sol_task = tasks.index.get_indexer(solutions["task_key"])  # solution -> position in `tasks`
    flaky_solution = (solutions["passed"].to_numpy() > 0) & (solutions["failed"].to_numpy() > 0)
    flaky = np.zeros(len(tasks), dtype=bool)
    flaky[sol_task[flaky_solution]] = True
    # A check that both passes and fails one solution decides nothing for certain: a reference
    # that failed all its runs there may have drawn only failures (a check failing half the time
    # fails six runs in a row once in 64), so it is `flaky`, not evidence of a wrong reference.
    mislabeled = reference_never_passed & (sample_passes > 0) & ~flaky

    evidence = {
        FlagCode.UNSOLVABLE: _run_ids_by_task(
            unsolvable[row_task] & counted & (is_reference | is_sample), row_task, run_id
        ),
        FlagCode.MISLABELED: _run_ids_by_task(
            mislabeled[row_task] & counted & (is_reference | (is_sample & passed)),
            row_task,
            run_id,
        ),
        FlagCode.FLAKY: _run_ids_by_task(flaky_solution[row_solution] & counted, row_task, run_id),
        FlagCode.REWARD_HACKABLE: _run_ids_by_task(
            hackable[row_task] & is_probe & passed, row_task, run_id
        ),
    }

    sol_kind = solutions["kind"].to_numpy()
    sol_counted = solutions["counted"].to_numpy()
    sol_passed = solutions["passed"].to_numpy()
    sample_solutions = np.bincount(
        sol_task[(sol_kind == _SAMPLE) & (sol_counted > 0)],
        minlength=len(tasks),
    )
    named = {
        FlagCode.MISLABELED: _solutions_by_task(
            solutions, mislabeled[sol_task] & (sol_kind == _SAMPLE) & (sol_passed > 0), sol_task
        ),
        FlagCode.FLAKY: _solutions_by_task(solutions, flaky_solution, sol_task),
        FlagCode.REWARD_HACKABLE: _solutions_by_task(
            solutions, (sol_kind == _PROBE) & (sol_passed > 0), sol_task
        ),
    }

    keys = tasks.index.to_numpy().tolist()
    reference_part = [
        "reference "
        + _passed(p, n, s)
        + (f" ({b} of them failed through the sandbox boundary)" if b else "")
        for p, n, s, b in zip(
            tasks["reference_passes"].tolist(),
            reference_runs.tolist(),
            tasks["reference_sandbox_errors"].tolist(),
            reference_boundary.tolist(),
            strict=True,
        )
    ]
    findings: list[FlagFinding] = []

    def add(code: FlagCode, position: int, explanation: str) -> None:
        findings.append(
            FlagFinding(
                task_key=keys[position],
                code=code,
                severity=SEVERITY[code],
                explanation=explanation,
                evidence_run_ids=evidence[code][position],
            )
        )

    sample_runs = tasks["sample_runs"].to_numpy()
    for position in np.flatnonzero(unsolvable).tolist():
        runs_of_samples = int(sample_runs[position])
        if runs_of_samples:
            count = int(sample_solutions[position])
            samples_part = (
                f"{count} sample{_s(count)} passed 0 of {runs_of_samples} run{_s(runs_of_samples)}"
            )
        else:
            samples_part = "no sample runs"
        add(FlagCode.UNSOLVABLE, position, f"{reference_part[position]}; {samples_part}")

    for position in np.flatnonzero(mislabeled).tolist():
        passing = named[FlagCode.MISLABELED][position]
        parts = [reference_part[position], *passing[:MAX_NAMED_SAMPLES]]
        if len(passing) > MAX_NAMED_SAMPLES:
            parts.append(f"and {len(passing) - MAX_NAMED_SAMPLES} more passing samples")
        add(FlagCode.MISLABELED, position, "; ".join(parts))

    for position in np.flatnonzero(hackable).tolist():
        add(
            FlagCode.REWARD_HACKABLE, position, "; ".join(named[FlagCode.REWARD_HACKABLE][position])
        )

    for position in np.flatnonzero(flaky).tolist():
        parts = named[FlagCode.FLAKY][position]
        add(FlagCode.FLAKY, position, "same solution both passed and failed: " + "; ".join(parts))

    findings.sort(key=lambda finding: (finding.task_key, -finding.severity))
    boundary = _boundary_tasks(
        frame, through_boundary, row_task, run_id, np.flatnonzero(boundary_only), keys
    )
    return Analysis(findings=findings, stats=_stats(tasks, task_keys), boundary=boundary)


def _boundary_tasks(
    frame: pd.DataFrame,
    through_boundary: np.ndarray,
    row_task: np.ndarray,
    run_id: np.ndarray,
    positions: np.ndarray,
    keys: list[int],
) -> dict[int, BoundaryTask]:
    if not len(positions):
        return {}
    wanted = np.zeros(int(row_task.max()) + 1, dtype=bool)
    wanted[positions] = True
    rows = np.flatnonzero(through_boundary & wanted[row_task])
    reasons = frame[REASON].to_numpy()
    found: dict[int, tuple[set[str], str, list[int]]] = {}
    for row in rows.tolist():
        reason = str(reasons[row])
        types, _, ids = found.setdefault(keys[row_task[row]], (set(), reason, []))
        match = _BOUNDARY_TYPE.match(reason)
        types.add(match.group(1) if match else "value")
        ids.append(int(run_id[row]))
    return {
        key: BoundaryTask(key, tuple(sorted(types)), reason, tuple(sorted(ids)))
        for key, (types, reason, ids) in sorted(found.items())
    }


def boundary_findings(analysis: Analysis, task_names: dict[int, str]) -> list[dict]:
    """Findings on the inspection, one per type that could not cross: the tasks whose
    reference failed only through the sandbox boundary (`task_names`: task key -> task id)."""
    by_type: dict[str, list[BoundaryTask]] = {}
    for task in analysis.boundary.values():
        for name in task.types:
            by_type.setdefault(name, []).append(task)
    findings = []
    for name, tasks in sorted(by_type.items(), key=lambda item: (-len(item[1]), item[0])):
        named = [task_names.get(t.task_key, f"#{t.task_key}") for t in tasks]
        listed = ", ".join(named[:MAX_NAMED_TASKS])
        if len(named) > MAX_NAMED_TASKS:
            listed += f" and {len(named) - MAX_NAMED_TASKS} more"
        count = len(tasks)
        findings.append(
            {
                "kind": "boundary",
                "type": name,
                "tasks": named,
                "task_keys": [t.task_key for t in tasks],
                "evidence_run_ids": [i for t in tasks for i in t.evidence_run_ids[:3]],
                "reason": tasks[0].reason,
                "explanation": (
                    f"the reference of {count} task{_s(count)} ({listed}) failed only because "
                    f"{_a(name)} could not cross between the solution's and the check's "
                    "sandboxes, where one process would have passed it: a limit of how the "
                    f"tasks are run, so {'it is' if count == 1 else 'they are'} not flagged "
                    f"unsolvable. For example: {tasks[0].reason}"
                ),
            }
        )
    return findings


def _a(name: str) -> str:
    return ("an " if name[:1].lower() in "aeiou" else "a ") + name


def _validated(runs: pd.DataFrame | list[dict[str, Any]]) -> pd.DataFrame:
    if isinstance(runs, pd.DataFrame):
        missing = [column for column in RUN_COLUMNS if column not in runs.columns]
        if missing:
            raise ValueError(f"runs lack the column(s) {', '.join(missing)}")
        frame = runs[[*RUN_COLUMNS, REASON]] if REASON in runs.columns else runs[RUN_COLUMNS]
        if REASON not in frame.columns:
            frame = frame.assign(**{REASON: ""})
    else:
        frame = pd.DataFrame(list(runs), columns=[*RUN_COLUMNS, REASON])
    if frame.empty:
        return frame
    empty = [column for column in RUN_COLUMNS if frame[column].isna().any()]
    if empty:
        raise ValueError(f"runs have missing values in column(s) {', '.join(empty)}")
    # An unknown value is a bug upstream (a typo such as "pass" would otherwise count as a fail
    # and could flag a good task as unsolvable), so refuse rather than guess.
    for column, allowed in (("solution_kind", SOLUTION_KINDS), ("outcome", OUTCOMES)):
        unknown = ~frame[column].isin(allowed)
        if unknown.any():
            values = sorted({str(value) for value in frame.loc[unknown, column]})
            raise ValueError(f"runs have unknown {column} value(s): {', '.join(values)}")
    return frame


def _run_ids_by_task(
    mask: np.ndarray, row_task: np.ndarray, run_id: np.ndarray
) -> dict[int, tuple[int, ...]]:
    """Task position -> the sorted ids of the runs selected by `mask`."""
    tasks = row_task[mask]
    ids = run_id[mask]
    order = np.lexsort((ids, tasks))
    tasks = tasks[order]
    ids = ids[order]
    if len(tasks) == 0:
        return {}
    cuts = np.flatnonzero(np.diff(tasks)) + 1
    starts = np.concatenate(([0], cuts))
    return {
        task: tuple(chunk.tolist())
        for task, chunk in zip(tasks[starts].tolist(), np.split(ids, cuts), strict=True)
    }


def _solutions_by_task(
    solutions: pd.DataFrame, mask: np.ndarray, sol_task: np.ndarray
) -> dict[int, list[str]]:
    """Task position -> "sample s2 passed 2 of 3 runs" for each solution selected by `mask`.

    Ordered reference, samples, probes, then by key with numbers compared as numbers (s2 < s10).
    """
    chosen = solutions.loc[mask]
    rows = sorted(
        zip(
            sol_task[mask].tolist(),
            chosen["kind"].tolist(),
            chosen["solution_key"].tolist(),
            chosen["passed"].tolist(),
            chosen["counted"].tolist(),
            chosen["sandbox_errors"].tolist(),
            strict=True,
        ),
        key=lambda row: (row[0], row[1], _natural(row[2])),
    )
    described: dict[int, list[str]] = {}
    for task, kind, key, passes, runs, sandbox_errors in rows:
        name = "reference" if kind == _REFERENCE else f"{SOLUTION_KINDS[kind]} {key}"
        described.setdefault(task, []).append(f"{name} {_passed(passes, runs, sandbox_errors)}")
    return described


def _natural(key: str) -> tuple[tuple[int, int | str], ...]:
    return tuple(
        (0, int(part)) if part.isdigit() else (1, part) for part in re.split(r"(\d+)", key) if part
    )


def _passed(passes: int, runs: int, sandbox_errors: int) -> str:
    text = f"passed {passes} of {runs} run{_s(runs)}"
    if sandbox_errors:
        text += f" ({sandbox_errors} sandbox error{_s(sandbox_errors)} not counted)"
    return text


def _s(count: int) -> str:
    return "" if count == 1 else "s"


def _stats(tasks: pd.DataFrame, task_keys: Iterable[int]) -> dict[int, TaskStats]:
    stats: dict[int, TaskStats] = {}
    for key, runs, errors, ref_runs, ref_passes, sample_runs, sample_passes in zip(
        tasks.index.tolist(),
        tasks["runs"].tolist(),
        tasks["sandbox_errors"].tolist(),
        tasks["reference_runs"].tolist(),
        tasks["reference_passes"].tolist(),
        tasks["sample_runs"].tolist(),
        tasks["sample_passes"].tolist(),
        strict=True,
    ):
        stats[key] = TaskStats(
            task_key=key,
            runs=runs,
            reference_runs=ref_runs,
            reference_passes=ref_passes,
            sample_runs=sample_runs,
            sample_passes=sample_passes,
            reference_pass_rate=ref_passes / ref_runs if ref_runs else None,
            sample_pass_rate=sample_passes / sample_runs if sample_runs else None,
            sandbox_errors=errors,
        )
    return _stats_without_runs(task_keys, stats)


def _stats_without_runs(
    task_keys: Iterable[int], stats: dict[int, TaskStats]
) -> dict[int, TaskStats]:
    """Adds empty stats for the tasks without runs; returns all stats ordered by task_key."""
    for given in task_keys:
        key = int(given)
        if key not in stats:
            stats[key] = TaskStats(
                task_key=key,
                runs=0,
                reference_runs=0,
                reference_passes=0,
                sample_runs=0,
                sample_passes=0,
                reference_pass_rate=None,
                sample_pass_rate=None,
                sandbox_errors=0,
            )
    return dict(sorted(stats.items()))
