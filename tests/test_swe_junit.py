"""Reading a repository run's results: pytest's JUnit XML per test id, the swebench-style report
and resolved status, and the paths a diff touches. Plain data, no engine."""

from __future__ import annotations

import pytest

from workers.sandbox.swe import junit
from workers.sandbox.swe.patches import file_changes, is_config, post_image_paths, touched
from workers.sandbox.swe.report import report, resolved_status, swebench_resolved_status

REPORT = b"""<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" errors="1" failures="2" skipped="1" tests="6">
<testcase classname="test_inflection" name="test_ordinal[-11--11th]" time="0.001"/>
<testcase classname="test_inflection" name="test_ordinal[12-12th]" time="0.001">
  <failure message="AssertionError: assert '12th' == '12nd'">trace</failure></testcase>
<testcase classname="tests.test_ttl.TTLCacheTest" name="test_ttl" time="0.001">
  <error message="failed on setup with &quot;boom&quot;">trace</error></testcase>
<testcase classname="tests.test_ttl.TTLCacheTest" name="test_ttl_lru" time="0.001">
  <failure message="assert 1 == 2">trace</failure>
  <error message="failed on teardown">trace</error></testcase>
<testcase classname="tests.unit.test_a" name="test_skip" time="0.0">
  <skipped type="pytest.skip" message="not today">why</skipped></testcase>
<testcase classname="" name="tests.test_broken" time="0.0">
  <error message="collection failure">ModuleNotFoundError: No module named 'cachetools'</error>
</testcase>
</testsuite></testsuites>
"""


@pytest.mark.parametrize(
    ("test_id", "key"),
    [
        (
            "test_inflection.py::test_ordinal[-11--11th]",
            ("test_inflection", "test_ordinal[-11--11th]"),
        ),
        ("tests/test_ttl.py::TTLCacheTest::test_ttl", ("tests.test_ttl.TTLCacheTest", "test_ttl")),
        ("a/b/test_c.py::Outer::Inner::test_d", ("a.b.test_c.Outer.Inner", "test_d")),
        # Parameters may hold "::", "/" and ".py": they are set aside first, as pytest does.
        ("tests/test_x.py::test_y[a::b/c.py]", ("tests.test_x", "test_y[a::b/c.py]")),
        ("tests/test_x.py::test_plain", ("tests.test_x", "test_plain")),
    ],
)
def test_a_test_id_maps_to_the_case_pytests_junitxml_writes_for_it(test_id, key):
    assert junit.case_key(test_id) == key


def test_the_report_gives_each_listed_test_its_outcome_and_missing_for_the_rest():
    parsed = junit.parse(REPORT)
    ids = [
        "test_inflection.py::test_ordinal[-11--11th]",
        "test_inflection.py::test_ordinal[12-12th]",
        "tests/test_ttl.py::TTLCacheTest::test_ttl",
        "tests/test_ttl.py::TTLCacheTest::test_ttl_lru",
        "tests/unit/test_a.py::test_skip",
        "tests/test_broken.py::test_never_collected",
    ]
    assert junit.outcomes(ids, parsed) == {
        ids[0]: "passed",
        ids[1]: "failed",
        ids[2]: "error",
        ids[3]: "failed",  # a failure and a teardown error: it failed
        ids[4]: "skipped",
        ids[5]: "missing",
    }
    assert len(parsed.collection_errors) == 1
    assert "No module named 'cachetools'" in parsed.collection_errors[0]


def test_a_report_with_a_doctype_is_refused_so_no_entity_is_ever_expanded():
    laughs = (
        b'<?xml version="1.0"?><!DOCTYPE t [<!ENTITY a "ha"><!ENTITY b "&a;&a;&a;&a;">]>'
        b'<testsuite><testcase classname="x" name="&b;"/></testsuite>'
    )
    with pytest.raises(junit.JunitError, match="DOCTYPE"):
        junit.parse(laughs)


def test_a_report_too_large_or_not_xml_is_refused_with_the_reason(monkeypatch):
    with pytest.raises(junit.JunitError, match="not well-formed"):
        junit.parse(b"<testsuite><testcase name='x'></testsuite>")
    monkeypatch.setattr(junit, "MAX_BYTES", 100)
    with pytest.raises(junit.JunitError, match="more than 100"):
        junit.parse(REPORT)


F2P = ["t.py::test_a", "t.py::test_b"]
P2P = ["t.py::test_c"]


@pytest.mark.parametrize(
    ("tests", "status"),
    [
        ({"t.py::test_a": "passed", "t.py::test_b": "passed", "t.py::test_c": "passed"}, "full"),
        ({"t.py::test_a": "passed", "t.py::test_b": "failed", "t.py::test_c": "passed"}, "partial"),
        ({"t.py::test_a": "passed", "t.py::test_b": "passed", "t.py::test_c": "failed"}, "no"),
        ({"t.py::test_a": "failed", "t.py::test_b": "error", "t.py::test_c": "passed"}, "no"),
        ({"t.py::test_a": "passed", "t.py::test_b": "passed"}, "no"),  # test_c missing
    ],
)
def test_the_resolved_status_is_swebenchs_full_partial_or_no(tests, status):
    assert resolved_status(report(F2P, P2P, tests)) == status


def test_the_report_lists_success_and_failure_like_swebenchs_report_json():
    tests = {"t.py::test_a": "passed", "t.py::test_b": "skipped", "t.py::test_c": "passed"}
    assert report(F2P, P2P, tests) == {
        "FAIL_TO_PASS": {"success": ["t.py::test_a"], "failure": ["t.py::test_b"]},
        "PASS_TO_PASS": {"success": ["t.py::test_c"], "failure": []},
    }


def test_skipping_every_test_resolves_under_swebenchs_grading_but_not_ours():
    tests = dict.fromkeys(F2P + P2P, "skipped")
    assert resolved_status(report(F2P, P2P, tests)) == "no"
    assert swebench_resolved_status(F2P, P2P, tests) == "full"


DIFF = """\
diff --git a/src/pkg/core.py b/src/pkg/core.py
index 1111111..2222222 100644
--- a/src/pkg/core.py
+++ b/src/pkg/core.py
@@ -1,2 +1,2 @@
 x = 1
--- a removed line that looks like a header
+++ an added line that looks like one
diff --git a/tests/test_new.py b/tests/test_new.py
new file mode 100644
--- /dev/null
+++ b/tests/test_new.py
@@ -0,0 +1 @@
+def test_new(): pass
diff --git a/old.cfg b/old.cfg
deleted file mode 100644
--- a/old.cfg
+++ /dev/null
@@ -1 +0,0 @@
-[x]
diff --git a/a.txt b/b.txt
similarity index 100%
rename from a.txt
rename to b.txt
"""


def test_the_paths_a_diff_touches_come_from_its_headers_never_from_hunk_lines():
    assert file_changes(DIFF) == [
        ("src/pkg/core.py", "src/pkg/core.py"),
        ("", "tests/test_new.py"),
        ("old.cfg", ""),
        ("a.txt", "b.txt"),
    ]
    assert touched(DIFF) == ["src/pkg/core.py", "tests/test_new.py", "old.cfg", "a.txt", "b.txt"]
    assert post_image_paths(DIFF) == ["src/pkg/core.py", "tests/test_new.py", "b.txt"]


@pytest.mark.parametrize(
    ("path", "config"),
    [
        ("conftest.py", True),
        ("tests/unit/conftest.py", True),
        ("src/sitecustomize.py", True),
        ("site/evil.pth", True),
        ("pyproject.toml", True),
        ("setup.cfg", True),
        ("tests/test_conftest.py", False),
        ("src/pkg/core.py", False),
    ],
)
def test_test_configuration_files_are_known_by_name_wherever_they_are(path, config):
    assert is_config(path) is config
