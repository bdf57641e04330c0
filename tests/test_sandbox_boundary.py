"""The boundary between the solution's sandbox and the check's (workers/sandbox/runner.py): what
crosses as itself, what stays behind as a handle, which names of the completion a test may use,
what a hostile solution can do with all that, and how a run that the boundary decided is
reported and analysed. Sessions run on every backend, as the platform runs them."""

from __future__ import annotations

import textwrap

import pytest

from inspector.detect.flags import analyse_runs, boundary_findings
from workers.sandbox import Execution, Limits, Outcome, SandboxUnavailable, get_sandbox
from workers.sandbox.runner import BOUNDARY_EXIT, MAX_DEPTH
from workers.sandbox.session import FunctionTask

LIMITS = Limits(wall_seconds=5, memory_bytes=512 << 20, tail_bytes=1 << 14)
IMPORTS = "import array, collections, datetime, decimal, fractions, itertools, math, re\n"
PROMPT = 'def f(*args):\n    """The task."""\n'


@pytest.fixture(scope="module", params=["local", "docker"])
def session(request: pytest.FixtureRequest):
    try:
        sandbox = get_sandbox(request.param)
    except SandboxUnavailable as exc:
        pytest.skip(f"the {request.param} sandbox backend is unavailable: {exc}")
    opened = sandbox.session(limits=LIMITS)
    yield opened
    opened.close()


def run(session, completion: str, test: str, *, prompt: str = PROMPT, entry: str = "f"):
    return session.run(
        textwrap.dedent(completion),
        task=FunctionTask(prompt, textwrap.dedent(test), entry),
    )


def describe(result: Execution) -> str:
    return f"{result.outcome} exit={result.exit_code} error={result.error!r}\n{result.stderr_tail}"


def passes(result: Execution) -> None:
    assert result.passed, describe(result)


def fails_plainly(result: Execution) -> None:
    assert result.outcome is Outcome.FAILED and result.exit_code == 1, describe(result)
    assert not result.error, describe(result)


def fails_through_the_boundary(result: Execution, *words: str) -> None:
    assert result.outcome is Outcome.FAILED, describe(result)
    assert result.exit_code == BOUNDARY_EXIT, describe(result)
    assert result.error.startswith("boundary: "), describe(result)
    for word in words:
        assert word in result.error, describe(result)


# --- What crosses as itself ---------------------------------------------------------------------

NAMEDTUPLE = "P = collections.namedtuple('P', 'x y')\n"
SAME = (
    "assert type(got) is type(want), type(got)\nassert got == want\nassert repr(got) == repr(want)"
)
VALUES = {
    "Counter": (
        "collections.Counter('abracadabra')",
        SAME + "\nassert got.most_common(1) == [('a', 5)]",
    ),
    "OrderedDict": (
        "collections.OrderedDict([('b', 1), ('a', 2)])",
        SAME + "\nassert list(got) == ['b', 'a']",
    ),
    "defaultdict of int": (
        "collections.defaultdict(int, {'a': 1})",
        SAME + "\nassert got['new'] == 0",
    ),
    "defaultdict of list": ("collections.defaultdict(list, {1: [2]})", SAME + "\ngot[5].append(1)"),
    "deque with maxlen": (
        "collections.deque([1, 2, 3], maxlen=4)",
        SAME + "\nassert got.maxlen == 4",
    ),
    "namedtuple": (
        "P(1, (2, 3))",
        "assert got == want == (1, (2, 3))\nassert repr(got) == 'P(x=1, y=(2, 3))'\n"
        "assert (got.x, got.y) == (1, (2, 3)) and got._fields == ('x', 'y')",
    ),
    "Decimal": ("decimal.Decimal('1.10')", SAME + "\nassert str(got) == '1.10'"),
    "Fraction": ("fractions.Fraction(-3, 4)", SAME),
    "date": ("datetime.date(2024, 2, 29)", SAME),
    "datetime with a timezone": (
        "datetime.datetime(2024, 1, 2, 3, 4, 5, 6, tzinfo=datetime.timezone(datetime.timedelta(hours=-5), 'EST'))",
        SAME + "\nassert got.tzname() == 'EST'",
    ),
    "naive datetime": (
        "datetime.datetime(1999, 12, 31, 23, 59, 59, fold=1)",
        SAME + "\nassert got.fold == 1",
    ),
    "time": ("datetime.time(23, 59, 1, 5, tzinfo=datetime.timezone.utc)", SAME),
    "timedelta": ("datetime.timedelta(days=-1, seconds=5, microseconds=7)", SAME),
    "nan": ("float('nan')", "assert type(got) is float and math.isnan(got)"),
    "infinities": ("[float('inf'), -float('inf')]", SAME),
    "int of 8000 digits": ("7 ** 9500", "assert type(got) is int and got == want and got % 7 == 0"),
    "range": ("range(3, 30, 4)", SAME + "\nassert list(got) == [3, 7, 11, 15, 19, 23, 27]"),
    "bytearray": ("bytearray(b'\\x00\\xff')", SAME),
    "array": ("array.array('d', [1.5, 2.5])", SAME),
    "dict keys": ("{'a': 1, 'b': 2}.keys()", SAME),
    "dict values": (
        "{'a': 1, 'b': 2}.values()",
        "assert type(got) is type(want) and list(got) == [1, 2]",
    ),
    "dict items": ("{'a': 1, 'b': 2}.items()", SAME),
    "builtin type": (
        "[int, str, type(None)]",
        "assert got[0] is int and got[1] is str and got[2] is type(None)",
    ),
    "nested": (
        "{(1, 'a'): [collections.Counter('ab'), collections.deque([decimal.Decimal(2)])]}",
        SAME,
    ),
    "generator": (
        "(x * x for x in range(5))",
        "assert iter(got) is got\nassert list(got) == list(want)",
    ),
    "map, filter and zip": (
        "[map(str, range(3)), filter(None, [0, 1, 2]), zip('ab', [1, 2])]",
        "assert [list(g) for g in got] == [list(w) for w in want]",
    ),
    "long generator": ("(n for n in range(200_000))", "assert sum(got) == sum(range(200_000))"),
    "endless iterator": (
        "itertools.count(5)",
        "assert [next(got) for _ in range(3)] == [5, 6, 7]\nassert next(got) == 8",
    ),
}


@pytest.mark.parametrize("expression, assertions", VALUES.values(), ids=VALUES.keys())
def test_a_value_returned_by_the_solution_arrives_as_itself_and_compares_equal(
    session, expression: str, assertions: str
) -> None:
    completion = f"{IMPORTS}{NAMEDTUPLE}def f():\n    return {expression}\n"
    test = (
        f"{IMPORTS}{NAMEDTUPLE}def check(candidate):\n    got, want = candidate(), {expression}\n"
        + textwrap.indent(assertions, "    ")
        + "\n"
    )
    passes(run(session, completion, test))


SHOWN = """
def shown(values):
    out = []
    for v in values:
        if hasattr(v, "__next__"):  # an iterator: what it yields
            out.append(("iterator", [shown([x]) for x in v]))
        elif type(v) is list:
            out.append(("list", shown(v)))
        elif type(v) is int:
            out.append(v)
        else:
            out.append((type(v).__name__, repr(v)))
    return out
"""


def test_the_same_values_sent_by_the_check_arrive_as_themselves(session) -> None:
    endless_or_long = ("endless iterator", "long generator")
    made = "[" + ", ".join(e for k, (e, _) in VALUES.items() if k not in endless_or_long) + "]"
    completion = f"{IMPORTS}{NAMEDTUPLE}{SHOWN}def f(values):\n    return shown(values)\n"
    test = (
        f"{IMPORTS}{NAMEDTUPLE}{SHOWN}def make():\n    return {made}\n\n"
        "def check(candidate):\n"
        "    assert candidate(make()) == shown(make())\n"
    )
    passes(run(session, completion, test))


def test_a_namedtuple_whose_class_adds_a_method_stays_a_handle_whose_method_works(session) -> None:
    completion = """\
        from typing import NamedTuple
        class Plain(NamedTuple):
            x: int
            y: int = 0
        class Point(NamedTuple):
            x: int
            y: int
            def norm1(self):
                return abs(self.x) + abs(self.y)
        def f(kind):
            return Plain(1) if kind == "plain" else Point(3, -4)
        """
    test = """\
        def check(candidate):
            plain = candidate("plain")
            assert plain == (1, 0) and repr(plain) == "Plain(x=1, y=0)" and plain.y == 0
            point = candidate("point")
            assert point.norm1() == 7 and point.x == 3 and list(point) == [3, -4]
        """
    passes(run(session, completion, test))


def test_a_generator_that_raises_yields_its_items_then_raises_the_same_error(session) -> None:
    completion = """\
        def f():
            yield 1
            yield 2
            raise ValueError("out of items")
        """
    test = """\
        def check(candidate):
            seen = []
            try:
                for item in candidate():
                    seen.append(item)
            except ValueError as exc:
                assert str(exc) == "out of items"
            else:
                raise AssertionError("no ValueError")
            assert seen == [1, 2]
        """
    passes(run(session, completion, test))


def test_a_defaultdict_with_the_solutions_own_factory_asks_it_for_missing_keys(session) -> None:
    completion = """\
        import collections
        def f():
            return collections.defaultdict(lambda: "made by the solution", {"a": "b"})
        """
    test = """\
        def check(candidate):
            d = candidate()
            assert d == {"a": "b"} and d["new"] == "made by the solution"
            assert d == {"a": "b", "new": "made by the solution"}
        """
    passes(run(session, completion, test))


# --- What stays behind as a handle ---------------------------------------------------------------


def test_a_match_objects_methods_and_truth_work_from_the_check(session) -> None:
    completion = """\
        import re
        def f(text):
            return re.search(r"(a)(b+)", text)
        """
    test = """\
        def check(candidate):
            m = candidate("xabbbc")
            assert m
            assert m.group(0) == "abbb" and m.group(2) == "bbb" and m[1] == "a"
            assert m.span() == (1, 5) and m.start() == 1 and m.groups() == ("a", "bbb")
            assert m.re.pattern == "(a)(b+)"
            assert repr(m) == "<re.Match object; span=(1, 5), match='abbb'>"
            assert m == m and m != "abbb" and m is not None
            assert candidate("none here") is None
            assert not candidate("none here")
        """
    passes(run(session, completion, test))


def test_finditer_arrives_as_an_iterator_of_matches(session) -> None:
    completion = """\
        import re
        def f(text):
            return re.finditer(r"\\d+", text)
        """
    test = """\
        def check(candidate):
            assert [m.group() for m in candidate("a1b22c333")] == ["1", "22", "333"]
        """
    passes(run(session, completion, test))


def test_an_object_of_the_solutions_class_answers_attribute_reads_and_method_calls(
    session,
) -> None:
    completion = """\
        class Stack:
            def __init__(self, *items):
                self.items = list(items)
            def push(self, item):
                self.items.append(item)
                return self
            def __len__(self):
                return len(self.items)
            def __iter__(self):
                return iter(self.items)
            def __getitem__(self, at):
                return self.items[at]
        def f(*items):
            return Stack(*items)
        """
    test = """\
        def check(candidate):
            s = candidate(1, 2)
            assert s.items == [1, 2] and len(s) == 2 and list(s) == [1, 2] and s[-1] == 2
            assert 2 in s and 5 not in s
            assert s.push(3) is s and s.items == [1, 2, 3]
            s.items = [9]
            assert list(s) == [9]
            # The completion's class, which the test names without defining it.
            assert len(Stack(1, 2, 3)) == 3
        """
    passes(run(session, completion, test))


def test_a_handles_methods_run_in_the_solutions_sandbox_not_the_checks(session) -> None:
    completion = """\
        import os
        open("/tmp/made-by-the-solution", "w").close()
        class Probe:
            def sees_the_mark(self):
                return os.path.exists("/tmp/made-by-the-solution")
        def f():
            return Probe()
        """
    test = """\
        import os
        def check(candidate):
            assert candidate().sees_the_mark() is True
            assert not os.path.exists("/tmp/made-by-the-solution")
        """
    passes(run(session, completion, test))


# --- The check's free names ----------------------------------------------------------------------


def test_a_check_using_the_completions_import_math_passes(session) -> None:
    completion = """\
        import math
        def f(r):
            return math.pi * r * r
        """
    test = """\
        def check(candidate):
            assert math.isclose(candidate(2), 4 * math.pi)
        """
    passes(run(session, completion, test))


def test_the_completions_imports_constants_and_helpers_are_the_checks_free_names(session) -> None:
    completion = """\
        import sys
        import os.path
        from math import sqrt
        from collections import Counter
        LIMIT = {"top": (1, 2)}
        def helper(x):
            return x * 10
        class Box:
            def __init__(self, v):
                self.v = v
        def f(x):
            return sys.getsizeof(x)
        """
    test = """\
        def check(candidate):
            assert candidate((1, 2)) == sys.getsizeof((1, 2))
            assert os.path.join("a", "b") == "a/b"
            assert sqrt(16) == 4.0 and Counter("aab") == {"a": 2, "b": 1}
            assert LIMIT == {"top": (1, 2)}
            assert helper(4) == 40 and Box(3).v == 3
        """
    passes(run(session, completion, test))


def test_a_test_that_names_the_entry_point_before_defining_check_reaches_the_solution(
    session,
) -> None:
    # Sanitized MBPP's Mbpp/56: the entry point is itself called `check`.
    completion = """\
        def check(n):
            return n + 1
        """
    test = """\
        _entry = check


        def check(candidate):
            assert _entry(1) == 2
        """
    passes(run(session, completion, test, prompt="", entry="check"))


# --- A hostile solution ------------------------------------------------------------------------

EQ_ALWAYS = """\
    class Liar:
        def __eq__(self, other):
            return True
        def __ne__(self, other):
            return False
        def __lt__(self, other):
            return True
        def __bool__(self):
            return True
        def __hash__(self):
            return 0
    def f(x):
        return Liar()
    """


@pytest.mark.parametrize(
    "assertion",
    [
        "candidate(1) == 2",
        "not (candidate(1) != 2)",
        "candidate(1) in [2]",
        "[candidate(1)] == [2]",
        "{candidate(1): 1}",
        "candidate(1) < 2",
        "candidate(1)",
    ],
)
def test_an_object_that_says_it_equals_everything_cannot_make_the_check_pass(
    session, assertion: str
) -> None:
    result = run(session, EQ_ALWAYS, f"def check(candidate):\n    assert {assertion}\n")
    fails_through_the_boundary(result, "a Liar returned by the solution", "refused")


# Found by an outside attack: an operator forwarded to the solution hands it the check's operand
# (the expected value), and its code answers what makes the assertion hold.
OPERAND_ORACLE = """\
    class Z:
        def __sub__(self, other):
            return 0.0
        __rsub__ = __truediv__ = __rtruediv__ = __pow__ = __rmul__ = __mul__ = __sub__
        def __add__(self, other):
            return other
        @classmethod
        def __instancecheck__(cls, value):
            return True
    def f(numbers):
        return Z()
    """


@pytest.mark.parametrize(
    "assertion",
    [
        "abs(candidate([1.0, 2.0, 3.0]) - 2.0 / 3.0) < 1e-6",
        "abs(2.0 / 3.0 - candidate([1.0])) < 1e-6",
        "candidate([2]) / 3.5 == 0.0",
        "round(candidate([2]) - 0.333, 6) == 0",
        "candidate([1]) + 7 == 7",
        "sum(c * 1.5 ** i for i, c in enumerate([1, 2])) == 0 or candidate([1]) ** 2 == 0",
        "isinstance(4, candidate([1]))",
    ],
)
def test_an_operator_on_a_solutions_object_never_shows_it_the_checks_operand(
    session, assertion: str
) -> None:
    result = run(
        session,
        OPERAND_ORACLE,
        f"def check(candidate):\n    assert {assertion}\n",
    )
    fails_through_the_boundary(result, "a Z returned by the solution", "refused")


def test_a_solution_that_lies_about_its_handles_cannot_make_them_equal_anything(session) -> None:
    # Its process is a fork of its runner (__main__): it claims its objects keep Python's
    # default ==; the check then compares them by identity.
    forged = EQ_ALWAYS + (
        "import __main__\n"
        "_real = __main__.Codec.handle\n"
        "def _claim(self, value, kind):\n"
        "    handle = _real(self, value, kind)\n"
        "    handle[2] = handle[3] = True\n"
        "    return handle\n"
        "__main__.Codec.handle = _claim\n"
    )
    for assertion in ("candidate(1) == 2", "candidate(1) in [2]", "candidate(1) == candidate(2)"):
        fails_plainly(run(session, forged, f"def check(candidate):\n    assert {assertion}\n"))


@pytest.mark.parametrize(
    "forged",
    [
        {"ok": {"ty": "posix._exit"}},
        {"ok": {"module": "os"}},
        {"ok": {"std": ["os", "_exit"]}},
        {"ok": {"ref": 0}},
        {"ok": {"h": [0, "function", True, True]}, "extra": {"mod": "os"}},
    ],
    ids=["a type by name", "a module", "a stdlib function", "a reference", "a handle"],
)
def test_a_forged_answer_cannot_hand_the_check_a_function_that_ends_it(session, forged) -> None:
    # If the check could be made to call os._exit(0), it would pass.
    completion = (
        "import __main__\n"
        f"__main__._Solution.answer = lambda self, request: {forged!r}\n"
        "def f(x):\n    return x\n"
    )
    test = "def check(candidate):\n    candidate(1)(0)\n    raise AssertionError('not ended')\n"
    result = run(session, completion, test)
    assert not result.passed and result.outcome is Outcome.FAILED, describe(result)


@pytest.mark.parametrize(
    "binding",
    [None, ["from", "os"], ["from", "posix"], ["module", "os"], ["module", "posix"]],
    ids=["honestly", "from os", "from posix", "module os", "module posix"],
)
def test_a_solution_cannot_bind_a_free_name_of_the_check_to_a_function_that_ends_it(
    session, binding
) -> None:
    completion = "from os import _exit as helper\ndef f(x):\n    return x - 1\n"
    if binding is not None:
        completion += (
            "import __main__\n"
            f"__main__._Solution._binding = lambda self, name, value: {binding!r}\n"
        )
    # helper(0) as os._exit(0) in the check's process would pass the run.
    test = "def check(candidate):\n    helper(0)\n    raise AssertionError('not ended')\n"
    result = run(session, completion, test)
    assert result.outcome is Outcome.FAILED, describe(result)


def test_a_completion_that_patches_math_does_not_change_the_checks_math(session) -> None:
    completion = """\
        import math
        math.isclose = lambda *args, **kwargs: True
        def f():
            return 3.0
        """
    result = run(
        session, completion, "def check(candidate):\n    assert math.isclose(candidate(), 2.0)\n"
    )
    fails_plainly(result)


def test_a_completion_cannot_replace_a_builtin_the_check_uses(session) -> None:
    completion = "abs = lambda x: 0\ndef f(x):\n    return x\n"
    result = run(
        session, completion, "def check(candidate):\n    assert abs(candidate(1) - 3) < 1e-9\n"
    )
    fails_plainly(result)


# --- Where the boundary still decides ----------------------------------------------------------


def test_a_lambda_passed_by_the_check_fails_the_run_with_the_boundary_reason(session) -> None:
    completion = "def f(g):\n    return g(2)\n"
    result = run(
        session, completion, "def check(candidate):\n    assert candidate(lambda v: v * 2) == 4\n"
    )
    fails_through_the_boundary(
        result, "a function passed by the check cannot cross to the solution"
    )


def test_an_answer_nested_too_deeply_fails_the_run_with_the_boundary_reason(session) -> None:
    completion = f"def f():\n    v = []\n    for _ in range({MAX_DEPTH + 50}):\n        v = [v]\n    return v\n"
    result = run(session, completion, "def check(candidate):\n    assert candidate()\n")
    fails_through_the_boundary(
        result, "a list returned by the solution cannot cross to the check", "nested more than"
    )


def test_a_failure_the_boundary_did_not_cause_is_a_plain_failure(session) -> None:
    completion = "import re\ndef f(text):\n    return re.search('b', text)\n"
    fails_plainly(run(session, completion, "def check(candidate):\n    assert candidate('aaa')\n"))


# --- How the analysis reads it -----------------------------------------------------------------


def runs_table(*rows: tuple[int, str, str, str]) -> list[dict]:
    return [
        {
            "run_id": number,
            "task_key": task,
            "solution_kind": kind,
            "solution_key": kind,
            "outcome": outcome,
            "reason": reason,
        }
        for number, (task, kind, outcome, reason) in enumerate(rows, start=1)
    ]


MATCH_REASON = "boundary: a re.Match returned by the solution cannot cross to the check: x"


def test_a_reference_failing_only_through_the_boundary_is_not_unsolvable_but_a_finding() -> None:
    analysis = analyse_runs(
        runs_table(
            (1, "reference", "failed", MATCH_REASON),
            (1, "reference", "failed", MATCH_REASON),
            (2, "reference", "failed", ""),
            (3, "reference", "failed", MATCH_REASON),
            (3, "reference", "failed", "AssertionError"),
        )
    )

    flagged = {(f.task_key, str(f.code)) for f in analysis.findings}
    assert flagged == {(2, "unsolvable"), (3, "unsolvable")}
    assert list(analysis.boundary) == [1]
    assert analysis.stats[1].reference_pass_rate == 0.0  # it was not rewarded either
    (three,) = [f for f in analysis.findings if f.task_key == 3]
    assert "1 of them failed through the sandbox boundary" in three.explanation
    (finding,) = boundary_findings(analysis, {1: "Mbpp/737"})
    assert finding["type"] == "re.Match" and finding["tasks"] == ["Mbpp/737"]
    assert (
        "Mbpp/737" in finding["explanation"] and "not flagged unsolvable" in finding["explanation"]
    )


def test_a_samples_failures_through_the_boundary_still_count_as_failures() -> None:
    analysis = analyse_runs(
        runs_table(
            (1, "reference", "passed", ""),
            (1, "sample", "failed", MATCH_REASON),
            (1, "sample", "passed", ""),
        )
    )
    assert analysis.stats[1].sample_pass_rate == 0.5
    assert analysis.boundary == {}


BOUNDARY_TASKS = [
    {
        "task_id": "boundary/lambda",
        "prompt": 'def apply(g, x):\n    """Apply g to x."""\n',
        "canonical_solution": "    return g(x)\n",
        "test": "def check(candidate):\n    assert candidate(lambda v: v + 1, 1) == 2\n",
        "entry_point": "apply",
    },
    {
        "task_id": "boundary/point",
        "prompt": '"""Make a point."""\n',
        "canonical_solution": (
            "from dataclasses import dataclass\n\n@dataclass\nclass Point:\n    x: int\n\n"
            "def make(x):\n    return Point(x)\n"
        ),
        "test": "def check(candidate):\n    assert candidate(1) == Point(1)\n",
        "entry_point": "make",
    },
    {
        "task_id": "plain/unsolvable",
        "prompt": 'def add(a, b):\n    """Add."""\n',
        "canonical_solution": "    return a + b\n",
        "test": "def check(candidate):\n    assert candidate(1, 1) == 3\n",
        "entry_point": "add",
    },
]


@pytest.mark.django_db
def test_an_inspection_names_the_tasks_the_boundary_failed_instead_of_flagging_them(
    import_taskset, inspect_now, lead_client
) -> None:
    inspection = inspect_now(import_taskset("boundary", BOUNDARY_TASKS, []))

    flags = {(flag.task.task_id, flag.code) for flag in inspection.flags.select_related("task")}
    assert flags == {("plain/unsolvable", "unsolvable")}
    kinds = {f["type"]: f for f in inspection.findings if f["kind"] == "boundary"}
    assert set(kinds) == {"function", "Point"}
    assert kinds["function"]["tasks"] == ["boundary/lambda"]
    assert kinds["Point"]["tasks"] == ["boundary/point"]
    assert "passed by the check cannot cross" in kinds["function"]["explanation"]
    page = lead_client.get("/tasksets/boundary/").content.decode()
    assert "boundary: Point" in page and "boundary/point" in page
