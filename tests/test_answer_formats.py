from __future__ import annotations

import gzip
import io
import json
from pathlib import Path
from typing import Any

import pytest

from inspector.formats.answers import (
    LABEL_FROM_BOXED,
    LABEL_FROM_GSM8K,
    ParsedAnswerTaskSet,
    TaskSetFormatError,
    generated_id_prefix,
    iter_answer_samples,
    last_boxed,
    looks_like_answer_tasks,
    read_answer_taskset,
)

REAL = Path(__file__).resolve().parent / "data" / "answers"  # a copy of ../shared/data/answers


def jsonl(*rows: Any) -> bytes:
    return b"".join(
        (row if isinstance(row, bytes) else json.dumps(row).encode()) + b"\n" for row in rows
    )


def read(
    tasks: bytes, samples: bytes | None = None, *, name: str = "tasks.jsonl", **kw: Any
) -> ParsedAnswerTaskSet:
    return read_answer_taskset(
        io.BytesIO(tasks),
        tasks_name=name,
        samples_file=None if samples is None else io.BytesIO(samples),
        samples_name="samples.jsonl",
        **kw,
    )


def refusal(tasks: bytes, samples: bytes | None = None, **kw: Any) -> list[str]:
    with pytest.raises(TaskSetFormatError) as caught:
        read(tasks, samples, **kw)
    return [str(issue) for issue in caught.value.issues]


def test_our_own_schema_imports_with_its_label_type_domain_and_metadata() -> None:
    parsed = read(
        jsonl(
            {
                "task_id": "q/1",
                "question": "What is 6 times 7?",
                "answer": "42",
                "answer_type": "number",
                "domain": "arithmetic",
                "metadata": {"source": "hand"},
            }
        )
    )
    (task,) = parsed.tasks
    assert (task.task_id, task.label, task.answer_type, task.domain) == (
        "q/1",
        "42",
        "number",
        "arithmetic",
    )
    assert task.metadata == {"source": "hand"} and task.label_from == "answer"


def test_a_gsm8k_line_imports_unchanged_with_the_label_after_the_hashes_and_commas_removed() -> (
    None
):
    line = {
        "question": "How many?",
        "answer": "She has 400 + 600 = <<400+600=1000>>1000.\n#### 1,000",
    }
    (task,) = read(jsonl(line), name="gsm8k_test.jsonl").tasks
    assert task.label == "1000" and task.label_from == LABEL_FROM_GSM8K
    assert task.source == line  # the whole answer text is kept
    assert task.task_id == "gsm8k/0"


def test_a_math_line_takes_the_last_boxed_answer_with_nested_braces_and_its_subject() -> None:
    line = {
        "problem": "Simplify.",
        "solution": "First $\\boxed{1}$ is wrong; it is $\\boxed{\\frac{\\sqrt{2}}{2}}$.",
        "subject": "Algebra",
        "level": "Level 3",
        "unique_id": "test/algebra/1.json",
    }
    (task,) = read(jsonl(line)).tasks
    assert task.label == "\\frac{\\sqrt{2}}{2}" and task.label_from == LABEL_FROM_BOXED
    assert task.task_id == "test/algebra/1.json" and task.domain == "Algebra"
    assert task.metadata["level"] == "Level 3"


def test_a_math_line_with_an_answer_field_uses_it_rather_than_the_solution() -> None:
    (task,) = read(jsonl({"problem": "p", "solution": "\\boxed{2}", "answer": "3"})).tasks
    assert task.label == "3"


def test_missing_task_ids_are_numbered_by_line_with_the_file_name_up_to_its_first_underscore() -> (
    None
):
    rows = jsonl({"question": "a?", "answer": "1"}, b"", {"question": "b?", "answer": "2"})
    parsed = read(rows, name="uploads/myset_v2.jsonl.gz")
    assert [t.task_id for t in parsed.tasks] == ["myset/0", "myset/2"]
    assert generated_id_prefix("gsm8k_test.jsonl.gz") == "gsm8k"


def test_the_real_gsm8k_file_and_its_eight_output_sets_import_with_matching_ids() -> None:
    for samples in sorted(REAL.glob("samples_*.jsonl.gz")):
        with open(REAL / "gsm8k_test.jsonl.gz", "rb") as tf, open(samples, "rb") as sf:
            parsed = read_answer_taskset(
                tf, tasks_name="gsm8k_test.jsonl.gz", samples_file=sf, samples_name=samples.name
            )
        assert len(parsed.tasks) == 1319 and len(parsed.samples) >= 1317
    assert parsed.tasks[0].label == "18"


def test_the_real_math500_file_imports_with_its_ids_and_labels() -> None:
    with open(REAL / "math500_test.jsonl.gz", "rb") as tf:
        parsed = read_answer_taskset(tf, tasks_name="math500_test.jsonl.gz")
    assert len(parsed.tasks) == 500
    assert parsed.tasks[0].task_id == "test/precalculus/807.json"
    assert parsed.tasks[0].label == "\\left( 3, \\frac{\\pi}{2} \\right)"


def test_a_gzip_file_with_a_bom_reads_like_the_plain_one() -> None:
    plain = jsonl({"task_id": "a", "question": "q", "answer": "1"})
    assert read(gzip.compress(b"\xef\xbb\xbf" + plain)).tasks == read(plain).tasks


def test_samples_get_generated_ids_per_task_and_may_give_only_an_answer() -> None:
    parsed = read(
        jsonl({"task_id": "a", "question": "q", "answer": "1"}),
        jsonl(
            {"task_id": "a", "response": "so \\boxed{1}", "model": "m"},
            {"task_id": "a", "answer": 1},
            {"task_id": "a", "response": "x", "answer": None},
        ),
    )
    assert [(s.sample_id, s.response, s.answer, s.model) for s in parsed.samples] == [
        ("s1", "so \\boxed{1}", "", "m"),
        ("s2", "", "1", ""),
        ("s3", "x", "", ""),
    ]


def test_every_bad_line_is_reported_with_file_line_and_field_and_nothing_is_returned() -> None:
    tasks = jsonl(
        {"task_id": "a", "question": "q", "answer": "1"},
        {"task_id": "a", "question": "q2", "answer": "2"},
        {"task_id": "b", "question": "  ", "answer": "2"},
        {"task_id": "c", "question": "q"},
        [1, 2],
        {"task_id": "d", "question": "q", "answer": ["1"]},
        {"task_id": "e", "question": "q", "answer": "1", "answer_type": "colour"},
        {"question": "gsm", "answer": "no final\n#### "},
    )
    samples = jsonl(
        {"task_id": "zzz", "response": "1"},
        {"task_id": "a", "model": 3, "response": "1"},
        {"task_id": "a"},
        {"task_id": "a", "sample_id": "x", "response": "1"},
        {"task_id": "a", "sample_id": "x", "response": "2"},
    )
    problems = refusal(tasks, samples)
    assert problems == [
        "tasks.jsonl, line 2, field 'task_id': duplicate task_id 'a', first on line 1",
        "tasks.jsonl, line 3, field 'question': must not be empty",
        "tasks.jsonl, line 4, field 'answer': missing: it is the label",
        "tasks.jsonl, line 5: not a JSON object: got an array",
        "tasks.jsonl, line 6, field 'answer': must be a string or a number, got an array",
        "tasks.jsonl, line 7, field 'answer_type': must be one of number, expression, choice, text",
        "tasks.jsonl, line 8, field 'answer': nothing follows its final '####', so there is no label",
        "samples.jsonl, line 2, field 'model': must be a string, got a number",
        "samples.jsonl, line 3, field 'response': missing: a sample needs a `response`, an `answer` or both",
        "samples.jsonl, line 5, field 'sample_id': duplicate sample_id 'x' for task 'a', first on line 4",
    ]


def test_a_sample_for_an_unknown_task_is_refused() -> None:
    problems = refusal(
        jsonl({"task_id": "a", "question": "q", "answer": "1"}),
        jsonl({"task_id": "zzz", "answer": "1"}),
    )
    assert problems == ["samples.jsonl, line 1, field 'task_id': no task 'zzz' in tasks.jsonl"]


def test_a_file_over_the_size_limit_is_refused_whole() -> None:
    rows = jsonl(*({"task_id": str(i), "question": "q", "answer": "1"} for i in range(100)))
    assert refusal(rows, max_bytes=500) == ["tasks.jsonl: larger than the 500-byte limit"]


def test_streamed_samples_come_in_batches_and_problems_are_raised_at_the_end() -> None:
    rows = jsonl(
        *({"task_id": "a", "answer": str(i)} for i in range(25)), {"task_id": "nope", "answer": "1"}
    )
    stream = iter_answer_samples(
        io.BytesIO(rows), samples_name="s.jsonl", known_task_ids={"a"}, batch=10
    )
    sizes = []
    with pytest.raises(TaskSetFormatError) as caught:
        for batch in stream:
            sizes.append(len(batch))
    assert sizes == [10, 10, 5]
    assert [str(i) for i in caught.value.issues] == [
        "s.jsonl, line 26, field 'task_id': no task 'nope' in the tasks file"
    ]


def test_the_importer_can_tell_answer_tasks_from_function_tasks() -> None:
    assert looks_like_answer_tasks({"question": "q", "answer": "1"})
    assert looks_like_answer_tasks({"problem": "p", "solution": "\\boxed{1}"})
    assert not looks_like_answer_tasks(
        {"task_id": "t", "prompt": "def f():", "canonical_solution": "", "test": ""}
    )
    assert not looks_like_answer_tasks({"question": "q", "answer": "1", "test": "assert"})


def test_the_last_boxed_answer_ignores_an_unclosed_box() -> None:
    assert last_boxed("\\boxed{a} then \\boxed{b{c}} and \\boxed{oops") == "b{c}"
    assert last_boxed("no box") is None
