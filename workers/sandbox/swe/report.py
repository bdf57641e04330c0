"""The report of a run, as the swebench harness writes its report.json, and the run's outcome.

`report(f2p, p2p, tests)` sorts each listed test into success or failure; `resolved_status` is
swebench's ResolvedStatus: FULL when every FAIL_TO_PASS and every PASS_TO_PASS test succeeds,
PARTIAL when some FAIL_TO_PASS tests (not none, not all) succeed and every PASS_TO_PASS test does,
NO otherwise.

One difference from swebench, on purpose: a test succeeds only when it passed. swebench counts an
XFAIL as a success and leaves a skipped test out of both lists (and a list with nothing in it
counts as all passed), so a solution that skips every listed test resolves there.
`swebench_resolved_status` gives swebench's verdict beside ours, so a reviewer sees where the
two part.
"""

from __future__ import annotations

SUCCESS = frozenset({"passed"})


def report(f2p: list[str], p2p: list[str], tests: dict[str, str]) -> dict:
    def split(ids: list[str]) -> dict[str, list[str]]:
        success = [t for t in ids if tests.get(t, "missing") in SUCCESS]
        failure = [t for t in ids if tests.get(t, "missing") not in SUCCESS]
        return {"success": success, "failure": failure}

    return {"FAIL_TO_PASS": split(f2p), "PASS_TO_PASS": split(p2p)}


def _rate(part: dict[str, list[str]]) -> float:
    total = len(part["success"]) + len(part["failure"])
    return 1.0 if total == 0 else len(part["success"]) / total


def resolved_status(result_report: dict) -> str:
    """ "full" | "partial" | "no" (swebench's ResolvedStatus over `result_report`)."""
    f2p = _rate(result_report["FAIL_TO_PASS"])
    p2p = _rate(result_report["PASS_TO_PASS"])
    if f2p == 1 and p2p == 1:
        return "full"
    if 0 < f2p < 1 and p2p == 1:
        return "partial"
    return "no"


def swebench_resolved_status(f2p: list[str], p2p: list[str], tests: dict[str, str]) -> str:
    """The verdict swebench 2.x/3.x would give: passed and xfailed succeed, failed, error and
    missing fail, skipped tests count in neither list. (Our reader cannot tell an xfail from a
    skip, both are JUnit <skipped>: both are left out here.)"""

    def split(ids: list[str]) -> dict[str, list[str]]:
        success = [t for t in ids if tests.get(t, "missing") == "passed"]
        failure = [t for t in ids if tests.get(t, "missing") in ("failed", "error", "missing")]
        return {"success": success, "failure": failure}

    return resolved_status({"FAIL_TO_PASS": split(f2p), "PASS_TO_PASS": split(p2p)})


__all__ = ["SUCCESS", "report", "resolved_status", "swebench_resolved_status"]
