"""Benchmark: a planted-defect task set built from the real HumanEval, inspected end to end, with
precision and recall per flag against the planted truth.

The builder (`build.build_planted_set`, importable, no database) takes HumanEval's 164 tasks,
leaves one out (HumanEval/34: its check has a single assert, so it is a natural weak-tests case
whose truth cannot be stated), and plants defects on a seeded choice of the others, each on distinct
tasks; the rest stay clean. Every task gets `samples_per_task` sampled solutions: correct ones
(the canonical solution and light rewrites of it: renamed locals, a returned value held in a
variable first, mirrored comparisons) and wrong ones (single mutations of the canonical
solution: a flipped comparison or condition, an off-by-one constant, a swapped operator, a
changed string constant, `min` for `max`), two wrong ones only when they behave differently on
the check's calls, so that wrong samples never form a group of their own that looks like a
second reading.
Every modification is verified by running HumanEval-derived code in a subprocess (one forked
child per program, CPU and wall limits, output discarded); nothing else is ever run outside the
platform's sandbox.

Planted kinds (flag the platform should raise in brackets):
- mislabeled [mislabeled]: the reference is a mutant of the canonical solution that fails the
  task's own check; samples: correct variants and wrong ones.
- broken expectation [unsolvable]: one literal expected value in one assert of the check is
  changed, so no correct solution passes.
- flaky [flaky]: `assert random.random() < 0.5` appended to the check; a quarter of them
  (`flaky/hash`) instead `assert random.Random(hash("<task id>")).random() < 0.5`, which
  passes or fails with the interpreter's hash seed.
- weak tests [weak_tests]: the check with all its asserts turned into bare expressions
  (`weak_tests/no-asserts`) or cut down to its first assert that calls the candidate
  (`weak_tests/one-assert`).
- ambiguous [ambiguous]: hand-picked tasks with a second, hand-written reading of the prompt
  (`READINGS`); samples: half of reading A (the canonical, accepted by the check), half of
  reading B (rejected).
- no signal [no_signal]: every sample is correct.
- duplicate [duplicate]: pairs of the original and a near copy (`HumanEval/dup-<n>`, a few words
  of the docstring replaced by synonyms); HumanEval/56 and HumanEval/61 are a natural pair.
- answer leak [answer_leak]: the docstring gains `Hint: <a distinctive line of the reference>`.

Truth (`PlantedSet.truth`): the kind's flag, plus the flags that follow from the runs (computed
by running the reference, every sample and the null probe `    pass` once against the final
check, or for flaky tasks against the check without the planted assert):
- `unsolvable` when neither the reference nor any sample passes, `mislabeled` when the
  reference fails and some sample passes;
- `reward_hackable` when the null probe passes (a check without asserts usually lets it);
- `no_signal` when there are at least two samples and all pass or all fail, as the README
  defines it: so every broken-expectation task is {unsolvable, no_signal}.
A clean task's samples always mix passes and failures, and its truth is empty.

The command line (`__main__.py`) builds the set and runs the whole platform on it (`driver.py`)
the way bench/humaneval.py does (a fresh INSPECTOR_DATA_DIR, `import_tasks`, a Celery worker,
`inspect --wait`, `export_report`), `--repeats` times, then prints (`scoring.py`) per flag:
planted, raised, true positives, precision, recall against the targets, the share of clean tasks
with any flag, wall time and runs, and the missed and falsely flagged task ids. From each
`export_report` line it reads `task_id` and `flags` (required), and `flag_confidence`,
`flag_explanations` and `stats.runs` where present; a flag code it does not know gets a row of
its own (planted 0).

Run: .venv/bin/python -m bench.planted [--seed 0] [--out DIR] [--build-only] [--repeats 1]
     [--share-defective 0.5] [--samples-per-task 6] [--concurrency 2] [--report FILE ...]

Modules:
- catalogue: the flag codes, the planted kinds (flag, weight), the tasks left out, the advisory
  flags never scored, HumanEval's natural duplicates, the hand-written second readings.
- plantedset: `PlantedSet`, the built set, and the roles a sample can have.
- trusted: `TrustedRunner`, which runs the HumanEval-derived programs outside the sandbox.
- editing: source text with AST positions, and edits that keep its look.
- rewrites: correct variants of a solution; mutation: wrong ones (single mutations).
- checks: modified checks; prompts: modified prompts.
- build: `build_planted_set`, the analysis, the plants of each kind and the truth.
- write: the set's files; scoring: `Score` and `print_score`; driver: the platform run.
- __main__: the command line.
"""
