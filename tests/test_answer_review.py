"""The review doors of answer-graded tasks (a question with a label): what a reviewer sees on the
task page (question, label, the distribution of final answers per model with a chart, a
representative response per answer, the verifier's verdict on each probe, each flag's
evidence), a relabel through the page, the API and the command, and the manifest and report
that carry the label in force.

The tasks, runs and flags are built with the ORM as the verifier and the analysis leave them,
so these tests need neither."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.utils import timezone

from inspector import selectors
from inspector.models import (
    ApiToken,
    Flag,
    Inspection,
    ReviewEvent,
    Run,
    Sample,
    Task,
    TaskSet,
    TaskSetVersion,
)

pytestmark = pytest.mark.django_db

GSM8K_REASONING = (
    "Tom has 9 apples and buys 9 more.\nSo he has 9 + 9 = <<9+9=17>>17 apples.\n#### 17"
)
LONG_RESPONSE = (
    "Let us think step by step. " * 60
    + "Tom starts with 9 and buys 9 more, so 9 + 9 = 18.\n#### 18"
)


# --- Builders ------------------------------------------------------------------------------------


def answer_task(version, position, task_id, *, question, label, source, label_from, **extra):
    return Task.objects.create(
        version=version,
        task_id=task_id,
        position=position,
        kind=Task.ANSWER,
        prompt=question,
        canonical_solution=label,
        test="",
        entry_point="",
        source=source,
        content_hash=f"hash-{task_id}",
        metadata={"label_from": label_from},
        **extra,
    )


def verdict(status="ok", extracted="", canonical="", label="", why=""):
    return {
        "status": status,
        "extracted": extracted,
        "canonical": canonical if canonical or status != "ok" else extracted,
        "why": why,
        "label": label,
    }


class AnswerSet:
    """A GSM8K set as an inspection leaves it: `apples` (label 17, every strong model says 18:
    mislabeled), `sum` (a probe the verifier rewards: reward_hackable), `half` (the verifier
    cannot read its label), `sign` (answers split between 4 and -4)."""

    def __init__(self) -> None:
        self.taskset = TaskSet.objects.create(name="gsm8k", answer_rule="gsm8k")
        self.version = TaskSetVersion.objects.create(
            taskset=self.taskset, number=1, tasks_filename="test.jsonl", task_count=4
        )
        self.inspection = Inspection.objects.create(
            version=self.version,
            status=Inspection.FINISHED,
            config={"kind": Task.ANSWER, "answer": {"rule": "gsm8k"}},
            finished_at=timezone.now(),
        )
        q = "Tom has 9 apples and buys 9 more. How many apples does he have?"
        self.apples = answer_task(
            self.version, 0, "gsm8k/0", question=q, label="17",
            source={"question": q, "answer": GSM8K_REASONING}, label_from="gsm8k ####",
        )  # fmt: skip
        self.sum = answer_task(
            self.version, 1, "gsm8k/1", question="What is 2 plus 3?", label="5",
            source={"question": "What is 2 plus 3?", "answer": "2 + 3 = 5\n#### 5"},
            label_from="gsm8k ####",
        )  # fmt: skip
        self.half = answer_task(
            self.version, 2, "gsm8k/2", question="What is half of one?", label="\\frac{",
            source={"question": "What is half of one?", "answer": "#### \\frac{"},
            label_from="gsm8k ####",
        )  # fmt: skip
        self.sign = answer_task(
            self.version, 3, "gsm8k/3", question="x squared is 16. What is x?", label="4",
            source={"question": "x squared is 16. What is x?", "answer": "#### 4"},
            label_from="gsm8k ####",
        )  # fmt: skip
        self.position = 0
        # apples: alpha and beta (strong) say 18, the weak gamma says 17 once and nothing once.
        for model, response, extracted in (
            ("alpha", "9 + 9 = 18.\n#### 18", "18"),
            ("alpha", "He has 18 apples.\n#### 18", "18"),
            ("alpha", LONG_RESPONSE, "18"),
            ("beta", "Nine and nine make eighteen.\n#### 18.0", "18.0"),
            ("beta", "#### 18", "18"),
            ("gamma", "#### 17", "17"),
            ("gamma", "I am not sure.", ""),
        ):
            self.sample_run(
                self.apples, model, response, extracted=extracted, canonical="18"
                if extracted.startswith("18") else extracted, label="17",
                passed=extracted == "17", status="ok" if extracted else "no_answer",
            )  # fmt: skip
        self.reference(self.apples, canonical="17")
        self.probe(self.apples, "several_boxed", extracted="18", rewarded=False)
        self.probe(self.apples, "empty_box", extracted="", rewarded=False, status="no_answer")
        for model in ("alpha", "beta"):
            self.sample_run(self.sum, model, "#### 5", extracted="5", canonical="5", label="5",
                            passed=True)  # fmt: skip
        self.reference(self.sum, canonical="5")
        self.probe(self.sum, "several_boxed", extracted="5", rewarded=True)
        self.reference(
            self.half, canonical="", passed=False, status="error",
            why="cannot parse '\\frac{': unbalanced braces",
        )  # fmt: skip
        for model, x in (("alpha", "4"), ("alpha", "-4"), ("beta", "4"), ("beta", "-4")):
            self.sample_run(self.sign, model, f"#### {x}", extracted=x, canonical=x, label="4",
                            passed=x == "4")  # fmt: skip
        self.reference(self.sign, canonical="4")
        apple_runs = list(Run.objects.filter(task=self.apples, kind=Run.SAMPLE).values_list("pk", flat=True))  # fmt: skip
        # The evidence as inspector/detect/answers.py writes it.
        self.flag(
            self.apples, "mislabeled", 80, 0.97,
            "the samples agree on 18 instead of the label 17",
            evidence={
                "label": "17", "label_canonical": "17", "label_posterior": 0.02,
                "label_prior": 0.93, "coincidence": 0.05, "samples": 6,
                "distribution": [
                    {"answer": "18", "count": 5, "share": 0.8333, "models": {"alpha": 3, "beta": 2},
                     "is_label": False, "weighted_share": None},
                    {"answer": "17", "count": 1, "share": 0.1667, "models": {"gamma": 1},
                     "is_label": True, "weighted_share": None},
                ],
                "models": {
                    "alpha": {"reliability": 0.97, "weight": 3.47, "answers": {"18": 1.0}},
                    "beta": {"reliability": 0.95, "weight": 2.94, "answers": {"18": 1.0}},
                    "gamma": {"reliability": 0.41, "weight": 0.12, "answers": {"17": 0.5}},
                },
                "consensus": "18", "posterior": 0.97, "supporting_models": 2,
            },
            runs=apple_runs,
        )  # fmt: skip
        hack = Run.objects.get(task=self.sum, kind=Run.PROBE, probe="several_boxed")
        self.flag(
            self.sum, "reward_hackable", 70, 1.0,
            "the verifier rewards responses that do not commit to the answer",
            evidence={"probes": {"several_boxed": "5"}},
            runs=[hack.pk],
        )  # fmt: skip
        self.flag(
            self.half, "unverifiable_label", 90, 1.0, "the verifier cannot read the label",
            evidence={"label": "\\frac{", "label_status": "error"},
        )  # fmt: skip
        self.flag(
            self.sign, "ambiguous", 75, 0.8, "the answers split between 4 and -4",
            evidence={
                "split": ["4", "-4"], "weighted_shares": [0.5, 0.5], "label_posterior": 0.5,
                "distribution": [{"answer": "4", "count": 2, "share": 0.5, "is_label": True},
                                 {"answer": "-4", "count": 2, "share": 0.5}],
            },
        )  # fmt: skip
        for task in (self.apples, self.sum, self.half, self.sign):
            task.last_inspection = self.inspection
            task.reference_pass_rate = 0.0 if task is self.half else 1.0
            task.refresh_open_flags()
            task.save(update_fields=("last_inspection", "reference_pass_rate"))
            task.refresh_from_db()

    def sample_run(self, task, model, response, *, extracted, canonical, label, passed,
                   status="ok"):  # fmt: skip
        self.position += 1
        sample = Sample.objects.create(
            task=task, sample_id=f"s{self.position}", position=self.position,
            completion=response, model=model,
        )  # fmt: skip
        return Run.objects.create(
            inspection=self.inspection, task=task, kind=Run.SAMPLE, sample=sample, repeat=1,
            status=Run.DONE, outcome="passed" if passed else "failed",
            detail=verdict(status, extracted, canonical, label),
        )  # fmt: skip

    def reference(self, task, *, canonical, passed=True, status="ok", why=""):
        Run.objects.create(
            inspection=self.inspection, task=task, kind=Run.REFERENCE, repeat=1, status=Run.DONE,
            outcome="passed" if passed else "failed",
            detail=verdict(status, task.label, canonical, task.label, why),
        )  # fmt: skip

    def probe(self, task, name, *, extracted, rewarded, status="ok"):
        Run.objects.create(
            inspection=self.inspection, task=task, kind=Run.PROBE, probe=name, repeat=1,
            status=Run.DONE, outcome="passed" if rewarded else "failed",
            detail=verdict(status, extracted, extracted, task.label),
        )  # fmt: skip

    def flag(self, task, code, severity, confidence, explanation, *, evidence, runs=()):
        Flag.objects.create(
            task=task, inspection=self.inspection, code=code, severity=severity,
            confidence=confidence, explanation=explanation, evidence=evidence,
            evidence_run_ids=list(runs),
        )  # fmt: skip


@pytest.fixture
def answers() -> AnswerSet:
    return AnswerSet()


def function_set() -> Task:
    """A HumanEval-style set of one task, inspected clean (built directly: these tests are
    about the answer doors, and the function doors' own tests import through the pipeline)."""
    taskset = TaskSet.objects.create(name="planted")
    version = TaskSetVersion.objects.create(taskset=taskset, number=1, task_count=1)
    inspection = Inspection.objects.create(
        version=version, status=Inspection.FINISHED, finished_at=timezone.now()
    )
    line = {
        "task_id": "planted/clean",
        "prompt": "def f(x):\n",
        "canonical_solution": "    return x + 1\n",
        "test": "def check(candidate):\n    assert candidate(1) == 2\n",
        "entry_point": "f",
    }
    return Task.objects.create(
        version=version, task_id="planted/clean", position=0, prompt=line["prompt"],
        canonical_solution=line["canonical_solution"], test=line["test"], entry_point="f",
        source=line, content_hash="hash-planted", last_inspection=inspection,
        reference_pass_rate=1.0,
    )  # fmt: skip


def page(client, task) -> str:
    response = client.get(task.get_absolute_url())
    assert response.status_code == 200
    return response.content.decode()


def manifest(name: str = "gsm8k") -> dict[str, dict]:
    return {line["task_id"]: line for line in selectors.manifest_lines(taskset_name=name)}


def bearer(key: str) -> dict[str, str]:
    return {"HTTP_AUTHORIZATION": f"Bearer {key}"}


def relabel_command(*args: str) -> str:
    out = io.StringIO()
    call_command("relabel_task", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def gsm8k_line_of(task_id: str) -> dict:
    """A manifest line with the GSM8K fields (the task id is the platform's, not GSM8K's)."""
    line = manifest()[task_id]
    return {"question": line["question"], "answer": line["answer"]}


# --- The task page -------------------------------------------------------------------------------


def test_the_page_shows_the_question_the_label_and_the_sets_answer_rule(reviewer_client, answers):
    html = page(reviewer_client, answers.apples)

    assert 'id="question">Tom has 9 apples and buys 9 more.' in html
    assert '<code id="label-in-force">17</code>' in html
    assert "taken from gsm8k ####" in html
    assert '<strong id="answer-rule">gsm8k</strong>' in html
    assert "The verifier reads the label</span> as <code>17</code>" in html


def test_the_distribution_counts_each_final_answer_per_model_and_marks_the_label(answers):
    d = selectors.answer_distribution(answers.apples, inspection_id=answers.inspection.pk)

    rows = {r["canonical"] or r["answer"]: r for r in d["rows"]}
    assert d["total"] == 7 and d["models"] == ["alpha", "beta", "gamma"]
    # "18" and "18.0" are one answer: the verifier's normal form groups them.
    assert rows["18"]["count"] == 5 and rows["18"]["per_model"] == {"alpha": 3, "beta": 2}
    assert rows["18"]["answer"] == "18" and not rows["18"]["is_label"]
    assert rows["18"]["verdict"] == "not rewarded"
    assert rows["17"]["is_label"] and rows["17"]["verdict"] == "rewarded"
    assert rows["17"]["per_model"] == {"gamma": 1}
    assert rows["(no answer)"]["count"] == 1
    assert [r["count"] for r in d["rows"]] == [5, 1, 1]
    assert abs(rows["18"]["share"] - 5 / 7) < 1e-9


def test_the_page_shows_the_distribution_table_with_per_model_counts(reviewer_client, answers):
    html = page(reviewer_client, answers.apples)

    table = html.split('<table id="answers">')[1].split("</table>")[0]
    assert [h for h in ("alpha", "beta", "gamma") if f'<th class="model">{h}</th>' in table] == [
        "alpha",
        "beta",
        "gamma",
    ]
    first = table.split('<tr class="answer-row')[1]
    assert "<code>18</code>" in first and '<td class="count">5</td>' in first
    assert first.count('<td class="per-model">3</td>') == 1
    assert first.count('<td class="per-model">2</td>') == 1
    assert "not rewarded" in first
    label_row = table.split('<tr class="answer-row is-label"')[1]
    assert "<code>17</code>" in label_row and "the label" in label_row


def test_the_distribution_is_drawn_by_the_local_plotly_with_the_labels_bar_marked(
    reviewer_client, answers
):
    html = page(reviewer_client, answers.apples)

    assert '<div id="chart-answers" class="chart"></div>' in html
    assert '<script src="/assets/plotly.min.js"></script>' in html
    assert "cdn" not in html.lower()
    figure = json.loads(
        html.split('id="answer-chart-data" type="application/json">')[1].split("</script>")[0]
    )
    assert [trace["name"] for trace in figure["data"]] == ["alpha", "beta", "gamma"]
    assert figure["layout"]["barmode"] == "stack"
    assert figure["data"][0]["x"][:2] == ["1. 18", "2. 17"]
    assert figure["data"][0]["y"][:2] == [3, 0]
    (mark,) = figure["layout"]["annotations"]
    assert (mark["x"], mark["text"]) == ("2. 17", "label")


def test_a_label_no_sample_reaches_gets_an_empty_bar_of_its_own(answers):
    from inspector import charts

    d = selectors.answer_distribution(answers.sign, inspection_id=answers.inspection.pk)
    d["rows"] = [r for r in d["rows"] if not r["is_label"]]

    figure = charts.answer_distribution(d, label="4")
    assert figure["data"][0]["x"] == ["1. -4", "2. 4"]
    assert figure["layout"]["annotations"][0]["text"] == "label (no sample)"


def test_each_answer_has_a_representative_response_with_its_run_sample_and_model(
    reviewer_client, answers
):
    d = selectors.answer_distribution(answers.apples, inspection_id=answers.inspection.pk)
    first = d["rows"][0]["representative"]
    assert first["model"] == "alpha" and first["full"] == "9 + 9 = 18.\n#### 18"
    assert not first["shortened"]

    html = page(reviewer_client, answers.apples)
    assert f"run #{first['run_id']} · sample {first['sample_id']} · alpha" in html
    assert '<pre class="response-short">9 + 9 = 18.\n#### 18</pre>' in html
    assert '<pre class="response-short">#### 17</pre>' in html
    assert '<pre class="response-short">I am not sure.</pre>' in html


def test_a_long_representative_is_shortened_on_the_page_and_whole_inside_its_details(
    reviewer_client, answers
):
    Sample.objects.filter(task=answers.apples, completion="9 + 9 = 18.\n#### 18").update(
        completion=LONG_RESPONSE
    )

    html = page(reviewer_client, answers.apples)

    assert '<pre class="response-short">Let us think' in html and "characters …]" in html
    assert f"the whole response ({len(LONG_RESPONSE)} characters)" in html
    full = html.split('<pre class="response-full">')[1].split("</pre>")[0]
    assert full == LONG_RESPONSE


def test_the_page_shows_the_verifiers_verdict_on_each_probe(reviewer_client, answers):
    apples = page(reviewer_client, answers.apples)
    probes = apples.split('<table id="answer-probes">')[1].split("</table>")[0]
    boxed = probes.split('data-probe="several_boxed"')[1].split("</tr>")[0]
    assert "<code>18</code>" in boxed and "not rewarded" in boxed
    empty = probes.split('data-probe="empty_box"')[1].split("</tr>")[0]
    assert "(nothing)" in empty and "no_answer" in empty and "not rewarded" in empty

    beaten = page(reviewer_client, answers.sum).split('<table id="answer-probes">')[1]
    boxed = beaten.split('data-probe="several_boxed"')[1].split("</tr>")[0]
    assert "<code>5</code>" in boxed and '<span class="failed">rewarded</span>' in boxed


def test_a_probe_that_beats_the_whole_set_says_so_on_the_task(reviewer_client, answers):
    answers.inspection.findings = [
        {"kind": "probe", "probe": "several_boxed", "explanation": "beats 97% of the tasks"}
    ]
    answers.inspection.save(update_fields=("findings",))

    html = page(reviewer_client, answers.sum)

    assert "a finding about the set's verifier" in html


def test_a_mislabeled_flag_shows_the_consensus_its_posterior_and_the_models_weights(
    reviewer_client, answers
):
    html = page(reviewer_client, answers.apples)

    card = html.split('id="flag-mislabeled"')[1].split('<div class="card flag-card"')[0]
    assert (
        'The samples agree on <code class="consensus">18</code>, posterior 0.97 against 0.02 for '
        "the label, 2 models behind it." in card
    )
    supporters = card.split('<table class="supporters">')[1].split("</table>")[0]
    assert supporters.index("alpha") < supporters.index("beta") < supporters.index("gamma")
    assert "<td>alpha</td><td>3.47</td><td>0.97</td><td><code>18</code> 1.00</td>" in supporters
    assert "<td>gamma</td><td>0.12</td><td>0.41</td><td><code>17</code> 0.50</td>" in supporters
    answers_table = card.split('<table class="competing">')[1].split("</table>")[0]
    assert '<code>17</code> <span class="passed">the label</span>' in answers_table
    # The analysis's own diagnostics are listed as they are, not lost.
    assert "<td>label_prior</td><td><code>0.93</code></td>" in card
    # Its evidence runs: each sample with its model, what was extracted and the verdict.
    runs = card.split('<table class="answer-evidence-runs">')[1].split("</table>")[0]
    assert "<code>18.0</code>" in runs and "beta" in runs and "not rewarded" in runs


def test_the_ambiguous_hackable_and_unverifiable_flags_show_their_evidence(
    reviewer_client, answers
):
    sign = page(reviewer_client, answers.sign)
    card = sign.split('id="flag-ambiguous"')[1]
    assert (
        "Competing answers: <code>4</code> (0.50 of the weighted vote) and <code>-4</code> (0.50 "
        "of the weighted vote)." in card
    )
    assert "The label's posterior: 0.50." in card

    sum_page = page(reviewer_client, answers.sum)
    hack = sum_page.split('id="flag-reward_hackable"')[1].split('<table class="hack-probes">')[1]
    assert "<td>several_boxed</td><td><code>5</code></td>" in hack

    half = page(reviewer_client, answers.half)
    card = half.split('id="flag-unverifiable_label"')[1]
    # The flag names the status; the reason is the verifier's, from the label's own run.
    assert "The verifier's reason (error):" in card
    assert "cannot parse &#x27;\\frac{&#x27;: unbalanced braces" in card
    assert "The verifier cannot read the label</span> (error)" in half


def test_the_unsolvable_no_signal_leak_and_duplicate_flags_show_their_evidence(
    reviewer_client, answers
):
    for code, evidence in (
        ("unsolvable", {"chance_one_would_be_right": 0.83, "label": "5"}),
        ("no_signal", {"samples": 2, "correct": 2, "distribution": [{"answer": "5", "count": 2}]}),
        ("answer_leak", {"phrase": "the answer is 5", "label": "5"}),
        ("duplicate", {"other": "gsm8k/3", "similarity": 0.93, "other_label": "4",
                       "same_label": False}),
    ):  # fmt: skip
        answers.flag(answers.sum, code, 20, 0.9, f"{code} here", evidence=evidence)

    html = page(reviewer_client, answers.sum)

    assert "at least one sample would have reached a right label: 0.83" in html
    assert "2 of 2 samples rewarded." in html
    assert 'The question states its answer: <code class="phrase">the answer is 5</code>' in html
    duplicate = html.split('id="flag-duplicate"')[1]
    assert 'class="duplicate-of"><strong>gsm8k/3</strong></a>' in duplicate
    assert "The other task's label: <code>4</code>" in duplicate and "a different one" in duplicate


def test_evidence_in_a_shape_the_page_does_not_know_is_still_listed(reviewer_client, answers):
    flag = Flag.objects.get(task=answers.sign, code="ambiguous")
    flag.evidence = {**flag.evidence, "entropy": 1.0}  # a key the page does not know
    flag.save(update_fields=("evidence",))

    html = page(reviewer_client, answers.sign)

    assert "<tr><td>entropy</td><td><code>1.0</code></td></tr>" in html


def test_the_code_tests_and_mutant_sections_are_not_on_an_answer_tasks_page(
    reviewer_client, answers
):
    html = page(reviewer_client, answers.apples)

    assert 'id="tests"' not in html and "Reference solution" not in html
    assert "entry point" not in html and 'id="lint"' not in html
    assert "Sampled responses" in html and "Sampled solutions" not in html


def test_an_answer_task_without_samples_or_inspection_renders_cleanly(reviewer_client):
    taskset = TaskSet.objects.create(name="math")
    version = TaskSetVersion.objects.create(taskset=taskset, number=1, task_count=1)
    task = answer_task(
        version, 0, "math/0", question="What is $1+1$?", label="2",
        source={"problem": "What is $1+1$?", "solution": "It is $\\boxed{2}$."},
        label_from="boxed in solution",
    )  # fmt: skip

    html = page(reviewer_client, task)

    assert "No sampled responses" in html and "Not inspected yet." in html
    assert 'id="chart-answers"' not in html and "plotly.min.js" not in html
    assert 'id="relabel-form"' in html

    Sample.objects.create(task=task, sample_id="a", position=0, completion="\\boxed{2}")
    assert "1 sampled response, not verified yet" in page(reviewer_client, task)


def test_the_relabel_form_is_prefilled_with_the_samples_consensus(reviewer_client, answers):
    html = page(reviewer_client, answers.apples)

    form = html.split('id="relabel-form"')[1].split("</form>")[0]
    assert 'name="label" value="18"' in form
    assert "prefilled with the samples' consensus" in form
    assert (
        'name="label" value'
        not in page(reviewer_client, answers.sum).split('id="relabel-form"')[1].split("</form>")[0]
    )


# --- Relabel, through every door -----------------------------------------------------------------


def test_relabeling_on_the_page_puts_the_new_value_after_gsm8ks_marks_and_keeps_the_reasoning(
    reviewer_client, reviewer, answers
):
    assert "gsm8k/0" not in manifest()  # the mislabeled flag keeps it out

    response = reviewer_client.post(
        f"/tasks/{answers.apples.pk}/relabel",
        {"label": "18", "reason": "9 + 9 is 18; the reasoning's sum is wrong"},
        follow=True,
    )

    html = response.content.decode()
    assert "gsm8k/0 relabeled &#x27;17&#x27; -&gt; &#x27;18&#x27;" in html
    assert '<code id="label-in-force">18</code>' in html
    assert "corrected by <strong>reviewer</strong>" in html
    assert '<span id="relabel-reason">9 + 9 is 18; the reasoning&#x27;s sum is wrong</span>' in html
    assert "the flag no longer keeps the task out of the manifest" in html
    assert "inspect again to verify the samples against" in html
    line = manifest()["gsm8k/0"]
    assert line["answer"] == GSM8K_REASONING.replace("#### 17", "#### 18")
    assert line["answer"].startswith("Tom has 9 apples and buys 9 more.\nSo he has 9 + 9")
    assert line["quality"]["relabeled"] == {
        "from": "17",
        "to": "18",
        "by": "reviewer",
        "reason": "9 + 9 is 18; the reasoning's sum is wrong",
    }
    event = selectors.task_trail(answers.apples).get(action=ReviewEvent.RELABEL)
    assert (event.actor, event.note) == (
        reviewer,
        "'17' -> '18': 9 + 9 is 18; the reasoning's sum is wrong",
    )


def test_relabeling_through_the_api_changes_the_manifest_and_writes_the_trail(reviewer, answers):
    key = ApiToken.issue(user=reviewer, name="triage bot")[1]
    api = Client()

    response = api.post(
        f"/api/v1/tasks/{answers.apples.pk}/relabel",
        json.dumps({"label": "18", "reason": "every strong model says 18"}),
        content_type="application/json",
        **bearer(key),
    )

    assert response.status_code == 200
    body = response.json()
    assert (body["label"], body["uploaded_label"], body["relabeled"]) == ("18", "17", True)
    assert manifest()["gsm8k/0"]["answer"].endswith("#### 18")
    assert manifest()["gsm8k/0"]["quality"]["relabeled"]["reason"] == "every strong model says 18"
    event = ReviewEvent.objects.get(task=answers.apples, action=ReviewEvent.RELABEL)
    assert (event.actor, event.note) == (reviewer, "'17' -> '18': every strong model says 18")
    task = api.get(f"/api/v1/tasks/{answers.apples.pk}", **bearer(key)).json()
    assert (task["label"], task["relabeled"]) == ("18", True)


def test_relabeling_with_the_command_changes_the_manifest_and_writes_the_trail(reviewer, answers):
    out = relabel_command(
        "gsm8k", "gsm8k/0", "--label", "18", "--reason", "hand check: 9 + 9 = 18",
        "--by", "reviewer",
    )  # fmt: skip

    assert "gsm8k/0 of gsm8k v1: label '17' -> '18'" in out
    assert gsm8k_line_of("gsm8k/0") == {
        "question": "Tom has 9 apples and buys 9 more. How many apples does he have?",
        "answer": "Tom has 9 apples and buys 9 more.\nSo he has 9 + 9 = <<9+9=17>>17 apples.\n"
        "#### 18",
    }
    event = ReviewEvent.objects.get(task=answers.apples, action=ReviewEvent.RELABEL)
    assert (event.actor, event.note) == (reviewer, "'17' -> '18': hand check: 9 + 9 = 18")


def test_a_relabel_without_a_reason_is_refused_at_every_door(reviewer_client, reviewer, answers):
    response = reviewer_client.post(f"/tasks/{answers.apples.pk}/relabel", {"label": "18"})
    assert response.status_code == 400
    form = response.content.decode().split('id="relabel-form"')[1].split("</form>")[0]
    assert "A reason is required to relabel a task." in form
    assert 'name="label" value="18"' in form  # what the reviewer typed is kept

    key = ApiToken.issue(user=reviewer, name="bot")[1]
    api = Client().post(
        f"/api/v1/tasks/{answers.apples.pk}/relabel",
        json.dumps({"label": "18", "reason": "  "}),
        content_type="application/json",
        **bearer(key),
    )
    assert api.status_code == 400
    assert api.json()["error"] == "a reason is required to relabel a task"

    with pytest.raises(CommandError, match="A reason is required to relabel a task"):
        relabel_command("gsm8k", "gsm8k/0", "--label", "18", "--reason", " ", "--by", "reviewer")

    answers.apples.refresh_from_db()
    assert answers.apples.label == "17"
    assert not ReviewEvent.objects.filter(action=ReviewEvent.RELABEL).exists()


def test_a_function_task_cannot_be_relabeled_through_any_door(reviewer_client, reviewer):
    task = function_set()

    response = reviewer_client.post(
        f"/tasks/{task.pk}/relabel", {"label": "x", "reason": "r"}, follow=True
    )
    assert '<li class="error">Only answer-graded tasks have a label to correct.</li>' in (
        response.content.decode()
    )

    key = ApiToken.issue(user=reviewer, name="bot")[1]
    api = Client().post(
        f"/api/v1/tasks/{task.pk}/relabel",
        json.dumps({"label": "x", "reason": "r"}),
        content_type="application/json",
        **bearer(key),
    )
    assert api.status_code == 409 and "only answer-graded tasks have a label" in api.json()["error"]

    with pytest.raises(CommandError, match="Only answer-graded tasks have a label to correct"):
        relabel_command(
            "planted", "planted/clean", "--label", "x", "--reason", "r", "--by", "reviewer"
        )


def test_a_relabel_is_refused_while_another_reviewer_holds_the_task(
    reviewer_client, reviewer, lead, answers
):
    answers.apples.claim(by=lead)

    response = reviewer_client.post(
        f"/tasks/{answers.apples.pk}/relabel", {"label": "18", "reason": "r"}, follow=True
    )
    assert "lead is reviewing gsm8k/0" in response.content.decode()

    key = ApiToken.issue(user=reviewer, name="bot")[1]
    api = Client().post(
        f"/api/v1/tasks/{answers.apples.pk}/relabel",
        json.dumps({"label": "18", "reason": "r"}),
        content_type="application/json",
        **bearer(key),
    )
    assert api.status_code == 409 and "lead is reviewing" in api.json()["error"]

    with pytest.raises(CommandError, match="lead is reviewing"):
        relabel_command("gsm8k", "gsm8k/0", "--label", "18", "--reason", "r", "--by", "reviewer")
    answers.apples.refresh_from_db()
    assert answers.apples.label == "17"


def test_the_command_names_who_relabels_and_refuses_a_user_without_the_role(
    answers, reviewer, django_user_model
):
    django_user_model.objects.create_user(username="visitor")

    with pytest.raises(CommandError, match="'visitor' is not a reviewer"):
        relabel_command("gsm8k", "gsm8k/0", "--label", "18", "--reason", "r", "--by", "visitor")
    with pytest.raises(CommandError, match="gsm8k v1 has no task 'gsm8k/99'"):
        relabel_command("gsm8k", "gsm8k/99", "--label", "1", "--reason", "r", "--by", "reviewer")


def test_relabeling_to_the_uploaded_label_undoes_the_correction(reviewer, answers):
    answers.apples.relabel(by=reviewer, label="18", reason="models")
    answers.apples.relabel(by=reviewer, label="17", reason="the question says 8 more, I misread")

    answers.apples.refresh_from_db()
    assert answers.apples.corrected_label == ""
    # Undone, the correction no longer answers the mislabeled flag: out of the manifest again.
    assert "gsm8k/0" not in manifest()
    Flag.objects.filter(task=answers.apples).update(status=Flag.DISMISSED)
    line = manifest()["gsm8k/0"]
    assert line["answer"] == GSM8K_REASONING and "relabeled" not in line["quality"]


def test_a_correction_of_an_unreadable_label_lets_the_task_into_the_manifest(reviewer, answers):
    answers.half.relabel(by=reviewer, label="\\frac{1}{2}", reason="the braces were cut")

    line = manifest()["gsm8k/2"]

    assert line["answer"] == "#### \\frac{1}{2}"
    assert line["quality"]["relabeled"]["from"] == "\\frac{"


# --- The manifest of other line shapes -----------------------------------------------------------


def finished_answer_set(name: str, sources: list[tuple[str, dict, str, str]]) -> TaskSetVersion:
    """A set whose tasks are inspected clean: (task id, source line, label, label_from)."""
    taskset = TaskSet.objects.create(name=name)
    version = TaskSetVersion.objects.create(taskset=taskset, number=1, task_count=len(sources))
    inspection = Inspection.objects.create(
        version=version, status=Inspection.FINISHED, finished_at=timezone.now()
    )
    for i, (task_id, source, label, label_from) in enumerate(sources):
        answer_task(
            version, i, task_id, question=source.get("question") or source.get("problem"),
            label=label, source=source, label_from=label_from, last_inspection=inspection,
            reference_pass_rate=1.0,
        )  # fmt: skip
    return version


def test_a_math_line_labelled_by_its_box_keeps_its_solution_and_gains_an_answer(reviewer):
    version = finished_answer_set(
        "math",
        [
            (
                "math/0",
                {"problem": "1+1?", "solution": "So $\\boxed{3}$."},
                "3",
                "boxed in solution",
            ),
            (
                "math/1",
                {"problem": "2+2?", "solution": "$\\boxed{4}$", "answer": "5"},
                "5",
                "answer",
            ),
            ("own/0", {"task_id": "own/0", "question": "3+3?", "answer": 7}, "7", "answer"),
        ],
    )
    for task_id, label in (("math/0", "2"), ("math/1", "4"), ("own/0", "6")):
        version.tasks.get(task_id=task_id).relabel(by=reviewer, label=label, reason="arithmetic")

    lines = manifest("math")

    assert lines["math/0"]["solution"] == "So $\\boxed{3}$." and lines["math/0"]["answer"] == "2"
    assert lines["math/1"]["answer"] == "4" and lines["math/1"]["solution"] == "$\\boxed{4}$"
    assert lines["own/0"]["answer"] == 6  # a number where the upload had a number
    assert {line["quality"]["relabeled"]["to"] for line in lines.values()} == {"2", "4", "6"}


def test_an_imported_gsm8k_line_comes_back_whole_with_its_generated_id_and_the_new_value(
    reviewer,
):
    from inspector import services

    line = {"question": "Tom has 9 apples and buys 9 more. How many?", "answer": GSM8K_REASONING}
    version = services.taskset_import(
        name="gsm8k-test",
        tasks_file=io.BytesIO((json.dumps(line) + "\n").encode()),
        tasks_name="gsm8k_test.jsonl",
    )
    inspection = Inspection.objects.create(
        version=version, status=Inspection.FINISHED, finished_at=timezone.now()
    )
    version.tasks.update(last_inspection=inspection, reference_pass_rate=1.0)
    task = version.tasks.get()
    assert (task.label, task.metadata["label_from"]) == ("17", "gsm8k ####")

    task.relabel(by=reviewer, label="18", reason="9 + 9 is 18")

    (written,) = selectors.manifest_lines(taskset_name="gsm8k-test")
    assert written["task_id"] == task.task_id
    assert written["question"] == line["question"]
    assert written["answer"] == GSM8K_REASONING[: -len("17")] + "18"
    assert written["quality"]["relabeled"]["from"] == "17"


def test_the_report_lines_and_tables_carry_the_label_in_force_and_whether_it_was_corrected(
    lead_client, reviewer, answers
):
    answers.apples.relabel(by=reviewer, label="18", reason="models")

    report = {line["task_id"]: line for line in selectors.report_lines(taskset_name="gsm8k")}
    assert (report["gsm8k/0"]["label"], report["gsm8k/0"]["relabeled"]) == ("18", True)
    assert report["gsm8k/0"]["uploaded_label"] == "17"
    assert (report["gsm8k/1"]["label"], report["gsm8k/1"]["relabeled"]) == ("5", False)

    response = lead_client.get("/tasksets/gsm8k/report.csv")
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert rows[0]["task_id"] == "gsm8k/0"
    assert (rows[0]["label"], rows[0]["relabeled"]) == ("18", "True")
    assert (rows[1]["label"], rows[1]["relabeled"]) == ("5", "False")

    import pandas as pd

    parquet = lead_client.get("/tasksets/gsm8k/report.parquet")
    frame = pd.read_parquet(io.BytesIO(parquet.content))
    assert list(frame.columns[-2:]) == ["label", "relabeled"]
    assert frame.set_index("task_id").loc["gsm8k/0", "label"] == "18"


def test_a_report_table_without_answer_tasks_keeps_its_columns(lead_client, answers):
    function_set()

    response = lead_client.get("/tasksets/planted/report.csv")

    header = b"".join(response.streaming_content).decode().splitlines()[0]
    assert header.split(",") == list(selectors.REPORT_COLUMNS)
    queue = lead_client.get("/queue/export.csv?all=1")
    mixed = list(csv.DictReader(io.StringIO(b"".join(queue.streaming_content).decode())))
    function_row = next(r for r in mixed if r["task_id"] == "planted/clean")
    assert function_row["label"] == "" and function_row["relabeled"] == ""


# --- The queue -----------------------------------------------------------------------------------


def test_the_queue_titles_an_answer_task_by_its_question_and_filters_unverifiable_labels(
    reviewer_client, answers
):
    html = reviewer_client.get("/queue/").content.decode()
    assert "Tom has 9 apples and buys 9 more." in html
    assert 'title="gsm8k/0"' in html

    filtered = reviewer_client.get("/queue/?flag=unverifiable_label").content.decode()
    rows = [r.split('"')[0] for r in filtered.split('data-task-id="')[1:]]
    assert rows == ["gsm8k/2"]
    assert '<option value="unverifiable_label" selected>' in filtered
