"""Task sets as the pages and the API list them: the sets with their latest versions, a set's
latest version by name, and the figures of a version's overview page."""

from __future__ import annotations

from django.db.models import Count

from inspector.models import Flag, Inspection, Task, TaskSet, TaskSetVersion
from inspector.services.errors import NotFound


def taskset_rows() -> list[tuple[TaskSet, TaskSetVersion | None]]:
    """Every task set by name, with its number of versions (`version_count`) and latest version."""
    tasksets = TaskSet.objects.annotate(version_count=Count("versions")).order_by("name")
    return [(taskset, taskset.latest_version()) for taskset in tasksets]


def taskset_exists(*, name: str) -> bool:
    return TaskSet.objects.filter(name=name).exists()


def taskset_latest_version(*, name: str) -> TaskSetVersion:
    version = (
        TaskSetVersion.objects.filter(taskset__name=name)
        .select_related("taskset")
        .order_by("-number")
    ).first()
    if version is None:
        known = ", ".join(TaskSet.objects.values_list("name", flat=True)[:20]) or "none yet"
        raise NotFound(f"No task set named {name!r} (task sets: {known}).")
    return version


def flagged_task_count() -> int:
    """Tasks of any set whose latest inspection left a flag on them."""
    return Task.objects.filter(severity__gt=0).count()


def version_last_finished(version: TaskSetVersion) -> Inspection | None:
    return version.inspections.filter(status=Inspection.FINISHED).order_by("-id").first()


def version_overview(version: TaskSetVersion) -> dict:
    """What a version's page shows beside its charts: flag counts of its last finished
    inspection, how many tasks are quarantined and clean, whether it holds terminal tasks, the
    spread of its sample pass rates, and the harness's own findings."""
    from inspector.detect.signals.learning_signal import learnability_distribution
    from inspector.selectors.exports import clean_tasks

    tasks = version.tasks.all()
    finished = version_last_finished(version)
    rates = tasks.filter(last_inspection__isnull=False).values_list("sample_pass_rate", flat=True)
    return {
        "finished_id": finished.pk if finished else None,
        "flag_counts": (
            Flag.objects.filter(task__version=version, inspection=finished)
            .values("code")
            .annotate(n=Count("id"))
            .order_by("-n")
        ),
        "quarantined": tasks.filter(status=Task.QUARANTINED).count(),
        "clean": clean_tasks(version=version).count(),
        "terminal": tasks.filter(kind=Task.TERMINAL).exists(),
        "learnability": learnability_distribution(rates),
        "harness_findings": finished.findings if finished else [],
    }
