"""Reading Harbor and Terminal-Bench task sets: the demo sets, every way they can be uploaded,
and every problem an uploader can make, each reported with its file, line and field."""

from __future__ import annotations

import gzip
import io
import json
import os
import tarfile
import zipfile
from pathlib import Path

import pytest

from inspector.formats.archive import FileEntry, read_tree
from inspector.formats.humaneval import TaskSetFormatError
from inspector.formats.terminal.samples import read_terminal_samples_jsonl
from inspector.formats.terminal.source import content_hash, file_bytes, file_text
from inspector.formats.terminal.taskset import looks_like_terminal_upload, read_terminal_taskset

ROOT = Path(__file__).resolve().parent.parent
HARBOR_DEMO = ROOT / "inspector" / "demo" / "terminal"
TB_DEMO = ROOT / "inspector" / "demo" / "terminal-bench"
HARBOR_IDS = [
    "broken-build",
    "conftest-hack",
    "edit-tests-hack",
    "flaky-check",
    "hello-file",
    "nop-passes",
    "reward-file-hack",
    "trojan-hack",
    "wrong-reference",
]

# --- Builders ------------------------------------------------------------------------------


def zip_folder(folder: Path, dest: Path, root: str = "") -> Path:
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(folder.rglob("*")):
            archive.write(path, root + path.relative_to(folder).as_posix())
    return dest


def tgz_folder(folder: Path, dest: Path, root: str = ".") -> Path:
    with tarfile.open(dest, "w:gz") as archive:
        archive.add(folder, arcname=root)
    return dest


def read_set(source, name: str):
    return read_terminal_taskset(read_tree(source, name=name), name=name)


def entry(text: str | bytes, mode: int = 0o644) -> FileEntry:
    return FileEntry(mode=mode, data=text.encode() if isinstance(text, str) else text)


HARBOR_TOML = """version = "1.0"

[metadata]
difficulty = "easy"

[verifier]
timeout_sec = 30.0

[agent]
timeout_sec = 45.0

[environment]
build_timeout_sec = 120.0
"""


def harbor(
    task_id: str = "hello", changes: dict[str, str | bytes | None] | None = None
) -> dict[str, FileEntry]:
    """A Harbor task folder as a tree; `changes` replaces files, or drops them (None)."""
    contents: dict[str, str | bytes | None] = {
        "task.toml": HARBOR_TOML,
        "instruction.md": "Write `hi` to /app/out.txt.\n",
        "environment/Dockerfile": "FROM debian:bookworm\nWORKDIR /app\n",
        "solution/solve.sh": "#!/bin/bash\necho hi > /app/out.txt\n",
        "tests/test.sh": "#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n",
    }
    contents.update(changes or {})
    return {
        f"{task_id}/{path}": entry(value) for path, value in contents.items() if value is not None
    }


TB_YAML = """instruction: |-
  Write hi to /app/out.txt.
difficulty: easy
max_agent_timeout_sec: 120
max_test_timeout_sec: 20
"""


def terminal_bench(
    task_id: str = "count", changes: dict[str, str | bytes | None] | None = None
) -> dict[str, FileEntry]:
    """A Terminal-Bench task folder as a tree; `changes` replaces files, or drops them (None)."""
    contents: dict[str, str | bytes | None] = {
        "task.yaml": TB_YAML,
        "Dockerfile": "FROM debian:bookworm\n",
        "solution.sh": "echo hi > /app/out.txt\n",
        "run-tests.sh": "test -f /app/out.txt\n",
        "tests/test_outputs.py": "def test_x():\n    pass\n",
    }
    contents.update(changes or {})
    return {
        f"{task_id}/{path}": entry(value) for path, value in contents.items() if value is not None
    }


def problems(tree: dict[str, FileEntry], name: str = "set.zip") -> list[str]:
    with pytest.raises(TaskSetFormatError) as caught:
        read_terminal_taskset(tree, name=name)
    return [str(issue) for issue in caught.value.issues]


# --- The demo sets, however uploaded ---------------------------------------------------------


@pytest.mark.parametrize(
    ("folder", "ids"),
    [(HARBOR_DEMO, HARBOR_IDS), (TB_DEMO, ["count-lines", "wrong-count"])],
    ids=["harbor", "terminal-bench"],
)
def test_a_demo_set_reads_the_same_from_a_folder_a_zip_and_a_tar_gz(tmp_path, folder, ids):
    from_folder = read_set(folder, folder.name)
    from_zip = read_set(zip_folder(folder, tmp_path / "set.zip"), "set.zip")
    from_tgz = read_set(tgz_folder(folder, tmp_path / "set.tar.gz"), "set.tar.gz")
    assert [task["task_id"] for task in from_folder.tasks] == ids
    hashes = [content_hash(task) for task in from_folder.tasks]
    assert len(set(hashes)) == len(ids)
    assert [content_hash(task) for task in from_zip.tasks] == hashes
    assert [content_hash(task) for task in from_tgz.tasks] == hashes
    assert from_zip == from_folder and from_tgz == from_folder
    json.dumps(from_folder.tasks)  # stored in a JSONField as it is


def test_a_harbor_task_carries_its_config_its_instruction_and_its_files():
    tasks = {task["task_id"]: task for task in read_set(HARBOR_DEMO, "terminal").tasks}
    hello = tasks["hello-file"]
    assert {key: value for key, value in hello.items() if key != "files"} == {
        "kind": "terminal",
        "format": "harbor",
        "task_id": "hello-file",
        "instruction": "Create the file `/app/hello.txt` whose only line is `Hello, world!`.\n",
        "metadata": {
            "author_name": "Inspector demo",
            "difficulty": "easy",
            "category": "file-operations",
            "tags": ["demo", "good"],
        },
        "agent_timeout_sec": 30.0,
        "verifier_timeout_sec": 30.0,
        "build_timeout_sec": 120.0,
        "cpus": 1.0,
        "memory_mb": 512,
        "docker_image": None,
        "allow_internet": False,
        "build_context": "environment",
        "dockerfile": "environment/Dockerfile",
        "solution_files": ["solution/solve.sh"],
        "solution_entry": "solution/solve.sh",
        "test_files": ["tests/test.sh"],
        "test_entry": "tests/test.sh",
        "reward": "file",
    }
    assert sorted(hello["files"]) == [
        "environment/Dockerfile",
        "instruction.md",
        "solution/solve.sh",
        "task.toml",
        "tests/test.sh",
    ]
    assert hello["files"]["solution/solve.sh"] == {
        "mode": 0o644,
        "text": "#!/bin/bash\nprintf 'Hello, world!\\n' > /app/hello.txt\n",
    }
    assert tasks["conftest-hack"]["test_files"] == ["tests/test.sh", "tests/test_outputs.py"]
    assert "environment/numbers.txt" in tasks["wrong-reference"]["files"]
    assert tasks["broken-build"]["allow_internet"] is True  # Harbor's default: public


def test_a_terminal_bench_task_carries_its_config_and_keeps_unknown_keys_as_metadata():
    count = read_set(TB_DEMO, "terminal-bench").tasks[0]
    assert count["format"] == "terminal-bench"
    assert count["instruction"].startswith("Count the lines of `/app/log.txt`")
    assert count["metadata"] == {
        "author_name": "Inspector demo",
        "difficulty": "easy",
        "category": "text-processing",
        "tags": ["demo", "good"],
        "parser_name": "pytest",
    }
    assert (count["agent_timeout_sec"], count["verifier_timeout_sec"]) == (60.0, 30.0)
    assert count["build_timeout_sec"] == 600.0
    assert (count["dockerfile"], count["build_context"]) == ("Dockerfile", "")
    assert (count["solution_entry"], count["solution_files"]) == ("solution.sh", ["solution.sh"])
    assert count["test_entry"] == "run-tests.sh"
    assert count["test_files"] == ["run-tests.sh", "tests/test_outputs.py"]
    assert count["reward"] == "exit_code"


def test_defaults_apply_when_the_config_says_nothing():
    (task,) = read_terminal_taskset(harbor(changes={"task.toml": ""}), name="set.zip").tasks
    assert task["agent_timeout_sec"] == task["verifier_timeout_sec"] == 600.0
    assert task["build_timeout_sec"] == 600.0
    assert (task["cpus"], task["memory_mb"], task["docker_image"]) == (None, None, None)
    assert task["metadata"] == {} and task["allow_internet"] is True
    (task,) = read_terminal_taskset(
        terminal_bench(changes={"task.yaml": "instruction: do it\n"}), name="set.zip"
    ).tasks
    assert (task["agent_timeout_sec"], task["verifier_timeout_sec"]) == (360.0, 60.0)


def test_the_older_memory_string_and_network_mode_are_understood():
    toml = '[environment]\nmemory = "2G"\nnetwork_mode = "no-network"\ncpus = 0.5\n'
    (task,) = read_terminal_taskset(harbor(changes={"task.toml": toml}), name="set.zip").tasks
    assert (task["memory_mb"], task["allow_internet"], task["cpus"]) == (2048, False, 0.5)
    toml = '[environment]\nmemory = "512M"\nallow_internet = false\nnetwork_mode = "public"\n'
    (task,) = read_terminal_taskset(harbor(changes={"task.toml": toml}), name="set.zip").tasks
    assert (task["memory_mb"], task["allow_internet"]) == (512, True)


def test_a_set_wrapped_in_one_folder_is_found_and_problems_keep_the_upload_paths():
    tree = {f"tasks/{path}": value for path, value in harbor("hello").items()}
    tree.update(
        {f"tasks/{path}": value for path, value in harbor("bye", {"tests/test.sh": None}).items()}
    )
    with pytest.raises(TaskSetFormatError) as caught:
        read_terminal_taskset(tree, name="tasks.tar.gz")
    assert [str(issue) for issue in caught.value.issues] == [
        "tasks/bye/tests/test.sh: missing: a Harbor task needs this file"
    ]
    tree = {path: value for path, value in tree.items() if not path.startswith("tasks/bye/")}
    assert [t["task_id"] for t in read_terminal_taskset(tree, name="t.tgz").tasks] == ["hello"]


def test_an_upload_of_one_task_folder_takes_its_id_from_the_upload_name(tmp_path):
    tree = {path.split("/", 1)[1]: value for path, value in harbor("whatever").items()}
    (task,) = read_terminal_taskset(tree, name="hello-world.tar.gz").tasks
    assert task["task_id"] == "hello-world"
    archive = tgz_folder(HARBOR_DEMO / "hello-file", tmp_path / "hello-file.tgz", "hello-file")
    (task,) = read_set(archive, "hello-file.tgz").tasks
    assert task["task_id"] == "hello-file"
    stripped = read_tree(archive, name="hello-file.tgz", strip_single_root=True)
    (same,) = read_terminal_taskset(stripped, name="hello-file.tgz").tasks
    assert content_hash(same) == content_hash(task)


def test_loose_files_and_hidden_folders_beside_the_tasks_are_ignored():
    tree = harbor("hello") | {"README.md": entry("# my set"), ".github/ci.yml": entry("x")}
    assert [t["task_id"] for t in read_terminal_taskset(tree, name="s.zip").tasks] == ["hello"]


# --- Samples ---------------------------------------------------------------------------------


def test_samples_come_from_each_tasks_samples_folder_and_stay_out_of_its_files():
    taskset = read_set(HARBOR_DEMO, "terminal")
    assert [(s["task_id"], s["sample_id"]) for s in taskset.samples] == [
        ("wrong-reference", "awk-sum"),
        ("wrong-reference", "off-by-one"),
        ("wrong-reference", "python-sum"),
    ]
    assert taskset.samples[1]["script"] == "echo 41 > /app/sum.txt\n"
    wrong = next(t for t in taskset.tasks if t["task_id"] == "wrong-reference")
    assert not any(path.startswith("samples/") for path in wrong["files"])


def test_the_demo_samples_jsonl_files_are_read_with_ids_numbered_per_task():
    data = (ROOT / "inspector" / "demo" / "terminal-bench-samples.jsonl").read_bytes()
    samples = read_terminal_samples_jsonl(
        data, name="samples.jsonl", task_ids={"count-lines", "wrong-count"}
    )
    assert samples == [
        {
            "task_id": "wrong-count",
            "sample_id": "s1",
            "script": "grep -c WARN /app/log.txt > /app/warnings.txt",
        },
        {
            "task_id": "count-lines",
            "sample_id": "s1",
            "script": "grep ERROR /app/log.txt | wc -l > /app/errors.txt",
        },
    ]
    data = (ROOT / "inspector" / "demo" / "terminal-samples.jsonl").read_bytes()
    samples = read_terminal_samples_jsonl(data, name="s.jsonl", task_ids=set(HARBOR_IDS))
    assert [(s["task_id"], s["sample_id"]) for s in samples] == [
        ("hello-file", "printf"),
        ("hello-file", "echo-lowercase"),
        ("flaky-check", "echo"),
        ("conftest-hack", "identity"),
    ]
    assert read_terminal_samples_jsonl(gzip.compress(data), name="s.jsonl.gz", task_ids=None)


def test_every_bad_samples_line_is_reported_with_its_line_and_field():
    lines = [
        {"task_id": "hello", "script": "true"},
        {"task_id": "ghost", "script": "true"},
        {"task_id": "hello", "script": "true", "sample_id": "s1"},
        {"task_id": "hello"},
        {"task_id": "hello", "script": 3, "sample_id": True},
        "not json",
        "[1, 2]",
    ]
    data = "\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines)
    with pytest.raises(TaskSetFormatError) as caught:
        read_terminal_samples_jsonl(data.encode(), name="samples.jsonl", task_ids={"hello"})
    assert [str(issue) for issue in caught.value.issues] == [
        "samples.jsonl, line 2, field 'task_id': no task 'ghost' in the task set",
        "samples.jsonl, line 3, field 'sample_id': duplicate sample id 's1' (given) for task "
        "'hello', first on line 1",
        "samples.jsonl, line 4, field 'script': missing",
        "samples.jsonl, line 5, field 'script': must be a string, got a number",
        "samples.jsonl, line 5, field 'sample_id': must be a non-empty string or an integer, "
        "got a boolean",
        "samples.jsonl, line 6: not JSON: Expecting value at column 1",
        "samples.jsonl, line 7: not a JSON object: got an array",
    ]


# --- Problems, each with its file, line and field -------------------------------------------


def test_every_missing_required_file_is_named():
    tree = harbor("hello", {"instruction.md": None, "solution/solve.sh": None})
    tree |= terminal_bench("count", {"Dockerfile": None, "run-tests.sh": None})
    assert problems(tree) == [
        "count/Dockerfile: missing: a Terminal-Bench task needs this file",
        "count/run-tests.sh: missing: a Terminal-Bench task needs this file",
        "hello/instruction.md: missing: a Harbor task needs this file",
        "hello/solution/solve.sh: missing: a Harbor task needs this file",
    ]


def test_invalid_toml_and_yaml_are_reported_with_their_line():
    tree = harbor("hello", {"task.toml": "[verifier]\ntimeout_sec = 30\n[agent\ntimeout_sec = 1\n"})
    tree |= terminal_bench(
        "count", {"task.yaml": "instruction: hi\ntags: [a, b\ndifficulty: easy\n"}
    )
    found = problems(tree)
    assert len(found) == 2
    assert found[0].startswith("count/task.yaml, line 3: not valid YAML:")
    assert found[1].startswith("hello/task.toml, line 3: not valid TOML:")


def test_wrong_field_types_and_non_positive_timeouts_name_the_field_and_its_line():
    toml = (
        'version = "1.0"\n'
        "[metadata]\n"
        'difficulty = "easy"\n'
        "[verifier]\n"
        'timeout_sec = "ten"\n'
        "[agent]\n"
        "timeout_sec = 0\n"
        "[environment]\n"
        "build_timeout_sec = -5\n"
        'memory = "lots"\n'
        'allow_internet = "yes"\n'
        'cpus = "two"\n'
    )
    yaml_text = (
        "instruction: hi\nmax_agent_timeout_sec: ten\ntags: demo\nmax_test_timeout_sec: -1\n"
    )
    tree = harbor("hello", {"task.toml": toml}) | terminal_bench("count", {"task.yaml": yaml_text})
    assert problems(tree) == [
        "count/task.yaml, line 2, field 'max_agent_timeout_sec': must be a number of seconds, "
        "got a string ('ten')",
        "count/task.yaml, line 4, field 'max_test_timeout_sec': must be a positive number of "
        "seconds, got -1",
        "count/task.yaml, line 3, field 'tags': must be a list of strings",
        "hello/task.toml, line 5, field 'verifier.timeout_sec': must be a number of seconds, "
        "got a string ('ten')",
        "hello/task.toml, line 7, field 'agent.timeout_sec': must be a positive number of "
        "seconds, got 0",
        "hello/task.toml, line 9, field 'environment.build_timeout_sec': must be a positive "
        "number of seconds, got -5",
        "hello/task.toml, line 12, field 'environment.cpus': must be a number, got a string "
        "('two')",
        "hello/task.toml, line 10, field 'environment.memory': must be a size with a unit such "
        'as "2G" or "512M", got a string (\'lots\')',
        "hello/task.toml, line 11, field 'environment.allow_internet': must be true or false, "
        "got a string ('yes')",
    ]


def test_a_metadata_that_is_not_a_table_is_refused():
    tree = harbor("hello", {"task.toml": 'metadata = "easy"\n'})
    assert problems(tree) == [
        "hello/task.toml, line 1, field 'metadata': must be a table ([metadata]), got a string "
        "('easy')"
    ]


def test_a_folder_that_is_neither_layout_is_named_with_a_hint_when_it_holds_tasks():
    tree = harbor("hello") | {"notes/todo.txt": entry("x")}
    tree |= {f"more/{path}": value for path, value in harbor("deep").items()}
    assert problems(tree) == [
        "more/: neither a Harbor task (no task.toml) nor a Terminal-Bench task (no task.yaml); "
        "it holds task folders (deep): upload those instead",
        "notes/: neither a Harbor task (no task.toml) nor a Terminal-Bench task (no task.yaml)",
    ]


def test_task_ids_that_differ_only_in_case_are_duplicates():
    tree = harbor("Hello") | harbor("hello")
    assert problems(tree) == [
        "hello/: duplicate task id 'hello': the folder Hello/ has the same name (task ids are "
        "compared ignoring case)"
    ]


def test_an_instruction_that_is_not_utf8_is_reported_with_its_line():
    tree = harbor("hello", {"instruction.md": b"Write the file.\nCaf\xe9 au lait\n"})
    assert problems(tree) == [
        "hello/instruction.md, line 2: not UTF-8: byte 0xe9 at column 4 is invalid"
    ]


def test_an_upload_with_no_task_says_so():
    assert problems({}, name="empty.zip") == [
        "empty.zip: contains no tasks: expected one folder per task, holding task.toml (Harbor) "
        "or task.yaml (Terminal-Bench)"
    ]
    assert problems({"README.md": entry("hi")}, name="r.zip")[0].startswith("r.zip: contains no")


def test_problems_in_many_tasks_are_all_reported_at_once():
    tree = harbor("a", {"task.toml": "[agent]\ntimeout_sec = -1\n"}) | harbor(
        "b", {"tests/test.sh": None}
    )
    tree |= terminal_bench("c", {"task.yaml": "difficulty: easy\n"})
    assert problems(tree) == [
        "a/task.toml, line 2, field 'agent.timeout_sec': must be a positive number of seconds, "
        "got -1",
        "b/tests/test.sh: missing: a Harbor task needs this file",
        "c/task.yaml, field 'instruction': missing: the task's instruction to the agent",
    ]


# --- Hashes and files ------------------------------------------------------------------------


def only_task(tree: dict[str, FileEntry]) -> dict:
    (task,) = read_terminal_taskset(tree, name="s.zip").tasks
    return task


def test_the_content_hash_follows_files_modes_and_config_but_not_samples():
    base = content_hash(only_task(harbor()))
    assert content_hash(only_task(harbor(changes={"tests/test.sh": "exit 1\n"}))) != base
    assert (
        content_hash(only_task(harbor(changes={"task.toml": "[agent]\ntimeout_sec = 5\n"}))) != base
    )
    executable = harbor()
    executable["hello/solution/solve.sh"] = FileEntry(
        0o755, executable["hello/solution/solve.sh"].data
    )
    assert content_hash(only_task(executable)) != base
    group_writable = harbor()
    group_writable["hello/task.toml"] = FileEntry(0o664, group_writable["hello/task.toml"].data)
    assert content_hash(only_task(group_writable)) == base
    assert content_hash(only_task(harbor(changes={"samples/a.sh": "true\n"}))) == base
    # A JSON column may give 30.0 back as 30: the hash is the same.
    stored = json.loads(json.dumps(only_task(harbor())))
    stored["verifier_timeout_sec"] = 30
    assert content_hash(stored) == base


def test_binary_files_and_toml_dates_are_stored_as_json():
    toml = "[metadata]\ncreated = 2024-05-01\n"
    task = only_task(harbor(changes={"task.toml": toml, "environment/blob.bin": b"\x00\xff\x10"}))
    assert task["metadata"] == {"created": "2024-05-01"}
    assert task["files"]["environment/blob.bin"] == {"mode": 0o644, "base64": "AP8Q"}
    assert file_bytes(task, "environment/blob.bin") == b"\x00\xff\x10"
    assert file_text(task, "instruction.md") == "Write `hi` to /app/out.txt.\n"
    json.dumps(task)


def test_archives_are_told_apart_from_jsonl_uploads(tmp_path):
    zipped = zip_folder(TB_DEMO, tmp_path / "s.zip").read_bytes()[:4096]
    tgz = tgz_folder(TB_DEMO, tmp_path / "s.tgz").read_bytes()[:4096]
    assert looks_like_terminal_upload("s.zip", zipped)
    assert looks_like_terminal_upload("whatever.bin", tgz)
    plain_tar = io.BytesIO()
    with tarfile.open(fileobj=plain_tar, mode="w") as archive:
        archive.add(TB_DEMO, arcname=".")
    assert looks_like_terminal_upload("s.tar", plain_tar.getvalue()[:4096])
    jsonl = b'{"task_id": "a", "prompt": "x"}\n' * 50
    assert not looks_like_terminal_upload("tasks.jsonl", jsonl)
    assert not looks_like_terminal_upload("tasks.jsonl.gz", gzip.compress(jsonl)[:4096])
    assert not looks_like_terminal_upload("tasks.jsonl.gz", gzip.compress(os.urandom(10))[:4])


def test_the_package_still_exports_its_public_names():
    # Callers that import from inspector.formats.terminal itself get the modules' own objects.
    import inspector.formats.terminal as package
    from inspector.formats.terminal import samples, source, taskset

    assert package.read_terminal_taskset is taskset.read_terminal_taskset is read_terminal_taskset
    assert package.read_terminal_samples_jsonl is samples.read_terminal_samples_jsonl
    assert package.content_hash is source.content_hash
    for name in package.__all__:
        assert getattr(package, name) is not None, name
