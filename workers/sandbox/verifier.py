"""Answer-graded tasks: verify model responses against reference answers ("labels") inside a
sandbox, many items per sandbox start.

`verify_answers(sandbox, items, rule=..., per_answer_seconds=..., limits=...)` sends the items,
with the program of `verifier_program.py`, into one sandbox of the backend's (its
`run_verifier`, which binds the verifier's libraries read-only at /opt/verifier) and returns one
`Verdict` per item, in order. The program runs the items in a forked child and copies each
verdict to stdout as soon as it is made, so the verdicts made before anything goes wrong are
kept. What the sandbox itself does about a bad item (a hang, a memory bomb, a crash) is in
verifier_program.py's docstring: the item is named, the rest go on in a fresh child.

If the sandbox dies anyway (its wall-clock or memory limit, an engine failure), the item it was
on gets "timeout" or "error" and the items after it are tried again in a fresh sandbox, at most
RESTARTS times per call; past that, and for items no sandbox could even start for, the status
is "sandbox_error". A batch is cut into several sandboxes only when its texts pass CHUNK_BYTES.

`rule` applies to every item but those with `bare=True`, whose text is the answer already
extracted (compared strictly, whatever the rule: `lenient` reads whole responses only).

Limits: `limits.memory_bytes`, `max_processes` and `file_bytes` hold for the sandbox as given;
`limits.wall_seconds` is the allowance for the sandbox's start and imports, to which each item
adds its hard limit (per_answer_seconds + 1); the output limits are sized for the batch.
"""

from __future__ import annotations

import base64
import json
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from workers.sandbox import verifier_program
from workers.sandbox.base import Execution, Limits, Outcome

logger = logging.getLogger(__name__)

PROGRAM_SOURCE = Path(verifier_program.__file__).read_text(encoding="utf-8")
RULES = verifier_program.RULES
ANSWER_TYPES = ("", *verifier_program.TYPES)
STATUSES = ("ok", "no_answer", "timeout", "error", "sandbox_error")
MAX_TEXT_CHARS = 8_000_000  # a longer response is not sent: status "error"
CHUNK_BYTES = 16 << 20  # texts per sandbox start (the program carries them)
RESTARTS = 3  # fresh sandboxes per call after one died mid-batch
LINE_BYTES = 16384  # the most one verdict line takes on stdout (2,300 characters, JSON-escaped)


@dataclass(frozen=True)
class VerifyItem:
    key: str  # the caller's id, returned as is
    text: str  # a model's whole response, or (bare=True) an answer already extracted
    label: str  # the reference answer as stored (e.g. "18", "\\frac{1}{2}", "B", "Paris")
    answer_type: str = ""  # "", "number", "expression", "choice", "text" ("" = infer)
    bare: bool = False


@dataclass(frozen=True)
class Verdict:
    key: str
    status: str  # "ok" | "no_answer" | "timeout" | "error" | "sandbox_error"
    extracted: str  # the final answer the rule took from the text ("" if none)
    canonical: str  # a normal form of `extracted`, equal for equivalent answers ("" if none)
    correct: bool  # the reward: extracted is equivalent to the label
    seconds: float
    detail: str = ""  # why


def verify_answers(
    sandbox,
    items: Sequence[VerifyItem],
    *,
    rule: str = "auto",
    per_answer_seconds: float = 2.0,
    limits: Limits,
) -> list[Verdict]:
    """One verdict per item, in the order of `items` (see the module docstring)."""
    if rule not in RULES:
        raise ValueError(f"unknown rule {rule!r}: accepted values are {', '.join(RULES)}")
    if not per_answer_seconds > 0:
        raise ValueError("per_answer_seconds must be positive")
    for item in items:
        if item.answer_type not in ANSWER_TYPES:
            raise ValueError(f"unknown answer_type {item.answer_type!r} for item {item.key!r}")
    verdicts: list[Verdict | None] = [None] * len(items)
    sendable = []
    for index, item in enumerate(items):
        if len(item.text) > MAX_TEXT_CHARS:
            verdicts[index] = Verdict(
                item.key, "error", "", "", False, 0.0,
                f"response longer than {MAX_TEXT_CHARS:,} characters: not verified",
            )  # fmt: skip
        else:
            sendable.append(index)
    restarts = RESTARTS
    for chunk in _chunks(items, sendable):
        pending = chunk
        while pending:
            done, why, retry = _run_batch(
                sandbox, items, pending, rule, per_answer_seconds, limits, verdicts
            )
            pending = pending[done:]
            if not pending:
                break
            if not retry or restarts <= 0:
                if retry:
                    why = f"{why} (after {RESTARTS} fresh sandboxes)"
                for index in pending:
                    verdicts[index] = Verdict(items[index].key, "sandbox_error", "", "", False,
                                              0.0, why)  # fmt: skip
                break
            restarts -= 1
    return [v for v in verdicts if v is not None]


def _chunks(items: Sequence[VerifyItem], indexes: list[int]) -> list[list[int]]:
    chunks: list[list[int]] = []
    size = 0
    for index in indexes:
        item = items[index]
        weight = 2 * (len(item.text) + len(item.label)) + 64  # a character is 1-4 UTF-8 bytes
        if not chunks or size + weight > CHUNK_BYTES:
            chunks.append([])
            size = 0
        chunks[-1].append(index)
        size += weight
    return chunks


def _run_batch(
    sandbox,
    items: Sequence[VerifyItem],
    indexes: list[int],
    rule: str,
    seconds: float,
    limits: Limits,
    verdicts: list[Verdict | None],
) -> tuple[int, str, bool]:
    """Run `indexes` in one sandbox, filling `verdicts`; returns how many got a verdict in a row
    from the start, why the sandbox ended early, and whether a fresh one may go on (not when
    the verifier could not even start)."""
    batch = {
        "rule": rule,
        "seconds": seconds,
        "items": [
            {"t": items[i].text, "l": items[i].label, "a": items[i].answer_type,
             "b": items[i].bare}
            for i in indexes
        ],
    }  # fmt: skip
    payload = base64.b64encode(
        json.dumps(batch, ensure_ascii=False).encode("utf-8", "surrogatepass")
    ).decode("ascii")
    program = f"{PROGRAM_SOURCE}\n\nmain({payload!r})\n"
    output = LINE_BYTES * (len(indexes) + 4)
    batch_limits = replace(
        limits,
        wall_seconds=limits.wall_seconds + len(indexes) * (seconds + 1.0),
        output_bytes=output,
        tail_bytes=output,
        file_bytes=max(limits.file_bytes, 2 * len(program)),
    )
    execution = sandbox.run_verifier(program, limits=batch_limits)
    ready, finished, results, fatal = _read(execution.stdout_tail)
    for position, result in results.items():
        if position < len(indexes):
            verdicts[indexes[position]] = _verdict(items[indexes[position]], result)
    done = 0
    while done < len(indexes) and verdicts[indexes[done]] is not None:
        done += 1
    if finished and done == len(indexes):
        return done, "", False
    if not ready:
        why = fatal or _why(execution)
        logger.warning("verifier sandbox did not start (%s): %s", sandbox.name, why)
        return 0, f"the verifier did not start: {why}", False
    why = _why(execution)
    logger.warning(
        "verifier sandbox ended at item %d of %d (%s): %s",
        done, len(indexes), sandbox.name, why,
    )  # fmt: skip
    if done < len(indexes):  # the item it was on
        item = items[indexes[done]]
        status = "timeout" if execution.outcome is Outcome.TIMED_OUT else "error"
        verdicts[indexes[done]] = Verdict(item.key, status, "", "", False, 0.0,
                                          f"the sandbox ended on this item: {why}")  # fmt: skip
        done += 1
    return done, why, True


def _read(stdout: str) -> tuple[bool, bool, dict[int, dict], str]:
    ready = finished = False
    fatal = ""
    results: dict[int, dict] = {}
    # "\n" only: str.splitlines() also breaks at U+2028, U+2029, U+0085 and other characters
    # that json.dumps(ensure_ascii=False) leaves raw inside a string, so one answer holding
    # them would cut its own verdict line in two (and the batch's framing with it).
    for line in stdout.split("\n"):
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if not isinstance(record, dict):
            continue
        if "ready" in record:
            ready = True
        elif "done" in record:
            finished = True
        elif "fatal" in record:
            fatal = str(record["fatal"])
        elif isinstance(record.get("i"), int):
            results[record["i"]] = record
    return ready, finished, results, fatal


def _verdict(item: VerifyItem, result: dict) -> Verdict:
    status = result.get("s")
    if status not in STATUSES:
        status = "error"
    seconds = result.get("t")
    return Verdict(
        key=item.key,
        status=status,
        extracted=str(result.get("e") or ""),
        canonical=str(result.get("c") or ""),
        correct=status == "ok" and result.get("ok") is True,
        seconds=float(seconds) if isinstance(seconds, int | float) and math.isfinite(seconds)
        else 0.0,
        detail=str(result.get("d") or ""),
    )  # fmt: skip


def _why(execution: Execution) -> str:
    parts = [execution.outcome.value]
    if execution.error:
        parts.append(execution.error)
    tail = execution.stderr_tail.strip()
    if tail:
        parts.append(tail[-300:])
    return ": ".join(parts)
