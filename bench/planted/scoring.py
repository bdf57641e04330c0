"""Scoring an inspection's report against the planted truth (`Score`) and printing it
(`print_score`): per flag planted, raised, true positives, precision, recall and confidence
against the targets, per planted kind, the share of clean tasks flagged, and the missed and
falsely flagged tasks."""

from __future__ import annotations

import collections
import re
from dataclasses import dataclass, field

from bench.planted.catalogue import FLAGS, KINDS, UNPLANTED_ADVISORY

RECALL_TARGET = 0.95
PRECISION_TARGET = 0.9
CLEAN_TARGET = 0.01


@dataclass
class Score:
    inspections: int = 0
    planted: collections.Counter = field(default_factory=collections.Counter)
    raised: collections.Counter = field(default_factory=collections.Counter)
    hits: collections.Counter = field(default_factory=collections.Counter)
    missed: dict[str, collections.Counter] = field(default_factory=dict)  # flag -> task -> times
    false: dict[str, collections.Counter] = field(default_factory=dict)
    confidence: dict[tuple[str, bool], list[float]] = field(default_factory=dict)
    clean_tasks: int = 0
    clean_flagged: int = 0
    clean_codes: collections.Counter = field(default_factory=collections.Counter)
    kind_tasks: collections.Counter = field(default_factory=collections.Counter)
    kind_found: collections.Counter = field(default_factory=collections.Counter)
    kind_extra: dict[str, collections.Counter] = field(default_factory=dict)
    absent: set[str] = field(default_factory=set)  # truth tasks missing from a report
    unplanted: dict[str, collections.Counter] = field(default_factory=dict)  # UNPLANTED_ADVISORY
    said: dict[tuple[str, str], str] = field(default_factory=dict)  # (flag, task) -> explanation

    def add(self, report: list[dict], truth: dict[str, set[str]], kinds: dict[str, str]) -> None:
        """Count one inspection's report lines against the truth."""
        self.inspections += 1
        lines = {line["task_id"]: line for line in report}
        for task_id, expected in truth.items():
            line = lines.get(task_id)
            if line is None:
                self.absent.add(task_id)
                continue
            raised = set(line.get("flags") or [])
            for code in raised & set(UNPLANTED_ADVISORY):
                self.unplanted.setdefault(code, collections.Counter())[task_id] += 1
            raised -= set(UNPLANTED_ADVISORY)
            confidence = line.get("flag_confidence") or {}
            kind = kinds.get(task_id, "?")
            for code in expected:
                self.planted[code] += 1
                if code not in raised:
                    self.missed.setdefault(code, collections.Counter())[task_id] += 1
            for code in raised:
                self.raised[code] += 1
                hit = code in expected
                if hit:
                    self.hits[code] += 1
                else:
                    self.false.setdefault(code, collections.Counter())[task_id] += 1
                    explanations = line.get("flag_explanations") or {}
                    if isinstance(explanations, dict) and explanations.get(code):
                        self.said[(code, task_id)] = str(explanations[code])
                value = confidence.get(code) if isinstance(confidence, dict) else None
                if isinstance(value, int | float):
                    self.confidence.setdefault((code, hit), []).append(float(value))
            if not expected:
                self.clean_tasks += 1
                if raised:
                    self.clean_flagged += 1
                    self.clean_codes.update(raised)
            self.kind_tasks[kind] += 1
            main = _kind_flag(kind)
            if main is None or main in raised:
                self.kind_found[kind] += 1
            extra = raised - expected
            if extra:
                self.kind_extra.setdefault(kind, collections.Counter()).update(extra)

    def codes(self) -> list[str]:
        return list(FLAGS) + sorted((set(self.raised) | set(self.planted)) - set(FLAGS))


def _kind_flag(kind: str) -> str | None:
    base = kind.split("/")[0]
    return KINDS[base][0] if base in KINDS else None


def _ratio(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def _shown(value: float | None, target: float | None = None, below: bool = False) -> str:
    if value is None:
        return "-"
    mark = ""
    if target is not None:
        mark = " ok" if (value <= target if below else value >= target) else " !"
    return f"{value:.2f}{mark}"


def print_score(score: Score, kinds: dict[str, str]) -> None:
    print(
        f"\nper flag, over {score.inspections} inspection(s) "
        f"(targets: precision >= {PRECISION_TARGET}, recall >= {RECALL_TARGET}; ! = below):"
    )
    print(
        f"{'flag':18}{'planted':>8}{'raised':>8}{'TP':>6}{'precision':>11}{'recall':>9}{'conf TP/FP':>13}"
    )
    for code in score.codes():
        planted, raised, hits = score.planted[code], score.raised[code], score.hits[code]
        precision = _ratio(hits, raised)
        recall = _ratio(hits, planted)
        tp_conf = score.confidence.get((code, True))
        fp_conf = score.confidence.get((code, False))
        conf = "-"
        if tp_conf or fp_conf:
            conf = "/".join(f"{sum(v) / len(v):.2f}" if v else "-" for v in (tp_conf, fp_conf))
        print(
            f"{code:18}{planted:8d}{raised:8d}{hits:6d}"
            f"{_shown(precision, PRECISION_TARGET if raised or planted else None):>11}"
            f"{_shown(recall, RECALL_TARGET if planted else None):>9}{conf:>13}"
        )
    share = _ratio(score.clean_flagged, score.clean_tasks)
    print(
        f"clean tasks with any flag: {score.clean_flagged} of {score.clean_tasks} "
        f"({_shown(share, CLEAN_TARGET, below=True)}; target <= {CLEAN_TARGET:.0%})"
        + (
            " by " + ", ".join(f"{c} {n}" for c, n in sorted(score.clean_codes.items()))
            if score.clean_codes
            else ""
        )
    )
    print(
        "\nper planted kind: tasks, share that got the kind's flag, flags raised beyond the truth"
    )
    for kind in sorted(score.kind_tasks):
        tasks = score.kind_tasks[kind]
        extra = score.kind_extra.get(kind)
        said = ", ".join(f"{c} {n}" for c, n in sorted(extra.items())) if extra else "-"
        found = _ratio(score.kind_found[kind], tasks) if _kind_flag(kind) else None
        print(f"  {kind:24}{tasks:5d}  {_shown(found):>6}  extra: {said}")

    def listed(counter: collections.Counter) -> str:
        return ", ".join(
            f"{task_id} ({kinds.get(task_id, '?')}{f' x{n}' if score.inspections > 1 else ''})"
            for task_id, n in sorted(counter.items(), key=lambda item: _natural(item[0]))
        )

    print("\nmissed (planted, not raised):")
    for code in score.codes():
        if score.missed.get(code):
            print(f"  {code}: {listed(score.missed[code])}")
    print("false positives (raised, not planted), with the platform's explanation:")
    for code in score.codes():
        for task_id, times in sorted(
            score.false.get(code, {}).items(), key=lambda i: _natural(i[0])
        ):
            said = score.said.get((code, task_id), "")
            said = said if len(said) <= 110 else said[:109] + "…"
            repeat = f" x{times}" if score.inspections > 1 else ""
            print(f"  {code}: {task_id} ({kinds.get(task_id, '?')}{repeat}) {said}")
    for code, counter in sorted(score.unplanted.items()):
        print(f"{code} (not planted, not scored): {listed(counter)}")
    if score.absent:
        print(f"tasks missing from the report: {', '.join(sorted(score.absent, key=_natural))}")


def _natural(task_id: str) -> tuple:
    return tuple(
        (0, int(part)) if part.isdigit() else (1, part) for part in re.split(r"(\d+)", task_id)
    )
