"""Run Harbor and Terminal-Bench terminal tasks in containers of the local Docker engine.

Plain data in, plain data out: a task is a *source dict* (what `inspector.formats.terminal`
reads from a task folder: its files, timeouts, limits and the paths of its Dockerfile, solution
and tests); a run returns a dict. Nothing here knows Django.

`TerminalExecutor.image_for(source)` builds the task's image from its build context (in memory,
sent to the engine as a tar stream), tagged by a hash of that context, so an unchanged task is
built once per engine. Builds never pull and run with no network. A build that fails or passes
`build_timeout_sec` is remembered for `keep_failed_builds_seconds`, so the many runs of a broken
task do not rebuild it each time; concurrent calls for one context wait on one build.

`TerminalExecutor.run(source, tag, ...)` makes one run, in two stages, like Harbor:

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

The reward is Harbor's or Terminal-Bench's (the test script's exit status), read as harbor
0.26.0 reads it: both reward files are deleted just before the check runs, then
/logs/verifier/reward.json (an object of numbers) is read if it exists, else reward.txt (a
number). A reward the agent leaves is therefore gone before the check, unless something the agent
left running writes it again while the check runs: the shared container's weakness the
reward-file probe shows. The scripts run with bash (harbor runs them through their shebang).
Every container is labelled `inspector.run=1` with its owner
process and removed (force) when its run ends; `sweep()` removes the leftovers of gone workers.
The executor is thread-safe: a Celery task can make several runs at once from a thread pool.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import logging
import math
import os
import posixpath
import socket
import tarfile
import tempfile
import threading
import time
from dataclasses import dataclass, replace
from datetime import datetime

import docker
from docker.errors import DockerException, ImageNotFound, NotFound
from requests.exceptions import RequestException
from urllib3.exceptions import HTTPError as UrllibError

from workers.sandbox.base import SandboxUnavailable
from workers.sandbox.owners import OwnerLabels

logger = logging.getLogger(__name__)

TAG_REPOSITORY = "inspector-task"
CONTEXT_LABEL = "inspector.task-context"
RUN_LABEL = "inspector.run"
OWNER_LABEL = "inspector.run.owner"  # "<host>:<pid>"
STARTED_LABEL = "inspector.run.started"  # the owner's start time (/proc/<pid>/stat field 22)
PIDNS_LABEL = "inspector.run.pidns"  # the owner's pid namespace
OWNERS = OwnerLabels(RUN_LABEL, OWNER_LABEL, STARTED_LABEL, PIDNS_LABEL)
API_TIMEOUT = 60
BUILD_LOG_BYTES = 16 * 1024
GUARD_GRACE_SECONDS = 3.0  # the outer guard kills a container this long after a stage's limit
REWARD_MAX_BYTES = 64 * 1024
CONTEXT_MTIME = 1577836800  # 2020-01-01: file times in the build context (not in the hash)
DEFAULT_BUILD_TIMEOUT = 600.0
DEFAULT_AGENT_TIMEOUT = 600.0
DEFAULT_VERIFIER_TIMEOUT = 600.0

REWARD_TXT = "/logs/verifier/reward.txt"
REWARD_JSON = "/logs/verifier/reward.json"
VERIFIER_LOG = "/logs/verifier/test-stdout.txt"  # where Harbor sends the test's output
AGENT_LOG_FAITHFUL = "/logs/agent/agent-output.txt"
AGENT_LOG_ISOLATED = "/.inspector-agent-output.txt"  # outside the work folder: never carried
STAGING = "/.inspector-work"  # isolated mode: the agent's work folder lands here first
SWAP_FAILED = 199  # the isolated verifier's exit status when the work folder cannot be placed
# What a failing engine (or a connection to it) raises.
_ENGINE_ERRORS = (DockerException, RequestException, UrllibError, OSError)
_SWAP_MARKER = "inspector: cannot put the agent's work folder in place"

# Runs one stage's command in the container, as `bash -c WRAPPER inspector ARGS... -- CMD...`.
# The command's output goes to a file, not to the exec's pipe, so that a background process the
# command leaves behind cannot hold the exec open; the wrapper prints the file's tail when the
# command ends. coreutils `timeout -s KILL` ends the command's process group at the limit (the
# worker's guard kills the whole container a little later if even that fails). In isolated
# mode the verifier first replaces the image's work folder with the agent's (staged by the
# worker under STAGING).
_WRAPPER = r"""
log=$1 limit=$2 tail=$3 workdir=$4 staged=$5 nonce=$6
shift 6
if [ -n "$staged" ]; then
  rm -rf -- "$workdir" && mkdir -p -- "$(dirname -- "$workdir")" || {
    echo "@MARKER@ $nonce: cannot remove $workdir" >&2; exit @SWAP@; }
  if [ -e "$staged" ]; then
    mv -- "$staged" "$workdir" || { echo "@MARKER@ $nonce: mv failed" >&2; exit @SWAP@; }
  fi
  rmdir -- @STAGING@ 2>/dev/null
fi
cd -- "$workdir" 2>/dev/null || cd /
mkdir -p -- "$(dirname -- "$log")" 2>/dev/null
if command -v timeout >/dev/null 2>&1; then
  timeout -s KILL "$limit" "$@" > "$log" 2>&1 < /dev/null
else
  "$@" > "$log" 2>&1 < /dev/null
fi
rc=$?
tail -c "$tail" -- "$log" 2>/dev/null
exit $rc
"""
_WRAPPER = (
    _WRAPPER.replace("@MARKER@", _SWAP_MARKER)
    .replace("@SWAP@", str(SWAP_FAILED))
    .replace("@STAGING@", STAGING)
)


@dataclass(frozen=True)
class BuildResult:
    """What `image_for` says about a task's image. `sandbox_error` marks a failure of the
    engine (not of the task's Dockerfile): it is not remembered, and a retry may succeed."""

    ok: bool
    tag: str
    cached: bool
    seconds: float
    log: str
    reason: str
    sandbox_error: bool = False


class _SwapFailed(Exception):
    """The isolated verifier could not put the agent's work folder in place."""


class _Unreadable(Exception):
    """A reward file that exists but cannot be used (the message says why)."""


class _Guard:
    """Kills a container when a stage outlives its limit plus a grace (the outer guard)."""

    def __init__(self, api, container_id: str, seconds: float) -> None:
        self.fired = False
        self._api = api
        self._id = container_id
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True

    def _fire(self) -> None:
        self.fired = True
        try:
            self._api.kill(self._id)
        except _ENGINE_ERRORS:
            pass

    def __enter__(self) -> _Guard:
        self._timer.start()
        return self

    def __exit__(self, *exc) -> None:
        self._timer.cancel()


# --- Source dicts --------------------------------------------------------------------------------


def _file_bytes(entry: dict) -> bytes:
    if "base64" in entry:
        return base64.b64decode(entry["base64"])
    return entry.get("text", "").encode("utf-8", errors="surrogateescape")


def _file_mode(entry: dict, default: int = 0o644) -> int:
    mode = entry.get("mode")
    return (int(mode) & 0o7777) if mode is not None else default


def _number(value, default: float) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return default
    return number if math.isfinite(number) and number > 0 else default


def _tar(entries: list[tuple[str, bytes | None, int]]) -> bytes:
    """A tar of (name, data or None for a folder, mode); root-owned, fixed times."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for name, data, mode in entries:
            info = tarfile.TarInfo(name)
            info.mode = mode
            info.mtime = CONTEXT_MTIME
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            if data is None:
                info.type = tarfile.DIRTYPE
                archive.addfile(info)
            else:
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _folders(*paths: str) -> list[tuple[str, None, int]]:
    """Tar entries for folders and their parents (relative to /), parents first."""
    seen: dict[str, None] = {}
    for path in paths:
        parts = path.strip("/").split("/")
        for i in range(1, len(parts) + 1):
            seen["/".join(parts[:i]) + "/"] = None
    return [(name, None, 0o755) for name in seen]


def build_context(source: dict) -> tuple[dict[str, tuple[int, bytes]], str | None, str]:
    """The task's build context (relative path -> (mode, bytes)), the Dockerfile's path in it
    (None when the task has no Dockerfile) and a problem ("" when none)."""
    context = (source.get("build_context") or "").strip("/")
    dockerfile = (source.get("dockerfile") or "").strip("/")
    files = source.get("files") or {}
    prefix = context + "/" if context else ""
    chosen: dict[str, tuple[int, bytes]] = {}
    for path, entry in files.items():
        if prefix and not path.startswith(prefix):
            continue
        chosen[path[len(prefix) :]] = (_file_mode(entry), _file_bytes(entry))
    if not dockerfile or dockerfile not in files:
        return chosen, None, ""
    if prefix and not dockerfile.startswith(prefix):
        return chosen, None, f"the Dockerfile {dockerfile} is outside the build context {context}/"
    return chosen, dockerfile[len(prefix) :], ""


def context_hash(files: dict[str, tuple[int, bytes]], dockerfile: str) -> str:
    """SHA-256 of the build context (sorted paths, modes, bytes) and the Dockerfile's path."""
    digest = hashlib.sha256()
    for path in sorted(files):
        mode, data = files[path]
        digest.update(b"%s\0%o\0%d\0" % (path.encode("utf-8", "surrogateescape"), mode, len(data)))
        digest.update(data)
    digest.update(b"dockerfile\0" + dockerfile.encode("utf-8", "surrogateescape"))
    return digest.hexdigest()


def _relative(path: str, folder: str) -> str:
    """`path` relative to `folder` ("" = the task folder itself)."""
    if folder and path.startswith(folder + "/"):
        return path[len(folder) + 1 :]
    return path


def _parse_reward_txt(data: bytes) -> dict[str, float]:
    stripped = data.decode("utf-8", errors="replace").strip()
    if not stripped:
        raise _Unreadable(f"{REWARD_TXT} is empty")
    try:
        value = float(stripped)
    except ValueError:
        raise _Unreadable(f"{REWARD_TXT} is not a number: {stripped[:80]!r}") from None
    if not math.isfinite(value):
        raise _Unreadable(f"{REWARD_TXT} is not a finite number: {stripped[:80]!r}")
    return {"reward": value}


def _parse_reward_json(raw: bytes) -> dict[str, float]:
    try:
        data = json.loads(raw.decode("utf-8", errors="replace"))
    except ValueError as exc:
        raise _Unreadable(f"{REWARD_JSON} is not JSON: {exc}") from None
    if isinstance(data, (int, float)) and not isinstance(data, bool):
        data = {"reward": data}
    if not isinstance(data, dict) or not data:
        raise _Unreadable(f"{REWARD_JSON} holds no object of rewards: {raw[:80]!r}")
    rewards: dict[str, float] = {}
    for key, value in data.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _Unreadable(f"{REWARD_JSON}: {key!r} is not a number: {value!r}")
        if not math.isfinite(value):
            raise _Unreadable(f"{REWARD_JSON}: {key!r} is not a finite number")
        rewards[str(key)] = float(value)
    return rewards


def _tail(text: str, limit: int) -> str:
    return text[-limit:] if len(text) > limit else text


# --- The executor --------------------------------------------------------------------------------


class TerminalExecutor:
    """Builds terminal tasks' images and runs their agents and checks; see the module doc."""

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
        """State of this process: a client (ours unless given), locks, caches."""
        self._pid = os.getpid()
        given = self._given
        if given is None:
            try:
                self._api = docker.from_env(timeout=API_TIMEOUT, max_pool_size=32).api
            except DockerException as exc:
                raise SandboxUnavailable(f"the Docker engine does not answer: {exc}") from None
        else:
            self._api = getattr(given, "api", given)
        self._lock = threading.Lock()
        self._build_locks: dict[str, threading.Lock] = {}
        self._failed: dict[str, tuple[float, BuildResult]] = {}
        self._images: dict[str, str] = {}  # tag -> WORKDIR, for our content-hashed tags
        self._labels = OWNERS.for_process(self._pid)

    def _check_fork(self) -> None:
        if self._pid != os.getpid():
            self._init_process()  # a parent's connections and locks are the parent's

    @property
    def api(self):
        self._check_fork()
        return self._api

    # --- Images ----------------------------------------------------------------------------------

    def image_for(self, source: dict) -> BuildResult:
        """The task's image, built when its tag (a hash of the build context) is not on the
        engine; a failed build is remembered for keep_failed_builds_seconds."""
        start = time.monotonic()
        self._check_fork()
        files, dockerfile, problem = build_context(source)
        if problem:
            return BuildResult(False, "", False, time.monotonic() - start, "", problem)
        if dockerfile is None:
            return self._prebuilt(source, start)
        digest = context_hash(files, dockerfile)
        tag = f"{TAG_REPOSITORY}:{digest[:16]}"
        with self._lock:
            lock = self._build_locks.setdefault(digest, threading.Lock())
        with lock:
            with self._lock:
                remembered = self._failed.get(digest)
            if remembered and time.monotonic() - remembered[0] < self.keep_failed_builds_seconds:
                return replace(remembered[1], cached=True, seconds=time.monotonic() - start)
            try:
                self._api.inspect_image(tag)
                return BuildResult(True, tag, True, time.monotonic() - start, "", "")
            except ImageNotFound:
                pass
            except _ENGINE_ERRORS as exc:
                return BuildResult(
                    False, tag, False, time.monotonic() - start, "", f"docker: {exc}", True
                )
            timeout = _number(source.get("build_timeout_sec"), DEFAULT_BUILD_TIMEOUT)
            result = self._build(files, dockerfile, tag, digest, timeout, start)
            with self._lock:
                if result.ok:
                    self._failed.pop(digest, None)
                elif not result.sandbox_error:
                    now = time.monotonic()
                    for old in [
                        k
                        for k, (t, _) in self._failed.items()
                        if now - t > self.keep_failed_builds_seconds
                    ]:
                        del self._failed[old]
                    self._failed[digest] = (now, result)
            return result

    def _prebuilt(self, source: dict, start: float) -> BuildResult:
        image = source.get("docker_image")
        if not image:
            where = source.get("dockerfile") or "a Dockerfile"
            return BuildResult(
                False,
                "",
                False,
                time.monotonic() - start,
                "",
                f"the task has no Dockerfile ({where} is missing) and names no docker_image",
            )
        try:
            self._api.inspect_image(image)
        except ImageNotFound:
            return BuildResult(
                False,
                image,
                False,
                time.monotonic() - start,
                "",
                f"the task's docker_image {image} is not on this Docker engine and the task has "
                "no Dockerfile; images are never pulled (load it with `docker load` first)",
            )
        except _ENGINE_ERRORS as exc:
            return BuildResult(
                False, image, False, time.monotonic() - start, "", f"docker: {exc}", True
            )
        return BuildResult(True, image, True, time.monotonic() - start, "", "")

    def _build(
        self,
        files: dict[str, tuple[int, bytes]],
        dockerfile: str,
        tag: str,
        digest: str,
        timeout: float,
        start: float,
    ) -> BuildResult:
        api = self._api
        context = _tar([(path, data, mode) for path, (mode, data) in sorted(files.items())])
        params = {
            "t": tag,
            "dockerfile": dockerfile,
            "pull": False,
            "rm": True,
            "forcerm": True,
            "q": False,
            "nocache": False,
            "networkmode": self.build_network,
            "labels": json.dumps({CONTEXT_LABEL: digest}),
        }
        log: list[str] = []
        size = 0
        error = ""
        state = {"cancelled": False, "socket": None}
        lock = threading.Lock()

        def cancel() -> None:
            with lock:
                state["cancelled"] = True
                sock = state["socket"]
            if sock is not None:  # closing our end makes the engine cancel the build
                try:
                    getattr(sock, "_sock", sock).shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

        timer = threading.Timer(timeout, cancel)
        timer.daemon = True
        timer.start()
        response = None
        try:
            # What APIClient.build does, keeping the response: its socket is what a timeout
            # shuts down. The read timeout covers the wait for the first answer.
            response = api._post(
                api._url("/build"),
                data=io.BytesIO(context),
                params=params,
                headers={"Content-Type": "application/x-tar"},
                stream=True,
                timeout=timeout + 5,
            )
            api._raise_for_status(response)
            with lock:
                state["socket"] = api._get_raw_response_socket(response)
                cancelled = state["cancelled"]
            if cancelled:
                cancel()
            for chunk in api._stream_helper(response, decode=True):
                if not isinstance(chunk, dict):
                    continue
                text = chunk.get("stream") or chunk.get("status") or ""
                if chunk.get("error"):
                    error = str(chunk["error"]).strip()
                    text = f"ERROR: {error}\n"
                if text:
                    log.append(text)
                    size += len(text)
                    if size > 4 * BUILD_LOG_BYTES:
                        joined = "".join(log)[-BUILD_LOG_BYTES:]
                        log, size = [joined], len(joined)
        except _ENGINE_ERRORS as exc:
            if not state["cancelled"]:
                text = _tail("".join(log), BUILD_LOG_BYTES)
                reason = f"docker: the build could not run: {exc}"
                return BuildResult(False, tag, False, time.monotonic() - start, text, reason, True)
        finally:
            timer.cancel()
            if response is not None:
                response.close()
        text = _tail("".join(log), BUILD_LOG_BYTES)
        seconds = time.monotonic() - start
        if state["cancelled"]:
            return BuildResult(
                False, tag, False, seconds, text, f"the build passed its {timeout:g} s timeout"
            )
        if error:
            return BuildResult(False, tag, False, seconds, text, f"the build failed: {error}")
        try:
            api.inspect_image(tag)
        except ImageNotFound:
            return BuildResult(
                False, tag, False, seconds, text, "the build failed: it ended without an image"
            )
        except _ENGINE_ERRORS as exc:
            return BuildResult(False, tag, False, seconds, text, f"docker: {exc}", True)
        return BuildResult(True, tag, False, seconds, text, "")

    def _workdir(self, tag: str) -> str:
        with self._lock:
            known = self._images.get(tag)
        if known is not None:
            return known
        config = self._api.inspect_image(tag).get("Config") or {}
        workdir = posixpath.normpath(config.get("WorkingDir") or "/")
        if workdir.startswith("//"):
            workdir = "/" + workdir.lstrip("/")
        if tag.startswith(TAG_REPOSITORY + ":"):  # content-addressed: never changes
            with self._lock:
                self._images[tag] = workdir
        return workdir

    # --- Runs ------------------------------------------------------------------------------------

    def run(
        self,
        source: dict,
        image_tag: str,
        *,
        solution: dict[str, bytes] | None = None,
        script: str | None = None,
        mode: str = "faithful",
    ) -> dict:
        """One run: an agent stage, a verifier stage, the reward; see the module doc.

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
        start = time.monotonic()
        result = {
            "outcome": "sandbox_error",
            "reward": None,
            "rewards": None,
            "reason": "",
            "mode": mode,
            "seconds": 0.0,
            "agent": _stage(),
            "verifier": _stage(),
        }
        containers: list[str] = []  # every container this run made (threads append to it)
        helpers: list[_Helper] = []
        try:
            self._run(source, image_tag, solution, script, mode, result, containers, helpers)
        except (*_ENGINE_ERRORS, tarfile.TarError) as exc:
            result.update(outcome="sandbox_error", reward=None, rewards=None)
            result["reason"] = f"docker: {exc}"
        except _SwapFailed as exc:
            result.update(outcome="sandbox_error", reward=None, rewards=None)
            result["reason"] = f"the agent's work folder could not be put in place: {exc}"
        finally:
            for helper in helpers:
                helper.join()
            for container_id in containers:
                self._remove(container_id)
        result["seconds"] = round(time.monotonic() - start, 4)
        return result

    def _run(self, source, image_tag, solution, script, mode, result, containers, helpers):
        """Makes the run, filling `result` (outcome, reward, reason and the stages)."""
        api = self._api
        harbor = source.get("format", "harbor") != "terminal-bench"
        by_exit_code = source.get("reward", "file" if harbor else "exit_code") == "exit_code"
        files = source.get("files") or {}
        workdir = self._workdir(image_tag)
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
            relative_entry = _relative(entry, base)
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
                    mode_bits = _file_mode(files[path], 0o755)
                    data = _file_bytes(files[path])
                    agent_files.append(("solution/" + _relative(path, base), data, mode_bits))
            command = ["bash", "/solution/" + _relative(entry, base)]

        # What the verifier stage gets.
        test_entry = source.get("test_entry") or ("tests/test.sh" if harbor else "run-tests.sh")
        if test_entry not in files:
            result.update(outcome="failed", reward=0.0)
            result["reason"] = f"the task has no test script ({test_entry} is missing)"
            return
        test_files = [
            ("tests/" + _relative(path, "tests"), _file_bytes(files[path]), _file_mode(files[path]))
            for path in (source.get("test_files") or [test_entry])
            if path in files
        ]
        test_command = ["bash", "/tests/" + _relative(test_entry, "tests")]
        if not by_exit_code:
            # As harbor does just before its verifier: stale rewards go.
            test_command = [
                "bash",
                "-c",
                f"rm -f -- {REWARD_TXT} {REWARD_JSON}; exec " + " ".join(test_command),
            ]
        test_env = {} if harbor else {"TEST_DIR": "/tests"}

        agent_timeout = _number(source.get("agent_timeout_sec"), DEFAULT_AGENT_TIMEOUT)
        verifier_timeout = _number(source.get("verifier_timeout_sec"), DEFAULT_VERIFIER_TIMEOUT)
        host_config = self._host_config(source)
        test_folders = {"tests"} | {posixpath.dirname(path) for path, _, _ in test_files}

        prepared = None
        if mode == "isolated":
            # The check's container is created, given the tests and started while the agent
            # works: a container start is the largest part of a run's cost.
            folders = sorted(test_folders | {"logs/verifier", STAGING.strip("/")})
            tests = _tar(_folders(*folders) + test_files)
            prepared = _Helper(self._prepare, image_tag, host_config, tests, containers)
            helpers.append(prepared)
            prepared.start()

        # 1. The agent stage.
        agent_id = self._create(image_tag, host_config, containers)
        folders = {posixpath.dirname(path) for path, _, _ in agent_files}
        if mode == "faithful":  # Harbor mounts /logs/verifier during the agent stage too
            folders |= {"logs/agent", "logs/verifier"}
        api.put_archive(agent_id, "/", _tar(_folders(*sorted(folders)) + agent_files))
        api.start(agent_id)
        agent_log = AGENT_LOG_FAITHFUL if mode == "faithful" else AGENT_LOG_ISOLATED
        agent = self._stage(
            agent_id,
            command,
            agent_timeout,
            agent_log,
            workdir,
            env={"DEBIAN_FRONTEND": "noninteractive"},
        )
        agent.pop("window")
        result["agent"] = agent

        # 2. The verifier stage.
        if prepared is None:
            # The copy merges into whatever /tests the agent left, as Harbor's does.
            verifier_id = agent_id
            api.put_archive(verifier_id, "/", _tar(_folders(*sorted(test_folders)) + test_files))
            verifier = self._stage(
                verifier_id,
                test_command,
                verifier_timeout,
                VERIFIER_LOG,
                workdir,
                env=test_env,
                restart=True,
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
                removal = _Helper(self._remove, agent_id)  # meanwhile
                helpers.append(removal)
                removal.start()
                verifier_id = prepared.wait()
                if have_work:
                    work.seek(0)
                    api.put_archive(verifier_id, STAGING, work)
            staged = STAGING + "/" + posixpath.basename(workdir)
            verifier = self._stage(
                verifier_id,
                test_command,
                verifier_timeout,
                VERIFIER_LOG,
                workdir,
                env=test_env,
                staged=staged,
            )
        window = verifier.pop("window")
        result["verifier"] = verifier

        # 3. The reward.
        self._judge(result, verifier_id, by_exit_code, agent_timeout, verifier_timeout, window)

    def _judge(
        self, result, container_id, by_exit_code, agent_timeout, verifier_timeout, window
    ) -> None:
        agent, verifier = result["agent"], result["verifier"]
        if verifier["timed_out"]:
            result.update(outcome="timed_out", reward=None, rewards=None)
            result["reason"] = f"the tests passed their {verifier_timeout:g} s timeout"
            return
        if not by_exit_code:
            try:
                rewards, where = self._read_rewards(container_id, window)
            except _Unreadable as exc:
                result.update(outcome="failed", reward=None, rewards=None, reason=str(exc))
                if agent["timed_out"]:
                    result["outcome"] = "timed_out"
                    result["reason"] = (
                        f"the agent passed its {agent_timeout:g} s timeout, then {exc}"
                    )
                return
            values = list(rewards.values())
            reward = float(rewards["reward"]) if "reward" in rewards else sum(values) / len(values)
            passed = all(value >= 1 for value in values)
            shown = ", ".join(f"{k}={v:g}" for k, v in rewards.items())
            result.update(reward=reward, rewards=rewards)
            detail = f"{shown} from {where}"
        else:
            code = verifier["exit_code"]
            passed = code == 0
            reward = 1.0 if passed else 0.0
            result.update(reward=reward, rewards=None)
            detail = f"the test script exited with status {code}"
        if passed:
            result["outcome"] = "passed"
            result["reason"] = f"full reward: {detail}"
        elif agent["timed_out"]:
            result["outcome"] = "timed_out"
            result["reason"] = f"the agent passed its {agent_timeout:g} s timeout; {detail}"
        else:
            result["outcome"] = "failed"
            result["reason"] = f"no full reward: {detail}"

    def _read_rewards(
        self, container_id: str, window: tuple[float, float]
    ) -> tuple[dict[str, float], str]:
        """Harbor's reward, read as harbor 0.26.0 reads it: reward.json (an object of numbers)
        when it exists, else reward.txt (a number). Both were deleted just before the tests."""
        del window  # kept in the signature: the caller times the check
        for path in (REWARD_JSON, REWARD_TXT):
            fetched = self._fetch(container_id, path)
            if fetched is None:
                continue
            data, _mtime, problem = fetched
            if problem:
                raise _Unreadable(problem)
            rewards = _parse_reward_json(data) if path == REWARD_JSON else _parse_reward_txt(data)
            return rewards, path
        raise _Unreadable(f"no reward: the tests wrote neither {REWARD_JSON} nor {REWARD_TXT}")

    def _fetch(self, container_id: str, path: str, depth: int = 0):
        """(bytes, mtime, "") of a regular file of a container, following symbolic links a few
        times; (None, mtime, problem) when it cannot be used; None when it does not exist."""
        try:
            stream, stat = self._api.get_archive(container_id, path)
        except NotFound:
            return None
        try:
            mtime = datetime.fromisoformat(stat.get("mtime", "")).timestamp()
        except (TypeError, ValueError):
            mtime = None
        data = bytearray()
        for chunk in stream:
            data += chunk
            if len(data) > REWARD_MAX_BYTES + 64 * 1024:
                return None, mtime, f"{path} is larger than {REWARD_MAX_BYTES} bytes"
        with tarfile.open(fileobj=io.BytesIO(bytes(data))) as archive:
            member = archive.next()
            if member is None:
                return None, mtime, f"{path} could not be read"
            if member.issym() and depth < 3:
                target = posixpath.normpath(
                    posixpath.join(posixpath.dirname(path), member.linkname)
                )
                followed = self._fetch(container_id, target, depth + 1)
                if followed is None:
                    return None, mtime, f"{path} is a link to {target}, which does not exist"
                return followed
            if not member.isfile():
                return None, mtime, f"{path} is not a regular file"
            if member.size > REWARD_MAX_BYTES:
                return None, mtime, f"{path} is larger than {REWARD_MAX_BYTES} bytes"
            handle = archive.extractfile(member)
            return (handle.read() if handle is not None else b""), mtime, ""

    # --- Containers ------------------------------------------------------------------------------

    def _host_config(self, source: dict) -> dict:
        memory_mb = source.get("memory_mb") or self.default_memory_mb
        cpus = source.get("cpus")
        network = "none"
        if self.run_network != "none" and source.get("allow_internet"):
            network = self.run_network
        options: dict = {
            "init": True,
            "network_mode": network,
            "pids_limit": self.pids_limit,
            "log_config": {"type": "none", "config": {}},
        }
        if memory_mb:
            options["mem_limit"] = int(memory_mb) * 1024 * 1024
            options["memswap_limit"] = int(memory_mb) * 1024 * 1024  # no swap
        if cpus:
            options["nano_cpus"] = int(float(cpus) * 1e9)
        return self._api.create_host_config(**options)

    def _create(self, image_tag: str, host_config: dict, containers: list[str]) -> str:
        """A container for a run, recorded in `containers` (and as under way) at once."""
        created = self._api.create_container(
            image_tag,
            command=["sleep", "infinity"],
            user="0",
            labels=dict(self._labels),
            host_config=host_config,
        )
        container_id = created["Id"]
        containers.append(container_id)
        with _ACTIVE_LOCK:
            _ACTIVE.add(container_id)
        return container_id

    def _prepare(self, image_tag: str, host_config: dict, tests: bytes, containers: list) -> str:
        """Isolated mode: the check's container, created, with the tests, started."""
        container_id = self._create(image_tag, host_config, containers)
        self._api.put_archive(container_id, "/", tests)
        self._api.start(container_id)
        return container_id

    def _remove(self, container_id: str) -> None:
        try:
            self._api.remove_container(container_id, force=True)
        except NotFound:
            pass
        except _ENGINE_ERRORS as exc:
            logger.warning("could not remove run container %s: %s", container_id[:12], exc)
        finally:
            with _ACTIVE_LOCK:
                _ACTIVE.discard(container_id)

    def _stage(
        self,
        container_id: str,
        command: list[str],
        limit: float,
        log: str,
        workdir: str,
        *,
        env: dict[str, str],
        staged: str = "",
        restart: bool = False,
    ) -> dict:
        """Runs `command` through the wrapper under `limit` seconds; the guard kills the
        container when even the wrapper's timeout did not end it."""
        api = self._api
        nonce = os.urandom(8).hex()
        argv = [
            "bash",
            "-c",
            _WRAPPER,
            "inspector",
            log,
            f"{limit:.3f}",
            str(self.output_tail_bytes),
            workdir,
            staged,
            nonce,
            *command,
        ]
        try:
            exec_id = api.exec_create(container_id, argv, user="0", workdir="/", environment=env)
        except DockerException as exc:
            # The agent ended the container's init (or the guard killed it): start it again,
            # with its files as they are, for the tests.
            if not restart or "is not running" not in str(exc):
                raise
            api.start(container_id)
            exec_id = api.exec_create(container_id, argv, user="0", workdir="/", environment=env)
        begin, wall = time.monotonic(), time.time()
        with _Guard(api, container_id, limit + GUARD_GRACE_SECONDS) as guard:
            output = api.exec_start(exec_id["Id"])
        seconds = time.monotonic() - begin
        window = (wall, time.time())
        code = api.exec_inspect(exec_id["Id"]).get("ExitCode")
        if code is None:
            code = -9
        timed_out = guard.fired or (code in (124, 137) and seconds >= limit - 0.05)
        text = output.decode("utf-8", errors="replace") if output else ""
        if staged and code == SWAP_FAILED and f"{_SWAP_MARKER} {nonce}" in text:
            raise _SwapFailed(text.strip()[-500:])
        return {
            "exit_code": code,
            "seconds": round(seconds, 4),
            "timed_out": timed_out,
            "output_tail": _tail(text, self.output_tail_bytes),
            "window": window,  # wall-clock start and end: run() takes it out
        }

    def sweep(self, older_than_seconds: float = 0, *, all_of_this_host: bool = False) -> int:
        """Remove the run containers left behind: this process's that no run uses, and
        those of this host's gone processes (same pid namespace). With `all_of_this_host`,
        those of live processes of this host too (for a machine where no other worker runs).
        Returns how many were removed."""

        def in_use(container_id: str) -> bool:
            with _ACTIVE_LOCK:
                return container_id in _ACTIVE  # a run of this process is using it

        api = self.api
        return OWNERS.sweep(
            api,
            api.containers(all=True, filters={"label": f"{RUN_LABEL}=1"}),
            older_than_seconds=older_than_seconds,
            all_of_this_host=all_of_this_host,
            own_too=True,
            errors=_ENGINE_ERRORS,
            in_use=in_use,
        )


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


# Containers of this process's runs under way (of every executor): sweep() leaves them alone.
_ACTIVE: set[str] = set()
_ACTIVE_LOCK = threading.Lock()


def _forget_after_fork() -> None:
    global _ACTIVE_LOCK
    _ACTIVE_LOCK = threading.Lock()  # the parent's: maybe held by one of its threads
    _ACTIVE.clear()


os.register_at_fork(after_in_child=_forget_after_fork)


def _stage() -> dict:
    return {"exit_code": None, "seconds": 0.0, "timed_out": False, "output_tail": ""}


__all__ = ["BuildResult", "TerminalExecutor", "build_context", "context_hash"]
