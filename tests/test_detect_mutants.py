"""Mutants of a reference solution: what they change, that they compile and differ, and that a
check cut down to one assert lets some of them through which the full check kills.

The only code executed here is our own small fixture task and mutants of it, in subprocesses."""

from __future__ import annotations

import ast
import json
import subprocess
import sys

import pytest

from inspector.detect.behaviour import behaviour_inputs, behaviour_program, parse_behaviour
from inspector.detect.mutants import OPERATORS, Mutant, generate_mutants
from inspector.detect.signals.mutant_survivors import surviving_mutants
from inspector.formats.humaneval import humaneval_program

PROMPT = '''from typing import List


def has_close_elements(numbers: List[float], threshold: float) -> bool:
    """Check if in the given list of numbers, any two numbers are closer to each other than
    the given threshold.
    >>> has_close_elements([1.0, 2.0, 3.0], 0.5)
    False
    >>> has_close_elements([1.0, 2.8, 3.0, 4.0, 5.0, 2.0], 0.3)
    True
    """
'''
SOLUTION = """    for idx, elem in enumerate(numbers):
        for idx2, elem2 in enumerate(numbers):
            if idx != idx2:
                distance = abs(elem - elem2)
                if distance < threshold:
                    return True

    return False
"""
FULL_CHECK = """
def check(candidate):
    assert candidate([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.3) == True
    assert candidate([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.05) == False
    assert candidate([1.0, 2.0, 5.9, 4.0, 5.0], 0.95) == True
    assert candidate([1.0, 2.0, 5.9, 4.0, 5.0], 0.8) == False
    assert candidate([1.0, 2.0, 3.0, 4.0, 5.0, 2.0], 0.1) == True
    assert candidate([1.1, 2.2, 3.1, 4.1, 5.1], 1.0) == True
    assert candidate([1.1, 2.2, 3.1, 4.1, 5.1], 0.5) == False
    assert candidate([1.0, 3.0], 2.0) == False
"""
ONE_ASSERT_CHECK = """
def check(candidate):
    assert candidate([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.3) == True
"""
ENTRY = "has_close_elements"

# A function with every kind of mutation site.
RICH_PROMPT = '''def score(xs: list, bonus: int) -> int:
    """Sum the positive items of xs, doubled when both xs is long and bonus is set."""
'''
RICH_SOLUTION = """    total = 0
    for x in xs:
        if x > 0:
            total += x
    if len(xs) > 3 and bonus:
        total = total * 2
    if not xs:
        return 0
    return total - xs[0] + xs[0]
"""


def mutants(**kwargs) -> list[Mutant]:
    return generate_mutants(SOLUTION, prompt=PROMPT, entry_point=ENTRY, **kwargs)


def test_every_mutant_compiles_and_differs_from_the_reference() -> None:
    reference = ast.dump(ast.parse(PROMPT + SOLUTION))

    found = mutants()

    assert len(found) >= 10
    for mutant in found:
        program = PROMPT + mutant.completion
        compile(program, mutant.mutant_id, "exec")
        assert ast.dump(ast.parse(program)) != reference, mutant.mutant_id


def test_no_two_mutants_have_the_same_code() -> None:
    dumps = [ast.dump(ast.parse(PROMPT + m.completion)) for m in mutants(limit=1000)]

    assert len(dumps) == len(set(dumps))


def test_the_prompt_is_left_as_it_is_and_only_the_solution_changes() -> None:
    prompt_lines = PROMPT.count("\n")
    for mutant in mutants():
        assert mutant.line > prompt_lines, mutant.description
        assert mutant.completion != SOLUTION
        # The completion has the shape of a canonical solution: the body, indented.
        assert mutant.completion.startswith("    ")


def test_each_operator_changes_what_it_says() -> None:
    found = generate_mutants(RICH_SOLUTION, prompt=RICH_PROMPT, entry_point="score", limit=1000)
    by_operator = {operator: [m for m in found if m.operator == operator] for operator in OPERATORS}

    assert all(by_operator.values()), {k: len(v) for k, v in by_operator.items()}
    changed = {m.mutant_id: _changed_lines(m) for m in found}
    assert ("        if x > 0:", "        if x >= 0:") in changed.values()
    assert ("            total += x", "            total -= x") in changed.values()
    assert ("        total = total * 2", "        total = total // 2") in changed.values()
    assert ("    if len(xs) > 3 and bonus:", "    if len(xs) > 3 or bonus:") in changed.values()
    assert ("    if len(xs) > 3 and bonus:", "    if len(xs) > 4 and bonus:") in changed.values()
    assert ("        if x > 0:", "        if not x > 0:") in changed.values()
    assert ("    if not xs:", "    if xs:") in changed.values()
    assert ("            total += x", "            pass") in changed.values()
    [early] = by_operator["return"]
    assert early.completion.startswith("    return 0\n    total = 0\n")
    assert early.description == "line 3: `return 0` at the top of score"


def test_a_constant_lowered_below_zero_is_written_as_a_negation() -> None:
    found = generate_mutants(RICH_SOLUTION, prompt=RICH_PROMPT, entry_point="score", limit=1000)

    lowered = [m for m in found if m.description.endswith("constant 0 → -1")]

    assert lowered
    assert "total = -1" in lowered[0].completion


def test_the_only_return_is_never_dropped_but_one_of_several_may_be() -> None:
    single = generate_mutants("    return x + 1\n", prompt="def f(x):\n", entry_point="f")
    several = generate_mutants(RICH_SOLUTION, prompt=RICH_PROMPT, entry_point="score", limit=1000)

    assert [m for m in single if m.operator == "drop"] == []
    dropped = [m.description for m in several if m.operator == "drop"]
    assert "line 10: dropped `return 0`" in dropped
    assert "line 11: dropped `return total - xs[0] + xs[0]`" in dropped


def test_ids_are_stable_and_the_pick_is_seeded() -> None:
    everything = {m.mutant_id: m for m in mutants(limit=1000)}

    first = mutants(limit=6, seed=3)
    again = mutants(limit=6, seed=3)
    other = mutants(limit=6, seed=4)

    assert first == again
    assert len(first) == 6
    assert [m.mutant_id for m in first] != [m.mutant_id for m in other]
    for mutant in first + other:
        assert everything[mutant.mutant_id] == mutant
    # Round robin over the operators: a small pick still covers several of them.
    assert len({m.operator for m in first}) >= 4


def test_the_diff_and_description_show_the_changed_line() -> None:
    [mutant] = [
        m for m in mutants() if "`distance < threshold` → `distance <= threshold`" in m.description
    ]

    assert mutant.description.startswith(f"line {mutant.line}: ")
    assert mutant.diff.splitlines()[:2] == ["--- reference", f"+++ {mutant.mutant_id}"]
    assert "-                if distance < threshold:" in mutant.diff
    assert "+                if distance <= threshold:" in mutant.diff
    assert len(mutant.diff.splitlines()) <= 13


def test_a_reference_that_does_not_parse_gives_no_mutants() -> None:
    assert generate_mutants("    return (\n", prompt="def f(x):\n", entry_point="f") == []


def test_code_inside_fstrings_is_left_alone_and_the_rest_still_mutates() -> None:
    found = generate_mutants(
        '    n = len(xs) + 1\n    return f"{n - 1} items"\n', prompt="def f(xs):\n", entry_point="f"
    )

    assert found
    for mutant in found:
        assert 'f"{n - 1} items"' in mutant.completion or mutant.operator in ("drop", "return")


def test_a_check_cut_to_one_assert_lets_mutants_survive_that_the_full_check_kills() -> None:
    found = mutants()
    inputs = behaviour_inputs(FULL_CHECK, ENTRY)
    vectors = _behaviours(
        {"reference": SOLUTION} | {m.mutant_id: m.completion for m in found}, inputs
    )
    reference = vectors.pop("reference")
    full = _check_all(found, FULL_CHECK)
    cut = _check_all(found, ONE_ASSERT_CHECK)

    strong = surviving_mutants(reference, {k: (full[k], vectors[k]) for k in vectors})
    weak = surviving_mutants(reference, {k: (cut[k], vectors[k]) for k in vectors})

    assert all(_check_all([Mutant("ref", "", "", SOLUTION, "", 0)], FULL_CHECK).values())
    assert strong.survivors == [] or strong.survivor_share < 0.2
    assert not strong.weak
    assert weak.weak and weak.survivor_share >= 0.4
    assert weak.confidence > 0.9 > strong.confidence
    survivor = weak.survivors[0]
    assert survivor.difference.left != survivor.difference.right
    assert survivor.mutant_id in weak.explanation


def _changed_lines(mutant: Mutant) -> tuple[str, str]:
    removed = [line[1:] for line in mutant.diff.splitlines()[2:] if line.startswith("-")]
    added = [line[1:] for line in mutant.diff.splitlines()[2:] if line.startswith("+")]
    return (removed[0] if removed else "", added[0] if added else "")


def _behaviours(completions: dict[str, str], inputs: list[str]) -> dict:
    """Behaviour vectors of our own fixture completions, their programs run side by side."""
    running = {
        key: subprocess.Popen(
            [sys.executable, "-I", "-c", behaviour_program(PROMPT, completion, ENTRY, inputs)],
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


# Runs each (trusted fixture) program in a fresh namespace of one subprocess and says whether
# its check passed.
_CHECK_DRIVER = """
import json, sys
results = {}
for name, program in json.load(sys.stdin).items():
    try:
        exec(compile(program, name, "exec"), {"__name__": "__main__"})
        results[name] = True
    except BaseException:
        results[name] = False
print(json.dumps(results))
"""


def _check_all(found: list[Mutant], test: str) -> dict[str, bool]:
    programs = {
        m.mutant_id: humaneval_program(
            prompt=PROMPT, completion=m.completion, test=test, entry_point=ENTRY
        )
        for m in found
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


@pytest.mark.parametrize("limit", [0, -1])
def test_a_limit_below_one_gives_nothing(limit: int) -> None:
    assert mutants(limit=limit) == []
