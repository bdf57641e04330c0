"""The repository tasks' analysis (inspector/detect/swe.py) on runs written out by hand: each
flag is raised by the runs that show its defect, says what it rests on, and stays quiet on a
clean instance."""

from __future__ import annotations

import itertools

from inspector.detect.codes import FlagCode
from inspector.detect.swe import analyse_repo_runs, statement_lint

F2P = ["tests/test_text.py::test_titleize_keeps_acronyms"]
P2P = ["tests/test_text.py::test_camelize", "tests/test_text.py::test_underscore"]
_ids = itertools.count(1)


def run(kind, tests, *, outcome=None, key="", repeat=0, task=1, mode="isolated", **extra):
    passed = all(v == "passed" for v in tests.values()) and tests
    return {
        "run_id": next(_ids),
        "task_key": task,
        "solution_kind": kind,
        "solution_key": key,
        "repeat": repeat,
        "outcome": outcome or ("resolved" if passed else "unresolved"),
        "tests": tests,
        "collection_error": extra.pop("collection_error", ""),
        "reason": extra.pop("reason", ""),
        "mode": mode,
        **extra,
    }


def outcomes(f2p="passed", p2p="passed"):
    return {**{t: f2p for t in F2P}, **{t: p2p for t in P2P}}


def clean_runs(task=1, repeats=3):
    runs = [run("nofix", outcomes(f2p="failed"), repeat=i, task=task) for i in range(2)]
    runs += [run("reference", outcomes(), repeat=i, task=task) for i in range(repeats)]
    runs += [run("sample", outcomes(), key="m1#0", task=task)]
    runs += [run("sample", outcomes(f2p="failed"), key="m2#0", task=task)]
    runs += [run("probe", outcomes(f2p="failed"), key="empty-patch", task=task)]
    runs += [run("probe", outcomes(f2p="failed"), key="drop-hunk-1", task=task)]
    return runs


def tasks(**extra):
    return {1: {"fail_to_pass": F2P, "pass_to_pass": P2P, "leak": None, **extra}}


def codes(analysis):
    return sorted(f.code for f in analysis.findings)


def test_a_clean_instance_gets_no_flag():
    assert codes(analyse_repo_runs(clean_runs(), tasks())) == []


def test_a_gold_patch_that_never_resolves_makes_the_instance_unsolvable_naming_the_tests():
    runs = [r for r in clean_runs() if r["solution_kind"] != "reference"]
    runs += [run("reference", outcomes(f2p="failed"), repeat=i) for i in range(3)]
    analysis = analyse_repo_runs(runs, tasks())
    (finding,) = [f for f in analysis.findings if f.code == FlagCode.UNSOLVABLE]
    assert F2P[0] in finding.explanation
    assert finding.confidence == 0.95
    assert [row["outcome"] for row in finding.evidence["tests"][F2P[0]]] == ["failed"] * 3


def test_a_fail_to_pass_test_that_passes_without_the_fix_is_mislabeled():
    runs = [r for r in clean_runs() if r["solution_kind"] != "nofix"]
    runs += [run("nofix", outcomes(), repeat=i) for i in range(2)]
    analysis = analyse_repo_runs(runs, tasks())
    (finding,) = analysis.findings
    assert finding.code == FlagCode.MISLABELED
    assert "passed without the fix in every one of 2 runs" in finding.explanation
    assert finding.evidence["passes_without_fix"] == F2P


def test_a_listed_test_that_never_runs_is_mislabeled_and_not_unsolvable():
    ghost = "tests/test_text.py::test_that_does_not_exist"
    runs = clean_runs()
    for r in runs:
        r["outcome"] = "unresolved" if r["solution_kind"] == "reference" else r["outcome"]
    analysis = analyse_repo_runs(runs, tasks(pass_to_pass=[*P2P, ghost]))
    assert codes(analysis) == [FlagCode.MISLABELED]
    assert "never ran" in analysis.findings[0].explanation
    assert analysis.findings[0].evidence["never_runs"] == [ghost]


def test_a_test_that_changes_outcome_between_gold_repeats_is_flaky_with_its_outcomes():
    runs = [r for r in clean_runs() if r["solution_kind"] != "reference"]
    runs += [
        run("reference", outcomes(), repeat=0),
        run("reference", {**outcomes(), P2P[1]: "failed"}, repeat=1),
        run("reference", outcomes(), repeat=2),
    ]
    analysis = analyse_repo_runs(runs, tasks())
    (finding,) = [f for f in analysis.findings if f.code == FlagCode.FLAKY]
    assert P2P[1] in finding.explanation
    assert finding.evidence["tests"][P2P[1]]["gold"] == ["passed", "failed", "passed"]


def test_a_probe_that_resolves_makes_the_instance_reward_hackable_and_names_the_probe():
    runs = clean_runs() + [run("probe", outcomes(), key="conftest-pass-all")]
    analysis = analyse_repo_runs(runs, tasks())
    (finding,) = analysis.findings
    assert finding.code == FlagCode.REWARD_HACKABLE
    assert "conftest-pass-all" in finding.explanation


def test_a_probe_that_beats_every_instance_is_one_finding_about_the_harness_not_flags():
    runs = []
    for task in (1, 2, 3):
        runs += clean_runs(task=task) + [run("probe", outcomes(), key="conftest", task=task)]
    all_tasks = {t: tasks()[1] for t in (1, 2, 3)}
    analysis = analyse_repo_runs(runs, all_tasks)
    assert codes(analysis) == []
    (harness,) = analysis.harness_findings
    assert harness["probe"] == "conftest" and harness["tasks_beaten"] == 3


def test_instances_the_gold_never_resolves_do_not_count_against_a_harness_finding():
    runs = []
    for task in (1, 2, 3):
        runs += clean_runs(task=task) + [run("probe", outcomes(), key="conftest", task=task)]
    # Task 4's gold never resolves (a listed test never runs): the probe cannot resolve it either.
    broken = {t: "missing" for t in P2P}
    runs += [run("nofix", outcomes(f2p="failed"), repeat=i, task=4) for i in range(2)]
    runs += [run("reference", outcomes() | broken, repeat=i, task=4) for i in range(3)]
    runs += [run("probe", outcomes() | broken, key="conftest", task=4)]
    all_tasks = {t: tasks()[1] for t in (1, 2, 3, 4)}
    analysis = analyse_repo_runs(runs, all_tasks)
    (harness,) = analysis.harness_findings
    assert (harness["tasks_beaten"], harness["tasks_tried"]) == (3, 3)
    assert FlagCode.REWARD_HACKABLE not in codes(analysis)


def test_a_fix_reachable_in_history_is_a_solution_leak_naming_the_commit():
    leak = {"leak": True, "commits": ["a" * 40], "objects": ["b" * 40], "where": ["dangling"]}
    analysis = analyse_repo_runs(clean_runs(), tasks(leak=leak))
    (finding,) = analysis.findings
    assert finding.code == FlagCode.SOLUTION_LEAK
    assert "aaaaaaaaaaaa" in finding.explanation and "dangling" in finding.explanation


def test_a_gold_patch_missing_a_hunk_that_still_resolves_means_weak_tests_naming_the_hunk():
    runs = clean_runs() + [run("probe", outcomes(), key="drop-hunk-2")]
    hunks = {"drop-hunk-2": {"file": "inflection/__init__.py", "header": "@@ -120,6 +120,8 @@"}}
    analysis = analyse_repo_runs(runs, tasks(hunks=hunks))
    (finding,) = analysis.findings
    assert finding.code == FlagCode.WEAK_TESTS
    assert "inflection/__init__.py @@ -120,6 +120,8 @@" in finding.explanation
    assert "1 of 2 hunks" in finding.explanation


def test_samples_that_all_resolve_give_no_signal():
    runs = [r for r in clean_runs() if r["solution_kind"] != "sample"]
    runs += [run("sample", outcomes(), key=f"m{i}#0") for i in range(4)]
    analysis = analyse_repo_runs(runs, tasks())
    assert codes(analysis) == [FlagCode.NO_SIGNAL]


def test_an_environment_that_does_not_build_is_broken_and_nothing_else_is_concluded():
    runs = [
        run(kind, {}, outcome="build_failed", reason="Step 2/3 : RUN false\nerror: exit 1")
        for kind in ("nofix", "reference", "sample", "probe")
    ]
    analysis = analyse_repo_runs(runs, tasks())
    (finding,) = analysis.findings
    assert finding.code == FlagCode.BROKEN_ENVIRONMENT
    assert finding.evidence["stage"] == "build" and "RUN false" in finding.evidence["log"]


def test_tests_that_cannot_be_collected_with_the_gold_patch_are_a_broken_environment():
    runs = [
        run("reference", {}, repeat=i, collection_error="ImportError: No module named 'yaml'")
        for i in range(3)
    ]
    analysis = analyse_repo_runs(runs, tasks())
    (finding,) = analysis.findings
    assert finding.code == FlagCode.BROKEN_ENVIRONMENT
    assert "No module named 'yaml'" in finding.explanation


def test_a_sandbox_error_says_nothing_about_the_instance():
    runs = clean_runs() + [run("probe", outcomes(), key="conftest", outcome="sandbox_error")]
    assert codes(analyse_repo_runs(runs, tasks())) == []


SOURCE = {
    "problem_statement": "titleize() lowercases acronyms such as 'NASA'.",
    "FAIL_TO_PASS": F2P,
    "patch": (
        "diff --git a/inflection/__init__.py b/inflection/__init__.py\n"
        "--- a/inflection/__init__.py\n+++ b/inflection/__init__.py\n"
        "@@ -380,3 +380,3 @@ def titleize(word):\n-    return x\n+    return y\n"
    ),
}


def test_a_statement_that_names_the_function_the_tests_exercise_has_no_lint():
    assert statement_lint(SOURCE) == []


def test_a_statement_that_names_nothing_the_tests_exercise_gets_a_lint_finding():
    vague = {**SOURCE, "problem_statement": "Something is off with some words, please fix."}
    (finding,) = statement_lint(vague)
    assert finding["field"] == "problem_statement"
    assert "titleize" in finding["message"]
