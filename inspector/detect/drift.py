"""`drift`: a task whose behaviour changed between two inspections of the same version, as an
environment rots (plain data in, findings out; no ORM).

Compared with the previous finished inspection: a reference that passed every run and now passes
none; a check that became flaky; a sample pass rate that moved beyond noise, by Fisher's exact
test on the two inspections' sample passes and failures (not a fixed gap: 1 of 2 against 2 of 2
is noise, 1 of 40 against 38 of 40 is not). A check flagged flaky in both inspections does not
drift on its pass rates: they are the check's own coin, whatever they move to."""

from __future__ import annotations

from dataclasses import dataclass

from inspector.detect.codes import SEVERITY, FlagCode
from inspector.detect.flags import FlagFinding


@dataclass(frozen=True)
class Outcomes:
    """One task in one inspection."""

    reference_passed: int
    reference_total: int
    sample_passed: int
    sample_total: int
    flags: frozenset[str] = frozenset()

    def rate(self, which: str) -> float | None:
        total = getattr(self, f"{which}_total")
        return getattr(self, f"{which}_passed") / total if total else None


def drift_findings(
    current: dict[int, Outcomes],
    previous: dict[int, Outcomes],
    *,
    current_id: int,
    previous_id: int,
    p_value: float = 0.01,
) -> list[FlagFinding]:
    from scipy.stats import fisher_exact

    findings = []
    for task_key, now in sorted(current.items()):
        before = previous.get(task_key)
        if before is None:
            continue
        changes: list[str] = []
        smallest_p = 1.0
        if FlagCode.FLAKY in now.flags and FlagCode.FLAKY in before.flags:
            continue
        if (
            before.reference_total
            and before.reference_passed == before.reference_total
            and now.reference_total
            and now.reference_passed == 0
        ):
            changes.append(
                f"the reference passed {before.reference_passed}/{before.reference_total} runs "
                f"in #{previous_id} and passes {now.reference_passed}/{now.reference_total} "
                f"in #{current_id}"
            )
            smallest_p = 0.0
        if FlagCode.FLAKY in now.flags and FlagCode.FLAKY not in before.flags:
            changes.append(f"the check was steady in #{previous_id} and is flaky in #{current_id}")
            smallest_p = 0.0
        if before.sample_total and now.sample_total:
            table = [
                [before.sample_passed, before.sample_total - before.sample_passed],
                [now.sample_passed, now.sample_total - now.sample_passed],
            ]
            _, p = fisher_exact(table)
            if p < p_value:
                changes.append(
                    f"the sample pass rate moved from {before.rate('sample'):.2f} "
                    f"({before.sample_passed}/{before.sample_total}) in #{previous_id} to "
                    f"{now.rate('sample'):.2f} ({now.sample_passed}/{now.sample_total}) in "
                    f"#{current_id} (Fisher's exact test, p = {p:.2g})"
                )
                smallest_p = min(smallest_p, p)
        if not changes:
            continue
        confidence = round(1.0 - smallest_p, 4)
        findings.append(
            FlagFinding(
                task_key=task_key,
                code=FlagCode.DRIFT,
                severity=max(1, round(SEVERITY[FlagCode.DRIFT] * (0.5 + 0.5 * confidence))),
                explanation="; ".join(changes),
                evidence_run_ids=(),
                confidence=confidence,
                evidence={
                    "previous_inspection": previous_id,
                    "inspection": current_id,
                    "changes": changes,
                    "before": _as_dict(before),
                    "after": _as_dict(now),
                },
            )
        )
    return findings


def _as_dict(outcomes: Outcomes) -> dict:
    return {
        "reference": [outcomes.reference_passed, outcomes.reference_total],
        "samples": [outcomes.sample_passed, outcomes.sample_total],
        "flags": sorted(outcomes.flags),
    }
