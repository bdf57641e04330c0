"""The terminal side of the analysis, on tables of runs (no Docker, no database)."""

from __future__ import annotations

import itertools

from inspector.detect.codes import FlagCode
from inspector.detect.terminal import analyse_terminal_runs

PROBES = ("nop", "reward-file", "conftest-hook")
_ids = itertools.count(1)


def runs_of(task, *, reference="passed", beaten=(), beaten_isolated=(), build_failed=False):
    """One task's runs: 3 reference runs, each probe in faithful and isolated mode."""
    if build_failed:
        return [
            run(task, "reference", "reference", "build_failed", reason="RUN exit 3")
            for _ in range(3)
        ]
    rows = [run(task, "reference", "reference", reference) for _ in range(3)]
    for probe in PROBES:
        rows.append(run(task, "probe", probe, "passed" if probe in beaten else "failed"))
        rows.append(
            run(
                task,
                "probe",
                probe,
                "passed" if probe in beaten_isolated else "failed",
                mode="isolated",
            )
        )
    return rows


def run(task, kind, key, outcome, *, mode="faithful", reason=""):
    return {
        "run_id": next(_ids),
        "task_key": task,
        "solution_kind": kind,
        "solution_key": key,
        "outcome": outcome,
        "mode": mode,
        "reason": reason,
    }


def codes(analysis, task):
    return [str(f.code) for f in analysis.findings if f.task_key == task]


def test_a_task_whose_image_does_not_build_is_only_flagged_broken_environment():
    rows = runs_of(1, build_failed=True) + runs_of(2) + runs_of(3)
    analysis = analyse_terminal_runs(rows, mode="faithful")
    assert codes(analysis, 1) == ["broken_environment"]
    (finding,) = analysis.findings
    assert "RUN exit 3" in finding.explanation
    assert finding.evidence_run_ids


def test_a_probe_that_passes_is_named_with_the_mode_and_whether_isolation_defeats_it():
    rows = (
        runs_of(1, beaten=("reward-file",))
        + runs_of(2, beaten=("conftest-hook",), beaten_isolated=("conftest-hook",))
        + runs_of(3)
        + runs_of(4)
    )
    analysis = analyse_terminal_runs(rows, mode="faithful")
    (one,) = [f for f in analysis.findings if f.task_key == 1]
    assert one.code == FlagCode.REWARD_HACKABLE
    assert "reward-file" in one.explanation and "faithful mode" in one.explanation
    assert "isolated mode defeats reward-file" in one.explanation
    (two,) = [f for f in analysis.findings if f.task_key == 2]
    assert "isolated mode does not defeat conftest-hook" in two.explanation
    assert analysis.probe_results[1]["reward-file"] == {"faithful": True, "isolated": False}
    assert analysis.harness_findings == []


def test_a_probe_that_beats_nearly_every_task_is_one_finding_on_the_harness_not_a_flag_each():
    rows = []
    for task in range(1, 11):
        rows += runs_of(task, beaten=("reward-file",) + (("nop",) if task == 7 else ()))
    analysis = analyse_terminal_runs(rows, mode="faithful", harness_share=0.9)
    (finding,) = analysis.harness_findings
    assert finding["probe"] == "reward-file"
    assert finding["tasks_beaten"] == 10 and finding["tasks_tried"] == 10
    assert finding["isolated_defeats"] is True
    hackable = [f for f in analysis.findings if f.code == FlagCode.REWARD_HACKABLE]
    # Only task 7, and only for the nop probe: reward-file is the harness's problem.
    assert [f.task_key for f in hackable] == [7]
    assert "reward-file" not in hackable[0].explanation


def test_a_small_set_never_turns_a_task_flag_into_a_harness_finding():
    rows = runs_of(1, beaten=("nop",)) + runs_of(2, beaten=("nop",))
    analysis = analyse_terminal_runs(rows, mode="faithful", harness_min_tasks=3)
    assert analysis.harness_findings == []
    assert codes(analysis, 1) == ["reward_hackable"] and codes(analysis, 2) == ["reward_hackable"]


def test_isolated_sets_judge_only_isolated_runs():
    rows = [run(1, "reference", "reference", "passed", mode="isolated") for _ in range(3)]
    rows += [run(1, "probe", "reward-file", "failed", mode="isolated")]
    analysis = analyse_terminal_runs(rows, mode="isolated")
    assert analysis.findings == []
    assert analysis.stats[1].reference_pass_rate == 1.0


def test_a_wrong_reference_and_a_flaky_check_are_judged_as_for_function_tasks():
    rows = runs_of(1, reference="failed") + [run(1, "sample", "awk", "passed")]
    rows += [run(2, "reference", "reference", o) for o in ("passed", "failed", "passed")]
    analysis = analyse_terminal_runs(rows, mode="faithful")
    assert codes(analysis, 1) == ["mislabeled"]
    assert codes(analysis, 2) == ["flaky"]
