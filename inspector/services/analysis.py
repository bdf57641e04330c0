"""Turning an inspection's runs into flags and per-task figures (detect/ does the work on plain
data), and the drift against the previous inspection."""

from __future__ import annotations

import logging
from array import array
from bisect import bisect_left
from math import isnan
from types import SimpleNamespace

from django.conf import settings
from django.db import transaction
from django.db.models import OuterRef, Q
from django.utils import timezone

from inspector.detect.codes import combined_severity
from inspector.models import (
    Flag,
    Inspection,
    Run,
    Sample,
    Task,
    TaskSetVersion,
    values_update,
)
from inspector.services.lifecycle import analysis_alive

logger = logging.getLogger(__name__)


def inspection_analyse(*, inspection_id: int) -> Inspection:
    """Turn the inspection's runs into flags and per-task figures (pandas, in detect/), with a
    sign of life written meanwhile (lifecycle.analysis_alive)."""
    with analysis_alive(inspection_id):
        return _inspection_analyse(inspection_id)


def _inspection_analyse(inspection_id: int) -> Inspection:
    inspection = Inspection.objects.select_related("version").get(pk=inspection_id)
    if inspection.config.get("kind") == Task.REPO:
        from inspector.services.repo_runs import repo_analysis

        analysis, runs_of = repo_analysis(inspection)
        stats = _RepoStats(analysis.stats)
        return _flags_store(
            inspection, list(analysis.findings), stats, None, runs_of, analysis.harness_findings
        )
    if inspection.config.get("kind") == Task.ANSWER:
        from inspector.services.answer_runs import answer_analysis

        analysis, runs_of = answer_analysis(inspection)
        return _flags_store(
            inspection, list(analysis.findings), analysis, None, runs_of, analysis.harness_findings
        )
    if inspection.config.get("mode"):  # terminal tasks
        from inspector.detect.terminal import analyse_terminal_runs

        records, _, runs_of = _runs_read(inspection_id)
        analysis = analyse_terminal_runs(
            records,
            mode=inspection.config["mode"],
            harness_share=settings.HARNESS_FINDING_SHARE,
            harness_min_tasks=settings.HARNESS_FINDING_MIN_TASKS,
        )
        return _flags_store(
            inspection, list(analysis.findings), analysis, None, runs_of, analysis.harness_findings
        )
    findings, analysis, depth, runs_of = _function_analysis(inspection)
    harness_findings: list[dict] = []
    if analysis.boundary:
        from inspector.detect.flags import boundary_findings

        names = dict(
            Task.objects.filter(pk__in=list(analysis.boundary)).values_list("pk", "task_id")
        )
        harness_findings = boundary_findings(analysis, names)
    return _flags_store(inspection, findings, analysis, depth, runs_of, harness_findings)


# Function tasks are analysed a chunk at a time: every rule but the duplicate search and the
# anomaly forest looks at one task's runs alone, so a chunk's runs, texts and per-task results
# need not outlive it (bench/analysis_scale.py: at 100,000 tasks the whole inspection at once
# was 4.8 KB a task of the worker's peak). A chunk holds about this many runs (a default
# HumanEval inspection makes 60 a task, a cheap set one), and at most _TASKS_AT_ONCE tasks.
_RUNS_ANALYSED_AT_ONCE = 50_000
_TASKS_AT_ONCE = 5000


def _chunk_tasks(inspection: Inspection) -> int:
    """How many tasks a chunk of this inspection's analysis holds (`_RUNS_ANALYSED_AT_ONCE`)."""
    runs = Run.objects.filter(inspection_id=inspection.pk).count()
    tasks = max(1, Task.objects.filter(version_id=inspection.version_id).count())
    return max(1, min(_TASKS_AT_ONCE, _RUNS_ANALYSED_AT_ONCE * tasks // max(1, runs)))


def _function_analysis(inspection: Inspection):
    """The outcome rules and the deeper rules on a function-task inspection, a chunk of tasks at
    a time (the set's order: tasks are stored in it, so by key), then the rules across the set
    on what each chunk left: six figures a task for the anomaly forest, and the findings; the
    duplicate search reads the prompts again as it goes. Returns the findings (ordered as
    `_flags_store` takes them), the outcome analysis (stats, boundary), the deeper one (stats)
    and each task's count of runs; the stats and counts are one `_FigureTable`."""
    # pandas and scikit-learn: only the analysis needs them
    from inspector.detect.depth import DepthAnalysis, feature_frame, set_findings
    from inspector.detect.flags import Analysis

    depth_settings = _depth_settings(inspection)
    outcome_findings: list = []
    depth_findings: list = []
    boundary: dict = {}
    figures = _FigureTable()
    feature_keys = array("q")
    feature_values = array("d")  # six figures a task, one task after the other
    raised: set[int] = set()
    for tasks in _function_task_chunks(inspection.version_id, _chunk_tasks(inspection)):
        outcomes, deep, counts = _tasks_analysed(inspection.pk, tasks, depth_settings, span=True)
        figures.extend(tasks, outcomes.stats, deep.stats, counts)
        outcome_findings.extend(outcomes.findings)
        boundary.update(outcomes.boundary)
        depth_findings.extend(deep.findings)
        feature_keys.extend(deep.feature_keys)
        for row in deep.feature_rows:
            feature_values.extend(row)
        raised.update(f.task_key for f in outcomes.findings)
        raised.update(f.task_key for f in deep.findings)

    def evidence_of(task_keys: list[int]) -> dict:
        """The anomaly evidence of the few tasks the forest picks, read again."""
        tasks = _function_tasks(Task.objects.filter(pk__in=task_keys), _of_tasks(task_keys))
        _, deep, _ = _tasks_analysed(inspection.pk, tasks, depth_settings, keep_evidence=True)
        return deep.evidence

    def names_of(task_keys: list[int]) -> dict[int, str]:
        return dict(Task.objects.filter(pk__in=task_keys).values_list("pk", "task_id"))

    depth_findings.extend(
        set_findings(
            _prompts(inspection.version_id),
            feature_frame(list(feature_keys), feature_values),
            raised=raised,
            names_of=names_of,
            evidence_of=evidence_of,
            other_prompts=_other_prompts(inspection),
            settings=depth_settings,
        )
    )
    # As one analysis of the whole set orders them: by task, then severity; the outcome rules'
    # first among equals, then the deeper ones in the order they were found (a stable sort).
    findings = sorted([*outcome_findings, *depth_findings], key=lambda f: (f.task_key, -f.severity))
    # The chunks come in key order, so the merged outcome findings are in it too.
    analysis = Analysis(findings=outcome_findings, stats=figures, boundary=boundary)
    depth = DepthAnalysis(findings=depth_findings, stats=figures)
    return findings, analysis, depth, figures.runs


class _FigureTable:
    """Each task's figures from a chunked analysis, kept as flat arrays in key order (a dict of
    TaskStats, one of DepthStats and one of run counts were 0.3 KB a task at 100,000 tasks).
    `get(key)` gives a task's back as attributes, as a dict of stats would; a figure that was
    None is kept as NaN, so a NaN figure comes back as None (no rule makes one)."""

    FIELDS = (
        "runs",
        "reference_pass_rate",
        "sample_pass_rate",
        "learnability",
        "survivor_share",
        "cluster_count",
    )
    WHOLE = ("runs", "cluster_count")  # counts, given back as ints

    def __init__(self) -> None:
        self.keys = array("q")
        self.values = array("d")
        self._at = 0  # where the next key read is looked for first
        self._last = (None, None)  # the last task read, and its figures

    def extend(self, tasks: list[dict], stats: dict, depth_stats: dict, runs: dict) -> None:
        """Add a chunk's tasks (after any task already added): their outcome stats, deeper
        stats and counts of runs."""
        nan = float("nan")
        for task in tasks:
            key = task["task_key"]
            if self.keys and key <= self.keys[-1]:
                raise ValueError(f"task {key} comes after task {self.keys[-1]}")
            outcome, deep = stats.get(key), depth_stats.get(key)
            row = (
                runs.get(key, 0),
                outcome.reference_pass_rate if outcome else None,
                outcome.sample_pass_rate if outcome else None,
                deep.learnability if deep else None,
                deep.survivor_share if deep else None,
                deep.cluster_count if deep else None,
            )
            self.keys.append(key)
            self.values.extend(nan if value is None else value for value in row)

    def _row(self, key: int):
        at = self._at  # the figures are read in key order: the row after the last one read
        if not (at < len(self.keys) and self.keys[at] == key):
            at = bisect_left(self.keys, key)
            if at == len(self.keys) or self.keys[at] != key:
                return None
        self._at = at + 1
        width = len(self.FIELDS)
        return self.values[at * width : (at + 1) * width]

    def get(self, key: int, default=None):
        if self._last[0] == key:  # asked again for the same task: its outcome, then deeper stats
            return self._last[1]
        row = self._row(key)
        if row is None:
            return default
        figures = {
            name: None if isnan(value) else value
            for name, value in zip(self.FIELDS, row, strict=True)
        }
        for name in self.WHOLE:
            if figures[name] is not None:
                figures[name] = int(figures[name])
        self._last = (key, SimpleNamespace(**figures))
        return self._last[1]

    @property
    def runs(self) -> _RunCounts:
        return _RunCounts(self)


class _RunCounts:
    """A `_FigureTable`'s counts of runs, read as a dict of task key -> count."""

    def __init__(self, table: _FigureTable) -> None:
        self.table = table

    def get(self, key: int, default: int = 0) -> int:
        figures = self.table.get(key)
        return default if figures is None else figures.runs


def _prompts(version_id: int):
    """The version's (task key, prompt) pairs in the set's order, read a block at a time."""
    return (
        Task.objects.filter(version_id=version_id)
        .order_by("pk")
        .values_list("pk", "prompt")
        .iterator(chunk_size=_TASKS_WRITTEN_AT_ONCE)
    )


def _tasks_analysed(
    inspection_id: int, tasks: list[dict], depth_settings, *, span=False, keep_evidence=False
):
    """The rules that look at one task's runs alone (the outcome rules, then the deeper ones),
    on these tasks (`_function_tasks`; `span`: every task of the set between the first and the
    last): their outcome analysis, their deeper analysis (detect.depth.TasksDepth) and each
    one's count of runs."""
    from inspector.detect.depth import tasks_depth
    from inspector.detect.flags import analyse_runs

    which = _of_tasks([task["task_key"] for task in tasks], span=span)
    records, deeper_runs, counts = _runs_read(inspection_id, which)
    for record in records:
        del record["mode"]  # the reason stays: it tells a run the sandbox boundary decided
    outcomes = analyse_runs(records)
    del records
    flagged: dict[int, set[str]] = {}
    for finding in outcomes.findings:
        flagged.setdefault(finding.task_key, set()).add(str(finding.code))
    _deeper_read(inspection_id, which, deeper_runs)
    deep = tasks_depth(
        tasks, deeper_runs, flagged=flagged, settings=depth_settings, keep_evidence=keep_evidence
    )
    return outcomes, deep, counts


def _of_tasks(task_keys: list[int], *, span: bool = False) -> Q:
    """Rows (runs, samples) of these tasks. When they are every task of the set between the
    first and the last (`span`: a chunk), by the range of their keys: an IN list of 2,000 keys
    cost Django a second a 100,000-task analysis for each table it read."""
    if span:
        return Q(task_id__gte=task_keys[0], task_id__lte=task_keys[-1])
    return Q(task_id__in=task_keys)


def _runs_read(inspection_id: int, which: Q | None = None):
    """The inspection's runs (of some tasks only: `which`, `_of_tasks`): the records the outcome rules
    take, the runs the deeper rules take (without their output: `_deeper_read`), and each
    task's count of runs of every kind (the count its page and its history show)."""
    rows = Run.objects.filter(inspection_id=inspection_id)
    if which is not None:
        rows = rows.filter(which)
    records: list[dict] = []
    deeper_runs: list[dict] = []
    runs_of: dict[int, int] = {}
    for pk, task_pk, kind, sample_id, probe, outcome, mode, error, duration in rows.values_list(
        "pk",
        "task_id",
        "kind",
        "sample__sample_id",
        "probe",
        "outcome",
        "mode",
        "error",
        "duration",
    ).iterator(chunk_size=5000):
        runs_of[task_pk] = runs_of.get(task_pk, 0) + 1
        if kind in (Run.MUTANT, Run.BEHAVIOUR):
            deeper_runs.append(
                {"run_id": pk, "task_key": task_pk, "kind": kind, "key": probe, "outcome": outcome}
            )
            continue
        key = sample_id if kind == Run.SAMPLE else (probe or Run.REFERENCE)
        records.append(
            {
                "run_id": pk,
                "task_key": task_pk,
                "solution_kind": kind,
                "solution_key": key,
                "outcome": outcome,
                "mode": mode,
                "reason": error,
            }
        )
        if kind in (Run.REFERENCE, Run.SAMPLE):
            deeper_runs.append(
                {
                    "run_id": pk,
                    "task_key": task_pk,
                    "kind": kind,
                    "key": key,
                    "outcome": outcome,
                    "duration": duration,
                }
            )
    return records, deeper_runs, runs_of


def _deeper_read(inspection_id: int, which: Q, deeper_runs: list[dict]) -> None:
    """Adds the behaviour runs' output and the mutant runs' detail (diff, description) to
    `deeper_runs`, those of some tasks (`which`, `_of_tasks`)."""
    by_pk = {run["run_id"]: run for run in deeper_runs}
    for pk, stdout, detail in (
        Run.objects.filter(which, inspection_id=inspection_id, kind__in=(Run.BEHAVIOUR, Run.MUTANT))
        .values_list("pk", "stdout_tail", "detail")
        .iterator(chunk_size=2000)
    ):
        by_pk[pk]["stdout"] = stdout
        by_pk[pk]["detail"] = {k: v for k, v in (detail or {}).items() if k != "completion"}


_TASK_FIELDS = (
    "pk",
    "task_id",
    "prompt",
    "canonical_solution",
    "behaviour_inputs",
    "test",
    "entry_point",
)


def _function_task_chunks(version_id: int, size: int):
    """The version's tasks as the deeper rules take them (`_function_tasks`), `size` at a time
    in the set's order."""
    after = 0
    while tasks := _function_tasks(
        Task.objects.filter(version_id=version_id, pk__gt=after).order_by("pk")[:size],
        None,
    ):
        after = tasks[-1]["task_key"]
        yield tasks


def _function_tasks(rows, samples: Q | None) -> list[dict]:
    """The tasks of `rows` (a query), in its order, with their samples' models (of `samples`,
    `_of_tasks`; None: every task between the first and the last)."""
    tasks = [
        {
            "task_key": pk,
            "task_id": task_id,
            "prompt": prompt,
            "canonical_solution": solution,
            "inputs": inputs,
            "test": test,
            "entry_point": entry_point,
            "sample_models": {},
        }
        for pk, task_id, prompt, solution, inputs, test, entry_point in rows.values_list(
            *_TASK_FIELDS
        )
    ]
    if not tasks:
        return tasks
    by_key = {task["task_key"]: task for task in tasks}
    if samples is None:
        samples = _of_tasks([tasks[0]["task_key"], tasks[-1]["task_key"]], span=True)
    for task_pk, sample_id, model in Sample.objects.filter(samples).values_list(
        "task_id", "sample_id", "model"
    ):
        if task_pk in by_key:  # a range may hold another set's tasks
            by_key[task_pk]["sample_models"][sample_id] = model
    return tasks


class _RepoStats:
    """detect/swe.py's per-task figures (dicts) as _flags_store reads an analysis's stats."""

    def __init__(self, stats: dict[int, dict]) -> None:
        self.stats = {
            task_pk: SimpleNamespace(
                reference_pass_rate=figures.get("reference_pass_rate"),
                sample_pass_rate=figures.get("sample_pass_rate"),
            )
            for task_pk, figures in stats.items()
        }


def _flags_store(inspection, findings, analysis, depth, runs_of, harness_findings) -> Inspection:
    """Store the findings as the inspection's flags (a reviewer's dismissal carried over), the
    per-task figures on each task, and finish the inspection."""
    inspection_id = inspection.pk
    findings.extend(_drift(inspection, findings))
    with transaction.atomic():
        Flag.objects.filter(inspection_id=inspection_id).delete()
        # A reviewer's dismissal holds across re-inspections of the same task.
        dismissed = {
            (task_pk, code): (note, reviewer)
            for task_pk, code, note, reviewer in Flag.objects.filter(
                task__version_id=inspection.version_id, status=Flag.DISMISSED
            )
            .order_by("reviewed_at")
            .values_list("task_id", "code", "note", "reviewed_by")
        }
        flags = []
        seen: set[tuple[int, str]] = set()
        for finding in findings:
            if (finding.task_key, str(finding.code)) in seen:
                continue  # one flag of a kind per task: the outcome rules' comes first
            seen.add((finding.task_key, str(finding.code)))
            carried = dismissed.get((finding.task_key, str(finding.code)))
            flags.append(
                Flag(
                    task_id=finding.task_key,
                    inspection_id=inspection_id,
                    code=str(finding.code),
                    severity=finding.severity,
                    confidence=finding.confidence,
                    explanation=finding.explanation,
                    evidence_run_ids=list(finding.evidence_run_ids),
                    evidence=finding.evidence,
                    status=Flag.DISMISSED if carried else Flag.OPEN,
                    note=f"(kept from an earlier dismissal) {carried[0]}" if carried else "",
                    reviewed_by_id=carried[1] if carried else None,
                    reviewed_at=timezone.now() if carried else None,
                )
            )
        Flag.objects.bulk_create(flags, batch_size=1000)
        blocking: dict[int, list[Flag]] = {}
        for flag in flags:
            if flag.status in Flag.BLOCKING:
                blocking.setdefault(flag.task_id, []).append(flag)
        # The tasks' figures are written 2,000 tasks at a time, as plain values: a 100,000-task
        # set's model instances all at once were 68 MB of the worker's peak, and making them
        # and their values ready for the database 5 s (bench/analysis_scale.py).
        task_count, after = 0, 0
        while keys := list(
            Task.objects.filter(version_id=inspection.version_id, pk__gt=after)
            .order_by("pk")
            .values_list("pk", flat=True)[:_TASKS_WRITTEN_AT_ONCE]
        ):
            task_count, after = task_count + len(keys), keys[-1]
            values_update(
                Task,
                _TASK_FIGURES,
                _task_figures(keys, inspection_id, analysis, depth, runs_of, blocking),
            )
        now = timezone.now()
        Inspection.objects.filter(pk=inspection_id).update(
            status=Inspection.FINISHED,
            findings=harness_findings,
            finished_at=now,
            updated_at=now,
        )
    logger.info(
        "inspection %s analysed: %s flags (%s blocking) on %s of its %s tasks",
        inspection_id,
        len(flags),
        sum(len(mine) for mine in blocking.values()),
        len({flag.task_id for flag in flags}),
        task_count,
    )
    inspection.refresh_from_db()
    return inspection


_TASKS_WRITTEN_AT_ONCE = 2000


_TASK_FIGURES = (
    "last_inspection",
    "severity",
    "open_flags",
    "pending_review",
    "runs_count",
    "reference_pass_rate",
    "sample_pass_rate",
    "learnability",
    "survivor_share",
    "cluster_count",
)


def _task_figures(task_keys, inspection_id, analysis, depth, runs_of, blocking):
    """Each task's figures from this inspection (`_TASK_FIGURES`, then its key): its blocking
    flags' severity and codes, its runs and pass rates, the deeper figures."""
    for key in task_keys:
        stats = analysis.stats.get(key)
        mine = sorted(blocking.get(key, []), key=lambda f: (-f.severity, f.code))
        deep = depth.stats.get(key) if depth else None
        yield [
            inspection_id,
            int(combined_severity([f.severity for f in mine])),
            ",".join(f.code for f in mine),
            any(f.status == Flag.OPEN for f in mine),
            int(runs_of.get(key, 0)),
            _number(stats.reference_pass_rate if stats else None, float),
            _number(stats.sample_pass_rate if stats else None, float),
            _number(deep.learnability if deep else None, float),
            _number(deep.survivor_share if deep else None, float),
            _number(deep.cluster_count if deep else None, int),
            key,
        ]


def _number(value, kind):
    """A figure as the database takes it: None, or a plain int or float (not numpy's)."""
    return None if value is None else kind(value)


def task_outcomes(inspection_id: int) -> dict[int, dict[str, int]]:
    """Per task of an inspection: reference and sample runs passed and counted (sandbox errors
    and build failures are not counted)."""
    from django.db.models import Count, Q

    counted = ~Q(outcome__in=("sandbox_error", "build_failed"))
    rows = (
        Run.objects.filter(
            inspection_id=inspection_id, kind__in=(Run.REFERENCE, Run.SAMPLE), status=Run.DONE
        )
        .filter(counted)
        .values("task_id", "kind")
        .annotate(total=Count("id"), passed=Count("id", filter=Q(outcome="passed")))
    )
    out: dict[int, dict[str, int]] = {}
    for row in rows:
        mine = out.setdefault(row["task_id"], {})
        mine[f"{row['kind']}_passed"] = row["passed"]
        mine[f"{row['kind']}_total"] = row["total"]
    return out


def _drift(inspection: Inspection, findings) -> list:
    """`drift` against the previous finished inspection of the same version (detect/drift.py)."""
    from inspector.detect.drift import Outcomes, drift_findings

    previous = (
        Inspection.objects.filter(
            version_id=inspection.version_id, status=Inspection.FINISHED, pk__lt=inspection.pk
        )
        .order_by("-pk")
        .first()
    )
    if previous is None:
        return []
    before_flags: dict[int, set[str]] = {}
    for task_pk, code in Flag.objects.filter(inspection=previous).values_list("task_id", "code"):
        before_flags.setdefault(task_pk, set()).add(code)
    now_flags: dict[int, set[str]] = {}
    for finding in findings:
        now_flags.setdefault(finding.task_key, set()).add(str(finding.code))

    def table(counts: dict[int, dict[str, int]], flags: dict[int, set[str]]):
        return {
            task_pk: Outcomes(
                reference_passed=c.get("reference_passed", 0),
                reference_total=c.get("reference_total", 0),
                sample_passed=c.get("sample_passed", 0),
                sample_total=c.get("sample_total", 0),
                flags=frozenset(flags.get(task_pk, ())),
            )
            for task_pk, c in counts.items()
        }

    return drift_findings(
        table(task_outcomes(inspection.pk), now_flags),
        table(task_outcomes(previous.pk), before_flags),
        current_id=inspection.pk,
        previous_id=previous.pk,
        p_value=settings.DRIFT_P_VALUE,
    )


def _depth_settings(inspection: Inspection):
    from inspector.detect.depth import DepthSettings
    from inspector.services.function_runs import behaviour_limits

    return DepthSettings(
        survivor_share=settings.WEAK_TESTS_SURVIVOR_SHARE,
        duplicate_similarity=settings.DUPLICATE_SIMILARITY,
        per_call_seconds=behaviour_limits(inspection, reference=True).per_call_seconds,
    )


def _other_prompts(inspection: Inspection):
    """The prompts of the other task sets' latest versions, for duplicates across sets: ((set
    name, task id), prompt) pairs, read a block at a time as the duplicate search goes."""
    latest_others = TaskSetVersion.objects.filter(
        number=TaskSetVersion.objects.filter(taskset=OuterRef("taskset"))
        .order_by("-number")
        .values("number")[:1]
    ).exclude(taskset_id=inspection.version.taskset_id)
    for taskset, task_id, prompt in (
        Task.objects.filter(version__in=latest_others.values("pk"))
        .values_list("version__taskset__name", "task_id", "prompt")
        .iterator(chunk_size=_TASKS_WRITTEN_AT_ONCE)
    ):
        yield (taskset, task_id), prompt
