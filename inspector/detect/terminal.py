"""Flags on terminal tasks (plain data in, findings out; no ORM).

Terminal runs are judged by the same rules as function runs (inspector/detect/flags.py), with
three additions:
- a task whose image does not build is `broken_environment`, with the build as evidence, and
  nothing else is concluded from its runs;
- probes run in the set's mode, and in a faithful set also in isolated mode: a probe that passes
  is named with the mode, and whether isolating the check defeats it;
- a probe that beats nearly every task of the set is a weakness of the harness, not of the
  tasks: it becomes one finding on the inspection, and no task is flagged for it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from inspector.detect.codes import SEVERITY, FlagCode
from inspector.detect.flags import Analysis, FlagFinding, analyse_runs

BUILD_FAILED = "build_failed"
MAX_BUILD_EVIDENCE = 3


@dataclass(frozen=True)
class TerminalAnalysis:
    findings: list[FlagFinding]
    stats: dict
    harness_findings: list[dict]
    # task key -> probe -> mode -> passed in any run of that mode
    probe_results: dict[int, dict[str, dict[str, bool]]]


def analyse_terminal_runs(
    runs: list[dict[str, Any]],
    *,
    mode: str,
    task_keys: Iterable[int] = (),
    harness_share: float = 0.9,
    harness_min_tasks: int = 3,
) -> TerminalAnalysis:
    """`runs`: one dict per run with run_id, task_key, solution_kind, solution_key (the probe
    name for probes), outcome, mode (faithful / isolated) and reason. `mode` is the set's mode."""
    task_keys = list(task_keys)
    broken: dict[int, list[dict]] = {}
    for run in runs:
        if run["outcome"] == BUILD_FAILED:
            broken.setdefault(run["task_key"], []).append(run)

    probe_results: dict[int, dict[str, dict[str, bool]]] = {}
    probe_counted: dict[str, set[int]] = {}
    for run in runs:
        if run["solution_kind"] != "probe" or run["task_key"] in broken:
            continue
        if run["outcome"] == "sandbox_error":
            continue
        modes = probe_results.setdefault(run["task_key"], {}).setdefault(run["solution_key"], {})
        run_mode = run.get("mode") or mode
        modes[run_mode] = modes.get(run_mode, False) or run["outcome"] == "passed"
        if run_mode == mode:
            probe_counted.setdefault(run["solution_key"], set()).add(run["task_key"])

    other = "isolated" if mode == "faithful" else None
    harness: list[dict] = []
    harness_probes: set[str] = set()
    for probe, tried in sorted(probe_counted.items()):
        beaten = sorted(t for t in tried if probe_results[t][probe].get(mode))
        if len(tried) < harness_min_tasks or len(beaten) < harness_share * len(tried):
            continue
        harness_probes.add(probe)
        finding = {
            "probe": probe,
            "mode": mode,
            "tasks_beaten": len(beaten),
            "tasks_tried": len(tried),
            "explanation": (
                f"the {probe} probe earned a full reward on {len(beaten)} of {len(tried)} tasks "
                f"in {mode} mode: a weakness of how the tasks are run, not of each task"
            ),
        }
        if other:
            still = [t for t in beaten if probe_results[t][probe].get(other)]
            finding["isolated_defeats"] = not still
            finding["explanation"] += (
                "; isolated mode defeats it"
                if not still
                else f"; isolated mode does not defeat it on {len(still)} of those tasks"
            )
        harness.append(finding)

    counted_rows = [
        {
            "run_id": run["run_id"],
            "task_key": run["task_key"],
            "solution_kind": run["solution_kind"],
            "solution_key": run["solution_key"],
            "outcome": run["outcome"],
        }
        for run in runs
        if run["task_key"] not in broken
        and (run.get("mode") or mode) == mode
        and not (run["solution_kind"] == "probe" and run["solution_key"] in harness_probes)
    ]
    analysis: Analysis = analyse_runs(counted_rows, task_keys=task_keys or ())

    findings: list[FlagFinding] = []
    for finding in analysis.findings:
        if finding.code == FlagCode.REWARD_HACKABLE:
            finding = replace(
                finding,
                explanation=_hackable_explanation(
                    finding.explanation,
                    {
                        probe: modes
                        for probe, modes in probe_results.get(finding.task_key, {}).items()
                        if probe not in harness_probes
                    },
                    mode,
                    other,
                ),
            )
        findings.append(finding)
    for task_key, failed in broken.items():
        reason = failed[0].get("reason") or "the image did not build"
        findings.append(
            FlagFinding(
                task_key=task_key,
                code=FlagCode.BROKEN_ENVIRONMENT,
                severity=SEVERITY[FlagCode.BROKEN_ENVIRONMENT],
                explanation=f"the environment did not build: {reason}",
                evidence_run_ids=tuple(r["run_id"] for r in failed[:MAX_BUILD_EVIDENCE]),
            )
        )
    findings.sort(key=lambda f: (f.task_key, -f.severity))
    return TerminalAnalysis(
        findings=findings,
        stats=analysis.stats,
        harness_findings=harness,
        probe_results=probe_results,
    )


def _hackable_explanation(
    base: str, probes: dict[str, dict[str, bool]], mode: str, other: str | None
) -> str:
    beaten = sorted(p for p, modes in probes.items() if modes.get(mode))
    text = f"{base} (in {mode} mode)"
    if other and beaten:
        defeated = [p for p in beaten if other in probes[p] and not probes[p][other]]
        survives = [p for p in beaten if probes[p].get(other)]
        if defeated:
            text += f"; isolated mode defeats {', '.join(defeated)}: the cure is the harness"
        if survives:
            text += f"; isolated mode does not defeat {', '.join(survives)}: the cure is the task"
    return text
