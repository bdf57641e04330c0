"""The flags a task can carry and how severe each is: importable without pandas."""

from __future__ import annotations

from enum import StrEnum


class FlagCode(StrEnum):
    UNSOLVABLE = "unsolvable"
    MISLABELED = "mislabeled"
    FLAKY = "flaky"
    REWARD_HACKABLE = "reward_hackable"
    BROKEN_ENVIRONMENT = "broken_environment"


SEVERITY: dict[FlagCode, int] = {
    FlagCode.BROKEN_ENVIRONMENT: 95,
    FlagCode.UNSOLVABLE: 90,
    FlagCode.MISLABELED: 80,
    FlagCode.REWARD_HACKABLE: 70,
    FlagCode.FLAKY: 60,
}
