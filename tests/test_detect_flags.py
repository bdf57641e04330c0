from __future__ import annotations

import random
from typing import Any

import pandas as pd
import pytest

from inspector.detect.flags import (
    RUN_COLUMNS,
    SEVERITY,
    FlagCode,
    FlagFinding,
    TaskStats,
    analyse_runs,
)


class Runs:
    """A hand-built run table; run ids count up from 1 in the order runs are added."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []

    def add(self, task: int, solution: str, *outcomes: str) -> Runs:
        """`solution` is "reference", "sample <id>" or "probe <name>"."""
        kind, _, key = solution.partition(" ")
        for outcome in outcomes:
            self.rows.append(
                {
                    "run_id": len(self.rows) + 1,
                    "task_key": task,
                    "solution_kind": kind,
                    "solution_key": key or kind,
                    "outcome": outcome,
                }
            )
        return self


def codes(runs: Runs) -> list[tuple[int, FlagCode]]:
    return [(f.task_key, f.code) for f in analyse_runs(runs.rows).findings]


def only_finding(runs: Runs) -> FlagFinding:
    [finding] = analyse_runs(runs.rows).findings
    return finding


def test_a_clean_task_gets_no_flags_and_full_rates() -> None:
    runs = Runs().add(7, "reference", "passed", "passed").add(7, "sample s1", "passed")
    runs.add(7, "sample s2", "failed").add(7, "probe null", "failed")

    analysis = analyse_runs(runs.rows)

    assert analysis.findings == []
    assert analysis.stats == {
        7: TaskStats(
            task_key=7,
            runs=5,
            reference_runs=2,
            reference_passes=2,
            sample_runs=2,
            sample_passes=1,
            reference_pass_rate=1.0,
            sample_pass_rate=0.5,
            sandbox_errors=0,
        )
    }


def test_a_task_nothing_ever_solves_is_unsolvable() -> None:
    runs = Runs().add(1, "reference", "failed", "timed_out", "out_of_memory")
    runs.add(1, "sample s1", "failed", "output_truncated").add(1, "sample s2", "failed")

    finding = only_finding(runs)

    assert finding.code is FlagCode.UNSOLVABLE
    assert finding.severity == 90
    assert finding.explanation == "reference passed 0 of 3 runs; 2 samples passed 0 of 3 runs"
    assert finding.evidence_run_ids == (1, 2, 3, 4, 5, 6)


def test_a_failing_reference_without_samples_is_unsolvable() -> None:
    finding = only_finding(Runs().add(1, "reference", "failed"))

    assert (finding.code, finding.explanation) == (
        FlagCode.UNSOLVABLE,
        "reference passed 0 of 1 run; no sample runs",
    )


def test_a_task_whose_samples_pass_but_reference_never_does_is_mislabeled() -> None:
    runs = Runs().add(1, "reference", *["failed"] * 6).add(1, "sample s1", "failed", "failed")
    runs.add(1, "sample s2", "passed", "passed")

    finding = only_finding(runs)

    assert finding.code is FlagCode.MISLABELED
    assert finding.severity == 80
    assert finding.explanation == "reference passed 0 of 6 runs; sample s2 passed 2 of 2 runs"
    # The reference's failures and the sample's passes; not the failing sample s1.
    assert finding.evidence_run_ids == (1, 2, 3, 4, 5, 6, 9, 10)


def test_a_reference_that_failed_every_run_of_a_flaky_check_is_not_called_wrong() -> None:
    # The check passes sample s1 once and fails it once: it flips on one solution, so six
    # failures of the reference may be six draws of its failing half (planted seed 2 drew them).
    runs = Runs().add(1, "reference", *["failed"] * 6).add(1, "sample s1", "passed", "failed")
    runs.add(1, "sample s2", "passed", "passed")

    codes = {finding.code for finding in analyse_runs(runs.rows).findings}

    assert codes == {FlagCode.FLAKY}


def test_a_mislabeled_explanation_names_at_most_five_passing_samples_in_natural_order() -> None:
    runs = Runs().add(1, "reference", "failed")
    for number in (10, 2, 1, 7, 3, 9, 4):
        runs.add(1, f"sample s{number}", "passed")

    assert only_finding(runs).explanation == (
        "reference passed 0 of 1 run; sample s1 passed 1 of 1 run; sample s2 passed 1 of 1 run;"
        " sample s3 passed 1 of 1 run; sample s4 passed 1 of 1 run; sample s7 passed 1 of 1 run;"
        " and 2 more passing samples"
    )


def test_a_solution_that_both_passes_and_fails_makes_the_task_flaky() -> None:
    runs = Runs().add(1, "reference", "passed", "failed", "passed")
    runs.add(1, "sample s1", "passed").add(1, "sample s2", "timed_out", "sandbox_error", "passed")

    finding = only_finding(runs)

    assert finding.code is FlagCode.FLAKY
    assert finding.severity == 60
    assert finding.explanation == (
        "same solution both passed and failed: reference passed 2 of 3 runs;"
        " sample s2 passed 1 of 2 runs (1 sandbox error not counted)"
    )
    # Every counted run of both flaky solutions; the steady s1 and the sandbox error are left out.
    assert finding.evidence_run_ids == (1, 2, 3, 5, 7)


def test_a_solution_that_fails_in_different_ways_is_not_flaky() -> None:
    runs = Runs().add(1, "reference", "passed").add(1, "sample s1", "failed", "timed_out")

    assert codes(runs) == []


def test_a_passing_probe_makes_the_task_reward_hackable() -> None:
    runs = Runs().add(1, "reference", "passed").add(1, "probe null", "passed", "passed")
    runs.add(1, "probe empty", "failed")

    finding = only_finding(runs)

    assert finding.code is FlagCode.REWARD_HACKABLE
    assert finding.severity == 70
    assert finding.explanation == "probe null passed 2 of 2 runs"
    assert finding.evidence_run_ids == (2, 3)


def test_sandbox_errors_are_counted_as_runs_but_never_as_failures() -> None:
    runs = Runs().add(1, "reference", "passed", "sandbox_error", "sandbox_error")
    runs.add(1, "sample s1", "sandbox_error").add(1, "probe null", "sandbox_error")

    analysis = analyse_runs(runs.rows)

    assert analysis.findings == []
    stats = analysis.stats[1]
    assert (stats.runs, stats.sandbox_errors) == (5, 4)
    assert (stats.reference_runs, stats.reference_passes, stats.reference_pass_rate) == (1, 1, 1.0)
    assert (stats.sample_runs, stats.sample_pass_rate) == (0, None)


def test_a_reference_with_only_sandbox_errors_is_not_called_unsolvable() -> None:
    runs = (
        Runs().add(1, "reference", "sandbox_error", "sandbox_error").add(1, "sample s1", "failed")
    )

    analysis = analyse_runs(runs.rows)

    assert analysis.findings == []
    assert analysis.stats[1].reference_pass_rate is None
    assert analysis.stats[1].sample_pass_rate == 0.0


def test_tasks_without_runs_get_empty_stats_and_no_flags() -> None:
    runs = Runs().add(5, "reference", "passed")

    analysis = analyse_runs(runs.rows, task_keys=[9, 5, 3])

    assert list(analysis.stats) == [3, 5, 9]
    assert analysis.stats[9] == TaskStats(
        task_key=9,
        runs=0,
        reference_runs=0,
        reference_passes=0,
        sample_runs=0,
        sample_passes=0,
        reference_pass_rate=None,
        sample_pass_rate=None,
        sandbox_errors=0,
    )
    assert analysis.findings == []
    assert analyse_runs([], task_keys=[1]).stats[1].runs == 0


def test_findings_are_sorted_by_task_then_severity_whatever_the_run_order() -> None:
    runs = Runs()
    runs.add(20, "reference", "passed", "failed").add(20, "probe null", "passed")
    runs.add(3, "reference", "failed").add(3, "sample s1", "passed", "passed")
    runs.add(3, "probe null", "passed")
    runs.add(11, "reference", "failed")
    expected = [
        (3, FlagCode.MISLABELED),
        (3, FlagCode.REWARD_HACKABLE),
        (11, FlagCode.UNSOLVABLE),
        (20, FlagCode.REWARD_HACKABLE),
        (20, FlagCode.FLAKY),
    ]

    first = analyse_runs(runs.rows)
    random.Random(4).shuffle(runs.rows)
    shuffled = analyse_runs(runs.rows)

    assert [(f.task_key, f.code) for f in first.findings] == expected
    assert shuffled.findings == first.findings
    assert [f.severity for f in first.findings] == [SEVERITY[code] for _, code in expected]


def test_a_dataframe_gives_the_same_analysis_as_a_list_of_dicts() -> None:
    runs = Runs().add(1, "reference", "failed").add(1, "sample 4", "passed")
    frame = pd.DataFrame(runs.rows)[list(reversed(RUN_COLUMNS))]
    frame["solution_key"] = frame["solution_key"].where(frame["solution_kind"] != "sample", 4)

    assert analyse_runs(frame) == analyse_runs(runs.rows)
    assert analyse_runs(frame).findings[0].explanation == (
        "reference passed 0 of 1 run; sample 4 passed 1 of 1 run"
    )


@pytest.mark.parametrize(
    ("column", "value", "message"),
    [
        ("outcome", "pass", "runs have unknown outcome value(s): pass"),
        ("solution_kind", "canonical", "runs have unknown solution_kind value(s): canonical"),
        ("task_key", None, "runs have missing values in column(s) task_key"),
    ],
)
def test_unknown_or_missing_values_are_refused_rather_than_counted_as_fails(
    column: str, value: Any, message: str
) -> None:
    runs = Runs().add(1, "reference", "passed")
    runs.rows[0][column] = value

    with pytest.raises(ValueError) as caught:
        analyse_runs(runs.rows)

    assert str(caught.value) == message


def test_a_table_without_a_required_column_is_refused() -> None:
    frame = pd.DataFrame(Runs().add(1, "reference", "passed").rows).drop(columns="outcome")

    with pytest.raises(ValueError, match="runs lack the column\\(s\\) outcome"):
        analyse_runs(frame)


def test_the_queue_ranks_two_strong_flags_above_one_and_many_weak_ones_below_a_strong_one():
    from inspector.detect.codes import combined_severity

    assert combined_severity([]) == 0
    assert combined_severity([90]) == 90
    assert combined_severity([90, 60]) > combined_severity([90])
    assert combined_severity([20, 20, 20]) < combined_severity([80])
    assert combined_severity([95, 95, 95]) <= 100
