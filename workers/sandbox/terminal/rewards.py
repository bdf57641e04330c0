"""The reward of a run and its verdict, read from the verifier's container once the tests ended.

The reward is Harbor's or Terminal-Bench's (the test script's exit status), read as harbor
0.26.0 reads it: both reward files are deleted just before the check runs, then
/logs/verifier/reward.json (an object of numbers) is read if it exists, else reward.txt (a
number). A reward the agent leaves is therefore gone before the check, unless something the agent
left running writes it again while the check runs: the shared container's weakness the
reward-file probe shows. `judge()` turns the stages and the reward into the run's outcome and
reason.
"""

from __future__ import annotations

import io
import json
import math
import posixpath
import tarfile
from datetime import datetime

from docker.errors import NotFound

REWARD_TXT = "/logs/verifier/reward.txt"
REWARD_JSON = "/logs/verifier/reward.json"
REWARD_MAX_BYTES = 64 * 1024


class _Unreadable(Exception):
    """A reward file that exists but cannot be used (the message says why)."""


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
    except RecursionError:
        raise _Unreadable(f"{REWARD_JSON} is nested too deeply to read") from None
    if isinstance(data, (int, float)) and not isinstance(data, bool):
        data = {"reward": data}
    if not isinstance(data, dict) or not data:
        raise _Unreadable(f"{REWARD_JSON} holds no object of rewards: {raw[:80]!r}")
    rewards: dict[str, float] = {}
    for key, value in data.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _Unreadable(f"{REWARD_JSON}: {key!r} is not a number: {value!r}")
        try:
            number = float(value)  # an integer too large for a float raises
        except OverflowError:
            number = math.inf
        if not math.isfinite(number):
            raise _Unreadable(f"{REWARD_JSON}: {key!r} is not a finite number")
        rewards[str(key)] = number
    return rewards


def _parse(path: str, data: bytes) -> dict[str, float]:
    """The rewards of a reward file's bytes, read as its path (json or txt) says."""
    return _parse_reward_json(data) if path == REWARD_JSON else _parse_reward_txt(data)


def judge(
    api,
    result,
    container_id,
    by_exit_code,
    agent_timeout,
    verifier_timeout,
    window,
    *,
    reward_file: tuple[str, bytes] | None = None,
) -> None:
    """Fills `result`'s outcome, reward, rewards and reason from its stages and (unless the
    task is judged by the test script's exit status) the reward files of `container_id`, or
    `reward_file` (path, bytes): the regular reward file the check's own exec read there."""
    agent, verifier = result["agent"], result["verifier"]
    if verifier["timed_out"]:
        result.update(outcome="timed_out", reward=None, rewards=None)
        result["reason"] = f"the tests passed their {verifier_timeout:g} s timeout"
        return
    if not by_exit_code:
        try:
            if reward_file is not None:
                where, data = reward_file
                rewards = _parse(where, data)
            else:
                rewards, where = _read_rewards(api, container_id, window)
        except _Unreadable as exc:
            result.update(outcome="failed", reward=None, rewards=None, reason=str(exc))
            if agent["timed_out"]:
                result["outcome"] = "timed_out"
                result["reason"] = f"the agent passed its {agent_timeout:g} s timeout, then {exc}"
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
    api, container_id: str, window: tuple[float, float]
) -> tuple[dict[str, float], str]:
    """Harbor's reward, read as harbor 0.26.0 reads it: reward.json (an object of numbers)
    when it exists, else reward.txt (a number). Both were deleted just before the tests."""
    del window  # kept in the signature: the caller times the check
    for path in (REWARD_JSON, REWARD_TXT):
        fetched = _fetch(api, container_id, path)
        if fetched is None:
            continue
        data, _mtime, problem = fetched
        if problem:
            raise _Unreadable(problem)
        return _parse(path, data), path
    raise _Unreadable(f"no reward: the tests wrote neither {REWARD_JSON} nor {REWARD_TXT}")


def _fetch(api, container_id: str, path: str, depth: int = 0):
    """(bytes, mtime, "") of a regular file of a container, following symbolic links a few
    times; (None, mtime, problem) when it cannot be used; None when it does not exist."""
    try:
        stream, stat = api.get_archive(container_id, path)
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
            target = posixpath.normpath(posixpath.join(posixpath.dirname(path), member.linkname))
            followed = _fetch(api, container_id, target, depth + 1)
            if followed is None:
                return None, mtime, f"{path} is a link to {target}, which does not exist"
            return followed
        if not member.isfile():
            return None, mtime, f"{path} is not a regular file"
        if member.size > REWARD_MAX_BYTES:
            return None, mtime, f"{path} is larger than {REWARD_MAX_BYTES} bytes"
        handle = archive.extractfile(member)
        return (handle.read() if handle is not None else b""), mtime, ""


__all__ = ["REWARD_JSON", "REWARD_MAX_BYTES", "REWARD_TXT", "judge"]
