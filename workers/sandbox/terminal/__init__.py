"""Run Harbor and Terminal-Bench terminal tasks in containers of the local Docker engine.

Plain data in, plain data out: a task is a *source dict* (what `inspector.formats.terminal`
reads from a task folder: its files, timeouts, limits and the paths of its Dockerfile, solution
and tests); a run returns a dict. Nothing here knows Django.

`TerminalExecutor` (executor.py) is the backend; its parts, one module each:

- images.py: `image_for(source)`, the task's image, built from its build context and tagged by
  a hash of it (failed builds remembered, concurrent calls for one context on one build);
- trial.py: `run(source, tag, ...)`, one run in two stages like Harbor (the agent stage, then
  the verifier stage, in the agent's container or, isolated, in a fresh one);
- stages.py: one stage's command in a container under its limit, and the outer guard;
- rewards.py: the reward, read as harbor 0.26.0 reads it, and the run's outcome;
- containers.py: the run containers (limits, owner labels, removal) and `sweep()`;
- source.py, archives.py, engine.py: what is read from a source dict, the tar streams sent to
  the engine, and the engine's client and errors.

The executor is thread-safe: a Celery task can make several runs at once from a thread pool.
"""

from workers.sandbox.terminal.containers import OWNER_LABEL, PIDNS_LABEL, RUN_LABEL, STARTED_LABEL
from workers.sandbox.terminal.executor import TerminalExecutor
from workers.sandbox.terminal.images import BuildResult, build_context, context_hash

__all__ = [
    "OWNER_LABEL",
    "PIDNS_LABEL",
    "RUN_LABEL",
    "STARTED_LABEL",
    "BuildResult",
    "TerminalExecutor",
    "build_context",
    "context_hash",
]
