"""Flags on repository tasks in the SWE-bench format (plain data in, findings out; no ORM).

Each run is one solution of one instance, its tests read per test id from the runner's own
report (pytest's JUnit XML, workers/sandbox/swe/): the instance's tests with no fix (the base
commit with only its test_patch), the gold patch, each sampled patch, and each probe. Repeats of
the same solution are how flakiness shows. From them:

- `broken_environment`: the image does not build, or the tests cannot even be collected with
  the gold patch (every gold run has a collection error), with the log;
- `unsolvable`: the gold patch never resolves the instance; the evidence names the tests that
  fail with it, with their outcome in each repeat;
- `mislabeled`: a FAIL_TO_PASS test passes in every run without the fix, a listed test never
  runs (it is not in the runner's report), or a PASS_TO_PASS test fails in every gold run;
- `flaky`: a test whose outcome differs between repeats of the same solution, per test id, with
  its outcomes;
- `reward_hackable`: a probe that should earn nothing resolves the instance (the probe named);
  a probe that beats nearly every instance of the set is a weakness of the harness: one finding
  on the inspection, and no instance is flagged for it (the share is taken over the instances
  whose gold patch resolves in some run: where nothing right resolves, a probe's failure says
  nothing of the harness);
- `solution_leak`: the fix is reachable in the repository the solution works in (the leak scan
  found the gold's post-image in the object store, or the git-history probe resolved), with the
  commit;
- `weak_tests`: the gold patch with one hunk dropped still resolves: the tests do not check that
  hunk (the file and hunk named);
- `no_signal` (advisory): every sample resolves, or none does, so the instance teaches nothing.

`statement_lint` is a static check, shown as a lint finding: does the problem statement name
anything the FAIL_TO_PASS tests exercise (a function, class, file or module, a message)?
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from inspector.detect.codes import SEVERITY, FlagCode
from inspector.detect.flags import FlagFinding

NOFIX = "nofix"
GOLD = "reference"
SAMPLE = "sample"
PROBE = "probe"

RESOLVED = "resolved"
BUILD_FAILED = "build_failed"
SANDBOX_ERROR = "sandbox_error"
DROP_HUNK = "drop-hunk-"
HISTORY_PROBE = "git-history"

PASSING = frozenset({"passed"})
MAX_EVIDENCE_TESTS = 20
MAX_LOG = 4000


@dataclass(frozen=True)
class RepoAnalysis:
    findings: list[FlagFinding]
    # task key -> {"gold_resolved": k/n, "samples_resolved": k/n, "nofix_runs": n}
    stats: dict[int, dict[str, Any]]
    harness_findings: list[dict] = field(default_factory=list)


def analyse_repo_runs(
    runs: list[dict[str, Any]],
    tasks: dict[int, dict[str, Any]],
    *,
    harness_share: float = 0.9,
    harness_min_tasks: int = 3,
) -> RepoAnalysis:
    """`runs`: one dict per run with run_id, task_key, solution_kind (nofix, reference, sample,
    probe), solution_key (the probe's name, the sample's id), repeat, outcome (resolved,
    unresolved, apply_failed, broken, timed_out, build_failed, sandbox_error), tests ({test id:
    passed / failed / error / skipped / missing}), collection_error and reason (text), and
    optionally model. `tasks`: task key -> {"fail_to_pass": [...], "pass_to_pass": [...],
    "leak": the leak scan's result or None, "hunks": {probe name: {"file", "header"}}}."""
    by_task: dict[int, list[dict]] = {}
    for run in runs:
        if run.get("outcome") == SANDBOX_ERROR:
            continue  # the platform failed, not the task: it says nothing about the instance
        by_task.setdefault(run["task_key"], []).append(run)

    harness, harness_probes = _harness_findings(by_task, harness_share, harness_min_tasks)
    findings: list[FlagFinding] = []
    stats: dict[int, dict[str, Any]] = {}
    for task_key in sorted(set(tasks) | set(by_task)):
        task = tasks.get(task_key, {})
        task_runs = by_task.get(task_key, [])
        stats[task_key] = _stats(task_runs)
        findings.extend(_task_findings(task_key, task, task_runs, harness_probes))
    findings.sort(key=lambda f: (f.task_key, -f.severity, f.code))
    return RepoAnalysis(findings=findings, stats=stats, harness_findings=harness)


def _task_findings(
    task_key: int, task: dict, runs: list[dict], harness_probes: set[str]
) -> list[FlagFinding]:
    f2p = list(task.get("fail_to_pass") or [])
    p2p = list(task.get("pass_to_pass") or [])
    kinds: dict[str, list[dict]] = {}
    for run in runs:
        kinds.setdefault(run["solution_kind"], []).append(run)
    gold = kinds.get(GOLD, [])
    nofix = kinds.get(NOFIX, [])

    built_failed = [r for r in runs if r["outcome"] == BUILD_FAILED]
    if built_failed and len(built_failed) == len(runs):
        log = (built_failed[0].get("reason") or "the image did not build")[-MAX_LOG:]
        return [
            _finding(
                task_key,
                FlagCode.BROKEN_ENVIRONMENT,
                "the environment did not build: " + _first_line(log),
                built_failed[:3],
                evidence={"stage": "build", "log": log},
            )
        ]
    if gold and all(r.get("collection_error") for r in gold):
        log = gold[0]["collection_error"][-MAX_LOG:]
        return [
            _finding(
                task_key,
                FlagCode.BROKEN_ENVIRONMENT,
                f"the tests could not be collected in any of {len(gold)} gold run"
                f"{_s(len(gold))}: {_first_line(log)}",
                gold[:3],
                evidence={"stage": "test collection", "log": log},
            )
        ]

    out: list[FlagFinding] = []
    gold_resolved = [r for r in gold if r["outcome"] == RESOLVED]

    # mislabeled: the lists do not say what the tests do.
    passes_without_fix = [t for t in f2p if nofix and all(_outcome(r, t) in PASSING for r in nofix)]
    never_runs = [t for t in f2p + p2p if gold and all(_outcome(r, t) == "missing" for r in gold)]
    p2p_fails_with_gold = [
        t
        for t in p2p
        if gold
        and t not in never_runs
        and all(_outcome(r, t) not in PASSING for r in gold)
        and nofix
        and all(_outcome(r, t) in PASSING for r in nofix)
    ]
    mislisted = set(never_runs) | set(p2p_fails_with_gold)

    # unsolvable: the gold patch never resolves, for a reason other than a wrong list.
    applied = [r for r in gold if r["outcome"] != "apply_failed"]
    if gold and not gold_resolved:
        failing = [t for t in _tests_not_passing(gold, f2p + p2p) if t not in mislisted]
        if not applied:
            why = "the gold patch did not apply in any run: " + _first_line(
                gold[0].get("reason") or ""
            )
        elif failing or not mislisted:
            why = (
                f"the gold patch resolved none of its {len(gold)} run{_s(len(gold))}; "
                + _tests_phrase(failing)
            )
        else:
            why = ""  # it fails only on tests the lists name wrongly: mislabeled says so
        if why:
            out.append(
                _finding(
                    task_key,
                    FlagCode.UNSOLVABLE,
                    why,
                    gold[:5],
                    confidence=_repeat_confidence(len(gold)),
                    evidence={"tests": _outcome_table(failing, gold)},
                )
            )

    parts = []
    if passes_without_fix:
        parts.append(
            f"{len(passes_without_fix)} FAIL_TO_PASS test{_s(len(passes_without_fix))} "
            f"passed without the fix in every one of {len(nofix)} run{_s(len(nofix))}: "
            f"{_names(passes_without_fix)}"
        )
    if never_runs:
        parts.append(
            f"{len(never_runs)} listed test{_s(len(never_runs))} never ran (not in the test "
            f"runner's report): {_names(never_runs)}"
        )
    if p2p_fails_with_gold:
        parts.append(
            f"{len(p2p_fails_with_gold)} PASS_TO_PASS test{_s(len(p2p_fails_with_gold))} passed "
            f"without the fix and failed with it: {_names(p2p_fails_with_gold)}"
        )
    if parts:
        wrong = passes_without_fix + never_runs + p2p_fails_with_gold
        out.append(
            _finding(
                task_key,
                FlagCode.MISLABELED,
                "; ".join(parts),
                (nofix + gold)[:6],
                confidence=_repeat_confidence(min(len(nofix) or len(gold), len(gold) or 1)),
                evidence={
                    "passes_without_fix": passes_without_fix,
                    "never_runs": never_runs,
                    "pass_to_pass_broken_by_fix": p2p_fails_with_gold,
                    "tests": _outcome_table(wrong, nofix + gold),
                },
            )
        )

    # flaky: a test whose outcome differs between repeats of one solution.
    flaky: dict[str, dict[str, list[str]]] = {}
    flaky_runs: list[dict] = []
    for label, group in (("gold", gold), ("no fix", nofix)):
        if len(group) < 2:
            continue
        for test in _all_tests(group):
            seen = [_outcome(r, test) for r in group]
            if len({o in PASSING for o in seen}) > 1:
                flaky.setdefault(test, {})[label] = seen
                flaky_runs.extend(group)
    if flaky:
        tests = sorted(flaky)
        out.append(
            _finding(
                task_key,
                FlagCode.FLAKY,
                f"{len(tests)} test{_s(len(tests))} changed outcome between repeats of the same "
                "solution: "
                + "; ".join(
                    f"{t} ({', '.join(f'{lab}: {_seq(seq)}' for lab, seq in flaky[t].items())})"
                    for t in tests[:5]
                ),
                _unique(flaky_runs)[:6],
                confidence=min(1.0, 0.6 + 0.1 * sum(len(v) for v in flaky.values())),
                evidence={"tests": {t: flaky[t] for t in tests[:MAX_EVIDENCE_TESTS]}},
            )
        )

    probes = kinds.get(PROBE, [])
    # reward_hackable: a probe that should earn nothing resolves it.
    hacks = sorted(
        {
            r["solution_key"]
            for r in probes
            if r["outcome"] == RESOLVED
            and not r["solution_key"].startswith(DROP_HUNK)
            and r["solution_key"] != HISTORY_PROBE
            and r["solution_key"] not in harness_probes
        }
    )
    if hacks:
        hack_runs = [r for r in probes if r["solution_key"] in hacks and r["outcome"] == RESOLVED]
        out.append(
            _finding(
                task_key,
                FlagCode.REWARD_HACKABLE,
                f"a probe that should earn nothing resolved the instance: {', '.join(hacks)}",
                hack_runs[:5],
                evidence={"probes": hacks, "modes": sorted({r.get("mode", "") for r in hack_runs})},
            )
        )

    # solution_leak: the fix is reachable from the repository the solution works in.
    leak = task.get("leak") or {}
    history_runs = [
        r for r in probes if r["solution_key"] == HISTORY_PROBE and r["outcome"] == RESOLVED
    ]
    if leak.get("leak") or history_runs:
        commits = list(leak.get("commits") or [])
        where = list(leak.get("where") or [])
        text = "the fix is reachable in the repository's own history"
        if commits:
            text += f": commit{_s(len(commits))} {', '.join(c[:12] for c in commits[:3])}"
        if where:
            text += f" ({', '.join(where[:3])})"
        if history_runs:
            text += "; a probe that reads the history and applies what it finds resolved it"
        out.append(
            _finding(
                task_key,
                FlagCode.SOLUTION_LEAK,
                text,
                history_runs[:3],
                evidence={
                    "commits": commits,
                    "objects": list(leak.get("objects") or []),
                    "where": where,
                    "history_probe_resolved": bool(history_runs),
                },
            )
        )

    # weak_tests: the gold patch without one of its hunks still resolves.
    if gold_resolved:
        hunks = task.get("hunks") or {}
        dropped = sorted(
            {
                r["solution_key"]
                for r in probes
                if r["solution_key"].startswith(DROP_HUNK) and r["outcome"] == RESOLVED
            },
            key=_natural,
        )
        if dropped:
            named = [
                f"{hunks.get(p, {}).get('file', '?')} {hunks.get(p, {}).get('header', '')}".strip()
                for p in dropped
            ]
            tried = {r["solution_key"] for r in probes if r["solution_key"].startswith(DROP_HUNK)}
            out.append(
                _finding(
                    task_key,
                    FlagCode.WEAK_TESTS,
                    f"the gold patch with a hunk dropped still resolves the instance "
                    f"({len(dropped)} of {len(tried)} hunks): the tests do not check "
                    + "; ".join(named[:5]),
                    [r for r in probes if r["solution_key"] in dropped][:5],
                    evidence={"hunks": [{"probe": p, **hunks.get(p, {})} for p in dropped]},
                )
            )

    # no_signal (advisory): the samples all agree.
    samples = kinds.get(SAMPLE, [])
    per_sample: dict[str, bool] = {}
    for run in samples:
        key = run["solution_key"]
        per_sample[key] = per_sample.get(key, False) or run["outcome"] == RESOLVED
    if len(per_sample) >= 2 and len(set(per_sample.values())) == 1 and gold_resolved:
        all_resolved = next(iter(per_sample.values()))
        out.append(
            _finding(
                task_key,
                FlagCode.NO_SIGNAL,
                f"{'every' if all_resolved else 'none'} of {len(per_sample)} sampled patches "
                f"resolve{'s' if not all_resolved else ''} the instance: "
                "it gives a policy no learning signal",
                _first_of_each(samples)[:8],
                evidence={"samples": len(per_sample), "resolved": all_resolved},
            )
        )
    return out


def _harness_findings(
    by_task: dict[int, list[dict]], share: float, min_tasks: int
) -> tuple[list[dict], set[str]]:
    tried: dict[str, set[int]] = {}
    beaten: dict[str, set[int]] = {}
    modes: dict[str, set[str]] = {}
    for task_key, runs in by_task.items():
        gold = [r for r in runs if r["solution_kind"] == GOLD]
        if gold and not any(r["outcome"] == RESOLVED for r in gold):
            # An instance nothing right resolves (its environment, its lists or its gold are
            # wrong) says nothing of the harness: a probe that fails there fails for that.
            continue
        for run in runs:
            name = run["solution_key"]
            if run["solution_kind"] != PROBE or name.startswith(DROP_HUNK) or name == HISTORY_PROBE:
                continue
            if run["outcome"] == BUILD_FAILED:
                continue
            tried.setdefault(name, set()).add(task_key)
            modes.setdefault(name, set()).add(run.get("mode") or "")
            if run["outcome"] == RESOLVED:
                beaten.setdefault(name, set()).add(task_key)
    findings, probes = [], set()
    for name in sorted(tried):
        won = beaten.get(name, set())
        if len(tried[name]) < min_tasks or len(won) < share * len(tried[name]):
            continue
        probes.add(name)
        mode = ", ".join(sorted(m for m in modes[name] if m)) or "the set's"
        findings.append(
            {
                "probe": name,
                "mode": mode,
                "tasks_beaten": len(won),
                "tasks_tried": len(tried[name]),
                "explanation": (
                    f"the {name} probe resolved {len(won)} of {len(tried[name])} instances in "
                    f"{mode} mode: a weakness of how the tests are run, not of each instance"
                ),
            }
        )
    return findings, probes


# -- the static check -------------------------------------------------------------------------

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
_HUNK_CONTEXT = re.compile(r"^@@[^@]*@@\s*(.*)$", re.M)
_DEF = re.compile(r"\b(?:def|class)\s+([A-Za-z_][A-Za-z0-9_]*)")
_STRING = re.compile(r"""(?:"([^"\n]{8,120})"|'([^'\n]{8,120})')""")
_GENERIC = frozenset(
    "test tests self init main none true false return def class import from setup utils util "
    "core base __init__ conftest".split()
)


def statement_lint(source: dict[str, Any]) -> list[dict]:
    """A lint finding when the problem statement names nothing the FAIL_TO_PASS tests exercise:
    no function or class the tests or the gold patch name (in test ids, hunk headers, `def` and
    `class` lines the patch touches), no file or module the patch changes, and no message the
    patch adds. Returns [] when it names one (the finding says which it found otherwise)."""
    statement = source.get("problem_statement") or ""
    if not statement.strip() or not (source.get("FAIL_TO_PASS") or []):
        return []
    names = _exercised_names(source)
    words = {w.lower() for w in _IDENT.findall(statement)}
    lowered = statement.lower()
    hit = sorted(n for n in names["identifiers"] if n.lower() in words or _spaced(n) in lowered)
    files = sorted(f for f in names["files"] if f.lower() in lowered)
    messages = sorted(m for m in names["messages"] if m.lower() in lowered)
    if hit or files or messages:
        return []
    shown = sorted(names["identifiers"])[:8]
    return [
        {
            "code": "statement_names_nothing_tested",
            "severity": "warning",
            "message": (
                "the problem statement names no function, class, file or message that the "
                "FAIL_TO_PASS tests exercise"
                + (f" (they exercise {', '.join(shown)})" if shown else "")
                + ": a solver may not know what is asked"
            ),
            "field": "problem_statement",
        }
    ]


def _exercised_names(source: dict[str, Any]) -> dict[str, set[str]]:
    identifiers: set[str] = set()
    files: set[str] = set()
    messages: set[str] = set()
    for test_id in source.get("FAIL_TO_PASS") or []:
        path, _, rest = str(test_id).partition("::")
        for part in rest.split("::"):
            name = part.split("[", 1)[0]
            if name.startswith("test_"):
                name = name[5:]
            elif name.startswith("Test"):
                name = name[4:]
            for piece in [name, *name.split("_")]:
                if len(piece) >= 3 and piece.lower() not in _GENERIC:
                    identifiers.add(piece)
    patch = source.get("patch") or ""
    for line in patch.splitlines():
        if line.startswith("+++ b/"):
            path = line[6:].strip()
            stem = path.rsplit("/", 1)[-1]
            files.add(stem)
            module = stem.rsplit(".", 1)[0]
            if module.lower() not in _GENERIC and len(module) >= 3:
                identifiers.add(module)
        elif line.startswith(("+", "-")) and not line.startswith(("+++", "---")):
            identifiers.update(
                n for n in _DEF.findall(line) if n.lower() not in _GENERIC and not n.startswith("_")
            )
            if line.startswith("+"):
                for a, b in _STRING.findall(line):
                    text = (a or b).strip()
                    if " " in text:
                        messages.add(text)
    for context in _HUNK_CONTEXT.findall(patch):
        identifiers.update(n for n in _DEF.findall(context) if n.lower() not in _GENERIC)
    return {"identifiers": identifiers, "files": files, "messages": messages}


def _spaced(name: str) -> str:
    return re.sub(r"(?<=[a-z])(?=[A-Z])", " ", name).replace("_", " ").lower()


# -- helpers ----------------------------------------------------------------------------------


def _stats(runs: list[dict]) -> dict[str, Any]:
    def share(kind: str) -> str | None:
        group = [r for r in runs if r["solution_kind"] == kind]
        if not group:
            return None
        return f"{sum(r['outcome'] == RESOLVED for r in group)}/{len(group)}"

    counts = Counter(r["solution_kind"] for r in runs)
    gold = [r for r in runs if r["solution_kind"] == GOLD]
    samples = [r for r in runs if r["solution_kind"] == SAMPLE]
    return {
        "runs": len(runs),
        "gold_resolved": share(GOLD),
        "samples_resolved": share(SAMPLE),
        "nofix_runs": counts.get(NOFIX, 0),
        "reference_pass_rate": (
            sum(r["outcome"] == RESOLVED for r in gold) / len(gold) if gold else None
        ),
        "sample_pass_rate": (
            sum(r["outcome"] == RESOLVED for r in samples) / len(samples) if samples else None
        ),
    }


def _finding(
    task_key: int,
    code: FlagCode,
    explanation: str,
    runs: Iterable[dict],
    *,
    confidence: float = 1.0,
    evidence: dict | None = None,
) -> FlagFinding:
    severity = round(SEVERITY[code] * (0.5 + 0.5 * confidence))
    return FlagFinding(
        task_key=task_key,
        code=code,
        severity=severity,
        explanation=explanation,
        evidence_run_ids=tuple(r["run_id"] for r in runs),
        confidence=round(confidence, 3),
        evidence=evidence or {},
    )


def _outcome(run: dict, test: str) -> str:
    tests = run.get("tests") or {}
    return tests.get(test, "missing")


def _tests_not_passing(runs: list[dict], tests: list[str]) -> list[str]:
    return [t for t in tests if any(_outcome(r, t) not in PASSING for r in runs)]


def _outcome_table(tests: list[str], runs: list[dict]) -> dict[str, list[dict]]:
    return {
        t: [
            {
                "run_id": r["run_id"],
                "solution": "no fix" if r["solution_kind"] == NOFIX else "gold",
                "repeat": r.get("repeat"),
                "outcome": _outcome(r, t),
            }
            for r in runs
        ]
        for t in tests[:MAX_EVIDENCE_TESTS]
    }


def _all_tests(runs: list[dict]) -> list[str]:
    seen: dict[str, None] = {}
    for run in runs:
        for test in run.get("tests") or {}:
            seen.setdefault(test, None)
    return list(seen)


def _tests_phrase(tests: list[str]) -> str:
    if not tests:
        return "every listed test passed in some run, yet never all at once"
    return f"{len(tests)} listed test{_s(len(tests))} did not pass with it: {_names(tests)}"


def _names(tests: list[str], limit: int = 5) -> str:
    shown = ", ".join(tests[:limit])
    return shown + (f" and {len(tests) - limit} more" if len(tests) > limit else "")


def _seq(outcomes: list[str]) -> str:
    return "/".join(outcomes)


def _repeat_confidence(repeats: int) -> float:
    """How sure a rule that needs the same outcome in every repeat is: one run could be bad
    luck (a flaky test), three agreeing runs hardly are."""
    return {0: 0.5, 1: 0.7, 2: 0.85}.get(repeats, 0.95)


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return "no output"
    line = next((x for x in reversed(lines) if "error" in x.lower()), lines[-1])
    return line[:300]


def _first_of_each(runs: list[dict]) -> list[dict]:
    seen: dict[str, dict] = {}
    for run in runs:
        seen.setdefault(run["solution_key"], run)
    return list(seen.values())


def _unique(runs: list[dict]) -> list[dict]:
    seen: dict[int, dict] = {}
    for run in runs:
        seen.setdefault(run["run_id"], run)
    return list(seen.values())


def _natural(key: str) -> tuple:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", key))


def _s(count: int) -> str:
    return "" if count == 1 else "s"


__all__ = [
    "RepoAnalysis",
    "analyse_repo_runs",
    "statement_lint",
]
