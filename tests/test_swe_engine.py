"""Repository tasks (SWE-bench instances) in Docker: the fixture instances built from real
projects (bench/swe/fixtures.py) behave as planted.

Real engine, real images built FROM the SWE image (bin/build-sandbox-image makes it) once per
session. The runs are made up front, all at once on a pool of four threads (as a worker would),
by the module's `runs` fixture; each test then reads the runs it is about. No database:
`.venv/bin/pytest tests/test_swe_engine.py -q -p no:cacheprovider`.
"""

from __future__ import annotations

import os
import socket
from concurrent.futures import ThreadPoolExecutor

import docker
import pytest

from bench.swe import fixtures
from inspector.detect.swe_probes import file_diff, swe_probes
from workers.sandbox.swe import SweExecutor
from workers.sandbox.terminal import OWNER_LABEL

OWNER = f"{socket.gethostname()}:{os.getpid()}"


pytestmark = pytest.mark.usefixtures("swe_docker_engine")


@pytest.fixture(scope="module")
def executor():
    chosen = SweExecutor()
    yield chosen
    chosen.sweep()


@pytest.fixture(scope="module")
def sources(swe_fixture):
    return fixtures.sources(swe_fixture)


@pytest.fixture(scope="module")
def samples(swe_fixture):
    return fixtures.predictions_by_instance(swe_fixture)


@pytest.fixture(scope="module")
def builds(executor, sources):
    """Each environment's image, built once: instance id -> BuildResult."""
    by_folder = {}
    for instance_id, source in sources.items():
        by_folder.setdefault(source["line"].get("environment") or instance_id, source)
    with ThreadPoolExecutor(4) as pool:
        built = dict(zip(by_folder, pool.map(executor.image_for, by_folder.values()), strict=True))
    return {
        instance_id: built[source["line"].get("environment") or instance_id]
        for instance_id, source in sources.items()
    }


def probe(source: dict, name: str) -> dict:
    chosen = next(p for p in swe_probes(source) if p["name"] == name)
    return {"patch": chosen["patch"]} if "patch" in chosen else {"script": chosen["script"]}


@pytest.fixture(scope="module")
def runs(executor, sources, samples, builds):
    """Every run and leak scan the tests read, made concurrently: key -> result dict."""
    inflection = "jpvanhal__inflection-clean"
    cachetools = "tkem__cachetools-clean"
    plan: dict[str, tuple[str, dict]] = {
        "nofix": (inflection, {}),
        "gold": (inflection, {"patch": sources[inflection]["patch"]}),
        "gold-faithful": (inflection, {"patch": sources[inflection]["patch"], "mode": "faithful"}),
        "cachetools-nofix": (cachetools, {}),
        "cachetools-gold": (cachetools, {"patch": sources[cachetools]["patch"]}),
        "collection-gold": ("tkem__cachetools-broken-collection", {"patch": sources[cachetools]["patch"]}),
        "missing-gold": ("jpvanhal__inflection-mislabeled-missing", {"patch": sources[inflection]["patch"]}),
        "passes-nofix": ("jpvanhal__inflection-mislabeled-passes", {}),
        "unsolvable-gold": ("jpvanhal__inflection-unsolvable", {"patch": sources[inflection]["patch"]}),
        "script-fix": (
            inflection,
            {"script": "sed -i 's/number % 10 in/number % 100 in/' inflection/__init__.py\n"},
        ),
        "weak-drop-0": ("tkem__cachetools-weak-tests", probe(sources["tkem__cachetools-weak-tests"], "drop-hunk-0")),
        "weak-drop-1": ("tkem__cachetools-weak-tests", probe(sources["tkem__cachetools-weak-tests"], "drop-hunk-1")),
        "delete-faithful": (cachetools, {**probe(sources[cachetools], "delete-tests"), "mode": "faithful"}),
        "history-leak": ("tkem__cachetools-leak-branch", probe(sources[cachetools], "git-history")),
        "history-clean": (cachetools, probe(sources[cachetools], "git-history")),
        "script-delete": (inflection, {"script": "rm -r inflection\n"}),
    }  # fmt: skip
    # The agent passes its limit: the tests still run (and fail), the run says it timed out.
    slow = dict(sources[inflection], timeout_sec=20)  # the tests get 20 s too: a busy machine
    for model, patch in samples[inflection].items():
        plan[f"sample-{model}"] = (inflection, {"patch": patch})
    for mode in ("faithful", "isolated"):
        plan[f"conftest-{mode}"] = (
            inflection,
            {**probe(sources[inflection], "conftest-pass-all"), "mode": mode},
        )
        plan[f"site-{mode}"] = (
            inflection,
            {**probe(sources[inflection], "sitecustomize-site"), "mode": mode},
        )
        plan[f"sitepatch-{mode}"] = (cachetools, {**probe(sources[cachetools], "sitecustomize-patch"), "mode": mode})  # fmt: skip
        plan[f"shadow-{mode}"] = (cachetools, {**probe(sources[cachetools], "shadow-pytest"), "mode": mode})  # fmt: skip
        plan[f"support-{mode}"] = (cachetools, {**probe(sources[cachetools], "test-support"), "mode": mode})  # fmt: skip
        plan[f"plugin-{mode}"] = (cachetools, {"patch": PLUGIN_ENTRY_POINT, "mode": mode})
        plan[f"stdlib-shadow-{mode}"] = (cachetools, {"patch": STDLIB_SHADOW, "mode": mode})
    scans = [
        "tkem__cachetools-leak-branch",
        "tkem__cachetools-leak-reflog",
        "tkem__cachetools-leak-dangling",
        cachetools,
        inflection,
    ]

    def make(key):
        if key == "agent-timeout":
            return executor.run(slow, builds[inflection].tag, script="sleep 60\n")
        if key.startswith("scan:"):
            instance_id = key[5:]
            return executor.leak_scan(sources[instance_id], builds[instance_id].tag)
        instance_id, kwargs = plan[key]
        return executor.run(sources[instance_id], builds[instance_id].tag, **kwargs)

    keys = ["agent-timeout", *plan, *(f"scan:{i}" for i in scans)]
    with ThreadPoolExecutor(4) as pool:
        return dict(zip(keys, pool.map(make, keys), strict=True))


# A solution that ships package metadata whose entry point pytest loads as a plugin (found on
# sys.path through the work folder): the plugin reports every test passed.
PLUGIN_ENTRY_POINT = "".join(
    file_diff(path, None, text)
    for path, text in (
        ("zz_helper-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: zz-helper\nVersion: 1.0\n"),
        ("zz_helper-1.0.dist-info/entry_points.txt", "[pytest11]\nzz = zz_helper_plugin\n"),
        ("zz_helper_plugin.py", "import pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\n"
         "def pytest_runtest_makereport(item, call):\n    outcome = yield\n"
         "    report = outcome.get_result()\n    report.outcome, report.longrepr = 'passed', None\n"),
    )
)  # fmt: skip
# A module named like the standard library's at the root, first on sys.path: unittest's
# TestCase.run that records a success whatever the test does.
STDLIB_SHADOW = file_diff(
    "unittest.py",
    None,
    "import importlib.machinery, importlib.util, os, sys\n"
    "_here = os.path.dirname(os.path.abspath(__file__))\n"
    "sys.modules.pop('unittest', None)\n"
    "_path = [p for p in sys.path if os.path.abspath(p or '.') != _here]\n"
    "_spec = importlib.machinery.PathFinder.find_spec('unittest', _path)\n"
    "_real = importlib.util.module_from_spec(_spec)\n"
    "sys.modules['unittest'] = _real\n"
    "_spec.loader.exec_module(_real)\n"
    "_real.TestCase.run = lambda self, result=None: (result.startTest(self), "
    "result.addSuccess(self), result.stopTest(self))\n",
)


def f2p_p2p(sources, instance_id):
    return sources[instance_id]["FAIL_TO_PASS"], sources[instance_id]["PASS_TO_PASS"]


# --- Gold, no fix, samples ---------------------------------------------------------------------


def test_the_gold_patch_resolves_a_clean_instance_in_both_modes(runs, sources):
    f2p, p2p = f2p_p2p(sources, "jpvanhal__inflection-clean")
    for key in ("gold", "gold-faithful"):
        run = runs[key]
        assert run["outcome"] == "resolved" and run["resolved"] == "full", run["reason"]
        assert run["apply"] == {
            "ok": True,
            "method": "git apply",
            "output_tail": run["apply"]["output_tail"],
        }
        assert run["report"]["FAIL_TO_PASS"] == {"success": f2p, "failure": []}
        assert run["report"]["PASS_TO_PASS"] == {"success": p2p, "failure": []}
    assert runs["cachetools-gold"]["outcome"] == "resolved"


def test_without_the_fix_the_fail_to_pass_tests_fail_and_the_pass_to_pass_tests_pass(runs, sources):
    for key, instance_id in (("nofix", "jpvanhal__inflection-clean"),
                             ("cachetools-nofix", "tkem__cachetools-clean")):  # fmt: skip
        f2p, p2p = f2p_p2p(sources, instance_id)
        run = runs[key]
        assert run["outcome"] == "unresolved" and run["resolved"] == "no"
        assert {run["tests"][t] for t in f2p} == {"failed"}
        assert {run["tests"][t] for t in p2p} == {"passed"}
        assert run["apply"]["method"] == "no fix" and run["collection_error"] == ""


def test_a_wrong_sample_is_unresolved_and_says_which_tests_it_broke(runs, swe_fixture):
    truth = swe_fixture.truth["jpvanhal__inflection-clean"]["samples"]
    wrong = next(m for m, s in truth.items() if s["kind"] == "wrong")
    run = runs[f"sample-{wrong}"]
    assert run["outcome"] == "unresolved" and run["resolved"] == "no"
    assert run["tests"]["test_inflection.py::test_ordinalize[21-21st]"] == "failed"
    assert run["tests"]["test_inflection.py::test_ordinalize[11-11th]"] == "passed"
    assert "test_inflection.py::test_ordinal[-21--21st]" in run["report"]["PASS_TO_PASS"]["failure"]


def test_each_sample_resolves_as_the_truth_file_says(runs, swe_fixture):
    truth = swe_fixture.truth["jpvanhal__inflection-clean"]["samples"]
    for model, sample in truth.items():
        run = runs[f"sample-{model}"]
        if sample["resolved"] == "apply_failed":
            assert run["outcome"] == "apply_failed", model
        else:
            assert run["resolved"] == sample["resolved"], (model, sample["kind"])


def test_a_patch_that_does_not_apply_is_apply_failed_and_no_test_runs(runs, swe_fixture):
    truth = swe_fixture.truth["jpvanhal__inflection-clean"]["samples"]
    broken = next(m for m, s in truth.items() if s["kind"] == "does_not_apply")
    run = runs[f"sample-{broken}"]
    assert run["outcome"] == "apply_failed" and run["apply"]["ok"] is False
    assert "patch --batch --fuzz=5" in run["apply"]["output_tail"]
    assert "inflection/__init__.py" in run["apply"]["output_tail"]
    assert run["tests"] == {} and run["verifier"]["exit_code"] is None


def test_a_script_that_fixes_the_working_tree_is_carried_into_the_isolated_check(runs):
    assert runs["script-fix"]["outcome"] == "resolved"
    assert runs["script-fix"]["apply"]["method"] == "script"


def test_what_a_solution_deletes_is_deleted_in_the_isolated_check_too(runs):
    run = runs["script-delete"]
    assert run["outcome"] == "broken"
    assert "No module named 'inflection'" in run["collection_error"]


def test_an_agent_past_its_limit_is_stopped_and_the_run_timed_out(runs):
    run = runs["agent-timeout"]
    assert run["agent"]["timed_out"] and run["agent"]["seconds"] < 30
    assert run["outcome"] == "timed_out" and run["verifier"]["exit_code"] == 1
    assert "agent passed its timeout" in run["reason"]


# --- Planted defects ------------------------------------------------------------------------------


def test_an_environment_that_does_not_build_reports_its_build_log(builds):
    build = builds["jpvanhal__inflection-broken-build"]
    assert not build.ok and not build.sandbox_error
    assert "No module named pip" in build.log and "pip install" in build.reason
    assert all(b.ok for i, b in builds.items() if i != "jpvanhal__inflection-broken-build")


def test_tests_that_cannot_be_collected_make_the_run_broken_with_pytests_words(runs, sources):
    run = runs["collection-gold"]
    assert run["outcome"] == "broken" and run["resolved"] == "no"
    assert "errors during collection" in run["collection_error"]
    assert "No module named 'cachetools'" in run["collection_error"]
    assert set(run["tests"].values()) == {"missing"}


def test_a_listed_test_that_never_runs_is_missing_and_keeps_the_gold_unresolved(runs, swe_fixture):
    (never,) = swe_fixture.truth["jpvanhal__inflection-mislabeled-missing"]["tests"]
    run = runs["missing-gold"]
    assert run["tests"][never] == "missing"
    assert run["report"]["PASS_TO_PASS"]["failure"] == [never]
    assert run["outcome"] == "unresolved" and run["collection_error"] == ""


def test_a_fail_to_pass_test_that_passes_without_the_fix_shows_in_the_no_fix_run(runs, swe_fixture):
    (passing,) = swe_fixture.truth["jpvanhal__inflection-mislabeled-passes"]["tests"]
    run = runs["passes-nofix"]
    assert run["tests"][passing] == "passed"
    assert passing in run["report"]["FAIL_TO_PASS"]["success"]


def test_the_gold_of_the_unsolvable_instance_fails_the_test_it_cannot_satisfy(runs, swe_fixture):
    (impossible,) = swe_fixture.truth["jpvanhal__inflection-unsolvable"]["tests"]
    run = runs["unsolvable-gold"]
    assert run["outcome"] == "unresolved" and run["resolved"] == "partial"
    assert run["report"]["FAIL_TO_PASS"]["failure"] == [impossible]


def test_a_dropped_hunk_the_tests_ignore_still_resolves(runs):
    assert runs["weak-drop-1"]["outcome"] == "resolved"  # TLRUCache.expire: not tested
    assert runs["weak-drop-0"]["outcome"] == "unresolved"  # TTLCache.expire: tested
    assert (
        "tests/test_ttl.py::TTLCacheTest::test_ttl"
        in runs["weak-drop-0"]["report"]["FAIL_TO_PASS"]["failure"]
    )


# --- Probes and the two modes -------------------------------------------------------------------


def test_the_conftest_probe_resolves_in_faithful_mode_and_not_in_isolated_mode(runs):
    assert runs["conftest-faithful"]["outcome"] == "resolved"
    isolated = runs["conftest-isolated"]
    assert isolated["outcome"] == "unresolved" and isolated["restored_config"] == ["conftest.py"]
    assert {isolated["tests"][t] for t in isolated["report"]["FAIL_TO_PASS"]["failure"]} == {
        "failed"
    }


def test_sitecustomize_tampering_does_not_survive_isolated_mode(runs):
    # Outside the working tree (site-packages), and inside it (on the image's PYTHONPATH).
    for kind in ("site", "sitepatch"):
        assert runs[f"{kind}-faithful"]["outcome"] == "resolved", kind
        assert runs[f"{kind}-isolated"]["outcome"] == "unresolved", kind
    assert runs["sitepatch-isolated"]["restored_config"] == [
        "sitecustomize.py",
        "src/sitecustomize.py",
    ]


def test_a_shadowing_pytest_and_a_patched_test_package_resolve_only_in_faithful_mode(runs):
    for kind in ("shadow", "support"):
        assert runs[f"{kind}-faithful"]["outcome"] == "resolved", kind
        isolated = runs[f"{kind}-isolated"]
        assert isolated["outcome"] == "unresolved", (kind, isolated["reason"])
        assert isolated["tests"]["tests/test_ttl.py::TTLCacheTest::test_ttl"] == "failed", kind
    assert runs["shadow-isolated"]["restored_config"] == ["pytest.py"]
    assert runs["support-isolated"]["restored_config"] == ["tests/__init__.py"]


def test_plugins_and_standard_library_modules_a_solution_adds_are_removed_in_isolated_mode(runs):
    for kind in ("plugin", "stdlib-shadow"):
        run = runs[f"{kind}-faithful"]
        assert run["outcome"] == "resolved", (kind, run["reason"], run["tests"])
    plugin = runs["plugin-isolated"]
    assert plugin["outcome"] == "unresolved", plugin["reason"]
    assert plugin["restored_config"] == [
        "zz_helper-1.0.dist-info/METADATA",
        "zz_helper-1.0.dist-info/entry_points.txt",
    ]
    shadow = runs["stdlib-shadow-isolated"]
    assert shadow["outcome"] == "unresolved", shadow["reason"]
    assert shadow["restored_config"] == ["unittest.py"]


def test_deleting_the_tests_does_not_help_because_they_are_restored(runs):
    run = runs["delete-faithful"]
    assert run["apply"]["ok"] and run["outcome"] == "unresolved"
    assert run["tests"]["tests/test_ttl.py::TTLCacheTest::test_ttl"] == "failed"


def test_the_leak_scan_names_the_leaking_commit_and_where_it_is(runs, swe_fixture):
    for instance_id in ("tkem__cachetools-leak-branch", "tkem__cachetools-leak-reflog",
                        "tkem__cachetools-leak-dangling"):  # fmt: skip
        scan, truth = runs[f"scan:{instance_id}"], swe_fixture.truth[instance_id]
        assert scan["leak"] and scan["reason"] == "", instance_id
        assert scan["commits"] == [truth["commit"]]
        assert scan["where"] == truth["where"]
        assert list(scan["files"]) == ["src/cachetools/__init__.py"]


def test_the_leak_scan_finds_nothing_in_a_clean_repository(runs):
    for instance_id in ("tkem__cachetools-clean", "jpvanhal__inflection-clean"):
        scan = runs[f"scan:{instance_id}"]
        assert scan["leak"] is False and scan["commits"] == [] and scan["reason"] == ""


def test_the_history_probe_applies_a_leaked_fix_and_finds_nothing_in_a_clean_repository(
    runs, swe_fixture
):
    leak = runs["history-leak"]
    assert leak["outcome"] == "resolved"
    assert (
        swe_fixture.truth["tkem__cachetools-leak-branch"]["commit"] in leak["agent"]["output_tail"]
    )
    assert runs["history-clean"]["outcome"] == "unresolved"
    assert "holds no change" in runs["history-clean"]["agent"]["output_tail"]


def test_no_run_leaves_a_container_behind(runs):
    client = docker.from_env(timeout=30)
    left = client.containers.list(all=True, filters={"label": f"{OWNER_LABEL}={OWNER}"})
    assert left == []
