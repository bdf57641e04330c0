"""The deeper flags, through a real inspection (eager Celery, the local sandbox): mutants, behaviour
runs, sample groups, and the prompt signals, with the evidence a reviewer sees."""

from __future__ import annotations

import ast
import io
import json
import re

import pytest
from django.core.management import call_command

from inspector import selectors
from inspector.models import Flag, Inspection, Run, Task
from tests.builders import task

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def deeper_analysis(settings):
    settings.INSPECT_MUTANTS = 12
    settings.INSPECT_BEHAVIOUR = True
    settings.INSPECT_REFERENCE_REPEATS = 2
    settings.INSPECT_SAMPLE_REPEATS = 1


def prompt(name: str, doc: str) -> str:
    return f'def {name}(x):\n    """{doc}"""\n'


def clamp_task(task_id: str, test: str) -> dict:
    t = task(
        task_id,
        entry_point="clamp",
        body="    if x < 0:\n        return 0\n    if x > 10:\n        return 10\n    return x\n",
        test=test,
    )
    t["prompt"] = prompt("clamp", "Clamp the integer x into the range 0 to 10.")
    return t


FULL_CHECK = "def check(candidate):\n" + "".join(
    f"    assert candidate({v}) == {min(10, max(0, v))}\n" for v in (-5, -1, 0, 1, 5, 10, 11, 20)
)
ONE_ASSERT = "def check(candidate):\n    assert candidate(-5) == 0\n"

CASE = task(
    "case/has_a",
    entry_point="has_a",
    body="    return 'a' in x\n",
    test="def check(candidate):\n    assert candidate('abc') is True\n"
    "    assert candidate('xyz') is False\n    assert candidate('ABC') is False\n",
)
CASE["prompt"] = prompt("has_a", "Say whether the text x contains the letter a.")
SENSITIVE = [
    "    return 'a' in x\n",
    "    return x.count('a') > 0\n",
    "    return x.find('a') >= 0\n",
]
INSENSITIVE = [
    "    return 'a' in x.lower()\n",
    "    return x.lower().count('a') > 0\n",
    "    return 'a' in x.casefold()\n",
]


def twins(text: str) -> tuple[dict, dict]:
    """clamp/twin-a and clamp/twin-b, whose prompts are `text` ending in "." and in "!"."""
    a, b = clamp_task("clamp/twin-a", FULL_CHECK), clamp_task("clamp/twin-b", FULL_CHECK)
    a["prompt"], b["prompt"] = prompt("clamp", text + "."), prompt("clamp", text + "!")
    return a, b


def inspect(import_taskset, inspect_now, tasks, samples):
    version = import_taskset(name="depth", tasks=tasks, samples=samples)
    return inspect_now(version)


def flag(task_id: str, code: str) -> Flag:
    return Flag.objects.get(task__task_id=task_id, code=code)


def test_a_check_cut_to_one_assert_lets_mutants_through_and_the_full_check_does_not(
    import_taskset, inspect_now, reviewer_client
):
    tasks = [clamp_task("clamp/full", FULL_CHECK), clamp_task("clamp/weak", ONE_ASSERT)]
    tasks[1]["prompt"] = prompt("clamp", "Bound x below by zero and above by ten.")
    inspection = inspect(import_taskset, inspect_now, tasks, [])
    assert Run.objects.filter(inspection=inspection, kind=Run.MUTANT).exists()

    weak = flag("clamp/weak", "weak_tests")
    assert 0 < weak.confidence <= 1
    survivor = weak.evidence["survivors"][0]
    assert survivor["diff"].startswith("---") and survivor["input"]
    assert survivor["reference_output"] != survivor["mutant_output"]
    assert not Flag.objects.filter(task__task_id="clamp/full", code="weak_tests").exists()
    weak_task = Task.objects.get(task_id="clamp/weak")
    assert weak_task.survivor_share > Task.objects.get(task_id="clamp/full").survivor_share

    page = reviewer_client.get(weak_task.get_absolute_url()).content.decode()
    assert "surviving mutant" in page and survivor["mutant_id"] in page


def test_a_check_that_tries_a_single_input_is_weak_even_when_it_kills_every_mutant(
    import_taskset, inspect_now, reviewer_client
):
    def reverse_task(task_id: str, test: str) -> dict:
        t = task(task_id, entry_point="rev", body="    return x[::-1]\n", test=test)
        t["prompt"] = prompt("rev", f"Reverse the text x ({task_id}).")
        return t

    single = "def check(candidate):\n    assert candidate('abc') == 'cba', candidate('abc')\n"
    looped = "def check(candidate):\n    for s in ['', 'a', 'ab', 'abc']:\n        assert candidate(s) == s[::-1]\n"
    drawn = (
        "import random\n\ndef check(candidate):\n    assert candidate('abc') == 'cba'\n"
        "    for _ in range(20):\n        s = ''.join(random.sample('xyz', 2))\n"
        "        assert candidate(s) == s[::-1]\n"
    )
    tasks = [reverse_task("rev/single", single), reverse_task("rev/looped", looped)]
    tasks.append(reverse_task("rev/drawn", drawn))
    inspect(import_taskset, inspect_now, tasks, [])

    weak = flag("rev/single", "weak_tests")
    assert weak.evidence["checked_inputs"] == ["'abc'"]
    assert "1 input only" in weak.explanation and weak.confidence >= 0.8
    # Its mutants all die: the explanation does not go on to count them, which read as a
    # contradiction ("... passes; 0 of 1 non-equivalent mutants pass the check").
    assert "mutants pass the check" not in weak.explanation
    assert not Flag.objects.filter(task__task_id__in=("rev/looped", "rev/drawn"), code="weak_tests")
    page = reviewer_client.get(weak.task.get_absolute_url()).content.decode()
    assert "The check calls the solution on 1 input only" in page
    assert "<code>rev(&#x27;abc&#x27;)</code>" in page


def test_samples_that_split_into_two_readings_the_check_takes_one_of_are_ambiguous(
    import_taskset, inspect_now, reviewer_client
):
    samples = [
        {"task_id": "case/has_a", "sample_id": f"sensitive-{i}", "completion": c}
        for i, c in enumerate(SENSITIVE)
    ] + [
        {"task_id": "case/has_a", "sample_id": f"insensitive-{i}", "completion": c}
        for i, c in enumerate(INSENSITIVE)
    ]
    inspect(import_taskset, inspect_now, [CASE], samples)

    ambiguous = flag("case/has_a", "ambiguous")
    groups = ambiguous.evidence["groups"]
    assert len(groups) == 2
    assert {g["verdict"] for g in groups} == {"accepted", "rejected"}
    assert ambiguous.evidence["accepted_output"] != ambiguous.evidence["rejected_output"]
    assert Task.objects.get(task_id="case/has_a").cluster_count == 2

    page = reviewer_client.get(ambiguous.task.get_absolute_url()).content.decode()
    assert "insensitive-0" in page and "sensitive-0" in page


def test_a_task_every_sample_passes_has_no_signal_and_stays_in_the_manifest(
    import_taskset, inspect_now, reviewer_client
):
    samples = [
        {"task_id": "clamp/full", "sample_id": f"s{i}", "completion": body}
        for i, body in enumerate(
            [
                "    return min(10, max(0, x))\n",
                "    return max(0, min(10, x))\n",
                "    return sorted([0, x, 10])[1]\n",
            ]
        )
    ]
    inspect(import_taskset, inspect_now, [clamp_task("clamp/full", FULL_CHECK)], samples)

    quiet = flag("clamp/full", "no_signal")
    assert quiet.evidence["outcome"] == "pass"
    task_row = Task.objects.get(task_id="clamp/full")
    assert task_row.learnability == 0.0
    # Advisory: shown and reported, but the task is still clean.
    page = reviewer_client.get("/tasksets/depth/").content.decode()
    assert "Learnability p(1−p)" in page and "100% have none" in page
    assert [t["task_id"] for t in selectors.manifest_lines(taskset_name="depth")] == ["clamp/full"]


def test_a_prompt_holding_the_reference_and_a_near_copy_of_another_prompt_are_reported(
    import_taskset, inspect_now, settings
):
    leaky = clamp_task("clamp/leaky", FULL_CHECK)
    leaky["canonical_solution"] = "    return min(10, max(0, x))\n"
    leaky["prompt"] = prompt("clamp", "Clamp x into 0..10. Hint: return min(10, max(0, x))")
    twin_a, twin_b = twins(
        "Clamp the integer x into the closed range from zero to ten, inclusive of both"
    )
    settings.ADVISORY_FLAGS_THAT_BLOCK = ["duplicate"]
    inspect(import_taskset, inspect_now, [leaky, twin_a, twin_b], [])

    leak = flag("clamp/leaky", "answer_leak")
    assert leak.evidence["line"] == "return min(10, max(0, x))"
    duplicate = flag("clamp/twin-a", "duplicate")
    assert duplicate.evidence["other"] == "clamp/twin-b"
    assert duplicate.evidence["similarity"] >= 0.9
    # A setting makes an advisory flag block: both twins leave the manifest.
    clean = [t["task_id"] for t in selectors.manifest_lines(taskset_name="depth")]
    assert "clamp/twin-a" not in clean and "clamp/twin-b" not in clean

    report = io.StringIO()
    call_command("export_report", "depth", "-o", "-", stdout=report)
    rows = {r["task_id"]: r for r in map(json.loads, report.getvalue().splitlines())}
    assert rows["clamp/twin-a"]["flag_confidence"]["duplicate"] > 0
    assert set(rows["clamp/twin-a"]["stats"]) >= {"learnability", "survivor_share", "cluster_count"}


def wrong_example_task(task_id: str) -> dict:
    """A task whose docstring example contradicts its (right) reference and its check."""
    t = task(
        task_id,
        entry_point="double",
        body="    return 2 * x\n",
        test="def check(candidate):\n    assert candidate(2) == 4\n    assert candidate(5) == 10\n",
    )
    t["prompt"] = prompt("double", "Return twice x.\n    >>> double(3)\n    7\n    ")
    return t


def test_a_prompt_example_the_reference_contradicts_is_an_ambiguous_task_shown_with_the_example(
    import_taskset, inspect_now, reviewer_client
):
    inspect(import_taskset, inspect_now, [wrong_example_task("double/example")], [])

    ambiguous = flag("double/example", "ambiguous")
    assert ambiguous.explanation.startswith("the prompt's example says double(3)")
    assert ambiguous.evidence["examples"][0]["expected"] == "7"
    assert ambiguous.evidence["examples"][0]["reference_output"] == "6"
    assert [t["task_id"] for t in selectors.manifest_lines(taskset_name="depth")] == []

    page = reviewer_client.get(ambiguous.task.get_absolute_url()).content.decode()
    assert "The prompt's own examples that the reference" in page
    assert "<code>&gt;&gt;&gt; double(3)</code>" in page


def test_a_passing_sample_that_answers_an_input_differently_makes_the_tests_weak(
    import_taskset, inspect_now, reviewer_client
):
    check = "def check(candidate):\n" + "".join(
        f"    assert candidate({v}) == {min(10, max(0, v))}\n" for v in (-5, 0, 5, 10, 20)
    )
    samples = [
        {"task_id": "clamp/holes", "sample_id": "right", "completion": "    return min(10, max(0, x))\n"},
        {
            "task_id": "clamp/holes",
            "sample_id": "lookup",
            "model": "m1",
            "completion": "    return {-5: 0, 0: 0, 5: 5, 10: 10, 20: 10}.get(x, 3)\n",
        },
    ]  # fmt: skip
    inspect(import_taskset, inspect_now, [clamp_task("clamp/holes", check)], samples)

    weak = flag("clamp/holes", "weak_tests")
    (shown,) = weak.evidence["accepted_wrong"]
    assert shown["sample_id"] == "lookup" and shown["model"] == "m1"
    assert shown["sample_output"] == "3" and shown["reference_output"] != "3"
    assert "accepts both sides" in weak.explanation

    page = reviewer_client.get(weak.task.get_absolute_url()).content.decode()
    assert "pass every run disagree with the reference" in page and "<code>lookup</code>" in page


@pytest.mark.production
@pytest.mark.django_db(transaction=True)
def test_weak_tests_and_a_wrong_example_are_found_on_postgresql_redis_and_the_docker_sandbox(
    start_worker, import_taskset
):
    from django.conf import settings

    assert settings.SANDBOX_BACKEND == "docker"
    tasks = [clamp_task("clamp/weak", ONE_ASSERT), wrong_example_task("double/example")]
    import_taskset(name="depth-prod", tasks=tasks, samples=[])
    start_worker()
    call_command("inspect", "depth-prod", "--wait", stdout=io.StringIO())
    weak = flag("clamp/weak", "weak_tests")
    assert weak.evidence["survivors"]
    example = flag("double/example", "ambiguous").evidence["examples"][0]
    assert (example["expected"], example["reference_output"]) == ("7", "6")
    assert Run.objects.filter(kind=Run.BEHAVIOUR, outcome="passed").exists()


def checks_only(settings) -> None:
    """References and samples through the check, and nothing deeper: no mutants made, no
    behaviour programs, no probes."""
    settings.INSPECT_MUTANTS = 0
    settings.INSPECT_BEHAVIOUR = False
    settings.INSPECT_PROBES = []


FOREVER = "    while True:\n        pass\n"


def one_sample_set(import_taskset, settings, name, completion, *, repeats, run_wall, per_message):
    """A set of one clamp task (task id clamp/NAME) with one sample, checked only: the sample
    run `repeats` times under a run limit of `run_wall` s and a short clock of 1 s,
    `per_message` runs a message."""
    checks_only(settings)
    settings.INSPECT_SAMPLE_REPEATS = repeats
    settings.RUN_WALL_SECONDS = run_wall
    settings.INSPECT_SAMPLE_WALL_SECONDS = 1
    settings.RUNS_PER_MESSAGE = per_message
    task_id = f"clamp/{name}"
    return import_taskset(
        name=name,
        tasks=[clamp_task(task_id, FULL_CHECK)],
        samples=[{"task_id": task_id, "completion": completion}],
    )


def test_a_mutant_that_loops_forever_is_stopped_at_the_mutant_clock_not_the_runs(
    import_taskset, inspect_now, settings
):
    from inspector import services

    checks_only(settings)
    settings.INSPECT_SAMPLE_REPEATS = 0
    settings.INSPECT_REFERENCE_REPEATS = 1
    settings.RUN_WALL_SECONDS = 4
    settings.INSPECT_MUTANT_WALL_SECONDS = 0.5
    tasks = [clamp_task("clamp/loop", FULL_CHECK), clamp_task("clamp/failing", FULL_CHECK)]
    tasks[1]["canonical_solution"] = "    return x\n"  # fails the check: no clock from it
    version = import_taskset(name="loops", tasks=tasks, samples=[])
    inspection = inspect_now(version)
    passing, failing = (inspection.runs.get(task__task_id=t["task_id"]) for t in tasks)
    assert (passing.outcome, failing.outcome) == ("passed", "failed")
    detail = {"completion": FOREVER, "diff": "", "description": "loop"}
    mutant, of_failing = (
        Run.objects.create(
            inspection=inspection,
            task=reference.task,
            kind=Run.MUTANT,
            probe="m1",
            detail=detail,
            repeat=1,
        )  # fmt: skip
        for reference in (passing, failing)
    )

    services.runs_execute(run_ids=[mutant.pk])
    services.runs_execute(run_ids=[of_failing.pk])

    mutant.refresh_from_db()
    of_failing.refresh_from_db()
    assert mutant.outcome == of_failing.outcome == "timed_out"
    # Its reference's first run passed fast: the mutant's clock is the short one, though no
    # run of the reference is in its message.
    assert mutant.duration < 2.0, mutant.duration
    # 20x its reference's run, at least 0.5 s (a loaded machine makes the reference slower).
    limit = float(re.search(r"wall-clock limit of ([0-9.]+) s", mutant.error).group(1))
    assert 0.5 <= limit < 2.0, mutant.error
    # No passing first run of its reference: the run's own limit holds.
    assert of_failing.duration >= 4.0, of_failing.duration


def test_a_sample_that_loops_forever_gets_the_whole_limit_once_then_the_short_clock(
    import_taskset, eager_celery, django_capture_on_commit_callbacks, settings
):
    from inspector import services

    settings.INSPECT_REFERENCE_REPEATS = 2
    # Every run in a message of its own.
    version = one_sample_set(
        import_taskset, settings, "loops", FOREVER, repeats=3, run_wall=4, per_message=1
    )
    with django_capture_on_commit_callbacks(execute=True):
        inspection = services.inspection_start(version=version)
        # A worker configured otherwise runs it: the clock is the one the inspection started
        # with, on every worker.
        settings.INSPECT_SAMPLE_WALL_SECONDS = 3

    inspection.refresh_from_db()
    assert inspection.status == "finished"
    loops = list(inspection.runs.filter(kind=Run.SAMPLE).order_by("repeat"))
    assert [run.outcome for run in loops] == ["timed_out"] * 3
    limits = [re.search(r"wall-clock limit of ([0-9.]+) s", run.error).group(1) for run in loops]
    assert limits == ["4", "1", "1"], limits
    assert loops[0].duration >= 4.0 and all(run.duration < 3.0 for run in loops[1:])


def test_samples_that_repeat_the_reference_share_its_behaviour_run_and_its_verdicts(
    import_taskset, inspect_now
):
    body = clamp_task("x", FULL_CHECK)["canonical_solution"]
    samples = [{"task_id": "clamp/same", "completion": body} for _ in range(3)]
    samples.append({"task_id": "clamp/same", "completion": "    return max(0, min(10, x))\n"})
    inspect(import_taskset, inspect_now, [clamp_task("clamp/same", FULL_CHECK)], samples)

    behaviour = list(
        Run.objects.filter(kind=Run.BEHAVIOUR).exclude(probe__startswith="mutant:").order_by("pk")
    )
    by_probe = {run.probe: run for run in behaviour}
    reference = by_probe[Run.REFERENCE]
    copies = [r for r in behaviour if r.sample_id and r.sample.completion == body]
    other = [r for r in behaviour if r.sample_id and r.sample.completion != body]
    assert len(copies) == 3 and len(other) == 1
    assert all(r.outcome == "passed" for r in behaviour)
    # The same program ran once: its copies carry its very output and time.
    for copy in copies:
        assert (copy.stdout_tail, copy.duration) == (reference.stdout_tail, reference.duration)
    # Another solution with the same behaviour: a run of its own, with a time of its own.
    assert other[0].duration != reference.duration
    assert not Flag.objects.filter(task__task_id="clamp/same", code="weak_tests").exists()


HANGS_ABOVE_3 = "    while x > 3:\n        pass\n    return max(0, x)\n"
SMALL_CHECK = "def check(candidate):\n" + "".join(
    f"    assert candidate({v}) == {max(0, v)}\n" for v in (-5, -1, 0, 1, 2, 3)
)


def test_a_samples_behaviour_program_stops_at_its_first_timeout_and_the_references_at_its_third(
    import_taskset, eager_celery, django_capture_on_commit_callbacks, settings
):
    from inspector import services
    from inspector.detect.behaviour import SKIPPED, TIMEOUT, parse_behaviour

    settings.INSPECT_MUTANTS = 0
    settings.INSPECT_PROBES = []
    settings.BEHAVIOUR_PER_CALL_SECONDS = 0.2
    settings.BEHAVIOUR_MAX_TIMEOUTS = 3
    settings.BEHAVIOUR_CANDIDATE_MAX_TIMEOUTS = 1
    reference = clamp_task("clamp/hangs", SMALL_CHECK)
    reference["canonical_solution"] = HANGS_ABOVE_3
    # The same behaviour, written otherwise: a program of its own, a candidate's.
    sample = HANGS_ABOVE_3.replace("max(0, x)", "x if x > 0 else 0")
    version = import_taskset(
        name="hangs", tasks=[reference], samples=[{"task_id": "clamp/hangs", "completion": sample}]
    )
    with django_capture_on_commit_callbacks(execute=True):
        inspection = services.inspection_start(version=version)
        # A worker configured otherwise runs it: the limits are those the inspection started
        # with.
        settings.BEHAVIOUR_CANDIDATE_MAX_TIMEOUTS = 3

    inspection.refresh_from_db()
    assert inspection.status == "finished"
    task = Task.objects.get(task_id="clamp/hangs")
    values = [ast.literal_eval(text) for text in task.behaviour_inputs]
    hanging = [i for i, x in enumerate(values) if isinstance(x, int | float) and x > 3]
    assert len(hanging) >= 3, task.behaviour_inputs
    runs = {r.probe: r for r in inspection.runs.filter(kind=Run.BEHAVIOUR)}
    (sample_probe,) = (probe for probe in runs if probe.startswith("sample:"))
    mine = parse_behaviour(runs[Run.REFERENCE].stdout_tail, task.behaviour_inputs).digests
    theirs = parse_behaviour(runs[sample_probe].stdout_tail, task.behaviour_inputs).digests
    assert [mine[i] for i in hanging[:3]] == [TIMEOUT] * 3
    assert theirs[hanging[0]] == TIMEOUT
    assert {theirs[i] for i in hanging[1:]} == {SKIPPED}  # unknown: never compared
    assert runs[sample_probe].duration < runs[Run.REFERENCE].duration
    # Where both answered, they answer alike; the sample passes its check and nothing is
    # flagged for what it did not reach.
    answered = [i for i, d in enumerate(theirs) if d not in (TIMEOUT, SKIPPED)]
    assert answered and [mine[i] for i in answered] == [theirs[i] for i in answered]
    assert inspection.runs.get(kind=Run.SAMPLE).outcome == "passed"
    assert not Flag.objects.filter(task=task, code__in=["weak_tests", "ambiguous"]).exists()


def test_a_messages_behaviour_programs_run_in_its_session_and_start_no_sandbox_of_their_own(
    import_taskset, inspect_now, monkeypatch
):
    from inspector.detect.behaviour import parse_behaviour
    from inspector.services import function_runs
    from workers.sandbox.local import LocalSandbox

    backend = function_runs.sandbox_backend()  # started (and checked) before counting
    one_offs: list[str] = []
    pairs: list[object] = []
    run_python, open_pair = LocalSandbox.run_python, LocalSandbox._open_pair

    def counted_run_python(self, program, **kwargs):
        one_offs.append(program)
        return run_python(self, program, **kwargs)

    def counted_open_pair(self, limits):
        pairs.append(limits)
        return open_pair(self, limits)

    monkeypatch.setattr(LocalSandbox, "run_python", counted_run_python)
    monkeypatch.setattr(LocalSandbox, "_open_pair", counted_open_pair)
    body = clamp_task("x", ONE_ASSERT)["canonical_solution"]
    samples = [
        {"task_id": "clamp/session", "completion": body},
        {"task_id": "clamp/session", "completion": "    return max(0, min(10, x))\n"},
        {"task_id": "clamp/session", "completion": "    return x\n"},
    ]
    inspect(import_taskset, inspect_now, [clamp_task("clamp/session", ONE_ASSERT)], samples)

    behaviour = list(Run.objects.filter(kind=Run.BEHAVIOUR).select_related("task", "sample"))
    ran = [run for run in behaviour if run.outcome != "skipped"]
    assert len(ran) >= 5 and all(run.outcome == "passed" for run in ran), [
        (run.probe, run.outcome, run.error) for run in ran
    ]
    # Every program ran in its message's session: not one sandbox of its own, and one session
    # (a pair of sandboxes) per message: the reference's first run (sent first), the rest of
    # repeat 1 (checks and programs), repeat 2.
    assert one_offs == []
    assert len(pairs) == 3, pairs
    # What each printed is what a one-off sandbox prints for it.
    for run in ran:
        program, limits = function_runs._behaviour_program(run)
        inputs = run.task.behaviour_inputs
        alone = parse_behaviour(backend.run_python(program, limits=limits).stdout_tail, inputs)
        here = parse_behaviour(run.stdout_tail, inputs)
        assert here is not None and alone is not None, run.probe
        assert (here.digests, here.reprs, here.error) == (alone.digests, alone.reprs, alone.error)
    assert flag("clamp/session", "weak_tests")


def test_a_completion_too_large_for_the_sessions_messages_ends_only_its_own_runs(
    import_taskset, inspect_now, settings
):
    # Found by an outside attack: a behaviour program over the runner's 64 MiB frame raised
    # out of the message's loop, and every later run of the message was left running. A
    # program over 8 MiB goes to a one-off sandbox; a completion whose run's message passes
    # 64 MiB of JSON is too large for a run too: its run is a sandbox error, and the message
    # goes on.
    settings.RUN_MAX_ATTEMPTS = 1
    body = clamp_task("x", ONE_ASSERT)["canonical_solution"]
    large = body + "# " + "\\" * (9 << 19) + "\n"  # 4.5 MiB: a 9 MiB program (repr doubles)
    huge = body + "# " + "\x01" * (11 << 20) + "\n"  # 11 MiB, 66 MiB of JSON (\u0001)
    samples = [
        {"task_id": "clamp/large", "completion": large, "sample_id": "large"},
        {"task_id": "clamp/large", "completion": huge, "sample_id": "huge"},
        {"task_id": "clamp/large", "completion": body, "sample_id": "fine"},
    ]
    inspect(import_taskset, inspect_now, [clamp_task("clamp/large", ONE_ASSERT)], samples)

    runs = Run.objects.filter(task__task_id="clamp/large")
    assert not runs.exclude(status=Run.DONE).exists()
    by_sample = {}
    for run in runs.filter(
        kind__in=(Run.SAMPLE, Run.BEHAVIOUR), sample__isnull=False
    ).select_related("sample"):
        by_sample.setdefault(run.sample.sample_id, set()).add((run.kind, run.outcome))
    assert by_sample["large"] == {(Run.SAMPLE, "passed"), (Run.BEHAVIOUR, "passed")}
    assert by_sample["fine"] == {(Run.SAMPLE, "passed"), (Run.BEHAVIOUR, "passed")}
    assert by_sample["huge"] == {(Run.SAMPLE, "sandbox_error"), (Run.BEHAVIOUR, "passed")}
    error = runs.filter(sample__sample_id="huge", kind=Run.SAMPLE).first().error
    assert "exceeds" in error, error


def test_a_killed_mutants_behaviour_is_not_run_and_a_surviving_ones_is(import_taskset, inspect_now):
    inspect(import_taskset, inspect_now, [clamp_task("clamp/weak", ONE_ASSERT)], [])

    checks = {r.probe: r.outcome for r in Run.objects.filter(kind=Run.MUTANT)}
    behaviour = {
        r.probe.removeprefix("mutant:"): r
        for r in Run.objects.filter(kind=Run.BEHAVIOUR, probe__startswith="mutant:")
    }
    assert set(checks) == set(behaviour)
    killed = [m for m, outcome in checks.items() if outcome != "passed"]
    survived = [m for m, outcome in checks.items() if outcome == "passed"]
    assert killed and survived
    for mutant_id in killed:
        run = behaviour[mutant_id]
        assert (run.outcome, run.error) == ("skipped", "not run: its mutant failed the check")
    assert all(behaviour[m].outcome == "passed" for m in survived)
    # What the flag rests on is unchanged: the survivors' behaviour, compared with the reference.
    assert flag("clamp/weak", "weak_tests").evidence["survivors"]


@pytest.mark.parametrize("runs_per_message", [1, 50])
def test_a_slow_right_sample_passes_in_every_repeat_however_its_runs_are_batched(
    import_taskset, inspect_now, settings, runs_per_message
):
    # Two outside attacks on earlier sample clocks. Taken from the reference's run in the same
    # message, a right sample taking 3.6 s (8 calls of 0.45 s) passed where its message held no
    # reference run (a retry, a split group) and timed out at 3 s where it did: a false
    # `flaky`. Taken from the reference's first run, the clock followed that run's noise from
    # one inspection to the next (a false `drift`), and 3 s was within a loaded machine's
    # noise. A sample now gets the short clock only after one of its runs reached the whole
    # limit.
    slow = "    import time\n    time.sleep(0.45)\n    return max(0, min(10, x))\n"
    version = one_sample_set(
        import_taskset, settings, "slow", slow, repeats=2, run_wall=6, per_message=runs_per_message
    )
    inspection = inspect_now(version)

    samples = inspection.runs.filter(kind=Run.SAMPLE)
    assert [r.outcome for r in samples] == ["passed", "passed"]
    assert inspection.status == inspection.FINISHED
    assert not Flag.objects.filter(task__task_id="clamp/slow", code="flaky").exists()


def test_a_near_duplicate_links_to_its_twin_and_shows_how_the_prompts_differ(
    import_taskset, inspect_now, reviewer_client
):
    twin_a, twin_b = twins("Clamp the integer x into the closed range 0 to 10, both in")
    inspect(import_taskset, inspect_now, [twin_a, twin_b], [])

    duplicate = flag("clamp/twin-a", "duplicate")
    page = reviewer_client.get(duplicate.task.get_absolute_url()).content.decode()

    other_url = Task.objects.get(task_id="clamp/twin-b").get_absolute_url()
    assert f'<a href="{other_url}" class="duplicate-of"><strong>clamp/twin-b</strong></a>' in page
    assert "How the two prompts differ" in page and "both in!" in page
    assert "Evidence: 0 runs" not in page


def test_a_near_copy_of_a_task_in_another_set_is_a_duplicate_naming_that_set_and_task(
    import_taskset, inspect_now, monkeypatch
):
    from inspector.services import analysis

    twin_a, twin_b = twins("Clamp the integer x into the closed range 0 to 10, both in")
    other = clamp_task("clamp/other", FULL_CHECK)
    other["prompt"] = prompt("clamp", "Bound x below by zero and above by ten.")
    import_taskset(name="earlier", tasks=[other, twin_a], samples=[])
    # The other set's prompts are read a block of one at a time as the search goes.
    monkeypatch.setattr(analysis, "_TASKS_WRITTEN_AT_ONCE", 1)
    inspect(import_taskset, inspect_now, [twin_b, clamp_task("clamp/full", FULL_CHECK)], [])

    duplicate = flag("clamp/twin-b", "duplicate")
    assert "clamp/twin-a" in duplicate.explanation
    assert "in task set earlier" in duplicate.explanation
    assert not Flag.objects.filter(code="duplicate").exclude(pk=duplicate.pk).exists()


def test_no_signal_shows_the_runs_of_the_samples_that_all_end_alike(
    import_taskset, inspect_now, reviewer_client
):
    samples = [
        {"task_id": "clamp/full", "sample_id": f"s{i}", "completion": body}
        for i, body in enumerate(
            ["    return min(10, max(0, x))\n", "    return max(0, min(10, x))\n"]
        )
    ]
    inspect(import_taskset, inspect_now, [clamp_task("clamp/full", FULL_CHECK)], samples)

    quiet = flag("clamp/full", "no_signal")
    page = reviewer_client.get(quiet.task.get_absolute_url()).content.decode()

    assert len(quiet.evidence_run_ids) == 2
    assert "Evidence: 2 runs" in page and "Evidence: 0 runs" not in page
    # The set page's link for an advisory flag opens a queue that lists its task.
    queue = reviewer_client.get("/queue/?taskset=depth&flag=no_signal").content.decode()
    assert 'data-task-id="clamp/full"' in queue and "no_signal: " in queue


def test_an_anomaly_on_the_survivor_share_shows_the_set_median_and_the_mutants_that_survived():
    from inspector.detect.depth import _anomalies

    features = {
        key: {"survivor_share": 0.0, "reference_pass_rate": 1.0, "mean_seconds": 0.02}
        for key in range(12)
    }
    features[7]["survivor_share"] = 0.5
    survivor = {
        "mutant_id": "m3", "description": "== to !=", "diff": "--- a\n+++ b\n", "input": "(2,)",
        "reference_output": "4", "mutant_output": "5",
    }  # fmt: skip
    evidence = {
        7: (
            {"survivors": [survivor], "survivor_count": 1, "killed": 1, "equivalent": 0,
             "survivor_share": 0.5},
            [70],
            [71, 72],
        )
    }  # fmt: skip

    (found,) = _anomalies(features, set(), evidence)

    assert found.task_key == 7 and found.evidence_run_ids == (70,)
    assert "survivor_share 0.50 where the set's median is 0.00" in found.explanation
    assert found.evidence["feature_rows"][0] == {
        "name": "survivor_share", "value": 0.5, "usual": 0.0, "z": found.evidence["feature_rows"][0]["z"],
    }  # fmt: skip
    assert found.evidence["survivors"] == [survivor]


def test_the_task_page_shows_an_anomaly_as_a_table_beside_the_set_median(
    import_taskset, reviewer_client
):
    version = import_taskset(name="odd", tasks=[clamp_task("clamp/odd", FULL_CHECK)], samples=[])
    inspection = Inspection.objects.create(version=version, status=Inspection.FINISHED)
    odd = version.tasks.get()
    odd.last_inspection = inspection
    odd.save(update_fields=("last_inspection",))
    Flag.objects.create(
        task=odd, inspection=inspection, code="anomaly", severity=5, confidence=0.9,
        explanation="odd among its task set",
        evidence={
            "score": 0.81, "features": ["survivor_share"], "values": {"survivor_share": 0.5},
            "feature_rows": [{"name": "survivor_share", "value": 0.5, "usual": 0.0, "z": 10.0}],
            "survivors": [{"mutant_id": "m3", "description": "== to !=", "diff": "--- a\n+++ b\n",
                           "input": "(2,)", "reference_output": "4", "mutant_output": "5"}],
            "survivor_count": 1, "killed": 1, "equivalent": 0, "survivor_share": 0.5,
        },
    )  # fmt: skip

    page = reviewer_client.get(odd.get_absolute_url()).content.decode()

    assert '<table class="anomaly-features">' in page
    assert "<td><code>survivor_share</code></td><td>0.500</td><td>0.000</td><td>10.0</td>" in page
    assert "1 surviving mutant, 1 killed" in page and "<code>m3</code>" in page
    assert "Evidence: 0 runs" not in page


def test_the_analysis_flags_a_set_alike_whether_it_reads_one_task_at_a_time_or_all_at_once(
    import_taskset, inspect_now, monkeypatch
):
    from inspector.services import analysis
    from tests.builders import PLANTED_SAMPLES, PLANTED_TASKS

    leaky = clamp_task("clamp/leaky", FULL_CHECK)
    leaky["canonical_solution"] = "    return min(10, max(0, x))\n"
    leaky["prompt"] = prompt("clamp", "Clamp x into 0..10. Hint: return min(10, max(0, x))")
    weak = clamp_task("clamp/weak", ONE_ASSERT)
    weak["prompt"] = prompt("clamp", "Bound x below by zero and above by ten.")
    plain = [
        task(
            f"plain/add-{k}",
            body=f"    return x + {k}\n",
            test=f"def check(candidate):\n    assert candidate(1) == {1 + k}\n"
            f"    assert candidate(7) == {7 + k}\n",
        )
        for k in range(3, 8)
    ]
    tasks = [
        *PLANTED_TASKS, *plain, clamp_task("clamp/full", FULL_CHECK), weak, leaky, CASE,
        *twins("Clamp the integer x into the closed range from zero to ten, inclusive of both"),
        wrong_example_task("double/wrong-example"),
    ]  # fmt: skip
    samples = [
        *PLANTED_SAMPLES,
        *(
            {"task_id": "case/has_a", "sample_id": f"{reading}-{i}", "completion": c}
            for reading, bodies in (("sensitive", SENSITIVE), ("insensitive", INSENSITIVE))
            for i, c in enumerate(bodies)
        ),
    ]
    inspection = inspect(import_taskset, inspect_now, tasks, samples)

    def flags():
        return sorted(
            (
                flag.task.task_id, flag.code, flag.severity, flag.confidence, flag.explanation,
                flag.evidence_run_ids, json.dumps(flag.evidence, sort_keys=True),
            )
            for flag in Flag.objects.filter(inspection=inspection).select_related("task")
        )  # fmt: skip

    def figures():
        return list(
            Task.objects.filter(version_id=inspection.version_id)
            .order_by("pk")
            .values_list(
                "severity", "open_flags", "runs_count", "reference_pass_rate",
                "sample_pass_rate", "learnability", "survivor_share", "cluster_count",
            )
        )  # fmt: skip

    # In a set this small the forest's picks score low: the bar is lowered to flag them.
    monkeypatch.setattr("inspector.detect.depth.ANOMALY_MIN_SCORE", 0.5)
    analysis.inspection_analyse(inspection_id=inspection.pk)
    at_once = flags(), figures()
    # Flags of every kind of rule: on outcomes, on one task's deeper runs, across the set.
    assert {row[1] for row in at_once[0]} >= {
        "unsolvable", "weak_tests", "ambiguous", "answer_leak", "duplicate", "anomaly",
    }  # fmt: skip
    # An anomaly shows the odd task's reference and sample runs, read again for it alone.
    odd = Flag.objects.filter(inspection=inspection, code="anomaly").first()
    assert odd is not None and sorted(odd.evidence_run_ids) == sorted(
        Run.objects.filter(
            inspection=inspection, task=odd.task, kind__in=(Run.REFERENCE, Run.SAMPLE)
        ).values_list("pk", flat=True)
    )
    assert analysis._chunk_tasks(inspection) >= len(tasks)  # a few hundred runs: one chunk
    monkeypatch.setattr(analysis, "_RUNS_ANALYSED_AT_ONCE", 1)
    assert analysis._chunk_tasks(inspection) == 1
    # Prompts (for duplicates) are read, and figures written, two tasks at a time.
    monkeypatch.setattr(analysis, "_TASKS_WRITTEN_AT_ONCE", 2)
    analysis.inspection_analyse(inspection_id=inspection.pk)

    assert (flags(), figures()) == at_once
