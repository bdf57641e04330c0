"""Importing a task set as a new version (HumanEval-style JSONL, answer-graded JSONL, terminal
task folders or SWE-bench repository instances), and carrying the review of unchanged tasks
over."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from pathlib import Path
from typing import BinaryIO

from django.conf import settings
from django.db import transaction

from inspector.formats.humaneval import read_taskset
from inspector.models import (
    ReviewEvent,
    Sample,
    Task,
    TaskSet,
    TaskSetVersion,
    file_name,
)
from inspector.services.answer_tasksets import answer_parse, answer_samples, is_answer_upload
from inspector.services.errors import ServiceError
from inspector.services.repo_tasksets import is_repo_upload, repo_parse
from inspector.services.terminal_tasksets import is_terminal_upload, terminal_parse

logger = logging.getLogger(__name__)


TASKSET_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")


def taskset_import(
    *,
    name: str,
    tasks_file: BinaryIO | None = None,
    tasks_name: str,
    tasks_folder: Path | None = None,
    samples_file: BinaryIO | None = None,
    samples_name: str = "",
    environments: Path | BinaryIO | None = None,
    environments_name: str = "",
    terminal_mode: str = "",
    answer_rule: str = "",
    by=None,
) -> TaskSetVersion:
    """Parse an upload whole, then store it as the next version of the named task set.

    The upload is a HumanEval-style JSONL (plain or .gz) of function tasks, a JSONL of
    answer-graded questions (ours, GSM8K's or MATH's lines; `answer_rule` says how the set's
    responses are read), terminal task folders: a folder on disk (`tasks_folder`), a .zip or
    a .tar.gz, or a JSONL of SWE-bench instances with `environments` (an archive or a folder of
    environment folders; not needed when every instance names an `image`) and predictions as
    the samples. Raises TaskSetFormatError (every bad line, with file, line and field) or
    ServiceError; either way nothing is stored."""
    name = name.strip()
    if not TASKSET_NAME_RE.match(name):
        raise ServiceError(
            f"Task-set name {name!r} is not valid: use letters, digits, '.', '_' and '-' "
            "(up to 200 characters, starting with a letter or digit)."
        )
    if terminal_mode and terminal_mode not in (TaskSet.FAITHFUL, TaskSet.ISOLATED):
        raise ServiceError(
            f"Mode {terminal_mode!r} is not one of {TaskSet.FAITHFUL}, {TaskSet.ISOLATED}."
        )
    if answer_rule:
        from inspector.services.answer_runs import GIVEN
        from workers.sandbox.verifier import RULES

        if answer_rule not in (*RULES, GIVEN):
            raise ServiceError(
                f"Answer rule {answer_rule!r} is not one of {', '.join((*RULES, GIVEN))}."
            )
    tasks_input: Path | BinaryIO | None = tasks_folder
    answer = repo = False
    if tasks_input is None:
        if tasks_file is None:
            raise ServiceError("Nothing to import: give a tasks file or a folder of tasks.")
        head = tasks_file.read(4096)
        tasks_file.seek(0)
        if is_terminal_upload(head):
            tasks_input = tasks_file
        elif is_repo_upload(tasks_file):
            repo = True
        else:
            answer = is_answer_upload(tasks_file)
    if environments is not None and not repo:
        raise ServiceError(
            f"{environments_name or 'The environments archive'}: environments go with repository "
            "tasks (a JSONL of SWE-bench instances), and the tasks file is not one."
        )
    # Sample rows, a list read whole, or (answer-graded sets) batches streamed while storing.
    sample_batches: Iterable[list[dict]] = ()
    if repo:
        assert tasks_file is not None
        from inspector.formats.archive import ArchiveError

        try:
            parsed = repo_parse(
                tasks_file=tasks_file,
                tasks_name=tasks_name,
                environments=environments,
                environments_name=environments_name,
                samples_file=samples_file,
                samples_name=samples_name,
            )
        except ArchiveError as exc:
            raise ServiceError(str(exc)) from None
        task_rows, sample_rows = parsed.tasks, parsed.samples
    elif answer:
        assert tasks_file is not None
        task_rows = answer_parse(tasks_file=tasks_file, tasks_name=tasks_name).tasks
        sample_rows = []
        if samples_file is not None:
            sample_batches = answer_samples(
                samples_file,
                samples_name=samples_name,
                task_ids={t["task_id"] for t in task_rows},
                tasks_name=tasks_name,
            )
    elif tasks_input is not None:
        from inspector.formats.archive import ArchiveError

        try:
            parsed = terminal_parse(
                tasks=tasks_input,
                tasks_name=tasks_name,
                samples_file=samples_file,
                samples_name=samples_name,
            )
        except ArchiveError as exc:
            raise ServiceError(str(exc)) from None
        task_rows, sample_rows = parsed.tasks, parsed.samples
    else:
        function_set = read_taskset(
            tasks_file,
            tasks_name=tasks_name,
            samples_file=samples_file,
            samples_name=samples_name,
            max_bytes=settings.UPLOAD_MAX_BYTES,
        )
        task_rows = [
            {
                "task_id": t.task_id,
                "prompt": t.prompt,
                "canonical_solution": t.canonical_solution,
                "test": t.test,
                "entry_point": t.entry_point,
                "domain": t.domain,
                "metadata": t.metadata,
                "source": t.source,
                "content_hash": t.content_hash,
            }
            for t in function_set.tasks
        ]
        sample_rows = [
            {
                "task_id": s.task_id,
                "sample_id": s.sample_id,
                "completion": s.completion,
                "model": s.model,
            }
            for s in function_set.samples
        ]
    with transaction.atomic():
        taskset, _ = TaskSet.objects.get_or_create(name=name, defaults={"created_by": by})
        taskset = TaskSet.objects.select_for_update().get(pk=taskset.pk)
        if terminal_mode and taskset.terminal_mode != terminal_mode:
            taskset.terminal_mode = terminal_mode
            taskset.save(update_fields=("terminal_mode",))
        if answer_rule and taskset.answer_rule != answer_rule:
            taskset.answer_rule = answer_rule
            taskset.save(update_fields=("answer_rule",))
        last = taskset.versions.order_by("-number").values_list("number", flat=True).first()
        version = TaskSetVersion.objects.create(
            taskset=taskset,
            number=(last or 0) + 1,
            created_by=by,
            # The name the uploader knows; a command's import gives the path it read on the
            # server, which the pages have no business showing.
            tasks_filename=file_name(tasks_name)[:300],
            samples_filename=file_name(samples_name)[:300],
            environments_filename=file_name(environments_name)[:300] if environments else "",
            task_count=len(task_rows),
            sample_count=len(sample_rows),
        )
        # The queue lists the latest version's tasks by an indexed column of their own.
        Task.objects.filter(version__taskset=taskset, in_latest_version=True).update(
            in_latest_version=False
        )
        tasks = Task.objects.bulk_create(
            [Task(version=version, position=i, **row) for i, row in enumerate(task_rows)],
            batch_size=500,
        )
        pk_of = {t.task_id: t.pk for t in tasks}
        stored = 0
        for batch in [sample_rows] if sample_rows else sample_batches:
            Sample.objects.bulk_create(
                [
                    Sample(
                        task_id=pk_of[s["task_id"]],
                        sample_id=s["sample_id"],
                        position=stored + i,
                        completion=s["completion"],
                        model=s.get("model", ""),
                        answer=s.get("answer", ""),
                    )
                    for i, s in enumerate(batch)
                ],
                batch_size=500,
            )
            stored += len(batch)
        if stored != version.sample_count:
            version.sample_count = stored
            version.save(update_fields=("sample_count",))
        _carry_review_over(version, tasks, by=by)
    logger.info(
        "imported task set %s v%s: %s tasks, %s samples",
        name,
        version.number,
        version.task_count,
        version.sample_count,
    )
    return version


def _carry_review_over(version: TaskSetVersion, tasks: list[Task], *, by) -> None:
    """A new version keeps the review of its task ids: a task quarantined in the previous version
    stays quarantined when it came back unchanged (same content hash); one that changed comes
    back active, with a line in its trail saying it replaces a quarantined task and can be
    inspected again. Each task page shows the trail of its task id across versions."""
    previous = (
        TaskSetVersion.objects.filter(taskset_id=version.taskset_id, number__lt=version.number)
        .order_by("-number")
        .first()
    )
    if previous is None:
        return
    quarantined = {
        task_id: (content_hash, reason)
        for task_id, content_hash, reason in previous.tasks.filter(
            status=Task.QUARANTINED
        ).values_list("task_id", "content_hash", "quarantine_reason")
    }
    events = []
    for task in tasks:
        before = quarantined.get(task.task_id)
        if before is None:
            continue
        content_hash, reason = before
        if content_hash == task.content_hash:
            Task.objects.filter(pk=task.pk).update(
                status=Task.QUARANTINED, quarantine_reason=reason
            )
            note = f"unchanged since v{previous.number}, where it was quarantined: {reason}"
            events.append(
                ReviewEvent(task=task, actor=by, action=ReviewEvent.QUARANTINE, note=note)
            )
        else:
            note = (
                f"replaces v{previous.number}'s quarantined task ({reason}) with changed "
                "content: inspect again to re-check it"
            )
            events.append(
                ReviewEvent(task=task, actor=by, action=ReviewEvent.NEW_VERSION, note=note)
            )
    ReviewEvent.objects.bulk_create(events)
