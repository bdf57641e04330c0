"""Precision and recall per flag of the planted answer-graded benchmark.

    python -m bench.answers.scoring TRUTH.json FLAGS.json

FLAGS.json maps task_id -> the flag codes raised (a list). Prints, per planted defect, how many
tasks carry it, how many were flagged with it, precision and recall, then the share of clean
tasks (no planted defect) that carry a blocking flag, and that carry any flag.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from dataclasses import dataclass

from inspector.detect.codes import ADVISORY

SCORED = (
    "mislabeled",
    "ambiguous",
    "unsolvable",
    "unverifiable_label",
    "answer_leak",
    "duplicate",
    "no_signal",
)


@dataclass(frozen=True)
class FlagScore:
    code: str
    planted: int
    flagged: int
    hits: int

    @property
    def precision(self) -> float | None:
        return self.hits / self.flagged if self.flagged else None

    @property
    def recall(self) -> float | None:
        return self.hits / self.planted if self.planted else None


@dataclass(frozen=True)
class Scores:
    per_flag: list[FlagScore]
    clean: int
    clean_blocked: int
    clean_any: int
    other_flags: dict[str, int]  # codes raised that nothing planted (e.g. reward_hackable)

    @property
    def clean_blocked_share(self) -> float:
        return self.clean_blocked / self.clean if self.clean else 0.0


def score(truth: Mapping[str, list[str]], flags: Mapping[str, set[str] | list[str]]) -> Scores:
    per_flag = []
    for code in SCORED:
        planted = {t for t, d in truth.items() if code in d}
        flagged = {t for t, f in flags.items() if code in f and t in truth}
        per_flag.append(FlagScore(code, len(planted), len(flagged), len(planted & flagged)))
    clean = [t for t, d in truth.items() if not d]
    blocked = [t for t in clean if any(c not in ADVISORY for c in flags.get(t, ()))]
    any_flag = [t for t in clean if flags.get(t)]
    other: dict[str, int] = {}
    for f in flags.values():
        for c in f:
            if c not in SCORED:
                other[c] = other.get(c, 0) + 1
    return Scores(per_flag, len(clean), len(blocked), len(any_flag), other)


def report(scores: Scores, title: str = "") -> str:
    def pct(value: float | None) -> str:
        return "   -" if value is None else f"{value:4.2f}"

    lines = [title] if title else []
    lines.append(
        f"{'flag':<20}{'planted':>8}{'flagged':>8}{'hits':>6}{'precision':>11}{'recall':>8}"
    )
    for s in scores.per_flag:
        lines.append(
            f"{s.code:<20}{s.planted:>8}{s.flagged:>8}{s.hits:>6}{pct(s.precision):>11}{pct(s.recall):>8}"
        )
    lines.append(
        f"clean tasks: {scores.clean}; with a blocking flag: {scores.clean_blocked} "
        f"({scores.clean_blocked_share:.1%}); with any flag: {scores.clean_any}"
    )
    if scores.other_flags:
        lines.append(
            "other flags raised: "
            + ", ".join(f"{c} {n}" for c, n in sorted(scores.other_flags.items()))
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Score flags against the planted truth.")
    parser.add_argument("truth", help="truth.json written by bench.answers.planted")
    parser.add_argument("flags", help="a JSON object: task_id -> list of flag codes")
    args = parser.parse_args(argv)
    with open(args.truth) as fh:
        truth = json.load(fh)
    with open(args.flags) as fh:
        flags = {k: set(v) for k, v in json.load(fh).items()}
    print(report(score(truth, flags)))


if __name__ == "__main__":
    main()
