"""Signals beyond pass and fail, as pure functions over plain data (pandas and scikit-learn; no
database, no sandbox): surviving mutants (weak tests), behaviour groups (an ambiguous prompt), a
reference that disagrees with the passing samples (a wrong reference), learnability (no
learning signal), near-duplicate prompts, an answer leaked in the prompt, and anomalies.

Behaviour vectors come from `inspector.detect.behaviour`. Two digests are compared only where
both are known: `~skipped` never counts, and where the reference timed out, nothing is compared
with it. Every result carries a confidence in [0, 1] and a one-line explanation that names what
a reviewer can check (an input, two outputs, sample ids).

One module per signal family; the names below are the package's public ones:

- `compare`: comparing behaviour vectors (`Difference`, where two vectors differ, the passing
  samples), shared by the families that compare vectors;
- `mutant_survivors`: surviving mutants, a check too weak to kill mutants of the reference;
- `behaviour_groups`: samples grouped by behaviour, an ambiguous prompt;
- `reference`: a reference that disagrees with the passing samples, or is too slow;
- `accepted_wrong`: samples the check accepts that disagree with the reference;
- `learning_signal`: learnability and `no_signal`;
- `duplicates`: near-duplicate prompts;
- `leaks`: an answer leaked in the prompt;
- `outliers`: anomalous tasks (IsolationForest).
"""

from __future__ import annotations

from inspector.detect.signals.accepted_wrong import (
    AcceptedDisagreement,
    AcceptedWrong,
    accepted_disagreements,
)
from inspector.detect.signals.behaviour_groups import (
    ACCEPTED,
    REJECTED,
    Group,
    GroupsResult,
    sample_groups,
)
from inspector.detect.signals.compare import Difference
from inspector.detect.signals.duplicates import DuplicatePair, near_duplicates
from inspector.detect.signals.leaks import MIN_LEAK_CHARS as MIN_LEAK_CHARS
from inspector.detect.signals.leaks import AnswerLeak, answer_leak
from inspector.detect.signals.learning_signal import (
    NoSignal,
    learnability,
    learnability_distribution,
    no_signal,
)
from inspector.detect.signals.mutant_survivors import MutationResult, Survivor, surviving_mutants
from inspector.detect.signals.outliers import ANOMALY_SECONDS_FLOOR as ANOMALY_SECONDS_FLOOR
from inspector.detect.signals.outliers import ANOMALY_VALUE_FLOOR as ANOMALY_VALUE_FLOOR
from inspector.detect.signals.outliers import MIN_ANOMALY_ROWS as MIN_ANOMALY_ROWS
from inspector.detect.signals.outliers import AnomalyScore, anomalies
from inspector.detect.signals.reference import (
    Disagreement,
    SlowReference,
    reference_disagrees,
    slow_reference,
)

# As before the split; the constants MIN_LEAK_CHARS, MIN_ANOMALY_ROWS, ANOMALY_SECONDS_FLOOR and
# ANOMALY_VALUE_FLOOR are public too (re-exported above) but were never in `__all__`.
__all__ = [
    "ACCEPTED",
    "AcceptedDisagreement",
    "AcceptedWrong",
    "REJECTED",
    "AnomalyScore",
    "AnswerLeak",
    "Difference",
    "Disagreement",
    "DuplicatePair",
    "Group",
    "GroupsResult",
    "MutationResult",
    "NoSignal",
    "SlowReference",
    "Survivor",
    "accepted_disagreements",
    "anomalies",
    "answer_leak",
    "learnability",
    "learnability_distribution",
    "near_duplicates",
    "no_signal",
    "reference_disagrees",
    "sample_groups",
    "slow_reference",
    "surviving_mutants",
]
