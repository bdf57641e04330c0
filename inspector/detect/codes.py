"""The flags a task can carry and how severe each is: importable without pandas."""

from __future__ import annotations

from enum import StrEnum


class FlagCode(StrEnum):
    UNSOLVABLE = "unsolvable"
    MISLABELED = "mislabeled"
    FLAKY = "flaky"
    REWARD_HACKABLE = "reward_hackable"
    BROKEN_ENVIRONMENT = "broken_environment"
    WEAK_TESTS = "weak_tests"
    AMBIGUOUS = "ambiguous"
    NO_SIGNAL = "no_signal"
    DUPLICATE = "duplicate"
    ANSWER_LEAK = "answer_leak"
    ANOMALY = "anomaly"
    DRIFT = "drift"
    SLOW_REFERENCE = "slow_reference"
    # Answer-graded tasks: the verifier cannot parse the label itself, so no answer can match it.
    UNVERIFIABLE_LABEL = "unverifiable_label"
    # Repository tasks: the fix is reachable in the repository's own history (git log --all,
    # reflog, dangling objects), so a solver can copy it instead of writing it.
    SOLUTION_LEAK = "solution_leak"


SEVERITY: dict[FlagCode, int] = {
    FlagCode.BROKEN_ENVIRONMENT: 95,
    FlagCode.DRIFT: 85,
    FlagCode.UNSOLVABLE: 90,
    # No response can earn the reward: as broken for training as an unsolvable task.
    FlagCode.UNVERIFIABLE_LABEL: 90,
    FlagCode.MISLABELED: 80,
    FlagCode.SOLUTION_LEAK: 80,
    FlagCode.REWARD_HACKABLE: 70,
    FlagCode.FLAKY: 60,
    FlagCode.AMBIGUOUS: 75,
    FlagCode.WEAK_TESTS: 65,
    FlagCode.ANSWER_LEAK: 40,
    FlagCode.DUPLICATE: 30,
    FlagCode.SLOW_REFERENCE: 25,
    FlagCode.NO_SIGNAL: 20,
    FlagCode.ANOMALY: 10,
}

# Shown, ranked and reported, but they keep a task out of the clean manifest only where the
# ADVISORY_FLAGS_THAT_BLOCK setting names them. Every other flag blocks until dismissed.
ADVISORY: frozenset[str] = frozenset(
    {
        FlagCode.NO_SIGNAL,
        FlagCode.DUPLICATE,
        FlagCode.ANSWER_LEAK,
        FlagCode.ANOMALY,
        FlagCode.SLOW_REFERENCE,
    }
)


def combined_severity(severities: list[int] | tuple[int, ...]) -> int:
    """A task's place in the review queue from its flags' severities (each 1..100, already
    lowered for doubt): the chance that at least one is right, reading each as a probability,
    so two strong flags outrank one, and many weak ones never outrank one strong flag by much."""
    remaining = 1.0
    for value in severities:
        remaining *= 1.0 - max(0, min(100, value)) / 100
    return round(100 * (1.0 - remaining))
