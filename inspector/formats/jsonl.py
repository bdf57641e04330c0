"""Writing JSONL: one object a line, UTF-8, written whole or not at all."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from typing import TextIO


def jsonl_line(obj: dict) -> str:
    return json.dumps(obj, ensure_ascii=False) + "\n"


def jsonl_stream(objs: Iterable[dict]) -> Iterator[str]:
    for obj in objs:
        yield jsonl_line(obj)


def write_jsonl(objs: Iterable[dict], output: str, *, stdout: TextIO | None = None) -> int:
    """Write to the path `output` ('-' for `stdout`); returns how many lines were written.

    A file is written beside its target and moved over it, so a failure never leaves half."""
    count = 0
    if output == "-":
        assert stdout is not None
        for line in jsonl_stream(objs):
            stdout.write(line)
            count += 1
        return count
    tmp = f"{output}.part"
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            for line in jsonl_stream(objs):
                fh.write(line)
                count += 1
        os.replace(tmp, output)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return count
