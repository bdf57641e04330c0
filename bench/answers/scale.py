"""How the answer-graded reader and analysis scale: N synthetic questions with S samples each
(four simulated models), streamed from JSONL and analysed; prints seconds and peak memory.

    python -m bench.answers.scale [--tasks 100000] [--samples 16]

The verdicts are made directly from each sample's known answer (no verifier: this measures the
reader and `analyse_answers`, not the sandbox).
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import tempfile
import time
from pathlib import Path

import pandas as pd

from inspector.detect.answers import analyse_answers
from inspector.formats.answers import iter_answer_samples, read_answer_taskset

MODELS = {"m-large": 0.85, "m-medium": 0.7, "m-small": 0.55, "m-tiny": 0.4}
WORDS = "apples pears boxes pens coins marbles books cards stamps shells".split()


def write(folder: Path, tasks: int, samples: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    per_model = max(1, samples // len(MODELS))
    with open(folder / "tasks.jsonl", "w") as tf, open(folder / "samples.jsonl", "w") as sf:
        for i in range(tasks):
            a, b = rng.randint(1, 10**6), rng.randint(1, 10**6)
            word = rng.choice(WORDS)
            tf.write(
                json.dumps(
                    {
                        "task_id": f"s/{i}",
                        "question": f"Ann has {a} {word} and gets {b} more {rng.choice(WORDS)} as well as {i} {word}. How many {word}?",
                        "answer": str(a + b),
                    }
                )
                + "\n"
            )
            for model, p in MODELS.items():
                for _ in range(per_model):
                    value = a + b if rng.random() < p else a + b + rng.choice([-1, 1, 10])
                    sf.write(
                        json.dumps(
                            {
                                "task_id": f"s/{i}",
                                "model": model,
                                "response": f"Adding up gives \\boxed{{{value}}}.",
                                "answer": str(value),
                            }
                        )
                        + "\n"
                    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Scale of the answer-graded reader and analysis.")
    parser.add_argument("--tasks", type=int, default=100_000, help="questions")
    parser.add_argument("--samples", type=int, default=16, help="samples per question")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        started = time.perf_counter()
        write(folder, args.tasks, args.samples)
        print(
            f"wrote {args.tasks} questions x {args.samples} samples in {time.perf_counter() - started:.1f} s"
        )
        started = time.perf_counter()
        with open(folder / "tasks.jsonl", "rb") as tf:
            parsed = read_answer_taskset(tf, tasks_name="tasks.jsonl")
        keys = {t.task_id: k for k, t in enumerate(parsed.tasks)}
        labels = [t.label for t in parsed.tasks]
        columns: dict[str, list] = {
            c: []
            for c in (
                "run_id",
                "task_key",
                "sample_id",
                "model",
                "status",
                "extracted",
                "canonical",
                "correct",
                "response_chars",
            )
        }
        with open(folder / "samples.jsonl", "rb") as sf:
            for batch in iter_answer_samples(sf, samples_name="samples.jsonl", known_task_ids=keys):
                for s in batch:
                    key = keys[s.task_id]
                    columns["run_id"].append(len(columns["run_id"]) + 1)
                    columns["task_key"].append(key)
                    columns["sample_id"].append(s.sample_id)
                    columns["model"].append(s.model)
                    columns["status"].append("ok")
                    columns["extracted"].append(s.answer)
                    columns["canonical"].append(s.answer)
                    columns["correct"].append(s.answer == labels[key])
                    columns["response_chars"].append(len(s.response))
        read_seconds = time.perf_counter() - started
        tasks = pd.DataFrame(
            {
                "task_key": range(len(labels)),
                "task_id": [t.task_id for t in parsed.tasks],
                "question": [t.question for t in parsed.tasks],
                "label": labels,
                "label_status": "ok",
                "label_canonical": labels,
            }
        )
        verdicts = pd.DataFrame(columns)
        del columns
        started = time.perf_counter()
        analysis = analyse_answers(
            tasks,
            verdicts,
            pd.DataFrame(columns=["run_id", "task_key", "probe", "status", "extracted", "correct"]),
        )
        analyse_seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    flags: dict[str, int] = {}
    for f in analysis.findings:
        flags[str(f.code)] = flags.get(str(f.code), 0) + 1
    print(
        f"read (streamed) {len(verdicts)} samples of {len(tasks)} questions in {read_seconds:.1f} s"
    )
    print(f"analysed in {analyse_seconds:.1f} s; peak memory {peak:.0f} MB; flags {flags}")


if __name__ == "__main__":
    main()
