"""Reading an upload of answer-graded tasks (questions with a label: our JSONL, GSM8K's or
MATH's lines, and an optional JSONL of sampled responses) whole, into the rows to store, and
telling such an upload by its first line. `tasksets` stores the rows as a new version of the set;
the reading of the lines themselves is in inspector/formats/answers.py."""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

from django.conf import settings

from inspector.models import Task

# How far the first line of an upload is read to tell its kind: any real first line fits (a
# SWE-bench instance with a long PASS_TO_PASS list is a few MiB).
_SNIFF_BYTES = 64 << 20
_CHUNK = 1 << 20


@dataclass
class ParsedAnswerSet:
    tasks: list[dict] = field(default_factory=list)  # Task fields
    samples: list[dict] = field(
        default_factory=list
    )  # task_id, sample_id, completion, answer, model


def first_line_object(stream: BinaryIO) -> dict | None:
    """The first line of a JSONL upload (plain or gzip) as a JSON object, or None when it is
    not one; the stream is left where it was. The line is read whole (up to _SNIFF_BYTES)."""
    start = stream.tell()
    try:
        head = _first_line(stream)
    finally:
        stream.seek(start)
    if head is None:
        return None
    try:
        obj = json.loads(head.removeprefix(b"\xef\xbb\xbf"))
    except (ValueError, RecursionError):
        return None
    return obj if isinstance(obj, dict) else None


def _first_line(stream: BinaryIO) -> bytes | None:
    """The first non-blank line's bytes, or None when there is none within _SNIFF_BYTES (or
    the gzip stream is broken)."""
    buffer = b""
    try:
        for chunk in _chunks(stream):
            buffer += chunk
            while True:
                line, newline, rest = buffer.partition(b"\n")
                if not newline:
                    break
                if line.strip():
                    return line
                buffer = rest
            if len(buffer) > _SNIFF_BYTES:
                return None
    except zlib.error:
        return None
    return buffer if buffer.strip() else None


def _chunks(stream: BinaryIO):
    """The stream's bytes a chunk at a time, decompressed (no chunk over _CHUNK) when gzip."""
    raw = stream.read(_CHUNK)
    if not raw.startswith(b"\x1f\x8b"):
        while raw:
            yield raw
            raw = stream.read(_CHUNK)
        return
    inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
    pending = raw
    while pending and not inflate.eof:
        data = inflate.decompress(pending, _CHUNK)
        if data:
            yield data
        pending = inflate.unconsumed_tail or stream.read(_CHUNK)


def is_answer_upload(stream: BinaryIO) -> bool:
    """Is this JSONL a set of answer-graded tasks, going by its first line's fields?"""
    from inspector.formats.answers import looks_like_answer_tasks

    obj = first_line_object(stream)
    return obj is not None and looks_like_answer_tasks(obj)


def answer_parse(*, tasks_file: BinaryIO, tasks_name: str) -> ParsedAnswerSet:
    """Read the questions whole into rows (the samples are streamed: `answer_samples`). Raises
    TaskSetFormatError with every problem, by file, line and field; nothing is stored."""
    from inspector.formats.answers import read_answer_taskset
    from inspector.formats.humaneval import content_hash

    parsed = read_answer_taskset(
        tasks_file, tasks_name=tasks_name, max_bytes=settings.UPLOAD_MAX_BYTES
    )
    rows = ParsedAnswerSet()
    for t in parsed.tasks:
        rows.tasks.append(
            {
                "task_id": t.task_id,
                "kind": Task.ANSWER,
                "prompt": t.question,
                "canonical_solution": t.label,
                "test": "",
                "entry_point": "",
                "answer_type": t.answer_type[:20],
                "domain": t.domain[:200],
                "metadata": {**t.metadata, "label_from": t.label_from}
                if t.label_from
                else t.metadata,
                "source": t.source,
                "content_hash": content_hash(t.source),
            }
        )
    return rows


def answer_samples(
    samples_file: BinaryIO, *, samples_name: str, task_ids: set[str], tasks_name: str
) -> Iterator[list[dict]]:
    """The sampled responses in batches of rows, streamed (100,000 questions with 16 samples
    each never sit in memory at once). Every problem is gathered and raised as
    TaskSetFormatError once the file is read: the caller stores batches where it can undo them
    (the import's transaction)."""
    from inspector.formats.answers import iter_answer_samples

    for batch in iter_answer_samples(
        samples_file,
        samples_name=samples_name or "samples file",
        known_task_ids=task_ids,
        tasks_name=tasks_name,
        max_bytes=settings.ANSWER_SAMPLES_MAX_BYTES,
    ):
        yield [
            {
                "task_id": s.task_id,
                "sample_id": s.sample_id,
                "completion": s.response,
                "answer": s.answer,
                "model": s.model[:200],
            }
            for s in batch
        ]
