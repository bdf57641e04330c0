from __future__ import annotations

import re
from typing import Any

import pandas as pd

from inspector.detect.answer_probes import ANSWER_PROBES, LONG_RESPONSE_CHARS, answer_probe_texts
from inspector.detect.answers import analyse_answers, stated_answer
from inspector.detect.codes import SEVERITY, FlagCode

STRONG = ("strong-a", "strong-b", "strong-c")
WEAK = "weak"


class SetBuilder:
    """A set of `clean` ordinary tasks the strong models nearly always get right and the weak
    model mostly gets wrong (so the analysis learns who is reliable), plus the tasks a test adds."""

    def __init__(self, clean: int = 30) -> None:
        self.tasks: list[dict] = []
        self.verdicts: list[dict] = []
        self.probes: list[dict] = []
        for i in range(clean):
            key = self.task(
                f"Tom has {i} apples and buys {i + 3} more. How many now?", str(2 * i + 3)
            )
            for model in STRONG:
                right = not (i % 10 == 0 and model == "strong-a")
                self.samples(
                    key, model, [str(2 * i + 3) if right else str(2 * i + 4)] * 3 + [str(2 * i + 3)]
                )
            self.samples(key, WEAK, [str(2 * i + 3) if i % 4 == 0 else str(2 * i + 2)] * 4)

    def task(self, question: str, label: str, *, status: str = "ok") -> int:
        key = len(self.tasks)
        self.tasks.append(
            {
                "task_key": key,
                "task_id": f"t/{key}",
                "question": question,
                "label": label,
                "label_status": status,
                "label_canonical": label if status == "ok" else "",
            }
        )
        return key

    def samples(
        self, key: int, model: str, answers: list[str | None], *, status: str = "ok"
    ) -> None:
        label = self.tasks[key]["label_canonical"]
        for answer in answers:
            self.verdicts.append(
                {
                    "run_id": len(self.verdicts) + 1,
                    "task_key": key,
                    "sample_id": f"{model}/{len(self.verdicts)}",
                    "model": model,
                    "status": status if answer is not None else "no_answer",
                    "extracted": answer or "",
                    "canonical": answer or "",
                    "correct": answer is not None and answer == label and status == "ok",
                    "response_chars": 100,
                }
            )

    def probe(self, key: int, probe: str, correct: bool, extracted: str = "") -> None:
        self.probes.append(
            {
                "run_id": 100_000 + len(self.probes),
                "task_key": key,
                "probe": probe,
                "status": "ok",
                "extracted": extracted,
                "correct": correct,
            }
        )

    def analyse(self, **kw: Any):
        probes = pd.DataFrame(
            self.probes, columns=["run_id", "task_key", "probe", "status", "extracted", "correct"]
        )
        return analyse_answers(pd.DataFrame(self.tasks), pd.DataFrame(self.verdicts), probes, **kw)


def flags_of(analysis, key: int) -> dict[str, Any]:
    return {str(f.code): f for f in analysis.findings if f.task_key == key}


def test_a_strong_consensus_of_several_models_on_another_answer_is_mislabeled() -> None:
    s = SetBuilder()
    key = s.task("A shop sells 4 boxes of 5 pens. How many pens?", "18")
    for model in STRONG:
        s.samples(key, model, ["20", "20", "20", "20"])
    s.samples(key, WEAK, ["18", "18", "19", "18"])
    analysis = s.analyse()
    found = flags_of(analysis, key)
    assert set(found) == {"mislabeled"}
    flag = found["mislabeled"]
    assert flag.confidence >= 0.9 and flag.evidence["consensus"] == "20"
    assert "20 instead of the label 18" in flag.explanation
    assert flag.evidence["supporting_models"] == 3
    # the reviewer sees the weights: the strong models outweigh the weak one
    weights = {m: v["weight"] for m, v in flag.evidence["models"].items()}
    assert min(weights[m] for m in STRONG) > weights[WEAK]
    assert analysis.model_reliability["strong-b"] > analysis.model_reliability[WEAK]
    assert flag.evidence_run_ids  # a representative run of the consensus


def test_a_weak_models_majority_does_not_overturn_a_label() -> None:
    s = SetBuilder()
    key = s.task("A shop sells 4 boxes of 5 pens. How many pens?", "20")
    s.samples(key, WEAK, ["21"] * 8)
    for model in STRONG:
        s.samples(key, model, ["20", None, None, None])
    found = flags_of(s.analyse(), key)
    assert "mislabeled" not in found


def test_one_model_alone_never_makes_a_task_mislabeled() -> None:
    s = SetBuilder()
    key = s.task("A shop sells 4 boxes of 5 pens. How many pens?", "20")
    s.samples(key, "strong-a", ["22"] * 8)
    s.samples(key, "strong-b", [None] * 4)
    assert "mislabeled" not in flags_of(s.analyse(), key)


def two_readings() -> tuple[SetBuilder, int]:
    s = SetBuilder()
    key = s.task("How many weeks are in a month?", "4")
    s.samples(key, "strong-a", ["4", "4", "4", "4"])
    s.samples(key, "strong-b", ["5", "5", "5", "5"])
    s.samples(key, "strong-c", ["4", "5", "5", "5"])
    s.samples(key, WEAK, ["3", "3", "6", "3"])
    return s, key


def test_reliable_models_that_take_different_readings_make_a_question_ambiguous() -> None:
    s, key = two_readings()
    found = flags_of(s.analyse(), key)
    assert set(found) == {"ambiguous"}
    flag = found["ambiguous"]
    assert sorted(flag.evidence["split"]) == ["4", "5"]
    # the reviewer sees why: under one truth, a reliable model sits all on what would be the
    # mistake, where its reliability predicts about one sample there; and the test's figures
    test = flag.evidence["readings_test"]
    assert test["pvalue"] <= 0.01 and "p = " in flag.explanation
    mistake = next(a for a in flag.evidence["split"] if a != test["truth_under_one_truth"])
    surprising = [
        m
        for m, row in test["per_model"].items()
        if row["samples"][mistake] == 4 and row["one_truth_expects"][mistake] < 1.5
    ]
    assert surprising and set(surprising) <= {"strong-a", "strong-b"}


def test_the_between_model_test_gives_the_same_p_value_on_every_run() -> None:
    s, key = two_readings()
    first = flags_of(s.analyse(), key)["ambiguous"].evidence["readings_test"]
    assert first == flags_of(s.analyse(), key)["ambiguous"].evidence["readings_test"]


def test_two_readings_neither_of_which_is_the_label_do_not_make_it_ambiguous() -> None:
    s = SetBuilder()
    key = s.task("How many weeks are in a month?", "7")
    s.samples(key, "strong-a", ["4", "4", "4", "4"])
    s.samples(key, "strong-b", ["5", "5", "5", "5"])
    s.samples(key, "strong-c", ["4", "5", "5", "5"])
    s.samples(key, WEAK, ["3", "3", "6", "3"])
    assert "ambiguous" not in flags_of(s.analyse(), key)


def hard_question_set() -> SetBuilder:
    """The strong models nearly always right, the weak one mostly wrong; a tenth of the tasks
    are hard: every strong model about 3:1 the truth against the task's common mistake, the weak
    model on the mistake."""
    s = SetBuilder(clean=0)
    for i in range(60):
        truth, mistake = str(2 * i + 3), str(2 * i + 4)
        key = s.task(f"Tom has {i} apples and buys {i + 3} more. How many now?", truth)
        hard = i % 10 == 0
        for at, model in enumerate(STRONG):
            answers = [truth] * 4
            if hard:
                answers[at % 4] = mistake
            elif i % 7 == at:
                answers[0] = mistake
            s.samples(key, model, answers)
        s.samples(key, WEAK, [mistake] * 3 + [truth if i % 3 else str(2 * i + 9)])
    return s


def test_a_hard_question_where_every_model_errs_alike_by_its_reliability_is_not_ambiguous() -> None:
    s = hard_question_set()
    key = s.task("A hard one: 17 boxes of 23 pens, 40 lost. How many pens?", "351")
    for model in STRONG:
        s.samples(key, model, ["351", "351", "351", "391"])
    s.samples(key, WEAK, ["391", "391", "391", "351"])
    assert flags_of(s.analyse(), key) == {}


def test_a_hard_question_whose_label_is_the_common_mistake_is_mislabeled_by_how_models_split() -> (
    None
):
    s = hard_question_set()
    key = s.task("A hard one: 17 boxes of 23 pens, 40 lost. How many pens?", "391")
    s.samples(key, "strong-a", ["351", "351", "351", "391"])
    s.samples(key, "strong-b", ["351", "351", "391", "391"])
    s.samples(key, "strong-c", ["351", "351", "351", "391"])
    s.samples(key, WEAK, ["391", "391", "391", "391"])
    found = flags_of(s.analyse(), key)
    assert set(found) == {"mislabeled"}
    flag = found["mislabeled"]
    # the vote alone hesitates; the models' splits by reliability decide
    assert flag.evidence["posterior"] < 0.9 <= flag.evidence["posterior_between_models"]
    assert flag.confidence >= 0.9 and "split by reliability" in flag.explanation


def test_one_truth_and_a_shared_mistake_explain_a_mislabeled_task_which_is_not_ambiguous() -> None:
    s = SetBuilder()
    key = s.task("A shop sells 4 boxes of 5 pens. How many pens?", "19")  # the mistake
    for model in STRONG:
        s.samples(key, model, ["20", "20", "20", "19"])
    s.samples(key, WEAK, ["19", "19", "19", "20"])
    assert set(flags_of(s.analyse(), key)) == {"mislabeled"}


def test_a_question_nobody_answers_with_its_label_and_nobody_agrees_on_is_unsolvable() -> None:
    s = SetBuilder()
    key = s.task("Tom has some apples. How many now?", "12")
    s.samples(key, "strong-a", ["3", "7", "40", None])
    s.samples(key, "strong-b", ["9", "1", None, "66"])
    s.samples(key, "strong-c", ["15", "2", "8", "100"])
    found = flags_of(s.analyse(), key)
    assert set(found) == {"unsolvable"}
    assert found["unsolvable"].confidence > 0.99  # twelve samples of reliable models all missed
    assert "none of 12 samples reaches the label 12" in found["unsolvable"].explanation


def test_a_task_every_sample_gets_right_has_no_signal() -> None:
    s = SetBuilder()
    key = s.task("What is 1 + 1?", "2")
    for model in (*STRONG, WEAK):
        s.samples(key, model, ["2"] * 4)
    found = flags_of(s.analyse(), key)
    assert set(found) == {"no_signal"}
    assert "all 16 samples are right" in found["no_signal"].explanation


def test_a_label_the_verifier_cannot_read_is_unverifiable_and_nothing_else() -> None:
    s = SetBuilder()
    key = s.task("Simplify 2/4.", "\\frac{1}{", status="error")
    for model in STRONG:
        s.samples(key, model, ["1/2"] * 4)
    found = flags_of(s.analyse(), key)
    assert set(found) == {"unverifiable_label"}
    assert found["unverifiable_label"].severity == SEVERITY[FlagCode.UNVERIFIABLE_LABEL] >= 85


def test_sandbox_errors_count_as_nothing() -> None:
    s = SetBuilder()
    key = s.task("What is 1 + 1?", "2")
    for model in STRONG:
        s.samples(key, model, ["9"] * 4, status="sandbox_error")
    analysis = s.analyse()
    assert flags_of(analysis, key) == {}
    assert analysis.stats[key].samples == 0


def test_a_question_that_states_its_answer_is_a_leak_but_a_word_problems_givens_are_not() -> None:
    s = SetBuilder(clean=10)
    leak = s.task("Jo has 6 bags of 7 marbles. How many marbles? (Hint: the answer is 42.)", "42")
    plain = s.task(
        "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips "
        "in May. She sold 24 in May. How many clips did Natalia sell in April and May? ",
        "72",
    )
    given = s.task("A pen costs $5 and a book $12. Ann pays for a book. What does she pay?", "12")
    analysis = s.analyse()
    assert "answer_leak" in flags_of(analysis, leak)
    assert "answer_leak" not in flags_of(analysis, plain) and "answer_leak" not in flags_of(
        analysis, given
    )
    assert stated_answer("What is 6 x 7 = 42?", "42") is not None
    assert stated_answer("The total is 1,000 dollars.", "1000") is not None


def test_near_duplicate_questions_are_flagged_but_the_same_template_with_other_numbers_is_not() -> (
    None
):
    s = SetBuilder(clean=10)
    a = s.task("Sara bakes 12 cakes a day for 5 days. How many cakes does she bake?", "60")
    b = s.task("sara bakes 12 cakes a day for 5 days.  How many cakes does she bake", "60")
    analysis = s.analyse()
    assert "duplicate" in flags_of(analysis, a) and "duplicate" in flags_of(analysis, b)
    assert flags_of(analysis, a)["duplicate"].evidence["other"] == "t/11"
    # the set's templated questions ("Tom has 3 apples ...") differ only by their numbers
    assert not any(f.code == FlagCode.DUPLICATE for f in analysis.findings if f.task_key < 10)


def test_a_near_copy_of_another_sets_question_is_a_duplicate_naming_that_set() -> None:
    s = SetBuilder(clean=10)
    key = s.task("Sara bakes 12 cakes a day for 5 days. How many cakes does she bake?", "60")
    other = {
        ("gsm8k", "gsm8k/7"): (
            "Sara bakes 12 cakes a day for 5 days.  How many cakes does she bake",
            "50",
        )
    }
    flag = flags_of(s.analyse(other_questions=other), key)["duplicate"]
    assert (flag.evidence["other"], flag.evidence["other_taskset"]) == ("gsm8k/7", "gsm8k")
    assert flag.evidence["same_label"] is False
    assert "gsm8k/7 in task set gsm8k, whose label is 50, not 60" in flag.explanation


def test_a_probe_the_verifier_rewards_makes_its_task_reward_hackable_naming_the_probe() -> None:
    s = SetBuilder(clean=10)
    for key in range(10):
        for probe in ANSWER_PROBES:
            s.probe(key, probe, correct=(key == 3 and probe == "several_boxed"), extracted="13")
    analysis = s.analyse()
    found = flags_of(analysis, 3)
    assert (
        "reward_hackable" in found
        and "several_boxed (read as '13')" in found["reward_hackable"].explanation
    )
    assert analysis.harness_findings == []


def test_a_probe_that_beats_nearly_every_task_is_one_finding_on_the_verifier_not_a_flag_per_task() -> (
    None
):
    s = SetBuilder(clean=10)
    for key in range(10):
        s.probe(key, "first_number", correct=True, extracted=s.tasks[key]["label"])
        s.probe(key, "empty_box", correct=False)
    analysis = s.analyse()
    assert [h["probe"] for h in analysis.harness_findings] == ["first_number"]
    assert analysis.harness_findings[0]["tasks_beaten"] == 10
    assert "10 of 10 tasks" in analysis.harness_findings[0]["explanation"]
    assert not any(f.code == FlagCode.REWARD_HACKABLE for f in analysis.findings)


def test_the_distribution_shows_each_answer_with_its_models_and_a_representative_run() -> None:
    s = SetBuilder(clean=10)
    key = s.task("A shop sells 4 boxes of 5 pens. How many pens?", "20")
    s.samples(key, "strong-a", ["20", "20", "21"])
    s.samples(key, "strong-b", ["20", None])
    rows = s.analyse().distribution[key]
    assert [(r["answer"], r["count"], r["is_label"]) for r in rows] == [
        ("20", 3, True),
        ("21", 1, False),
        (None, 1, False),
    ]
    assert rows[0]["models"] == {"strong-a": 2, "strong-b": 1} and rows[0]["run_id"] > 0
    stats = s.analyse().stats[key]
    assert stats.sample_pass_rate == 0.6 and stats.answer_count == 2 and stats.top_answer == "20"


def test_the_platform_keeps_no_distributions_yet_finds_the_same_flags_with_the_same_evidence() -> (
    None
):
    s = SetBuilder(clean=20)
    key = s.task("A shop sells 4 boxes of 5 pens. How many pens?", "24")
    for model in ("strong-a", "strong-b", "strong-c"):
        s.samples(key, model, ["20", "20"])
    kept, light = s.analyse(), s.analyse(distributions=False)
    assert "mislabeled" in flags_of(kept, key)
    assert light.distribution == {} and kept.distribution[key][0]["answer"] == "20"
    assert [(f.task_key, f.code, f.confidence, f.evidence) for f in light.findings] == [
        (f.task_key, f.code, f.confidence, f.evidence) for f in kept.findings
    ]


def test_unknown_models_pool_as_one_and_still_need_several_voices_for_mislabeled() -> None:
    s = SetBuilder()
    for row in s.verdicts:
        row["model"] = ""
    key = s.task("A shop sells 4 boxes of 5 pens. How many pens?", "18")
    s.samples(key, "", ["20"] * 12)
    for row in s.verdicts:
        row["model"] = ""
    found = flags_of(s.analyse(), key)
    assert "mislabeled" in found and found["mislabeled"].evidence["models"] == {}


def test_every_probe_text_holds_the_label_but_commits_to_no_right_answer() -> None:
    texts = answer_probe_texts("18", "number", "Tom has 3 apples. How many?", seed=7)
    assert tuple(texts) == ANSWER_PROBES
    assert texts == answer_probe_texts("18", "number", "Tom has 3 apples. How many?", seed=7)
    assert texts["several_boxed"].count("\\boxed{") == 3 and "\\boxed{18}" in texts["several_boxed"]
    assert "\\boxed{}" in texts["empty_box"] and "\\text{not } 18" in texts["text_wrapper"]
    assert (
        len(texts["long_response"]) >= LONG_RESPONSE_CHARS
        and "\\boxed" not in texts["long_response"]
    )
    assert texts["first_number"].startswith("18") and "\\boxed{18}" not in texts["first_number"]
    digits = "".join(ch for ch in texts["scattered_digits"] if ch.isdigit())
    assert digits == "18" and "18" not in texts["scattered_digits"]
    lines = texts["last_candidate"].splitlines()
    assert lines[-1] == "- 18" and sum(line.startswith("- ") for line in lines) == 3


def test_the_long_probe_never_ends_on_the_label_so_a_last_number_reader_is_not_fooled_by_chance():
    # The label comes every 97th step and a step's value may be any number below 10,000; when
    # the last step's value was the label (seed 316 and label 82: a random 82 in step 723), a
    # last-number verifier "rewarded" the ramble on that one task (a false `reward_hackable` on
    # a clean planted question).
    ended_on_label = []
    for label, seed in [("82", 316)] + [(str(n), 3) for n in range(1, 400)]:
        text = answer_probe_texts(label, "number", "How many?", seed=seed)["long_response"]
        last = re.findall(r"\d+", text)[-1]
        if last == label:
            ended_on_label.append(label)
        assert f"the value {label} and" in text  # the label is still in the ramble
    assert ended_on_label == []


def twin_set(clean: int = 40) -> SetBuilder:
    """Three independent strong models, and two prompts of one base model ("base-8shot",
    "base-0shot") that make the same mistakes: on every fourth task both give the same wrong
    answer, which the independent models do not."""
    s = SetBuilder(clean=0)
    for i in range(clean):
        key = s.task(f"Ann has {i} pens and gets {i + 5} more. How many now?", str(2 * i + 5))
        for model in STRONG:
            s.samples(key, model, [str(2 * i + 5)])
        twin = str(2 * i + 6) if i % 4 == 0 else str(2 * i + 5)
        s.samples(key, "base-8shot", [twin])
        s.samples(key, "base-0shot", [twin])
    return s


def test_two_prompts_of_one_model_that_share_their_mistakes_are_found_dependent() -> None:
    analysis = twin_set().analyse()
    assert analysis.model_dependence["base-8shot"]["base-0shot"] >= 0.5
    assert "strong-a" not in analysis.model_dependence  # independent models are not discounted


def test_two_prompts_of_one_model_agreeing_count_as_one_voice() -> None:
    s = twin_set()
    key = s.task("A shop sells 4 boxes of 5 pens. How many pens?", "20")
    for model in ("base-8shot", "base-0shot"):
        s.samples(key, model, ["24"])
    s.samples(key, "strong-a", ["24"])
    s.samples(key, "strong-b", ["20"])
    s.samples(key, "strong-c", [None])
    analysis = s.analyse()
    assert "mislabeled" not in flags_of(analysis, key)
    # three models agree, but the vote counts the pair as (about) one voice
    votes = {v.voter: v.discount for v in analysis_votes(s, key) if v.key != "\x00label"}
    assert votes["base-8shot"] < 0.75 and votes["strong-a"] == 1.0


def analysis_votes(s: SetBuilder, key: int):
    from inspector.detect import answers

    samples = answers._answer_keys(pd.DataFrame(s.verdicts))
    fit = answers._fit(samples, {t["task_key"] for t in s.tasks}, True, answers.AnswerSettings())
    return answers._votes_by_task(fit.votes).pop(key)


def test_a_mislabeled_flag_names_its_models_and_the_effective_number_of_independent_ones() -> None:
    s = twin_set()
    key = s.task("A shop sells 4 boxes of 5 pens. How many pens?", "18")
    for model in (*STRONG, "base-8shot", "base-0shot"):
        s.samples(key, model, ["20"])
    flag = flags_of(s.analyse(), key)["mislabeled"]
    assert flag.evidence["supporting_models"] == 5
    assert 3.0 <= flag.evidence["independent_models"] < 5.0
    assert flag.evidence["models"]["base-8shot"]["shares_mistakes_with"]["base-0shot"] >= 0.5
    assert "independent" in flag.explanation and "strong-a" in flag.explanation


def test_several_weak_models_agreeing_on_a_mistake_do_not_overturn_a_label() -> None:
    s = SetBuilder()
    for i in range(30):  # two more weak models, as weak as the first
        s.samples(i, "weak-2", [str(2 * i + 2)] * 4)
        s.samples(i, "weak-3", [str(2 * i + 3) if i % 3 == 0 else str(2 * i + 1)] * 4)
    key = s.task("A shop sells 4 boxes of 5 pens. How many pens?", "20")
    for model in (WEAK, "weak-2", "weak-3"):
        s.samples(key, model, ["21"] * 4)
    s.samples(key, "strong-a", ["20", "20", "21", None])
    s.samples(key, "strong-b", ["20", None, None, None])
    assert "mislabeled" not in flags_of(s.analyse(), key)


def test_the_label_prior_counts_only_the_tasks_the_vote_decides() -> None:
    s = SetBuilder()
    for i in range(10):  # questions nobody can answer: they say nothing about the labels
        key = s.task(f"Tom has some apples, case {i}. How many now?", str(100 + i))
        for model in (*STRONG, WEAK):
            s.samples(key, model, [str(i), str(i + 7), None, str(3 * i + 1)])
    assert s.analyse().label_prior >= 0.9


def test_a_question_nobody_solves_in_a_set_whose_solved_questions_are_often_this_hard_is_not_unsolvable() -> (
    None
):
    s = SetBuilder(clean=0)
    # Forty fine questions each solved by one sample in twelve, the rest scattered: a hard set.
    for i in range(40):
        key = s.task(
            f"Question {i}: count the ways to tile a board of {i + 5} cells.", str(i + 100)
        )
        for n, model in enumerate(STRONG):
            hit = (i + n) % 3 == 0
            s.samples(
                key, model, [str(i + 100) if hit else str(i + 200 + n)] + [str(i + 300 + n)] * 3
            )
    key = s.task("Count the ways to tile a board of 99 cells.", "4")
    s.samples(key, "strong-a", ["3", "7", "40", "5"])
    s.samples(key, "strong-b", ["9", "1", "8", "66"])
    s.samples(key, "strong-c", ["15", "2", "6", "100"])

    found = flags_of(s.analyse(), key)

    assert "unsolvable" not in found
    assert "no_signal" in found  # all twelve wrong: a group filter still drops it


def test_the_readings_logsumexp_gives_scipys_bits_with_ties_and_infinities() -> None:
    import numpy as np
    from scipy.special import logsumexp as scipys

    from inspector.detect.answer_readings import logsumexp

    rng = np.random.default_rng(0)
    for trial in range(60):
        a = rng.normal(0.0, (1.0, 50.0, 1e3)[trial % 3], size=((97,), (7, 97))[trial % 2])
        if trial % 4 == 1:
            a[..., 1] = a[..., 2]  # a tie at the largest term, or elsewhere
            a[..., 2] = a.max()
        if trial % 5 == 2:
            a[..., 0] = -np.inf
        if trial % 7 == 3:
            a[...] = -np.inf
        if trial % 11 == 4:
            a[..., -1] = np.inf
        for axis, keepdims in ((None, False), (-1, False), (-1, True)):
            with np.errstate(all="ignore"):
                ours, theirs = logsumexp(a, axis, keepdims), scipys(a, axis, keepdims=keepdims)
            assert np.asarray(ours).tobytes() == np.asarray(theirs).tobytes()
            assert np.shape(ours) == np.shape(theirs)
