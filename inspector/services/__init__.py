"""Workflows over several rows, one module per workflow. Views, Celery tasks and management
commands call these (through the names below); they hold no logic of their own.

- `tasksets`: importing a task set as a new version;
- `inspections`: starting an inspection, preparing it (its runs, in a worker), dispatching its
  runs, scheduled re-inspections;
- `function_runs`: executing function tasks' runs in a sandbox session and recording them;
- `terminal_tasksets`: reading an upload of terminal task folders into the rows to store;
- `answer_tasksets`: reading an upload of answer-graded questions into the rows to store;
- `repo_tasksets`: reading an upload of SWE-bench instances, their environments and
  predictions into the rows to store;
- `terminal_runs`: executing terminal tasks' runs (Docker) and recording them;
- `repo_runs`: the runs of repository tasks (SWE-bench instances), executing them in Docker,
  recording them, and reading them back for the analysis;
- `lifecycle`: counting runs done, sweeping runs whose lease ran out and inspections that
  stalled (beat's sweep and each worker's own), a stopping worker handing back the runs it has not started;
- `analysis`: turning an inspection's runs into flags (detect/ does the work);
- `review`: bulk actions on the review queue's tasks, saved filters;
- `sandboxes`: worker and sandbox control;
- `errors`: ServiceError (and NotFound, Conflict), what a service refuses with.

Reads (what the pages, the API and the exports show) are in `inspector/selectors/`. Between these
modules only public names are imported; work goes to the broker only through
`inspector/enqueue.py`."""

from inspector.services.analysis import inspection_analyse, task_outcomes
from inspector.services.errors import Conflict, NotFound, ServiceError
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
    inspection_prepare,
    inspection_start,
    reinspect_due,
)
from inspector.services.lifecycle import (
    RunsSweeper,
    inspection_progress,
    runs_hand_back,
    runs_send_again,
    runs_sweep,
    runs_sweeper_start,
    worker_stop_request,
    worker_stopping,
)
from inspector.services.sandboxes import sandbox_close, sandbox_sweep, sandbox_warm, workers_alive
from inspector.services.tasksets import taskset_import

__all__ = [
    "Conflict",
    "NotFound",
    "RunsSweeper",
    "ServiceError",
    "inspection_analyse",
    "inspection_config",
    "inspection_dispatch",
    "inspection_prepare",
    "inspection_progress",
    "inspection_start",
    "reinspect_due",
    "run_execute",
    "run_limits",
    "run_record_error",
    "runs_execute",
    "runs_hand_back",
    "runs_send_again",
    "runs_sweep",
    "runs_sweeper_start",
    "sandbox_backend",
    "sandbox_close",
    "sandbox_sweep",
    "sandbox_warm",
    "task_outcomes",
    "taskset_import",
    "worker_stop_request",
    "worker_stopping",
    "workers_alive",
]
