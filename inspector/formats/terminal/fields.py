"""Field checks for the Harbor and Terminal-Bench readers, each problem reported with its file,
line and field: typed reads of a parsed task.toml (`TomlFields`), timeouts, required files, UTF-8
text, the line of a key in task.toml or task.yaml, and how a value's type is named in a message.
"""

from __future__ import annotations

import math
import re
from datetime import date, datetime, time
from typing import Any

import yaml

from inspector.formats.archive import FileEntry
from inspector.formats.humaneval import FormatIssue, short_text

__all__ = [
    "UTF8_BOM",
    "TomlFields",
    "is_number",
    "require",
    "timeout_value",
    "toml_type",
    "utf8",
    "yaml_key_lines",
    "yaml_type",
]

UTF8_BOM = b"\xef\xbb\xbf"


class TomlFields:
    """Type checks on a parsed task.toml, reporting each problem with its line."""

    def __init__(
        self, config: dict[str, Any], text: str, file: str, issues: list[FormatIssue]
    ) -> None:
        self.config = config
        self.text = text
        self.file = file
        self.issues = issues

    def report(self, table: str | None, key: str, reason: str) -> None:
        field = f"{table}.{key}" if table else key
        self.issues.append(
            FormatIssue(self.file, _toml_key_line(self.text, table, key), field, reason)
        )

    def table(self, key: str) -> dict[str, Any]:
        value = self.config.get(key, {})
        if not isinstance(value, dict):
            self.report(None, key, f"must be a table ([{key}]), got {toml_type(value)}")
            return {}
        return value

    def timeout(self, table: dict[str, Any], table_name: str, key: str, default: float) -> float:
        def report(_key: str, reason: str) -> None:
            self.report(table_name, key, reason)

        return timeout_value(table, key, default, report)

    def positive_number(self, table: dict[str, Any], table_name: str, key: str) -> float | None:
        if key not in table:
            return None
        value = table[key]
        if not is_number(value):
            self.report(table_name, key, f"must be a number, got {toml_type(value)}")
        elif not math.isfinite(value) or value <= 0:
            self.report(table_name, key, f"must be a positive number, got {value}")
        else:
            return float(value)
        return None

    def optional_string(self, table: dict[str, Any], table_name: str, key: str) -> str | None:
        value = table.get(key)
        if value is not None and not isinstance(value, str):
            self.report(table_name, key, f"must be a string, got {toml_type(value)}")
            return None
        return value


def timeout_value(config: dict[str, Any], key: str, default: float, report: Any) -> float:
    if key not in config or config[key] is None:
        return float(default)
    value = config[key]
    if not is_number(value):
        report(key, f"must be a number of seconds, got {toml_type(value)}")
    elif not math.isfinite(value) or value <= 0:
        report(key, f"must be a positive number of seconds, got {value}")
    else:
        return float(value)
    return float(default)


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def require(
    files: dict[str, FileEntry],
    required: tuple[str, ...],
    prefix: str,
    what: str,
    issues: list[FormatIssue],
) -> None:
    for path in required:
        if path not in files:
            issues.append(
                FormatIssue(f"{prefix}{path}", None, None, f"missing: {what} needs this file")
            )


def utf8(data: bytes, file: str, issues: list[FormatIssue]) -> str | None:
    if data.startswith(UTF8_BOM):
        data = data[len(UTF8_BOM) :]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        issues.append(
            FormatIssue(
                file,
                line,
                None,
                f"not UTF-8: byte 0x{data[exc.start]:02x} at column {column} is invalid",
            )
        )
        return None


def _toml_key_line(text: str, table: str | None, key: str) -> int | None:
    """The line of `key` in `[table]` (or at the top), found by a plain scan of the text."""
    current: str | None = None
    header = re.compile(r"^\s*\[\s*([^\]\[]+?)\s*\]")
    key_line = re.compile(r"^\s*[\"']?" + re.escape(key) + r"[\"']?\s*=")
    table_line: int | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        match = header.match(line)
        if match:
            current = match.group(1).strip().strip("\"'")
            if table is not None and current == table:
                table_line = number
            elif table is None and current == key:
                return number
            continue
        if current == table and key_line.match(line):
            return number
        if (
            table is not None
            and current is None
            and re.match(r"^\s*" + re.escape(table) + r"\s*\.\s*" + re.escape(key) + r"\s*=", line)
        ):
            return number
    return table_line


def yaml_key_lines(text: str) -> dict[str, int]:
    """Line of each top-level key of a YAML mapping document."""
    node = yaml.compose(text, Loader=yaml.SafeLoader)
    lines: dict[str, int] = {}
    if isinstance(node, yaml.MappingNode):
        for key_node, _value in node.value:
            if isinstance(key_node, yaml.ScalarNode):
                lines.setdefault(str(key_node.value), key_node.start_mark.line + 1)
    return lines


def toml_type(value: Any) -> str:
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, int | float):
        return f"a number ({value})"
    if isinstance(value, str):
        return f"a string ({short_text(value)})"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, datetime | date | time):
        return f"a date ({value.isoformat()})"
    return type(value).__name__


def yaml_type(value: Any) -> str:
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__
