"""An outside tester's attacks on the answer verifier (workers/sandbox/verifier.py and the
program it runs in the sandbox). Every test asserts the behaviour a reward must have; a test that
fails names a hole. Hostile text is verified only inside the sandbox (the local bubblewrap
backend, and Docker for the batch-contamination case)."""

from __future__ import annotations

import pytest

from workers.sandbox import SandboxUnavailable
from workers.sandbox.verifier import VerifyItem, verify_answers


def _local():
    from inspector.services.function_runs import sandbox_backend

    try:
        return sandbox_backend()
    except SandboxUnavailable as exc:
        pytest.skip(f"no local sandbox: {exc}")


def _docker():
    from workers.sandbox import get_sandbox

    try:
        return get_sandbox("docker")
    except SandboxUnavailable as exc:
        pytest.skip(f"no Docker sandbox: {exc}")


def verify(cases, *, rule="auto", sandbox=None):
    """One batch: `cases` are (text, label) pairs; the verdicts in order."""
    from inspector.services.function_runs import run_limits

    items = [VerifyItem(str(k), text, label) for k, (text, label) in enumerate(cases)]
    return verify_answers(sandbox or _local(), items, rule=rule, limits=run_limits())


def rewarded(verdicts, cases):
    return [text for (text, _), v in zip(cases, verdicts, strict=True) if v.correct]


# --- Reward without the right answer -------------------------------------------------------------


@pytest.mark.parametrize("rule", ["auto", "gsm8k", "answer_is"])
def test_a_different_integer_within_the_relative_tolerance_earns_nothing(rule):
    # The 1e-6 relative tolerance is for decimals that round; between two integers it rewards a
    # count that is off by one (or by 11 at a hundred million).
    wrap = {
        "auto": "\\boxed{%s}",
        "gsm8k": "Adding them up.\n#### %s",
        "answer_is": "The answer is %s.",
    }[rule]
    cases = [(wrap % "1000001", "1000000"), (wrap % "123456800", "123456789")]
    assert rewarded(verify(cases, rule=rule), cases) == []


def test_two_numbers_side_by_side_are_not_read_as_their_sum():
    # math_verify reads juxtaposed numbers as a mixed number (1 17 = 1 + 17): "1 (17)" is 17 in
    # mathematics, and \phantom{1}17 is displayed as 17; neither answers 18.
    cases = [
        ("\\boxed{1\\ 17}", "18"),
        ("\\boxed{1 \\quad 17}", "18"),
        ("\\boxed{\\phantom{1}17}", "18"),
        ("\\boxed{17 (+1)}", "18"),
        ("The answer is 1 (17).", "18"),
        ("The answer is 17 (1).", "18"),
        ("Counting both groups.\n#### 1\\ 17", "18"),
    ]
    assert rewarded(verify(cases), cases) == []


def test_words_that_retract_or_doubt_a_number_make_it_wrong():
    # The README: "words that hedge a number ("18 or more", "not 18") make it wrong"; any word
    # after a number is taken for its unit unless it is on a short list of hedges.
    cases = [
        ("The answer is 18 is wrong.", "18"),
        ("The answer is 18 is incorrect.", "18"),
        ("\\boxed{18 \\text{ is wrong}}", "18"),
        ("\\boxed{18 \\text{ nope}}", "18"),
        ("\\boxed{18\\text{?}}", "18"),
        ("\\boxed{18\\text{ apples maybe}}", "18"),
        ("#### 18 maybe", "18"),
        ("#### 18 perhaps", "18"),
        ("#### 18 probably", "18"),
        ("#### 18 false", "18"),
    ]
    assert rewarded(verify(cases), cases) == []


def test_the_last_number_fallback_does_not_reward_a_negated_or_hedged_number():
    # With no box, no "####" and no "the answer is", auto takes the last number whatever the
    # words before it say.
    cases = [
        ("It is definitely not 18.", "18"),
        ("It can't be 18.", "18"),
        ("The count is at least 18", "18"),
        ("The count is more than 18", "18"),
        ("17 (or 18)", "18"),
        ("maybe 17, maybe 18", "18"),
        ("either 17 or maybe 18", "18"),
        ("Could be 17? Could be 18?", "18"),
        ("17 versus 18", "18"),
        ("17 / 18", "18"),
    ]
    assert rewarded(verify(cases), cases) == []


def test_no_probe_earns_a_strict_rule_anything_and_last_candidate_shows_a_last_number_reader():
    # The verifier probes commit to no right answer. A rule that takes only a committed answer
    # rewards none; `auto`, which falls back to the last number, rewards `last_candidate` (the
    # label last in a list of candidates, one a line) whatever the label's length: the probe
    # made to show such a verifier (`scattered_digits` shows it only for one-digit labels).
    from inspector.detect.answer_probes import answer_probe_texts

    for label in ("18", "7", "2.5"):
        texts = answer_probe_texts(label, "number", "Tom has 3 apples. How many?", seed=7)
        cases = [(text, label) for text in texts.values()]
        for rule in ("boxed", "gsm8k", "answer_is"):
            assert rewarded(verify(cases, rule=rule), cases) == [], (label, rule)
        rewarded_by_auto = rewarded(verify(cases, rule="auto"), cases)
        assert texts["last_candidate"] in rewarded_by_auto, label
        assert set(rewarded_by_auto) <= {texts["last_candidate"], texts["scattered_digits"]}


def test_a_final_answer_after_the_box_that_retracts_it_is_not_ignored():
    # Two final answers that differ (a box, then a "####" or a "final answer is" correcting it)
    # commit to neither: as for several different boxed answers, no reward.
    cases = [
        ("\\boxed{18}. Wait, that is wrong. The final answer is 17.", "18"),
        ("So \\boxed{18}.\n#### 17", "18"),
    ]
    assert rewarded(verify(cases), cases) == []


# --- One item's text changing other items' verdicts ----------------------------------------------


@pytest.mark.parametrize("backend", ["local", "docker"])
def test_a_line_separator_in_an_answer_changes_no_verdict_of_the_batch(backend):
    # json.dumps(ensure_ascii=False) leaves U+2028, U+2029 and U+0085 unescaped and the parent
    # splits the sandbox's output with str.splitlines(), which breaks lines there: the item's
    # verdict is lost, the rest of the batch runs again in a fresh sandbox, and after the fourth
    # such item every later item (other users' right answers) is "sandbox_error".
    good = ("\\boxed{18}", "18")
    cases = [
        good,
        ("\\boxed{17\u2028x}", "18"),
        good,
        ("The answer is 1\x857.", "18"),
        good,
        ("\\boxed{a\u2029b}", "18"),
        good,
        ("\\boxed{x\u2028y}", "18"),
        good,
        good,
        ("\\boxed{18\\text{\u2028}}", "18"),  # a right answer, displayed as 18
    ]
    sandbox = _local() if backend == "local" else _docker()
    verdicts = verify(cases, sandbox=sandbox)
    assert [v.status for v in verdicts] == ["ok"] * len(cases), [v.detail for v in verdicts]
    assert [v.correct for v in verdicts] == [
        True, False, True, False, True, False, True, False, True, True, True,
    ]  # fmt: skip


# --- Right answers that earn nothing (false negatives) --------------------------------------------


def test_a_box_holding_only_a_full_stop_does_not_hide_the_answer():
    # An empty box beside the answer is ignored (\boxed{18}\boxed{ } is rewarded); a box of
    # punctuation, empty once unwrapped, makes the whole response "no_answer".
    cases = [("\\boxed{18}\\boxed{.}", "18")]
    (verdict,) = verify(cases)
    assert (verdict.status, verdict.correct) == ("ok", True), verdict.detail


def test_a_number_in_bold_math_is_that_number():
    # \textbf{18} and \mathrm{18} are read as 18; \mathbf{18} is "not a number".
    cases = [("\\boxed{\\mathbf{18}}", "18")]
    assert rewarded(verify(cases), cases) == ["\\boxed{\\mathbf{18}}"]
