"""One run of a terminal task on its image (a trial), in two stages, like Harbor:

1. the agent stage: a fresh container (`sleep infinity` under docker-init, as root, no network,
   the task's memory and CPU limits, a pids limit), in which the reference solution
   (/solution/, run with bash) or a sample or probe script (/agent/run.sh) runs in the image's
   WORKDIR under `agent_timeout_sec`. The tests are not in the container during this stage.
2. the verifier stage: the tests are copied to /tests/ and the task's test script runs under
   `verifier_timeout_sec`. In `faithful` mode it runs in the agent's container, as Harbor and
   Terminal-Bench do: whatever the agent left anywhere (a reward file, a conftest.py in /tests,
   a `python3` on the PATH, a background process) is still there (a container the agent or the
   guard stopped is started again, files as they were). In `isolated` mode only the agent's
   work folder (the image's WORKDIR) is carried, from the agent's container (paused) into a
   fresh container of the same image (prepared while the agent works), where the tests run:
   nothing the agent did outside its work folder survives. Comparing the two modes shows which
   hacks a task's check falls for because of the harness rather than because of its own logic.

Then the reward (rewards.py) gives the run its outcome. The scripts run with bash (harbor runs
them through their shebang). Every container a run made is removed when the run ends, after the
helpers it started meanwhile (the isolated check's container, the agent's removal) are joined.
"""

from __future__ import annotations

import posixpath
import tarfile
import tempfile
import threading
import time

from docker.errors import DockerException, NotFound

from workers.sandbox.terminal.archives import folder_entries, staged_archive, tar
from workers.sandbox.terminal.containers import RunContainers
from workers.sandbox.terminal.engine import ENGINE_ERRORS
from workers.sandbox.terminal.images import ImageBuilder
from workers.sandbox.terminal.rewards import REWARD_JSON, REWARD_TXT, judge
from workers.sandbox.terminal.source import file_bytes, file_mode, positive_number, relative
from workers.sandbox.terminal.stages import (
    GUARD_GRACE_SECONDS,
    REWARD_SETTLE_SECONDS,
    STAGING,
    FilesFailed,
    SwapFailed,
    files_argv,
    no_stage,
    run_stage,
    settle,
)

DEFAULT_AGENT_TIMEOUT = 600.0
DEFAULT_VERIFIER_TIMEOUT = 600.0

VERIFIER_LOG = "/logs/verifier/test-stdout.txt"  # where Harbor sends the test's output
AGENT_LOG_FAITHFUL = "/logs/agent/agent-output.txt"
AGENT_LOG_ISOLATED = "/.inspector-agent-output.txt"  # outside the work folder: never carried


class TrialRunner:
    """Makes the runs of tasks on their images, through one process's client, its images (for
    their WORKDIR) and its run containers. `settings` is the executor: its `output_tail_bytes`
    is read at each stage."""

    def __init__(self, api, images: ImageBuilder, run_containers: RunContainers, settings) -> None:
        self._api = api
        self._images = images
        self._run_containers = run_containers
        self._settings = settings

    def run(self, source, image_tag, solution, script, mode) -> dict:
        """One run (see the module doc; `TerminalExecutor.run` says what it takes and returns):
        a failing engine makes it a sandbox_error, and every container it made is removed."""
        start = time.monotonic()
        result = {
            "outcome": "sandbox_error",
            "reward": None,
            "rewards": None,
            "reason": "",
            "mode": mode,
            "seconds": 0.0,
            "agent": no_stage(),
            "verifier": no_stage(),
        }
        containers: list[str] = []  # every container this run made (threads append to it)
        helpers: list[_Helper] = []
        try:
            self._run(source, image_tag, solution, script, mode, result, containers, helpers)
        except (*ENGINE_ERRORS, tarfile.TarError) as exc:
            result.update(outcome="sandbox_error", reward=None, rewards=None)
            result["reason"] = f"docker: {exc}"
        except SwapFailed as exc:
            result.update(outcome="sandbox_error", reward=None, rewards=None)
            result["reason"] = f"the agent's work folder could not be put in place: {exc}"
        finally:
            for helper in helpers:
                helper.join()
            for container_id in containers:
                self._run_containers.remove(container_id)
        result["seconds"] = round(time.monotonic() - start, 4)
        return result

    def _run(self, source, image_tag, solution, script, mode, result, containers, helpers):
        """Makes the run, filling `result` (outcome, reward, reason and the stages)."""
        api = self._api
        harbor = source.get("format", "harbor") != "terminal-bench"
        by_exit_code = source.get("reward", "file" if harbor else "exit_code") == "exit_code"
        files = source.get("files") or {}
        workdir = self._images.workdir(image_tag)
        if mode == "isolated" and workdir == "/":
            result["outcome"] = "sandbox_error"
            result["reason"] = (
                "isolated mode refused: the image has no WORKDIR (or it is /), so there is no "
                "work folder to carry from the agent's container to the check's"
            )
            return

        # What the agent stage gets.
        agent_files: list[tuple[str, bytes | None, int]] = []
        entry = source.get("solution_entry") or ("solution/solve.sh" if harbor else "solution.sh")
        base = posixpath.dirname(entry)
        if script is not None:
            agent_files.append(("agent/run.sh", script.encode("utf-8", "surrogateescape"), 0o755))
            command = ["bash", "/agent/run.sh"]
        elif solution is not None:
            relative_entry = relative(entry, base)
            if relative_entry not in solution:
                raise ValueError(f"the solution has no {relative_entry} (the task's entry)")
            for path, data in sorted(solution.items()):
                agent_files.append(("solution/" + path.lstrip("/"), data, 0o755))
            command = ["bash", "/solution/" + relative_entry]
        else:
            if entry not in files:
                result.update(outcome="failed", reward=0.0)
                result["reason"] = f"the task has no reference solution ({entry} is missing)"
                return
            for path in source.get("solution_files") or [entry]:
                if path in files:
                    mode_bits = file_mode(files[path], 0o755)
                    data = file_bytes(files[path])
                    agent_files.append(("solution/" + relative(path, base), data, mode_bits))
            command = ["bash", "/solution/" + relative(entry, base)]

        # What the verifier stage gets.
        test_entry = source.get("test_entry") or ("tests/test.sh" if harbor else "run-tests.sh")
        if test_entry not in files:
            result.update(outcome="failed", reward=0.0)
            result["reason"] = f"the task has no test script ({test_entry} is missing)"
            return
        test_files = [
            ("tests/" + relative(path, "tests"), file_bytes(files[path]), file_mode(files[path]))
            for path in (source.get("test_files") or [test_entry])
            if path in files
        ]
        test_command = ["bash", "/tests/" + relative(test_entry, "tests")]
        if not by_exit_code:
            # As harbor does just before its verifier: stale rewards go.
            test_command = [
                "bash",
                "-c",
                f"rm -f -- {REWARD_TXT} {REWARD_JSON}; exec " + " ".join(test_command),
            ]
        test_env = {} if harbor else {"TEST_DIR": "/tests"}

        agent_timeout = positive_number(source.get("agent_timeout_sec"), DEFAULT_AGENT_TIMEOUT)
        verifier_timeout = positive_number(
            source.get("verifier_timeout_sec"), DEFAULT_VERIFIER_TIMEOUT
        )
        host_config = self._run_containers.host_config(source)
        test_folders = {"tests"} | {posixpath.dirname(path) for path, _, _ in test_files}

        prepared = None
        if mode == "isolated":
            # The check's container is created and started while the agent works: a
            # container start is the largest part of a run's cost.
            prepared = _Helper(
                self._run_containers.prepare, image_tag, host_config, None, containers
            )
            helpers.append(prepared)
            prepared.start()

        # 1. The agent stage.
        agent_id = self._run_containers.create(image_tag, host_config, containers)
        folders = {posixpath.dirname(path) for path, _, _ in agent_files}
        if mode == "faithful":  # Harbor mounts /logs/verifier during the agent stage too
            folders |= {"logs/agent", "logs/verifier"}
        api.start(agent_id)
        agent_log = AGENT_LOG_FAITHFUL if mode == "faithful" else AGENT_LOG_ISOLATED
        agent = _with_files(
            api,
            agent_id,
            folder_entries(*sorted(folders)) + agent_files,
            lambda files: run_stage(
                api,
                agent_id,
                command,
                agent_timeout,
                agent_log,
                workdir,
                env={"DEBIAN_FRONTEND": "noninteractive"},
                output_tail_bytes=self._settings.output_tail_bytes,
                files=files,
            ),
        )
        agent.pop("window")
        result["agent"] = agent

        # 2. The verifier stage.
        def verifier_stage(container_id, **options):
            return run_stage(
                api,
                container_id,
                test_command,
                verifier_timeout,
                VERIFIER_LOG,
                workdir,
                env=test_env,
                output_tail_bytes=self._settings.output_tail_bytes,
                read_rewards=not by_exit_code,
                reward_settle_seconds=REWARD_SETTLE_SECONDS if mode == "faithful" else 0.0,
                **options,
            )

        if prepared is None:
            grace = GUARD_GRACE_SECONDS
            by_wrapper_clock = agent["timed_out"] and agent["seconds"] < agent_timeout + grace
            if agent["exit_code"] in (137, -9) and not by_wrapper_clock:
                # Killed, but not by the wrapper's clock: the agent (or the guard) may have
                # ended the container's init, which the engine records a moment after the
                # exec's end.
                settle(api, agent_id)
            # The tests merge into whatever /tests the agent left, as Harbor's copy does.
            verifier_id = agent_id
            verifier = _with_files(
                api,
                verifier_id,
                folder_entries(*sorted(test_folders)) + test_files,
                lambda files: verifier_stage(verifier_id, restart=True, files=files),
            )
        else:
            with tempfile.SpooledTemporaryFile(max_size=16 << 20) as work:
                try:
                    # Frozen, nothing the agent left running changes the folder while it is
                    # copied (a pause costs a fraction of a kill; the removal ends it).
                    api.pause(agent_id)
                except DockerException:
                    pass  # already stopped (the guard, or the agent ended its init)
                try:
                    stream, _ = api.get_archive(agent_id, workdir)
                    for chunk in stream:
                        work.write(chunk)
                    have_work = True
                except NotFound:
                    have_work = False  # the agent removed its work folder
                containers.remove(agent_id)
                removal = _Helper(self._run_containers.remove, agent_id)  # meanwhile
                helpers.append(removal)
                removal.start()
                # The tests, and the agent's work folder staged under STAGING, in one copy.
                folders = sorted(test_folders | {"logs/verifier", STAGING.strip("/")})
                with tempfile.SpooledTemporaryFile(max_size=16 << 20) as copy:
                    work.seek(0)
                    staged_archive(
                        folder_entries(*folders) + test_files,
                        work if have_work else None,
                        STAGING.strip("/") + "/",
                        copy,
                    )
                    verifier_id = prepared.wait()
                    copy.seek(0)
                    api.put_archive(verifier_id, "/", copy)
            staged = STAGING + "/" + posixpath.basename(workdir)
            verifier = verifier_stage(verifier_id, staged=staged)
        window = verifier.pop("window")
        reward_file = verifier.pop("reward_file", None)
        result["verifier"] = verifier

        # 3. The reward.
        judge(
            api,
            result,
            verifier_id,
            by_exit_code,
            agent_timeout,
            verifier_timeout,
            window,
            reward_file=reward_file,
        )


def _with_files(api, container_id, entries, stage) -> dict:
    """`stage(files)`, whose wrapper first writes `entries` (tar-style: name, data or None for a
    folder, mode) into the container: an archive call costs the engine more (see stages.py).
    Entries too large for the wrapper's arguments, or that it could not write (nothing of the
    stage's command ran then), go in by an archive call, merged as Harbor's copy merges."""
    written = files_argv(entries)
    if written is not None:
        try:
            return stage(written)
        except FilesFailed:
            pass
    api.put_archive(container_id, "/", tar(entries))
    return stage(None)


class _Helper(threading.Thread):
    """A part of a run done meanwhile on a thread of its own; wait() returns its result (or
    raises its error). run() joins every helper before removing the run's containers."""

    def __init__(self, function, *args) -> None:
        super().__init__(name="terminal-run-helper", daemon=True)
        self._function = function
        self._args = args
        self._result = None
        self._error: BaseException | None = None

    def run(self) -> None:
        try:
            self._result = self._function(*self._args)
        except BaseException as exc:  # noqa: BLE001 (raised again by wait())
            self._error = exc

    def wait(self):
        self.join()
        if self._error is not None:
            raise self._error
        return self._result


__all__ = [
    "AGENT_LOG_FAITHFUL",
    "AGENT_LOG_ISOLATED",
    "DEFAULT_AGENT_TIMEOUT",
    "DEFAULT_VERIFIER_TIMEOUT",
    "VERIFIER_LOG",
    "TrialRunner",
]
