"""Turning an inspection's runs into flags and per-task figures (detect/ does the work on plain
data), and the drift against the previous inspection."""

from __future__ import annotations

import logging
from types import SimpleNamespace

from django.conf import settings
from django.db import transaction
from django.db.models import OuterRef
from django.utils import timezone

from inspector.detect.codes import combined_severity
from inspector.models import (
    Flag,
    Inspection,
    Run,
    Sample,
    Task,
    TaskSetVersion,
    rows_update,
)
from inspector.services.lifecycle import analysis_alive

logger = logging.getLogger(__name__)


def inspection_analyse(*, inspection_id: int) -> Inspection:
    """Turn the inspection's runs into flags and per-task figures (pandas, in detect/), with a
    sign of life written meanwhile (lifecycle.analysis_alive)."""
    with analysis_alive(inspection_id):
        return _inspection_analyse(inspection_id)


def _inspection_analyse(inspection_id: int) -> Inspection:
    from inspector.detect.flags import analyse_runs  # pandas: only the analysis needs it

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
    rows = Run.objects.filter(inspection_id=inspection_id).values_list(
        "pk",
        "task_id",
        "kind",
        "sample__sample_id",
        "probe",
        "outcome",
        "mode",
        "error",
        "duration",
    )
    records = []
    deeper_runs: list[dict] = []
    # Every run of each task, of every kind: the count its page and its history show.
    runs_of: dict[int, int] = {}
    for pk, task_pk, kind, sample_id, probe, outcome, mode, error, duration in rows.iterator(
        chunk_size=5000
    ):
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
    harness_findings: list[dict] = []
    depth = None
    if inspection.config.get("mode"):  # terminal tasks
        from inspector.detect.terminal import analyse_terminal_runs

        analysis = analyse_terminal_runs(
            records,
            mode=inspection.config["mode"],
            harness_share=settings.HARNESS_FINDING_SHARE,
            harness_min_tasks=settings.HARNESS_FINDING_MIN_TASKS,
        )
        harness_findings = analysis.harness_findings
        findings = list(analysis.findings)
    else:
        for record in records:
            del record["mode"]  # the reason stays: it tells a run the sandbox boundary decided
        analysis = analyse_runs(records)
        depth = _analyse_depth(inspection, deeper_runs, analysis)
        findings = sorted(
            [*analysis.findings, *depth.findings], key=lambda f: (f.task_key, -f.severity)
        )
        if analysis.boundary:
            from inspector.detect.flags import boundary_findings

            names = dict(
                Task.objects.filter(pk__in=list(analysis.boundary)).values_list("pk", "task_id")
            )
            harness_findings = boundary_findings(analysis, names)
    return _flags_store(inspection, findings, analysis, depth, runs_of, harness_findings)


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
        # The tasks' figures are written 2,000 tasks at a time: a 100,000-task set's model
        # instances all at once were 68 MB of the worker's peak (bench/analysis_scale.py).
        task_count, after = 0, 0
        while tasks := list(
            Task.objects.filter(version_id=inspection.version_id, pk__gt=after)
            .order_by("pk")
            .only("pk", "severity", "open_flags", "pending_review", "last_inspection")[
                :_TASKS_WRITTEN_AT_ONCE
            ]
        ):
            task_count, after = task_count + len(tasks), tasks[-1].pk
            _task_figures(tasks, inspection_id, analysis, depth, runs_of, blocking)
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


def _task_figures(tasks, inspection_id, analysis, depth, runs_of, blocking) -> None:
    """Set and write each task's figures from this inspection: its blocking flags' severity and
    codes, its runs and pass rates, the deeper figures."""
    for task in tasks:
        stats = analysis.stats.get(task.pk)
        mine = sorted(blocking.get(task.pk, []), key=lambda f: (-f.severity, f.code))
        task.last_inspection_id = inspection_id
        task.severity = combined_severity([f.severity for f in mine])
        task.open_flags = ",".join(f.code for f in mine)
        task.pending_review = any(f.status == Flag.OPEN for f in mine)
        task.runs_count = runs_of.get(task.pk, 0)
        task.reference_pass_rate = stats.reference_pass_rate if stats else None
        task.sample_pass_rate = stats.sample_pass_rate if stats else None
        deep = depth.stats.get(task.pk) if depth else None
        task.learnability = deep.learnability if deep else None
        task.survivor_share = deep.survivor_share if deep else None
        task.cluster_count = deep.cluster_count if deep else None
    rows_update(
        tasks,
        (
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
        ),
    )


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


def _analyse_depth(inspection: Inspection, deeper_runs: list[dict], analysis):
    """The deeper flags (inspector/detect/depth.py): behaviour and mutant runs, the prompts of
    this version and of the other task sets' latest versions."""
    from inspector.detect.depth import DepthSettings, analyse_depth

    by_pk = {run["run_id"]: run for run in deeper_runs}
    for pk, stdout, detail in (
        Run.objects.filter(inspection_id=inspection.pk, kind__in=(Run.BEHAVIOUR, Run.MUTANT))
        .values_list("pk", "stdout_tail", "detail")
        .iterator(chunk_size=2000)
    ):
        by_pk[pk]["stdout"] = stdout
        by_pk[pk]["detail"] = {k: v for k, v in (detail or {}).items() if k != "completion"}
    tasks = [
        {
            "task_key": pk,
            "task_id": task_id,
            "prompt": prompt,
            "canonical_solution": solution,
            "inputs": inputs,
            "test": test,
            "entry_point": entry_point,
        }
        for pk, task_id, prompt, solution, inputs, test, entry_point in Task.objects.filter(
            version_id=inspection.version_id
        ).values_list(
            "pk",
            "task_id",
            "prompt",
            "canonical_solution",
            "behaviour_inputs",
            "test",
            "entry_point",
        )
    ]
    models: dict[int, dict[str, str]] = {}
    for task_pk, sample_id, model in Sample.objects.filter(
        task__version_id=inspection.version_id
    ).values_list("task_id", "sample_id", "model"):
        models.setdefault(task_pk, {})[sample_id] = model
    for task in tasks:
        task["sample_models"] = models.get(task["task_key"], {})
    latest_others = TaskSetVersion.objects.filter(
        number=TaskSetVersion.objects.filter(taskset=OuterRef("taskset"))
        .order_by("-number")
        .values("number")[:1]
    ).exclude(taskset_id=inspection.version.taskset_id)
    other_prompts = {
        (taskset, task_id): prompt
        for taskset, task_id, prompt in Task.objects.filter(
            version__in=latest_others.values("pk")
        ).values_list("version__taskset__name", "task_id", "prompt")
    }
    flagged: dict[int, set[str]] = {}
    for finding in analysis.findings:
        flagged.setdefault(finding.task_key, set()).add(str(finding.code))
    return analyse_depth(
        tasks,
        deeper_runs,
        other_prompts=other_prompts,
        flagged=flagged,
        settings=DepthSettings(
            survivor_share=settings.WEAK_TESTS_SURVIVOR_SHARE,
            duplicate_similarity=settings.DUPLICATE_SIMILARITY,
            per_call_seconds=settings.BEHAVIOUR_PER_CALL_SECONDS,
        ),
    )
