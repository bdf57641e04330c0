"""pytest's JUnit XML report, read into one outcome per test id.

The report is untrusted (a solution's code runs in the process that writes it), so it is read
with expat directly, refusing a DOCTYPE (hence any entity) and anything past `MAX_BYTES`, and only
the elements that carry outcomes are kept: `testcase` (classname, name) and its `failure`,
`error` and `skipped` children, plus the text of collection errors.

A test id is a pytest node id relative to the root, as SWE-bench lists them
("tests/test_x.py::Cls::test_y[p1]"). pytest's junitxml names a test case the way
`_pytest.junitxml.mangle_test_address` does: the parameters are set aside at the first "[", the
rest split at "::", the file's "/" turned into "." and its ".py" dropped; classname is every part
but the last, joined with ".", and name is the last with its parameters. `case_key(id)` does the
same, so each id asked for is found (or not: "missing") without guessing where a file path ends.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from xml.parsers import expat

MAX_BYTES = 32 * 1024 * 1024
MAX_ERROR_TEXT = 8 * 1024  # of each collection error kept

# Worst first: a case with a failure and an error (a failing test whose teardown errs) failed.
_RANK = {"failed": 4, "error": 3, "skipped": 2, "passed": 1}
_CHILD_OUTCOME = {"failure": "failed", "error": "error", "skipped": "skipped"}


class JunitError(ValueError):
    """A report that cannot be read (too large, not XML, a DOCTYPE)."""


@dataclass
class JunitReport:
    # (classname, name) -> outcome: "passed" | "failed" | "error" | "skipped"
    cases: dict[tuple[str, str], str] = field(default_factory=dict)
    # The texts of the cases that are collection errors (a module that could not be collected).
    collection_errors: list[str] = field(default_factory=list)


def case_key(test_id: str) -> tuple[str, str]:
    """The (classname, name) pytest's junitxml gives the test of node id `test_id`."""
    path, bracket, params = test_id.partition("[")
    names = path.split("::")
    names[0] = re.sub(r"\.py$", "", names[0].replace("/", "."))
    names[-1] += bracket + params
    return ".".join(names[:-1]), names[-1]


def parse(data: bytes) -> JunitReport:
    """The outcomes in a JUnit XML report; JunitError when it cannot be read."""
    if len(data) > MAX_BYTES:
        raise JunitError(f"the report is {len(data)} bytes, more than {MAX_BYTES}")
    report = JunitReport()
    state: dict = {"case": None, "text": None, "depth": 0}

    def refuse(*_args) -> None:
        raise JunitError("the report has a DOCTYPE or an entity declaration")

    def start(tag: str, attrs: dict[str, str]) -> None:
        state["depth"] += 1
        case = state["case"]
        if tag == "testcase" and case is None:
            state["case"] = {
                "key": (attrs.get("classname", ""), attrs.get("name", "")),
                "outcome": "passed",
                "depth": state["depth"],
                "collection": False,
            }
        elif case is not None and tag in _CHILD_OUTCOME and state["depth"] == case["depth"] + 1:
            outcome = _CHILD_OUTCOME[tag]
            if _RANK[outcome] > _RANK[case["outcome"]]:
                case["outcome"] = outcome
            message = attrs.get("message", "")
            if tag == "error" and "collection failure" in message:
                case["collection"] = True
                state["text"] = [message, "\n"]

    def end(tag: str) -> None:
        case = state["case"]
        if case is not None and tag == "error" and state["text"] is not None:
            report.collection_errors.append("".join(state["text"])[:MAX_ERROR_TEXT])
            state["text"] = None
        if case is not None and tag == "testcase" and state["depth"] == case["depth"]:
            if not case["collection"]:
                before = report.cases.get(case["key"])
                if before is None or _RANK[case["outcome"]] > _RANK[before]:
                    report.cases[case["key"]] = case["outcome"]
            state["case"] = None
        state["depth"] -= 1

    def text(chunk: str) -> None:
        kept = state["text"]
        if kept is not None and sum(len(k) for k in kept) < MAX_ERROR_TEXT:
            kept.append(chunk)

    parser = expat.ParserCreate()
    parser.StartDoctypeDeclHandler = refuse
    parser.EntityDeclHandler = refuse
    parser.UnparsedEntityDeclHandler = refuse
    parser.ExternalEntityRefHandler = refuse
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = text
    try:
        parser.Parse(data, True)
    except expat.ExpatError as exc:
        raise JunitError(f"the report is not well-formed XML: {exc}") from None
    return report


def outcomes(test_ids: list[str], report: JunitReport) -> dict[str, str]:
    """test id -> its outcome in the report, "missing" when the report has no such case."""
    return {test_id: report.cases.get(case_key(test_id), "missing") for test_id in test_ids}


__all__ = ["MAX_BYTES", "JunitError", "JunitReport", "case_key", "outcomes", "parse"]
