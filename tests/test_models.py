"""Model-level helpers the services write through."""

from __future__ import annotations

import pytest

from inspector.models import Task, rows_update

pytestmark = pytest.mark.django_db


def test_rows_update_writes_each_rows_own_values_and_leaves_other_fields_alone(import_taskset):
    version = import_taskset()
    tasks = list(version.tasks.order_by("pk"))
    untouched = {t.pk: (t.prompt, t.status) for t in tasks}
    for n, task in enumerate(tasks):
        task.severity = 10 + n
        task.open_flags = f"flag{n}" if n % 2 else ""
        task.sample_pass_rate = None if n == 0 else n / 10
        task.behaviour_inputs = [[n, "x", {"k": None}]]
        task.prompt = "not written"  # not among the fields: stays as stored

    written = rows_update(
        tasks, ("severity", "open_flags", "sample_pass_rate", "behaviour_inputs"), batch_size=2
    )

    assert written == len(tasks) > 2  # across several batches
    for n, task in enumerate(Task.objects.filter(version=version).order_by("pk")):
        assert task.severity == 10 + n
        assert task.open_flags == (f"flag{n}" if n % 2 else "")
        assert task.sample_pass_rate == (None if n == 0 else pytest.approx(n / 10))
        assert task.behaviour_inputs == [[n, "x", {"k": None}]]
        assert (task.prompt, task.status) == untouched[task.pk]


def test_rows_update_of_nothing_writes_nothing():
    assert rows_update([], ("severity",)) == 0
