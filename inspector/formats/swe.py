"""Repository tasks in the SWE-bench format: a JSONL of instances as published, their
environments, and sampled patches in the SWE-bench predictions format. Plain data: no Django,
no Docker, nothing of a repository run.

An instance line: `instance_id`, `repo`, `base_commit`, `problem_statement`, `patch` (the gold
patch), `test_patch`, `FAIL_TO_PASS` and `PASS_TO_PASS` (JSON lists of test ids, or JSON strings
holding such lists, as the published datasets write them), and optionally `version`,
`environment_setup_commit`, `hints_text`, `created_at`. Its environment is one of:

- `image`: a Docker image the user already has (never pulled). Whether it exists, its work
  folder and its files are asked of the `image` function the caller passes in
  (`ImageEnvironment`);
- a folder of the environments archive uploaded with the file, named like the instance (or as
  the line's `environment` field says, so that instances share one): the repository snapshot at
  `base_commit`, its `.git` included, with a `Dockerfile` beside it (the build context is the
  folder). The archive may wrap the folders in one top folder.

Each instance is checked against its snapshot (`swe_snapshot`): the repository's HEAD is
`base_commit`, the gold patch and the test_patch apply to it, and every listed test's file is
there after the test_patch, with its function or class. A predictions line: `instance_id`,
`model_patch` (a diff; empty or null: a sample that changes nothing), `model_name_or_path`,
optionally `sample_id` (else `s1`, `s2`, ... per instance).

Reading is all or nothing, like the other readers: every instance and sample comes back, or
`TaskSetFormatError` lists every problem, each with its file, line, instance and field
(`InstanceIssue`). Each instance becomes the *source dict* workers/sandbox/swe runs: the
instance's fields with the lists as lists, the original `line` (to write the instance back as it
came), the environment (`files` as {path: {"mode", "text" | "base64"}}, `dockerfile`, or
`docker_image`) and the run's defaults.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from inspector.formats import swe_snapshot, unified_diff
from inspector.formats.archive import FileEntry
from inspector.formats.humaneval import (
    FormatIssue,
    TaskSetFormatError,
    check_storable,
    json_objects,
    json_type,
    read_limited,
    sample_id_of,
    short_text,
)
from inspector.formats.terminal.source import file_record

__all__ = [
    "DEFAULT_TEST_COMMAND",
    "DOCKERFILE",
    "ImageEnvironment",
    "InstanceIssue",
    "SweInstance",
    "SweTaskSet",
    "content_hash",
    "looks_like_swe_instances",
    "read_swe_taskset",
]

DEFAULT_MAX_BYTES = 50_000_000
DOCKERFILE = "Dockerfile"
# The run's defaults (workers/sandbox/swe reads them from the source dict).
DEFAULT_TEST_COMMAND = "python3 -m pytest -p no:cacheprovider"
DEFAULT_TIMEOUT_SEC = 900
DEFAULT_BUILD_TIMEOUT_SEC = 600
DEFAULT_MEMORY_MB = 2048
DEFAULT_CPUS = 1

_REQUIRED_TEXT = ("instance_id", "repo", "base_commit", "problem_statement", "patch", "test_patch")
_TEST_LISTS = ("FAIL_TO_PASS", "PASS_TO_PASS")
_OPTIONAL_TEXT = ("environment_setup_commit", "hints_text", "created_at")
_COMMIT = re.compile(r"^[0-9a-fA-F]{7,64}$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_MAX_ID_CHARS = 500  # Task.task_id


@dataclass(frozen=True)
class InstanceIssue(FormatIssue):
    """A FormatIssue that names the instance too."""

    instance_id: str | None = None

    def __str__(self) -> str:
        where = self.file
        if self.line is not None:
            where += f", line {self.line}"
        if self.instance_id:
            where += f", instance {short_text(self.instance_id)}"
        if self.field is not None:
            where += f", field {self.field!r}"
        return f"{where}: {self.reason}"


@dataclass(frozen=True)
class ImageEnvironment:
    """What the caller found out about an image a line names: `problem` ("" when the image is
    on the engine), its work folder, and `read` (a file of the work folder, relative to it;
    None: the files cannot be read, so the snapshot checks are left to the runs)."""

    problem: str = ""
    workdir: str = ""
    read: Callable[[str], bytes | None] | None = None


@dataclass(frozen=True)
class SweInstance:
    source: dict[str, Any]
    content_hash: str
    line: int


@dataclass(frozen=True)
class SweTaskSet:
    instances: list[SweInstance]
    # {"task_id", "sample_id", "completion" (the model_patch), "model", "line"}, in file order
    samples: list[dict[str, Any]] = field(default_factory=list)


def looks_like_swe_instances(first_line: dict) -> bool:
    """Whether a task file's first object is a SWE-bench instance: an `instance_id` with a
    `patch` or a `test_patch`."""
    return (
        isinstance(first_line, dict)
        and "instance_id" in first_line
        and ("patch" in first_line or "test_patch" in first_line)
    )


def read_swe_taskset(
    instances_file: BinaryIO,
    *,
    instances_name: str,
    environments: dict[str, FileEntry] | None = None,
    environments_name: str = "the environments archive",
    samples_file: BinaryIO | None = None,
    samples_name: str = "",
    image: Callable[[str], ImageEnvironment] | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> SweTaskSet:
    """Every instance (checked against its environment) and prediction, or
    `TaskSetFormatError` with every problem. `environments`: the archive's tree
    (`archive.read_tree(..., keep_git=True)`); `image(name)`: what the engine says of an image
    a line names (without it, such a line is refused: its image cannot be checked)."""
    issues: list[FormatIssue] = []
    reader = _Reader(instances_name, environments, environments_name, image, issues)
    instances, ids = reader.instances(instances_file, max_bytes)
    samples: list[dict[str, Any]] = []
    if samples_file is not None:
        # Every line's instance id, the refused lines' too: a prediction for an instance whose
        # line is bad is not one "for an unknown instance". None: some line had no readable id.
        samples = _predictions(
            samples_file, samples_name or "predictions file", max_bytes, issues, ids,
            instances_name,
        )  # fmt: skip
    if issues:
        raise TaskSetFormatError(issues)
    return SweTaskSet(instances=instances, samples=samples)


def content_hash(source: dict[str, Any]) -> str:
    """SHA-256 (hex) of an instance: its line as uploaded and its environment (the image's name,
    or the folder's files: path, mode, bytes), whatever the archive it came in."""
    return _instance_hash(source, _files_digest(source.get("files") or {}))


# --- Instances -----------------------------------------------------------------------------------


class _Report:
    def __init__(self, issues: list[FormatIssue], file: str, line: int | None) -> None:
        self.issues = issues
        self.file = file
        self.line = line
        self.instance_id: str | None = None

    def __call__(self, field: str | None, reason: str) -> None:
        self.issues.append(InstanceIssue(self.file, self.line, field, reason, self.instance_id))


@dataclass
class _Folder:
    """An environment folder of the archive, what every instance using it shares."""

    name: str
    files: dict[str, FileEntry]
    records: dict[str, dict] | None = None
    digest: str = ""

    def read(self, path: str) -> bytes | None:
        entry = self.files.get(path)
        return entry.data if entry is not None else None


class _Reader:
    def __init__(
        self,
        name: str,
        tree: dict[str, FileEntry] | None,
        tree_name: str,
        image: Callable[[str], ImageEnvironment] | None,
        issues: list[FormatIssue],
    ) -> None:
        self.name = name
        self.folders = _folders(tree) if tree is not None else None
        self.tree_name = tree_name
        self.image = image
        self.images: dict[str, ImageEnvironment] = {}
        self.issues = issues

    def instances(
        self, stream: BinaryIO, max_bytes: int
    ) -> tuple[list[SweInstance], set[str] | None]:
        """The valid instances, and every line's instance_id (None when a line has none)."""
        data = read_limited(stream, self.name, max_bytes, self.issues)
        if data is None:
            return [], None
        instances: list[SweInstance] = []
        first_line: dict[str, int] = {}
        ids_complete = True
        nonblank = 0
        for line, obj in json_objects(data, self.name, self.issues):
            nonblank += 1
            if obj is None:
                ids_complete = False
                continue
            before = len(self.issues)
            report = _Report(self.issues, self.name, line)
            values = _fields(obj, report)
            instance_id = values.get("instance_id")
            if instance_id is None:
                ids_complete = False
            elif instance_id in first_line:
                report(
                    "instance_id",
                    f"duplicate instance_id {short_text(instance_id)}, first on line "
                    f"{first_line[instance_id]}",
                )
            else:
                first_line[instance_id] = line
            if len(self.issues) == before:
                instance = self._instance(obj, values, report, line)
                if instance is not None and len(self.issues) == before:
                    instances.append(instance)
        if nonblank == 0:
            self.issues.append(FormatIssue(self.name, None, None, "contains no instances"))
            ids_complete = False
        return instances, set(first_line) if ids_complete else None

    def _instance(
        self, obj: dict, values: dict[str, Any], report: _Report, line: int
    ) -> SweInstance | None:
        source: dict[str, Any] = {
            "kind": "swe",
            "format": "swe-bench",
            **{key: values[key] for key in (*_REQUIRED_TEXT, *_TEST_LISTS)},
            "version": values["version"],
            **{key: values[key] for key in _OPTIONAL_TEXT},
            "line": obj,
            "files": {},
            "build_context": "",
            "dockerfile": "",
            "docker_image": "",
            "build_timeout_sec": DEFAULT_BUILD_TIMEOUT_SEC,
            "workdir": "",  # the image's WORKDIR
            "test_command": DEFAULT_TEST_COMMAND,
            "timeout_sec": DEFAULT_TIMEOUT_SEC,
            "memory_mb": DEFAULT_MEMORY_MB,
            "cpus": DEFAULT_CPUS,
        }
        digest = ""
        read: swe_snapshot.Reader | None = None
        if values["image"]:
            environment = self._image(values["image"])
            if environment.problem:
                report("image", environment.problem)
                return None
            source["docker_image"] = values["image"]
            read = environment.read
        else:
            folder = self._folder(values["environment"] or values["instance_id"], values, report)
            if folder is None:
                return None
            if folder.records is None:
                folder.records = {p: file_record(e) for p, e in folder.files.items()}
                folder.digest = _files_digest(folder.records)
            source["files"] = folder.records
            source["dockerfile"] = DOCKERFILE
            digest = folder.digest
            read = folder.read
        if read is not None:
            self._check_snapshot(source, swe_snapshot.cached_reader(read), report)
        return SweInstance(source=source, content_hash=_instance_hash(source, digest), line=line)

    def _image(self, name: str) -> ImageEnvironment:
        if name not in self.images:
            if self.image is None:
                self.images[name] = ImageEnvironment(
                    problem=f"the image {name} cannot be checked here (no Docker engine to ask)"
                )
            else:
                self.images[name] = self.image(name)
        return self.images[name]

    def _folder(self, name: str, values: dict[str, Any], report: _Report) -> _Folder | None:
        field_name = "environment" if values["environment"] else "instance_id"
        if self.folders is None:
            report(
                field_name,
                f"no environments archive came with {self.name}: give the instance an `image` "
                f"it runs in, or upload its environment (a folder named {short_text(name)} "
                "holding the repository at base_commit and a Dockerfile) in an archive",
            )
            return None
        folder = self.folders.get(name)
        if folder is None:
            shown = ", ".join(sorted(self.folders)[:3]) or "none"
            report(
                field_name,
                f"{self.tree_name} has no folder {short_text(name)} for its environment "
                f"(its folders: {shown}{', ...' if len(self.folders) > 3 else ''})",
            )
            return None
        if DOCKERFILE not in folder.files:
            report(
                field_name,
                f"the environment folder {short_text(name)} in {self.tree_name} has no "
                f"{DOCKERFILE} beside the repository",
            )
            return None
        return folder

    def _check_snapshot(self, source: dict, read: swe_snapshot.Reader, report: _Report) -> None:
        head, problem = swe_snapshot.repository_head(read)
        where = (
            f"the image {source['docker_image']}"
            if source["docker_image"]
            else "the environment's repository"
        )
        base = source["base_commit"].lower()
        if problem:
            report("base_commit", f"cannot tell which commit {where} is at: {problem}")
        elif not head.startswith(base):
            report("base_commit", f"{where} is at {head[:12]}, not at base_commit {base[:12]}")
        _, problem = swe_snapshot.apply_patch(source["patch"], read)
        if problem:
            report("patch", problem)
        after: dict[str, str | None] | None = {}
        if source["test_patch"].strip():  # none: the listed tests are in the base already
            after, problem = swe_snapshot.apply_patch(source["test_patch"], read)
            if problem:
                report("test_patch", problem)
                return

        def read_text(path: str) -> str | None:
            if after is not None and path in after:
                return after[path]  # None: the test_patch deletes it
            data = read(path)
            return None if data is None else data.decode("utf-8", "replace")

        tests = swe_snapshot.TestIds(read_text)
        for list_name in _TEST_LISTS:
            for reason in tests.problems(source[list_name]):
                report(list_name, reason)


def _fields(obj: dict[str, Any], report: _Report) -> dict[str, Any]:
    """The line's values, checked; a missing key where a problem was reported."""
    values: dict[str, Any] = {}
    instance_id = obj.get("instance_id")
    if isinstance(instance_id, str) and instance_id.strip():
        report.instance_id = instance_id
    for key in _REQUIRED_TEXT:
        value = obj.get(key)
        if key not in obj:
            report(key, "missing")
        elif not isinstance(value, str):
            report(key, f"must be a string, got {json_type(value)}")
        elif key != "test_patch" and not value.strip():
            report(key, "must not be empty")
        else:
            values[key] = value
    if "instance_id" in values:
        value = values["instance_id"]
        if _CONTROL.search(value) or len(value) > _MAX_ID_CHARS or value != value.strip():
            report(
                "instance_id",
                f"must be at most {_MAX_ID_CHARS} characters with no control characters or "
                "spaces around it",
            )
            del values["instance_id"]
    if "base_commit" in values and not _COMMIT.match(values["base_commit"]):
        report("base_commit", "must be a commit hash (7 to 64 hexadecimal digits)")
    for key in _TEST_LISTS:
        listed = _test_list(obj, key, report)
        if listed is not None:
            values[key] = listed
    if values.get("FAIL_TO_PASS") == []:
        report("FAIL_TO_PASS", "is empty: an instance needs a test the fix makes pass")
    version = obj.get("version")
    if version is None:
        values["version"] = ""
    elif isinstance(version, str):
        values["version"] = version
    elif isinstance(version, int | float) and not isinstance(version, bool):
        values["version"] = str(version)
    else:
        report("version", f"must be a string or a number, got {json_type(version)}")
    for key in _OPTIONAL_TEXT:
        value = obj.get(key)
        if value is not None and not isinstance(value, str):
            report(key, f"must be a string, got {json_type(value)}")
        values[key] = value or ""
    for key in ("image", "environment"):
        value = obj.get(key)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            report(key, f"must be a non-empty string, got {json_type(value)}")
            value = None
        values[key] = value or ""
    if values["image"] and values["environment"]:
        report("environment", "give `image` or `environment`, not both")
    if "/" in values["environment"] or values["environment"] in (".", ".."):
        report("environment", "must name one folder of the environments archive, not a path")
    check_storable(obj, report)  # type: ignore[arg-type]
    return values


def _test_list(obj: dict[str, Any], key: str, report: _Report) -> list[str] | None:
    if key not in obj:
        report(key, "missing")
        return None
    value = obj[key]
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):
            report(key, "is a string that does not hold a JSON list of test ids")
            return None
    if not isinstance(value, list):
        report(key, f"must be a list of test ids (or a JSON string of one), got {json_type(value)}")
        return None
    bad = [i for i, item in enumerate(value) if not isinstance(item, str) or not item.strip()]
    if bad:
        item = value[bad[0]]
        shown = json_type(item) if not isinstance(item, str) else "an empty string"
        report(key, f"must list test ids as strings: item {bad[0]} is {shown}")
        return None
    return list(value)


def _folders(tree: dict[str, FileEntry]) -> dict[str, _Folder]:
    """The archive's top folders (or, when one folder wraps them all, its subfolders)."""

    def group(prefix: str) -> dict[str, dict[str, FileEntry]]:
        out: dict[str, dict[str, FileEntry]] = {}
        for path, entry in tree.items():
            if not path.startswith(prefix):
                continue
            top, sep, rest = path[len(prefix) :].partition("/")
            if sep:
                out.setdefault(top, {})[rest] = entry
        return out

    groups = group("")
    if len(groups) == 1:
        (only,) = groups
        if DOCKERFILE not in groups[only]:
            inner = group(only + "/")
            if any(DOCKERFILE in files for files in inner.values()):
                groups = inner
    return {name: _Folder(name, files) for name, files in groups.items()}


def _files_digest(records: dict[str, dict]) -> str:
    digest = hashlib.sha256(b"inspector swe environment v1\n")
    for path in sorted(records):
        entry = records[path]
        data = entry["text"].encode("utf-8") if "text" in entry else entry["base64"].encode()
        mode = 0o755 if entry.get("mode", 0o644) & 0o100 else 0o644
        encoded = path.encode("utf-8")
        digest.update(b"\nfile %d:" % len(encoded) + encoded)
        digest.update(
            b" mode %o %s size %d\n" % (mode, b"t" if "text" in entry else b"b", len(data))
        )
        digest.update(data)
    return digest.hexdigest()


def _instance_hash(source: dict[str, Any], files_digest: str) -> str:
    config = {
        "line": source.get("line"),
        "docker_image": source.get("docker_image", ""),
        "dockerfile": source.get("dockerfile", ""),
        "files": files_digest,
    }
    canonical = json.dumps(config, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(b"inspector swe instance v1\n" + canonical.encode("utf-8")).hexdigest()


# --- Predictions -------------------------------------------------------------------------------


def _predictions(
    stream: BinaryIO,
    name: str,
    max_bytes: int,
    issues: list[FormatIssue],
    known: set[str] | None,
    instances_name: str,
) -> list[dict[str, Any]]:
    data = read_limited(stream, name, max_bytes, issues)
    if data is None:
        return []
    samples: list[dict[str, Any]] = []
    per_instance: dict[str, int] = {}
    first_line: dict[tuple[str, str], int] = {}
    for line, obj in json_objects(data, name, issues):
        if obj is None:
            continue
        before = len(issues)
        report = _Report(issues, name, line)
        instance_id = obj.get("instance_id")
        if "instance_id" not in obj:
            report("instance_id", "missing")
        elif not isinstance(instance_id, str) or not instance_id.strip():
            report("instance_id", f"must be a non-empty string, got {json_type(instance_id)}")
        else:
            report.instance_id = instance_id
            if known is not None and instance_id not in known:
                report("instance_id", f"no instance {short_text(instance_id)} in {instances_name}")
        model = obj.get("model_name_or_path")
        if "model_name_or_path" not in obj:
            report("model_name_or_path", "missing")
        elif not isinstance(model, str) or not model.strip():
            report("model_name_or_path", f"must be a non-empty string, got {json_type(model)}")
        if "model_patch" not in obj:
            report("model_patch", "missing (an empty string is a prediction that changes nothing)")
        patch = obj.get("model_patch")
        if patch is None:
            patch = ""  # what a harness writes when the agent produced nothing
        elif not isinstance(patch, str):
            report("model_patch", f"must be a string, got {json_type(patch)}")
            patch = ""
        elif patch.strip():
            problem = _diff_problem(patch)
            if problem:
                report("model_patch", problem)
        given = sample_id_of(obj, report)  # type: ignore[arg-type]
        check_storable(obj, report)  # type: ignore[arg-type]
        if len(issues) != before or given is None:
            continue
        position = per_instance.get(instance_id, 0) + 1
        per_instance[instance_id] = position
        sample_id = given or f"s{position}"
        key = (instance_id, sample_id)
        if key in first_line:
            report(
                "sample_id",
                f"duplicate sample_id {short_text(sample_id)} for instance "
                f"{short_text(instance_id)}, first on line {first_line[key]}",
            )
            continue
        first_line[key] = line
        samples.append(
            {
                "task_id": instance_id,
                "sample_id": sample_id,
                "completion": patch,
                "model": model,
                "line": line,
            }
        )
    return samples


def _diff_problem(text: str) -> str:
    try:
        files = unified_diff.parse(text)
    except unified_diff.DiffError as exc:
        return f"not a unified diff ({exc})"
    if not files:
        return "not a unified diff: it changes no file"
    return ""
