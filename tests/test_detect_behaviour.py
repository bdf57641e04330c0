"""Behaviour vectors: the inputs found in a task's tests, new ones in their domain, and the program that
records what a solution returns on them (run here in a plain subprocess, on our own fixtures
only; the platform runs it in its sandbox)."""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest

from inspector.detect.behaviour import (
    MARKER,
    MAX_INPUTS,
    OUTPUT_BUDGET,
    SKIPPED,
    TAIL_BYTES,
    TIMEOUT,
    BehaviourVector,
    behaviour_inputs,
    behaviour_program,
    inputs_from_tests,
    inputs_key,
    is_value,
    literal_source,
    parse_arguments,
    parse_behaviour,
    wall_seconds,
)

TEST = """
METADATA = {"author": "us"}
CASES = [([1.0, 2.0], 0.5, False), ([1.0, 1.2], 0.5, True)]


def check(candidate):
    assert candidate([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.3) == True
    assert candidate([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.3) == True  # repeated: kept once
    assert abs(candidate([-1.5, 2], threshold=1e-3) - 0) < 1e-6
    for numbers, threshold, expected in CASES:
        assert candidate(numbers, threshold) == expected
    assert all(candidate([x, x + 0.5], 1.0) for x in [1.0, 2.0])
    for i in range(2):
        assert candidate([i] * 2, 0.1)
    xs = ["a", "b"]
    assert candidate(xs, 2) is False
    xs.append("c")
    assert candidate(xs, 3)  # xs was changed: left out rather than guessed
    assert candidate(*([0.0, 0.5], 1.0))
    import random
    assert candidate([random.random()], 0.5) is False
    assert candidate(sorted([3, 1]), 0.5) is False
    assert has_close_elements({1, 2}, (1, "x"))
"""


def run(program: str, *, hash_seed: str = "0") -> subprocess.CompletedProcess[str]:
    """Runs a behaviour program of OUR OWN fixtures (never task code from outside)."""
    return subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True,
        text=True,
        timeout=30,
        env={"PYTHONHASHSEED": hash_seed, "PATH": "/usr/bin:/bin"},
    )


def behaviour(
    solution: str, inputs: list[str], *, prompt: str = "def f(*args, **kwargs):\n", **options
) -> BehaviourVector | None:
    program = behaviour_program(prompt, solution, "f", inputs, **options)
    return parse_behaviour(run(program).stdout, inputs)


def test_inputs_outside_the_tasks_contract_are_skipped_before_the_solution_is_defined() -> None:
    contract = "\n    assert isinstance(n, int) and abs(n) == n != 0, 'invalid inputs'\n"
    # Defined after the contract ran: its change to abs() cannot widen the domain.
    hostile = "    return n\nimport builtins\nbuiltins.abs = lambda x: x\n"
    inputs = ["3", "-2", "'x'"]

    program = behaviour_program("def f(n):\n", "    return n * 2\n", "f", inputs, contract=contract)
    done = run(program)
    vector = parse_behaviour(done.stdout, inputs)
    tampered = parse_behaviour(
        run(behaviour_program("def f(n):\n", hostile, "f", inputs, contract=contract)).stdout,
        inputs,
    )

    assert vector is not None and vector.digests[1:] == (SKIPPED, SKIPPED)
    assert vector.reprs[0] == "6" and '"o":2' in done.stdout
    assert tampered is not None and tampered.digests[1:] == (SKIPPED, SKIPPED)


# --- inputs_from_tests ---------------------------------------------------------------------------


def test_inputs_are_found_in_asserts_loops_comprehensions_and_named_literals() -> None:
    found = inputs_from_tests(TEST, "has_close_elements")

    assert found == [
        "[1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.3",
        "[-1.5, 2], threshold=0.001",
        "[1.0, 2.0], 0.5",
        "[1.0, 1.2], 0.5",
        "[1.0, 1.5], 1.0",
        "[2.0, 2.5], 1.0",
        "[0, 0], 0.1",
        "[1, 1], 0.1",
        "['a', 'b'], 2",
        "[0.0, 0.5], 1.0",
        "{1, 2}, (1, 'x')",
    ]
    for text in found:
        parse_arguments(text)  # every input reads back as literals


def test_inputs_are_capped_and_a_test_that_does_not_parse_gives_none() -> None:
    assert len(inputs_from_tests(TEST, "has_close_elements", limit=3)) == 3
    assert inputs_from_tests("def check(candidate):\n    assert candidate(1\n", "f") == []


def test_calls_anywhere_in_the_tests_count_when_there_is_no_check_function() -> None:
    assert inputs_from_tests("assert f(1) == 2\nassert f('a') == 'b'\n", "f") == ["1", "'a'"]


def test_literal_source_is_the_same_in_every_process_and_refuses_what_cannot_be_read_back() -> None:
    assert literal_source({"b", "a", "c"}) == "{'a', 'b', 'c'}"
    assert literal_source((1,)) == "(1,)"
    assert literal_source(set()) == "set()"
    assert literal_source(float("inf")) is None
    assert literal_source([1, object()]) is None
    assert ast.literal_eval(literal_source({"k": [1.5, None, True, b"x"]})) == {
        "k": [1.5, None, True, b"x"]
    }


def test_code_in_an_input_is_refused_and_never_run() -> None:
    for hostile in ("__import__('os').system('true')", "f(1)", "*[1, 2]", "x", "**{'a': 1}"):
        with pytest.raises(ValueError):
            parse_arguments(hostile)
        with pytest.raises(ValueError):
            behaviour_program("def f(x):\n", "    return x\n", "f", [hostile])


def test_behaviour_inputs_are_the_tests_inputs_then_new_ones_inside_their_domain() -> None:
    inputs = behaviour_inputs(TEST, "has_close_elements", limit=30)

    assert inputs[:11] == inputs_from_tests(TEST, "has_close_elements")
    assert len(inputs) <= 30 <= MAX_INPUTS
    assert len(set(inputs)) == len(inputs)


# --- the program ---------------------------------------------------------------------------------

SOLUTION = """    (x,) = args
    print("noise that must not reach the report")
    if x == "loop":
        while True:
            pass
    if x == "exit":
        raise SystemExit(3)
    if isinstance(x, int) and x < 0:
        raise ValueError("negative\\nnumber")
    return x
"""


def test_values_exceptions_and_timeouts_are_recorded_per_input() -> None:
    inputs = ["1", "-1", "'loop'", "'exit'", "[1, 'a']"]

    vector = behaviour(SOLUTION, inputs, per_call_seconds=0.3)

    assert vector is not None
    assert vector.inputs == tuple(inputs) and vector.inputs_key == inputs_key(inputs)
    one, negative, loop, leave, items = vector.digests
    assert is_value(one) and is_value(items) and one != items
    assert (negative, loop, leave) == ("!ValueError", TIMEOUT, "!SystemExit")
    assert vector.reprs == (
        "1",
        "raised ValueError: negative\\nnumber",  # one line: the newline escaped
        "timed out",
        "raised SystemExit: 3",
        "[1, 'a']",
    )
    assert vector.error == ""


def test_results_equal_under_eq_get_the_same_digest_in_any_process() -> None:
    inputs = [
        "1",
        "1.0",
        "True",
        "{'b': 1, 'a': 2}",
        "{'a': 2, 'b': 1}",
        "[1]",
        "(1,)",
        "-0.0",
        "0",
    ]
    echo = "    return args[0]\n"
    strings = "    return set(args[0])\n"
    words = ["['alpha', 'beta', 'gamma', 'delta', 'epsilon']"]

    vector = behaviour(echo, inputs)
    set_digests = {
        parse_behaviour(
            run(behaviour_program("def f(*args):\n", strings, "f", words), hash_seed=seed).stdout,
            words,
        ).digests
        for seed in ("1", "2", "3")
    }

    d = dict(zip(inputs, vector.digests, strict=True))
    assert d["1"] == d["1.0"] == d["True"]
    assert d["{'b': 1, 'a': 2}"] == d["{'a': 2, 'b': 1}"]
    assert d["[1]"] != d["(1,)"]
    assert d["-0.0"] == d["0"]
    assert len(set_digests) == 1  # string hashing differs per process; the digest does not


def test_a_solution_cannot_change_the_next_calls_input_by_mutating_it() -> None:
    vector = behaviour("    args[0].append(9)\n    return len(args[0])\n", ["[1]", "[1]"])

    assert vector.digests[0] == vector.digests[1]
    assert vector.reprs[:2] == ("2", "2")


def test_a_solution_that_cannot_be_defined_is_reported_on_every_input() -> None:
    vector = behaviour("    return (\n", ["1", "2"])
    missing = behaviour("    return 1\n", ["1"], prompt="def g(*args):\n")

    assert vector.digests == ("!SyntaxError", "!SyntaxError")
    assert vector.error.startswith("SyntaxError")
    assert missing.digests == ("!NameError",)


def test_a_solution_that_ends_the_process_leaves_no_vector() -> None:
    assert behaviour("    import os\n    os._exit(0)\n", ["1"]) is None


def test_inputs_past_the_total_budget_are_skipped() -> None:
    slow = "    import time\n    time.sleep(0.4)\n    return 1\n"

    # Calls start at about 0, 0.4, 0.8 and 1.2 s: the first two within the 0.6 s budget.
    vector = behaviour(slow, ["1", "2", "3", "4"], per_call_seconds=1.0, total_seconds=0.6)

    assert vector.digests[:2] == (vector.digests[0],) * 2 and is_value(vector.digests[0])
    assert vector.digests[2:] == (SKIPPED, SKIPPED)


def test_a_solution_that_hangs_costs_three_calls_and_the_rest_is_skipped() -> None:
    hangs = "    while args[0] > 2:\n        pass\n    return 1\n"
    inputs = ["1", "3", "4", "2", "5", "6"]

    vector = behaviour(hangs, inputs, per_call_seconds=0.2, total_seconds=30)

    assert vector is not None
    assert vector.digests[1:3] == (TIMEOUT, TIMEOUT) and is_value(vector.digests[3])
    assert vector.digests[4:] == (TIMEOUT, SKIPPED)
    assert vector.seconds < 1.5


def test_the_report_fits_the_sandbox_output_tail_whatever_the_solution_prints() -> None:
    inputs = [str(i) for i in range(MAX_INPUTS)]
    noisy = (
        "    import os\n"
        "    os.write(1, b'x' * 100)\n"
        "    if args[0] % 2:\n"
        "        raise type('AVeryLongExceptionNameIndeed' * 3, (Exception,), {})()\n"
        "    return '\\u00e9\\u4e2d' * 200\n"
    )

    done = run(behaviour_program("def f(*args):\n", noisy, "f", inputs))
    line = done.stdout[done.stdout.rfind(MARKER) :]
    vector = parse_behaviour(done.stdout[-TAIL_BYTES:], inputs)

    assert len(line.encode()) <= OUTPUT_BUDGET + len(MARKER) + 1
    assert vector is not None and len(vector.digests) == MAX_INPUTS
    assert vector.digests[1] == "!" + ("AVeryLongExceptionNameIndeed" * 3)[:24]
    kept = [r for r in vector.reprs if r is not None]
    assert 1 <= len(kept) <= 40 and all(len(r) <= 80 for r in kept)


def test_a_report_for_other_inputs_or_a_garbled_one_is_refused() -> None:
    done = run(behaviour_program("def f(x):\n", "    return x\n", "f", ["1"]))

    assert parse_behaviour(done.stdout, ["1"]) is not None
    assert parse_behaviour(done.stdout, ["2"]) is None
    assert parse_behaviour(done.stdout, ["1", "2"]) is None
    assert parse_behaviour("no marker here") is None
    assert parse_behaviour(MARKER + "{not json") is None
    assert parse_behaviour(MARKER + '{"v": 1, "d": [1], "r": [], "key": "k"}') is None


def test_too_many_inputs_are_refused_and_the_wall_limit_covers_the_budget() -> None:
    with pytest.raises(ValueError):
        behaviour_program("def f(x):\n", "    return x\n", "f", ["1"] * (MAX_INPUTS + 1))
    assert wall_seconds(per_call_seconds=1.0, total_seconds=10.0) > 11.0
