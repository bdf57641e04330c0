"""Writing a planted-defect set to files: tasks.jsonl, samples.jsonl and truth.json, with
planted.json beside them."""

from __future__ import annotations

import json
from pathlib import Path

from bench.planted.build import build_planted_set
from bench.planted.plantedset import PlantedSet


def write_planted_set(
    folder: str | Path, planted: PlantedSet | None = None, **build: object
) -> tuple[Path, Path, Path]:
    """Write tasks.jsonl, samples.jsonl and truth.json (task_id -> sorted flags) into `folder`,
    with planted.json beside them (kinds, what was planted, each sample's role). Builds the set
    (`build_planted_set(**build)`) when none is given."""
    if planted is None:
        planted = build_planted_set(**build)  # type: ignore[arg-type]
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tasks_path, samples_path, truth_path = (
        folder / "tasks.jsonl",
        folder / "samples.jsonl",
        folder / "truth.json",
    )
    tasks_path.write_text("".join(json.dumps(t) + "\n" for t in planted.tasks))
    samples_path.write_text("".join(json.dumps(s) + "\n" for s in planted.samples))
    truth_path.write_text(json.dumps(truth_json(planted.truth), indent=1) + "\n")
    meta = {
        "seed": planted.seed,
        "counts": planted.counts(),
        "kinds": planted.kinds,
        "details": planted.details,
        "sample_roles": planted.roles,
        "left_out": planted.left_out,
    }
    (folder / "planted.json").write_text(json.dumps(meta, indent=1) + "\n")
    return tasks_path, samples_path, truth_path


def truth_json(truth: dict[str, set[str]]) -> dict[str, list[str]]:
    return {task_id: sorted(flags) for task_id, flags in truth.items()}
