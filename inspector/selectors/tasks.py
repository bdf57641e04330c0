"""One task as its page and the API show it: the task with the rows it joins, its current flags
with the runs they rest on, its inspections' history, its audit trail and its folder's files."""

from __future__ import annotations

from django.db.models import QuerySet

from inspector.models import Flag, Inspection, ReviewEvent, Run, Task, TaskSetVersion

# A flag shows this many of its evidence runs; the page says how many more there are.
EVIDENCE_SHOWN = 12


def task_get(pk: int) -> Task | None:
    return (
        Task.objects.select_related("version__taskset", "claimed_by", "assignee")
        .filter(pk=pk)
        .first()
    )


def tasks_by_ids(ids) -> QuerySet[Task]:
    return Task.objects.filter(pk__in=list(ids))


def flag_get(pk: int) -> Flag | None:
    return Flag.objects.select_related("task").filter(pk=pk).first()


def task_flags(task: Task) -> QuerySet[Flag]:
    """The flags of the task's latest inspection."""
    return task.flags.filter(inspection_id=task.last_inspection_id).select_related("reviewed_by")


def task_flags_with_evidence(task: Task) -> list[Flag]:
    """The latest inspection's flags, each with `evidence_runs` (the first EVIDENCE_SHOWN runs it
    rests on, with their samples) and `evidence_more` (how many it does not show). A
    `duplicate` flag also gets `other_task` (the task it resembles, where it still exists) and
    `prompt_diff` (a unified diff of the two prompts)."""
    flags = list(task_flags(task))
    evidence_ids = {run_id for flag in flags for run_id in flag.evidence_run_ids}
    runs = {run.pk: run for run in Run.objects.filter(pk__in=evidence_ids).select_related("sample")}
    for flag in flags:
        flag.evidence_runs = [runs[i] for i in flag.evidence_run_ids if i in runs][:EVIDENCE_SHOWN]
        flag.evidence_more = max(0, len(flag.evidence_run_ids) - EVIDENCE_SHOWN)
        if flag.code == "duplicate":
            flag.other_task = _duplicate_of(task, flag.evidence or {})
            flag.prompt_diff = _prompt_diff(task, flag.other_task)
    return flags


def _duplicate_of(task: Task, evidence: dict) -> Task | None:
    """The task a duplicate flag names: in the task's own version, or in the latest version of
    the other set it names."""
    other = evidence.get("other")
    if not other:
        return None
    taskset = evidence.get("other_taskset")
    if taskset is None and str(evidence.get("where", "")).startswith("in task set "):
        taskset = str(evidence["where"])[len("in task set ") :]
    if taskset is None:
        return task.version.tasks.filter(task_id=other).first()
    return (
        Task.objects.filter(version__taskset__name=taskset, task_id=other)
        .select_related("version__taskset")
        .order_by("-version__number")
        .first()
    )


def _prompt_diff(task: Task, other: Task | None) -> str:
    if other is None:
        return ""
    import difflib

    lines = difflib.unified_diff(
        task.prompt.splitlines(),
        other.prompt.splitlines(),
        fromfile=f"{task.task_id} (this task)",
        tofile=f"{other.task_id} ({other.version})",
        lineterm="",
        n=2,
    )
    return "\n".join(lines)


def task_history(task: Task, *, inspections: int = 10) -> list[dict]:
    """The task's last inspections, newest first: each with the task's runs and flags in it."""
    rows = (
        Inspection.objects.filter(runs__task=task)
        .distinct()
        .order_by("-id")
        .prefetch_related("flags")
    )
    return [
        {
            "inspection": inspection,
            "runs": Run.objects.filter(inspection=inspection, task=task).select_related("sample"),
            "flags": [f for f in inspection.flags.all() if f.task_id == task.pk],
        }
        for inspection in rows[:inspections]
    ]


def task_trail(task: Task) -> QuerySet[ReviewEvent]:
    """The audit trail of the task's id across every version of its set, newest first."""
    return (
        ReviewEvent.objects.filter(
            task__version__taskset_id=task.version.taskset_id, task__task_id=task.task_id
        )
        .select_related("actor", "flag", "task__version")
        .order_by("-created_at", "-id")
    )


def task_replaced(task: Task) -> bool:
    """Whether the task came from an earlier version, whose review it carries."""
    return task.events.filter(action=ReviewEvent.NEW_VERSION).exists()


def task_files(task: Task) -> list[dict]:
    """A terminal task's folder as the page lists it: path, size, and the text of text files."""
    if task.kind != Task.TERMINAL:
        return []
    rows = []
    for path, entry in sorted((task.source.get("files") or {}).items()):
        text = entry.get("text")
        rows.append(
            {
                "path": path,
                "text": text,
                "size": len(text.encode())
                if text is not None
                else len(entry.get("base64", "")) * 3 // 4,
            }
        )
    return rows


def task_named(*, version: TaskSetVersion, task_id: str) -> Task | None:
    """The task of that id in a version, with the rows its page joins."""
    return (
        version.tasks.select_related("version__taskset", "claimed_by", "assignee")
        .filter(task_id=task_id)
        .first()
    )
