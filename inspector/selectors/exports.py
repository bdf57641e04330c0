"""What leaves the platform: the clean tasks of a version, the training manifest, the per-task
report (JSONL) and the report table (CSV or Parquet) of any queue filter's tasks.

Every export of a task set comes from one finished inspection, its ExportSource (export_source.py:
the version's last finished one, or the one it is pinned to). An export pinned to an earlier
inspection reads that inspection's flags and runs; the tasks' quarantine, a reviewer's decision
about the task now, is read as it stands."""

from __future__ import annotations

import csv
import io
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from django.conf import settings
from django.db.models import Count, Exists, F, OuterRef, Q, QuerySet

from inspector.models import (
    Flag,
    Inspection,
    Run,
    Task,
    TaskSetVersion,
)
from inspector.selectors.export_source import ExportSource, export_source
from inspector.selectors.tasksets import version_last_finished

logger = logging.getLogger(__name__)

# Runs the rates leave out, as the analysis does: faults of the infrastructure, not of the task.
NOT_COUNTED = ("sandbox_error", "build_failed")


def clean_tasks(*, version: TaskSetVersion, inspection: Inspection | None = None):
    """Active, inspected (its reference really ran) and with no flag still blocking it, by the
    verdicts of `inspection` (default: the version's last finished one; none: no task)."""
    from inspector.detect.codes import ADVISORY

    last = version_last_finished(version)
    inspection = inspection or last
    if inspection is None:
        return version.tasks.none()
    advisory = ADVISORY - set(settings.ADVISORY_FLAGS_THAT_BLOCK)
    blocking = Flag.objects.filter(
        task=OuterRef("pk"), inspection_id=inspection.pk, status__in=Flag.BLOCKING
    ).exclude(code__in=advisory)
    tasks = version.tasks.filter(status=Task.ACTIVE)
    if last is not None and last.pk == inspection.pk:
        # The tasks' own columns hold this inspection's figures.
        tasks = tasks.filter(last_inspection_id=inspection.pk, reference_pass_rate__isnull=False)
    else:
        ran = Run.objects.filter(
            task=OuterRef("pk"), inspection_id=inspection.pk, kind=Run.REFERENCE
        ).exclude(outcome__in=NOT_COUNTED)
        tasks = tasks.filter(Exists(ran))
    return tasks.exclude(Exists(blocking)).order_by("position")


@dataclass(frozen=True)
class Figures:
    runs: int
    reference_pass_rate: float | None
    sample_pass_rate: float | None
    # Of the deeper analysis; kept on the task for its last inspection only.
    learnability: float | None = None
    survivor_share: float | None = None
    cluster_count: int | None = None


def _task_figures(task: Task) -> Figures:
    return Figures(
        runs=task.runs_count,
        reference_pass_rate=task.reference_pass_rate,
        sample_pass_rate=task.sample_pass_rate,
        learnability=task.learnability,
        survivor_share=task.survivor_share,
        cluster_count=task.cluster_count,
    )


def inspection_figures(inspection: Inspection) -> dict[int, Figures]:
    """Per task: its runs and pass rates in `inspection`, recomputed from the stored runs as the
    analysis counts them (sandbox errors and failed builds left out of the rates; a terminal set
    in its own mode). The deeper figures are not kept per inspection: None."""
    runs = Run.objects.filter(
        inspection_id=inspection.pk, kind__in=(Run.REFERENCE, Run.SAMPLE, Run.PROBE)
    )
    mode = inspection.config.get("mode")
    if mode:
        runs = runs.filter(Q(mode="") | Q(mode=mode))
    rows = runs.values("task_id", "kind").annotate(
        total=Count("id"),
        counted=Count("id", filter=~Q(outcome__in=NOT_COUNTED)),
        passed=Count("id", filter=Q(outcome="passed")),
    )
    counts: dict[int, dict[str, int]] = {}
    for row in rows:
        mine = counts.setdefault(row["task_id"], {"runs": 0})
        mine["runs"] += row["total"]
        mine[f"{row['kind']}_counted"] = row["counted"]
        mine[f"{row['kind']}_passed"] = row["passed"]

    def rate(mine: dict[str, int], kind: str) -> float | None:
        counted = mine.get(f"{kind}_counted", 0)
        return mine.get(f"{kind}_passed", 0) / counted if counted else None

    return {
        task_pk: Figures(
            runs=mine["runs"],
            reference_pass_rate=rate(mine, Run.REFERENCE),
            sample_pass_rate=rate(mine, Run.SAMPLE),
        )
        for task_pk, mine in counts.items()
    }


def _figures_of(source: ExportSource):
    """task -> Figures: the task's columns for the current inspection, else recomputed."""
    if source.current:
        return _task_figures
    recomputed = inspection_figures(source.inspection)
    empty = Figures(runs=0, reference_pass_rate=None, sample_pass_rate=None)
    return lambda task: recomputed.get(task.pk, empty)


def _source(source: ExportSource | None, taskset_name: str, inspection_id) -> ExportSource:
    return source or export_source(taskset_name=taskset_name, inspection_id=inspection_id)


def manifest_lines(
    *,
    source: ExportSource | None = None,
    taskset_name: str = "",
    inspection_id: int | str | None = None,
) -> Iterator[dict]:
    """The clean tasks of the source's version, each line the task's own fields plus `quality`.
    Without a source, resolves one (export_source) at once, so a refusal is raised here, before
    the first line."""
    return _manifest_lines(_source(source, taskset_name, inspection_id))


def _manifest_lines(source: ExportSource) -> Iterator[dict]:
    version, inspection = source.version, source.inspection
    figures_of = _figures_of(source)
    for task in clean_tasks(version=version, inspection=inspection).iterator(chunk_size=1000):
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
        figures = figures_of(task)
        line["quality"] = {
            "content_hash": task.content_hash,
            "taskset": version.taskset.name,
            "taskset_version": version.number,
            "inspection_id": inspection.pk,
            "reference_pass_rate": figures.reference_pass_rate,
            "sample_pass_rate": figures.sample_pass_rate,
        }
        yield line


def _flags_of(source: ExportSource) -> dict[int, list[Flag]]:
    flags_of: dict[int, list[Flag]] = {}
    for flag in Flag.objects.filter(
        task__version=source.version, inspection_id=source.inspection.pk
    ).order_by("-severity", "code"):
        flags_of.setdefault(flag.task_id, []).append(flag)
    return flags_of


def report_lines(
    *,
    source: ExportSource | None = None,
    taskset_name: str = "",
    inspection_id: int | str | None = None,
) -> Iterator[dict]:
    """One line per task of the source's version: its flags, status and figures. Resolves the
    source at once when none is given, as manifest_lines does."""
    return _report_lines(_source(source, taskset_name, inspection_id))


def _report_lines(source: ExportSource) -> Iterator[dict]:
    version = source.version
    flags_of = _flags_of(source)
    figures_of = _figures_of(source)
    probes_of = terminal_probe_results(version=version, inspection=source.inspection)
    for task in version.tasks.order_by("position").defer("source").iterator(chunk_size=1000):
        flags = flags_of.get(task.pk, [])
        figures = figures_of(task)
        line = {
            "task_id": task.task_id,
            "flags": [f.code for f in flags],
            "flag_status": {f.code: f.status for f in flags},
            "flag_explanations": {f.code: f.explanation for f in flags},
            "flag_confidence": {f.code: f.confidence for f in flags},
            "flag_evidence": {f.code: f.evidence for f in flags},
            "status": task.status,
            "stats": {
                "runs": figures.runs,
                "reference_pass_rate": figures.reference_pass_rate,
                "sample_pass_rate": figures.sample_pass_rate,
                "learnability": figures.learnability,
                "survivor_share": figures.survivor_share,
                "cluster_count": figures.cluster_count,
                "inspection_id": source.inspection.pk,
                "content_hash": task.content_hash,
            },
        }
        if task.kind == Task.TERMINAL:
            line["lint"] = task.lint
            line["probes"] = probes_of.get(task.pk, {})
        yield line


def terminal_probe_results(
    *, version: TaskSetVersion, inspection: Inspection | None = None
) -> dict[int, dict[str, dict[str, bool]]]:
    """Per task of the version's terminal tasks, per probe, per mode: did it earn a full reward
    in `inspection` (default: each task's latest inspection)?"""
    results: dict[int, dict[str, dict[str, bool]]] = {}
    rows = Run.objects.filter(
        task__version=version, task__kind=Task.TERMINAL, kind=Run.PROBE, status=Run.DONE
    )
    if inspection is None:
        rows = rows.filter(inspection_id=F("task__last_inspection_id"))
    else:
        rows = rows.filter(inspection_id=inspection.pk)
    for task_pk, probe, mode, outcome in rows.values_list(
        "task_id", "probe", "mode", "outcome"
    ).iterator(chunk_size=5000):
        if outcome in NOT_COUNTED:
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
    "inspection_id",
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
        "last_inspection_id",
    )
    for row in values.iterator(chunk_size=2000):
        line = dict(zip(REPORT_COLUMNS, row, strict=True))
        line["flags"] = line["flags"].replace(",", ";")
        line["assignee"] = line["assignee"] or ""
        yield line


def report_table_rows(*, source: ExportSource) -> Iterator[dict]:
    """Every task of the source's version as report_rows makes them, by the source's
    inspection: the tasks' own columns for the current one, else that inspection's flags and
    recomputed figures (the deeper ones empty: not kept per inspection)."""
    from inspector.detect.codes import combined_severity

    tasks = source.version.tasks.order_by("position", "id")
    if source.current:
        yield from report_rows(tasks)
        return
    flags_of = _flags_of(source)
    figures_of = _figures_of(source)
    for task in tasks.select_related("assignee").defer("source").iterator(chunk_size=2000):
        blocking = [f for f in flags_of.get(task.pk, []) if f.status in Flag.BLOCKING]
        figures = figures_of(task)
        yield {
            "taskset": source.taskset,
            "version": source.version.number,
            "task_id": task.task_id,
            "kind": task.kind,
            "domain": task.domain,
            "status": task.status,
            "flags": ";".join(f.code for f in blocking),
            "severity": combined_severity([f.severity for f in blocking]),
            "pending_review": any(f.status == Flag.OPEN for f in blocking),
            "assignee": task.assignee.get_username() if task.assignee_id else "",
            "reference_pass_rate": figures.reference_pass_rate,
            "sample_pass_rate": figures.sample_pass_rate,
            "learnability": figures.learnability,
            "survivor_share": figures.survivor_share,
            "cluster_count": figures.cluster_count,
            "runs": figures.runs,
            "content_hash": task.content_hash,
            "inspection_id": source.inspection.pk,
        }


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
