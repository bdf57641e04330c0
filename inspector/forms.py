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
            "HumanEval-style JSONL (plain or .gz), or Harbor / Terminal-Bench task folders "
            "as a .zip or .tar.gz (one folder per task)."
        ),
    )
    samples_file = forms.FileField(
        label="Sampled solutions (optional)",
        help_text="JSONL: task_id and completion (functions) or script (terminal tasks).",
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


class QuarantineForm(forms.Form):
    reason = forms.CharField(
        max_length=2000, widget=forms.TextInput(attrs={"placeholder": "reason (required)"})
    )


class DismissForm(forms.Form):
    note = forms.CharField(
        max_length=2000,
        widget=forms.TextInput(
            attrs={"placeholder": "why it is not a defect (required)", "size": 36}
        ),
    )


class QueueFilterForm(forms.Form):
    flag = forms.ChoiceField(
        required=False, choices=[("", "any flag")] + [(c.value, c.value) for c in FlagCode]
    )
    status = forms.ChoiceField(required=False, choices=[("", "any status")] + Task.STATUS_CHOICES)
    taskset = forms.ChoiceField(required=False, choices=())

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["taskset"].choices = [("", "every task set")] + [
            (n, n) for n in TaskSet.objects.order_by("name").values_list("name", flat=True)
        ]
