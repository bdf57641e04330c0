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
from django.db.models import (
    BooleanField,
    Case,
    CharField,
    Count,
    Exists,
    F,
    OuterRef,
    Q,
    QuerySet,
    Value,
    When,
)

from inspector.models import (
    Flag,
    Inspection,
    ReviewEvent,
    Run,
    Task,
    TaskSetVersion,
)
from inspector.selectors.answer_tasks import LABEL_FLAGS, relabel_reason
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
    blocking = (
        Flag.objects.filter(
            task=OuterRef("pk"), inspection_id=inspection.pk, status__in=Flag.BLOCKING
        )
        .exclude(code__in=advisory)
        .exclude(_answered_by_relabel(inspection))
    )
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


def _answered_by_relabel(inspection: Inspection) -> Q:
    """A flag about an answer task's label (LABEL_FLAGS) that a reviewer's correction made
    since the inspection answers: it no longer keeps the task out of the manifest. The next
    inspection judges the new label afresh (a dismissal instead would be carried over to it);
    undone, the correction answers nothing."""
    relabeled_since = ReviewEvent.objects.filter(
        task_id=OuterRef("task_id"),
        action=ReviewEvent.RELABEL,
        created_at__gte=inspection.created_at,
    )
    return Q(code__in=LABEL_FLAGS) & ~Q(task__corrected_label="") & Exists(relabeled_since)


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
    relabels = _relabels(version)
    for task in clean_tasks(version=version, inspection=inspection).iterator(chunk_size=1000):
        relabeled = None
        if task.kind == Task.ANSWER:
            line, relabeled = answer_manifest_line(task, relabels.get(task.pk))
        elif task.kind == Task.TERMINAL:
            # A task folder is named, not inlined: the trainer holds the folders already, and
            # the content hash says the folder is the one that was inspected.
            line = {
                "task_id": task.task_id,
                "kind": Task.TERMINAL,
                "format": task.source.get("format"),
                "folder": task.task_id,
                "content_hash": task.content_hash,
            }
        elif task.kind == Task.REPO:
            # The instance's line as it came (the published SWE-bench schema), plus `quality`.
            line = dict(task.source.get("line") or {})
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
        if relabeled is not None:
            line["quality"]["relabeled"] = relabeled
        yield line


def _relabels(version: TaskSetVersion) -> dict[int, ReviewEvent]:
    """The relabel in force of each corrected task of the version: its last relabel event."""
    events: dict[int, ReviewEvent] = {}
    rows = (
        ReviewEvent.objects.filter(
            task__version=version, task__kind=Task.ANSWER, action=ReviewEvent.RELABEL
        )
        .exclude(task__corrected_label="")
        .select_related("actor")
        .order_by("created_at", "id")
    )
    for event in rows.iterator(chunk_size=1000):
        events[event.task_id] = event  # the later one wins
    return events


def answer_manifest_line(task: Task, event: ReviewEvent | None) -> tuple[dict, dict | None]:
    """An answer task's uploaded line with the label in force written back where the label
    came from (`metadata.label_from`), and what `quality.relabeled` says (None: not corrected).
    A line without `task_id` (GSM8K's, MATH's) gets the id the import generated.

    - our lines and MATH's with `answer` ("answer"): `answer` is the new label (a number stays
      a number when the new label is one);
    - GSM8K's ("gsm8k ####"): `answer` keeps its reasoning, and the value after its last
      `#### ` is the new label;
    - MATH's without `answer` ("boxed in solution"): `solution` is left as written (its
      reasoning ends in the old box: rewriting the reasoning is not ours to do) and `answer` is
      added with the new label, which a reader of MATH's lines (ours too) takes before the box.
    """
    line = dict(task.source)
    # GSM8K's and MATH's lines have no id: the line names the one the import gave it, as the
    # report does, so the two join.
    line.setdefault("task_id", task.task_id)
    if not task.corrected_label:
        return line, None
    label = task.corrected_label
    label_from = (task.metadata or {}).get("label_from") or "answer"
    original = line.get("answer")
    if label_from == "gsm8k ####" and isinstance(original, str) and "####" in original:
        at = original.rfind("####")
        line["answer"] = f"{original[:at]}#### {label}"
    elif isinstance(original, int | float) and not isinstance(original, bool):
        line["answer"] = _as_number(label)
    else:
        line["answer"] = label
    relabeled = {
        "from": task.canonical_solution,
        "to": label,
        "by": event.actor.get_username() if event is not None and event.actor_id else None,
        "reason": relabel_reason(event.note, label) if event is not None else "",
    }
    return line, relabeled


def _as_number(label: str) -> int | float | str:
    """A label written where the upload had a JSON number: a number again when it is one."""
    for kind in (int, float):
        try:
            return kind(label)
        except ValueError:
            continue
    return label


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
        elif task.kind == Task.REPO:
            line["lint"] = task.lint
        elif task.kind == Task.ANSWER:
            line["label"] = task.label
            line["uploaded_label"] = task.canonical_solution
            line["relabeled"] = bool(task.corrected_label)
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
# A table of answer-graded tasks also carries each one's label in force, and whether a
# reviewer corrected it; a table without any keeps REPORT_COLUMNS alone.
ANSWER_COLUMNS = ("label", "relabeled")


class ReportTable:
    """Report rows, read as they are iterated, with the columns they fill."""

    def __init__(self, rows: Iterator[dict], columns: tuple[str, ...]) -> None:
        self.rows = rows
        self.columns = columns

    def __iter__(self) -> Iterator[dict]:
        return iter(self.rows)


def report_columns(tasks: QuerySet[Task]) -> tuple[str, ...]:
    """REPORT_COLUMNS, and ANSWER_COLUMNS when the tasks hold an answer-graded one."""
    if tasks.filter(kind=Task.ANSWER).exists():
        return REPORT_COLUMNS + ANSWER_COLUMNS
    return REPORT_COLUMNS


def _label_columns(tasks: QuerySet[Task]) -> QuerySet[Task]:
    """The label in force and whether it is corrected, computed in the database for answer tasks
    (empty for the other kinds, whose wide columns stay on disk)."""
    answer = Q(kind=Task.ANSWER)
    return tasks.annotate(
        label_in_force=Case(
            When(answer & Q(corrected_label=""), then=F("canonical_solution")),
            When(answer, then=F("corrected_label")),
            default=Value(""),
            output_field=CharField(),
        ),
        label_corrected=Case(
            When(answer & ~Q(corrected_label=""), then=Value(True)),
            default=Value(False),
            output_field=BooleanField(),
        ),
    )


def report_rows(tasks: QuerySet[Task]) -> ReportTable:
    """One flat row per task (REPORT_COLUMNS, and ANSWER_COLUMNS where the tasks hold an answer
    task), read in chunks: memory stays flat however many."""
    columns = report_columns(tasks)
    return ReportTable(_report_rows_of(tasks, columns), columns)


def _report_rows_of(tasks: QuerySet[Task], columns: tuple[str, ...]) -> Iterator[dict]:
    answers = columns != REPORT_COLUMNS
    if answers:
        tasks = _label_columns(tasks)
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
        *(("label_in_force", "label_corrected") if answers else ()),
    )
    for row in values.iterator(chunk_size=2000):
        line = dict(zip(columns, row, strict=True))
        line["flags"] = line["flags"].replace(",", ";")
        line["assignee"] = line["assignee"] or ""
        if answers and line["kind"] != Task.ANSWER:
            line["label"] = line["relabeled"] = None
        yield line


def report_table_rows(*, source: ExportSource) -> ReportTable:
    """Every task of the source's version as report_rows makes them, by the source's
    inspection: the tasks' own columns for the current one, else that inspection's flags and
    recomputed figures (the deeper ones empty: not kept per inspection)."""
    tasks = source.version.tasks.order_by("position", "id")
    if source.current:
        return report_rows(tasks)
    columns = report_columns(tasks)
    return ReportTable(_pinned_rows(source, tasks, columns), columns)


def _pinned_rows(source: ExportSource, tasks: QuerySet[Task], columns) -> Iterator[dict]:
    from inspector.detect.codes import combined_severity

    answers = columns != REPORT_COLUMNS
    flags_of = _flags_of(source)
    figures_of = _figures_of(source)
    for task in tasks.select_related("assignee").defer("source").iterator(chunk_size=2000):
        blocking = [f for f in flags_of.get(task.pk, []) if f.status in Flag.BLOCKING]
        figures = figures_of(task)
        row = {
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
        if answers:
            answer = task.kind == Task.ANSWER
            row["label"] = task.label if answer else None
            row["relabeled"] = bool(task.corrected_label) if answer else None
        yield row


class _Echo:
    def write(self, value: str) -> str:
        return value


def csv_stream(rows: Iterable[dict]) -> Iterator[str]:
    """CSV text, a header then one line per row, produced as it is read; the columns are the
    rows' own (a ReportTable's) or REPORT_COLUMNS."""
    writer = csv.DictWriter(_Echo(), fieldnames=getattr(rows, "columns", REPORT_COLUMNS))
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

    columns = list(getattr(rows, "columns", REPORT_COLUMNS))
    frame = pd.DataFrame.from_records(list(rows), columns=columns)
    buffer = io.BytesIO()
    frame.to_parquet(buffer, index=False)
    return buffer.getvalue()
