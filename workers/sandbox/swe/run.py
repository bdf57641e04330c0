"""One run of a repository task (a SWE-bench instance) on its image: a solution, then the tests.

1. The agent stage, in a fresh container of the instance's image (`sleep infinity` under
   docker-init, as root, no network, the instance's memory and CPU limits, a pids limit):
   - a patch is applied in the work folder the way the swebench harness applies one
     (scripts.APPLY); one that applies no way ends the run as `apply_failed`. An empty patch
     applies as nothing (the tests still run: that is the empty-patch probe);
   - a script (a probe's) runs with bash as /agent/run.sh in the work folder, under the
     instance's timeout;
   - no solution at all (no fix): there is no agent stage.
2. The test stage (scripts.eval_script): the test files, every file the test_patch touches, are
   restored to the base commit's version and the test_patch applied, as the harness does after
   a solution; then the test command runs with --junitxml (to a file outside the work folder) on
   the files of the FAIL_TO_PASS and PASS_TO_PASS ids, and the report is read per test id
   (junit.py). `faithful` mode runs it in the agent's container, as the swebench harness does.
   `isolated` mode carries only the working tree's changes (carry.py; never .git) into a fresh
   container of the same image (created while the agent works), restores there the test files
   and every test configuration file the solution added, changed or deleted (conftest.py,
   pytest.ini, tox.ini, setup.cfg, pyproject.toml, sitecustomize.py, usercustomize.py, *.pth) to
   the base version, removes .git, and runs the tests: nothing the solution did outside the
   working tree survives, and neither does a hook it planted in the test configuration.

Every container a run made is removed when it ends.
"""

from __future__ import annotations

import io
import os
import posixpath
import tarfile
import threading
import time

from docker.errors import DockerException, NotFound

from workers.sandbox.swe import junit, report
from workers.sandbox.swe.carry import CarryTooLarge, carry
from workers.sandbox.swe.patches import touched
from workers.sandbox.swe.scripts import (
    APPLIED_BY,
    APPLY,
    NO_TEST_FILES,
    NO_WORKDIR,
    RESTORE_FAILED,
    eval_script,
)
from workers.sandbox.terminal.archives import folder_entries, tar
from workers.sandbox.terminal.containers import RunContainers
from workers.sandbox.terminal.engine import ENGINE_ERRORS, tail
from workers.sandbox.terminal.images import ImageBuilder
from workers.sandbox.terminal.source import positive_number
from workers.sandbox.terminal.stages import no_stage, run_stage

DEFAULT_TIMEOUT = 900.0
APPLY_TIMEOUT = 120.0
DEFAULT_TEST_COMMAND = "python3 -m pytest -p no:cacheprovider"
AGENT_SCRIPT = "/agent/run.sh"  # where the probes' guard expects to be run from
PYTEST_EXITS = {
    2: "the test run was interrupted (pytest exit 2: errors during collection)",
    3: "pytest hit an internal error (exit 3)",
    4: "pytest was called wrongly (exit 4: a usage error)",
    5: "pytest collected no tests (exit 5)",
}


def _safe(path: str) -> bool:
    parts = path.split("/")
    return bool(path) and not path.startswith("/") and ".." not in parts and "" not in parts


def _unique(items) -> list[str]:
    return list(dict.fromkeys(items))


def test_files_of(test_ids: list[str]) -> list[str]:
    """The files the test ids are in (the part before the first "::"), in order, once."""
    return _unique(t.split("::", 1)[0] for t in test_ids if _safe(t.split("::", 1)[0]))


class SweRunner:
    """Makes repository runs through one process's client, its images (for their WORKDIR) and
    its run containers. `settings` is the executor: its `output_tail_bytes` and
    `carry_max_bytes` are read at each run."""

    def __init__(self, api, images: ImageBuilder, run_containers: RunContainers, settings) -> None:
        self._api = api
        self._images = images
        self._run_containers = run_containers
        self._settings = settings

    def run(self, source, image_tag, patch, script, tests, mode) -> dict:
        start = time.monotonic()
        f2p = _unique(source.get("FAIL_TO_PASS") or [])
        p2p = _unique(source.get("PASS_TO_PASS") or [])
        result = {
            "outcome": "sandbox_error",
            "resolved": "no",
            "swebench_resolved": "no",
            "tests": {},
            "report": report.report(f2p, p2p, {}),
            "apply": {"ok": False, "method": "", "output_tail": ""},
            "collection_error": "",
            "agent": no_stage(),
            "verifier": no_stage(),
            "seconds": 0.0,
            "reason": "",
            "mode": mode,
            "restored_config": [],
        }
        containers: list[str] = []
        helpers: list[_Background] = []
        try:
            self._run(
                source, image_tag, patch, script, tests, mode, f2p, p2p, result, containers, helpers
            )
        except (*ENGINE_ERRORS, tarfile.TarError) as exc:
            result.update(outcome="sandbox_error", resolved="no", swebench_resolved="no")
            result["reason"] = f"docker: {exc}"
        except CarryTooLarge as exc:
            result.update(outcome="unresolved", resolved="no", swebench_resolved="no")
            result["reason"] = str(exc)
        finally:
            for helper in helpers:
                helper.join()
            for container_id in containers:
                self._run_containers.remove(container_id)
        result["seconds"] = round(time.monotonic() - start, 4)
        return result

    def _run(
        self, source, image_tag, patch, script, tests, mode, f2p, p2p, result, containers, helpers
    ) -> None:
        api = self._api
        settings = self._settings
        workdir = posixpath.normpath(source.get("workdir") or self._images.workdir(image_tag))
        if workdir in ("/", "."):
            result["reason"] = "the instance has no work folder (workdir is /)"
            return
        base_commit = source.get("base_commit") or "HEAD"
        test_patch = source.get("test_patch") or ""
        timeout = positive_number(source.get("timeout_sec"), DEFAULT_TIMEOUT)
        host_config = self._run_containers.host_config(source)
        ours = f"/.inspector-swe-{os.urandom(6).hex()}"  # outside the work folder
        junit_path = f"{ours}/report.xml"
        our_files = [
            (f"{ours.lstrip('/')}/test.patch", test_patch.encode("utf-8", "surrogateescape"), 0o644)
        ]
        has_agent = patch is not None or script is not None
        isolated = mode == "isolated" and has_agent

        prepared = None
        if isolated and tests:
            # The check's container, made while the agent works (a start is most of a run's cost).
            prepared = _Background(
                self._run_containers.prepare,
                image_tag,
                host_config,
                tar(folder_entries(ours) + our_files),
                containers,
            )
            helpers.append(prepared)
            prepared.start()

        agent_id = self._run_containers.create(image_tag, host_config, containers)
        agent_files: list[tuple[str, bytes, int]] = []  # never the test patch
        command = None
        if patch is not None and patch.strip():
            paths = [p for p in touched(patch) if _safe(p)]
            agent_files.append(
                (
                    f"{ours.lstrip('/')}/solution.patch",
                    patch.encode("utf-8", "surrogateescape"),
                    0o644,
                )
            )
            agent_files.append((f"{ours.lstrip('/')}/apply.sh", APPLY.encode(), 0o755))
            command = [
                "bash",
                f"{ours}/apply.sh",
                f"{ours}/solution.patch",
                f"{ours}/before.tar",
                *paths,
            ]
            limit, log = APPLY_TIMEOUT, f"{ours}/apply.log"
        elif script is not None:
            agent_files.append(
                (AGENT_SCRIPT.lstrip("/"), script.encode("utf-8", "surrogateescape"), 0o755)
            )
            command = ["bash", AGENT_SCRIPT]
            limit, log = timeout, f"{ours}/agent.log"
        if agent_files:
            folders = {posixpath.dirname(path) for path, _, _ in agent_files}
            api.put_archive(agent_id, "/", tar(folder_entries(*sorted(folders)) + agent_files))
        api.start(agent_id)

        if command is not None:
            agent = run_stage(
                api,
                agent_id,
                command,
                limit,
                log,
                workdir,
                env={"DEBIAN_FRONTEND": "noninteractive"},
                output_tail_bytes=settings.output_tail_bytes,
            )
            agent.pop("window")
            result["agent"] = agent
        if patch is not None:
            if command is None:
                result["apply"] = {"ok": True, "method": "empty patch", "output_tail": ""}
            else:
                method = APPLIED_BY.get(result["agent"]["exit_code"])
                result["apply"] = {
                    "ok": method is not None,
                    "method": method or "",
                    "output_tail": result["agent"]["output_tail"],
                }
                if method is None:
                    result["outcome"] = "apply_failed"
                    result["reason"] = (
                        "the patch does not apply (git apply, git apply --reject and "
                        "patch --fuzz=5 all failed)"
                        if not result["agent"]["timed_out"]
                        else f"applying the patch passed {APPLY_TIMEOUT:g} s"
                    )
                    return
        elif script is not None:
            result["apply"] = {"ok": True, "method": "script", "output_tail": ""}
        else:
            result["apply"] = {"ok": True, "method": "no fix", "output_tail": ""}
        if not tests:
            result["outcome"] = "not_tested"
            return

        # The test stage.
        restore = [p for p in touched(test_patch) if _safe(p)]
        deleted: list[str] = []
        if isolated:
            try:
                api.pause(agent_id)  # frozen, nothing it left running changes the tree
            except DockerException:
                pass  # already stopped
            carried = carry(api, agent_id, workdir, settings.carry_max_bytes)
            containers.remove(agent_id)
            removal = _Background(self._run_containers.remove, agent_id)
            helpers.append(removal)
            removal.start()
            check_id = prepared.wait()
            if carried.archive is not None:
                with carried.archive:
                    api.put_archive(check_id, "/", carried.archive)
            deleted = carried.deleted
            restore = _unique(restore + carried.config)
            result["restored_config"] = carried.config
        else:
            check_id = agent_id
        script_text = eval_script(
            workdir=workdir,
            base_commit=base_commit,
            test_patch_path=f"{ours}/test.patch",
            junit_path=junit_path,
            test_command=source.get("test_command") or DEFAULT_TEST_COMMAND,
            test_files=test_files_of(f2p + p2p),
            restore=restore,
            deleted=deleted,
            remove_git=mode == "isolated",
        )
        eval_files = our_files + [(f"{ours.lstrip('/')}/eval.sh", script_text.encode(), 0o755)]
        api.put_archive(check_id, "/", tar(folder_entries(ours) + eval_files))
        verifier = run_stage(
            api,
            check_id,
            ["bash", f"{ours}/eval.sh"],
            timeout,
            f"{ours}/test-output.txt",
            workdir,
            env={},
            output_tail_bytes=settings.output_tail_bytes,
            restart=not isolated,
        )
        verifier.pop("window")
        result["verifier"] = verifier
        self._judge(result, check_id, junit_path, f2p, p2p)

    def _judge(self, result, container_id, junit_path, f2p, p2p) -> None:
        """The outcome from the test stage and its report."""
        verifier = result["verifier"]
        code = verifier["exit_code"]
        output = verifier["output_tail"]
        parsed, problem = None, ""
        if code in (NO_TEST_FILES, NO_WORKDIR, RESTORE_FAILED):
            problem = output.strip().splitlines()[0] if output.strip() else f"exit {code}"
        else:
            try:
                parsed = junit.parse(self._read(container_id, junit_path))
            except FileNotFoundError:
                problem = f"the test command wrote no report (exit {code})"
            except junit.JunitError as exc:
                problem = f"the test report cannot be read: {exc}"
        tests = junit.outcomes(f2p + p2p, parsed or junit.JunitReport())
        result["tests"] = tests
        result["report"] = report.report(f2p, p2p, tests)
        result["resolved"] = report.resolved_status(result["report"])
        result["swebench_resolved"] = report.swebench_resolved_status(f2p, p2p, tests)
        collection = ""
        if problem:
            collection = problem + ("\n" + output if output else "")
        elif code in PYTEST_EXITS:
            details = "\n".join(parsed.collection_errors) if parsed else ""
            collection = PYTEST_EXITS[code] + "\n" + (details or output)
        result["collection_error"] = tail(collection, 16 * 1024)
        agent_timed_out = result["agent"]["timed_out"]
        if verifier["timed_out"]:
            result["outcome"] = "timed_out"
            result["reason"] = "the tests passed their timeout"
        elif result["resolved"] == "full" and not collection:
            result["outcome"] = "resolved"
        elif collection:
            result["outcome"] = "broken"
            result["reason"] = collection.splitlines()[0]
        elif agent_timed_out:
            result["outcome"] = "timed_out"
            result["reason"] = "the agent passed its timeout, and the tests did not pass"
        else:
            result["outcome"] = "unresolved"

    def _read(self, container_id: str, path: str) -> bytes:
        """A file of the container, read through the engine, at most junit.MAX_BYTES."""
        try:
            stream, stat = self._api.get_archive(container_id, path)
        except NotFound:
            raise FileNotFoundError(path) from None
        if int((stat or {}).get("size") or 0) > junit.MAX_BYTES:
            raise junit.JunitError(f"the report is larger than {junit.MAX_BYTES} bytes")
        raw = io.BytesIO()
        for chunk in stream:
            raw.write(chunk)
            if raw.tell() > junit.MAX_BYTES + (1 << 20):
                raise junit.JunitError(f"the report is larger than {junit.MAX_BYTES} bytes")
        raw.seek(0)
        with tarfile.open(fileobj=raw) as archive:
            member = next((m for m in archive.getmembers() if m.isreg()), None)
            if member is None:
                raise FileNotFoundError(path)  # a folder or a link where the report should be
            return archive.extractfile(member).read()


class _Background(threading.Thread):
    """A part of a run done meanwhile; wait() returns its result or raises its error."""

    def __init__(self, function, *args) -> None:
        super().__init__(name="swe-run-helper", daemon=True)
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


__all__ = ["APPLY_TIMEOUT", "DEFAULT_TEST_COMMAND", "DEFAULT_TIMEOUT", "SweRunner", "test_files_of"]
