"""Reads, one module per thing read: the pages, the API and the commands call these instead of
building queries themselves; the services (inspector/services/) hold the writes.

- `tasksets`: the sets with their latest versions and open flags, a version's overview figures;
- `tasks`: one task with its flags and their evidence, its history, trail and files;
- `answer_tasks`: an answer-graded task's label, answer distribution, verdicts and evidence;
- `repo_tasks`: a repository task's lists of tests, each run's swebench-style report, the leak
  scan;
- `inspections`: one inspection, a version's inspections;
- `queue`: the review queue's filter, its tasks and its paginator;
- `export_source`: which finished inspection an export comes from, or why there is none;
- `exports`: the clean tasks, the training manifest, the per-task report and report tables.

A selector changes nothing; between these modules only public names are imported."""

from inspector.selectors.answer_tasks import (
    answer_distribution,
    answer_evidence,
    answer_page,
    answer_probe_verdicts,
)
from inspector.selectors.export_source import (
    ExportSource,
    export_source,
    inspection_progress_text,
)
from inspector.selectors.exports import (
    REPORT_COLUMNS,
    Figures,
    clean_tasks,
    csv_stream,
    inspection_figures,
    manifest_lines,
    parquet_bytes,
    report_lines,
    report_rows,
    report_table_rows,
    terminal_probe_results,
)
from inspector.selectors.inspections import inspection_get, version_inspections
from inspector.selectors.queue import (
    KeysFirstPaginator,
    QueueFilter,
    queue_flag_lines,
    queue_page_tasks,
    queue_tasks,
    reviewer_names,
    user_named,
)
from inspector.selectors.repo_tasks import repo_page
from inspector.selectors.tasks import (
    flag_get,
    task_files,
    task_flags,
    task_flags_with_evidence,
    task_get,
    task_history,
    task_named,
    task_replaced,
    task_trail,
    tasks_by_ids,
)
from inspector.selectors.tasksets import (
    flagged_task_count,
    taskset_exists,
    taskset_latest_version,
    taskset_list,
    taskset_open_flags,
    taskset_rows,
    version_last_finished,
    version_overview,
)

__all__ = [
    "REPORT_COLUMNS",
    "ExportSource",
    "Figures",
    "KeysFirstPaginator",
    "QueueFilter",
    "answer_distribution",
    "answer_evidence",
    "answer_page",
    "answer_probe_verdicts",
    "clean_tasks",
    "csv_stream",
    "export_source",
    "flag_get",
    "flagged_task_count",
    "inspection_figures",
    "inspection_get",
    "inspection_progress_text",
    "manifest_lines",
    "parquet_bytes",
    "queue_flag_lines",
    "queue_page_tasks",
    "queue_tasks",
    "report_lines",
    "report_rows",
    "report_table_rows",
    "repo_page",
    "reviewer_names",
    "task_files",
    "task_flags",
    "task_flags_with_evidence",
    "task_get",
    "task_history",
    "task_named",
    "task_replaced",
    "task_trail",
    "tasks_by_ids",
    "taskset_exists",
    "taskset_latest_version",
    "taskset_list",
    "taskset_open_flags",
    "taskset_rows",
    "terminal_probe_results",
    "user_named",
    "version_inspections",
    "version_last_finished",
    "version_overview",
]
