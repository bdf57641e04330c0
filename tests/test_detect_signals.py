"""Signals over behaviour vectors and prompts: surviving mutants, behaviour groups (ambiguous),
a reference that disagrees with the passing samples, learnability, near-duplicate prompts,
answer leaks and anomalies. Mostly on hand-made vectors; the ambiguity test runs our own
fixture samples in subprocesses."""

from __future__ import annotations

import hashlib
import itertools
import json
import random
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest

from inspector.detect.behaviour import (
    SKIPPED,
    TIMEOUT,
    BehaviourVector,
    behaviour_inputs,
    behaviour_program,
    parse_behaviour,
)
from inspector.detect.signals import (
    AnomalyScore,
    anomalies,
    answer_leak,
    learnability,
    learnability_distribution,
    near_duplicates,
    no_signal,
    reference_disagrees,
    sample_groups,
    surviving_mutants,
)
from inspector.formats.humaneval import humaneval_program


def v(*tokens: str, key: str = "k", inputs: tuple[str, ...] = ()) -> BehaviourVector:
    """A vector from short tokens: "a" is a value shown as 'a'; "!E", "~timeout", "~skipped"
    stand for themselves."""
    digests, reprs = [], []
    for token in tokens:
        if token.startswith(("!", "~")):
            digests.append(token)
            reprs.append(None if token == SKIPPED else f"raised {token[1:]}")
        else:
            digests.append(hashlib.sha256(token.encode()).hexdigest()[:12])
            reprs.append(repr(token))
    return BehaviourVector(
        inputs_key=key,
        digests=tuple(digests),
        reprs=tuple(reprs),
        inputs=inputs or tuple(f"{i}" for i in range(len(tokens))),
    )


# --- surviving mutants ---------------------------------------------------------------------------


def test_equivalent_mutants_never_count() -> None:
    reference = v("a", "b", "c")

    result = surviving_mutants(
        reference,
        {
            "m1": (True, v("a", "b", "c")),  # passes and behaves the same: equivalent
            "m2": (True, v("a", "x", "c")),  # passes and differs: survives
            "m3": (False, v("a", "y", "c")),  # the check kills it
            "m4": (False, v("a", "b", "c")),  # killed: the check saw a difference we did not
            "m5": (True, None),  # no vector: unknown
        },
    )

    assert [s.mutant_id for s in result.survivors] == ["m2"]
    assert (result.killed, result.equivalent, result.unknown) == (2, 1, 1)
    assert result.survivor_share == pytest.approx(1 / 3)
    assert result.weak
    survivor = result.survivors[0]
    assert (survivor.difference.input, survivor.difference.left, survivor.difference.right) == (
        "1",
        "'b'",
        "'x'",
    )
    assert "m2" in result.explanation and "'b'" in result.explanation


def test_a_task_whose_mutants_are_all_equivalent_has_no_share() -> None:
    result = surviving_mutants(v("a", "b"), {"m1": (True, v("a", "b"))})

    assert result.survivor_share is None and not result.weak and result.confidence == 0.0


def test_inputs_the_reference_timed_out_on_or_that_were_skipped_are_not_compared() -> None:
    reference = v("a", TIMEOUT, "c", "d")

    result = surviving_mutants(reference, {"m1": (True, v("a", "z", SKIPPED, "d"))})

    assert result.equivalent == 1 and result.survivors == []


def test_more_survivors_give_more_confidence_that_the_tests_are_weak() -> None:
    reference = v("a", "b")
    few = {f"m{i}": (i == 0, v("a", "x")) for i in range(20)}
    many = {f"m{i}": (i < 10, v("a", "x")) for i in range(20)}

    assert surviving_mutants(reference, few).confidence < 0.3
    assert surviving_mutants(reference, many).confidence > 0.95


def test_vectors_made_on_different_inputs_are_refused() -> None:
    with pytest.raises(ValueError):
        surviving_mutants(v("a", "b"), {"m1": (True, v("a", "b", key="other"))})


# --- behaviour groups ----------------------------------------------------------------------------


def test_identical_vectors_always_share_a_group() -> None:
    vectors = {f"s{i}": v("a", "b", "c") for i in range(6)} | {"s9": v("a", "b", "d")}
    passed = {key: 1.0 for key in vectors}

    for tolerance in (0.0, 0.4):
        result = sample_groups(vectors, passed, tolerance=tolerance)
        [group] = [g for g in result.groups if "s0" in g.members]
        assert {f"s{i}" for i in range(6)} <= set(group.members)
    assert sample_groups(vectors, passed).cluster_count == 2
    assert sample_groups(vectors, passed, tolerance=0.4).cluster_count == 1


def test_a_rejected_group_of_one_named_models_samples_is_its_habit_however_large() -> None:
    vectors = {
        **{f"a{i}": v("a", "b", "c") for i in range(5)},
        **{f"r{i}": v("a", "x", "y") for i in range(5)},
    }
    passed = {key: 1.0 if key.startswith("a") else 0.0 for key in vectors}

    one_model = {key: "codegen" for key in vectors}
    two_models = {**one_model, "r3": "llama", "r4": "llama"}

    assert not sample_groups(vectors, passed, models=one_model).ambiguous
    assert sample_groups(vectors, passed, models=two_models).ambiguous
    assert sample_groups(vectors, passed).ambiguous  # models unknown: five alike are a reading


def test_two_consistent_groups_the_check_treats_differently_are_ambiguous() -> None:
    vectors = {
        "s1": v("a", "b", "c"),
        "s2": v("a", "b", "c"),
        "s3": v("a", "b", "c"),
        "s4": v("a", "x", "y"),
        "s5": v("a", "x", "y"),
        "s6": v("q", "q", "!IndexError"),
    }
    passed = {"s1": 1.0, "s2": 1.0, "s3": 0.5 + 0.5, "s4": 0.0, "s5": 0.0, "s6": 0.0}

    result = sample_groups(vectors, passed, models={"s4": "model-a", "s5": "model-b"})

    # Two samples of one model sharing a behaviour are that model's habit, not a reading.
    assert not sample_groups(vectors, passed, models={"s4": "model-a", "s5": "model-a"}).ambiguous
    assert result.ambiguous
    assert result.accepted.members == ("s1", "s2", "s3")
    assert result.rejected.members == ("s4", "s5")
    assert result.cluster_count == 3 and result.sizeable == 2
    assert (result.difference.input, result.difference.left, result.difference.right) == (
        "1",
        "'b'",
        "'x'",
    )
    assert result.confidence == pytest.approx(0.8)
    assert "s1" in result.explanation and "s4" in result.explanation


def test_groups_the_check_accepts_alike_are_not_ambiguous() -> None:
    vectors = {"s1": v("a", "b"), "s2": v("a", "b"), "s3": v("a", "x"), "s4": v("a", "x")}

    result = sample_groups(vectors, {key: 1.0 for key in vectors})

    assert not result.ambiguous and result.cluster_count == 2 and result.confidence == 0.0


def test_a_rejected_group_that_crashes_or_returns_a_constant_is_not_a_reading() -> None:
    accepted = {"s1": v("a", "b", "c"), "s2": v("a", "b", "c")}
    crashing = {"s3": v("a", "!TypeError", "c"), "s4": v("a", "!TypeError", "c")}
    constant = {"s3": v("n", "n", "n"), "s4": v("n", "n", "n")}
    rates = {"s1": 1.0, "s2": 1.0, "s3": 0.0, "s4": 0.0}

    assert not sample_groups(accepted | crashing, rates).ambiguous
    assert not sample_groups(accepted | constant, rates).ambiguous


def test_small_groups_and_differences_outside_the_references_domain_do_not_count() -> None:
    vectors = {"s1": v("a", "b"), "s2": v("a", "b"), "s3": v("a", "b"), "s4": v("a", "x")}
    rates = {"s1": 1.0, "s2": 1.0, "s3": 1.0, "s4": 0.0}
    assert not sample_groups(vectors, rates).ambiguous  # s4 alone is no group

    split = {"s1": v("a", "b"), "s2": v("a", "b"), "s3": v("a", "x"), "s4": v("a", "x")}
    rates = {"s1": 1.0, "s2": 1.0, "s3": 0.0, "s4": 0.0}
    assert sample_groups(split, rates, min_reading=2).ambiguous
    # Where the reference raises, the input is outside the task: the samples are one group.
    outside = sample_groups(split, rates, reference=v("a", "!ValueError"))
    assert not outside.ambiguous and outside.cluster_count == 1


AMBIGUOUS_PROMPT = '''def nearest(x: float) -> int:
    """Round x to the nearest integer.
    >>> nearest(1.2)
    1
    """
'''
AMBIGUOUS_TEST = """
def check(candidate):
    assert candidate(1.2) == 1
    assert candidate(-0.7) == -1
    assert candidate(2.5) == 3
"""
# Two readings of "nearest": Python's round (halves to even) and halves up. The check wants up.
READINGS = {
    "even-1": "    return round(x)\n",
    "even-2": "    return int(round(x))\n",
    "even-3": "    r = round(x, 0)\n    return int(r)\n",
    "up-1": "    import math\n    return math.floor(x + 0.5)\n",
    "up-2": "    return int((x * 2 + 1) // 2)\n",
    "up-3": "    import math\n    return int(math.floor(x + 0.5))\n",
    "trunc": "    return int(x)\n",
}


def test_two_consistent_readings_of_an_ambiguous_prompt_split_into_two_groups() -> None:
    inputs = behaviour_inputs(AMBIGUOUS_TEST, "nearest")
    vectors = _behaviours(READINGS, inputs)
    passed = _pass_rates(READINGS, AMBIGUOUS_TEST)
    reference = vectors["up-1"]

    result = sample_groups(vectors, passed, reference=reference)

    assert passed == {
        "even-1": 0.0,
        "even-2": 0.0,
        "even-3": 0.0,
        "up-1": 1.0,
        "up-2": 1.0,
        "up-3": 1.0,
        "trunc": 0.0,
    }
    assert result.ambiguous
    assert result.accepted.members == ("up-1", "up-2", "up-3")
    assert result.rejected.members == ("even-1", "even-2", "even-3")
    assert result.cluster_count == 3
    difference = result.difference
    assert float(difference.input) % 1 == 0.5  # a half: where the readings part
    assert difference.left != difference.right
    # With a check that does not test a half, both readings pass: nothing to flag.
    lenient = _pass_rates(READINGS, AMBIGUOUS_TEST.replace("assert candidate(2.5) == 3", ""))
    assert not sample_groups(vectors, lenient, reference=reference).ambiguous


def _behaviours(completions: dict[str, str], inputs: list[str]) -> dict:
    """Behaviour vectors of our own fixture completions, their programs run side by side."""
    running = {
        key: subprocess.Popen(
            [
                sys.executable,
                "-I",
                "-c",
                behaviour_program(AMBIGUOUS_PROMPT, completion, "nearest", inputs),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        for key, completion in completions.items()
    }
    return {
        key: parse_behaviour(process.communicate(timeout=60)[0], inputs)
        for key, process in running.items()
    }


_CHECK_DRIVER = """
import json, sys
results = {}
for name, program in json.load(sys.stdin).items():
    try:
        exec(compile(program, name, "exec"), {"__name__": "__main__"})
        results[name] = 1.0
    except BaseException:
        results[name] = 0.0
print(json.dumps(results))
"""


def _pass_rates(completions: dict[str, str], test: str) -> dict[str, float]:
    programs = {
        key: humaneval_program(
            prompt=AMBIGUOUS_PROMPT, completion=completion, test=test, entry_point="nearest"
        )
        for key, completion in completions.items()
    }
    done = subprocess.run(
        [sys.executable, "-I", "-c", _CHECK_DRIVER],
        input=json.dumps(programs),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(done.stdout)


# --- a wrong reference ---------------------------------------------------------------------------


def test_a_reference_that_disagrees_with_a_clear_majority_of_passing_samples_is_named() -> None:
    reference = v("a", "b", "c", "d")
    vectors = {
        "s1": v("a", "b", "X", "d"),
        "s2": v("a", "b", "X", "d"),
        "s3": v("a", "b", "X", "d"),
        "s4": v("a", "b", "c", "d"),
        "s5": v("a", "b", "Y", "Z"),  # fails the check: not counted
    }
    passed = {"s1": 1.0, "s2": 1.0, "s3": 0.5, "s4": 1.0, "s5": 0.0}

    found = reference_disagrees(reference, vectors, passed)

    assert found is not None
    assert found.agreeing == ("s1", "s2", "s3") and found.passing == 4 and found.inputs == 1
    assert (found.difference.input, found.difference.left, found.difference.right) == (
        "2",
        "'c'",
        "'X'",
    )
    assert found.confidence == pytest.approx(0.75 * 0.75)
    assert "s1" in found.explanation


def test_no_disagreement_without_three_agreeing_or_a_two_thirds_majority() -> None:
    reference = v("a", "b")
    two = {"s1": v("a", "X"), "s2": v("a", "X"), "s3": v("a", "b")}
    split = {
        "s1": v("a", "X"),
        "s2": v("a", "X"),
        "s3": v("a", "X"),
        "s4": v("a", "Y"),
        "s5": v("a", "Y"),
    }

    assert reference_disagrees(reference, two, {k: 1.0 for k in two}) is None
    assert reference_disagrees(reference, split, {k: 1.0 for k in split}) is None


def test_two_ways_of_refusing_an_input_are_not_a_disagreement() -> None:
    reference = v("a", "!IndexError")
    vectors = {f"s{i}": v("a", "!ValueError") for i in range(4)}

    assert reference_disagrees(reference, vectors, {k: 1.0 for k in vectors}) is None
    answering = {f"s{i}": v("a", "zero") for i in range(4)}
    found = reference_disagrees(reference, answering, {k: 1.0 for k in answering})
    assert found is not None and found.confidence == pytest.approx(1.0 * 0.6 * 0.75)


# --- learning signal -----------------------------------------------------------------------------


def test_learnability_is_the_variance_of_a_pass_fail_reward() -> None:
    assert learnability(0.5) == 0.25
    assert learnability(0.0) == learnability(1.0) == 0.0
    assert learnability(None) is None
    summary = learnability_distribution([0.5, 1.0, 0.0, None, 0.9])
    assert summary["tasks"] == 4 and summary["zero_share"] == 0.5
    assert sum(b["tasks"] for b in summary["histogram"]) == 4


def test_no_signal_when_every_sample_shares_one_outcome() -> None:
    all_pass = no_signal({"s1": 1.0, "s2": 1.0, "s3": 1.0})
    all_fail = no_signal([False, False])

    assert all_pass.outcome == "pass" and all_pass.samples == 3
    assert all_pass.confidence == pytest.approx(0.75)
    assert all_fail.outcome == "fail" and all_fail.confidence == pytest.approx(0.5)
    assert "learns nothing" in all_pass.explanation
    assert no_signal({"s1": 1.0, "s2": 0.0}) is None
    assert no_signal({"s1": 1.0, "s2": 0.5}) is None  # a sample that both passed and failed
    assert no_signal({"s1": 1.0}) is None  # one sample says nothing


# --- duplicates and leaks ------------------------------------------------------------------------


def test_duplicates_are_found_across_near_identical_prompts_and_not_across_different_ones() -> None:
    base = (
        'def below_zero(operations: List[int]) -> bool:\n    """You are given a list of deposit '
        "and withdrawal operations on a bank account that starts with zero balance. Your task is "
        'to detect if at any point the balance falls below zero."""\n'
    )
    prompts = {
        ("set-a", "t1"): base,
        ("set-b", "t7"): base.replace("List[int]", "list[int]").replace("Your task", "The task"),
        ("set-a", "t2"): 'def add(x: int, y: int) -> int:\n    """Add two numbers x and y."""\n',
        ("set-a", "t3"): 'def sort_third(l: list) -> list:\n    """Sort every third element."""\n',
        ("set-a", "t4"): "",
    }

    pairs = near_duplicates(prompts, threshold=0.85)

    assert [(a, b) for a, b, _ in pairs] == [(("set-a", "t1"), ("set-b", "t7"))]
    assert 0.85 <= pairs[0].similarity < 1.0
    assert 0.0 < pairs[0].confidence <= 1.0 and "set-b" in pairs[0].explanation
    assert near_duplicates({"a": base, "b": base})[0].similarity == 1.0


def test_tfidf_on_5000_synthetic_prompts_finishes_quickly() -> None:
    # Words drawn with Zipf's law, as in real text: a few very common, most rare.
    rng = random.Random(0)
    words = [f"w{i}" for i in range(20_000)]
    weights = list(itertools.accumulate(1 / rank for rank in range(1, len(words) + 1)))
    prompts = {
        i: "def f(x):\n    " + " ".join(rng.choices(words, cum_weights=weights, k=80))
        for i in range(5000)
    }
    prompts[5000] = prompts[17] + " extra"
    prompts[5001] = prompts[4242].replace("def f", "def g")

    # CPU time, not wall time: a loaded CI machine should not fail it (it takes about 1 s).
    started = time.process_time()
    pairs = near_duplicates(prompts)
    seconds = time.process_time() - started

    assert {(a, b) for a, b, _ in pairs} == {(17, 5000), (4242, 5001)}
    assert seconds < 6, seconds


def test_duplicates_are_found_alike_when_the_index_is_built_a_few_prompts_at_a_time(
    monkeypatch,
) -> None:
    from inspector.detect.signals import duplicates

    rng = random.Random(3)
    words = [f"w{i}" for i in range(3000)]
    weights = list(itertools.accumulate(1 / rank for rank in range(1, len(words) + 1)))
    prompts = {i: " ".join(rng.choices(words, cum_weights=weights, k=30)) for i in range(600)}
    # Near copies far from their originals, and one right after it.
    for copy, original in ((600, 5), (601, 333), (602, 599)):
        prompts[copy] = prompts[original] + " w7"
    at_once = near_duplicates(prompts, threshold=0.8)

    monkeypatch.setattr(duplicates, "INDEX_BLOCK_ROWS", 4)

    assert near_duplicates(prompts, threshold=0.8) == at_once
    assert {(5, 600), (333, 601), (599, 602)} <= {(a, b) for a, b, _ in at_once}


def test_duplicates_are_found_alike_from_pairs_read_once_as_from_a_mapping() -> None:
    rng = random.Random(5)
    words = [f"w{i}" for i in range(2000)]
    prompts = {i: " ".join(rng.choices(words, k=25)) for i in range(300)}
    prompts[300] = prompts[41] + " w9"
    prompts[301] = prompts[299].replace("w", "w", 1) + " w3"
    read = []

    def pairs_read_once():
        for key, text in prompts.items():
            read.append(key)
            yield key, text

    from_pairs = near_duplicates(pairs_read_once(), threshold=0.8)

    assert from_pairs == near_duplicates(prompts, threshold=0.8)
    assert {(41, 300), (299, 301)} <= {(a, b) for a, b, _ in from_pairs}
    assert read == list(prompts)  # each prompt read once, in order
    assert near_duplicates(iter([("only", "def f(): pass")])) == []


def test_an_answer_leaked_in_the_prompt_is_found_and_boilerplate_is_not() -> None:
    reference = (
        "    distance = abs(elem - elem2)\n"
        "    for idx, elem in enumerate(numbers):\n"
        "        return True\n"
    )
    leaky = 'def f(numbers):\n    """Hint: use   distance = abs(elem - elem2) on each pair."""\n'
    clean = 'def f(numbers):\n    """Use for idx, elem in enumerate(numbers): and return True."""\n'

    leak = answer_leak(leaky, reference)

    assert (
        leak is not None and leak.line == "distance = abs(elem - elem2)" and str(leak) == leak.line
    )
    assert leak.lines == 1 and leak.distinctive == 1 and leak.confidence == 1.0
    assert answer_leak(clean, reference) is None
    assert answer_leak(leaky, "    return x\n") is None


# --- anomalies -----------------------------------------------------------------------------------


def test_an_odd_task_is_an_anomaly_named_by_its_strongest_feature() -> None:
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        {
            "reference_pass_rate": np.ones(60),
            "sample_pass_rate": rng.uniform(0.3, 0.7, 60),
            "flake_rate": np.zeros(60),
            "cluster_count": rng.integers(1, 3, 60),
            "seconds": rng.normal(0.2, 0.02, 60),
        },
        index=[f"t{i}" for i in range(60)],
    )
    frame.loc["t13", ["flake_rate", "seconds"]] = [0.5, 3.0]

    found = anomalies(frame, contamination=0.02)

    assert "t13" in found
    score, features = found["t13"]
    assert set(features[:2]) == {"flake_rate", "seconds"}
    assert isinstance(found["t13"], AnomalyScore) and found["t13"].confidence > 0
    assert "flake_rate=0.5" in found["t13"].explanation
    assert anomalies(frame.head(5)) == {}
    assert found == anomalies(frame, contamination=0.02)  # seeded


def test_timing_jitter_among_identical_tasks_is_not_an_anomaly() -> None:
    import pandas as pd

    from inspector.detect.signals import anomalies

    seconds = [0.004] * 39 + [0.23]  # one task ran while the machine was busy
    frame = pd.DataFrame(
        {"reference_pass_rate": [1.0] * 40, "mean_seconds": seconds},
        index=[f"t{i}" for i in range(40)],
    )
    assert anomalies(frame) == {}
    frame.loc["t39", "mean_seconds"] = 30.0  # a task that really runs for half a minute
    assert list(anomalies(frame)) == ["t39"]


def test_samples_that_time_out_where_the_reference_answers_are_not_a_disagreement() -> None:
    reference = v("a", "b", "c")
    slow = {f"s{i}": v("a", "b", "~timeout") for i in range(5)}
    assert reference_disagrees(reference, slow, {k: 1.0 for k in slow}) is None
