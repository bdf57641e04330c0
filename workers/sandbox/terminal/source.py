"""What the terminal runs read from a task's *source dict* (what `inspector.formats.terminal` reads
from a task folder): a file entry's bytes and mode, a positive number (a timeout) with its
default, and a path relative to a folder of the task."""

from __future__ import annotations

import base64
import math


def file_bytes(entry: dict) -> bytes:
    if "base64" in entry:
        return base64.b64decode(entry["base64"])
    return entry.get("text", "").encode("utf-8", errors="surrogateescape")


def file_mode(entry: dict, default: int = 0o644) -> int:
    mode = entry.get("mode")
    return (int(mode) & 0o7777) if mode is not None else default


def positive_number(value, default: float) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return default
    return number if math.isfinite(number) and number > 0 else default


def relative(path: str, folder: str) -> str:
    """`path` relative to `folder` ("" = the task folder itself)."""
    if folder and path.startswith(folder + "/"):
        return path[len(folder) + 1 :]
    return path


__all__ = ["file_bytes", "file_mode", "positive_number", "relative"]
