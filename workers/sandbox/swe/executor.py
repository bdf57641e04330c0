"""`SweExecutor`, the repository runs' backend: one process's client and the parts made with it
(the terminal runs' image builds and run containers, reused as they are; the runs of run.py;
the leak scan of leaks.py), made again in a forked child. Thread-safe, like TerminalExecutor."""

from __future__ import annotations

import os

from workers.sandbox.swe.leaks import LeakScanner
from workers.sandbox.swe.run import SweRunner
from workers.sandbox.terminal.containers import OWNERS, RunContainers
from workers.sandbox.terminal.engine import connect
from workers.sandbox.terminal.images import BuildResult, ImageBuilder

MODES = ("faithful", "isolated")


class SweExecutor:
    """Builds SWE-bench instances' images and runs solutions and their tests; see the package
    doc."""

    def __init__(
        self,
        client=None,
        *,
        build_network: str = "none",
        pids_limit: int = 512,
        output_tail_bytes: int = 4096,
        keep_failed_builds_seconds: float = 600,
        default_memory_mb: int | None = 2048,
        carry_max_bytes: int = 512 << 20,
    ) -> None:
        self.build_network = build_network
        self.run_network = "none"  # repository runs never have a network
        self.pids_limit = pids_limit
        self.output_tail_bytes = output_tail_bytes
        self.keep_failed_builds_seconds = keep_failed_builds_seconds
        self.default_memory_mb = default_memory_mb
        self.carry_max_bytes = carry_max_bytes
        self._given = client
        self._init_process()

    def _init_process(self) -> None:
        self._pid = os.getpid()
        self._api = connect(self._given)
        self._images = ImageBuilder(self._api, self)
        self._labels = OWNERS.for_process(self._pid)
        self._run_containers = RunContainers(self._api, self._labels, self)
        self._runs = SweRunner(self._api, self._images, self._run_containers, self)
        self._leaks = LeakScanner(self._api, self._images, self._run_containers, self)

    def _check_fork(self) -> None:
        if self._pid != os.getpid():
            self._init_process()  # a parent's connections and locks are the parent's

    @property
    def api(self):
        self._check_fork()
        return self._api

    def image_for(self, source: dict) -> BuildResult:
        """The instance's image: built from its environment folder (the source's files and
        Dockerfile) when its tag (a hash of them) is not on the engine, or the existing
        `docker_image` it names; never pulled. A failed build (its log in BuildResult.log) is
        remembered for keep_failed_builds_seconds."""
        self._check_fork()
        return self._images.image_for(source)

    def run(
        self,
        source: dict,
        image_tag: str,
        *,
        patch: str | None = None,
        script: str | None = None,
        tests: bool = True,
        mode: str = "isolated",
    ) -> dict:
        """One run (run.py's module doc says how): no fix (neither `patch` nor `script`), a
        unified diff `patch`, or a bash `script` run in the work folder; then, with `tests`,
        the instance's tests, `mode` "isolated" or "faithful".

        Returns {"outcome", "resolved", "swebench_resolved", "tests", "report", "apply",
        "collection_error", "agent", "verifier", "seconds", "reason", "mode",
        "restored_config"}. `outcome`: "resolved" (every FAIL_TO_PASS and PASS_TO_PASS test
        passed) | "unresolved" | "apply_failed" (the patch applies no way: the tests did not
        run) | "broken" (the tests could not be collected or run: `collection_error` says why,
        with pytest's words) | "timed_out" | "sandbox_error" (the engine failed: `reason`) |
        "not_tested" (tests=False). `tests`: id -> "passed" | "failed" | "error" | "skipped"
        | "missing" (listed, but not in pytest's report). `report`: swebench's report.json
        lists; `resolved`: "full" | "partial" | "no" (report.py: only a pass succeeds);
        `swebench_resolved`: swebench's own verdict (skips left out). `apply`: {"ok",
        "method", "output_tail"}. `agent`, `verifier`: {"exit_code", "seconds", "timed_out",
        "output_tail"}. `restored_config`: isolated mode's test configuration files put back
        to the base version. Raises ValueError for a bad call."""
        if mode not in MODES:
            raise ValueError(f"mode must be 'faithful' or 'isolated', not {mode!r}")
        if patch is not None and script is not None:
            raise ValueError("give a patch or a script, not both")
        self._check_fork()
        return self._runs.run(source, image_tag, patch, script, tests, mode)

    def leak_scan(self, source: dict, image_tag: str) -> dict:
        """Whether the gold patch's result is in the image's repository (leaks.py)."""
        self._check_fork()
        return self._leaks.scan(source, image_tag)

    def sweep(self, older_than_seconds: float = 0, *, all_of_this_host: bool = False) -> int:
        """Remove the run containers left behind (those of terminal runs too: one label)."""
        self._check_fork()
        return self._run_containers.sweep(older_than_seconds, all_of_this_host=all_of_this_host)


__all__ = ["MODES", "SweExecutor"]
