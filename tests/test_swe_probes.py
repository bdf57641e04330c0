"""The probes run on every repository task: for each fixture instance each is a patch that
applies to the snapshot (or a bash script that parses), expects not to resolve, and the
drop-hunk probes name the hunk they drop. Plain Python; bash only parses the scripts (`-n`)."""

from __future__ import annotations

import subprocess

import pytest

from bench.swe import fixtures
from inspector.detect.swe_probes import MUST_NOT_RESOLVE, swe_probes
from inspector.formats import unified_diff

NAMES = {
    "empty-patch",
    "conftest-pass-all",
    "conftest-skip-all",
    "delete-tests",
    "skip-marks",
    "sitecustomize-patch",
    "sitecustomize-site",
    "git-history",
}


@pytest.fixture(scope="module")
def sources(swe_fixture):
    return fixtures.sources(swe_fixture)


def tree_of(source: dict) -> dict[str, str]:
    return {
        path: entry["text"]
        for path, entry in source["files"].items()
        if "text" in entry and not path.startswith(".git/") and path != "Dockerfile"
    }


def test_every_instance_gets_every_probe_and_each_must_not_resolve(sources):
    for instance_id, source in sources.items():
        probes = swe_probes(source)
        names = [p["name"] for p in probes]
        assert len(names) == len(set(names)), instance_id
        assert NAMES <= set(names), instance_id
        assert {p["expect"] for p in probes} == {MUST_NOT_RESOLVE}
        assert all(("patch" in p) != ("script" in p) and p["description"] for p in probes)


def test_each_patch_probe_applies_to_the_instances_snapshot(sources):
    for instance_id, source in sources.items():
        tree = tree_of(source)
        for probe in swe_probes(source):
            if probe.get("patch"):
                after = unified_diff.apply(unified_diff.parse(probe["patch"]), tree)
                assert after != tree, (instance_id, probe["name"])


def test_each_script_probe_is_bash_that_parses_and_starts_with_the_guard(sources):
    scripts = {p["name"]: p["script"] for p in swe_probes(sources["tkem__cachetools-clean"])
               if "script" in p}  # fmt: skip
    assert set(scripts) == {"sitecustomize-site", "git-history"}
    for name, script in scripts.items():
        done = subprocess.run(["bash", "-n"], input=script, text=True, capture_output=True)
        assert done.returncode == 0, (name, done.stderr)
        assert 'if [ "$0" != /agent/run.sh ]' in script


def test_the_conftest_probes_add_a_root_conftest_the_snapshot_does_not_have(sources):
    probes = {p["name"]: p for p in swe_probes(sources["jpvanhal__inflection-clean"])}
    for name, hook in (("conftest-pass-all", "pytest_runtest_makereport"),
                       ("conftest-skip-all", "pytest.mark.skip")):  # fmt: skip
        after = unified_diff.apply(unified_diff.parse(probes[name]["patch"]), {})
        assert list(after) == ["conftest.py"] and hook in after["conftest.py"]


def test_the_sitecustomize_patch_also_lands_on_the_pythonpath_the_dockerfile_sets(sources):
    cachetools = {p["name"]: p for p in swe_probes(sources["tkem__cachetools-clean"])}
    inflection = {p["name"]: p for p in swe_probes(sources["jpvanhal__inflection-clean"])}
    assert unified_diff.files_touched(
        unified_diff.parse(cachetools["sitecustomize-patch"]["patch"])
    ) == ["sitecustomize.py", "src/sitecustomize.py"]
    assert unified_diff.files_touched(
        unified_diff.parse(inflection["sitecustomize-patch"]["patch"])
    ) == ["sitecustomize.py"]


def test_the_delete_and_skip_probes_touch_the_fail_to_pass_tests_files(sources):
    probes = {p["name"]: p for p in swe_probes(sources["tkem__cachetools-clean"])}
    deleted = unified_diff.parse(probes["delete-tests"]["patch"])
    assert [f.path for f in deleted] == ["tests/test_ttl.py", "tests/test_tlru.py"]
    assert all(f.is_deleted for f in deleted)
    skipped = unified_diff.apply(
        unified_diff.parse(probes["skip-marks"]["patch"]),
        tree_of(sources["tkem__cachetools-clean"]),
    )
    assert "pytestmark = pytest.mark.skip" in skipped["tests/test_ttl.py"]


def test_without_a_snapshot_the_delete_probe_is_a_script(sources):
    source = dict(sources["jpvanhal__inflection-clean"], files={})
    probe = next(p for p in swe_probes(source) if p["name"] == "delete-tests")
    assert "script" in probe and "rm -f -- test_inflection.py" in probe["script"]


def test_a_drop_hunk_probe_per_gold_hunk_names_the_file_and_header_it_drops(sources):
    source = sources["tkem__cachetools-weak-tests"]
    gold = unified_diff.parse(source["patch"])
    drops = [p for p in swe_probes(source) if p["name"].startswith("drop-hunk-")]
    assert [(p["name"], p["file"], p["header"]) for p in drops] == [
        (f"drop-hunk-{i}", path, header)
        for i, (path, header) in enumerate(unified_diff.hunks(gold))
    ]
    tree = tree_of(source)
    with_gold = unified_diff.apply(gold, tree)["src/cachetools/__init__.py"]
    without_tlru = unified_diff.apply(unified_diff.parse(drops[1]["patch"]), tree)
    code = without_tlru["src/cachetools/__init__.py"]
    assert "while curr is not root and not (time < curr.expires):" in code  # TTLCache fixed
    assert "order[0].removed or time > order[0].expires" in code  # TLRUCache not
    assert code != with_gold
    # A gold patch of one hunk: dropping it leaves nothing to apply.
    single = sources["jpvanhal__inflection-clean"]
    (only,) = [p for p in swe_probes(single) if p["name"].startswith("drop-hunk-")]
    assert only["patch"] == "" and only["file"] == "inflection/__init__.py"
