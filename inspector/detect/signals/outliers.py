"""Anomalies: tasks an IsolationForest isolates as outliers among a task set's per-task
features, each named by the features with the largest robust z-score."""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class AnomalyScore:
    """Unpacks as (score, features)."""

    score: float  # IsolationForest anomaly score in (0, 1]: about 0.5 is ordinary, near 1 odd
    features: list[str]  # the strongest features, by robust z-score, strongest first
    zscores: dict[str, float]  # robust z-score of each named feature
    values: dict[str, float]  # the task's value of each named feature
    usual: dict[str, float] | None = None  # the set's median of each named feature

    def __iter__(self) -> Iterator[Any]:
        return iter((self.score, self.features))

    @property
    def confidence(self) -> float:
        """0 at the ordinary score 0.5, 1 from 0.8 up."""
        return round(min(1.0, max(0.0, (self.score - 0.5) / 0.3)), 4)

    @property
    def explanation(self) -> str:
        parts = [
            f"{name}={_number(self.values.get(name))} (robust z {self.zscores.get(name, 0):+.1f})"
            for name in self.features
        ]
        return f"unusual task (isolation score {self.score:.2f}): " + ", ".join(parts)


MIN_ANOMALY_ROWS = 10


ANOMALY_SECONDS_FLOOR = 0.5  # seconds: below this, durations differ by jitter
ANOMALY_VALUE_FLOOR = 0.05  # rates and shares


def anomalies(
    features: pd.DataFrame,
    *,
    contamination: float | str = "auto",
    seed: int = 0,
    top: int = 3,
) -> dict[Hashable, AnomalyScore]:
    """Tasks an IsolationForest (200 trees, seeded) isolates as outliers, keyed by the frame's
    index (one row per task; numeric columns such as pass rates, flake rate, survivor share,
    cluster count, durations; missing values take the column's median; constant columns are
    dropped). Each outlier names up to `top` features with the largest robust z-score
    |x - median| / (1.4826 * MAD) (the mean absolute deviation when the MAD is 0, and never less
    than a floor: ANOMALY_SECONDS_FLOOR for durations, ANOMALY_VALUE_FLOOR otherwise; capped at
    99) of at least 2; an outlier with no such feature is not reported. Fewer than
    MIN_ANOMALY_ROWS rows: no outliers (too few to say what is usual).
    """
    from sklearn.ensemble import IsolationForest

    numeric = features.select_dtypes(include=["number", "bool"]).astype(float)
    if len(numeric) < MIN_ANOMALY_ROWS or numeric.shape[1] == 0:
        return {}
    numeric = numeric.fillna(numeric.median()).fillna(0.0)
    numeric = numeric.loc[:, numeric.nunique() > 1]
    if numeric.shape[1] == 0:
        return {}
    model = IsolationForest(n_estimators=200, contamination=contamination, random_state=seed)
    matrix = numeric.to_numpy()
    outlier = model.fit_predict(matrix) == -1
    scores = -model.score_samples(matrix)

    median = numeric.median()
    mad = (numeric - median).abs().median() * 1.4826
    mean_dev = (numeric - median).abs().mean()
    scale = mad.where(mad > 0, mean_dev)
    # A difference smaller than these is noise whatever the spread: a quarter second of timing
    # jitter among identical tasks, a few points of a rate.
    floor = pd.Series(
        [
            ANOMALY_SECONDS_FLOOR if str(c).endswith("seconds") else ANOMALY_VALUE_FLOOR
            for c in numeric
        ],
        index=numeric.columns,
    )
    scale = np.maximum(scale, floor).replace(0, np.nan)
    z = ((numeric - median) / scale).fillna(0.0).clip(-99, 99)

    found: dict[Hashable, AnomalyScore] = {}
    for position in np.flatnonzero(outlier).tolist():
        row = z.iloc[position]
        order = row.abs().sort_values(ascending=False, kind="stable")
        names = [name for name in order.index[:top] if abs(row[name]) >= 2.0]
        if not names:
            continue  # isolated only by differences within the noise floors
        found[numeric.index[position]] = AnomalyScore(
            score=round(float(scores[position]), 4),
            features=[str(name) for name in names],
            zscores={str(name): round(float(row[name]), 2) for name in names},
            values={str(name): float(numeric.iloc[position][name]) for name in names},
            usual={str(name): round(float(median[name]), 4) for name in names},
        )
    return found


def _number(value: float | None) -> str:
    if value is None:
        return "?"
    return f"{value:.3g}"
