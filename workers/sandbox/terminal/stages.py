"""One stage of a run (the agent's command, or the tests) in a container, under its limit.

The command runs through a bash wrapper in the image's WORKDIR; coreutils `timeout`
ends it at the limit, and the outer guard kills the whole container a little later if even that
fails. In isolated mode the verifier's wrapper first puts the agent's work folder (staged under
STAGING) in place of the image's. A stage's result is {"exit_code", "seconds", "timed_out",
"output_tail"}.
"""

from __future__ import annotations

import os
import threading
import time

from docker.errors import DockerException, NotFound

from workers.sandbox.terminal.engine import ENGINE_ERRORS, tail

GUARD_GRACE_SECONDS = 3.0  # the outer guard kills a container this long after a stage's limit
SETTLE_SECONDS = 2.0  # the longest wait for a container whose init ended to be marked stopped
STAGING = "/.inspector-work"  # isolated mode: the agent's work folder lands here first
SWAP_FAILED = 199  # the isolated verifier's exit status when the work folder cannot be placed
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


class SwapFailed(Exception):
    """The isolated verifier could not put the agent's work folder in place."""


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
        except ENGINE_ERRORS:
            pass

    def __enter__(self) -> _Guard:
        self._timer.start()
        return self

    def __exit__(self, *exc) -> None:
        self._timer.cancel()


def run_stage(
    api,
    container_id: str,
    command: list[str],
    limit: float,
    log: str,
    workdir: str,
    *,
    env: dict[str, str],
    output_tail_bytes: int,
    staged: str = "",
    restart: bool = False,
) -> dict:
    """Runs `command` through the wrapper under `limit` seconds; the guard kills the
    container when even the wrapper's timeout did not end it."""
    nonce = os.urandom(8).hex()
    argv = [
        "bash",
        "-c",
        _WRAPPER,
        "inspector",
        log,
        f"{limit:.3f}",
        str(output_tail_bytes),
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
    try:
        code = api.exec_inspect(exec_id["Id"]).get("ExitCode")
    except NotFound:
        code = None  # the container stopped under the stage and took its execs with it
    if code is None:
        code = -9
    timed_out = guard.fired or (code in (124, 137) and seconds >= limit - 0.05)
    text = output.decode("utf-8", errors="replace") if output else ""
    if staged and code == SWAP_FAILED and f"{_SWAP_MARKER} {nonce}" in text:
        raise SwapFailed(text.strip()[-500:])
    return {
        "exit_code": code,
        "seconds": round(seconds, 4),
        "timed_out": timed_out,
        "output_tail": tail(text, output_tail_bytes),
        "window": window,  # wall-clock start and end: run() takes it out
    }


def settle(api, container_id: str, seconds: float = SETTLE_SECONDS) -> None:
    """Waits, up to `seconds`, for a container to be marked stopped. The engine ends the execs
    in a container whose init died a moment before it records the container's exit; an exec
    made in that moment runs nothing and vanishes with the container."""
    try:
        api.wait(container_id, timeout=seconds)
    except ENGINE_ERRORS:
        pass  # still running after all: its init is alive


def no_stage() -> dict:
    """The result of a stage that did not run."""
    return {"exit_code": None, "seconds": 0.0, "timed_out": False, "output_tail": ""}


__all__ = [
    "GUARD_GRACE_SECONDS",
    "STAGING",
    "SWAP_FAILED",
    "SwapFailed",
    "no_stage",
    "run_stage",
]
