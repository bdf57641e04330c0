"""Reading SWE-bench instances, their environments and predictions (inspector/formats/swe.py and
swe_snapshot.py): plain data, no database, no Docker. The instances are the 14 fixture instances
of bench/swe/fixtures.py (real projects); each bad input is one of them spoiled the way a user's
file is, and the reader must say which file, line, instance and field, and return nothing."""

from __future__ import annotations

import copy
import io
import json
from typing import Any

import pytest

from bench.swe import fixtures
from inspector.formats.archive import read_tree
from inspector.formats.swe import (
    ImageEnvironment,
    SweTaskSet,
    TaskSetFormatError,
    looks_like_swe_instances,
    read_swe_taskset,
)

CLEAN = "jpvanhal__inflection-clean"
CACHE = "tkem__cachetools-clean"


@pytest.fixture(scope="module")
def tree(swe_fixture):
    return read_tree(swe_fixture.environments_path, name="environments.tar.gz", keep_git=True)


@pytest.fixture
def lines(swe_fixture) -> list[dict]:
    return copy.deepcopy(swe_fixture.instances)


def jsonl(rows: list[Any]) -> bytes:
    return b"".join(
        (row if isinstance(row, bytes) else json.dumps(row).encode()) + b"\n" for row in rows
    )


def read(
    rows: list[Any],
    tree: dict | None,
    predictions: list[Any] | None = None,
    image=None,
) -> SweTaskSet:
    return read_swe_taskset(
        io.BytesIO(jsonl(rows)),
        instances_name="instances.jsonl",
        environments=tree,
        environments_name="environments.tar.gz",
        samples_file=None if predictions is None else io.BytesIO(jsonl(predictions)),
        samples_name="predictions.jsonl",
        image=image,
    )


def refusal(rows: list[Any], tree: dict | None, predictions=None, image=None) -> list[str]:
    with pytest.raises(TaskSetFormatError) as caught:
        read(rows, tree, predictions, image)
    return [str(issue) for issue in caught.value.issues]


def listed(value: str | list[str]) -> list[str]:
    return json.loads(value) if isinstance(value, str) else value


def line_of(rows: list[dict], instance_id: str) -> dict:
    return next(row for row in rows if row["instance_id"] == instance_id)


def test_the_fourteen_fixture_instances_read_as_the_source_dicts_the_runs_take(swe_fixture, tree):
    parsed = read(swe_fixture.instances, tree, swe_fixture.predictions)

    expected = fixtures.sources(swe_fixture)
    assert [i.source["instance_id"] for i in parsed.instances] == [
        line["instance_id"] for line in swe_fixture.instances
    ]
    for instance in parsed.instances:
        source = instance.source
        want = expected[source["instance_id"]]
        # The one difference: the work folder is the built image's WORKDIR (the runs read it),
        # where the fixtures' own dicts write /testbed, what their Dockerfiles set.
        assert source["workdir"] == "" and want["workdir"] == "/testbed"
        assert {k: v for k, v in source.items() if k != "workdir"} == {
            k: v for k, v in want.items() if k != "workdir"
        }
    assert len(parsed.samples) == len(swe_fixture.predictions) == 32


def test_lists_as_json_strings_and_as_json_lists_read_the_same(swe_fixture, tree):
    kinds = {type(line["FAIL_TO_PASS"]) for line in swe_fixture.instances}
    parsed = read(swe_fixture.instances, tree)

    assert kinds == {str, list}
    for instance, line in zip(parsed.instances, swe_fixture.instances, strict=True):
        assert instance.source["FAIL_TO_PASS"] == listed(line["FAIL_TO_PASS"])
        assert instance.source["PASS_TO_PASS"] == listed(line["PASS_TO_PASS"])
        assert instance.source["line"] == line  # kept as it came, to be written back


def test_a_shared_environment_folder_and_one_named_like_the_instance_both_read(swe_fixture, tree):
    parsed = read(swe_fixture.instances, tree)
    by_id = {i.source["instance_id"]: i.source for i in parsed.instances}

    assert line_of(swe_fixture.instances, CLEAN)["environment"] == "inflection-ordinal"
    assert "environment" not in line_of(swe_fixture.instances, "tkem__cachetools-leak-reflog")
    assert by_id[CLEAN]["files"][".git/HEAD"]["text"] == "ref: refs/heads/main\n"
    assert by_id[CLEAN]["dockerfile"] == "Dockerfile" and by_id[CLEAN]["docker_image"] == ""
    # The same folder gives the same content; a changed line gives another hash.
    hashes = {i.source["instance_id"]: i.content_hash for i in parsed.instances}
    assert len(set(hashes.values())) == 14


def test_the_kind_is_told_by_an_instance_id_with_a_patch_on_the_first_line(swe_fixture):
    assert looks_like_swe_instances(swe_fixture.instances[0])
    assert looks_like_swe_instances({"instance_id": "x", "test_patch": ""})
    assert not looks_like_swe_instances({"task_id": "x", "prompt": "", "test": ""})
    assert not looks_like_swe_instances({"instance_id": "x", "model_patch": ""})


def test_a_malformed_line_or_a_missing_field_is_named_with_its_line_instance_and_field(lines, tree):
    clean = line_of(lines, CLEAN)
    no_commit = dict(clean, instance_id="no-commit")
    del no_commit["base_commit"]
    rows = [
        clean,
        b"{not json",
        no_commit,
        dict(clean, instance_id="bad-types", repo=7, base_commit="main", problem_statement=" "),
        dict(clean, instance_id=" padded "),
        clean,
    ]

    assert refusal(rows, tree) == [
        "instances.jsonl, line 2: not JSON: Expecting property name enclosed in double quotes "
        "at column 2",
        "instances.jsonl, line 3, instance 'no-commit', field 'base_commit': missing",
        "instances.jsonl, line 4, instance 'bad-types', field 'repo': must be a string, got a "
        "number",
        "instances.jsonl, line 4, instance 'bad-types', field 'problem_statement': must not be "
        "empty",
        "instances.jsonl, line 4, instance 'bad-types', field 'base_commit': must be a commit "
        "hash (7 to 64 hexadecimal digits)",
        "instances.jsonl, line 5, instance ' padded ', field 'instance_id': must be at most 500 "
        "characters with no control characters or spaces around it",
        f"instances.jsonl, line 6, instance '{CLEAN}', field 'instance_id': duplicate "
        f"instance_id '{CLEAN}', first on line 1",
    ]


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (["test_inflection.py::test_ordinal[11-11th]", 3], "must list test ids as strings: item 1 is a number"),
        ('["test_inflection.py::test_ordinal[11-11th]"', "is a string that does not hold a JSON list of test ids"),
        ({"test": "x"}, "must be a list of test ids (or a JSON string of one), got an object"),
        ('{"test": "x"}', "must be a list of test ids (or a JSON string of one), got an object"),
        ([""], "must list test ids as strings: item 0 is an empty string"),
        ([], "is empty: an instance needs a test the fix makes pass"),
    ],
)  # fmt: skip
def test_fail_to_pass_that_is_not_a_list_of_test_ids_is_refused(lines, tree, value, reason):
    line = line_of(lines, CLEAN)
    line["FAIL_TO_PASS"] = value

    assert refusal([line], tree) == [
        f"instances.jsonl, line 1, instance '{CLEAN}', field 'FAIL_TO_PASS': {reason}"
    ]


def test_a_gold_patch_that_does_not_apply_names_the_file_and_hunk(lines, tree):
    line = line_of(lines, CLEAN)
    line["patch"] = line["patch"].replace(
        "     number = abs(int(number))", "     number = int(number)"
    )

    (problem,) = refusal([line], tree)
    assert problem == (
        f"instances.jsonl, line 1, instance '{CLEAN}', field 'patch': does not apply to the "
        "repository at base_commit: inflection/__init__.py, hunk @@ -223,7 +223,7 @@ def "
        "ordinal(number: int) -> str:: its context and removed lines do not match near line 223"
    )


def test_a_test_patch_that_does_not_apply_or_is_no_diff_is_refused(lines, tree):
    spoiled = line_of(lines, CLEAN)
    spoiled["test_patch"] = spoiled["test_patch"].replace(
        '     ("-10", "-10th"),', '     ("-10", "-10."),', 1
    )
    garbled = dict(
        spoiled, instance_id="garbled", test_patch="Here is my fix:\n" + spoiled["test_patch"]
    )
    empty_gold = dict(line_of(lines, CLEAN), instance_id="empty-gold", patch="\n")

    assert refusal([spoiled, garbled, empty_gold], tree) == [
        f"instances.jsonl, line 1, instance '{CLEAN}', field 'test_patch': does not apply to the "
        "repository at base_commit: test_inflection.py, hunk @@ -207,6 +207,9 @@ "
        "ORDINAL_NUMBERS = (: its context and removed lines do not match near line 207",
        "instances.jsonl, line 2, instance 'garbled', field 'test_patch': not a unified diff "
        "(line 1: text outside any file or hunk: 'Here is my fix:')",
        "instances.jsonl, line 3, instance 'empty-gold', field 'patch': must not be empty",
    ]  # fmt: skip


def test_a_listed_test_whose_file_or_name_does_not_exist_after_the_test_patch_is_refused(
    lines, tree
):
    inflection = line_of(lines, CLEAN)
    inflection["FAIL_TO_PASS"] = [
        "test_inflection.py::test_ordinal[11-11th]",
        "tests/test_gone.py::test_a",
        "test_inflection.py::test_no_such_thing",
        "tests/test_gone.py::test_b",
        "test_ordinal",
    ]
    cache = line_of(lines, CACHE)
    cache["PASS_TO_PASS"] = [
        "tests/test_ttl.py::TTLCacheTest::test_popitem",  # inherited from the mixin: exists
        "tests/test_ttl.py::TTLCacheTest::test_nope",
        "tests/test_ttl.py::NoSuchTest::test_ttl",
    ]

    assert refusal([inflection, cache], tree) == [
        f"instances.jsonl, line 1, instance '{CLEAN}', field 'FAIL_TO_PASS': the test file "
        "tests/test_gone.py ('tests/test_gone.py::test_a', 'tests/test_gone.py::test_b') is not "
        "in the repository after the test_patch",
        f"instances.jsonl, line 1, instance '{CLEAN}', field 'FAIL_TO_PASS': "
        "'test_inflection.py::test_no_such_thing': no test test_no_such_thing in test_inflection.py",
        f"instances.jsonl, line 1, instance '{CLEAN}', field 'FAIL_TO_PASS': 'test_ordinal' is not "
        "a pytest test id (path::name or path::Class::name): the runs select the tests by their file",
        f"instances.jsonl, line 2, instance '{CACHE}', field 'PASS_TO_PASS': "
        "'tests/test_ttl.py::TTLCacheTest::test_nope': no test test_nope in class TTLCacheTest of "
        "tests/test_ttl.py, nor in the classes it inherits from the repository",
        f"instances.jsonl, line 2, instance '{CACHE}', field 'PASS_TO_PASS': "
        "'tests/test_ttl.py::NoSuchTest::test_ttl': no class NoSuchTest in tests/test_ttl.py",
    ]  # fmt: skip


def test_a_test_the_test_patch_adds_exists_and_one_only_the_base_lacks_is_not_refused(lines, tree):
    # The unsolvable instance's test_patch adds test_ordinal_rejects_fractions: it is in the
    # file only after the patch, and that is where it is looked for.
    line = line_of(lines, "jpvanhal__inflection-unsolvable")
    assert "test_inflection.py::test_ordinal_rejects_fractions" in listed(line["FAIL_TO_PASS"])
    parsed = read([line], tree)
    assert parsed.instances[0].source["instance_id"] == "jpvanhal__inflection-unsolvable"
    line["test_patch"] = ""
    (problem,) = refusal([line], tree)
    assert "no test test_ordinal_rejects_fractions in test_inflection.py" in problem


def test_an_environment_at_another_commit_is_refused_naming_both(lines, tree):
    line = line_of(lines, CLEAN)
    line["base_commit"] = "0123456789abcdef0123456789abcdef01234567"

    (problem,) = refusal([line], tree)
    assert problem.startswith(
        f"instances.jsonl, line 1, instance '{CLEAN}', field 'base_commit': the environment's "
        "repository is at "
    )
    assert problem.endswith(", not at base_commit 0123456789ab")


def test_a_missing_environment_folder_or_archive_or_dockerfile_is_named(lines, tree):
    named = line_of(lines, CLEAN)
    named["environment"] = "no-such-folder"
    unnamed = line_of(lines, "tkem__cachetools-leak-reflog")
    unnamed["instance_id"] = "tkem__cachetools-elsewhere"
    without_dockerfile = {p: e for p, e in tree.items() if p != "inflection-ordinal/Dockerfile"}

    assert refusal([named, unnamed], tree) == [
        f"instances.jsonl, line 1, instance '{CLEAN}', field 'environment': environments.tar.gz "
        "has no folder 'no-such-folder' for its environment (its folders: cachetools-expire, "
        "inflection-ordinal, jpvanhal__inflection-broken-build, ...)",
        "instances.jsonl, line 2, instance 'tkem__cachetools-elsewhere', field 'instance_id': "
        "environments.tar.gz has no folder 'tkem__cachetools-elsewhere' for its environment (its "
        "folders: cachetools-expire, inflection-ordinal, jpvanhal__inflection-broken-build, ...)",
    ]
    assert refusal([line_of(lines, "jpvanhal__inflection-flaky")], without_dockerfile) == [
        "instances.jsonl, line 1, instance 'jpvanhal__inflection-flaky', field 'environment': the "
        "environment folder 'inflection-ordinal' in environments.tar.gz has no Dockerfile beside "
        "the repository"
    ]
    (problem,) = refusal([line_of(lines, CACHE)], None)
    assert problem.startswith(
        f"instances.jsonl, line 1, instance '{CACHE}', field 'environment': no environments "
        "archive came with instances.jsonl: give the instance an `image` it runs in, or upload "
        "its environment"
    )


def test_an_environment_without_its_git_is_refused(lines, tree):
    without_git = {p: e for p, e in tree.items() if not p.startswith("inflection-ordinal/.git/")}

    (problem,) = refusal([line_of(lines, CLEAN)], without_git)
    assert problem == (
        f"instances.jsonl, line 1, instance '{CLEAN}', field 'base_commit': cannot tell which "
        "commit the environment's repository is at: it has no .git/HEAD: the environment must "
        "hold the repository with its .git at base_commit (the runs restore the test files from "
        "base_commit with git)"
    )


def test_an_image_instance_is_checked_through_the_function_it_is_given(lines, tree):
    line = line_of(lines, CLEAN)
    del line["environment"]
    line["image"] = "example/inflection:0.5"
    files = {
        p[len("inflection-ordinal/") :]: e.data
        for p, e in tree.items()
        if p.startswith("inflection-ordinal/")
    }
    asked = []

    def image(name: str) -> ImageEnvironment:
        asked.append(name)
        return ImageEnvironment(workdir="/testbed", read=files.get)

    parsed = read([line, dict(line, instance_id="second")], None, image=image)
    source = parsed.instances[0].source
    assert (source["docker_image"], source["files"], source["dockerfile"]) == (
        "example/inflection:0.5",
        {},
        "",
    )
    assert asked == ["example/inflection:0.5"]  # once per image

    missing = ImageEnvironment(problem="no image example/inflection:0.5 on this Docker engine")
    assert refusal([line], None, image=lambda name: missing) == [
        f"instances.jsonl, line 1, instance '{CLEAN}', field 'image': no image "
        "example/inflection:0.5 on this Docker engine"
    ]
    line["patch"] = line["patch"].replace("in (11, 12, 13)", "in (11, 12, 14)", 1)
    (problem,) = refusal([line], None, image=image)
    assert "field 'patch': does not apply to the repository at base_commit" in problem
    assert refusal([dict(line, environment="x")], tree, image=image)[0].endswith(
        "field 'environment': give `image` or `environment`, not both"
    )  # fmt: skip


def test_predictions_become_samples_and_an_empty_patch_is_a_legal_one(swe_fixture, tree):
    predictions = [
        *swe_fixture.predictions[:2],
        {"instance_id": CLEAN, "model_patch": "", "model_name_or_path": "lazy"},
        {"instance_id": CLEAN, "model_patch": None, "model_name_or_path": "crashed"},
    ]
    parsed = read([line_of(swe_fixture.instances, CLEAN)], tree, predictions)

    assert [(s["sample_id"], s["model"], bool(s["completion"])) for s in parsed.samples] == [
        ("s1", "swe-agent-a", True),
        ("s2", "swe-agent-b", True),
        ("s3", "lazy", False),
        ("s4", "crashed", False),
    ]
    assert parsed.samples[0]["completion"] == swe_fixture.predictions[0]["model_patch"]


def test_a_prediction_for_an_unknown_instance_or_with_a_garbled_patch_is_refused_with_its_line(
    swe_fixture, tree
):
    good = swe_fixture.predictions[0]
    predictions = [
        good,
        dict(good, instance_id="nobody__nothing-1"),
        dict(good, model_patch="I changed ordinal() to use % 100.\n"),
        dict(
            good,
            model_patch=good["model_patch"].replace("@@ -223,7 +223,7 @@", "@@ -223,9 +223,7 @@"),
        ),
        {"instance_id": CLEAN, "model_patch": ""},
        dict(good, model_patch=3),
    ]

    assert refusal([line_of(swe_fixture.instances, CLEAN)], tree, predictions) == [
        "predictions.jsonl, line 2, instance 'nobody__nothing-1', field 'instance_id': no instance "
        "'nobody__nothing-1' in instances.jsonl",
        f"predictions.jsonl, line 3, instance '{CLEAN}', field 'model_patch': not a unified diff "
        "(line 1: text outside any file or hunk: 'I changed ordinal() to use % 100.')",
        f"predictions.jsonl, line 4, instance '{CLEAN}', field 'model_patch': not a unified diff "
        "(line 5: hunk '@@ -223,9 +223,7 @@ def ordinal(number: int) -> str:' ends early: 2 old "
        "and 0 new lines missing)",
        f"predictions.jsonl, line 5, instance '{CLEAN}', field 'model_name_or_path': missing",
        f"predictions.jsonl, line 6, instance '{CLEAN}', field 'model_patch': must be a string, "
        "got a number",
    ]  # fmt: skip


def test_a_prediction_that_does_not_apply_is_a_legal_sample(swe_fixture, tree):
    broken = [
        p
        for p in swe_fixture.predictions
        if swe_fixture.truth[p["instance_id"]]["samples"][p["model_name_or_path"]]["kind"]
        == "does_not_apply"
    ]
    parsed = read(swe_fixture.instances, tree, broken)

    assert len(parsed.samples) == len(broken) == 2
