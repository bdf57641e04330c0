"""`TerminalExecutor`, the terminal runs' backend: it holds one process's client and the parts
made with it (the builds of images.py, the run containers of containers.py, the trials of
trial.py), makes them again in a forked child, and offers `image_for`, `run` and `sweep`.

The executor is thread-safe: a Celery task can make several runs at once from a thread pool.
"""

from __future__ import annotations

import os

from workers.sandbox.terminal.containers import OWNERS, RunContainers
from workers.sandbox.terminal.engine import connect
from workers.sandbox.terminal.images import BuildResult, ImageBuilder
from workers.sandbox.terminal.trial import TrialRunner


class TerminalExecutor:
    """Builds terminal tasks' images and runs their agents and checks; see the package doc."""

    def __init__(
        self,
        client=None,
        *,
        build_network: str = "none",
        run_network: str = "none",
        pids_limit: int = 256,
        output_tail_bytes: int = 4096,
        keep_failed_builds_seconds: float = 600,
        default_memory_mb: int | None = 2048,
    ) -> None:
        self.build_network = build_network
        self.run_network = run_network
        self.pids_limit = pids_limit
        self.output_tail_bytes = output_tail_bytes
        self.keep_failed_builds_seconds = keep_failed_builds_seconds
        self.default_memory_mb = default_memory_mb
        self._given = client
        self._init_process()

    def _init_process(self) -> None:
        """State of this process: a client (ours unless given), and the parts made with it
        (their locks and caches). The parts read the settings above from the executor."""
        self._pid = os.getpid()
        self._api = connect(self._given)
        self._images = ImageBuilder(self._api, self)
        self._labels = OWNERS.for_process(self._pid)
        self._run_containers = RunContainers(self._api, self._labels, self)
        self._trials = TrialRunner(self._api, self._images, self._run_containers, self)

    def _check_fork(self) -> None:
        if self._pid != os.getpid():
            self._init_process()  # a parent's connections and locks are the parent's

    @property
    def api(self):
        self._check_fork()
        return self._api

    def image_for(self, source: dict) -> BuildResult:
        """The task's image, built when its tag (a hash of the build context) is not on the
        engine; a failed build is remembered for keep_failed_builds_seconds."""
        self._check_fork()
        return self._images.image_for(source)

    def run(
        self,
        source: dict,
        image_tag: str,
        *,
        solution: dict[str, bytes] | None = None,
        script: str | None = None,
        mode: str = "faithful",
    ) -> dict:
        """One run: an agent stage, a verifier stage, the reward; see the package doc.

        - neither `solution` nor `script`: the task's reference solution (its solution files in
          /solution/, the entry run with bash);
        - `solution`: another solution in the reference's layout (paths relative to /solution/,
          e.g. {"solve.sh": b"..."} for Harbor, {"solution.sh": b"..."} for Terminal-Bench),
          run through the same entry; the reference's files are not in the container;
        - `script`: a sample's or probe's bash script, at /agent/run.sh, run with bash.

        Returns {"outcome", "reward", "rewards", "reason", "mode", "seconds", "agent",
        "verifier"}; each stage is {"exit_code", "seconds", "timed_out", "output_tail"}.
        Harbor: `rewards` is reward.txt as {"reward": value}, else reward.json's object;
        `reward` is its "reward" value (else the mean of its values); the run passes iff every
        value is at least 1. Terminal-Bench: `reward` is 1.0 iff the test script exits 0,
        `rewards` is None. `outcome` is "timed_out" when the tests passed their timeout, or
        when the agent passed its timeout and the check did not pass; "sandbox_error" when the
        engine failed (the reason holds its message), or when isolated mode is refused (the
        image's WORKDIR is / : the reason starts with "isolated mode refused"). Raises
        ValueError for a bad call (an unknown mode, both a solution and a script, a solution
        without the task's entry).
        """
        if mode not in ("faithful", "isolated"):
            raise ValueError(f"mode must be 'faithful' or 'isolated', not {mode!r}")
        if solution is not None and script is not None:
            raise ValueError("give a solution or a script, not both")
        self._check_fork()
        return self._trials.run(source, image_tag, solution, script, mode)

    def sweep(self, older_than_seconds: float = 0, *, all_of_this_host: bool = False) -> int:
        """Remove the run containers left behind: this process's that no run uses, and
        those of this host's gone processes (same pid namespace). With `all_of_this_host`,
        those of live processes of this host too (for a machine where no other worker runs).
        Returns how many were removed."""
        self._check_fork()
        return self._run_containers.sweep(older_than_seconds, all_of_this_host=all_of_this_host)


__all__ = ["TerminalExecutor"]
