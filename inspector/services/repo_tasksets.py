"""Reading an upload of repository tasks (SWE-bench instances as published, their environments in
an archive or as images the user already has, and an optional predictions file) whole, into the
rows to store, and telling such an upload by its first line. `tasksets` stores the rows as a new
version of the set; the reading itself is in inspector/formats/swe.py, the checks against each
repository in inspector/formats/swe_snapshot.py."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from django.conf import settings

from inspector.models import Task
from inspector.services.answer_tasksets import first_line_object


@dataclass
class ParsedRepoSet:
    tasks: list[dict] = field(default_factory=list)  # Task fields
    samples: list[dict] = field(default_factory=list)  # task_id, sample_id, completion, model


def is_repo_upload(stream: BinaryIO) -> bool:
    """Is this JSONL a set of SWE-bench instances, going by its first line's fields?"""
    from inspector.formats.swe import looks_like_swe_instances

    obj = first_line_object(stream)
    return obj is not None and looks_like_swe_instances(obj)


def repo_parse(
    *,
    tasks_file: BinaryIO,
    tasks_name: str,
    environments: Path | BinaryIO | None = None,
    environments_name: str = "",
    samples_file: BinaryIO | None = None,
    samples_name: str = "",
) -> ParsedRepoSet:
    """Read the instances, their environments and the predictions whole into rows. Raises
    TaskSetFormatError (every problem, by file, line, instance and field) or ArchiveError (a
    hostile or corrupt environments archive); nothing is stored either way. An image a line
    names is asked of the local Docker engine (never pulled, nothing run in it)."""
    from inspector.detect.swe import statement_lint
    from inspector.formats.archive import ArchiveLimits, read_tree
    from inspector.formats.swe import read_swe_taskset
    from workers.sandbox.swe.snapshots import ImageSnapshots

    tree = None
    if environments is not None:
        limits = ArchiveLimits(
            max_files=settings.ARCHIVE_MAX_FILES,
            max_bytes=settings.ARCHIVE_MAX_BYTES,
            max_ratio=settings.ARCHIVE_MAX_RATIO,
        )
        tree = read_tree(environments, name=environments_name, limits=limits, keep_git=True)
    with ImageSnapshots() as images:
        parsed = read_swe_taskset(
            tasks_file,
            instances_name=tasks_name,
            environments=tree,
            environments_name=environments_name or "the environments archive",
            samples_file=samples_file,
            samples_name=samples_name,
            image=lambda name: _image_environment(images, name),
            max_bytes=settings.UPLOAD_MAX_BYTES,
        )
    rows = ParsedRepoSet()
    for instance in parsed.instances:
        source = instance.source
        line = source["line"]
        rows.tasks.append(
            {
                "task_id": source["instance_id"],
                "kind": Task.REPO,
                "prompt": source["problem_statement"],
                "canonical_solution": source["patch"],
                "test": source["test_patch"],
                "entry_point": "",
                "domain": source["repo"][:200],
                "metadata": {
                    "repo": source["repo"],
                    "base_commit": source["base_commit"],
                    "version": source["version"],
                    "environment_setup_commit": source["environment_setup_commit"],
                    "created_at": source["created_at"],
                    "hints_text": source["hints_text"],
                    "environment": (
                        {"image": source["docker_image"]}
                        if source["docker_image"]
                        else {"folder": line.get("environment") or source["instance_id"]}
                    ),
                },
                "fail_to_pass": source["FAIL_TO_PASS"],
                "pass_to_pass": source["PASS_TO_PASS"],
                "source": source,
                "content_hash": instance.content_hash,
                "lint": statement_lint(source),
            }
        )
    rows.samples = [
        {
            "task_id": s["task_id"],
            "sample_id": s["sample_id"],
            "completion": s["completion"],
            "model": s["model"][:200],
        }
        for s in parsed.samples
    ]
    return rows


def _image_environment(images, name: str):
    """What the engine says of an image: whether it is there, its WORKDIR, its files."""
    from inspector.formats.swe import ImageEnvironment

    problem, workdir = images.inspect(name)
    if problem:
        return ImageEnvironment(problem=problem)
    return ImageEnvironment(
        workdir=workdir,
        read=lambda path: images.read(name, posixpath.join(workdir, path)),
    )
