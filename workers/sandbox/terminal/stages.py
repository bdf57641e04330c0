"""One stage of a run (the agent's command, or the tests) in a container, under its limit.

The command runs through a bash wrapper in the image's WORKDIR; coreutils `timeout`
ends it at the limit, and the outer guard kills the whole container a little later if even that
fails. In isolated mode the verifier's wrapper first puts the agent's work folder (staged under
STAGING) in place of the image's. A stage's result is {"exit_code", "seconds", "timed_out",
"output_tail"}.

Two things the engine would otherwise do in calls of their own are done by the wrapper, in the
stage's one exec (each archive call re-executes the engine, about 40 ms a call):
- `files`: the stage's small files (the agent's, the tests of a faithful check) are written by
  bash's `printf %b` before the command, from arguments (`files_argv`), as the engine's archive
  copy puts them: a folder that is there stays (root's, mode 755), anything else in the way of
  an entry (a file, a link, a folder where a file goes) is removed first, and files are root's
  with their modes (their times are the write's, not the archive's fixed time). When the
  wrapper cannot write them it exits FILES_FAILED before running anything, and the caller
  copies them by an archive call; it says it wrote them (a line with the nonce) before the
  command runs, and only an output without that line is a failure (`FilesFailed`), so the
  command cannot fake one to be run again;
- `read_rewards`: once the command ended, the wrapper prints Harbor's reward file (reward.json,
  else reward.txt) when it is a regular file of at most REWARD_MAX_BYTES, framed by the stage's
  nonce before the output's tail (the result's "reward_file": (path, bytes)); anything else (no
  file, a link, a larger file, a frame that does not add up) leaves "reward_file" None, and the
  reward is read from the container as before. When the check left no reward file, the wrapper
  looks again for `reward_settle_seconds` first (a faithful check: REWARD_SETTLE_SECONDS), as
  Harbor reads only after its exec returned.
"""

from __future__ import annotations

import os
import threading
import time

from docker.errors import DockerException, NotFound

from workers.sandbox.terminal.engine import ENGINE_ERRORS, tail
from workers.sandbox.terminal.rewards import REWARD_JSON, REWARD_MAX_BYTES, REWARD_TXT

GUARD_GRACE_SECONDS = 3.0  # the outer guard kills a container this long after a stage's limit
SETTLE_SECONDS = 2.0  # the longest wait for a container whose init ended to be marked stopped
STAGING = "/.inspector-work"  # isolated mode: the agent's work folder lands here first
SWAP_FAILED = 199  # the isolated verifier's exit status when the work folder cannot be placed
_SWAP_MARKER = "inspector: cannot put the agent's work folder in place"
FILES_FAILED = 198  # the wrapper's exit status when it could not write the stage's files
_FILES_MARKER = "inspector: cannot write the stage's files"
# Files the wrapper writes itself: each escaped file under one argument's limit (the kernel's
# MAX_ARG_STRLEN is 128 KiB), all of them well under the arguments' total (2 MiB, shared with
# the environment). Larger stages are copied with an archive call.
FILES_ARG_MAX = 96 * 1024
FILES_TOTAL_MAX = 512 * 1024
# A faithful check that leaves no reward file is looked at again every 10 ms for this long
# before the run counts as unrewarded. Harbor reads the reward only after its `docker compose
# exec` of the tests returned, and a process the agent left in the container can write one in
# that gap: the reward-file probe's writer does, within milliseconds on a quiet machine, but on
# a loaded one it was starved past the tests' own run and the fallback read (a hackable task
# passed unseen in CI). The wait costs only runs whose check wrote no reward at all, and only
# in faithful mode: an isolated check's container holds nothing of the agent's to write one.
REWARD_SETTLE_SECONDS = 0.5
_REWARD_POLL_SECONDS = 0.01  # the wrapper's `sleep` between two looks

# Runs one stage's command in the container, as `bash -c WRAPPER inspector ARGS... -- CMD...`.
# The command's output goes to a file, not to the exec's pipe, so that a background process the
# command leaves behind cannot hold the exec open; the wrapper prints the file's tail when the
# command ends. coreutils `timeout -s KILL` ends the command's process group at the limit (the
# worker's guard kills the whole container a little later if even that fails). In isolated
# mode the verifier first replaces the image's work folder with the agent's (staged by the
# worker under STAGING).
_WRAPPER = r"""
log=$1 limit=$2 tail=$3 workdir=$4 staged=$5 nonce=$6 rewards=$7 count=$8 files=$8
shift 8
[ "$files" != 0 ] || files=
if [ -n "$files" ] && [ "$(printf '%b' '\x41')" != A ]; then
  echo "@FILES_MARKER@ $nonce: this shell's printf has no \\x escapes" >&2; exit @FILES@
fi
while [ "$count" -gt 0 ]; do
  if [ "$2" = d ] && [ -d "$1" ] && [ ! -L "$1" ]; then
    { [ -O "$1" ] && [ -G "$1" ] || chown 0:0 -- "$1"; } && chmod 755 -- "$1"
  else
    { [ ! -e "$1" ] && [ ! -L "$1" ] || rm -rf -- "$1"; } &&
    if [ "$2" = d ]; then
      mkdir -m 755 -- "$1"
    else
      printf '%b' "$3" > "$1" && chmod -- "$2" "$1"
    fi
  fi || { echo "@FILES_MARKER@ $nonce: $1" >&2; exit @FILES@; }
  shift 3
  count=$((count - 1))
done
[ -z "$files" ] || printf '%s files written\n' "$nonce"
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
if [ -n "$rewards" ]; then
  said= seen= polls=0
  while :; do
    for file in @REWARD_JSON@ @REWARD_TXT@; do
      if [ -f "$file" ] && [ ! -L "$file" ]; then
        size=
        for size in $(wc -c < "$file" 2>/dev/null); do break; done
        case $size in *[!0-9]*) size= ;; esac
        if [ -n "$size" ] && [ "$size" -le @REWARD_MAX@ ]; then
          printf '%s reward %s %s\n' "$nonce" "$file" "$size"
          head -c "$size" -- "$file" 2>/dev/null
          printf '\n%s end\n' "$nonce"
          said=1
        fi
        seen=1
        break
      elif [ -e "$file" ] || [ -L "$file" ]; then
        seen=1
        break
      fi
    done
    # No reward file yet: Harbor reads it only after its exec returned, so a process still
    # running (one the agent left) has until then; look again for the settle's length.
    [ -z "$seen" ] && [ "$polls" -lt "$rewards" ] || break
    sleep @REWARD_POLL@ 2>/dev/null || break
    polls=$((polls + 1))
  done
  [ -n "$said" ] || printf '%s no reward\n' "$nonce"
fi
tail -c "$tail" -- "$log" 2>/dev/null
exit $rc
"""
_WRAPPER = (
    _WRAPPER.replace("@MARKER@", _SWAP_MARKER)
    .replace("@SWAP@", str(SWAP_FAILED))
    .replace("@STAGING@", STAGING)
    .replace("@FILES_MARKER@", _FILES_MARKER)
    .replace("@FILES@", str(FILES_FAILED))
    .replace("@REWARD_JSON@", REWARD_JSON)
    .replace("@REWARD_TXT@", REWARD_TXT)
    .replace("@REWARD_MAX@", str(REWARD_MAX_BYTES))
    .replace("@REWARD_POLL@", str(_REWARD_POLL_SECONDS))
)
# printf %b reads backslash escapes: printable ASCII (but the backslash), tab and newline go as
# they are, every other byte as \xHH (always two digits, so a hex digit after it stays a byte
# of its own).
_PRINTF_ESCAPES = {
    byte: (chr(byte) if (32 <= byte < 127 and byte != 92) or byte in (9, 10) else f"\\x{byte:02x}")
    for byte in range(256)
}


class SwapFailed(Exception):
    """The isolated verifier could not put the agent's work folder in place."""


class FilesFailed(Exception):
    """The wrapper could not write the stage's files (nothing of the command ran)."""


def files_argv(entries: list[tuple[str, bytes | None, int]]) -> list[str] | None:
    """The wrapper's arguments for writing tar-style entries (name relative to /, data or None
    for a folder, mode): (path, "d" or the octal mode, printf-escaped data) each, folders first;
    None when they are too large to go as arguments (the caller then copies them)."""
    folders, files, total = [], [], 0
    for name, data, mode in entries:
        path = "/" + name.strip("/")
        escaped = "" if data is None else data.decode("latin-1").translate(_PRINTF_ESCAPES)
        total += len(escaped) + len(path) + 16  # with the mode and the pointers to each
        if len(escaped) > FILES_ARG_MAX or len(path) > 4096 or total > FILES_TOTAL_MAX:
            return None
        if data is None:
            folders += [path, "d", ""]
        else:
            files += [path, f"{mode & 0o7777:o}", escaped]
    return folders + files


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
    files: list[str] | None = None,
    read_rewards: bool = False,
    reward_settle_seconds: float = 0.0,
) -> dict:
    """Runs `command` through the wrapper under `limit` seconds; the guard kills the
    container when even the wrapper's timeout did not end it. `files` (from `files_argv`) are
    written first (FilesFailed when they cannot be); with `read_rewards` the result's
    "reward_file" is Harbor's reward file as the wrapper read it (see the module doc)."""
    nonce = os.urandom(8).hex()
    files = files or []
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
        str(round(reward_settle_seconds / _REWARD_POLL_SECONDS)) if read_rewards else "",
        str(len(files) // 3),
        *files,
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
    settle = 2 * reward_settle_seconds if read_rewards else 0.0  # its polls, slower under load
    with _Guard(api, container_id, limit + GUARD_GRACE_SECONDS + settle) as guard:
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
    output = output or b""
    if files:
        # The wrapper says it wrote the files before it runs anything else; without that line
        # nothing of the command ran (a write failed, or the exec could not start). Whatever
        # the command prints comes after it, so the command cannot fake a failure.
        written = f"{nonce} files written\n".encode()
        at = output.find(written)
        if at < 0:
            text = output.decode("utf-8", errors="replace").strip()
            raise FilesFailed(text[-500:] or f"the exec ended with status {code}")
        output = output[:at] + output[at + len(written) :]
    reward_file, output = _reward_frame(output, nonce) if read_rewards else (None, output)
    text = output.decode("utf-8", errors="replace") if output else ""
    if staged and code == SWAP_FAILED and f"{_SWAP_MARKER} {nonce}" in text:
        raise SwapFailed(text.strip()[-500:])
    stage = {
        "exit_code": code,
        "seconds": round(seconds, 4),
        "timed_out": timed_out,
        "output_tail": tail(text, output_tail_bytes),
        "window": window,  # wall-clock start and end: run() takes it out
    }
    if read_rewards:
        stage["reward_file"] = reward_file  # run() takes it out
    return stage


def _reward_frame(output: bytes, nonce: str) -> tuple[tuple[str, bytes] | None, bytes]:
    """Harbor's reward file as the wrapper printed it before the output's tail, and the rest:
    ((path, bytes), tail) when the frame adds up, else (None, tail without the frame).

    The nonce is no secret from the container (a root process there reads it from the
    wrapper's command line, and can write to the wrapper's stdout through /proc), so a frame
    counts only when it is the output's start and the nonce appears nowhere else: bytes
    written there while the check ran come before the wrapper's frame, and a forged frame
    among them adds its own nonces. What only a process that outlives the check could do
    (write after the wrapper's frame, or end the wrapper within it) it could do to the reward
    file itself before the engine read it, as it always could."""
    none = f"{nonce} no reward\n".encode()
    marks = output.count(nonce.encode())
    if output.startswith(none):
        return None, output[len(none) :]
    head = f"{nonce} reward ".encode()
    if not output.startswith(head) or marks != 2:
        return None, output  # the wrapper did not get that far, or someone else wrote
    line_end = output.find(b"\n", len(head))
    try:
        path, size_text = output[len(head) : line_end].decode().rsplit(" ", 1)
        size = int(size_text)
    except ValueError:
        return None, output
    start = line_end + 1
    end = f"\n{nonce} end\n".encode()
    if path not in (REWARD_JSON, REWARD_TXT) or output[start + size :][: len(end)] != end:
        return None, output  # the file changed size while it was read: read it again
    return (path, output[start : start + size]), output[start + size + len(end) :]


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
    "FILES_FAILED",
    "FilesFailed",
    "GUARD_GRACE_SECONDS",
    "REWARD_SETTLE_SECONDS",
    "STAGING",
    "SWAP_FAILED",
    "SwapFailed",
    "files_argv",
    "no_stage",
    "run_stage",
]
