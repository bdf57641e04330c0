"""A terminal task's source dict, the plain data every reader of this package builds, and what the
readers share to build it: the default build timeout, text that cannot be stored, a file's record
(``{"mode", "text"}`` or ``{"mode", "base64"}``) and TOML and YAML values made JSON.

Read back by the rest of the platform: a task file's bytes and text (`file_bytes`, `file_text`)
and the task's content hash (`content_hash`).
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re
from datetime import date, datetime, time
from typing import Any

from inspector.formats.archive import FileEntry

__all__ = [
    "DEFAULT_BUILD_TIMEOUT_SEC",
    "UNSTORABLE_TEXT",
    "content_hash",
    "file_bytes",
    "file_record",
    "file_text",
    "jsonable",
]

DEFAULT_BUILD_TIMEOUT_SEC = 600.0
UNSTORABLE_TEXT = re.compile("[\x00\ud800-\udfff]")
# Fields of the source dict that content_hash covers besides the files.
_HASHED_FIELDS = (
    "kind",
    "format",
    "task_id",
    "instruction",
    "metadata",
    "agent_timeout_sec",
    "verifier_timeout_sec",
    "build_timeout_sec",
    "cpus",
    "memory_mb",
    "docker_image",
    "allow_internet",
    "build_context",
    "dockerfile",
    "solution_entry",
    "test_entry",
    "reward",
)


def content_hash(source: dict[str, Any]) -> str:
    """SHA-256 (hex) of a task: its parsed configuration and its files (path, mode, bytes).

    The same task folder gives the same hash whether it came as a folder, a zip or a tar:
    modes count only by their owner-executable bit (0o755 or 0o644, as git records them), and
    numbers are compared by value (30 and 30.0 are the same), so the hash survives a round trip
    through a JSON database column. Samples are not part of the task and not hashed.
    """
    digest = hashlib.sha256(b"inspector terminal task v1\n")
    config = {field: _canonical_numbers(source.get(field)) for field in _HASHED_FIELDS}
    digest.update(
        json.dumps(config, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    )
    for path in sorted(source.get("files", {})):
        data = file_bytes(source, path)
        mode = 0o755 if source["files"][path].get("mode", 0o644) & 0o100 else 0o644
        encoded = path.encode("utf-8")
        digest.update(b"\nfile %d:" % len(encoded) + encoded)
        digest.update(b" mode %o size %d\n" % (mode, len(data)))
        digest.update(data)
    return digest.hexdigest()


def file_bytes(source: dict[str, Any], path: str) -> bytes:
    """The bytes of the task file at `path` (relative to the task folder); KeyError if none."""
    entry = source["files"][path]
    if "text" in entry:
        return entry["text"].encode("utf-8")
    return base64.b64decode(entry["base64"])


def file_text(source: dict[str, Any], path: str) -> str:
    """The text of the task file at `path`; bytes that are not UTF-8 become U+FFFD."""
    entry = source["files"][path]
    if "text" in entry:
        return entry["text"]
    return base64.b64decode(entry["base64"]).decode("utf-8", errors="replace")


def file_record(entry: FileEntry) -> dict[str, Any]:
    try:
        text = entry.data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is None or "\x00" in text:
        return {"mode": entry.mode, "base64": base64.b64encode(entry.data).decode("ascii")}
    return {"mode": entry.mode, "text": text}


def jsonable(value: Any) -> Any:
    """TOML and YAML values as JSON values: dates become ISO strings, NaN and infinities
    strings, other odd values their repr; keys become strings."""
    if isinstance(value, dict):
        return {str(key): jsonable(item) for key, item in value.items()}
    if isinstance(value, list | tuple | set):
        return [jsonable(item) for item in value]
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, str):
        return UNSTORABLE_TEXT.sub("\ufffd", value)
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    return repr(value)


def _canonical_numbers(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _canonical_numbers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_canonical_numbers(item) for item in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value
