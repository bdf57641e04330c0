"""Static lint of terminal tasks: what a reviewer is told about each demo task, and each check on
a task built to trip it (and on near misses that must not)."""

from __future__ import annotations

from pathlib import Path

import pytest

from inspector.detect.lint import LINT_CODES, lint_terminal_task
from inspector.formats.archive import FileEntry, read_tree
from inspector.formats.terminal.taskset import read_terminal_taskset

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "inspector" / "demo"

HARBOR_FILES = {
    "task.toml": "[verifier]\ntimeout_sec = 30\n",
    "instruction.md": "Write the word `hi` into `/app/out.txt`.\n",
    "environment/Dockerfile": "FROM debian:bookworm\nWORKDIR /app\n",
    "solution/solve.sh": "#!/bin/bash\nset -euo pipefail\necho hi > /app/out.txt\n",
    "tests/test.sh": (
        "#!/bin/bash\n"
        'if [ "$(cat /app/out.txt)" = hi ]; then echo 1; else echo 0; fi'
        " > /logs/verifier/reward.txt\n"
    ),
}
TB_FILES = {
    "task.yaml": "instruction: Write hi into /app/out.txt.\n",
    "Dockerfile": "FROM debian:bookworm\nWORKDIR /app\n",
    "solution.sh": "echo hi > /app/out.txt\n",
    "run-tests.sh": 'test "$(cat /app/out.txt)" = hi\n',
    "tests/test_outputs.py": "def test_out():\n    assert open('/app/out.txt').read() == 'hi\\n'\n",
}


def task(changes: dict[str, str | None] | None = None, *, layout: str = "harbor") -> dict:
    files = dict(HARBOR_FILES if layout == "harbor" else TB_FILES)
    files.update(changes or {})
    tree = {
        f"t/{path}": FileEntry(0o644, text.encode())
        for path, text in files.items()
        if text is not None
    }
    (source,) = read_terminal_taskset(tree, name="set.zip").tasks
    return source


def codes(source: dict) -> list[tuple[str, str, int | None]]:
    return [(f["code"], f["file"], f["line"]) for f in lint_terminal_task(source)]


# --- The demo tasks --------------------------------------------------------------------------


DEMO_FINDINGS = {
    "broken-build": [],
    "conftest-hack": [],
    "edit-tests-hack": [("tests-in-image", "environment/Dockerfile", 4)],
    "flaky-check": [],
    "hello-file": [],
    "nop-passes": [],
    "reward-file-hack": [("reward-not-always-written", "tests/test.sh", 4)],
    "trojan-hack": [],
    "wrong-reference": [],
    "count-lines": [],
    "wrong-count": [],
}


def demo_tasks() -> dict[str, dict]:
    tasks = {}
    for folder in ("terminal", "terminal-bench"):
        taskset = read_terminal_taskset(read_tree(DEMO / folder, name=folder), name=folder)
        tasks.update({source["task_id"]: source for source in taskset.tasks})
    return tasks


def test_each_demo_task_gets_exactly_the_findings_it_was_planted_with():
    tasks = demo_tasks()
    assert sorted(tasks) == sorted(DEMO_FINDINGS)
    assert {task_id: codes(source) for task_id, source in tasks.items()} == DEMO_FINDINGS


def test_the_edit_tests_finding_tells_the_reviewer_what_was_copied_and_why_it_matters():
    (finding,) = lint_terminal_task(demo_tasks()["edit-tests-hack"])
    assert finding["message"] == (
        "`COPY checks/ /app/checks/` puts test files (checks/test_greet.sh) into the image the "
        "agent works in: the agent can read them, or edit them so that they pass."
    )


# --- tests-in-image --------------------------------------------------------------------------


def test_copying_the_whole_terminal_bench_folder_puts_tests_and_solution_in_the_image():
    source = task({"Dockerfile": "FROM debian\nWORKDIR /app\nCOPY . /app/\n"}, layout="tb")
    (finding,) = lint_terminal_task(source)
    assert (finding["code"], finding["file"], finding["line"]) == (
        "tests-in-image",
        "Dockerfile",
        3,
    )
    assert "test files (run-tests.sh, tests/test_outputs.py)" in finding["message"]
    assert "the reference solution (solution.sh)" in finding["message"]


def test_what_the_dockerignore_leaves_out_is_not_copied():
    changes = {
        "Dockerfile": "FROM debian\nCOPY . /app/\n",
        ".dockerignore": "# keep the checks out\ntests/\nrun-tests.sh\nsolution.sh\n",
    }
    assert codes(task(changes, layout="tb")) == []


def test_copying_a_tests_folder_or_a_solve_script_from_the_context_is_found():
    source = task(
        {
            "environment/Dockerfile": (
                "FROM debian\n"
                "COPY data.csv /app/\n"
                'COPY ["tests", "/opt/tests"]\n'
                "COPY --chown=1000 solve*.sh /root/\n"
            ),
            "environment/data.csv": "a,b\n",
            "environment/tests/test_data.py": "pass\n",
            "environment/solve.sh": "true\n",
        }
    )
    assert codes(source) == [
        ("tests-in-image", "environment/Dockerfile", 3),
        ("tests-in-image", "environment/Dockerfile", 4),
    ]


def test_a_copy_from_another_build_stage_is_not_the_tasks_tests():
    source = task(
        {"environment/Dockerfile": "FROM debian AS b\nFROM debian\nCOPY --from=b /tests /tests\n"}
    )
    assert codes(source) == []


# --- unpinned-package and test-deps-in-image -----------------------------------------------


def test_pip_installs_without_an_exact_version_are_flagged_on_the_line_of_their_run():
    dockerfile = (
        "FROM python:3.12\n"
        "RUN apt-get update && apt-get install -y jq \\\n"
        "    && pip install --no-cache-dir requests numpy==1.26.4 -r requirements.txt \\\n"
        '    && uv pip install --system "flask>=2" ./local-pkg\n'
        "RUN pip install --upgrade pip setuptools wheel\n"
        "RUN python3 -m pip install rich\n"
    )
    source = task({"environment/Dockerfile": dockerfile, "environment/requirements.txt": "x==1\n"})
    findings = lint_terminal_task(source)
    assert codes(source) == [
        ("unpinned-package", "environment/Dockerfile", 2),
        ("unpinned-package", "environment/Dockerfile", 6),
    ]
    assert findings[0]["message"].startswith("pip installs requests, flask>=2 without an exact")
    assert findings[1]["message"].startswith("pip installs rich without")


def test_an_unpinned_install_in_the_test_script_is_flagged_too():
    test_sh = (
        "#!/bin/bash\n"
        "pip3 install pytest\n"
        "pytest /tests && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n"
    )
    assert codes(task({"tests/test.sh": test_sh})) == [("unpinned-package", "tests/test.sh", 2)]


def test_test_only_tools_installed_in_the_image_are_flagged_even_when_pinned():
    dockerfile = (
        "FROM python:3.12\n"
        "RUN pip install pytest==8.3.2 pytest-timeout==2.3.1 requests==2.32.3\n"
        "RUN apt-get update && apt-get install -y python3-hypothesis\n"
    )
    source = task({"environment/Dockerfile": dockerfile})
    findings = lint_terminal_task(source)
    assert codes(source) == [
        ("test-deps-in-image", "environment/Dockerfile", 2),
        ("test-deps-in-image", "environment/Dockerfile", 3),
    ]
    assert "(pytest, pytest-timeout)" in findings[0]["message"]
    assert "(python3-hypothesis)" in findings[1]["message"]


# --- unnamed-test-input ----------------------------------------------------------------------


def test_a_file_the_tests_use_but_the_instruction_never_names_is_flagged_with_its_line():
    test_sh = (
        "#!/bin/bash\n"
        "ok=0\n"
        "grep -q hi /app/out.txt && [ -f /srv/state/ready.flag ] && ok=1\n"
        "echo $ok > /logs/verifier/reward.txt 2>/dev/null\n"
    )
    findings = lint_terminal_task(task({"tests/test.sh": test_sh}))
    assert [(f["code"], f["file"], f["line"]) for f in findings] == [
        ("unnamed-test-input", "tests/test.sh", 3)
    ]
    assert "/srv/state/ready.flag" in findings[0]["message"]
    assert "ready.flag" in findings[0]["message"]


def test_a_file_named_by_its_basename_or_provided_by_the_dockerfile_is_not_flagged():
    test_sh = (
        "#!/bin/bash\n"
        "cmp /app/expected/out.txt /data/input.csv /opt/fixtures/a.json /tmp/scratch\n"
        "echo 1 > /logs/verifier/reward.txt; echo 0 > /logs/verifier/reward.txt\n"
    )
    dockerfile = "FROM debian\nCOPY input.csv /data/input.csv\nCOPY fixtures/ /opt/fixtures/\n"
    source = task(
        {
            "tests/test.sh": test_sh,
            "environment/Dockerfile": dockerfile,
            "environment/input.csv": "x\n",
            "environment/fixtures/a.json": "{}\n",
        }
    )
    assert codes(source) == []


# --- answer-in-instruction -------------------------------------------------------------------


def test_an_instruction_that_contains_the_reference_solution_is_flagged_at_the_solution_line():
    instruction = (
        "Count the errors. For example:\n\n    grep -c ERROR /app/log.txt > /app/out.txt\n"
    )
    solve = "#!/bin/bash\nset -euo pipefail\ngrep -c ERROR /app/log.txt > /app/out.txt\n"
    findings = lint_terminal_task(task({"instruction.md": instruction, "solution/solve.sh": solve}))
    assert [(f["code"], f["file"], f["line"]) for f in findings] == [
        ("answer-in-instruction", "solution/solve.sh", 3)
    ]
    assert "`grep -c ERROR /app/log.txt > /app/out.txt`" in findings[0]["message"]


def test_boilerplate_and_short_lines_shared_with_the_instruction_are_not_answers():
    instruction = "Run `set -euo pipefail` first, then write hi into /app/out.txt with echo.\n"
    solve = "#!/bin/bash\nset -euo pipefail\necho hi > /app/out.txt\n"
    assert codes(task({"instruction.md": instruction, "solution/solve.sh": solve})) == []


# --- missing-file, missing-field, rewards ---------------------------------------------------


def test_an_empty_instruction_and_a_solution_without_commands_are_missing_fields():
    source = task({"instruction.md": "  \n", "solution/solve.sh": "#!/bin/bash\n# TODO\n"})
    assert codes(source) == [
        ("missing-field", "instruction.md", None),
        ("missing-field", "solution/solve.sh", None),
    ]
    assert codes(task({"task.yaml": "instruction: ''\n"}, layout="tb")) == [
        ("missing-field", "task.yaml", None)
    ]


def test_a_dockerfile_copying_what_is_not_in_the_build_context_is_a_missing_file():
    dockerfile = "FROM debian\nCOPY data.csv /app/\nCOPY ../tests /tests\n"
    findings = lint_terminal_task(task({"environment/Dockerfile": dockerfile}))
    assert [(f["code"], f["line"]) for f in findings] == [("missing-file", 2), ("missing-file", 3)]
    assert "data.csv, which is not in the build context (environment/)" in findings[0]["message"]
    assert "outside the build context" in findings[1]["message"]


def test_a_source_without_its_entry_points_is_reported_not_crashed_on():
    source = task()
    del source["files"]["tests/test.sh"]
    assert ("missing-file", "tests/test.sh", None) in codes(source)
    assert all(set(f) == {"code", "file", "line", "message"} for f in lint_terminal_task({}))


def test_a_harbor_test_script_that_never_writes_a_reward_is_flagged():
    source = task({"tests/test.sh": "#!/bin/bash\npytest /tests/test_outputs.py\n"})
    assert codes(source) == [("no-reward-written", "tests/test.sh", None)]
    tb = task(layout="tb")  # Terminal-Bench judges by the exit code
    assert codes(tb) == []


@pytest.mark.parametrize("code", LINT_CODES)
def test_every_lint_code_is_documented_in_the_module(code):
    import inspector.detect.lint as lint

    assert f"``{code}``" in (lint.__doc__ or "")
