"""What leaves the platform: the clean tasks of a version, the training manifest, the per-task
report (JSONL) and the report table (CSV or Parquet) of any queue filter's tasks."""

from __future__ import annotations

import csv
import io
import logging
from collections.abc import Iterable, Iterator

from django.conf import settings
from django.db.models import Exists, F, OuterRef, QuerySet

from inspector.models import (
    Flag,
    Inspection,
    Run,
    Task,
    TaskSetVersion,
)
from inspector.selectors.tasksets import taskset_latest_version

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


# --- Report tables (CSV, Parquet) -----------------------------------------------------------------------------------

REPORT_COLUMNS = (
    "taskset",
    "version",
    "task_id",
    "kind",
    "domain",
    "status",
    "flags",
    "severity",
    "pending_review",
    "assignee",
    "reference_pass_rate",
    "sample_pass_rate",
    "learnability",
    "survivor_share",
    "cluster_count",
    "runs",
    "content_hash",
)


def report_rows(tasks: QuerySet[Task]) -> Iterator[dict]:
    """One flat row per task (REPORT_COLUMNS), read in chunks: memory stays flat however many."""
    values = tasks.values_list(
        "version__taskset__name",
        "version__number",
        "task_id",
        "kind",
        "domain",
        "status",
        "open_flags",
        "severity",
        "pending_review",
        "assignee__username",
        "reference_pass_rate",
        "sample_pass_rate",
        "learnability",
        "survivor_share",
        "cluster_count",
        "runs_count",
        "content_hash",
    )
    for row in values.iterator(chunk_size=2000):
        line = dict(zip(REPORT_COLUMNS, row, strict=True))
        line["flags"] = line["flags"].replace(",", ";")
        line["assignee"] = line["assignee"] or ""
        yield line


class _Echo:
    def write(self, value: str) -> str:
        return value


def csv_stream(rows: Iterable[dict]) -> Iterator[str]:
    """CSV text, a header then one line per row, produced as it is read."""
    writer = csv.DictWriter(_Echo(), fieldnames=REPORT_COLUMNS)
    yield writer.writeheader()
    batch: list[str] = []
    for row in rows:
        batch.append(writer.writerow(row))
        if len(batch) >= 500:
            yield "".join(batch)
            batch = []
    if batch:
        yield "".join(batch)


def parquet_bytes(rows: Iterable[dict]) -> bytes:
    """The rows as one Parquet file (pandas and pyarrow). Parquet is written whole, so the
    rows are held in memory once: about 100 bytes a task."""
    import pandas as pd

    frame = pd.DataFrame.from_records(list(rows), columns=list(REPORT_COLUMNS))
    buffer = io.BytesIO()
    frame.to_parquet(buffer, index=False)
    return buffer.getvalue()
