"""The built planted-defect set (`PlantedSet`: tasks, samples, truth, and per task its kind,
what was planted and each sample's role) and the roles a sample can have."""

from __future__ import annotations

import collections
from collections.abc import Sequence
from dataclasses import dataclass, field

SAMPLE_ROLES = ("correct", "wrong", "reading-a", "reading-b")


@dataclass
class PlantedSet:
    tasks: list[dict]  # HumanEval lines
    samples: list[dict]  # task_id, sample_id, completion
    truth: dict[str, set[str]]  # task_id -> the flags the platform should raise (empty: clean)
    kinds: dict[str, str] = field(default_factory=dict)  # task_id -> kind ("clean", "flaky/hash")
    details: dict[str, str] = field(default_factory=dict)  # task_id -> what was planted, how
    roles: dict[str, dict[str, str]] = field(default_factory=dict)  # task_id -> sample -> role
    seed: int = 0
    left_out: dict[str, str] = field(default_factory=dict)  # HumanEval task_id -> why

    def counts(self) -> dict[str, int]:
        return dict(sorted(collections.Counter(self.kinds.values()).items()))

    def only(self, prefixes: Sequence[str]) -> PlantedSet:
        """The tasks whose kind starts with one of `prefixes` ("weak_tests", "clean"), with
        their samples and truth: to measure one detector quickly."""
        keep = {t for t, kind in self.kinds.items() if kind.startswith(tuple(prefixes))}
        return PlantedSet(
            tasks=[t for t in self.tasks if t["task_id"] in keep],
            samples=[s for s in self.samples if s["task_id"] in keep],
            truth={t: flags for t, flags in self.truth.items() if t in keep},
            kinds={t: kind for t, kind in self.kinds.items() if t in keep},
            details={t: d for t, d in self.details.items() if t in keep},
            roles={t: r for t, r in self.roles.items() if t in keep},
            seed=self.seed,
            left_out=self.left_out,
        )
