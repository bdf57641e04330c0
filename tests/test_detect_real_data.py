"""Detection that holds on real data: inputs that stay in the task's domain, the prompt's own
examples as checks, wrong samples the check accepts, and a wrong reference only on strong
evidence. Pure functions on plain data; the fixtures are our own."""

from __future__ import annotations

import pytest

from inspector.detect.behaviour import (
    BehaviourVector,
    behaviour_inputs,
    inputs_key,
    parse_arguments,
    value_digest,
)
from inspector.detect.depth import analyse_depth
from inspector.detect.domain import domain_inputs, infer_domain
from inspector.detect.examples import example_contradictions, prompt_examples
from inspector.detect.signals.accepted_wrong import accepted_disagreements
from inspector.detect.signals.behaviour_groups import sample_groups
from inspector.detect.signals.reference import reference_disagrees, slow_reference


def vector(outputs: dict[str, object], inputs: list[str]) -> BehaviourVector:
    """What a solution returned on `inputs`: literal values digested as the behaviour program
    does, "!E" for a raise, "~timeout" for a timeout."""
    digests, reprs = [], []
    for text in inputs:
        value = outputs[text]
        if isinstance(value, str) and value.startswith(("!", "~")):
            digests.append(value)
            reprs.append("timed out" if value == "~timeout" else f"raised {value[1:]}")
        else:
            digests.append(value_digest(value))
            reprs.append(repr(value))
    return BehaviourVector(inputs_key(inputs), tuple(digests), tuple(reprs), inputs=tuple(inputs))


# --- the domain ----------------------------------------------------------------------------------


def test_the_domain_keeps_what_every_seed_shows_unless_the_prompt_says_otherwise() -> None:
    seeds = ["[1, 2, 3], 'ab'", "[4, 5], 'c'", "[7], 'zz'"]
    domain = infer_domain(seeds, "Return how often the word occurs.")

    assert domain.contains_text("[10, 20], 'q'")
    assert not domain.contains_text("[10, 20], 'Q'")  # nor an upper-case letter
    assert not domain.contains_text("[], 'q'")  # no empty list was ever shown
    assert not domain.contains_text("[-1], 'q'")  # nor a negative number
    assert not domain.contains_text("[1], 'q1'")  # nor a digit in the text
    assert not domain.contains_text("[1.5], 'q'")  # nor a float where only ints were seen
    assert not domain.contains_text("[1], 'q', 3")  # nor a third argument

    spoken = infer_domain(seeds, "The list may be empty and may hold negative numbers.")
    assert spoken.contains_text("[], 'q'") and spoken.contains_text("[-1], 'q'")
    assert not infer_domain(["3"], "a count greater than zero").contains_text("0")
    assert infer_domain(["3"], "a count, which may be zero").contains_text("0")


def test_a_list_of_integers_admits_negatives_and_zero_unless_it_says_positive() -> None:
    assert infer_domain(["[1, 2]"], "Given a list of integers").contains_text("[-3, 0]")
    assert not infer_domain(["[1, 2]"], "Given a list of positive integers").contains_text("[-3]")
    # A single integer argument is often a count: its sign stays as the tests show it.
    assert not infer_domain(["3, 7"], "Two integers a and b").contains_text("-1, 7")


def test_bounds_the_prompt_states_on_arguments_lengths_and_items_hold() -> None:
    prompt = "Restrictions: 1 <= num <= 1000, 1 <= len(arr) <= 3 and -10 <= arr[i] <= 10."
    domain = infer_domain(["5, [1, 2]", "1000, [3]"], prompt, ["num", "arr"])

    assert domain.contains_text("7, [-4, 10]")  # a stated bound admits negatives
    assert not domain.contains_text("2000, [1]")
    assert not domain.contains_text("7, [1, 2, 3, 4]")
    assert not domain.contains_text("7, [11]")
    abbreviated = infer_domain(["5"], "Restrictions: 1 <= num <= 1000", ["number"])
    assert not abbreviated.contains_text("2000")
    made = domain_inputs(domain, given=[], seed=0, limit=30)
    assert made and all(domain.contains_text(text) for text in made)


def test_non_empty_in_the_prompt_rules_out_an_empty_value_even_when_a_test_shows_one() -> None:
    domain = infer_domain(["[]", "[1, 2]"], "Given a non-empty list of integers")

    assert not domain.contains_text("[]")


def test_two_arguments_of_equal_length_in_every_seed_stay_equal() -> None:
    domain = infer_domain(["[1, 2], [3, 4]", "[5], [6]"], "")

    assert domain.contains_text("[1, 2, 3], [4, 5, 6]")
    assert not domain.contains_text("[1, 2, 3], [4]")


def test_new_inputs_are_seeded_new_and_all_inside_the_domain() -> None:
    seeds = ["[3, 1, 2]", "[5, 5, 9, 1]", "[8]"]
    domain = infer_domain(seeds, "")

    made = domain_inputs(domain, given=seeds, seed=1, limit=40)

    assert made == domain_inputs(domain, given=seeds, seed=1, limit=40)
    assert len(made) == len(set(made)) == 40 and not set(made) & set(seeds)
    assert all(domain.contains(parse_arguments(text)[0]) for text in made)
    assert any(len(set(parse_arguments(t)[0][0])) < len(parse_arguments(t)[0][0]) for t in made)


def test_inputs_the_prompt_rules_out_never_become_behaviour_inputs() -> None:
    test = "def check(candidate):\n    assert candidate(3) == 2\n    assert candidate(10) == 55\n"
    prompt = 'def fib(n: int):\n    """Return the n-th Fibonacci number, n positive."""\n'

    inputs = behaviour_inputs(test, "fib", limit=60, prompt=prompt)

    assert inputs[:2] == ["3", "10"]
    assert all(parse_arguments(text)[0][0] > 0 for text in inputs)


def test_new_inputs_start_with_the_edge_cases_the_domain_admits() -> None:
    seeds = ["[3, 1, 2], 'ab'", "[5, 9], 'cd'"]
    domain = infer_domain(seeds, "Given a list of integers and a word.")

    made = [parse_arguments(text)[0] for text in domain_inputs(domain, given=seeds, limit=60)]

    assert ([3, 1, 2], "a") in made and ([3, 1, 2], "abb") in made  # one letter, a repeat
    assert any(len(xs) == 1 for xs, _ in made)  # one item
    assert any(len(xs) > 1 and len(set(xs)) == 1 for xs, _ in made)  # all tied
    assert any(0 in xs for xs, _ in made) and any(min(xs, default=0) < 0 for xs, _ in made)
    # No empty list or word: no seed shows one and the prompt never speaks of one.
    assert all(xs and s for xs, s in made)


def test_with_a_contract_new_inputs_are_made_loosely_and_the_contract_decides() -> None:
    test = (
        "def check(candidate):\n"
        "    assert candidate('abc', [3, 1]) == 1\n"
        "    assert candidate('xy', [5, 9]) == 2\n"
    )
    prompt = 'def f(s: str, xs: list):\n    """Count something."""\n'

    strict = [parse_arguments(t)[0] for t in behaviour_inputs(test, "f", limit=80, prompt=prompt)]
    loose = [
        parse_arguments(t)[0]
        for t in behaviour_inputs(test, "f", limit=80, prompt=prompt, contract=True)
    ]

    def reach(made: list) -> dict[str, bool]:
        return {
            "empty text": any(s == "" for s, _ in made),
            "empty list": any(xs == [] for _, xs in made),
            "negative": any(min(xs, default=0) < 0 for _, xs in made),
            "other characters": any(not (c.isalpha() and c.islower()) for s, _ in made for c in s),
        }

    assert all(reach(loose).values())
    assert not any(reach(strict).values())
    # Numbers grow to ten times the largest seen either way (EvalPlus's reach more).
    assert any(max(xs, default=0) > 18 for _, xs in strict)
    assert all(max(xs, default=0) <= 90 for _, xs in strict)
    # The types the tests show still hold: the contract sees only plausible inputs.
    assert all(isinstance(s, str) and all(type(x) is int for x in xs) for s, xs in loose)


# --- the prompt's examples -----------------------------------------------------------------------

PROMPT = '''def median(l: list):
    """Return median of elements in the list l.
    >>> median([3, 1, 2, 4, 5])
    3
    >>> median([-10, 4, 6, 1000, 10, 20])
    15.0
    >>> round(median([1, 2]), 1)
    1.5
    median([1, 2, 3]) ➞ 2
    median([5]) should return 5.
    median([1, 3]) == 2.0
    median(l) = 1 + n / 2, if n is even.
    """
'''


def test_examples_are_read_in_their_usual_forms_and_prose_is_not_misread() -> None:
    examples = prompt_examples(PROMPT, "median")

    assert [(e.input, e.expected) for e in examples] == [
        ("[3, 1, 2, 4, 5]", 3),
        ("[-10, 4, 6, 1000, 10, 20]", 15.0),
        ("[1, 2, 3]", 2),
        ("[5]", 5),
        ("[1, 3]", 2.0),
    ]
    assert examples[1].line_number == 5


def test_input_output_blocks_name_the_parameters() -> None:
    prompt = (
        "def fill(grid, capacity):\n"
        '    """\n    Input: grid = [[0, 1], [1, 1]], capacity = 2\n    Output: 2\n    """\n'
    )

    (example,) = prompt_examples(prompt, "fill")

    assert (example.input, example.expected) == ("[[0, 1], [1, 1]], 2", 2)


def test_a_reference_that_contradicts_an_example_is_named_with_the_example() -> None:
    examples = prompt_examples(PROMPT, "median")
    inputs = [e.input for e in examples]
    right = vector({"[3, 1, 2, 4, 5]": 3, "[-10, 4, 6, 1000, 10, 20]": 8.0, "[1, 2, 3]": 2,
                    "[5]": 5, "[1, 3]": 2.0}, inputs)  # fmt: skip

    (found,) = example_contradictions(examples, right)

    assert found.example.input == "[-10, 4, 6, 1000, 10, 20]" and found.got == "8.0"


def test_rounding_a_list_for_a_tuple_and_prose_of_another_type_are_no_contradiction() -> None:
    prompt = "def f(x):\n    '''\n    f(1) ==> 0.33\n    f(2) ==> [1, 2]\n    '''\n"
    examples = prompt_examples(prompt, "f")
    assert example_contradictions(examples, vector({"1": 1 / 3, "2": (1, 2)}, ["1", "2"])) == []

    # "tri(1) = 3" in a prompt that defines a sequence, of a function that returns lists.
    prose = "def tri(n):\n    '''\n    tri(1) = 3\n    tri(2) ==> [1, 3, 2]\n    '''\n"
    examples = prompt_examples(prose, "tri")
    lists = vector({"1": [1, 3], "2": [1, 3, 2]}, ["1", "2"])
    assert example_contradictions(examples, lists) == []


# --- wrong samples the check accepts -------------------------------------------------------------


def test_a_passing_sample_that_differs_from_the_reference_shows_the_tests_are_weak() -> None:
    inputs = ["[1, 2]", "[2, 2]", "[5]"]
    reference = vector({"[1, 2]": 2, "[2, 2]": 2, "[5]": 5}, inputs)
    samples = {
        "s1": vector({"[1, 2]": 2, "[2, 2]": 2, "[5]": 5}, inputs),
        "s2": vector({"[1, 2]": 2, "[2, 2]": 4, "[5]": 5}, inputs),  # wrong on a tie
        "s3": vector({"[1, 2]": 2, "[2, 2]": "!IndexError", "[5]": 5}, inputs),
        "s4": vector({"[1, 2]": 2, "[2, 2]": "~timeout", "[5]": 5}, inputs),  # no answer
        "s5": vector({"[1, 2]": 9, "[2, 2]": 9, "[5]": 9}, inputs),  # the check rejects it
    }
    passed = {"s1": 1.0, "s2": 1.0, "s3": 1.0, "s4": 1.0, "s5": 0.0}

    found = accepted_disagreements(reference, samples, passed, models={"s2": "m1", "s3": "m2"})

    assert found is not None
    assert [d.sample_id for d in found.disagreements] == ["s2", "s3"]
    first = found.disagreements[0].difference
    assert (first.input, first.left, first.right) == ("[2, 2]", "2", "4")
    assert found.behaviours == 2 and found.models == ("m1", "m2")
    assert found.confidence == pytest.approx(0.8)
    assert "s2" in found.explanation and "accepts both" in found.explanation


def test_an_accepted_disagreement_says_which_side_the_other_passing_samples_take() -> None:
    inputs = ["0", "1"]
    reference = vector({"0": "''", "1": "'1'"}, inputs)
    samples = {
        "s1": vector({"0": "'0'", "1": "'1'"}, inputs),
        "s2": vector({"0": "'0'", "1": "'1'"}, inputs),
        "s3": vector({"0": "'0'", "1": "'1'"}, inputs),
    }

    found = accepted_disagreements(reference, samples, {k: 1.0 for k in samples})

    assert found is not None
    first = found.disagreements[0]
    assert (first.with_reference, first.with_sample) == (0, 2)
    assert "the reference may be the wrong side" in found.explanation


def test_a_lone_wrong_sample_against_samples_that_side_with_the_reference_blames_no_reference() -> (
    None
):
    inputs = ["[2, 2]"]
    reference = vector({"[2, 2]": 2}, inputs)
    samples = {
        "s1": vector({"[2, 2]": 4}, inputs),
        "s2": vector({"[2, 2]": 2}, inputs),
        "s3": vector({"[2, 2]": 2}, inputs),
    }

    found = accepted_disagreements(reference, samples, {k: 1.0 for k in samples})

    assert found is not None
    first = found.disagreements[0]
    assert (first.sample_id, first.with_reference, first.with_sample) == ("s1", 2, 0)
    assert "2 give the reference's answer" in found.explanation
    assert "wrong side" not in found.explanation


def test_one_sample_on_one_input_is_weaker_evidence_than_two_models_in_distinct_ways() -> None:
    inputs = ["1", "2"]
    reference = vector({"1": 1, "2": 2}, inputs)
    one = {"s1": vector({"1": 1, "2": 3}, inputs)}
    two = {"s1": vector({"1": 1, "2": 3}, inputs), "s2": vector({"1": 0, "2": 2}, inputs)}

    weak = accepted_disagreements(reference, one, {"s1": 1.0}, models={"s1": "a"})
    strong = accepted_disagreements(
        reference, two, {"s1": 1.0, "s2": 1.0}, models={"s1": "a", "s2": "b"}
    )

    assert weak is not None and strong is not None
    assert weak.confidence == pytest.approx(0.6)
    assert strong.confidence > weak.confidence


def test_a_majority_of_one_models_samples_does_not_make_the_reference_wrong() -> None:
    inputs = ["1", "2"]
    reference = vector({"1": 1, "2": 2}, inputs)
    samples = {f"s{i}": vector({"1": 1, "2": 5}, inputs) for i in range(4)}
    passed = {key: 1.0 for key in samples}

    one_model = {key: "codegen" for key in samples}
    two_models = {"s0": "codegen", "s1": "codegen", "s2": "llama", "s3": "llama"}

    assert reference_disagrees(reference, samples, passed, models=one_model) is None
    found = reference_disagrees(reference, samples, passed, models=two_models)
    assert found is not None and "2 models: codegen, llama" in found.explanation


def test_a_rejected_group_that_contradicts_the_prompts_example_is_no_reading() -> None:
    inputs = ["1", "2", "3"]
    reading_a = {f"a{i}": vector({"1": 1, "2": 2, "3": 3}, inputs) for i in range(3)}
    reading_b = {f"b{i}": vector({"1": 2, "2": 3, "3": 4}, inputs) for i in range(3)}
    vectors = {**reading_a, **reading_b}
    passed = {**{k: 1.0 for k in reading_a}, **{k: 0.0 for k in reading_b}}

    assert sample_groups(vectors, passed).ambiguous
    assert not sample_groups(vectors, passed, ruled_out=set(reading_b)).ambiguous


def test_a_reference_that_times_out_where_passing_samples_answer_is_slow() -> None:
    inputs = ["10", "100000"]
    reference = vector({"10": 1, "100000": "~timeout"}, inputs)
    samples = {"s1": vector({"10": 1, "100000": 7}, inputs)}

    found = slow_reference(reference, samples, {"s1": 1.0}, per_call_seconds=0.5)

    assert found is not None and found.inputs == ["100000"] and found.answered_by == ("s1",)


# --- through the depth analysis ------------------------------------------------------------------


def behaviour_run(run_id: int, key: str, result: BehaviourVector) -> dict:
    import json

    from inspector.detect.behaviour import MARKER

    line = {"v": 1, "key": result.inputs_key, "d": list(result.digests), "r": list(result.reprs),
            "t": 0.01, "e": ""}  # fmt: skip
    return {"run_id": run_id, "task_key": 1, "kind": "behaviour", "key": key,
            "outcome": "passed", "stdout": MARKER + json.dumps(line)}  # fmt: skip


def test_the_depth_analysis_flags_an_example_the_reference_contradicts_as_ambiguous() -> None:
    examples = prompt_examples(PROMPT, "median")
    inputs = [e.input for e in examples]
    reference = vector({"[3, 1, 2, 4, 5]": 3, "[-10, 4, 6, 1000, 10, 20]": 8.0, "[1, 2, 3]": 2,
                        "[5]": 5, "[1, 3]": 2.0}, inputs)  # fmt: skip
    task = {"task_key": 1, "task_id": "t/1", "prompt": PROMPT, "canonical_solution": "",
            "inputs": inputs, "entry_point": "median", "test": ""}  # fmt: skip
    runs = [
        *(
            {
                "run_id": i,
                "task_key": 1,
                "kind": "reference",
                "key": "reference",
                "outcome": "passed",
            }
            for i in range(1, 4)
        ),  # fmt: skip
        behaviour_run(9, "reference", reference),
    ]

    analysis = analyse_depth([task], runs)

    (flag,) = [f for f in analysis.findings if f.code == "ambiguous"]
    assert flag.explanation.startswith("the prompt's example says median([-10, 4, 6, 1000")
    assert flag.evidence["examples"][0]["expected"] == "15.0"
    assert flag.evidence["examples"][0]["reference_output"] == "8.0"
    assert flag.evidence_run_ids == (9,)
