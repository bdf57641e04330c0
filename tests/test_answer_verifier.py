"""The answer verifier (workers/sandbox/verifier.py) in real sandboxes, bubblewrap and Docker:
what it extracts, what it counts as equivalent, what it refuses to reward, and that untrusted
text can neither run code nor hold a batch past its limits.

Needs bubblewrap, the verifier's libraries (bin/setup) and, for the Docker half, the engine and
the verifier image (bin/docker-up): without them these tests FAIL with the reason, they never
skip. Plain tests, no database.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import pytest

from workers.sandbox import Limits, Outcome, SandboxUnavailable, get_sandbox
from workers.sandbox.local import LocalSandbox, UnsandboxedSandbox
from workers.sandbox.verifier import Verdict, VerifyItem, verify_answers

LIMITS = Limits(wall_seconds=30)


@pytest.fixture(scope="module", params=["local", "docker"])
def sandbox(request):
    try:
        chosen = get_sandbox(request.param)
    except SandboxUnavailable as exc:
        pytest.fail(f"the {request.param} sandbox is unavailable: {exc}", pytrace=False)
    return chosen


def verify(sandbox, *items: VerifyItem, **options) -> dict[str, Verdict]:
    verdicts = verify_answers(sandbox, items, limits=options.pop("limits", LIMITS), **options)
    assert [v.key for v in verdicts] == [item.key for item in items]
    return {v.key: v for v in verdicts}


def item(key: str, text: str, label: str, **fields) -> VerifyItem:
    return VerifyItem(key=key, text=text, label=label, **fields)


# --- Extraction and equivalence ----------------------------------------------------------------


def test_a_gsm8k_final_line_earns_the_reward_and_a_wrong_one_does_not(sandbox):
    work = "Janet sells 16 - 3 - 4 = <<16-3-4=9>>9 duck eggs.\nShe makes 9 * 2 = $<<9*2=18>>18."
    got = verify(
        sandbox,
        item("right", work + "\n#### 18", "18"),
        item("wrong", work + "\n#### 19", "18"),
        item("thousands", "#### 1,000", "1000"),
        item("only the last line counts", "#### 18\nwait, no\n#### 20", "18", answer_type="number"),
    )
    assert got["right"].status == "ok" and got["right"].correct
    assert got["right"].extracted == "18" and got["right"].canonical == "18"
    assert got["wrong"].status == "ok" and not got["wrong"].correct
    assert got["thousands"].correct and got["thousands"].canonical == "1000"
    assert got["only the last line counts"].extracted == "20"
    assert not got["only the last line counts"].correct


def test_a_boxed_fraction_equals_the_same_number_written_as_a_decimal(sandbox):
    got = verify(
        sandbox,
        item("frac", r"So the probability is $\boxed{\frac{1}{2}}$.", "0.5"),
        item("short frac", r"\boxed{\frac12}", "0.5"),
        item("decimal", r"\boxed{0.5}", r"\frac{1}{2}"),
        item("slash", "The answer is 1/2.", r"\frac{1}{2}"),
        item("third", r"\boxed{0.3333333333}", r"\frac{1}{3}"),
        item("not a half", r"\boxed{0.51}", r"\frac{1}{2}"),
        item("expression", r"\boxed{(x+1)^2}", "x^2+2x+1"),
        item("set", r"\boxed{\{3, 1, 2\}}", r"\{1,2,3\}"),
    )
    for key in ("frac", "short frac", "decimal", "slash", "third", "expression", "set"):
        assert got[key].status == "ok" and got[key].correct, got[key]
    assert not got["not a half"].correct
    # The same canonical form, whichever way the half was written: answers group across samples.
    assert {got[k].canonical for k in ("frac", "short frac", "decimal", "slash")} == {"0.5"}


def test_choice_answers_compare_the_letter(sandbox):
    got = verify(
        sandbox,
        item("letter", r"\boxed{B}", "B"),
        item("parenthesised", "The answer is (B).", "B"),
        item("with its text", r"\boxed{B) 42}", "(B)"),
        item("option", "Final answer: option B", "B"),
        item("other letter", r"\boxed{C}", "B"),
        item("two letters", r"\boxed{B or C}", "B"),
    )
    for key in ("letter", "parenthesised", "with its text", "option"):
        assert got[key].correct and got[key].canonical == "B", got[key]
    assert not got["other letter"].correct
    assert not got["two letters"].correct


def test_text_answers_ignore_case_whitespace_punctuation_and_articles(sandbox):
    got = verify(
        sandbox,
        item("city", "The answer is  Paris.", "Paris"),
        item("article", r"\boxed{\text{the Eiffel tower}}", "Eiffel Tower"),
        item("other city", "The answer is Lyon.", "Paris"),
    )
    assert got["city"].correct and got["city"].canonical == "paris"
    assert got["article"].correct
    assert not got["other city"].correct


def test_units_and_currency_around_a_number_are_stripped(sandbox):
    got = verify(
        sandbox,
        item("text unit", r"\boxed{18 \text{ dollars}}", "18"),
        item("dollar sign", "#### $18.00", "18"),
        item("unit word", "#### 18 apples", "18"),
        item("percent", r"\boxed{50\%}", "50"),
        item("equation", r"\boxed{x = 18}", "18"),
        item("last number", "She makes $18 every day.", "18"),
    )
    for key, verdict in got.items():
        assert verdict.status == "ok" and verdict.correct, (key, verdict)
    assert {v.canonical for v in got.values()} == {"18", "50"}


def test_words_that_hedge_a_number_make_it_wrong(sandbox):
    got = verify(
        sandbox,
        item("or more", "#### 18 or more", "18"),
        item("not", r"\boxed{\text{not } 18}", "18"),
        item("sentence", "The answer is: There are 18 apples.", "18"),
    )
    for key, verdict in got.items():
        assert verdict.status == "ok" and not verdict.correct, (key, verdict)


def test_an_answer_on_the_line_after_the_answer_is_is_taken(sandbox):
    got = verify(
        sandbox, item("next line", "Therefore, the answer (arabic numerals) is:\n\n25", "25")
    )
    assert got["next line"].correct and got["next line"].extracted == "25"


# --- What earns nothing ------------------------------------------------------------------------


def test_several_different_boxed_answers_earn_nothing_but_the_same_one_repeated_does(sandbox):
    got = verify(
        sandbox,
        item("hedged", r"It is \boxed{17} or maybe \boxed{18}.", "18"),
        item("repeated", r"So \boxed{18}. Again: \boxed{18.0}", "18"),
    )
    assert got["hedged"].status == "ok" and not got["hedged"].correct
    assert "several different boxed answers" in got["hedged"].detail
    assert got["repeated"].correct


def test_an_empty_box_is_no_answer(sandbox):
    got = verify(sandbox, item("empty", r"The answer is \boxed{ }.", "18"))
    assert got["empty"].status == "no_answer" and not got["empty"].correct
    assert got["empty"].extracted == ""


def test_a_list_of_candidates_is_not_correct_unless_the_label_is_a_list(sandbox):
    got = verify(
        sandbox,
        item("list", r"\boxed{1, 2 or 3}", "2"),
        item("or", "#### 2 or 3", "2"),
        item("last numbers", "It is either 3 or 2", "2"),
        item("plus minus", r"\boxed{\pm 2}", "2"),
        item("list label", r"\boxed{3, 1, 2}", "1, 2, 3"),
    )
    for key in ("list", "or", "last numbers", "plus minus"):
        assert got[key].status == "ok" and not got[key].correct, got[key]
    assert "candidates" in got["list"].detail
    assert got["list label"].correct


def test_odd_characters_in_a_response_cost_nothing_to_the_rest_of_the_batch(sandbox):
    got = verify(
        sandbox,
        item("lone surrogate", "\ud800 so #### 18", "18"),
        item("nul", "\x00\x00 #### 18", "18"),
        item("fine", "#### 18", "18"),
    )
    assert all(v.status == "ok" and v.correct for v in got.values()), got


def test_a_response_with_nothing_to_extract_is_no_answer(sandbox):
    got = verify(sandbox, item("words", "I do not know.", "18"))
    assert got["words"].status == "no_answer" and not got["words"].correct


def test_a_label_the_verifier_cannot_parse_gives_a_non_ok_status(sandbox):
    got = verify(
        sandbox,
        item("open frac", r"\frac{", r"\frac{", bare=True),
        item("empty", "", "", bare=True),
        item("not a number", "12", "twelve", answer_type="number"),
        item("fine", r"\frac{1}{2}", r"\frac{1}{2}", bare=True),
    )
    for key in ("open frac", "empty", "not a number"):
        assert got[key].status == "error" and not got[key].correct, got[key]
    assert got["fine"].status == "ok" and got["fine"].correct and got["fine"].canonical == "0.5"


# --- Untrusted text ----------------------------------------------------------------------------


def test_a_hanging_expression_times_out_per_answer_while_the_rest_of_the_batch_is_verified(
    sandbox,
):
    slow = r"\boxed{(10^{9999})^{9999}}"  # sympy works on it for seconds before it can compare
    items = [item("before", "#### 18", "18"), item("slow", slow, "x^2+1")]
    items += [item(f"after {n}", f"#### {n}", str(n)) for n in range(20)]
    started = time.monotonic()
    got = verify(sandbox, *items, per_answer_seconds=1.0)
    elapsed = time.monotonic() - started
    assert got["slow"].status == "timeout" and not got["slow"].correct
    assert got["slow"].seconds < 2.5
    assert got["before"].correct
    assert all(got[f"after {n}"].correct for n in range(20))
    assert elapsed < 15, elapsed


def test_towers_of_powers_and_deep_nesting_are_refused_without_a_wait(sandbox):
    got = verify(
        sandbox,
        item("tower", r"\boxed{9^{9^{9^{9}}}}", "1"),
        item("factorial", r"\boxed{100000!}", "1"),
        item("nested", r"\boxed{" + "{" * 3000 + "1" + "}" * 3000 + "}", "1"),
        item("fine", "#### 1", "1"),
    )
    for key in ("tower", "factorial", "nested"):
        assert got[key].status == "ok" and not got[key].correct, got[key]
        assert got[key].seconds < 0.5, got[key]
    assert got["fine"].correct


@pytest.fixture(params=["sandbox", "unsandboxed"])
def any_backend(request, sandbox):
    # Unsandboxed too: what proves the text is never run is a program that sees the whole machine.
    return sandbox if request.param == "sandbox" else UnsandboxedSandbox()


def test_python_code_in_a_response_is_never_executed(any_backend, tmp_path):
    canary = tmp_path / "ran"
    write = f"__import__('pathlib').Path({str(canary)!r}).write_text('x')"
    payloads = {
        "boxed": rf"\boxed{{{write}}}",
        "gsm8k": f"#### {write}",
        "exit": r"\boxed{__import__('os')._exit(0)}",
        "sleep": r"The answer is __import__('time').sleep(30).",
        "forged verdict": '\\boxed{print(\'{"i": 0, "s": "ok", "ok": true}\')}',
    }
    items = [item(key, text, "18") for key, text in payloads.items()]
    items += [item("lenient " + key, text, "18") for key, text in payloads.items()]
    strict = verify(any_backend, *items[: len(payloads)])
    lenient = verify(any_backend, *items[len(payloads) :], rule="lenient")
    assert not canary.exists()
    for verdict in [*strict.values(), *lenient.values()]:
        assert verdict.status in ("ok", "no_answer") and not verdict.correct, verdict
        assert verdict.seconds < 1.0, verdict


def test_a_5_mb_response_is_verified_within_the_time_limit(sandbox):
    filler = "Let me think about this again. " * (5_000_000 // 31)
    got = verify(
        sandbox,
        item("boxed", filler + r"\boxed{18}", "18"),
        item("last number", filler + "so 18", "18"),
        item("lenient", filler + r"\boxed{18}", "18"),
        per_answer_seconds=2.0,
    )
    for verdict in got.values():
        assert verdict.status == "ok" and verdict.correct, verdict
        assert verdict.seconds < 2.0


def test_5_mb_responses_shaped_to_slow_the_scanners_get_their_verdict_in_time(sandbox):
    n = 5_000_000
    shapes = {
        "digits": "1" * n,
        "thousands": "1" + ",111" * (n // 4) + "x",
        "unclosed boxes": "\\boxed{" * (n // 7),
        "brace flood": "\\boxed{" + "{" * n,
        "answer phrases": "the answer is " * (n // 14),
        "dollars": "$" * n,
    }
    got = verify(sandbox, *(item(key, text, "18") for key, text in shapes.items()))
    for key, verdict in got.items():
        assert verdict.status in ("ok", "no_answer") and not verdict.correct, (key, verdict)
        # In time: within the 2 s an answer has (a scanner that backtracks takes minutes on
        # these); 1.9 s was seen on a machine with a load of 16, 0.3-0.6 s on a quiet one.
        assert verdict.seconds < 2.0, (key, verdict)


def test_a_response_over_the_size_cap_is_an_error_and_not_sent(sandbox):
    got = verify(sandbox, item("huge", "x" * 8_000_001, "18"), item("fine", "#### 18", "18"))
    assert got["huge"].status == "error" and "longer than" in got["huge"].detail
    assert got["fine"].correct


def test_a_batch_of_2000_items_finishes_and_keeps_its_order(sandbox):
    items = [
        item(f"q{n}", f"Step one.\nStep two: {n} + 1 = {n + 1}.\n#### {n + n % 2}", str(n))
        for n in range(2000)
    ]
    started = time.monotonic()
    verdicts = verify_answers(sandbox, items, limits=LIMITS)
    elapsed = time.monotonic() - started
    assert [v.key for v in verdicts] == [i.key for i in items]
    assert [v.correct for v in verdicts] == [n % 2 == 0 for n in range(2000)]
    assert all(v.status == "ok" for v in verdicts)
    assert elapsed < 30, elapsed


# --- When an answer or the sandbox dies --------------------------------------------------------

# Put into the program before its call of main(): answers that do what no text can make the real
# verifier do (yet), to show what the parent does when a child ignores its alarms, crashes, or
# runs out of memory.
MISCHIEF = """
_real_verdict = verdict


def verdict(item, rule, symbolic, labels):
    if item["t"] == "deaf":
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM, signal.SIGPROF})
        time.sleep(60)
    if item["t"] == "crash":
        os.abort()
    if item["t"] == "greedy":
        hoard = bytearray(1 << 40)
    return _real_verdict(item, rule, symbolic, labels)

"""


class WithMischief:
    def __init__(self, real) -> None:
        self.real, self.name = real, real.name

    def run_verifier(self, program: str, *, limits: Limits):
        head, call = program.rsplit("\nmain(", 1)
        return self.real.run_verifier(f"{head}\n{MISCHIEF}\nmain({call}", limits=limits)


def test_an_answer_that_ignores_its_alarms_or_crashes_costs_that_item_only(sandbox):
    texts = ["#### 1", "deaf", "#### 2", "crash", "#### 3", "greedy", "#### 4"]
    items = [item(f"{n}", text, text.removeprefix("#### ")) for n, text in enumerate(texts)]
    started = time.monotonic()
    verdicts = verify_answers(WithMischief(sandbox), items, per_answer_seconds=1.0, limits=LIMITS)
    elapsed = time.monotonic() - started
    by_text = dict(zip(texts, verdicts, strict=True))
    assert by_text["deaf"].status == "timeout" and "killed" in by_text["deaf"].detail
    assert 1.9 < by_text["deaf"].seconds < 3
    assert by_text["crash"].status == "error" and "ended" in by_text["crash"].detail
    assert by_text["greedy"].status == "error" and "memory" in by_text["greedy"].detail
    assert all(by_text[f"#### {n}"].correct for n in range(1, 5))
    assert elapsed < 10, elapsed  # one sandbox: a fork per bad item, not a start


class DiesAfter:
    """A real sandbox whose first `deaths` runs end after `kept` verdicts, as a sandbox killed
    for memory does: the verdicts written before stay in its output, the rest never come."""

    def __init__(self, real, kept: int, deaths: int = 1) -> None:
        self.real, self.kept, self.deaths, self.runs = real, kept, deaths, 0
        self.name = real.name

    def run_verifier(self, program: str, *, limits: Limits):
        execution = self.real.run_verifier(program, limits=limits)
        self.runs += 1
        if self.runs > self.deaths:
            return execution
        lines = execution.stdout_tail.splitlines()[: 1 + self.kept]  # "ready", then verdicts
        return dataclasses.replace(
            execution,
            outcome=Outcome.OUT_OF_MEMORY,
            exit_code=-9,
            stdout_tail="\n".join(lines) + "\n",
            error="memory limit of 1 bytes",
        )


def test_a_sandbox_that_dies_mid_batch_keeps_its_verdicts_and_a_fresh_one_does_the_rest(sandbox):
    items = [item(f"q{n}", f"#### {n}", str(n)) for n in range(60)]
    dying = DiesAfter(sandbox, kept=37)
    verdicts = verify_answers(dying, items, limits=LIMITS)
    assert dying.runs == 2
    assert [v.key for v in verdicts] == [i.key for i in items]
    assert all(v.correct for v in verdicts[:37])
    killer = verdicts[37]
    assert killer.status == "error" and "out_of_memory" in killer.detail and not killer.correct
    assert all(v.status == "ok" and v.correct for v in verdicts[38:])


def test_a_sandbox_that_keeps_dying_ends_in_sandbox_errors_after_a_few_fresh_ones(sandbox):
    items = [item(f"q{n}", f"#### {n}", str(n)) for n in range(10)]
    dying = DiesAfter(sandbox, kept=1, deaths=100)
    verdicts = verify_answers(dying, items, limits=LIMITS)
    assert dying.runs == 4  # the first and three fresh ones
    statuses = [v.status for v in verdicts]
    # Each run keeps one verdict and blames the item it died on.
    assert statuses[:8] == ["ok", "error"] * 4
    assert statuses[8:] == ["sandbox_error"] * 2
    assert "fresh sandboxes" in verdicts[9].detail


# --- The libraries' place ----------------------------------------------------------------------

PROBE = """import os, socket, sys
print("lib", os.environ.get("VERIFIER_LIB"), os.path.isdir("/opt/verifier"))
try:
    open("/opt/verifier/x", "w")
    print("wrote")
except OSError:
    print("read-only")
try:
    socket.create_connection(("1.1.1.1", 53), timeout=1)
    print("online")
except OSError:
    print("offline")
"""


def test_verifier_sandboxes_see_the_libraries_read_only_and_offline(sandbox):
    verifier = sandbox.run_verifier(PROBE, limits=LIMITS)
    assert verifier.outcome is Outcome.PASSED, verifier
    assert verifier.stdout_tail.split() == ["lib", "/opt/verifier", "True", "read-only", "offline"]


def test_function_task_sandboxes_do_not_get_the_libraries(sandbox):
    plain = sandbox.run_python(PROBE, limits=LIMITS)
    assert plain.outcome is Outcome.PASSED, plain
    assert plain.stdout_tail.split()[:3] == ["lib", "None", "False"]


def test_missing_libraries_give_sandbox_errors_that_say_what_to_run(tmp_path):
    local = LocalSandbox(verifier_lib=str(tmp_path / "missing"))
    verdicts = verify_answers(local, [item("q", "#### 18", "18")], limits=LIMITS)
    assert verdicts[0].status == "sandbox_error"
    assert "bin/setup" in verdicts[0].detail


def test_the_verifier_image_name_changes_with_the_requirements(tmp_path):
    from workers.sandbox.docker import verifier_image_name

    requirements = tmp_path / "requirements-verifier.txt"
    requirements.write_text("sympy==1.14.0\n")
    first = verifier_image_name("inspector-sandbox:bookworm", str(requirements))
    requirements.write_text("sympy==1.13.0\n")
    second = verifier_image_name("inspector-sandbox:bookworm", str(requirements))
    assert first.startswith("inspector-sandbox:bookworm-verifier-") and first != second
    assert verifier_image_name("localhost:5000/sbx", str(requirements)).startswith(
        "localhost:5000/sbx:latest-verifier-"
    )
    assert Path(__file__).parent.parent.joinpath("requirements-verifier.txt").exists()


def test_the_contains_rule_rewards_a_list_of_candidates_that_the_default_rule_refuses(sandbox):
    hedge = "It is one of 16, 17, 18 or 19."
    strict = verify(sandbox, item("auto", hedge, "18"))
    loose = verify(sandbox, item("contains", hedge, "18"), rule="contains")

    assert not strict["auto"].correct
    assert loose["contains"].correct and loose["contains"].extracted == "18"


def test_a_text_label_of_broken_latex_is_one_the_verifier_cannot_read(sandbox):
    got = verify(
        sandbox,
        item("open", "boxed", r"\boxed{", answer_type="text", bare=True),
        item("empty", "sqrt", r"\sqrt{}", answer_type="text", bare=True),
        item("fine", "paris", r"\text{Paris}", answer_type="text", bare=True),
    )

    assert got["open"].status == "error" and "never closes" in got["open"].detail
    assert got["empty"].status == "error" and "empty argument" in got["empty"].detail
    assert got["fine"].status == "ok" and got["fine"].correct
