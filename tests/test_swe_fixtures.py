"""The SWE-bench fixture set built from real projects (bench/swe/fixtures.py): deterministic, one
instance per planted defect, in the published schema, with patches that apply (or, planted, do
not) to each environment's snapshot. Plain Python: nothing of the projects runs here."""

from __future__ import annotations

import json
import tarfile

import pytest

from bench.swe import fixtures
from inspector.formats import unified_diff

DEFECTS = {
    "broken_environment",
    "unsolvable",
    "mislabeled",
    "flaky",
    "solution_leak",
    "weak_tests",
    "no_signal",
    "statement_names_nothing_tested",
}
SCHEMA = {
    "instance_id", "repo", "base_commit", "patch", "test_patch", "problem_statement",
    "hints_text", "created_at", "version", "FAIL_TO_PASS", "PASS_TO_PASS",
    "environment_setup_commit",
}  # fmt: skip


def snapshot(fixture, instance_id: str) -> dict[str, str]:
    """The repository's files at the base commit (no .git, no Dockerfile), as text."""
    line = next(i for i in fixture.instances if i["instance_id"] == instance_id)
    files = fixture.environments[line.get("environment") or instance_id]
    return {
        path: data.decode()
        for path, (_, data) in files.items()
        if not path.startswith(".git/") and path != "Dockerfile"
    }


def listed(value) -> list[str]:
    return json.loads(value) if isinstance(value, str) else value


def test_the_builder_writes_the_same_bytes_twice(swe_fixture, tmp_path):
    again = fixtures.build(tmp_path / "again")
    for name in ("instances.jsonl", "environments.tar.gz", "predictions.jsonl", "truth.json"):
        assert (swe_fixture.folder / name).read_bytes() == (again.folder / name).read_bytes(), name


def test_every_defect_of_the_issue_is_planted_alone_and_two_instances_are_clean(swe_fixture):
    truth = swe_fixture.truth
    planted = [entry["defects"] for entry in truth.values()]
    assert {d for defects in planted for d in defects} == DEFECTS
    assert all(len(defects) <= 1 for defects in planted)
    assert sorted(i for i, e in truth.items() if not e["defects"]) == [
        "jpvanhal__inflection-clean",
        "tkem__cachetools-clean",
    ]
    leaks = {i: e["where"] for i, e in truth.items() if e["defects"] == ["solution_leak"]}
    assert sorted(w for where in leaks.values() for w in where) == [
        "dangling", "packed-refs", "reachable from refs/heads/fix/expire-boundary", "reflog",
    ]  # fmt: skip


def test_the_instances_file_is_the_published_schema_with_lists_as_json_strings_on_some_lines(
    swe_fixture,
):
    lines = [json.loads(line) for line in swe_fixture.instances_path.read_text().splitlines()]
    assert len(lines) == len(swe_fixture.truth) == 14
    assert all(SCHEMA <= set(line) for line in lines)
    kinds = {type(line["FAIL_TO_PASS"]) for line in lines}
    assert kinds == {str, list}
    assert all(listed(line["FAIL_TO_PASS"]) for line in lines)
    predictions = [json.loads(p) for p in swe_fixture.predictions_path.read_text().splitlines()]
    assert {tuple(sorted(p)) for p in predictions} == {
        ("instance_id", "model_name_or_path", "model_patch")
    }
    kinds = {s["kind"] for e in swe_fixture.truth.values() for s in e["samples"].values()}
    assert kinds == {"right", "wrong", "partial", "does_not_apply"}


def test_each_environment_is_a_folder_with_its_repository_and_a_dockerfile_from_the_swe_image(
    swe_fixture,
):
    with tarfile.open(swe_fixture.environments_path) as archive:
        names = archive.getnames()
    folders = {name.split("/", 1)[0] for name in names}
    assert folders == set(swe_fixture.environments)
    for folder in folders:
        assert f"{folder}/.git/HEAD" in names and f"{folder}/Dockerfile" in names
        dockerfile = dict(swe_fixture.environments[folder])["Dockerfile"][1].decode()
        assert dockerfile.startswith(f"FROM {fixtures.SWE_IMAGE}\n")
        assert "COPY . /testbed\nWORKDIR /testbed\n" in dockerfile
    named = {line.get("environment") or line["instance_id"] for line in swe_fixture.instances}
    assert named == folders


@pytest.mark.parametrize("field", ["patch", "test_patch"])
def test_the_gold_and_test_patches_apply_to_each_snapshot(swe_fixture, field):
    for line in swe_fixture.instances:
        tree = snapshot(swe_fixture, line["instance_id"])
        after = unified_diff.apply(unified_diff.parse(line[field]), tree)
        assert after != tree, line["instance_id"]


def test_every_listed_test_is_in_a_file_of_the_snapshot_after_the_test_patch(swe_fixture):
    for line in swe_fixture.instances:
        tree = snapshot(swe_fixture, line["instance_id"])
        tree = unified_diff.apply(unified_diff.parse(line["test_patch"]), tree)
        for test_id in listed(line["FAIL_TO_PASS"]) + listed(line["PASS_TO_PASS"]):
            path, _, rest = test_id.partition("::")
            # The class for a method (cachetools' tests inherit most of theirs from a mixin in
            # tests/__init__.py), else the function.
            name = rest.split("::")[0].split("[")[0]
            text = tree.get(path, "")
            assert f"def {name}(" in text or f"class {name}(" in text, (
                line["instance_id"],
                test_id,
            )


def test_the_sample_that_does_not_apply_fails_naming_its_file_and_hunk(swe_fixture):
    broken = [
        (instance_id, model)
        for instance_id, entry in swe_fixture.truth.items()
        for model, sample in entry["samples"].items()
        if sample["kind"] == "does_not_apply"
    ]
    patches = fixtures.predictions_by_instance(swe_fixture)
    assert len(broken) == 2
    for instance_id, model in broken:
        parsed = unified_diff.parse(patches[instance_id][model])
        with pytest.raises(unified_diff.PatchError) as error:
            unified_diff.apply(parsed, snapshot(swe_fixture, instance_id))
        assert error.value.path.endswith("__init__.py") and error.value.hunk_header.startswith("@@")


def test_the_weak_tests_instance_names_the_gold_hunk_its_tests_ignore(swe_fixture):
    entry = swe_fixture.truth["tkem__cachetools-weak-tests"]
    line = next(
        i for i in swe_fixture.instances if i["instance_id"] == "tkem__cachetools-weak-tests"
    )
    hunks = unified_diff.hunks(unified_diff.parse(line["patch"]))
    assert (entry["weak_hunk"]["file"], entry["weak_hunk"]["header"]) == hunks[1]
    assert "class TLRUCache" in entry["weak_hunk"]["header"]
    assert all(t.startswith("tests/test_ttl.py::") for t in listed(line["FAIL_TO_PASS"]))


def test_sources_are_the_shared_designs_source_dicts(swe_fixture):
    sources = fixtures.sources(swe_fixture)
    source = sources["tkem__cachetools-leak-dangling"]
    assert source["kind"] == "swe" and source["dockerfile"] == "Dockerfile"
    assert isinstance(source["FAIL_TO_PASS"], list) and source["workdir"] == "/testbed"
    assert "base64" in source["files"][".git/HEAD"] or "text" in source["files"][".git/HEAD"]
    assert source["line"]["instance_id"] == "tkem__cachetools-leak-dangling"
