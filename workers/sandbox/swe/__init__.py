"""Run SWE-bench repository tasks in containers of the local Docker engine.

Plain data in, plain data out: an instance is a *source dict* (what `inspector.formats.swe`
makes of a SWE-bench line and its environment folder: base commit, gold patch, test patch, the
FAIL_TO_PASS and PASS_TO_PASS ids, the environment's files and Dockerfile, limits); a run returns
a dict. Nothing here knows Django.

`SweExecutor` (executor.py) is the backend. It reuses the terminal runs' parts as they are (the
image builds of terminal/images.py, the run containers, their owner labels and sweep, a stage's
command under its limit); its own parts, one module each:

- run.py: one run: no fix, a patch applied like the swebench harness, or a probe's script; then
  the test files restored and the tests run, in the agent's container (faithful) or in a fresh
  one that gets only the working tree's changes (isolated);
- carry.py: isolated mode's carry of the working tree's changes, read through the engine;
- scripts.py: the bash the containers run (applying a patch, the test stage);
- junit.py: pytest's JUnit XML read into an outcome per test id;
- report.py: swebench's report.json lists and resolved status (full / partial / no);
- leaks.py: the leak scan, the gold patch's result looked for in the repository's history;
- patches.py: the paths a diff touches, and which are test configuration.
"""

from workers.sandbox.swe.executor import MODES, SweExecutor
from workers.sandbox.swe.junit import JunitError, JunitReport, case_key
from workers.sandbox.swe.patches import CONFIG_NAMES, is_config
from workers.sandbox.swe.report import resolved_status, swebench_resolved_status

__all__ = [
    "CONFIG_NAMES",
    "MODES",
    "JunitError",
    "JunitReport",
    "SweExecutor",
    "case_key",
    "is_config",
    "resolved_status",
    "swebench_resolved_status",
]
