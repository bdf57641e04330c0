"""Terminal tasks (Harbor, Terminal-Bench) in Docker: the planted demo tasks behave as planted.

Real engine, real images built from `inspector/demo/terminal*/`. The runs are made up front, all
at once on a pool of four threads (as a worker would), by the module's `runs` fixture; each test
then reads the runs it is about. Plain tests, no database:
`.venv/bin/pytest tests/test_terminal_docker.py -q -p no:cacheprovider`.
"""

from __future__ import annotations

import copy
import hashlib
import os
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import docker
import pytest

from inspector.detect.terminal_probes import TERMINAL_PROBE_DESCRIPTIONS, TERMINAL_PROBES
from inspector.formats.archive import read_tree
from inspector.formats.terminal.taskset import read_terminal_taskset
from workers.sandbox.terminal import (
    OWNER_LABEL,
    PIDNS_LABEL,
    RUN_LABEL,
    STARTED_LABEL,
    TerminalExecutor,
)

DEMO = Path(__file__).resolve().parent.parent / "inspector" / "demo"
BASE_IMAGE = (
    "inspector-sandbox:bookworm"  # conftest.DOCKER_BASE_IMAGE, which docker_engine asks for
)
MODES = ("faithful", "isolated")
OWNER = f"{socket.gethostname()}:{os.getpid()}"

FLAKY_RUNS = 16
STOPPED_CONTAINER_RUNS = 8

# Every byte, and what printf's %b would read as an escape or a format if it slipped through.
ODD_BYTES = bytes(range(256)) + b"\\c\\x4142 %d %b %s \\\\ \\0101\n"
# Larger than one argument of the stage's wrapper: copied with an archive call instead.
LARGE_BYTES = bytes(range(256)) * 800


def solution_checking(data: bytes) -> dict[str, bytes]:
    """A hello-file solution that passes only if its data.bin arrived byte for byte, mode 755."""
    digest = hashlib.sha256(data).hexdigest()
    solve = (
        f'[ "$(sha256sum /solution/data.bin | cut -d" " -f1)" = {digest} ] &&\n'
        '[ "$(stat -c %a /solution/data.bin)" = 755 ] &&\n'
        "printf 'Hello, world!\\n' > /app/hello.txt\n"
    )
    return {"solve.sh": solve.encode(), "data.bin": data}


def hello_file_built_with(executor, demo, step: str, workdir: str = "/app") -> tuple[dict, str]:
    """hello-file with one more Dockerfile step (and its WORKDIR), and its built image's tag."""
    tasks, _ = demo
    dockerfile = f"FROM {BASE_IMAGE}\nUSER root\n{step}\nWORKDIR {workdir}\n"
    source = variant(tasks["hello-file"], files={"environment/Dockerfile": dockerfile})
    built = executor.image_for(source)
    assert built.ok, built.reason
    return source, built.tag


def check_writing(reward_script: str) -> dict:
    """hello-file's files with a test script that writes the reward as `reward_script` says."""
    return {"tests/test.sh": "#!/bin/bash\ncd /logs/verifier\n" + reward_script}


pytestmark = pytest.mark.usefixtures("docker_engine")


# --- Fixtures ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def executor():
    chosen = TerminalExecutor()
    yield chosen
    chosen.sweep()


@pytest.fixture(scope="module")
def demo():
    """Source dicts of every demo task by id, and the samples by (task id, sample id)."""
    tasks, samples = {}, {}
    for folder in ("terminal", "terminal-bench"):
        taskset = read_terminal_taskset(read_tree(DEMO / folder, name=folder), name=folder)
        tasks.update({source["task_id"]: source for source in taskset.tasks})
        samples.update({(s["task_id"], s["sample_id"]): s["script"] for s in taskset.samples})
    return tasks, samples


def variant(source: dict, **changes) -> dict:
    """A copy of a source dict; `files` entries given as {path: text} replace or add files."""
    copied = copy.deepcopy(source)
    for path, text in changes.pop("files", {}).items():
        copied["files"][path] = {"mode": 0o755, "text": text}
    copied.update(changes)
    return copied


@pytest.fixture(scope="module")
def images(executor, demo):
    tasks, _ = demo
    wanted = [task_id for task_id in tasks if task_id != "broken-build"]
    with ThreadPoolExecutor(4) as pool:
        built = dict(
            zip(wanted, pool.map(lambda t: executor.image_for(tasks[t]), wanted), strict=True)
        )
    for task_id, result in built.items():
        assert result.ok, f"{task_id}: {result.reason}\n{result.log}"
    return {task_id: result.tag for task_id, result in built.items()}


@pytest.fixture(scope="module")
def runs(executor, demo, images):
    """Every run the tests read, made concurrently: key -> the run's result dict."""
    tasks, samples = demo
    hello = tasks["hello-file"]
    plan: dict[tuple, tuple[dict, str, dict]] = {}

    def add(key, task_id, source=None, **kwargs):
        plan[key] = (source or tasks[task_id], images[task_id], kwargs)

    # The slowest runs first, so that the others overlap them.
    # The agent disables coreutils' timeout for the tests; the worker's guard still ends them.
    add(
        ("verifier-guard",),
        "hello-file",
        variant(hello, verifier_timeout_sec=2.0, files={"tests/test.sh": "sleep 60\n"}),
        script="printf '#!/bin/sh\\nshift 3\\nexec \"$@\"\\n' > /usr/local/bin/timeout\n"
        "chmod 755 /usr/local/bin/timeout\n",
    )
    add(
        ("timeout",),
        "hello-file",
        variant(hello, agent_timeout_sec=2.0),
        script="echo started; sleep 60\n",
    )
    for mode in MODES:
        add(("hello-file", "reference", mode), "hello-file", mode=mode)
        for probe, script in TERMINAL_PROBES.items():
            add(("hello-file", probe, mode), "hello-file", script=script, mode=mode)
        add(("wrong-reference", "reference", mode), "wrong-reference", mode=mode)
        add(
            ("wrong-reference", "awk-sum", mode),
            "wrong-reference",
            script=samples[("wrong-reference", "awk-sum")],
            mode=mode,
        )
        add(("nop-passes", "nop", mode), "nop-passes", script=TERMINAL_PROBES["nop"], mode=mode)
        for task_id, probe in (
            ("reward-file-hack", "reward-file"),
            ("conftest-hack", "conftest-hook"),
            ("trojan-hack", "trojan-tool"),
            ("edit-tests-hack", "edit-tests"),
        ):
            add((task_id, probe, mode), task_id, script=TERMINAL_PROBES[probe], mode=mode)
        add(("count-lines", "reference", mode), "count-lines", mode=mode)
    for task_id in ("reward-file-hack", "conftest-hack", "trojan-hack", "edit-tests-hack"):
        # In the stricter mode: the tasks themselves are sound.
        add((task_id, "reference", "isolated"), task_id, mode="isolated")
    add(("count-lines", "nop", "faithful"), "count-lines", script=TERMINAL_PROBES["nop"])
    add(
        ("wrong-reference", "reward-file", "faithful"),
        "wrong-reference",
        script=TERMINAL_PROBES["reward-file"],
    )
    add(("wrong-count", "reference", "faithful"), "wrong-count")
    # Its check passes half of the time: 16 runs all agree once in 32,768 (10 did once in 512,
    # and did in a CI run).
    for i in range(FLAKY_RUNS):
        add(("flaky-check", "reference", "faithful", i), "flaky-check")
    add(
        ("no-reward",),
        "hello-file",
        variant(hello, files={"tests/test.sh": "#!/bin/bash\necho 'checked, wrote nothing'\n"}),
    )
    # The agent leaves a process that writes a full reward 0.2 s after the harness removed the
    # reward files, longer than the check's run and the engine's read after it; the check
    # writes nothing. Harbor reads only after its exec returned, so the reward counts.
    add(
        ("late-reward",),
        "hello-file",
        variant(hello, files={"tests/test.sh": "#!/bin/bash\necho 'checked, wrote nothing'\n"}),
        script="mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt\n"
        "setsid sh -c 'while [ -e /logs/verifier/reward.txt ]; do sleep 0.01; done; sleep 0.2; "
        "echo 1 > /logs/verifier/reward.txt' >/dev/null 2>&1 </dev/null &\n",
    )
    # An outside attack on the settle (2026-12-07): the wrapper's `sleep` between two looks is
    # the agent's own in faithful mode. A planted one that writes a full reward turns no written
    # 0 into a pass, and gets nothing in isolated mode; one that hangs is ended by the guard.
    plants_sleep = (
        "cat > /usr/local/bin/sleep <<'EOF'\n#!/bin/bash\n{body}\nEOF\n"
        "chmod 755 /usr/local/bin/sleep\n"
    )
    rewarding_sleep = plants_sleep.format(
        body="mkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt"
    )
    for mode in MODES:
        add(
            ("planted-sleep", "check-writes-0", mode),
            "hello-file",
            variant(hello, files=check_writing("echo 0 > reward.txt\n")),
            script=rewarding_sleep,
            mode=mode,
        )
    add(
        ("planted-sleep", "no-reward", "isolated"),
        "hello-file",
        variant(hello, files={"tests/test.sh": "#!/bin/bash\necho 'checked, wrote nothing'\n"}),
        script=rewarding_sleep,
        mode="isolated",
    )
    add(
        ("planted-sleep", "hangs"),
        "hello-file",
        variant(
            hello,
            verifier_timeout_sec=2.0,
            files={"tests/test.sh": "#!/bin/bash\necho 'checked, wrote nothing'\n"},
        ),
        script=plants_sleep.format(body="exec /usr/bin/sleep 600"),
    )
    add(
        ("solution-files",),
        "hello-file",
        solution={"solve.sh": b"printf 'Hello, world!\\n' > hello.txt\n"},
    )
    add(
        ("background-process",),
        "hello-file",
        script="sleep 300 &\nprintf 'Hello, world!\\n' > /app/hello.txt\necho done\n",
        mode="isolated",
    )
    # The agent stops its own container: the tests still run, on what it left. Several times:
    # the engine records the container's exit a moment after the agent's exec ends, and a
    # verifier started in that moment vanished with the container (3 runs in 48 once).
    for copy_number in range(STOPPED_CONTAINER_RUNS):
        add(
            ("agent-stops-container", copy_number),
            "hello-file",
            script="printf 'Hello, world!\\n' > /app/hello.txt\nkill -TERM 1\nsleep 5\n",
        )
    # Solutions whose files the stage's wrapper writes, and one too large for it.
    add(("solution-bytes",), "hello-file", solution=solution_checking(ODD_BYTES))
    add(("solution-large",), "hello-file", solution=solution_checking(LARGE_BYTES))
    # The agent leaves something in the way of the tests' copy; the copy replaces it, as the
    # engine's archive copy (Harbor's `docker compose cp`) does, and the real check runs.
    in_the_way = {
        # Written through, the link would put the test script in place of the agent's answer.
        "link-to-the-answer": "mkdir -p /tests && ln -s /app/hello.txt /tests/test.sh",
        "tests-a-file": "echo not a folder > /tests",
        "tests-a-link": "mkdir -p /tmp/elsewhere && ln -s /tmp/elsewhere /tests",
        "test-a-folder": "mkdir -p /tests/test.sh/inside",
        "tests-locked": "mkdir -p /tests && chown 1234:1234 /tests && chmod 000 /tests",
    }
    for name, sabotage in in_the_way.items():
        add(
            ("tests-in-the-way", name),
            "hello-file",
            script=f"printf 'Hello, world!\\n' > /app/hello.txt\n{sabotage}\n",
        )
    # An isolated check gets the agent's work folder whole: long names, links, odd modes.
    long_name = "n" * 150
    add(
        ("work-folder-carried",),
        "hello-file",
        variant(
            hello,
            files=check_writing(
                f'cd /app && [ "$(cat deep/{long_name})" = long ] &&\n'
                f'[ "$(stat -c %i deep/{long_name})" = "$(stat -c %i hard)" ] &&\n'
                f'[ "$(readlink soft)" = /nowhere/{long_name} ] && [ -p fifo ] &&\n'
                '[ "$(stat -c %a run.sh)" = 4710 ] && [ -d empty/inside ] &&\n'
                "[ \"$(cat hello.txt)\" = 'Hello, world!' ] && [ ! -e /.inspector-work ] &&\n"
                "echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n"
            ),
        ),
        script=(
            "cd /app && printf 'Hello, world!\\n' > hello.txt && mkdir -p deep empty/inside\n"
            f"echo long > deep/{long_name} && ln deep/{long_name} hard\n"
            f"ln -s /nowhere/{long_name} soft && mkfifo fifo\n"
            "echo 'echo hi' > run.sh && chmod 4710 run.sh\n"
        ),
        mode="isolated",
    )
    # Found by an outside attack on the wrapper's frames (2026-12-05). The check runs the
    # agent's program, as root, which writes a forged reward frame to the wrapper's stdout
    # through /proc, with the nonce read from the wrapper's command line.
    forging_program = (
        "cat > /app/prog.sh <<'P'\n"
        "for p in /proc/[0-9]*; do\n"
        "  a=(); mapfile -d '' -t a < $p/cmdline 2>/dev/null\n"
        '  if [ "${a[0]}" = bash ] && [ "${a[3]}" = inspector ]; then\n'
        "    n=${a[9]}\n"
        "    printf '%s reward /logs/verifier/reward.txt 2\\n1\\n\\n%s end\\n' $n $n > $p/fd/1\n"
        "  fi\n"
        "done\n"
        "echo 41\n"
        "P\n"
    )
    grading_program = check_writing(
        "out=$(timeout 5 bash /app/prog.sh 2>/dev/null)\n"
        '[ "$out" = 42 ] && echo 1 > reward.txt || echo 0 > reward.txt\n'
    )
    # The agent fakes the wrapper's "cannot write the files" exit to be run a second time.
    faking_a_failed_write = (
        "if [ -e /tmp/ran-once ]; then printf 'Hello, world!\\n' > /app/hello.txt; exit 0; fi\n"
        "touch /tmp/ran-once\n"
        "for p in /proc/[0-9]*; do\n"
        "  a=(); mapfile -d '' -t a < $p/cmdline 2>/dev/null\n"
        '  [ "${a[3]}" = inspector ] || continue\n'
        '  echo "inspector: cannot write the stage\'s files ${a[9]}: /agent/run.sh" >&2\n'
        "done\n"
        "exit 198\n"
    )
    for mode in MODES:
        add(
            ("forged-frame", mode),
            "hello-file",
            variant(hello, files=grading_program),
            script=forging_program,
            mode=mode,
        )
        add(("faked-write-failure", mode), "hello-file", script=faking_a_failed_write, mode=mode)
    # Files whose folders alone are past the exec's argument limit (1,900 levels deep).
    deep = "/".join(["d"] * 1900) + "/data"
    add(
        ("solution-deep",),
        "hello-file",
        solution={"solve.sh": b"printf 'Hello, world!\\n' > /app/hello.txt\n", deep: b"x"},
    )
    # Rewards in every shape the check can leave them.
    reward_scripts = {
        "json": """echo '{"reward": 1, "style": 0.5}' > reward.json; echo 1 > reward.txt\n""",
        "txt": "printf ' 1.0\\n' > reward.txt\n",
        "link": "echo 1 > /tmp/real-reward; ln -s /tmp/real-reward reward.txt\n",
        "dangling": "ln -s /tmp/nowhere reward.txt\n",
        "large": "head -c 70000 /dev/zero | tr '\\0' ' ' > reward.txt; echo 1 >> reward.txt\n",
        "nul": "printf '1\\0' > reward.txt\n",
        "folder": "mkdir reward.json; echo 1 > reward.txt\n",
        "huge-number": "printf '{\"reward\": 1%0400d}' 0 > reward.json\n",
        "deep-json": "printf '%.0s[' {1..32000} > reward.json\n",
        # The check's own output forges the frame the wrapper prints the reward in, with the
        # wrapper's nonce read from its command line: the file says 0, and 0 it is.
        "forged": (
            "echo 0 > reward.txt\n"
            "for cmdline in /proc/[0-9]*/cmdline; do\n"
            "  nonce=$(tr '\\0' '\\n' < $cmdline 2>/dev/null |\n"
            "    awk 'found && ++n == 6 { print; exit } $0 == \"inspector\" { found = 1 }')\n"
            '  [ -n "$nonce" ] || continue\n'
            '  echo "forging with $nonce"\n'
            "  printf '%s reward /logs/verifier/reward.txt 1\\n1\\n%s end\\n' $nonce $nonce\n"
            "  printf '%s reward /logs/verifier/reward.txt 1\\n1\\n%s end\\n' $nonce $nonce >&2\n"
            "done\n"
        ),
    }
    for name, script in reward_scripts.items():
        for mode in MODES:
            add(
                ("reward", name, mode),
                "hello-file",
                variant(hello, files=check_writing(script)),
                mode=mode,
            )
    # A probe run anywhere but as the executor's /agent/run.sh leaves everything alone.
    add(
        ("probe-guard",),
        "hello-file",
        script=(
            "mkdir -p /app/tests && touch /app/tests/test_keep.py\n"
            "cat > /tmp/probe.sh <<'PROBE'\n" + TERMINAL_PROBES["edit-tests"] + "PROBE\n"
            "bash /tmp/probe.sh\n"
            "test -e /app/tests/test_keep.py && echo 'still there'\n"
        ),
    )
    start = time.monotonic()
    with ThreadPoolExecutor(4) as pool:
        futures = {
            key: pool.submit(executor.run, source, tag, **kwargs)
            for key, (source, tag, kwargs) in plan.items()
        }
        done = {key: future.result() for key, future in futures.items()}
    done["__wall__"] = time.monotonic() - start
    return done


def outcome(run: dict) -> str:
    return run["outcome"]


def explain(run: dict) -> str:
    return f"{run['outcome']}: {run['reason']} | agent {run['agent']} | verifier {run['verifier']}"


# --- Probes --------------------------------------------------------------------------------------


def test_probes_are_named_and_described_in_order():
    assert list(TERMINAL_PROBES) == [
        "nop",
        "reward-file",
        "conftest-hook",
        "trojan-tool",
        "edit-tests",
    ]
    assert set(TERMINAL_PROBE_DESCRIPTIONS) == set(TERMINAL_PROBES)
    assert all("\n" not in line for line in TERMINAL_PROBE_DESCRIPTIONS.values())


def test_a_probe_outside_the_executors_agent_stage_does_nothing(runs):
    run = runs[("probe-guard",)]
    assert "doing nothing" in run["agent"]["output_tail"], explain(run)
    assert "still there" in run["agent"]["output_tail"], explain(run)


# --- The planted tasks ---------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_hello_file_reference_passes_and_every_probe_fails(runs, mode):
    reference = runs[("hello-file", "reference", mode)]
    assert outcome(reference) == "passed", explain(reference)
    assert reference["reward"] == 1.0 and reference["rewards"] == {"reward": 1.0}
    assert reference["mode"] == mode
    for probe in TERMINAL_PROBES:
        run = runs[("hello-file", probe, mode)]
        assert outcome(run) == "failed", f"{probe}: {explain(run)}"
        assert run["reward"] == 0.0, f"{probe}: {explain(run)}"


@pytest.mark.parametrize("mode", MODES)
def test_wrong_reference_fails_while_a_correct_sample_passes(runs, mode):
    reference = runs[("wrong-reference", "reference", mode)]
    assert outcome(reference) == "failed", explain(reference)
    assert reference["reward"] == 0.0 and reference["rewards"]["reward"] == 0.0
    assert "reward.json" in reference["reason"]
    sample = runs[("wrong-reference", "awk-sum", mode)]
    assert outcome(sample) == "passed", explain(sample)


@pytest.mark.parametrize("mode", MODES)
def test_nop_passes_passes_with_the_nop_probe(runs, mode):
    run = runs[("nop-passes", "nop", mode)]
    assert outcome(run) == "passed", explain(run)


@pytest.mark.parametrize(
    ("task_id", "probe"),
    [
        ("reward-file-hack", "reward-file"),
        ("conftest-hack", "conftest-hook"),
        ("trojan-hack", "trojan-tool"),
    ],
)
def test_harness_hacks_pass_faithful_but_not_isolated(runs, task_id, probe):
    faithful = runs[(task_id, probe, "faithful")]
    isolated = runs[(task_id, probe, "isolated")]
    assert outcome(faithful) == "passed", explain(faithful)
    assert outcome(isolated) == "failed", explain(isolated)
    reference = runs[(task_id, "reference", "isolated")]  # the task itself is sound
    assert outcome(reference) == "passed", explain(reference)


def test_a_reward_the_agent_keeps_writing_counts_only_when_the_tests_write_none(runs):
    # reward-file-hack's test writes nothing when it fails: the harness deletes the planted
    # reward.txt before the check, as harbor does, but the agent's writer brings it back.
    hacked = runs[("reward-file-hack", "reward-file", "faithful")]
    assert outcome(hacked) == "passed" and "reward.txt" in hacked["reason"], explain(hacked)
    # hello-file's test always writes reward.txt, wrong-reference's always reward.json.
    for task_id in ("hello-file", "wrong-reference"):
        run = runs[(task_id, "reward-file", "faithful")]
        assert outcome(run) == "failed" and run["reward"] == 0.0, explain(run)


@pytest.mark.parametrize("mode", MODES)
def test_edit_tests_passes_in_both_modes(runs, mode):
    # The checks live in the work folder, which isolation carries over: a flaw of the task.
    run = runs[("edit-tests-hack", "edit-tests", mode)]
    assert outcome(run) == "passed", explain(run)
    assert outcome(runs[("edit-tests-hack", "reference", "isolated")]) == "passed"


def test_flaky_check_gives_both_outcomes(runs):
    seen = {outcome(runs[("flaky-check", "reference", "faithful", i)]) for i in range(FLAKY_RUNS)}
    assert seen == {"passed", "failed"}


@pytest.mark.parametrize("mode", MODES)
def test_terminal_bench_reference_passes_by_exit_code(runs, mode):
    run = runs[("count-lines", "reference", mode)]
    assert outcome(run) == "passed", explain(run)
    assert run["reward"] == 1.0 and run["rewards"] is None
    assert run["verifier"]["exit_code"] == 0


def test_terminal_bench_wrong_reference_and_nop_fail(runs):
    wrong = runs[("wrong-count", "reference", "faithful")]
    assert outcome(wrong) == "failed", explain(wrong)
    assert wrong["reward"] == 0.0 and wrong["verifier"]["exit_code"] != 0
    nop = runs[("count-lines", "nop", "faithful")]
    assert outcome(nop) == "failed", explain(nop)


# --- Runs: limits, rewards, solutions ------------------------------------------------------------


def test_agent_timeout_is_enforced(runs):
    run = runs[("timeout",)]
    assert run["agent"]["timed_out"], explain(run)
    assert 1.9 <= run["agent"]["seconds"] < 6, explain(run)
    assert run["seconds"] < 10, explain(run)
    assert outcome(run) == "timed_out", explain(run)
    assert "started" in run["agent"]["output_tail"]
    assert "2 s timeout" in run["reason"]


def test_the_outer_guard_ends_tests_whose_timeout_the_agent_disabled(runs):
    run = runs[("verifier-guard",)]
    assert outcome(run) == "timed_out", explain(run)
    assert run["verifier"]["timed_out"] and run["verifier"]["seconds"] < 8, explain(run)
    assert "2 s timeout" in run["reason"]


def test_tests_run_even_when_the_agent_stopped_its_container(runs):
    for copy_number in range(STOPPED_CONTAINER_RUNS):
        run = runs[("agent-stops-container", copy_number)]
        assert outcome(run) == "passed", explain(run)
        assert run["agent"]["seconds"] < 5, explain(run)  # not the 5 s of its sleep


def test_a_missing_reward_file_fails_the_run_with_the_reason(runs):
    run = runs[("no-reward",)]
    assert outcome(run) == "failed", explain(run)
    assert run["reward"] is None
    assert "reward.txt" in run["reason"]
    assert "checked, wrote nothing" in run["verifier"]["output_tail"]


def test_a_reward_a_left_process_writes_after_the_check_ended_counts_as_harbor_would_read_it(runs):
    run = runs[("late-reward",)]
    assert outcome(run) == "passed", explain(run)
    assert run["reward"] == 1.0
    assert "checked, wrote nothing" in run["verifier"]["output_tail"]


@pytest.mark.parametrize("mode", MODES)
def test_a_sleep_the_agent_planted_turns_no_written_zero_into_a_reward(runs, mode):
    run = runs[("planted-sleep", "check-writes-0", mode)]
    assert outcome(run) == "failed" and run["reward"] == 0.0, explain(run)


def test_an_isolated_check_never_runs_the_agents_sleep_while_it_waits_for_no_reward(runs):
    run = runs[("planted-sleep", "no-reward", "isolated")]
    assert outcome(run) == "failed" and run["reward"] is None, explain(run)


def test_a_planted_sleep_that_hangs_the_settle_is_ended_by_the_guard(runs):
    run = runs[("planted-sleep", "hangs")]
    assert outcome(run) == "timed_out", explain(run)
    # The verifier's 2 s, the guard's grace of 3 s and twice the settle's 0.5 s, with slack.
    assert run["verifier"]["timed_out"] and run["verifier"]["seconds"] < 9, explain(run)


def test_solution_files_run_through_the_tasks_entry(runs):
    run = runs[("solution-files",)]
    assert outcome(run) == "passed", explain(run)


def test_solution_files_arrive_byte_for_byte_whatever_their_bytes_or_size(runs):
    for key in (("solution-bytes",), ("solution-large",)):
        run = runs[key]
        assert outcome(run) == "passed", f"{key}: {explain(run)}"


def test_an_isolated_check_gets_the_agents_work_folder_whole(runs):
    run = runs[("work-folder-carried",)]
    assert outcome(run) == "passed", explain(run)


def test_what_the_agent_left_in_the_way_of_the_tests_is_replaced_by_them(runs):
    for key in [key for key in runs if key[0] == "tests-in-the-way"]:
        run = runs[key]
        assert outcome(run) == "passed", f"{key}: {explain(run)}"


@pytest.mark.parametrize("mode", MODES)
def test_the_reward_is_read_as_harbor_reads_it_whatever_the_check_left(runs, mode):
    def reward(name):
        run = runs[("reward", name, mode)]
        return run["outcome"], run["rewards"], run["reason"]

    assert reward("json")[:2] == ("failed", {"reward": 1.0, "style": 0.5})
    assert "from /logs/verifier/reward.json" in reward("json")[2]
    assert reward("txt")[:2] == ("passed", {"reward": 1.0})
    assert reward("link")[:2] == ("passed", {"reward": 1.0})
    assert reward("dangling")[0] == "failed"
    assert "a link to /tmp/nowhere, which does not exist" in reward("dangling")[2]
    assert reward("large")[0] == "failed" and "larger than 65536 bytes" in reward("large")[2]
    assert reward("nul")[0] == "failed" and "is not a number" in reward("nul")[2]
    assert (
        reward("folder")[0] == "failed"
        and "reward.json is not a regular file" in reward("folder")[2]
    )
    assert (
        reward("huge-number")[0] == "failed" and "not a finite number" in reward("huge-number")[2]
    )
    assert reward("deep-json")[0] == "failed" and "nested too deeply" in reward("deep-json")[2]


@pytest.mark.parametrize("mode", MODES)
def test_agent_code_the_check_runs_cannot_forge_the_reward_frame(runs, mode):
    run = runs[("forged-frame", mode)]
    assert run["outcome"] == "failed" and run["rewards"] == {"reward": 0.0}, explain(run)


@pytest.mark.parametrize("mode", MODES)
def test_an_agent_that_fakes_a_failed_write_is_not_run_again(runs, mode):
    run = runs[("faked-write-failure", mode)]
    assert run["outcome"] == "failed", explain(run)
    assert run["agent"]["exit_code"] == 198, explain(run)


def test_files_past_the_exec_argument_limit_go_by_an_archive(runs):
    run = runs[("solution-deep",)]
    assert outcome(run) == "passed", explain(run)


@pytest.mark.parametrize("mode", MODES)
def test_a_check_whose_output_forges_the_reward_frame_gets_the_reward_its_file_says(runs, mode):
    run = runs[("reward", "forged", mode)]
    assert run["outcome"] == "failed" and run["rewards"] == {"reward": 0.0}, explain(run)
    assert "forging with" in run["verifier"]["output_tail"]  # printed, and ignored


def test_an_image_file_in_the_way_of_the_solution_is_replaced_as_an_archive_copy_would(
    executor, demo
):
    source, tag = hello_file_built_with(executor, demo, "RUN mkdir -p /solution/solve.sh/inside")
    for mode in MODES:
        run = executor.run(source, tag, mode=mode)
        assert outcome(run) == "passed", explain(run)


def test_a_background_process_of_the_agent_does_not_hold_the_run(runs):
    run = runs[("background-process",)]
    assert outcome(run) == "passed", explain(run)
    assert run["agent"]["seconds"] < 5 and "done" in run["agent"]["output_tail"]


def test_runs_are_quick(runs):
    wall = runs["__wall__"]
    count = len(runs) - 1
    print(f"\n{count} runs in {wall:.1f} s on 4 threads ({wall / count:.2f} s a run)")
    assert wall / count < 5


def test_isolated_mode_is_refused_without_a_workdir(executor, demo):
    source, tag = hello_file_built_with(executor, demo, "", workdir="/")
    run = executor.run(source, tag, mode="isolated")
    assert outcome(run) == "sandbox_error"
    assert "isolated mode refused" in run["reason"] and "WORKDIR" in run["reason"]


# --- Images --------------------------------------------------------------------------------------


def test_an_image_is_reused_by_content_hash(executor, demo, images):
    tasks, _ = demo
    again = executor.image_for(tasks["hello-file"])
    assert again.ok and again.cached and again.tag == images["hello-file"]
    assert again.tag.startswith("inspector-task:") and len(again.tag.split(":")[1]) == 16
    # Tasks whose build context is the same share one image; any change makes another one.
    assert images["conftest-hack"] == images["hello-file"]
    changed = variant(
        tasks["hello-file"],
        files={"environment/Dockerfile": f"FROM {BASE_IMAGE}\nUSER root\nWORKDIR /app\n\n"},
    )
    other = executor.image_for(changed)
    assert other.ok and other.tag != again.tag
    labels = docker.from_env().api.inspect_image(other.tag)["Config"]["Labels"]
    assert labels["inspector.task-context"].startswith(other.tag.split(":")[1])


def test_concurrent_calls_for_one_context_build_once(executor, demo):
    tasks, _ = demo
    dockerfile = f"FROM {BASE_IMAGE}\nLABEL built-once={time.time_ns()}\n"
    source = variant(tasks["hello-file"], files={"environment/Dockerfile": dockerfile})
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(executor.image_for, [source] * 4))
    try:
        assert all(result.ok for result in results), results[0].reason
        assert len({result.tag for result in results}) == 1
        assert sorted(result.cached for result in results) == [False, True, True, True]
    finally:
        docker.from_env().api.remove_image(results[0].tag, force=True)


def test_a_broken_build_fails_with_its_log_and_is_remembered(executor, demo):
    tasks, _ = demo
    first = executor.image_for(tasks["broken-build"])
    assert not first.ok and not first.cached and not first.sandbox_error
    assert "jq: not found and no network to install it" in first.log
    assert first.reason.startswith("the build failed:") and "3" in first.reason
    second = executor.image_for(tasks["broken-build"])
    assert not second.ok and second.cached and second.seconds < 0.1
    assert second.reason == first.reason and second.log == first.log


def test_a_build_that_passes_its_timeout_is_cancelled(executor, demo):
    tasks, _ = demo
    source = variant(
        tasks["hello-file"],
        build_timeout_sec=2.0,
        files={
            "environment/Dockerfile": f"FROM {BASE_IMAGE}\nRUN echo slow-build-{time.time()}; "
            "sleep 60\n"
        },
    )
    start = time.monotonic()
    result = executor.image_for(source)
    assert time.monotonic() - start < 10
    assert not result.ok and result.reason == "the build passed its 2 s timeout"
    assert "slow-build" in result.log


def test_a_named_image_is_used_only_when_present(executor, demo):
    tasks, _ = demo
    bare = variant(tasks["hello-file"], dockerfile="", docker_image=BASE_IMAGE)
    bare["files"].pop("environment/Dockerfile")
    found = executor.image_for(bare)
    assert found.ok and found.tag == BASE_IMAGE
    missing = executor.image_for(variant(bare, docker_image="inspector-absent:never"))
    assert not missing.ok and "never pulled" in missing.reason


# --- Leftovers -----------------------------------------------------------------------------------


def test_sweep_removes_containers_of_gone_processes_only(executor):
    api = docker.from_env().api
    mine = {label: value for label, value in executor._labels.items()}
    gone = {**mine, OWNER_LABEL: f"{socket.gethostname()}:{2**22 + 17}", STARTED_LABEL: "1"}
    elsewhere = {**mine, OWNER_LABEL: "another-host:1"}
    made = [
        api.create_container(BASE_IMAGE, command=["true"], labels=labels)["Id"]
        for labels in (gone, elsewhere)
    ]
    try:
        assert gone[PIDNS_LABEL] == mine[PIDNS_LABEL]
        assert executor.sweep() >= 1
        left = {c["Id"] for c in api.containers(all=True, filters={"label": f"{RUN_LABEL}=1"})}
        assert made[0] not in left and made[1] in left
    finally:
        for container_id in made:
            try:
                api.remove_container(container_id, force=True)
            except docker.errors.NotFound:
                pass


def test_no_run_container_is_left(runs):
    api = docker.from_env().api
    left = api.containers(all=True, filters={"label": [f"{RUN_LABEL}=1", f"{OWNER_LABEL}={OWNER}"]})
    assert left == []


def test_a_dockerfile_that_would_fetch_a_url_or_pull_an_image_is_refused_and_nothing_is_fetched(
    executor, demo
):
    import http.server
    import threading

    asked: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (the standard library's name)
            asked.append(self.path)
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"SECRET-FROM-LOOPBACK")

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    tasks, _ = demo
    try:
        fetch = variant(
            tasks["hello-file"],
            files={
                "environment/Dockerfile": f"FROM {BASE_IMAGE}\n"
                f"ADD http://127.0.0.1:{port}/add /leak.txt\nRUN cat /leak.txt\n"
            },
        )
        pull = variant(
            tasks["hello-file"],
            files={"environment/Dockerfile": f"FROM 127.0.0.1:{port}/evil/base:latest\n"},
        )
        fetched, pulled = executor.image_for(fetch), executor.image_for(pull)
    finally:
        server.shutdown()
    assert not fetched.ok and not fetched.sandbox_error
    assert fetched.reason.startswith("refused: Dockerfile line 2, ADD fetches http://127.0.0.1")
    assert not pulled.ok and "is not on this Docker engine, and builds never pull" in pulled.reason
    assert asked == []


def test_an_image_whose_bash_is_dash_gets_its_files_and_reward_as_before(executor, demo):
    # Found by the second outside attack: dash's printf %b has no \xHH escapes, so the files
    # came out as escape text, and the reward's size read stopped dash with an error.
    source, tag = hello_file_built_with(executor, demo, "RUN ln -sf /bin/dash /bin/bash")
    for mode in MODES:
        run = executor.run(source, tag, mode=mode)
        assert outcome(run) == "passed", explain(run)
        checked = executor.run(source, tag, solution=solution_checking(ODD_BYTES), mode=mode)
        assert outcome(checked) == "passed", explain(checked)
