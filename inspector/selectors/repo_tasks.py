"""A repository task (SWE-bench instance) as its page shows it: its lists of tests, and per
solution of its latest inspection (no fix, the gold patch, each sample, each probe) the
swebench-style report of each run, and the leak scan."""

from __future__ import annotations

from inspector.models import Run, Task

_ORDER = {Run.NOFIX: 0, Run.REFERENCE: 1, Run.SAMPLE: 2, Run.PROBE: 3}
_RESOLVED = {"full": "resolved (full)", "partial": "partial", "no": "not resolved"}


def repo_page(task: Task) -> dict:
    """{"fail_to_pass", "pass_to_pass", "solutions": [{"label", "kind", "mode", "runs": [{"run",
    "repeat", "outcome", "resolved", "report", "collection_error", "apply", "seconds"}],
    "resolved_share"}], "leak": the scan's dict or None, "environment"}."""
    out = {
        "fail_to_pass": list(task.fail_to_pass or []),
        "pass_to_pass": list(task.pass_to_pass or []),
        "solutions": [],
        "leak": None,
        "leak_run": None,
        "environment": (task.metadata or {}).get("environment") or {},
    }
    if not task.last_inspection_id:
        return out
    runs = (
        Run.objects.filter(task=task, inspection_id=task.last_inspection_id)
        .select_related("sample")
        .order_by("pk")
    )
    groups: dict[tuple, dict] = {}
    for run in runs:
        detail = run.detail or {}
        if run.kind == Run.LEAK_SCAN:
            out["leak"] = detail.get("leak")
            out["leak_run"] = run
            continue
        if run.kind not in _ORDER:
            continue
        key = (_ORDER[run.kind], run.solution_label, run.mode)
        group = groups.setdefault(
            key, {"label": _label(run), "kind": run.kind, "mode": run.mode, "runs": []}
        )
        report = detail.get("report") or {}
        group["runs"].append(
            {
                "run": run,
                "repeat": run.repeat,
                "outcome": detail.get("outcome") or run.outcome,
                "resolved": _RESOLVED.get(detail.get("resolved") or "", ""),
                "swebench_resolved": detail.get("swebench_resolved") or "",
                "report": [
                    {
                        "name": name,
                        "success": (report.get(name) or {}).get("success") or [],
                        "failure": (report.get(name) or {}).get("failure") or [],
                    }
                    for name in ("FAIL_TO_PASS", "PASS_TO_PASS")
                ],
                "collection_error": detail.get("collection_error") or "",
                "apply": detail.get("apply") or {},
                "seconds": run.duration,
                "error": run.error,
            }
        )
    for key in sorted(groups):
        group = groups[key]
        passed = sum(r["run"].outcome == "passed" for r in group["runs"])
        group["resolved_share"] = f"{passed}/{len(group['runs'])}"
        out["solutions"].append(group)
    return out


def _label(run: Run) -> str:
    if run.kind == Run.REFERENCE:
        return "gold patch"
    if run.kind == Run.SAMPLE:
        model = run.sample.model if run.sample else ""
        return f"sample {run.sample.sample_id}" + (f" ({model})" if model else "")
    return run.solution_label
