"""Reading one Harbor task folder into a source dict.

A Harbor task folder holds ``task.toml``, ``instruction.md``, ``environment/Dockerfile`` (the
build context is ``environment/``), ``solution/solve.sh``, ``tests/test.sh`` and any other files
under ``tests/``. The verifier writes its reward to ``/logs/verifier/reward.txt`` or
``reward.json``.
"""

from __future__ import annotations

import re
import tomllib
from typing import Any

from inspector.formats.archive import FileEntry
from inspector.formats.humaneval import FormatIssue
from inspector.formats.terminal.fields import TomlFields, require, toml_type, utf8
from inspector.formats.terminal.source import DEFAULT_BUILD_TIMEOUT_SEC, jsonable

__all__ = ["HARBOR_DEFAULT_TIMEOUT_SEC", "HARBOR_REQUIRED", "read_harbor"]

HARBOR_DEFAULT_TIMEOUT_SEC = 600.0

HARBOR_REQUIRED = (
    "task.toml",
    "instruction.md",
    "environment/Dockerfile",
    "solution/solve.sh",
    "tests/test.sh",
)
_NETWORK_MODES = {"no-network": False, "public": True, "allowlist": True}
_MEMORY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT])(?:I?B)?\s*$", re.IGNORECASE)
_MEMORY_FACTORS = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}
_TOML_LINE = re.compile(r"\(at line (\d+), column (\d+)\)")


def read_harbor(
    task_id: str, files: dict[str, FileEntry], prefix: str, issues: list[FormatIssue]
) -> dict[str, Any] | None:
    require(files, HARBOR_REQUIRED, prefix, "a Harbor task", issues)
    if "task.toml" not in files:
        return None
    config_file = f"{prefix}task.toml"
    text = utf8(files["task.toml"].data, config_file, issues)
    if text is None:
        return None
    try:
        config = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        match = _TOML_LINE.search(message)
        line = int(match.group(1)) if match else None
        reason = _TOML_LINE.sub("", message).strip() if match else message
        issues.append(FormatIssue(config_file, line, None, f"not valid TOML: {reason}"))
        return None
    field = TomlFields(config, text, config_file, issues)
    metadata = field.table("metadata")
    verifier = field.table("verifier")
    agent = field.table("agent")
    environment = field.table("environment")
    verifier_timeout = field.timeout(
        verifier, "verifier", "timeout_sec", HARBOR_DEFAULT_TIMEOUT_SEC
    )
    agent_timeout = field.timeout(agent, "agent", "timeout_sec", HARBOR_DEFAULT_TIMEOUT_SEC)
    build_timeout = field.timeout(
        environment, "environment", "build_timeout_sec", DEFAULT_BUILD_TIMEOUT_SEC
    )
    cpus = field.positive_number(environment, "environment", "cpus")
    memory_mb = _harbor_memory(field, environment)
    docker_image = field.optional_string(environment, "environment", "docker_image")
    allow_internet = _harbor_network(field, environment)
    instruction = _instruction(files, "instruction.md", prefix, issues)
    solution_files = sorted(path for path in files if path.startswith("solution/"))
    test_files = sorted(path for path in files if path.startswith("tests/"))
    return {
        "kind": "terminal",
        "format": "harbor",
        "task_id": task_id,
        "instruction": instruction or "",
        "metadata": jsonable(metadata),
        "agent_timeout_sec": agent_timeout,
        "verifier_timeout_sec": verifier_timeout,
        "build_timeout_sec": build_timeout,
        "cpus": cpus,
        "memory_mb": memory_mb,
        "docker_image": docker_image or None,
        "allow_internet": allow_internet,
        "files": {},
        "build_context": "environment",
        "dockerfile": "environment/Dockerfile",
        "solution_files": solution_files,
        "solution_entry": "solution/solve.sh",
        "test_files": test_files,
        "test_entry": "tests/test.sh",
        "reward": "file",
    }


def _harbor_memory(field: TomlFields, environment: dict[str, Any]) -> int | None:
    memory_mb: int | None = None
    if "memory_mb" in environment:
        value = environment["memory_mb"]
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool):
            field.report(
                "environment", "memory_mb", f"must be a whole number, got {toml_type(value)}"
            )
        elif value <= 0:
            field.report("environment", "memory_mb", f"must be positive, got {value}")
        else:
            memory_mb = value
    if "memory" in environment:
        value = environment["memory"]
        match = _MEMORY.match(value) if isinstance(value, str) else None
        if match is None:
            field.report(
                "environment",
                "memory",
                f'must be a size with a unit such as "2G" or "512M", got {toml_type(value)}',
            )
        else:
            parsed = int(float(match.group(1)) * _MEMORY_FACTORS[match.group(2).upper()])
            if parsed <= 0:
                field.report("environment", "memory", f"must be at least 1M, got {value!r}")
            elif memory_mb is not None and memory_mb != parsed:
                field.report(
                    "environment",
                    "memory",
                    f"{value!r} is {parsed} MB, but memory_mb says {memory_mb}",
                )
            else:
                memory_mb = parsed
    return memory_mb


def _harbor_network(field: TomlFields, environment: dict[str, Any]) -> bool:
    """Harbor's default is public; an explicit network_mode wins over allow_internet."""
    allow = True
    if "allow_internet" in environment:
        value = environment["allow_internet"]
        if isinstance(value, bool):
            allow = value
        else:
            field.report(
                "environment", "allow_internet", f"must be true or false, got {toml_type(value)}"
            )
    if "network_mode" in environment:
        value = environment["network_mode"]
        if isinstance(value, str) and value in _NETWORK_MODES:
            allow = _NETWORK_MODES[value]
        else:
            field.report(
                "environment",
                "network_mode",
                'must be "no-network", "public" or "allowlist", got ' + toml_type(value),
            )
    return allow


def _instruction(
    files: dict[str, FileEntry], path: str, prefix: str, issues: list[FormatIssue]
) -> str | None:
    if path not in files:
        return None
    text = utf8(files[path].data, f"{prefix}{path}", issues)
    if text is not None and "\x00" in text:
        issues.append(
            FormatIssue(
                f"{prefix}{path}", None, None, "contains a NUL byte, which cannot be stored"
            )
        )
        return None
    return text
