"""Benchmark: the answer verifier's items per second on real GSM8K responses, per sandbox backend,
and how often its verdict agrees with the answer each response's source extracted.

Data (../shared/data/answers/, see its README): the responses of every samples_*.jsonl.gz file
(each row: task_id "gsm8k/<i>", response, answer, model), labelled with the line i of
gsm8k_test.jsonl.gz (the label follows "#### " in `answer`). One batch per file, in one
sandbox start each; items/s counts the whole call (sandbox start and imports included).

Agreement: the source's own `answer` equals the label (as numbers) exactly when our verdict is
correct, for the `auto` rule and the `gsm8k` rule; a sanity figure, not a target (the sources
extract differently: "A: 4" lines, program outputs, "the answer (arabic numerals) is"). The
program-of-thought files (`*-pot-*`) hold programs whose answer is what they print when run, which
no text rule can see: the figure is also given without them.

Run: .venv/bin/python bench/verifier.py [--backends local,docker] [--files N] [--rules auto,gsm8k]
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from fractions import Fraction
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from workers.sandbox import Limits, get_sandbox  # noqa: E402
from workers.sandbox.verifier import VerifyItem, verify_answers  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "answers"


def read_jsonl(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def as_number(text: str) -> Fraction | None:
    # The source's extracted answers and GSM8K labels are plain numbers (trusted, known data).
    try:
        return Fraction(str(text).replace(",", "").replace("$", "").strip().rstrip("."))
    except (ValueError, ZeroDivisionError):
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backends", default="local,docker")
    parser.add_argument("--rules", default="auto,gsm8k")
    parser.add_argument("--files", type=int, default=0, help="only the first N sample files")
    args = parser.parse_args()

    labels = [
        row["answer"].rsplit("#### ", 1)[1].strip()
        for row in read_jsonl(DATA / "gsm8k_test.jsonl.gz")
    ]
    files = sorted(DATA.glob("samples_*.jsonl.gz"))
    if args.files:
        files = files[: args.files]
    batches = []
    for path in files:
        rows = read_jsonl(path)
        items, source_right = [], []
        for n, row in enumerate(rows):
            label = labels[int(row["task_id"].split("/")[1])]
            items.append(VerifyItem(f"{path.name}:{n}", str(row["response"]), label))
            got, want = as_number(row.get("answer", "")), as_number(label)
            source_right.append(got is not None and got == want)
        batches.append(
            (path.name.removeprefix("samples_").removesuffix(".jsonl.gz"), items, source_right)
        )
    total = sum(len(items) for _, items, _ in batches)
    print(f"{total} responses in {len(batches)} files; one batch (one sandbox start) per file")

    for backend in args.backends.split(","):
        sandbox = get_sandbox(backend)
        for rule in args.rules.split(","):
            seconds = agree = correct = agree_text = text_items = 0.0
            statuses: dict[str, int] = {}
            per_file = []
            for name, items, source_right in batches:
                started = time.monotonic()
                verdicts = verify_answers(sandbox, items, rule=rule, limits=Limits(wall_seconds=60))
                took = time.monotonic() - started
                seconds += took
                same = sum(v.correct == s for v, s in zip(verdicts, source_right, strict=True))
                agree += same
                if "-pot-" not in name:
                    agree_text += same
                    text_items += len(items)
                correct += sum(v.correct for v in verdicts)
                for v in verdicts:
                    statuses[v.status] = statuses.get(v.status, 0) + 1
                per_file.append(f"{name} {len(items) / took:.0f}/s {same / len(items):.3f}")
            print(
                f"{backend:6} {rule:6} {total / seconds:7.0f} items/s  agreement {agree / total:.4f}"
                f" (without programs {agree_text / max(text_items, 1):.4f})"
                f"  correct {correct / total:.3f}  statuses {statuses}"
            )
            for line in per_file:
                print(f"    {line}")


if __name__ == "__main__":
    main()
