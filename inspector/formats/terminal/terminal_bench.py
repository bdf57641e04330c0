"""Reading one Terminal-Bench task folder into a source dict.

A Terminal-Bench task folder holds ``task.yaml``, ``Dockerfile`` at the task's root (the build
context is the task folder), ``solution.sh``, ``run-tests.sh`` and ``tests/``. The tests' exit
code is the verdict.
"""

from __future__ import annotations

from typing import Any

import yaml

from inspector.formats.archive import FileEntry
from inspector.formats.humaneval import FormatIssue
from inspector.formats.terminal.fields import (
    require,
    timeout_value,
    utf8,
    yaml_key_lines,
    yaml_type,
)
from inspector.formats.terminal.source import DEFAULT_BUILD_TIMEOUT_SEC, UNSTORABLE_TEXT, jsonable

__all__ = [
    "TB_DEFAULT_AGENT_TIMEOUT_SEC",
    "TB_DEFAULT_TEST_TIMEOUT_SEC",
    "TB_REQUIRED",
    "read_terminal_bench",
]

TB_DEFAULT_AGENT_TIMEOUT_SEC = 360.0
TB_DEFAULT_TEST_TIMEOUT_SEC = 60.0

TB_REQUIRED = ("task.yaml", "Dockerfile", "solution.sh", "run-tests.sh")
# task.yaml keys that become source fields rather than metadata.
_TB_OWN_KEYS = ("instruction", "max_agent_timeout_sec", "max_test_timeout_sec")


def read_terminal_bench(
    task_id: str, files: dict[str, FileEntry], prefix: str, issues: list[FormatIssue]
) -> dict[str, Any] | None:
    required = TB_REQUIRED
    if "solution.sh" not in files and "solution.yaml" in files:
        issues.append(
            FormatIssue(
                f"{prefix}solution.yaml",
                None,
                None,
                "solution.yaml is not supported: give the reference solution as solution.sh",
            )
        )
        required = tuple(path for path in TB_REQUIRED if path != "solution.sh")
    require(files, required, prefix, "a Terminal-Bench task", issues)
    if "task.yaml" not in files:
        return None
    config_file = f"{prefix}task.yaml"
    text = utf8(files["task.yaml"].data, config_file, issues)
    if text is None:
        return None
    try:
        config = yaml.safe_load(text)
        lines = yaml_key_lines(text)
    except RecursionError:
        issues.append(FormatIssue(config_file, None, None, "not valid YAML: nested too deeply"))
        return None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        issues.append(FormatIssue(config_file, line, None, f"not valid YAML: {problem}"))
        return None
    if config is None:
        config = {}
    if not isinstance(config, dict):
        issues.append(
            FormatIssue(config_file, 1, None, f"must be a mapping of keys, got {yaml_type(config)}")
        )
        return None
    config = {str(key): value for key, value in config.items()}

    def report(key: str, reason: str) -> None:
        issues.append(FormatIssue(config_file, lines.get(key), key, reason))

    instruction = config.get("instruction")
    own_keys = set(_TB_OWN_KEYS)
    if "instruction" not in config:
        instruction = _tb_legacy_instruction(config)
        if instruction is not None:
            own_keys.add("descriptions")
        else:
            report("instruction", "missing: the task's instruction to the agent")
    elif not isinstance(instruction, str):
        report("instruction", f"must be a string, got {yaml_type(instruction)}")
        instruction = None
    elif UNSTORABLE_TEXT.search(instruction):
        report("instruction", "contains a NUL character, which cannot be stored")
        instruction = None
    agent_timeout = timeout_value(
        config, "max_agent_timeout_sec", TB_DEFAULT_AGENT_TIMEOUT_SEC, report
    )
    test_timeout = timeout_value(
        config, "max_test_timeout_sec", TB_DEFAULT_TEST_TIMEOUT_SEC, report
    )
    for key in ("difficulty", "category", "author_name", "author_email"):
        if key in config and config[key] is not None and not isinstance(config[key], str):
            report(key, f"must be a string, got {yaml_type(config[key])}")
    tags = config.get("tags")
    if tags is not None and not (
        isinstance(tags, list) and all(isinstance(tag, str) for tag in tags)
    ):
        report("tags", "must be a list of strings")
    metadata = {key: value for key, value in config.items() if key not in own_keys}
    test_files = ["run-tests.sh"] * ("run-tests.sh" in files) + sorted(
        path for path in files if path.startswith("tests/")
    )
    return {
        "kind": "terminal",
        "format": "terminal-bench",
        "task_id": task_id,
        "instruction": instruction or "",
        "metadata": jsonable(metadata),
        "agent_timeout_sec": agent_timeout,
        "verifier_timeout_sec": test_timeout,
        "build_timeout_sec": DEFAULT_BUILD_TIMEOUT_SEC,
        "cpus": None,
        "memory_mb": None,
        "docker_image": None,
        "allow_internet": True,
        "files": {},
        "build_context": "",
        "dockerfile": "Dockerfile",
        "solution_files": ["solution.sh"],
        "solution_entry": "solution.sh",
        "test_files": test_files,
        "test_entry": "run-tests.sh",
        "reward": "exit_code",
    }


def _tb_legacy_instruction(config: dict[str, Any]) -> str | None:
    """Older task.yaml files hold the instruction as descriptions: [{key: base, description}]."""
    descriptions = config.get("descriptions")
    if isinstance(descriptions, list):
        for item in descriptions:
            if (
                isinstance(item, dict)
                and item.get("key", "base") == "base"
                and isinstance(item.get("description"), str)
            ):
                return item["description"]
    return None
