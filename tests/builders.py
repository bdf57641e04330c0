"""Task-set builders for tests: a HumanEval-style task from a body and a check, the planted
task set (one task per planted defect, plus a clean one) with its samples and the flags it must
get, and JSONL bytes from rows."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


# --- Task sets -----------------------------------------------------------------------------------


def task(task_id: str, *, body: str, test: str, entry_point: str = "f", **extra) -> dict:
    return {
        "task_id": task_id,
        "prompt": f'def {entry_point}(x):\n    """{task_id}"""\n',
        "canonical_solution": body,
        "test": test,
        "entry_point": entry_point,
        **extra,
    }


# One task per planted defect, plus a clean one. The flaky check fails half of the time.
PLANTED_TASKS = [
    task(
        "planted/clean",
        body="    return x + 1\n",
        test="def check(candidate):\n    assert candidate(1) == 2\n    assert candidate(5) == 6\n",
    ),
    task(
        "planted/unsolvable",
        body="    return x + 1\n",
        test="def check(candidate):\n    assert candidate(1) == 2\n    assert candidate(1) == 3\n",
    ),
    task(
        "planted/mislabeled",
        body="    return x - 1\n",
        test="def check(candidate):\n    assert candidate(1) == 2\n",
    ),
    task(
        "planted/flaky",
        body="    return x * 2\n",
        test="import random\n\ndef check(candidate):\n    assert candidate(2) == 4\n"
        "    assert random.random() < 0.5\n",
    ),
    task(
        "planted/hackable", body="    return x\n", test="def check(candidate):\n    candidate(3)\n"
    ),
]
PLANTED_SAMPLES = [
    {"task_id": "planted/clean", "completion": "    return 1 + x\n", "sample_id": "good"},
    {"task_id": "planted/clean", "completion": "    return x\n", "sample_id": "wrong"},
    {"task_id": "planted/unsolvable", "completion": "    return 2\n"},
    {"task_id": "planted/mislabeled", "completion": "    return x + 1\n"},
    {"task_id": "planted/hackable", "completion": "    return x\n"},
    {"task_id": "planted/flaky", "completion": "    return 2 * x\n"},
    {"task_id": "planted/flaky", "completion": "    return x + x\n"},
]
PLANTED_FLAGS = {
    "planted/clean": [],
    "planted/unsolvable": ["unsolvable"],
    "planted/mislabeled": ["mislabeled"],
    "planted/flaky": ["flaky"],
    "planted/hackable": ["reward_hackable"],
}


def jsonl(rows: list[dict]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()
