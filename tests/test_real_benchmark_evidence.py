"""bench/real.py's judge of a weak_tests flag's own evidence by EvalPlus's oracle: in the local
sandbox, the inputs the contract admits, the corrected reference's answers, and which side of
the flag (a sample, the reference, a solution that memorises a thin check) is wrong."""

from __future__ import annotations

import pytest

from bench import real

PROMPT = 'def smallest_factor(n):\n    """The smallest prime factor of n (n >= 2)."""\n'
RIGHT = "    d = 2\n    while n % d:\n        d += 1\n    return d\n"
CONTRACT = '\n    assert isinstance(n, int) and n >= 2, "invalid inputs"\n'


def humaneval_line(task_id: str, canonical: str, test: str) -> dict:
    return {
        "task_id": task_id,
        "prompt": PROMPT,
        "canonical_solution": canonical,
        "test": test,
        "entry_point": "smallest_factor",
    }


def plus_line(task_id: str) -> dict:
    return {
        "task_id": task_id,
        "prompt": PROMPT,
        "canonical_solution": RIGHT,
        "entry_point": "smallest_factor",
        "contract": CONTRACT,
        "base_input": [[12]],
        "plus_input": [[9], [7], [25]],
        "atol": 0,
    }


def sample(task_id: str, sample_id: str, completion: str) -> dict:
    return {"task_id": task_id, "sample_id": sample_id, "completion": completion, "model": "m"}


@pytest.fixture(scope="module")
def judged() -> dict[str, dict]:
    thin = "def check(candidate):\n    assert candidate(12) == 2\n"
    both = "def check(candidate):\n    assert candidate(12) == 2\n    assert candidate(7) == 7\n"
    humaneval = {
        "T/thin": humaneval_line("T/thin", RIGHT, thin),
        "T/wrong-reference": humaneval_line(
            "T/wrong-reference", "    return 2 if n % 2 == 0 else n\n", both
        ),
    }
    plus = {task_id: plus_line(task_id) for task_id in humaneval}
    samples = [
        sample("T/thin", "s1", "    return 2\n"),  # passes the one assert, wrong on 9
        sample("T/thin", "s2", RIGHT),
        sample("T/wrong-reference", "s3", RIGHT),
    ]
    evidence = {
        "T/thin": [
            {"sample_id": "s1", "input": "9"},
            {"sample_id": "s2", "input": "1"},  # the contract refuses n = 1
            {"memorised": ["12"], "input": "12"},
        ],
        "T/wrong-reference": [{"sample_id": "s3", "input": "9"}],
    }
    truth = real.Truth(tasks=list(humaneval))
    return real.confirm_on_evidence(humaneval, plus, samples, evidence, truth, parallel=2)


def test_a_passing_sample_wrong_on_the_flags_own_input_is_a_wrong_completion_the_tests_accept(
    judged: dict[str, dict],
) -> None:
    assert judged["T/thin"]["samples_wrong"] == ["s1"]
    assert judged["T/thin"]["reference_wrong"] is False
    assert "expected 3" in judged["T/thin"]["said"]


def test_an_input_the_contract_refuses_is_not_judged(judged: dict[str, dict]) -> None:
    assert judged["T/thin"]["refused"] == ["1"]
    assert judged["T/thin"]["kept"] == 2  # "9" and "12"


def test_a_solution_that_memorises_a_thin_checks_answer_is_judged_on_evalplus_inputs(
    judged: dict[str, dict],
) -> None:
    assert judged["T/thin"]["mutants_wrong"] == ["memorised"]


def test_a_right_sample_against_a_wrong_reference_puts_the_blame_on_the_reference(
    judged: dict[str, dict],
) -> None:
    found = judged["T/wrong-reference"]
    assert found["samples_wrong"] == [] and found["mutants_wrong"] == []
    assert found["reference_wrong"] is True
