"""What leaves the platform: the clean tasks of a version, the training manifest and the per-task
report."""

from __future__ import annotations

import logging
from collections.abc import Iterator

from django.conf import settings
from django.db.models import Exists, F, OuterRef

from inspector.models import (
    Flag,
    Inspection,
    Run,
    Task,
    TaskSetVersion,
)
from inspector.services.tasksets import taskset_latest_version

logger = logging.getLogger(__name__)


def clean_tasks(*, version: TaskSetVersion):
    """Active, inspected (its reference really ran), and with no flag still blocking it."""
    from inspector.detect.codes import ADVISORY

    advisory = ADVISORY - set(settings.ADVISORY_FLAGS_THAT_BLOCK)
    blocking = Flag.objects.filter(
        task=OuterRef("pk"), inspection=OuterRef("last_inspection"), status__in=Flag.BLOCKING
    ).exclude(code__in=advisory)
    return (
        version.tasks.filter(
            status=Task.ACTIVE,
            last_inspection__status=Inspection.FINISHED,
            reference_pass_rate__isnull=False,
        )
        .exclude(Exists(blocking))
        .order_by("position")
    )


def manifest_lines(*, taskset_name: str) -> Iterator[dict]:
    """The clean tasks of the latest version, each line the task's own fields plus `quality`."""
    version = taskset_latest_version(name=taskset_name)
    for task in clean_tasks(version=version).iterator(chunk_size=1000):
        if task.kind == Task.TERMINAL:
            # A task folder is named, not inlined: the trainer holds the folders already, and
            # the content hash says the folder is the one that was inspected.
            line = {
                "task_id": task.task_id,
                "kind": Task.TERMINAL,
                "format": task.source.get("format"),
                "folder": task.task_id,
                "content_hash": task.content_hash,
            }
        else:
            line = dict(task.source)
        line["quality"] = {
            "content_hash": task.content_hash,
            "taskset": version.taskset.name,
            "taskset_version": version.number,
            "inspection_id": task.last_inspection_id,
            "reference_pass_rate": task.reference_pass_rate,
            "sample_pass_rate": task.sample_pass_rate,
        }
        yield line


def report_lines(*, taskset_name: str) -> Iterator[dict]:
    """One line per task of the latest version: its flags, status and figures."""
    version = taskset_latest_version(name=taskset_name)
    flags_of: dict[int, list[Flag]] = {}
    for flag in Flag.objects.filter(
        task__version=version, inspection_id=F("task__last_inspection_id")
    ).order_by("-severity", "code"):
        flags_of.setdefault(flag.task_id, []).append(flag)
    probes_of = terminal_probe_results(version=version)
    for task in version.tasks.order_by("position").defer("source").iterator(chunk_size=1000):
        flags = flags_of.get(task.pk, [])
        line = {
            "task_id": task.task_id,
            "flags": [f.code for f in flags],
            "flag_status": {f.code: f.status for f in flags},
            "flag_explanations": {f.code: f.explanation for f in flags},
            "flag_confidence": {f.code: f.confidence for f in flags},
            "flag_evidence": {f.code: f.evidence for f in flags},
            "status": task.status,
            "stats": {
                "runs": task.runs_count,
                "reference_pass_rate": task.reference_pass_rate,
                "sample_pass_rate": task.sample_pass_rate,
                "learnability": task.learnability,
                "survivor_share": task.survivor_share,
                "cluster_count": task.cluster_count,
                "inspection_id": task.last_inspection_id,
                "content_hash": task.content_hash,
            },
        }
        if task.kind == Task.TERMINAL:
            line["lint"] = task.lint
            line["probes"] = probes_of.get(task.pk, {})
        yield line


def terminal_probe_results(*, version: TaskSetVersion) -> dict[int, dict[str, dict[str, bool]]]:
    """Per task of the version's terminal tasks, per probe, per mode: did it earn a full reward
    in the task's latest inspection?"""
    results: dict[int, dict[str, dict[str, bool]]] = {}
    rows = Run.objects.filter(
        task__version=version,
        task__kind=Task.TERMINAL,
        inspection_id=F("task__last_inspection_id"),
        kind=Run.PROBE,
        status=Run.DONE,
    ).values_list("task_id", "probe", "mode", "outcome")
    for task_pk, probe, mode, outcome in rows.iterator(chunk_size=5000):
        if outcome in ("sandbox_error", "build_failed"):
            continue
        modes = results.setdefault(task_pk, {}).setdefault(probe, {})
        modes[mode] = modes.get(mode, False) or outcome == "passed"
    return results
