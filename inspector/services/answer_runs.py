"""Answer-graded tasks' runs: verifying claimed runs' answers in one sandbox per message (the
set's verifier on each sample's response, on the label itself, and on the verifier probes) and
recording each verdict exactly once.

The verifier is workers/sandbox/verifier.py: model text is parsed only there, in the sandbox,
never in this process."""

from __future__ import annotations

import contextlib
import logging
import sys
from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models.functions import Length
from django.utils import timezone

from inspector.models import Inspection, Run, lease_from_now, runs_transaction
from inspector.services.lifecycle import inspection_progress, periodically

logger = logging.getLogger(__name__)

# How a verdict's status becomes a run's outcome (passed: the verifier rewards the answer).
_OUTCOME = {"timeout": "timed_out", "sandbox_error": "sandbox_error", "error": "failed"}


# Not a verifier rule: the sample's own `answer` where it came with one (its source extracted it,
# e.g. the result of a program-of-thought response), else the response read by `auto`.
GIVEN = "given"


def answer_text(
    run: Run, rule: str = "auto", probe_texts: dict[int, dict[str, str]] | None = None
) -> tuple[str, bool]:
    """What a run verifies, and whether it is a bare answer (no response to read it from): the
    label itself, a sample's response (or its given answer when it came without one, or when
    the set's rule is GIVEN), or a probe's response, made from the label (`probe_texts` keeps
    each task's probe responses, made once, by task)."""
    task = run.task
    if run.kind == Run.SAMPLE:
        if run.sample.answer and rule == GIVEN:
            return run.sample.answer, True
        if run.sample.completion:
            return run.sample.completion, False
        return run.sample.answer, True
    if run.kind == Run.PROBE:
        from inspector.detect.answer_probes import answer_probe_texts

        texts = (probe_texts or {}).get(task.pk)
        if texts is None:
            texts = answer_probe_texts(task.label, task.answer_type, task.prompt, seed=task.pk)
            if probe_texts is not None:
                probe_texts[task.pk] = texts
        return texts.get(run.probe, ""), False
    return task.label, True


def answer_runs_execute(runs: list[Run], *, token: str) -> None:
    """Verify claimed answer runs in one batch and record each verdict exactly once. A run
    whose verdict is a sandbox error goes back to the queue while it has attempts left."""
    from inspector import enqueue
    from inspector.services.function_runs import run_limits, sandbox_backend
    from workers.sandbox import SandboxUnavailable
    from workers.sandbox.verifier import VerifyItem, verify_answers

    if not runs:
        return
    inspection = runs[0].inspection
    config = inspection.config.get("answer") or {}
    per_answer = float(config.get("per_answer_seconds") or settings.ANSWER_PER_ANSWER_SECONDS)
    # A short lease, renewed while the batch is verified: a message holds thousands of
    # verifications, and a lease covering each one's time limit would keep a dead worker's runs
    # from the others for hours.
    span = timedelta(seconds=settings.RUN_LEASE_SLACK_SECONDS + per_answer)
    pks = [r.pk for r in runs]
    live = [r for r in runs if r.inspection.status != Inspection.FAILED]
    results: list[tuple[Run, dict]] = [
        (r, {"outcome": "sandbox_error", "error": f"inspection #{r.inspection_id} failed"})
        for r in runs
        if r.inspection.status == Inspection.FAILED
    ]
    rule = config.get("rule") or "auto"
    items = []
    probe_texts: dict[int, dict[str, str]] = {}
    for run in live:
        text, bare = answer_text(run, rule, probe_texts)
        items.append(
            VerifyItem(
                key=str(run.pk),
                text=text,
                label=run.task.label,
                answer_type=run.task.answer_type,
                bare=bare,
            )
        )
    try:
        with lease_renewed(pks, token, span):
            verdicts = verify_answers(
                sandbox_backend(),
                items,
                rule="auto" if rule == GIVEN else rule,
                per_answer_seconds=per_answer,
                limits=run_limits(),
            )
    except SandboxUnavailable as exc:
        message = f"sandbox unavailable: {exc}"
        logger.error("inspection %s: %s", inspection.pk, message)
        Inspection.objects.filter(
            pk=inspection.pk, status__in=(Inspection.QUEUED, Inspection.RUNNING)
        ).update(status=Inspection.FAILED, error=message, finished_at=timezone.now())
        verdicts = []
        results.extend((r, {"outcome": "sandbox_error", "error": message}) for r in live)
        live = []
    for run, verdict in zip(live, verdicts, strict=True):
        outcome = "passed" if verdict.correct else _OUTCOME.get(verdict.status, "failed")
        if outcome == "sandbox_error" and run.attempts < settings.RUN_MAX_ATTEMPTS:
            logger.warning("run %s: sandbox error, retrying: %s", run.pk, verdict.detail)
            if Run.objects.filter(pk=run.pk, status=Run.RUNNING, attempts=run.attempts).update(
                status=Run.QUEUED, error=verdict.detail[:2000]
            ):
                enqueue.runs_requeue_after_commit([run.pk])
            continue
        results.append(
            (
                run,
                {
                    "outcome": outcome,
                    "seconds": verdict.seconds,
                    "error": verdict.detail if verdict.status not in ("ok", "no_answer") else "",
                    "detail": {
                        "status": verdict.status,
                        "extracted": verdict.extracted[:2000],
                        "canonical": verdict.canonical[:2000],
                        "why": verdict.detail[:2000],
                        "label": run.task.label[:2000],
                    },
                },
            )
        )
    answer_runs_record(results)


@contextlib.contextmanager
def lease_renewed(pks: list[int], token: str, span: timedelta) -> Iterator[None]:
    """The lease of the runs `pks` that this call (its `token`) still holds set to `span` from
    now, then renewed a third of `span` at a time while the block runs; if no renewal lands (the
    worker dead, the database away), a sweeper takes them back."""

    def renew() -> None:
        Run.objects.filter(pk__in=pks, status=Run.RUNNING, worker=token).update(
            lease_expires_at=lease_from_now(span)
        )

    renew()
    with periodically(span.total_seconds() / 3, renew, f"lease of {len(pks)} runs"):
        yield


def answer_runs_record(results: list[tuple[Run, dict]]) -> int:
    """Record verdicts in one transaction, guarded by the attempt like every run's record, so a
    swept and re-queued run is never recorded twice. One statement executed for many rows: a
    message holds hundreds of verdicts, and an ORM update each was a sixth of its time."""
    finished = timezone.now()
    fields = {name: Run._meta.get_field(name) for name in ("detail", "finished_at")}
    table = connection.ops.quote_name(Run._meta.db_table)
    sql = (
        f"UPDATE {table} SET status = %s, outcome = %s, duration = %s, detail = %s, error = %s, "
        "finished_at = %s, lease_expires_at = NULL WHERE id = %s AND status = %s AND attempts = %s"
    )
    when = fields["finished_at"].get_db_prep_save(finished, connection)
    by_inspection: dict[int, list[tuple]] = {}
    for run, result in results:
        by_inspection.setdefault(run.inspection_id, []).append(
            (
                Run.DONE,
                result["outcome"],
                float(result.get("seconds") or 0.0),
                fields["detail"].get_db_prep_save(result.get("detail") or {}, connection),
                str(result.get("error") or "")[:2000],
                when,
                run.pk,
                Run.RUNNING,
                run.attempts,
            )
        )
        run.outcome = result["outcome"]
    recorded: dict[int, int] = {}
    with runs_transaction(), connection.cursor() as cursor:
        for inspection_id, rows in by_inspection.items():
            cursor.executemany(sql, rows)
            recorded[inspection_id] = max(0, cursor.rowcount)
    for inspection_id, count in recorded.items():
        if count:
            inspection_progress(inspection_id, count, release=False)
    return sum(recorded.values())


_TYPECODES = {"run_id": "q", "task_key": "q", "response_chars": "q", "correct": "b"}


def _columns(names: list[str]) -> dict[str, Any]:
    return {name: array(_TYPECODES[name]) if name in _TYPECODES else [] for name in names}


def _frame_of(columns: dict[str, Any]) -> Any:
    import numpy as np
    import pandas as pd

    return pd.DataFrame(
        {
            name: (
                np.frombuffer(values, dtype=np.int8).astype(bool)
                if name == "correct"
                else np.frombuffer(values, dtype=np.int64)
                if isinstance(values, array)
                else values
            )
            for name, values in columns.items()
        },
        columns=list(columns),
    )


@dataclass(frozen=True)
class _TaskFigures:
    """What the queue columns take from an answer-graded task's analysis."""

    reference_pass_rate: float | None  # 1.0: the verifier reads the label; 0.0: it cannot
    sample_pass_rate: float | None


@dataclass
class AnswerAnalysisResult:
    findings: list
    stats: dict[int, _TaskFigures]
    harness_findings: list[dict]


def answer_analysis(inspection: Inspection) -> tuple[AnswerAnalysisResult, dict[int, int]]:
    """The inspection's verdicts as the plain tables inspector/detect/answers.py reads, its
    findings, and the runs of each task (for the task's run count)."""
    import pandas as pd
    from django.db.models import OuterRef

    from inspector.detect.answers import PROBE_COLUMNS, VERDICT_COLUMNS, analyse_answers
    from inspector.models import Task, TaskSetVersion

    tasks = pd.DataFrame.from_records(
        list(
            Task.objects.filter(version_id=inspection.version_id)
            .order_by("position")
            .values_list("pk", "task_id", "prompt", "canonical_solution", "corrected_label")
        ),
        columns=["task_key", "task_id", "question", "uploaded", "corrected"],
    )
    if len(tasks):
        tasks["label"] = tasks["corrected"].where(tasks["corrected"] != "", tasks["uploaded"])
    else:
        tasks["label"] = []
    tasks = tasks.drop(columns=["uploaded", "corrected"])
    # Columns, not a tuple a row (1.6 million rows for 100,000 questions): numbers and booleans
    # in typed arrays (8 bytes and 1 a value, no object each), and the strings that repeat
    # (models, statuses, answers) kept once each (sys.intern): each row's JSON gives new copies.
    verdicts = _columns(VERDICT_COLUMNS)
    probes = _columns(PROBE_COLUMNS)
    label_status: dict[int, tuple[str, str]] = {}
    runs_of: dict[int, int] = {}
    rows = (
        Run.objects.filter(inspection_id=inspection.pk)
        .annotate(response_chars=Length("sample__completion"))
        .values_list(
            "pk",
            "task_id",
            "kind",
            "sample__sample_id",
            "sample__model",
            "probe",
            "outcome",
            "detail",
            "response_chars",
        )
    )
    intern = sys.intern
    add_verdict = [verdicts[c].append for c in VERDICT_COLUMNS]
    add_probe = [probes[c].append for c in PROBE_COLUMNS]
    for pk, task_pk, kind, sample_id, model, probe, outcome, detail, chars in rows.iterator(
        chunk_size=5000
    ):
        runs_of[task_pk] = runs_of.get(task_pk, 0) + 1
        detail = detail or {}
        status = intern(
            detail.get("status") or ("sandbox_error" if outcome == "sandbox_error" else "error")
        )
        if kind == Run.REFERENCE:
            label_status[task_pk] = (status, str(detail.get("canonical") or ""))
        elif kind == Run.SAMPLE:
            for add, value in zip(
                add_verdict,
                (
                    pk, task_pk, sample_id, intern(model or ""), status,
                    intern(str(detail.get("extracted") or "")),
                    intern(str(detail.get("canonical") or "")),
                    outcome == "passed", int(chars or 0),
                ),
                strict=True,
            ):  # fmt: skip
                add(value)
        elif kind == Run.PROBE:
            for add, value in zip(
                add_probe,
                (
                    pk, task_pk, intern(probe), status,
                    intern(str(detail.get("extracted") or "")), outcome == "passed",
                ),
                strict=True,
            ):  # fmt: skip
                add(value)
    tasks["label_status"] = [label_status.get(k, ("error", ""))[0] for k in tasks["task_key"]]
    tasks["label_canonical"] = [label_status.get(k, ("", ""))[1] for k in tasks["task_key"]]
    # Other sets' questions (their latest versions), for duplicates across sets.
    latest = TaskSetVersion.objects.filter(
        number=TaskSetVersion.objects.filter(taskset=OuterRef("taskset"))
        .order_by("-number")
        .values("number")[:1]
    ).exclude(taskset_id=inspection.version.taskset_id)
    other_questions = {
        (taskset, task_id): (question, corrected or label)
        for taskset, task_id, question, label, corrected in Task.objects.filter(
            version__in=latest.values("pk"), kind=Task.ANSWER
        ).values_list(
            "version__taskset__name", "task_id", "prompt", "canonical_solution", "corrected_label"
        )
    }
    # The frames go to the analysis with no other reference left here, so it can let them go
    # once it has read them (analyse_answers) instead of holding them to the end.
    frames = [_frame_of(verdicts), _frame_of(probes)]
    del verdicts, probes, add_verdict, add_probe
    analysis = analyse_answers(
        tasks,
        frames.pop(0),
        frames.pop(0),
        harness_share=settings.ANSWER_HARNESS_FINDING_SHARE,
        harness_min_tasks=settings.HARNESS_FINDING_MIN_TASKS,
        other_questions=other_questions,
        distributions=False,
    )
    stats = {}
    for task_pk in tasks["task_key"]:
        task_stats = analysis.stats.get(task_pk)
        status = label_status.get(task_pk, ("", ""))[0]
        stats[task_pk] = _TaskFigures(
            reference_pass_rate=(1.0 if status == "ok" else 0.0) if status else None,
            sample_pass_rate=getattr(task_stats, "sample_pass_rate", None),
        )
    return (
        AnswerAnalysisResult(
            findings=sorted(analysis.findings, key=lambda f: (f.task_key, -f.severity)),
            stats=stats,
            harness_findings=list(analysis.harness_findings),
        ),
        runs_of,
    )
