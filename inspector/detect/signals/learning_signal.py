"""Learning signal: learnability p(1 - p) of a task and its distribution over a task set, and
`no_signal`, a task whose samples all pass or all fail (a group-relative policy gradient learns
nothing from it)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np


def learnability(p: float | None) -> float | None:
    """p(1 - p) for a sample pass rate p: the variance of a pass/fail reward, 0 when every
    rollout gets the same reward (a group-relative policy gradient then learns nothing)."""
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return None
    return float(p) * (1.0 - float(p))


def learnability_distribution(pass_rates: Iterable[float | None]) -> dict[str, Any]:
    """A task set's learnability: count, mean, quartiles, the share with none, and a histogram
    over [0, 0.25] (the maximum, at p = 0.5) in five bins."""
    values = np.array([v for v in map(learnability, pass_rates) if v is not None], dtype=float)
    if values.size == 0:
        return {"tasks": 0, "mean": None, "quartiles": None, "zero_share": None, "histogram": []}
    edges = np.linspace(0.0, 0.25, 6)
    counts, _ = np.histogram(values, bins=edges)
    return {
        "tasks": int(values.size),
        "mean": round(float(values.mean()), 4),
        "quartiles": [round(float(q), 4) for q in np.quantile(values, [0.25, 0.5, 0.75])],
        "zero_share": round(float((values == 0).mean()), 4),
        "histogram": [
            {"from": round(float(lo), 4), "to": round(float(hi), 4), "tasks": int(count)}
            for lo, hi, count in zip(edges[:-1], edges[1:], counts, strict=True)
        ],
    }


@dataclass(frozen=True)
class NoSignal:
    outcome: str  # "pass" or "fail": what every sample did
    samples: int
    confidence: float  # 1 - 2 * 0.5**n: how unlikely one outcome would be at p = 0.5
    explanation: str


def no_signal(
    sample_outcomes: Mapping[Any, float | bool] | Iterable[float | bool], *, min_samples: int = 2
) -> NoSignal | None:
    """Every sample shares one outcome: all passed every run (rate 1) or all failed every run
    (rate 0), with at least `min_samples` samples. Takes pass rates (or booleans), as a mapping
    from sample id or as a plain iterable. A sample that both passed and failed gives signal."""
    values = list(
        sample_outcomes.values() if isinstance(sample_outcomes, Mapping) else sample_outcomes
    )
    rates = [float(value) for value in values if value is not None]
    if len(rates) < max(min_samples, 1):
        return None
    if all(rate == 1.0 for rate in rates):
        outcome = "pass"
    elif all(rate == 0.0 for rate in rates):
        outcome = "fail"
    else:
        return None
    count = len(rates)
    return NoSignal(
        outcome=outcome,
        samples=count,
        confidence=round(1.0 - 2 * 0.5**count, 4),
        explanation=(
            f"all {count} samples {'pass' if outcome == 'pass' else 'fail'} on every run: "
            "learnability p(1-p) = 0, a group-relative policy gradient learns nothing here"
        ),
    )
