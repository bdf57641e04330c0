"""Task sets as the pages and the API list them: the sets with their latest versions, a set's
latest version by name, and the figures of a version's overview page."""

from __future__ import annotations

from django.conf import settings
from django.db.models import Count, F, OuterRef, Subquery

from inspector.models import Flag, Inspection, Task, TaskSet, TaskSetVersion
from inspector.services.errors import NotFound


def taskset_rows() -> list[tuple[TaskSet, TaskSetVersion | None]]:
    """Every task set by name, with its number of versions (`version_count`) and latest version;
    two queries however many sets there are."""
    latest = TaskSetVersion.objects.filter(taskset=OuterRef("pk")).order_by("-number")
    tasksets = list(
        TaskSet.objects.annotate(
            version_count=Count("versions"), latest_id=Subquery(latest.values("pk")[:1])
        ).order_by("name")
    )
    versions = TaskSetVersion.objects.in_bulk([t.latest_id for t in tasksets if t.latest_id])
    return [(taskset, versions.get(taskset.latest_id)) for taskset in tasksets]


def taskset_list() -> list[dict]:
    """The rows of the task-set list: each set by name with its latest version, whether an
    inspection of that version has finished, and its open flags (`open_flags`, see
    taskset_open_flags; None where there is none); four queries however many sets there are."""
    rows = taskset_rows()
    flags = taskset_open_flags()
    inspected = set(
        Inspection.objects.filter(
            version_id__in=[latest.pk for _, latest in rows if latest],
            status=Inspection.FINISHED,
        ).values_list("version_id", flat=True)
    )
    return [
        {
            "taskset": taskset,
            "latest": latest,
            "inspected": latest is not None and latest.pk in inspected,
            "open_flags": flags.get(taskset.pk),
        }
        for taskset, latest in rows
    ]


def taskset_open_flags() -> dict[int, dict]:
    """The flags awaiting a reviewer on the tasks of each set's latest version (those of each
    task's latest inspection), counted in one query: {taskset id: {"blocking": n,
    "advisory": n, "codes": [{"code", "n", "advisory"}, ...] most frequent first}}. Advisory
    codes that ADVISORY_FLAGS_THAT_BLOCK names count as blocking, as in the manifest."""
    from inspector.detect.codes import ADVISORY

    advisory = ADVISORY - set(settings.ADVISORY_FLAGS_THAT_BLOCK)
    rows = (
        Flag.objects.filter(
            status=Flag.OPEN,
            task__in_latest_version=True,
            inspection_id=F("task__last_inspection_id"),
        )
        .values_list("task__version__taskset_id", "code")
        .annotate(n=Count("id"))
        .order_by()  # no Meta ordering in the GROUP BY
    )
    counts: dict[int, dict] = {}
    for taskset_id, code, n in rows:
        entry = counts.setdefault(taskset_id, {"blocking": 0, "advisory": 0, "codes": []})
        entry["advisory" if code in advisory else "blocking"] += n
        entry["codes"].append({"code": code, "n": n, "advisory": code in advisory})
    for entry in counts.values():
        entry["codes"].sort(key=lambda c: (c["advisory"], -c["n"], c["code"]))
    return counts


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
        "answer": tasks.filter(kind=Task.ANSWER).exists(),
        "learnability": learnability_distribution(rates),
        "harness_findings": finished.findings if finished else [],
    }
