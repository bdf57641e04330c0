"""bench/real.py's scoring of a report against the published truth, which bench/real.py and
bench/inspection_speed.py print beside their figures: per flag, what was right, wrong and
missed, and the blocking flags raised on tasks with no known defect."""

from __future__ import annotations

from bench import real
from inspector.detect.codes import ADVISORY


def report_line(task_id: str, *flags: str) -> dict:
    return {"task_id": task_id, "flags": list(flags), "flag_explanations": {}}


def truth() -> real.Truth:
    return real.Truth(
        weak_tests={"T/1": "a sample passes yet is wrong", "T/2": "the same"},
        slow_reference={"T/3": "the reference times out"},
        tasks=["T/1", "T/2", "T/3", "T/4", "T/5"],
    )


def row(table: list[str], code: str) -> list[str]:
    return next(line.split() for line in table if line.split()[0] == code)


def test_each_flag_is_scored_against_its_truth_with_its_misses_and_false_ones():
    report = [
        report_line("T/1", "weak_tests"),
        report_line("T/4", "weak_tests"),
        report_line("T/3"),
        report_line("T/2"),
    ]

    table = real.flag_table(report, truth())

    # flag, truth, flagged, true, false, missed, precision (and its mark), recall (and mark)
    assert row(table, "weak_tests")[:8] == ["weak_tests", "2", "2", "1", "1", "1", "0.50", "!"]
    assert row(table, "slow_reference") == ["slow_reference", "1", "0", "0", "0", "1", "-", "0.00"]


def test_a_flag_without_a_truth_is_counted_but_not_scored():
    table = real.flag_table([report_line("T/5", "duplicate")], truth())

    assert row(table, "duplicate") == ["duplicate", "-", "1", "-", "-", "-", "-", "-"]


def test_blocking_flags_are_listed_only_for_tasks_with_no_known_defect():
    advisory = sorted(ADVISORY)[0]
    report = [
        report_line("T/1", "unsolvable"),  # a known defect: not listed
        report_line("T/4", "unsolvable", advisory),
        report_line("T/5", advisory),  # advisory only: not blocking
    ]

    assert real.blocking_without_defect(report, truth()) == {"T/4": ["unsolvable"]}
