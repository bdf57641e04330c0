"""Answer-graded task sets (math and QA): a JSONL file of questions with reference answers (the
labels) and an optional JSONL file of model samples.

Three task line shapes import unchanged, one per line, mixed freely:
- our own: `task_id`, `question`, `answer` (the label), optional `answer_type`, `domain`,
  `metadata`;
- GSM8K's: `question`, `answer` whose final answer follows `#### ` (the label is what follows,
  commas removed; the whole answer text stays in `source`);
- MATH's: `problem` with `answer`, or with `solution` whose last `\\boxed{}` (braces balanced) is
  the label; `subject` becomes the domain, `level` and `unique_id` go into the metadata, and
  `unique_id` is the id. The vendored MATH-500 variant (`input`, `output`, `answer`) reads the
  same way, `input` being the problem and `output` the solution.

A line without `task_id` (nor MATH's `unique_id`) gets `<prefix>/<i>`, i being the 0-based line
number in the file and the prefix the file's name up to its first "_" or ".", so
`gsm8k_test.jsonl.gz` numbers its questions `gsm8k/0`, `gsm8k/1`, ... exactly as the GSM8K
sample files in ../shared/data/answers/ name them. `id_prefix` overrides the prefix.

Reading follows `humaneval.py`: plain or gzip, a BOM is skipped, a size limit per file, and
either every task and sample comes back or `TaskSetFormatError` lists every problem of both
files with file, line and field. `iter_answer_samples` streams a large samples file in batches
with the same checks, raising at the end (see its docstring for what that asks of the caller).
"""

from __future__ import annotations

import gzip
import re
import zlib
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any, BinaryIO

from inspector.formats.humaneval import (
    FormatIssue,
    LineReport,
    PrefixedStream,
    TaskSetFormatError,
    check_storable,
    content_hash,
    json_line,
    json_type,
    sample_id_of,
    short_text,
)

__all__ = [
    "ANSWER_TYPES",
    "FormatIssue",
    "ParsedAnswerSample",
    "ParsedAnswerTask",
    "ParsedAnswerTaskSet",
    "TaskSetFormatError",
    "generated_id_prefix",
    "gsm8k_label",
    "iter_answer_samples",
    "last_boxed",
    "looks_like_answer_tasks",
    "read_answer_taskset",
]

ANSWER_TYPES = ("", "number", "expression", "choice", "text")
DEFAULT_MAX_BYTES = 50_000_000
# A streamed samples file (100,000 questions x 16 samples) is read a line at a time, so its
# limit is on the whole file and can be far larger than what is held in memory at once.
DEFAULT_MAX_STREAM_BYTES = 8_000_000_000
DEFAULT_BATCH = 10_000
LABEL_FROM_ANSWER = "answer"
LABEL_FROM_GSM8K = "gsm8k ####"
LABEL_FROM_BOXED = "boxed in solution"

_GZIP_MAGIC = b"\x1f\x8b"
_UTF8_BOM = b"\xef\xbb\xbf"
_CHUNK_BYTES = 1 << 20
_FUNCTION_TASK_FIELDS = ("canonical_solution", "test")
_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")


@dataclass(frozen=True)
class ParsedAnswerTask:
    task_id: str
    question: str
    label: str
    answer_type: str  # "", number, expression, choice, text
    domain: str
    metadata: dict[str, Any]
    source: dict[str, Any]  # the line exactly as read
    label_from: str  # LABEL_FROM_ANSWER, LABEL_FROM_GSM8K or LABEL_FROM_BOXED
    # Beyond the agreed interface, with defaults: where the line was, and the hash of `source`
    # (as humaneval.py's tasks carry, for versions).
    line: int = 0
    content_hash: str = ""


@dataclass(frozen=True)
class ParsedAnswerSample:
    task_id: str
    sample_id: str
    response: str  # "" when the line gave only an answer
    answer: str  # "" when the line gave only a response (or `"answer": null`)
    model: str
    line: int = 0


@dataclass(frozen=True)
class ParsedAnswerTaskSet:
    tasks: list[ParsedAnswerTask]
    samples: list[ParsedAnswerSample] = field(default_factory=list)


def looks_like_answer_tasks(first_line: dict) -> bool:
    """Whether a task file's first object is an answer-graded task (so the importer can pick the
    reader): a question with an answer, or a problem with a solution or answer, and nothing of a
    function task (`canonical_solution`, `test`; `prompt` only where MATH-500's `input` is
    there too)."""
    if not isinstance(first_line, dict):
        return False
    if any(name in first_line for name in _FUNCTION_TASK_FIELDS):
        return False
    if "prompt" in first_line and "input" not in first_line:
        return False
    if "question" in first_line and "answer" in first_line:
        return True
    if "problem" in first_line and ("solution" in first_line or "answer" in first_line):
        return True
    return "input" in first_line and ("answer" in first_line or "output" in first_line)


def generated_id_prefix(file_name: str) -> str:
    """The prefix of generated task ids: the file's base name up to its first "_" or "."
    ("gsm8k_test.jsonl.gz" -> "gsm8k"), or "task" if that leaves nothing."""
    base = PurePath(file_name or "").name
    stem = re.split(r"[_.]", base, maxsplit=1)[0]
    return stem or "task"


def gsm8k_label(answer: str) -> str | None:
    """What follows GSM8K's last `#### `, commas removed ("#### 1,000" -> "1000"), or None."""
    at = answer.rfind("####")
    if at < 0:
        return None
    return answer[at + 4 :].strip().replace(",", "")


def last_boxed(text: str) -> str | None:
    """The content of the last `\\boxed{...}` (or `\\fbox{...}`) with balanced braces, or None."""
    found: str | None = None
    for match in _BOXED.finditer(text):
        depth, start = 1, match.end()
        at = start
        while at < len(text) and depth:
            char = text[at]
            if char == "\\" and at + 1 < len(text):
                at += 2  # an escaped brace does not count
                continue
            if char == "{":
                depth += 1
            elif char == "}":
                depth -= 1
            at += 1
        if depth == 0:
            found = text[start : at - 1]
    return found


def read_answer_taskset(
    tasks_file: BinaryIO,
    *,
    tasks_name: str,
    samples_file: BinaryIO | None = None,
    samples_name: str = "",
    max_bytes: int = DEFAULT_MAX_BYTES,
    id_prefix: str | None = None,
) -> ParsedAnswerTaskSet:
    """Read a tasks file and optionally a samples file; raise `TaskSetFormatError` on any issue.

    `max_bytes` limits each file's uncompressed size. Samples without a `sample_id` are named
    "s<n>", n being the sample's position among that task's samples in the file, as in
    humaneval.py."""
    issues: list[FormatIssue] = []
    tasks, ids_complete = _read_tasks(
        tasks_file, tasks_name, max_bytes, issues, id_prefix=id_prefix
    )
    samples: list[ParsedAnswerSample] = []
    if samples_file is not None:
        known = {t.task_id for t in tasks} if ids_complete else None
        for batch in _samples(
            samples_file,
            samples_name or "samples file",
            max_bytes,
            issues,
            known_task_ids=known,
            tasks_name=tasks_name,
            batch=DEFAULT_BATCH,
        ):
            samples.extend(batch)
    if issues:
        raise TaskSetFormatError(issues)
    return ParsedAnswerTaskSet(tasks=tasks, samples=samples)


def iter_answer_samples(
    samples_file: BinaryIO,
    *,
    samples_name: str,
    known_task_ids: Collection[str] | None,
    tasks_name: str = "the tasks file",
    max_bytes: int = DEFAULT_MAX_STREAM_BYTES,
    batch: int = DEFAULT_BATCH,
) -> Iterator[list[ParsedAnswerSample]]:
    """Stream a samples file: lists of up to `batch` valid samples, in file order.

    The checks are `read_answer_taskset`'s. Problems do not stop the stream: they are gathered,
    and once the file is read, `TaskSetFormatError` lists them all. Batches yielded before it
    were valid lines of a file that is refused as a whole, so a caller that stores batches as
    they come must do so where it can undo them (one transaction, or a staging table).
    Memory holds one batch and one (task_id, sample_id) -> line entry per sample, for the
    duplicate check."""
    issues: list[FormatIssue] = []
    known = set(known_task_ids) if known_task_ids is not None else None
    yield from _samples(
        samples_file,
        samples_name,
        max_bytes,
        issues,
        known_task_ids=known,
        tasks_name=tasks_name,
        batch=batch,
    )
    if issues:
        raise TaskSetFormatError(issues)


def _read_tasks(
    stream: BinaryIO,
    name: str,
    max_bytes: int,
    issues: list[FormatIssue],
    *,
    id_prefix: str | None,
) -> tuple[list[ParsedAnswerTask], bool]:
    """The valid tasks, and whether every line's task id is known (for the samples' check)."""
    prefix = id_prefix if id_prefix is not None else generated_id_prefix(name)
    tasks: list[ParsedAnswerTask] = []
    first_line: dict[str, int] = {}
    ids_complete = True
    nonblank = 0
    for line, obj in _json_lines(stream, name, max_bytes, issues):
        if line is None:  # the file itself could not be read
            return [], False
        nonblank += 1
        if obj is None:
            ids_complete = False
            continue
        before = len(issues)
        report = LineReport(issues, name, line)
        task_id = _task_id(obj, report, f"{prefix}/{line - 1}")
        question, label, label_from = _question_and_label(obj, report)
        answer_type = _optional(obj, "answer_type", str, "a string", report, "")
        if isinstance(answer_type, str) and answer_type not in ANSWER_TYPES:
            report("answer_type", f"must be one of {', '.join(t for t in ANSWER_TYPES if t)}")
        domain = _optional(obj, "domain", str, "a string", report, None)
        metadata = _optional(obj, "metadata", dict, "an object", report, {})
        subject = _optional(obj, "subject", str, "a string", report, "")
        check_storable(obj, report)
        if task_id is None:
            ids_complete = False
        elif task_id in first_line:
            report(
                "task_id",
                f"duplicate task_id {short_text(task_id)}, first on line {first_line[task_id]}",
            )
        else:
            first_line[task_id] = line
        if len(issues) == before:
            metadata = dict(metadata)
            for key in ("level", "unique_id"):
                if key in obj and key not in metadata:
                    metadata[key] = obj[key]
            tasks.append(
                ParsedAnswerTask(
                    task_id=task_id,
                    question=question,
                    label=label,
                    answer_type=answer_type,
                    domain=domain if domain is not None else subject,
                    metadata=metadata,
                    source=obj,
                    label_from=label_from,
                    line=line,
                    content_hash=content_hash(obj),
                )
            )
    if nonblank == 0:
        issues.append(FormatIssue(name, None, None, "contains no tasks"))
        ids_complete = False
    return tasks, ids_complete


def _task_id(obj: dict[str, Any], report: LineReport, generated: str) -> str | None:
    for key in ("task_id", "unique_id"):
        if key not in obj:
            continue
        value = obj[key]
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
        if not isinstance(value, str):
            report(key, f"must be a string or an integer, got {json_type(value)}")
            return None
        if not value.strip():
            report(key, "must not be empty")
            return None
        return value
    return generated


def _question_and_label(obj: dict[str, Any], report: LineReport) -> tuple[str, str, str]:
    """The question, the label and how it was read ("" for each when reported)."""
    shapes = (("question", None), ("problem", "solution"), ("input", "output"))
    found = [(key, solution) for key, solution in shapes if key in obj]
    if not found:
        report("question", "missing (a task needs `question`, or MATH's `problem`)")
        return "", "", ""
    key, solution_key = found[0]
    question = obj[key]
    if not isinstance(question, str):
        report(key, f"must be a string, got {json_type(question)}")
        question = ""
    elif not question.strip():
        report(key, "must not be empty")
    if "answer" in obj:
        answer = obj["answer"]
        if isinstance(answer, int | float) and not isinstance(answer, bool):
            return question, str(answer), LABEL_FROM_ANSWER
        if not isinstance(answer, str):
            report("answer", f"must be a string or a number, got {json_type(answer)}")
            return question, "", ""
        label, label_from = answer.strip(), LABEL_FROM_ANSWER
        if key == "question" and "####" in answer:
            label, label_from = gsm8k_label(answer) or "", LABEL_FROM_GSM8K
            if not label:
                report("answer", "nothing follows its final '####', so there is no label")
                return question, "", ""
        if not label:
            report("answer", "must not be empty: it is the label")
        return question, label, label_from
    if solution_key is not None and solution_key in obj:
        solution = obj[solution_key]
        if not isinstance(solution, str):
            report(solution_key, f"must be a string, got {json_type(solution)}")
            return question, "", ""
        boxed = last_boxed(solution)
        if boxed is None or not boxed.strip():
            report(solution_key, "holds no \\boxed{} answer and there is no `answer`: no label")
            return question, "", ""
        return question, boxed.strip(), LABEL_FROM_BOXED
    report(
        "answer",
        "missing: it is the label"
        + (f" (or give `{solution_key}` with \\boxed{{}})" if solution_key else ""),
    )
    return question, "", ""


def _samples(
    stream: BinaryIO,
    name: str,
    max_bytes: int,
    issues: list[FormatIssue],
    *,
    known_task_ids: Collection[str] | None,
    tasks_name: str,
    batch: int,
) -> Iterator[list[ParsedAnswerSample]]:
    pending: list[ParsedAnswerSample] = []
    per_task: dict[str, int] = {}
    first_line: dict[tuple[str, str], int] = {}
    for line, obj in _json_lines(stream, name, max_bytes, issues):
        if line is None or obj is None:
            continue
        before = len(issues)
        report = LineReport(issues, name, line)
        task_id = obj.get("task_id")
        if "task_id" not in obj:
            report("task_id", "missing")
        elif not isinstance(task_id, str):
            report("task_id", f"must be a string, got {json_type(task_id)}")
        elif not task_id.strip():
            report("task_id", "must not be empty")
        response = _optional(obj, "response", str, "a string", report, "")
        # null is what an extractor writes when it found nothing (the real PoT sample files do)
        answer = obj.get("answer") if obj.get("answer") is not None else ""
        if isinstance(answer, int | float) and not isinstance(answer, bool):
            answer = str(answer)
        elif not isinstance(answer, str):
            report("answer", f"must be a string or a number, got {json_type(answer)}")
        if "response" not in obj and obj.get("answer") is None:
            report("response", "missing: a sample needs a `response`, an `answer` or both")
        model = _optional(obj, "model", str, "a string", report, "")
        given_id = sample_id_of(obj, report)
        check_storable(obj, report)
        sample_id: str | None = None
        if isinstance(task_id, str) and task_id.strip():
            if known_task_ids is not None and task_id not in known_task_ids:
                report("task_id", f"no task {short_text(task_id)} in {tasks_name}")
            position = per_task.get(task_id, 0) + 1
            per_task[task_id] = position
            if given_id is not None:
                sample_id = given_id or f"s{position}"
                key = (task_id, sample_id)
                if key not in first_line:
                    first_line[key] = line
                elif given_id == "":
                    report(
                        "sample_id",
                        f"missing, so it is numbered {short_text(sample_id)}, which line "
                        f"{first_line[key]} already uses for task {short_text(task_id)}",
                    )
                else:
                    report(
                        "sample_id",
                        f"duplicate sample_id {short_text(sample_id)} for task "
                        f"{short_text(task_id)}, first on line {first_line[key]}",
                    )
        if len(issues) == before and sample_id is not None:
            pending.append(
                ParsedAnswerSample(
                    task_id=task_id,
                    sample_id=sample_id,
                    response=response,
                    answer=answer,
                    model=model,
                    line=line,
                )
            )
            if len(pending) >= batch:
                yield pending
                pending = []
    if pending:
        yield pending


def _optional(
    obj: dict[str, Any], name: str, kind: type, kind_name: str, report: LineReport, default: Any
) -> Any:
    if name not in obj:
        return default
    if not isinstance(obj[name], kind):
        report(name, f"must be {kind_name}, got {json_type(obj[name])}")
        return default
    return obj[name]


def _json_lines(
    stream: BinaryIO, file: str, max_bytes: int, issues: list[FormatIssue]
) -> Iterator[tuple[int | None, dict[str, Any] | None]]:
    """(line number, object) for every non-blank line, read a chunk at a time; the object is
    None if the line is unreadable (reported). (None, None) once if the file itself cannot be
    read (too large, bad gzip: reported), after which nothing more comes."""
    line = 0
    for raw in _raw_lines(stream, file, max_bytes, issues):
        if raw is None:
            yield None, None
            return
        line += 1
        if line == 1 and raw.startswith(_UTF8_BOM):
            raw = raw[len(_UTF8_BOM) :]
        blank, value = json_line(raw, line, file, issues)
        if not blank:
            yield line, value


def _raw_lines(
    stream: BinaryIO, file: str, max_bytes: int, issues: list[FormatIssue]
) -> Iterator[bytes | None]:
    """The file's lines (split on b"\\n" only, as humaneval.py does), uncompressed if gzip;
    None once, after reporting, if it is too large or not valid gzip."""
    head = stream.read(len(_GZIP_MAGIC))
    while len(head) < len(_GZIP_MAGIC):
        more = stream.read(len(_GZIP_MAGIC) - len(head))
        if not more:
            break
        head += more
    source: Any = PrefixedStream(head, stream)
    if head == _GZIP_MAGIC:
        source = gzip.GzipFile(fileobj=source, mode="rb")
    total = 0
    rest = b""
    try:
        while True:
            chunk = source.read(_CHUNK_BYTES)
            if not chunk:
                break
            total += len(chunk)
            if total > max_bytes:
                issues.append(
                    FormatIssue(file, None, None, f"larger than the {max_bytes}-byte limit")
                )
                yield None
                return
            parts = (rest + chunk).split(b"\n")
            rest = parts.pop()
            yield from parts
    except (OSError, EOFError, zlib.error) as exc:
        issues.append(FormatIssue(file, None, None, f"not a valid gzip file: {exc}"))
        yield None
        return
    yield rest
