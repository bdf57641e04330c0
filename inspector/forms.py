"""Forms for the browser doors: upload, review actions, queue filters."""

from __future__ import annotations

from django import forms

from inspector.detect.codes import FlagCode
from inspector.models import Task, TaskSet


class UploadForm(forms.Form):
    name = forms.CharField(
        max_length=200,
        label="Task-set name",
        help_text="Uploading under an existing name adds a new version; the old one is kept.",
    )
    tasks_file = forms.FileField(
        label="Tasks",
        help_text=(
            "HumanEval-style JSONL (plain or .gz); answer-graded questions as JSONL (task_id, "
            "question, answer; GSM8K's and MATH's own lines too); Harbor / Terminal-Bench "
            "task folders as a .zip or .tar.gz (one folder per task); or SWE-bench instances "
            "as JSONL (instance_id, repo, base_commit, patch, test_patch, ...)."
        ),
    )
    environments_file = forms.FileField(
        label="Environments (SWE-bench instances)",
        help_text=(
            "A .tar.gz or .zip with a folder per instance (or per the line's `environment`): "
            "the repository at base_commit, its .git included, and a Dockerfile beside it. "
            "Not needed for instances that name an `image` you already have."
        ),
        required=False,
    )
    samples_file = forms.FileField(
        label="Sampled solutions (optional)",
        help_text=(
            "JSONL: task_id and completion (functions), script (terminal tasks), response "
            "and/or answer, with model (answer-graded questions; every model's in one file), or "
            "SWE-bench predictions (instance_id, model_patch, model_name_or_path)."
        ),
        required=False,
    )
    terminal_mode = forms.ChoiceField(
        label="Terminal tasks run",
        choices=TaskSet.MODE_CHOICES,
        initial=TaskSet.FAITHFUL,
        required=False,
        help_text=(
            "faithful: agent and check share one container, as Harbor runs them. isolated: the "
            "check runs in a fresh container that gets only the agent's work folder."
        ),
    )
    answer_rule = forms.ChoiceField(
        label="Answers are read",
        choices=[
            ("auto", "auto: \\boxed{}, then '#### ', then 'the answer is', then the last number"),
            ("boxed", "boxed: the \\boxed{} answer only"),
            ("gsm8k", "gsm8k: after the last '#### '"),
            ("answer_is", "answer_is: after 'the answer is' / 'final answer:'"),
            ("last_number", "last_number: the last number in the response"),
            ("lenient", "lenient: math-verify's own defaults (any match counts)"),
            (
                "contains",
                "contains: the label anywhere among the answers (loose; to see the probes)",
            ),
            ("given", "given: each sample's own answer field where it has one, else auto"),
        ],
        initial="auto",
        required=False,
        help_text="Answer-graded questions: where the final answer is taken from, as your RL "
        "reward takes it.",
    )


class QuarantineForm(forms.Form):
    reason = forms.CharField(
        max_length=2000, widget=forms.TextInput(attrs={"placeholder": "reason (required)"})
    )


class RelabelForm(forms.Form):
    """An answer-graded task's new label and why (Task.relabel checks the rest: the task's
    kind, the label's length, another reviewer's claim)."""

    label = forms.CharField(
        max_length=10_000,
        strip=True,
        error_messages={"required": "A new label is required."},
        widget=forms.TextInput(attrs={"placeholder": "new label", "size": 24}),
    )
    reason = forms.CharField(
        max_length=2000,
        strip=True,
        error_messages={"required": "A reason is required to relabel a task."},
        widget=forms.TextInput(attrs={"placeholder": "why (required)", "size": 40}),
    )


class DismissForm(forms.Form):
    note = forms.CharField(
        max_length=2000,
        widget=forms.TextInput(
            attrs={"placeholder": "why it is not a defect (required)", "size": 36}
        ),
    )


class QueueFilterForm(forms.Form):
    """The queue's filter, as the URL carries it (selectors.queue.QueueFilter)."""

    q = forms.CharField(
        required=False,
        max_length=200,
        widget=forms.TextInput(attrs={"placeholder": "search task id or prompt", "size": 22}),
    )
    flag = forms.ChoiceField(
        required=False, choices=[("", "any flag")] + [(c.value, c.value) for c in FlagCode]
    )
    severity = forms.ChoiceField(
        required=False,
        choices=[("", "any severity"), ("80", "severity ≥ 80"), ("60", "≥ 60"), ("30", "≥ 30")],
    )
    domain = forms.CharField(
        required=False,
        max_length=200,
        widget=forms.TextInput(attrs={"placeholder": "domain", "size": 10}),
    )
    taskset = forms.ChoiceField(required=False, choices=())
    version = forms.CharField(
        required=False,
        max_length=10,
        widget=forms.TextInput(attrs={"placeholder": "version", "size": 5}),
    )
    status = forms.ChoiceField(required=False, choices=[("", "any status")] + Task.STATUS_CHOICES)
    review = forms.ChoiceField(
        required=False,
        choices=[
            ("", "any review state"),
            ("pending", "awaiting review"),
            ("reviewed", "reviewed"),
            ("unflagged", "no flag"),
        ],
    )
    assignee = forms.CharField(
        required=False,
        max_length=150,
        widget=forms.TextInput(attrs={"placeholder": "assignee, me, none", "size": 12}),
    )
    sort = forms.ChoiceField(
        required=False,
        choices=[
            ("severity", "most severe first"),
            ("-severity", "least severe first"),
            ("task", "task id"),
            ("-task", "task id, descending"),
            ("samples", "sample pass rate, low first"),
            ("-samples", "sample pass rate, high first"),
            ("reference", "reference pass rate, low first"),
        ],
    )

    # "1": unflagged tasks too (exports and links; the page's form does not show it).
    all = forms.ChoiceField(required=False, choices=[("", "flagged"), ("1", "all")])

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["taskset"].choices = [("", "every task set")] + [
            (n, n) for n in TaskSet.objects.order_by("name").values_list("name", flat=True)
        ]


class BulkForm(forms.Form):
    """A bulk action: on the selected task ids, or on everything the filter matches."""

    action = forms.ChoiceField(
        choices=[
            ("quarantine", "quarantine"),
            ("release", "release"),
            ("dismiss", "dismiss open flags"),
            ("assign", "assign to"),
        ]
    )
    scope = forms.ChoiceField(choices=[("selected", "selected"), ("filter", "all matching")])
    task = forms.TypedMultipleChoiceField(required=False, coerce=int, choices=())
    reason = forms.CharField(required=False, max_length=2000)
    assignee = forms.CharField(required=False, max_length=150)
    expected = forms.IntegerField(required=False, min_value=0)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # Any id is acceptable here; the service narrows them to the filter's tasks.
        self.fields["task"].valid_value = lambda value: (
            str(value).isascii() and str(value).isdigit()
        )
