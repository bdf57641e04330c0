"""Terminal task sets: folders of Harbor or Terminal-Bench tasks, as plain data. Each task becomes
a *source dict* (its configuration and files); sampled solutions come with the tasks or in JSONL.

- `taskset`: finding the task folders in an upload's tree and reading the whole set, all or
  nothing; telling an upload of task folders from a JSONL one;
- `harbor`: one Harbor task folder (``task.toml``, ``environment/Dockerfile``, ...);
- `terminal_bench`: one Terminal-Bench task folder (``task.yaml``, ``Dockerfile``, ...);
- `samples`: sampled solutions, from a task's ``samples/`` folder or a JSONL file;
- `fields`: the field checks both readers use, each problem with its file, line and field;
- `source`: the source dict the readers share: its defaults and values, a task file's bytes and
  text, and the task's content hash.

The names below are the package's public ones, importable from here or from their modules.
"""

from inspector.formats.terminal.harbor import HARBOR_DEFAULT_TIMEOUT_SEC
from inspector.formats.terminal.samples import read_terminal_samples_jsonl
from inspector.formats.terminal.source import (
    DEFAULT_BUILD_TIMEOUT_SEC,
    content_hash,
    file_bytes,
    file_text,
)
from inspector.formats.terminal.taskset import (
    TerminalTaskSet,
    looks_like_terminal_upload,
    read_terminal_taskset,
)
from inspector.formats.terminal.terminal_bench import (
    TB_DEFAULT_AGENT_TIMEOUT_SEC,
    TB_DEFAULT_TEST_TIMEOUT_SEC,
)

__all__ = [
    "DEFAULT_BUILD_TIMEOUT_SEC",
    "HARBOR_DEFAULT_TIMEOUT_SEC",
    "TB_DEFAULT_AGENT_TIMEOUT_SEC",
    "TB_DEFAULT_TEST_TIMEOUT_SEC",
    "TerminalTaskSet",
    "content_hash",
    "file_bytes",
    "file_text",
    "looks_like_terminal_upload",
    "read_terminal_samples_jsonl",
    "read_terminal_taskset",
]
