"""Fast tests of the planted-defect benchmark's builder (bench/planted/), without the platform:
the set is reproducible for a seed, well formed, readable by the platform's importer, and every
planted defect is what it claims. The code they run is HumanEval's, or derived from it by the
builder (rewrites, single mutations, the hand-written readings), in a subprocess of their own
(not the builder's runner)."""

from __future__ import annotations

import ast
import collections
import json
import os
import random
import subprocess
import sys

import pytest

from bench.planted.build import build_planted_set, load_humaneval
from bench.planted.catalogue import EXCLUDED, FLAGS, KINDS, NATURAL_DUPLICATES, READINGS
from bench.planted.checks import broken_expectations, one_assert, with_final_assert, without_asserts
from bench.planted.mutation import mutants
from bench.planted.plantedset import SAMPLE_ROLES
from bench.planted.rewrites import correct_candidates
from bench.planted.scoring import Score, print_score
from bench.planted.write import truth_json, write_planted_set
from inspector.formats.humaneval import read_taskset

# Runs each program of a JSON list in a fresh namespace of one child process; prints pass/fail.
RUNNER = r"""
import io, json, signal, sys

def _alarm(*_):
    raise TimeoutError

signal.signal(signal.SIGALRM, _alarm)
results = []
for job in json.load(sys.stdin):
    ns = {"__name__": "__test__"}
    sys.stdout = io.StringIO()
    signal.alarm(10)
    try:
        exec(compile(job["program"], "<planted>", "exec"), ns)
        ns["check"](ns[job["entry_point"]])
        ok = True
    except BaseException:
        ok = False
    finally:
        signal.alarm(0)
        sys.stdout = sys.__stdout__
    results.append(ok)
print(json.dumps(results))
"""


def run_checks(jobs: list[tuple[str, str, str, str]], env: dict | None = None) -> list[bool]:
    """Pass/fail of each (prompt, completion, test, entry point), in one subprocess."""
    payload = [
        {"program": prompt + completion + "\n" + test, "entry_point": entry}
        for prompt, completion, test, entry in jobs
    ]
    base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
    done = subprocess.run(
        [sys.executable, "-c", RUNNER],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        timeout=300,
        env={**base, **(env or {})},
        cwd="/tmp",
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def built():
    return build_planted_set(seed=0)


@pytest.fixture(scope="module")
def humaneval():
    return {task["task_id"]: task for task in load_humaneval()}


def _dumped(planted_set) -> str:
    return json.dumps(
        [
            planted_set.tasks,
            planted_set.samples,
            truth_json(planted_set.truth),
            planted_set.kinds,
            planted_set.roles,
        ]
    )


def _by_kind(built) -> dict[str, list[str]]:
    kinds: dict[str, list[str]] = collections.defaultdict(list)
    for task_id, kind in built.kinds.items():
        kinds[kind].append(task_id)
    return kinds


def _chosen(built, per_kind: int = 2) -> list[str]:
    """A seeded handful of tasks of every kind."""
    rng = random.Random(1234)
    chosen = []
    for _, task_ids in sorted(_by_kind(built).items()):
        chosen += rng.sample(sorted(task_ids), min(per_kind, len(task_ids)))
    return chosen


# --- The set -------------------------------------------------------------------------------------


def test_same_seed_same_set_and_files(built, tmp_path):
    again = build_planted_set(seed=0)
    assert _dumped(again) == _dumped(built)
    first = write_planted_set(tmp_path / "a", built)
    second = write_planted_set(tmp_path / "b", again)
    for one, other in zip(first, second, strict=True):
        assert one.read_bytes() == other.read_bytes()
    truth = json.loads(first[2].read_text())
    assert truth == {task_id: sorted(flags) for task_id, flags in built.truth.items()}


def test_well_formed(built, humaneval):
    ids = [task["task_id"] for task in built.tasks]
    assert len(ids) == len(set(ids))
    assert set(built.truth) == set(ids) == set(built.kinds)
    assert all(flags <= set(FLAGS) for flags in built.truth.values())
    # All of HumanEval but what was left out, plus the near copies.
    copies = [task_id for task_id in ids if task_id.startswith("HumanEval/dup-")]
    assert set(ids) - set(copies) == set(humaneval) - set(built.left_out)
    assert set(built.left_out) == set(EXCLUDED)
    per_task = collections.Counter(sample["task_id"] for sample in built.samples)
    assert set(per_task) == set(ids) and set(per_task.values()) == {6}
    keys = [(sample["task_id"], sample["sample_id"]) for sample in built.samples]
    assert len(keys) == len(set(keys))
    assert {(task_id, sample) for task_id, roles in built.roles.items() for sample in roles} == set(
        keys
    )
    assert {r for roles in built.roles.values() for r in roles.values()} <= set(SAMPLE_ROLES)
    for task in built.tasks:
        compile(task["prompt"] + task["canonical_solution"] + "\n" + task["test"], "t", "exec")
    for sample in built.samples:
        task = humaneval.get(sample["task_id"]) or next(
            t for t in built.tasks if t["task_id"] == sample["task_id"]
        )
        compile(task["prompt"] + sample["completion"], "s", "exec")


def test_counts_and_truth_rules(built):
    counts = built.counts()
    for kind in ("mislabeled", "broken_expectation", "ambiguous"):
        assert counts[kind] >= 10, counts
    assert counts["flaky/random"] + counts["flaky/hash"] >= 10
    assert counts["flaky/hash"] >= 1
    assert counts["weak_tests/no-asserts"] + counts["weak_tests/one-assert"] >= 10
    assert counts["duplicate/copy"] == counts["duplicate/original"] >= 4
    assert counts["answer_leak"] >= 5 and counts["no_signal"] >= 8
    clean = [task_id for task_id, kind in built.kinds.items() if kind == "clean"]
    assert len(clean) >= 60
    for task_id, kind in built.kinds.items():
        flags = built.truth[task_id]
        if kind == "clean":
            assert flags == set()
        elif kind == "broken_expectation":
            assert flags == {"unsolvable", "no_signal"}
        elif kind.startswith("weak_tests/"):
            assert "weak_tests" in flags <= {"weak_tests", "reward_hackable", "no_signal"}
        else:
            flag = KINDS[kind.split("/")[0]][0]
            assert flags == {flag}, (task_id, kind, flags)
    # A check without asserts lets `pass` through; every one of those says so.
    for task_id in _by_kind(built)["weak_tests/no-asserts"]:
        assert "reward_hackable" in built.truth[task_id]


def test_the_platform_reads_the_files(built, tmp_path):
    tasks_path, samples_path, _ = write_planted_set(tmp_path, built)
    with tasks_path.open("rb") as tasks, samples_path.open("rb") as samples:
        parsed = read_taskset(tasks, tasks_name="tasks.jsonl", samples_file=samples)
    assert len(parsed.tasks) == len(built.tasks)
    assert len(parsed.samples) == len(built.samples)


# --- The defects are real ------------------------------------------------------------------------


def test_run_based_truth_matches_independent_runs(built, humaneval):
    """For a few tasks of every kind, run the reference, `pass` and every sample against the
    deterministic check (for flaky tasks: HumanEval's own) and derive the run-based flags."""
    chosen = _chosen(built)
    tasks = {task["task_id"]: task for task in built.tasks}
    samples = collections.defaultdict(list)
    for sample in built.samples:
        samples[sample["task_id"]].append(sample)
    jobs, spans = [], []
    for task_id in chosen:
        task = tasks[task_id]
        test = task["test"]
        if built.kinds[task_id].startswith("flaky/"):
            test = humaneval[task_id]["test"]
            assert task["test"].startswith("import random\n")
        completions = [task["canonical_solution"], "    pass\n"]
        completions += [sample["completion"] for sample in samples[task_id]]
        spans.append((task_id, len(jobs), len(completions)))
        jobs += [(task["prompt"], c, test, task["entry_point"]) for c in completions]
    results = run_checks(jobs)
    for task_id, start, count in spans:
        reference, null, *passed = results[start : start + count]
        kind = built.kinds[task_id]
        flags = set()
        if not reference:
            flags.add("mislabeled" if any(passed) else "unsolvable")
        if null:
            flags.add("reward_hackable")
        if len(set(passed)) == 1:
            flags.add("no_signal")
        main = KINDS[kind.split("/")[0]][0] if kind != "clean" else None
        assert built.truth[task_id] == flags | ({main} if main else set()), (task_id, kind)
        roles = built.roles[task_id]
        for sample, ok in zip(samples[task_id], passed, strict=True):
            role = roles[sample["sample_id"]]
            if kind == "broken_expectation":
                assert not ok, (task_id, role)  # nothing passes a broken expectation
            elif role in ("correct", "reading-a"):
                assert ok, (task_id, role)
            elif not kind.startswith("weak_tests/"):  # a weak check may let a wrong one pass
                assert not ok, (task_id, role)


def test_each_modified_check_is_what_it_claims(built, humaneval):
    by_kind = _by_kind(built)
    tasks = {task["task_id"]: task for task in built.tasks}
    rng = random.Random(99)

    def pick(kind: str, count: int = 3) -> list[dict]:
        return [tasks[t] for t in rng.sample(sorted(by_kind[kind]), min(count, len(by_kind[kind])))]

    jobs, expected = [], []

    def expect(task: dict, completion: str, test: str, ok: bool, why: str) -> None:
        jobs.append((task["prompt"], completion, test, task["entry_point"]))
        expected.append((ok, f"{task['task_id']}: {why}"))

    for task in pick("mislabeled"):
        original = humaneval[task["task_id"]]
        assert task["test"] == original["test"]
        assert task["canonical_solution"] != original["canonical_solution"]
        expect(task, task["canonical_solution"], task["test"], False, "wrong reference fails")
        expect(task, original["canonical_solution"], task["test"], True, "canonical passes")
    for task in pick("broken_expectation"):
        original = humaneval[task["task_id"]]
        changed = [
            (a, b)
            for a, b in zip(original["test"].splitlines(), task["test"].splitlines(), strict=True)
            if a != b
        ]
        assert len(changed) == 1 and "assert" in changed[0][1]
        expect(task, task["canonical_solution"], original["test"], True, "passes the original")
        expect(task, task["canonical_solution"], task["test"], False, "fails the broken check")
    for task in pick("weak_tests/no-asserts"):
        check = _check(task["test"])
        assert not any(isinstance(node, ast.Assert) for node in ast.walk(check))
        assert "candidate(" in ast.unparse(check)
        expect(task, task["canonical_solution"], task["test"], True, "passes without asserts")
        expect(task, "    pass\n", task["test"], True, "`pass` passes without asserts")
    for task in pick("weak_tests/one-assert"):
        asserts = [n for n in ast.walk(_check(task["test"])) if isinstance(n, ast.Assert)]
        assert len(asserts) == 1 and "candidate(" in ast.unparse(asserts[0])
        originals = [
            n
            for n in ast.walk(_check(humaneval[task["task_id"]]["test"]))
            if isinstance(n, ast.Assert) and "candidate(" in ast.unparse(n)
        ]
        assert len(originals) >= 2
        first = min(originals, key=lambda n: (n.lineno, n.col_offset))
        assert ast.dump(asserts[0]) == ast.dump(first)
        null_passes = "reward_hackable" in built.truth[task["task_id"]]
        expect(task, task["canonical_solution"], task["test"], True, "passes its one assert")
        expect(task, "    pass\n", task["test"], null_passes, "`pass` as the truth says")
    for task in pick("answer_leak"):
        line = built.details[task["task_id"]].removeprefix("Hint: ")
        assert line in task["prompt"] and line in task["canonical_solution"]
        assert line not in humaneval[task["task_id"]]["prompt"]
        expect(task, task["canonical_solution"], task["test"], True, "runs with the hint")
    results = run_checks(jobs)
    for ok, (want, why) in zip(results, expected, strict=True):
        assert ok == want, why


def test_flaky_checks_pass_and_fail(built):
    by_kind = _by_kind(built)
    tasks = {task["task_id"]: task for task in built.tasks}
    for task_id in sorted(by_kind["flaky/random"])[:3]:
        task = tasks[task_id]
        assert task["test"].rstrip().endswith("assert random.random() < 0.5")
        outcomes = []
        for value in (0.25, 0.75):  # what random.random() returns in the check
            patched = f"import random\nrandom.random = lambda: {value}\n" + task["prompt"]
            job = (patched, task["canonical_solution"], task["test"], task["entry_point"])
            outcomes += run_checks([job])
        assert outcomes == [True, False], task_id
    for task_id in sorted(by_kind["flaky/hash"])[:2]:
        task = tasks[task_id]
        assert "hash(" in task["test"]
        job = (task["prompt"], task["canonical_solution"], task["test"], task["entry_point"])
        seen = {run_checks([job], env={"PYTHONHASHSEED": str(seed)})[0] for seed in range(8)}
        assert seen == {True, False}, task_id


def test_duplicates_are_near_copies(built, humaneval):
    from sklearn.feature_extraction.text import TfidfVectorizer

    tasks = {task["task_id"]: task for task in built.tasks}
    pairs = [
        (built.details[copy].split(":")[0].removeprefix("near copy of "), copy)
        for copy, kind in built.kinds.items()
        if kind == "duplicate/copy"
    ]
    pairs += list(NATURAL_DUPLICATES)
    assert {t for pair in pairs for t in pair} == {
        task_id for task_id, flags in built.truth.items() if "duplicate" in flags
    }
    ids = list(tasks)
    vectors = TfidfVectorizer(token_pattern=r"(?u)\b\w+\b", sublinear_tf=True).fit_transform(
        [tasks[task_id]["prompt"] for task_id in ids]
    )
    similarity = (vectors @ vectors.T).toarray()
    index = {task_id: position for position, task_id in enumerate(ids)}
    for original, copy in pairs:
        assert similarity[index[original], index[copy]] >= 0.93, (original, copy)
        if copy.startswith("HumanEval/dup-"):
            assert tasks[copy]["prompt"] != humaneval[original]["prompt"]
            assert tasks[copy]["test"] == humaneval[original]["test"]
            changed = set(tasks[copy]["prompt"].split()) ^ set(tasks[original]["prompt"].split())
            assert 0 < len(changed) <= 6
    # No other pair of prompts comes near.
    planted_pairs = {frozenset(pair) for pair in pairs}
    for i, j in zip(*((similarity >= 0.85).nonzero()), strict=True):
        if i < j:
            assert frozenset((ids[i], ids[j])) in planted_pairs, (ids[i], ids[j])


def test_readings_are_handwritten_and_rejected(built, humaneval):
    ambiguous = _by_kind(built)["ambiguous"]
    assert set(ambiguous) <= set(READINGS)
    jobs = []
    for task_id in ambiguous:
        task = humaneval[task_id]
        jobs.append((task["prompt"], READINGS[task_id], task["test"], task["entry_point"]))
    assert not any(run_checks(jobs))
    for task_id in ambiguous:
        roles = collections.Counter(built.roles[task_id].values())
        assert roles == {"reading-a": 3, "reading-b": 3}


# --- Pieces --------------------------------------------------------------------------------------

TOY = {
    "task_id": "toy/1",
    "prompt": 'def f(x):\n    """Return x plus one."""\n',
    "canonical_solution": "    y = x + 1\n    return y\n",
    "test": (
        "def check(candidate):\n"
        "    assert candidate(1) == 2\n"
        "    for v in [3, 4]:\n"
        "        assert candidate(v) == v + 1, 'msg'\n"
        "    assert candidate(0) == 1\n"
    ),
    "entry_point": "f",
}


def test_check_edits_on_a_toy_task():
    bare = without_asserts(TOY)
    assert "assert" not in bare and "candidate(v) == v + 1" in bare
    one = one_assert(TOY)
    assert one == "def check(candidate):\n    assert candidate(1) == 2\n"
    (broken, said), *_ = broken_expectations(TOY)
    assert "candidate(1) == 3" in broken and "expected 2 changed to 3" in said
    flaky = with_final_assert(TOY, "assert random.random() < 0.5")
    assert flaky.startswith("import random\n")
    assert flaky.endswith("    assert random.random() < 0.5\n")


def test_rewrites_and_mutants_on_a_toy_task():
    rewrites = correct_candidates(TOY)
    assert rewrites[0] == TOY["canonical_solution"] and len(rewrites) == len(set(rewrites)) > 2
    assert any("y" not in _names(text) for text in rewrites[1:])  # a local renamed
    found = {m.description: m.completion for m in mutants(TOY["canonical_solution"], "")}
    assert found["line 1: `+` -> `-`"] == "    y = x - 1\n    return y\n"
    assert found["line 1: 1 -> 2"] == "    y = x + 2\n    return y\n"
    for completion in found.values():
        ast.parse(TOY["prompt"] + completion)


def test_score_counts_and_tolerates_unknown_flags(capsys):
    truth = {"a": {"flaky"}, "b": set(), "c": {"unsolvable", "weak_tests"}, "d": set()}
    kinds = {"a": "flaky/random", "b": "clean", "c": "broken_expectation", "d": "clean"}
    report = [
        {"task_id": "a", "flags": ["flaky"], "flag_confidence": {"flaky": 0.9}},
        {"task_id": "b", "flags": ["anomaly"], "flag_explanations": {"anomaly": "odd"}},
        {"task_id": "c", "flags": ["unsolvable"]},
        {"task_id": "d", "flags": []},
    ]
    score = Score()
    score.add(report, truth, kinds)
    assert (score.planted["flaky"], score.raised["flaky"], score.hits["flaky"]) == (1, 1, 1)
    assert score.missed["weak_tests"] == {"c": 1}
    assert score.false["anomaly"] == {"b": 1}
    assert (score.clean_tasks, score.clean_flagged) == (2, 1)
    assert "anomaly" in score.codes()
    print_score(score, kinds)
    out = capsys.readouterr().out
    assert "clean tasks with any flag: 1 of 2" in out and "weak_tests: c" in out
    assert "anomaly: b (clean) odd" in out


def _check(test: str) -> ast.FunctionDef:
    tree = ast.parse(test)
    return next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "check")


def _names(text: str) -> set[str]:
    return {
        node.id for node in ast.walk(ast.parse("def w():\n" + text)) if isinstance(node, ast.Name)
    }
