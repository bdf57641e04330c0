"""Workflows over several rows, one module per workflow. Views, Celery tasks and management
commands call these (through the names below); they hold no logic of their own.

- `tasksets`: importing a task set as a new version, and finding a set's versions;
- `inspections`: starting an inspection, dispatching its runs, scheduled re-inspections;
- `function_runs`: executing function tasks' runs in a sandbox session and recording them;
- `terminal_tasksets`: reading an upload of terminal task folders into the rows to store;
- `terminal_runs`: executing terminal tasks' runs (Docker) and recording them;
- `lifecycle`: counting runs done, sweeping runs whose lease ran out;
- `analysis`: turning an inspection's runs into flags (detect/ does the work);
- `exports`: the clean tasks, the training manifest, the per-task report;
- `review`: the review queue, bulk actions, claims, saved filters;
- `sandboxes`: worker and sandbox control;
- `errors`: ServiceError, what a service refuses with.

Between these modules only public names are imported; work goes to the broker only through
`inspector/enqueue.py`."""

from inspector.services.analysis import inspection_analyse, task_outcomes
from inspector.services.errors import ServiceError
from inspector.services.exports import (
    clean_tasks,
    manifest_lines,
    report_lines,
    terminal_probe_results,
)
from inspector.services.function_runs import (
    run_execute,
    run_limits,
    run_record_error,
    runs_execute,
    sandbox_backend,
)
from inspector.services.inspections import (
    inspection_config,
    inspection_dispatch,
    inspection_start,
    reinspect_due,
)
from inspector.services.lifecycle import inspection_progress, runs_sweep
from inspector.services.sandboxes import sandbox_close, sandbox_sweep, sandbox_warm, workers_alive
from inspector.services.tasksets import task_trail, taskset_import, taskset_latest_version

__all__ = [
    "ServiceError",
    "clean_tasks",
    "inspection_analyse",
    "inspection_config",
    "inspection_dispatch",
    "inspection_progress",
    "inspection_start",
    "manifest_lines",
    "reinspect_due",
    "report_lines",
    "run_execute",
    "run_limits",
    "run_record_error",
    "runs_execute",
    "runs_sweep",
    "sandbox_backend",
    "sandbox_close",
    "sandbox_sweep",
    "sandbox_warm",
    "task_outcomes",
    "task_trail",
    "taskset_import",
    "taskset_latest_version",
    "terminal_probe_results",
    "workers_alive",
]
