"""The answer verifier, as it runs inside a sandbox: sent there as text (workers/sandbox/verifier.py
appends one call, `main("<base64 of the batch>")`), it imports nothing of the project, only the
standard library and math_verify (from the folder in $VERIFIER_LIB, bound read-only).

How a batch runs: this process (the parent) imports math_verify once, then forks a child that
verifies the items in order and writes one JSON line per verdict to a pipe. The parent copies
every line to stdout as it comes, so a verdict written is a verdict kept whatever happens next.
An item that gives no verdict within its hard limit (per-answer seconds + 1) has its child
killed; an item whose child dies (a crash, the memory limit) is that item's fault. Either way
the parent names the item ("timeout", "error") and forks a fresh child for the rest: one
sandbox start per batch, and a fork (a few ms) per bad item. A child also exits after any item
that ended in an exception (a time-out, MemoryError): sympy's caches may be half-written.

Untrusted text is never evaluated: the rules below are string scanners (linear, no regex that
backtracks), numbers are read with `fractions.Fraction`, and math_verify sees only an answer
already extracted (at most MAX_PARSE characters, no power towers, no huge exponents or
factorials), through its LaTeX parser (ANTLR, no eval). The `lenient` rule alone hands the whole
text to math_verify's default `parse`, whose expression fallback calls sympy's parse_expr (an
eval) only on runs of digits, operators and spaces, which name nothing.

Output lines: {"ready": s} after the imports, then {"i", "s", "e", "c", "ok", "t", "d"} per item
(index, status, extracted, canonical, correct, seconds, detail), then {"done": n}.
"""

from __future__ import annotations

import base64
import json
import os
import re
import select
import signal
import sys
import time
import unicodedata
from fractions import Fraction

MAX_FIELD = 1000  # characters of extracted/canonical kept in a verdict
MAX_DETAIL = 300
MAX_PARSE = 1000  # longest answer handed to math_verify
MAX_DEPTH = 10  # deepest nesting handed to math_verify (ANTLR slows down sharply past 12)
MAX_EXPONENT_DIGITS = 4  # 2^{9999} is parsed; 2^{10000} is not
MAX_FACTORIAL_DIGITS = 3  # 999! is parsed; 1000! is not
MAX_NUMBER_DIGITS = 400
MAX_BOXES = 50
_BIG_EXPONENT = re.compile(r"\d{%d,}" % (MAX_EXPONENT_DIGITS + 1))  # noqa: UP031
_BIG_FACTORIAL = re.compile(r"\d{%d,}\s*!" % (MAX_FACTORIAL_DIGITS + 1))  # noqa: UP031
_BIG_BINOMIAL = re.compile(r"\\(?:binom|choose)\s*\{?\s*\d{%d,}" % (MAX_FACTORIAL_DIGITS + 1))  # noqa: UP031
MAX_ANSWER_IS = 300  # characters taken after "the answer is"
MAX_ANSWER = 10_000  # a longer extracted answer is no final answer (and is not read further)
TOLERANCE = Fraction(1, 10**6)  # relative, for numbers
RULES = ("auto", "boxed", "gsm8k", "answer_is", "last_number", "lenient", "contains")
MAX_CONTAINS = 2000  # candidates the contains rule compares
TYPES = ("number", "expression", "choice", "text")


class Refused(Exception):
    """An answer this verifier will not hand to a symbolic parser (the reason is the message)."""


class Timeout(Exception):
    pass


class LabelError(Exception):
    """The label itself cannot be read as its type."""


# --- Extraction --------------------------------------------------------------------------------

_BOX = re.compile(r"\\(?:boxed|fbox)\s*\{")
_BRACE = re.compile(r"\\.|[{}]", re.DOTALL)
MAX_BOX_SPAN = 20_000  # a box still open this far after it began is not an answer


def boxed_contents(text: str) -> list[str]:
    """The content of every outermost \\boxed{...} / \\fbox{...} with balanced braces (\\{ and \\}
    are literal braces, not groups). A box that does not close within MAX_BOX_SPAN characters is
    not an answer, and neither is anything inside that span (it is inside the open box)."""
    found: list[str] = []
    pos = opened = 0
    while opened <= MAX_BOXES:
        m = _BOX.search(text, pos)
        if m is None:
            break
        opened += 1
        depth, end = 1, -1
        for token in _BRACE.finditer(text, m.end(), m.end() + MAX_BOX_SPAN):
            c = token.group(0)
            if c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0:
                    end = token.start()
                    break
        if end < 0:
            pos = m.end() + MAX_BOX_SPAN
            continue
        found.append(text[m.end() : end])
        pos = end + 1  # boxes inside this one are part of its content
    return found


def after_hashes(text: str) -> str | None:
    i = text.rfind("####")
    if i < 0:
        return None
    line = text[i + 4 :].split("\n", 1)[0]
    return line.strip()


_ANSWER_IS = re.compile(
    r"(?i)(?:the\s+final\s+answer\s+is|the\s+answer(?:\s*\([^()\n]{0,40}\))?\s+is"
    r"|final\s+answer\s*:)\s*:?"
)
_SENTENCE_END = re.compile(r"\.(?:\s|$)|\n")


def after_answer_is(text: str) -> str | None:
    last = None
    for m in _ANSWER_IS.finditer(text):
        last = m
    if last is None:
        return None
    rest = text[last.end() : last.end() + MAX_ANSWER_IS]
    if not rest.split("\n", 1)[0].strip():
        # "The answer is:" with the answer on a line of its own (a display's "$$" skipped).
        lines = [line.strip() for line in rest.split("\n")[1:]]
        rest = next((line for line in lines if line and line not in ("$$", "\\[", "\\]")), "")
    end = _SENTENCE_END.search(rest)
    return (rest[: end.start()] if end else rest).strip()


_NUMBER = re.compile(
    r"(?<![\w.])-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:/\d+)?(?![\w])|(?<![\w.])-?\.\d+"
)


MAX_NUMBER_SCAN = 1_000_000  # characters from the end looked at for the last number


# Words that make a number in a sentence something else than the answer: a negation ("not 18",
# "can't be 18"), a hedge ("maybe 18"), a comparison ("at least 18", "more than 18"), an
# alternative ("17 or 18", "17 versus 18"). "n't" is matched on its own (below).
DOUBT_WORDS = frozenset(
    """not no never none nope nor neither either or wrong incorrect false untrue maybe perhaps
    probably possibly possible likely unlikely might could guess unsure uncertain suppose
    supposedly roughly approximately approx about around nearly almost circa estimate estimated
    least most more less fewer than over under above below exceed exceeds exceeding beyond
    versus vs between if unless unclear doubt doubtful wait""".split()
)
_WORD = re.compile(r"(?<![\\A-Za-z])[A-Za-z]+(?:['’][A-Za-z]+)?")  # a word, not a LaTeX command
_BOUNDARY = re.compile(r"[.!?](?=\s|$)|[?!\n]")
# What may stand between two numbers that are candidates side by side: "17 / 18", "17 (or 18)",
# "17, 18", "17-18", "1 17" (no operator, no "=", no words but alternatives).
_SIDE_BY_SIDE = re.compile(
    r"^(?:[\s,;:/|&()\[\]\-–—]|\b(?:or|and|nor|to|vs|versus|maybe|perhaps|then)\b|\.(?!\d))*$",
    re.IGNORECASE,
)
SENTENCE_SPAN = 500  # characters before the last number looked at for its sentence


def doubt_words(s: str, allowed: frozenset = frozenset()) -> list[str]:
    """The words of `s` that negate, hedge or compare (those in `allowed` excepted)."""
    found = []
    for m in _WORD.finditer(s):
        word = m.group(0).casefold()
        if (word in DOUBT_WORDS or word.endswith(("n't", "n’t"))) and word not in allowed:
            found.append(word)
    return found


def last_number(text: str) -> tuple[str, str] | None:
    """The last number of the text and "", or its sentence and why it is no answer (the sentence
    negates, hedges or compares it, asks a question, or puts another number beside it). Looked
    for in a window from the end that grows until a number that does not touch the window's
    edge is found, up to MAX_NUMBER_SCAN characters."""
    size = 4096
    floor = max(0, len(text) - MAX_NUMBER_SCAN)
    while True:
        start = max(floor, len(text) - size)
        window = text[start:]
        last = None
        for m in _NUMBER.finditer(window):
            last = m
        if last is not None and (start == floor or last.start() > 128):
            return _in_its_sentence(window, last)
        if start == floor:
            return None
        size *= 8


def _in_its_sentence(window: str, last: re.Match) -> tuple[str, str]:
    lo = max(0, last.start() - SENTENCE_SPAN)
    ends = [m.end() for m in _BOUNDARY.finditer(window, lo, last.start())]
    before = window[ends[-1] if ends else lo : last.start()]
    tail = window[last.end() : last.end() + MAX_ANSWER_IS]
    end = _BOUNDARY.search(tail)
    after = tail[: end.end()] if end else tail
    sentence = (before + last.group(0) + after).strip()
    why = ""
    words = doubt_words(before + " " + after)
    if words:
        why = f"the last number's sentence says {words[0]!r}"
    elif "?" in after:
        why = "the last number is asked, not answered"
    else:
        previous = None
        for m in _NUMBER.finditer(before):
            previous = m
        if previous is not None and _SIDE_BY_SIDE.match(before[previous.end() :]):
            why = "the last number is one of several side by side"
    if not why:
        return last.group(0), ""
    return _clip(sentence) or last.group(0), why


def blank(box: str) -> bool:
    """A box that shows nothing: empty once unwrapped, or stray punctuation ("\\boxed{.}")."""
    return not _SPACING.sub(" ", unwrap(box)).strip(" .,;:")


def extract(text: str, rule: str) -> tuple[str | None, list[str], str, str]:
    """(answer, every different boxed answer when there are several, the rule that found it,
    why the answer is none though it was found: the last number's sentence doubts it)."""
    if rule in ("auto", "boxed"):
        boxes = boxed_contents(text)
        if boxes:
            filled = [b for b in boxes if not blank(b)]
            if not filled:
                return "", [], "boxed", ""
            distinct = list(dict.fromkeys(b.strip() for b in filled))
            return distinct[-1], distinct, "boxed", ""
        if rule == "boxed":
            return None, [], "boxed", ""
    if rule in ("auto", "gsm8k"):
        found = after_hashes(text)
        if found is not None or rule == "gsm8k":
            return found, [], "gsm8k", ""
    if rule in ("auto", "answer_is"):
        found = after_answer_is(text)
        if found is not None or rule == "answer_is":
            return found, [], "answer_is", ""
    found = last_number(text)
    if found is None:
        return None, [], "last_number", ""
    return found[0], [], "last_number", found[1]


_RULE_NAMES = {"boxed": "the boxed answer", "gsm8k": 'the answer after "####"',
               "answer_is": 'the answer after "the answer is"'}  # fmt: skip


def other_commitments(text: str, how: str) -> list[tuple[str, str]]:
    """Under `auto`, the final answers the text commits to by the rules after `how` (the one
    that was taken): "####" and "the answer is" after a box, "the answer is" after "####".
    An "answer is" that holds a box is that box, not another commitment."""
    found = []
    order = ("boxed", "gsm8k", "answer_is")
    if how not in order:
        return found
    for name in order[order.index(how) + 1 :]:
        answer = after_hashes(text) if name == "gsm8k" else after_answer_is(text)
        if answer is None or not unwrap(answer) or _BOX.search(answer):
            continue
        found.append((name, answer))
    return found


# --- Normalising an answer ---------------------------------------------------------------------

# Commands that only style what they hold: their content is the answer ("\\mathbf{18}" is 18).
_TEXT_CMD = re.compile(
    r"\\(?:text|textbf|textit|textrm|textsf|texttt|textnormal|textup|textmd|emph|mathrm"
    r"|mathbf|mathit|mathsf|mathtt|mathnormal|boldsymbol|bm|mbox|hbox|operatorname)\s*\{([^{}]*)\}"
)
# Commands that only put space between what stands either side ("1\\ 17" is two numbers).
_SPACING = re.compile(
    r"\\[,;:!> ]|\\(?:qquad|quad|enspace|thinspace|medspace|thickspace|negthinspace"
    r"|negmedspace|negthickspace|space|nobreakspace)(?![A-Za-z])"
    r"|\\(?:hspace|mspace|hskip|kern|mkern)\*?\s*(?:\{[^{}]*\}|[-+\d.]+\s*[a-z]{2})|~|\{\s*\}"
)
_INVISIBLE = re.compile(r"\\(?:[hv]?phantom)\s*\{")
_DELIMS = (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]"))


def unwrap(answer: str) -> str:
    """The answer without the dressing around it: math delimiters, an outer \\boxed, \\left and
    \\right, \\dfrac, trailing full stops."""
    s = answer.strip()
    for _ in range(4):
        before = s
        for left, right in _DELIMS:
            if len(s) >= len(left) + len(right) and s.startswith(left) and s.endswith(right):
                s = s[len(left) : len(s) - len(right)].strip()
        boxes = boxed_contents(s) if s.startswith(("\\boxed", "\\fbox")) else []
        if len(boxes) == 1 and s.rstrip().endswith("}"):
            s = boxes[0].strip()
        s = s.rstrip(" .").strip()
        if s == before:
            break
    s = s.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac").replace("−", "-")
    s = s.replace("\\left", "").replace("\\right", "").replace("\\displaystyle", "")
    return _drop_invisible(s).strip()


def _drop_invisible(s: str) -> str:
    """\\phantom{...} (and \\hphantom, \\vphantom) shows nothing of its content: a space.
    Linear: an unclosed one ends the scan."""
    if "phantom" not in s:
        return s
    out, pos = [], 0
    while True:
        m = _INVISIBLE.search(s, pos)
        if m is None:
            break
        depth, end = 1, -1
        for token in _BRACE.finditer(s, m.end()):
            c = token.group(0)
            if c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0:
                    end = token.end()
                    break
        if end < 0:
            break
        out.append(s[pos : m.start()] + " ")
        pos = end
    out.append(s[pos:])
    return "".join(out)


def _strip_variable(s: str) -> str:
    # "x = 18" answers 18 (a label with an "=" of its own keeps it).
    m = re.match(r"^[A-Za-z](?:_\{?\w+\}?)?\s*=\s*(?=\S)", s)
    return s[m.end() :] if m else s


# --- Numbers -----------------------------------------------------------------------------------

_NUM_TOKEN = re.compile(
    r"-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d*)?(?:[eE][+-]?\d{1,3})?|-?\.\d+(?:[eE][+-]?\d{1,3})?"
)
_LATEX_FRAC = re.compile(r"^(-?)\\frac\s*\{\s*(-?\d+)\s*\}\s*\{\s*(-?\d+)\s*\}$")
_PLAIN_FRAC = re.compile(r"^(-?\d+)\s*/\s*(-?\d+)$")
_CURRENCY = re.compile(r"\\\$|\$|\\%|%|\\euro|€|£|¥|\^\s*\{?\s*\\circ\s*\}?|°|\\degree")
_THOUSANDS_SEP = re.compile(r"(?<=\d)(?:\{,\}|\\,)(?=\d{3})")
_UNIT_WORDS = re.compile(r"^[A-Za-z][A-Za-z .'/-]*$")
# A unit is a short phrase of words that are not these: after a number they make a sentence of
# it ("18 is wrong", "18 apples maybe"), or something else than that number ("18 or more").
NOT_UNIT_WORDS = DOUBT_WORDS | frozenset(
    """is are was were be been being am isn it its this that these those which what who i we
    you he she they me my our answer answers and plus minus to the so but yet because though
    although however actually then hmm lol jk kidding sure right correct true yes ok okay
    think believe hope final total""".split()
)
UNIT_CONNECTORS = frozenset({"per", "of", "a", "an"})  # "miles per hour", "cups of flour"
MAX_UNIT_WORDS = 3  # "square feet", "miles per hour", "km/h": a unit, not a sentence
_SEPARATED = re.compile(r"\d\s*(?:,|;|\bor\b|\band\b)\s*-?\.?\d|\d\s+-?\d")
# Numbers side by side with no operator between: math_verify reads "1\ 17" and "1 (17)" as
# 1 + 17 (a mixed number); a reader sees two numbers.
_JUXTAPOSED = re.compile(
    r"\d\s+\.?\d"
    r"|\d\s*[(\[]\s*[+-]?\s*(?:\d+(?:\.\d+)?|\.\d+)\s*[)\]]"
    r"|[(\[]\s*[+-]?\s*(?:\d+(?:\.\d+)?|\.\d+)\s*[)\]]\s*\.?\d"
)


class Candidates(Exception):
    """Several numbers where one was asked for."""


class Hedged(Exception):
    """A number whose words doubt it, or make a sentence of it (the reason is the message)."""


def _styled(s: str) -> str:
    """Styling commands replaced by their content, inner ones first (at most four levels)."""
    for _ in range(4):
        before = s
        s = _TEXT_CMD.sub(lambda m: " " + m.group(1) + " ", s)
        if s == before:
            break
    return s


def juxtaposed(s: str) -> bool:
    """Two numbers side by side, with nothing but space (or a \\, \\quad, \\phantom) between,
    or one of them in brackets ("1 (17)", "17 (+1)")."""
    t = _SPACING.sub(" ", _styled(_THOUSANDS_SEP.sub(",", s)))
    return _JUXTAPOSED.search(t) is not None


def not_a_unit(words: str) -> str:
    """Why `words` after a number are not its unit ("" when they are)."""
    if "?" in words or "!" in words:
        return "a question or exclamation mark after the number"
    if not _UNIT_WORDS.match(words):
        return "not a unit"
    found = [w.casefold() for w in _WORD.findall(words)]
    for word in found:
        if word in NOT_UNIT_WORDS or word.endswith(("n't", "n’t")):
            return f"{word!r} after the number: not a unit"
    if len([w for w in found if w not in UNIT_CONNECTORS]) > MAX_UNIT_WORDS:
        return f"more than {MAX_UNIT_WORDS} words after the number: a sentence, not a unit"
    return ""


def _places(digits: str) -> int | None:
    """The decimal place of a decimal's last digit (2 for 0.25, -2 for 1.5e3); None for an
    integer (written without a decimal point), which is exact."""
    mantissa, _, exponent = digits.lower().partition("e")
    if "." not in mantissa:
        return None
    return len(mantissa.split(".", 1)[1]) - int(exponent or 0)


def read_number(answer: str) -> Fraction | None:
    found = read_number_places(answer)
    return None if found is None else found[0]


def read_number_places(answer: str) -> tuple[Fraction, int | None] | None:
    """The answer as an exact number and, for a decimal, the place of its last digit (None for
    integers and fractions, which compare exactly), or None if it is not a plain number.
    Thousands separators ("1,000", "1{,}000", "1\\,000") are dropped; "$", "\\$", "%" and "°"
    are dropped (50% reads as 50, not 0.5: labels store the number the question asks for); a
    unit after the number ("18 apples", "18 \\text{ dollars}": at most MAX_UNIT_WORDS words, none
    of NOT_UNIT_WORDS) is dropped. Raises Candidates for "1, 2 or 3" and for numbers side by
    side ("1\\ 17"), Hedged for a number with doubting words or a sentence around it."""
    s = _strip_variable(unwrap(answer))
    s = _THOUSANDS_SEP.sub(",", s)
    s = _styled(s)
    if juxtaposed(s):
        raise Candidates(s)
    s = _SPACING.sub(" ", s)
    s = _CURRENCY.sub(" ", s).strip().rstrip(".").strip()
    if not s:
        return None
    m = _LATEX_FRAC.match(s) or _PLAIN_FRAC.match(s)
    if m:
        groups = m.groups()
        sign = -1 if len(groups) == 3 and groups[0] == "-" else 1
        p, q = int(groups[-2]), int(groups[-1])
        if q == 0 or len(groups[-2]) > MAX_NUMBER_DIGITS or len(groups[-1]) > MAX_NUMBER_DIGITS:
            return None
        return sign * Fraction(p, q), None
    tokens = list(_NUM_TOKEN.finditer(s))
    if not tokens:
        return None
    if len(tokens) > 1:
        if _SEPARATED.search(s) and not re.search(r"[\\^*+=(){}\[\]]", s):
            raise Candidates(s)
        return None
    token = tokens[0]
    before, after = s[: token.start()].strip(), s[token.end() :].strip()
    rest = (before + " " + after).strip()
    if rest:
        words = doubt_words(rest)
        if words:
            raise Hedged(f"{words[0]!r} beside the number")
        if "?" in rest:
            raise Hedged("a question mark beside the number")
        if not _UNIT_WORDS.match(rest):
            return None  # "18!", "18\\pi": not a plain number (the symbolic parser may say)
        if before:
            return None  # words before the number: not a plain number
        why = not_a_unit(after)
        if why:
            raise Hedged(why)
    digits = token.group(0).replace(",", "")
    if len(digits) > MAX_NUMBER_DIGITS:
        return None
    if digits.endswith("."):
        digits = digits[:-1]
    try:
        return Fraction(digits), _places(digits)
    except (ValueError, ZeroDivisionError):
        return None


def number_canonical(value: Fraction) -> str:
    if max(value.numerator.bit_length(), value.denominator.bit_length()) > 10_000:
        return ""  # past 3,000 digits: no string worth grouping by (and str() would refuse)
    if value.denominator == 1:
        return str(value.numerator)
    q = value.denominator
    for p in (2, 5):
        while q % p == 0:
            q //= p
    if q == 1:
        text = f"{float(value):.10g}"
        return text if "e" in text or abs(value) < 10**10 else str(value)
    return f"{value.numerator}/{value.denominator}"


def numbers_equal(
    a: Fraction, b: Fraction, a_places: int | None = None, b_places: int | None = None
) -> bool:
    """Integers and fractions compare exactly (1000001 is not 1000000). A decimal (`places`: the
    place of its last digit) matches a value it rounds to: within half a unit of its last digit,
    and within the relative TOLERANCE (0.3333333333 is 1/3; 0.333 is not; 1000000.5 is not
    1000000)."""
    if a == b:
        return True
    given = [p for p in (a_places, b_places) if p is not None]
    if not given:
        return False
    places = max(-MAX_NUMBER_DIGITS, min(min(given), MAX_NUMBER_DIGITS))
    gap = abs(a - b)
    if gap > Fraction(1, 2) * Fraction(10) ** -places:
        return False
    return gap <= TOLERANCE * max(abs(a), abs(b))


_DECIMAL_DIGITS = re.compile(r"\d\.(\d+)")


def float_places(value, text: str) -> int | None:
    """For a value the symbolic parser made: None if exact (a sympy Rational), else the place of
    the last digit of the longest decimal written in `text` (0 if none)."""
    if not getattr(value, "is_Float", False):
        return None
    return max((len(m.group(1)) for m in _DECIMAL_DIGITS.finditer(text)), default=0)


# --- Choices and text --------------------------------------------------------------------------

_CHOICE = re.compile(
    r"^(?:(?:option|choice|answer)\s*)?[(\[]?([A-E])[)\]]?(?=$|[\s.:)\]])", re.IGNORECASE
)
_MORE_CHOICES = re.compile(r"(?:\bor\b|,|/|\band\b|&)\s*(?:option\s*)?[(\[]?[A-E][)\]]?(?:\W|$)")


def read_choice(answer: str) -> str | None:
    s = _TEXT_CMD.sub(lambda m: m.group(1), unwrap(answer)).strip()
    m = _CHOICE.match(s)
    if m is None:
        return None
    letter = m.group(1)
    if letter.islower() and len(s) != 1 and not s.lower().startswith(("option", "choice")):
        return None  # "a dog" is not option A
    if _MORE_CHOICES.search(s[m.end() :]):
        raise Candidates(s)
    return letter.upper()


_ARTICLES = re.compile(r"\b(?:a|an|the)\b")


def text_canonical(answer: str) -> str:
    s = _TEXT_CMD.sub(lambda m: m.group(1), unwrap(answer))
    s = unicodedata.normalize("NFKC", s).casefold()
    s = "".join(" " if unicodedata.category(c)[0] in "PSZ" else c for c in s)
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


# --- Expressions (math_verify) -----------------------------------------------------------------


def guard(answer: str) -> None:
    """Refuse what would make a symbolic parser or sympy work without end."""
    if len(answer) > MAX_PARSE:
        raise Refused(f"answer too long to parse symbolically ({len(answer)} characters)")
    depth = deepest = 0
    for c in answer:
        if c in "{([":
            depth += 1
            deepest = max(deepest, depth)
        elif c in "})]":
            depth -= 1
    if deepest > MAX_DEPTH:
        raise Refused(f"nested {deepest} levels deep (more than {MAX_DEPTH})")
    s = answer.replace("**", "^")
    i = s.find("^")
    while i >= 0:
        j = i + 1
        while j < len(s) and s[j] == " ":
            j += 1
        if j < len(s) and s[j] == "{":
            depth, k = 0, j
            while k < len(s):
                if s[k] == "{":
                    depth += 1
                elif s[k] == "}":
                    depth -= 1
                    if depth == 0:
                        break
                k += 1
            exponent = s[j + 1 : k]
        else:
            m = re.match(r"\(?-?[\w.]*", s[j:])
            exponent = m.group(0) if m else ""
            k = j + len(exponent)
        if "^" in exponent or s[k + 1 : k + 3].lstrip(" }").startswith("^"):
            raise Refused("a tower of powers")
        if _BIG_EXPONENT.search(exponent):
            raise Refused("an exponent too large to evaluate")
        i = s.find("^", i + 1)
    if _BIG_FACTORIAL.search(s) or "!!" in s:
        raise Refused("a factorial too large to evaluate")
    if _BIG_BINOMIAL.search(s):
        raise Refused("a binomial too large to evaluate")


class Symbolic:
    """math_verify, imported once in the parent, with its own SIGALRM time-out."""

    def __init__(self, seconds: float) -> None:
        import logging

        logging.disable(logging.CRITICAL)  # math_verify logs every time-out; stderr stays quiet
        from math_verify import LatexExtractionConfig, parse, verify  # noqa: PLC0415

        self.parse_, self.verify_ = parse, verify
        self.latex = [LatexExtractionConfig()]
        self.seconds = max(1, int(seconds))

    def parse(self, answer: str) -> list:
        from math_verify.errors import TimeoutException  # noqa: PLC0415

        guard(answer)
        try:
            found = self.parse_(
                "\\boxed{" + answer + "}",
                self.latex,
                parsing_timeout=self.seconds,
                raise_on_error=True,
            )
        except TimeoutException:
            raise Timeout(f"parse timed out after {self.seconds} s") from None
        except (Timeout, MemoryError, RecursionError):
            raise
        except Exception as exc:  # noqa: BLE001 (any parse failure is "cannot parse")
            raise Refused(f"cannot parse: {type(exc).__name__}") from None
        if not found or isinstance(found[0], str):
            raise Refused("cannot parse")
        return found

    def equal(self, gold: list, target: list) -> bool:
        from math_verify.errors import TimeoutException  # noqa: PLC0415

        try:
            return bool(
                self.verify_(gold, target, timeout_seconds=self.seconds, raise_on_error=True)
            )
        except TimeoutException:
            raise Timeout(f"comparison timed out after {self.seconds} s") from None
        except (Timeout, MemoryError, RecursionError):
            raise
        except Exception:  # noqa: BLE001 (sympy cannot compare them: not equal)
            return False

    def canonical(self, parsed: list) -> str:
        value = parsed[0]
        try:
            if getattr(value, "is_Rational", False):
                return number_canonical(Fraction(int(value.p), int(value.q)))
            if getattr(value, "is_Float", False):
                return number_canonical(Fraction(str(value)))
        except (ValueError, ZeroDivisionError):
            pass
        return str(value)[:MAX_FIELD]


# --- Types and the verdict ---------------------------------------------------------------------


def infer_type(label: str) -> str:
    s = unwrap(label)
    try:
        if read_choice(s) is not None and len(s) <= 10:
            return "choice"
    except Candidates:
        pass
    try:
        if read_number(s) is not None:
            return "number"
    except Candidates:
        return "expression"
    except Hedged:
        return "text"
    if re.search(r"[\\^_{}=+*/<>\[\]()|\d]", s):
        return "expression"
    return "text"


_THOUSANDS = re.compile(r"\d{3}(?!\d)")


def _list_like(s: str) -> bool:
    depth = 0
    for k, c in enumerate(s):
        if c in "{([":
            depth += 1
        elif c in "})]":
            depth -= 1
        elif c in ",;" and depth <= 0:
            if c == "," and k and s[k - 1].isdigit() and _THOUSANDS.match(s, k + 1):
                continue  # a thousands separator
            return True
    return bool(re.search(r"\bor\b|\band\b|\\pm|\\mp|±|\\lor|\\cup|\\\{", s))


class Reader:
    """One label read once, compared with any number of answers."""

    def __init__(self, label: str, answer_type: str, symbolic: Symbolic | None) -> None:
        self.symbolic = symbolic
        raw = unwrap(label)
        if not raw:
            raise LabelError("the label is empty")
        self.type = answer_type or infer_type(raw)
        if self.type not in TYPES:
            raise LabelError(f"unknown answer type {self.type!r}")
        self.list_like = _list_like(raw)
        self.has_equation = "=" in raw
        self.raw = raw
        # Words and marks the label has itself are no doubt in an answer ("no", "not prime").
        self.words = frozenset(w.casefold() for w in _WORD.findall(_styled(raw))) | LIST_WORDS
        self.places: int | None = None
        self.exact: Fraction | None = None
        try:
            if self.type == "number":
                found = read_number_places(raw)
                if found is None:
                    found = self._symbolic_number(raw)
                self.value, self.places = found
                self.canonical = number_canonical(self.value)
            elif self.type == "choice":
                letter = read_choice(raw)
                if letter is None:
                    raise LabelError("the label is not a choice letter A-E")
                self.value = self.canonical = letter
            elif self.type == "text":
                if broken_latex(raw):
                    raise LabelError(f"the label is broken LaTeX ({broken_latex(raw)})")
                self.value = self.canonical = text_canonical(raw)
                if not self.value:
                    raise LabelError("the label has no words")
            else:
                if symbolic is None:
                    raise LabelError("no symbolic verifier")
                self.value = symbolic.parse(raw)
                self.canonical = symbolic.canonical(self.value)
                self.exact = _as_fraction(self.value[0])
                self.places = float_places(self.value[0], raw)
        except Candidates:
            raise LabelError("the label is a list where one number was asked for") from None
        except Hedged as exc:
            raise LabelError(f"the label is not a plain number ({exc})") from None
        except Refused as exc:
            raise LabelError(f"the label cannot be parsed ({exc})") from None

    def _symbolic_number(self, s: str) -> tuple[Fraction, int | None]:
        if self.symbolic is None:
            raise LabelError("the label is not a number")
        parsed = self.symbolic.parse(s)
        value = _as_fraction(parsed[0])
        if value is None:
            raise LabelError("the label is not a number")
        return value, float_places(parsed[0], s)

    def doubt(self, s: str) -> str:
        """Why the answer doubts itself ("" if it does not): a question mark, or a word that
        negates, hedges or compares, that the label does not have."""
        if "?" in s and "?" not in self.raw:
            return "a question mark in the answer"
        words = doubt_words(_styled(s), self.words)
        return f"{words[0]!r} in the answer" if words else ""

    def compare(self, answer: str) -> tuple[bool, str, str]:
        """(correct, canonical, detail) for one extracted answer."""
        s = _THOUSANDS_SEP.sub(",", unwrap(answer))  # "1\\,000" is no list
        if not self.has_equation:
            s = _strip_variable(s)
        why = self.doubt(s)
        if why:
            return False, text_canonical(s)[:MAX_FIELD], f"hedged: {why}"
        if self.type == "choice":
            letter = read_choice(s)
            if letter is None:
                return False, text_canonical(s)[:MAX_FIELD], "not a choice letter"
            return letter == self.value, letter, ""
        if self.type == "text":
            canon = text_canonical(s)
            return canon == self.value, canon[:MAX_FIELD], ""
        if not self.list_like and _list_like(s):
            raise Candidates(s)
        if self.type == "number":
            try:
                found = read_number_places(s)
            except Hedged as exc:
                return False, text_canonical(s)[:MAX_FIELD], f"hedged: {exc}"
            # Words ("There are 20 books") are not a number: no parser makes them one; nor do
            # words in \text{} that are no unit ("2^4 \text{ is wrong}").
            if found is None and self.symbolic is not None and not _WORDS.search(s):
                why = _text_not_a_unit(s)
                if why:
                    return False, text_canonical(s)[:MAX_FIELD], f"hedged: {why}"
                parsed = self.symbolic.parse(s)
                value = _as_fraction(parsed[0])
                if value is not None:
                    found = value, float_places(parsed[0], s)
            if found is None:
                return False, text_canonical(s)[:MAX_FIELD], "not a number"
            value, places = found
            return (
                numbers_equal(value, self.value, places, self.places),
                number_canonical(value),
                "",
            )
        assert self.symbolic is not None
        if not self.list_like and juxtaposed(s):
            raise Candidates(s)
        try:
            found = read_number_places(s)  # a plain number needs no parser for its canonical form
        except (Candidates, Hedged):
            found = None  # a list, and the label is one too
        parsed = self.symbolic.parse(s)
        canon = number_canonical(found[0]) if found is not None else self.symbolic.canonical(parsed)
        value = _as_fraction(parsed[0])
        if value is not None and self.exact is not None:
            # Two numbers: exactly, or a decimal within its rounding (as for number labels).
            places = float_places(parsed[0], s)
            return numbers_equal(value, self.exact, places, self.places), canon, ""
        return self.symbolic.equal(self.value, parsed), canon, ""


_WORDS = re.compile(r"(?<![\\A-Za-z])[A-Za-z]{4,}")  # a word, not a LaTeX command
LIST_WORDS = frozenset({"or", "and", "nor", "either"})  # a list's: Candidates says so


def _text_not_a_unit(s: str) -> str:
    for m in _TEXT_CMD.finditer(s):
        words = m.group(1).strip()
        if words and re.search(r"[A-Za-z?!]", words):
            why = not_a_unit(words)
            if why:
                return why
    return ""


_EMPTY_ARGUMENT = re.compile(r"\\[A-Za-z]+\s*\{\s*\}")


def broken_latex(text: str) -> str:
    """Why a text that uses LaTeX cannot be read ("" when it can): braces that do not balance
    (\\{ and \\} are literal), or a command given an empty argument (\\sqrt{})."""
    depth, i = 0, 0
    while i < len(text):
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth < 0:
                return "a } with no {"
        i += 1
    if depth:
        return "a { that never closes"
    if _EMPTY_ARGUMENT.search(text):
        return "a command with an empty argument"
    return ""


def _as_fraction(value) -> Fraction | None:
    try:
        if getattr(value, "is_Rational", False):
            return Fraction(int(value.p), int(value.q))
        if getattr(value, "is_Float", False):
            return Fraction(str(value))
    except (ValueError, ZeroDivisionError):
        return None
    return None


def _clip(s: str, n: int = MAX_FIELD) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"


def verdict(item: dict, rule: str, symbolic: Symbolic, labels: dict) -> dict:
    """One item's verdict (status, extracted, canonical, correct, detail)."""
    text, label, kind = item["t"], item["l"], item["a"]
    key = (label, kind)
    if key not in labels:
        try:
            labels[key] = Reader(label, kind, symbolic)
        except LabelError as exc:
            labels[key] = str(exc)
    reader = labels[key]
    if isinstance(reader, str):
        return {"s": "error", "d": reader}
    if rule == "lenient" and not item["b"]:
        return lenient(text, label, symbolic)
    if rule == "contains" and not item["b"]:
        return contains(text, reader)
    if item["b"]:
        answer, boxes, how, refused = text, [], "bare", ""
    else:
        answer, boxes, how, refused = extract(text, rule)
    if answer is None:
        return {"s": "no_answer", "d": f"no answer found by the {rule} rule"}
    if not unwrap(answer):
        return {"s": "no_answer", "e": "", "d": "empty box" if how == "boxed" else "empty answer"}
    out = {"s": "ok", "e": _clip(answer), "d": "" if rule == how else f"found by the {how} rule"}
    if refused:
        out.update(ok=False, c="", d=f"no final answer: {refused}")
        return out
    if len(answer) > MAX_ANSWER:
        out.update(ok=False, c="", d=f"an answer of {len(answer):,} characters is no final answer")
        return out
    try:
        if len(boxes) > 1:
            canons = set()
            for box in boxes:
                canons.add(_canonical_of(reader, box))
                if len(canons) > 1:
                    break
            if len(canons) > 1 or len(boxes) > MAX_BOXES:
                out.update(ok=False, c="", d="several different boxed answers")
                return out
        correct, canon, detail = reader.compare(answer)
        out.update(ok=correct, c=_clip(canon), d=detail or out["d"])
        if correct and rule == "auto":
            for name, other in other_commitments(text, how):
                if len(other) <= MAX_ANSWER and _says_otherwise(reader, other):
                    out.update(
                        ok=False,
                        d=f"{_RULE_NAMES[how]} and {_RULE_NAMES[name]} "
                        f"({_clip(unwrap(other), 60)!r}) differ: no one final answer",
                    )
                    break
    except Candidates:
        out.update(ok=False, c="", d="a list of candidates where one answer was asked for")
    except Refused as exc:
        out.update(ok=False, c="", d=f"answer not verified: {exc}")
    return out


def _canonical_of(reader: Reader, box: str) -> str:
    try:
        return reader.compare(box)[1] or unwrap(box)
    except (Candidates, Refused):
        return "\x00" + unwrap(box)


def _says_otherwise(reader: Reader, other: str) -> bool:
    """Whether another rule's final answer is one the reward cannot share with the one taken:
    a different answer of the label's type, a list, or a hedged or unreadable one that holds a
    digit. Words without a digit ("the answer is below") say nothing (number and expression
    labels)."""
    try:
        correct, _, detail = reader.compare(other)
    except Candidates:
        return True
    except Refused:
        return bool(re.search(r"\d", other))
    if correct:
        return False
    if reader.type in ("number", "expression"):
        return not detail or bool(re.search(r"\d", other))
    if reader.type == "choice":
        return detail != "not a choice letter"
    return True


def contains(text: str, reader: Reader) -> dict:
    """A loose reward some pipelines use: the label anywhere among the response's answers (any
    box, any number, the text after "the answer is"). Offered so that a user can see what the
    probes do to such a verifier; never the default."""
    candidates = [b for b in boxed_contents(text) if b.strip()]
    found = after_answer_is(text)
    if found is not None:
        candidates.append(found)
    candidates.extend(m.group(0) for m in _NUMBER.finditer(text[-MAX_NUMBER_SCAN:]))
    if not candidates:
        return {"s": "no_answer", "d": "no answer found by the contains rule"}
    for candidate in candidates[:MAX_CONTAINS]:
        try:
            correct, canon, _ = reader.compare(candidate)
        except (Candidates, Refused, Hedged):
            continue
        if correct:
            return {"s": "ok", "e": _clip(candidate), "c": _clip(canon), "ok": True,
                    "d": "the label is among the response's answers"}  # fmt: skip
    return {"s": "ok", "e": _clip(candidates[-1]), "c": "", "ok": False,
            "d": "the label is not among the response's answers"}  # fmt: skip


def lenient(text: str, label: str, symbolic: Symbolic) -> dict:
    """math_verify's own defaults: its parse over the whole text (LaTeX and plain expressions,
    any match), verify against the label parsed the same way."""
    from math_verify.errors import TimeoutException  # noqa: PLC0415

    try:
        gold = symbolic.parse_(label, parsing_timeout=symbolic.seconds, raise_on_error=True)
        if not gold:
            gold = symbolic.parse_(
                "$" + label + "$", parsing_timeout=symbolic.seconds, raise_on_error=True
            )
        found = symbolic.parse_(text, parsing_timeout=symbolic.seconds, raise_on_error=True)
    except TimeoutException:
        raise Timeout(f"parse timed out after {symbolic.seconds} s") from None
    except Exception as exc:  # noqa: BLE001
        return {"s": "error", "d": f"math_verify parse failed: {type(exc).__name__}"}
    if not gold:
        return {"s": "error", "d": "math_verify cannot parse the label"}
    if not found:
        return {"s": "no_answer", "d": "math_verify found no answer"}
    extracted = str(found[-1]) if isinstance(found[-1], str) else str(found[0])
    correct = symbolic.equal(gold, found)
    return {"s": "ok", "e": _clip(extracted), "c": symbolic.canonical(found), "ok": correct}


# --- The batch: parent and children ------------------------------------------------------------


def _alarm(signum: int, frame: object) -> None:
    raise Timeout("per-answer time limit reached")


def child(items: list[dict], start: int, rule: str, seconds: float, out: int, symbolic) -> None:
    """Verify items[start:] in order, one line each on `out`; exit after an item that ended in
    an exception (the parent forks a fresh child for the rest)."""
    try:
        with open("/proc/self/oom_score_adj", "w") as fh:
            fh.write("1000")  # under the sandbox's memory limit, the kernel kills a child first
    except OSError:
        pass
    signal.signal(signal.SIGPROF, _alarm)
    labels: dict = {}
    for index in range(start, len(items)):
        began = time.monotonic()
        clean = True
        signal.setitimer(signal.ITIMER_PROF, seconds)  # CPU time; the parent's kill is wall
        try:
            result = verdict(items[index], rule, symbolic, labels)
        except Timeout as exc:
            result, clean = {"s": "timeout", "d": str(exc)}, False
        except MemoryError:
            result, clean = {"s": "error", "d": "ran out of memory"}, False
        except RecursionError:
            result, clean = {"s": "error", "d": "nested too deeply (recursion limit)"}, False
        except Exception as exc:  # noqa: BLE001
            result, clean = {"s": "error", "d": f"verifier error: {type(exc).__name__}"}, False
        finally:
            signal.setitimer(signal.ITIMER_PROF, 0)
        result["i"] = index
        result["t"] = round(time.monotonic() - began, 6)
        result["d"] = _clip(result.get("d", ""), MAX_DETAIL)
        line = (json.dumps(result, ensure_ascii=False) + "\n").encode("utf-8", "replace")
        while line:
            line = line[os.write(out, line) :]
        if not clean:
            os._exit(0)
    os._exit(0)


def emit(record: dict) -> None:
    sys.stdout.write(json.dumps(record, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def main(payload: str) -> None:
    began = time.monotonic()
    # surrogatepass: a text holding a lone surrogate (JSON allows "\ud800") is kept as it came.
    batch = json.loads(base64.b64decode(payload).decode("utf-8", "surrogatepass"))
    items, rule, seconds = batch["items"], batch["rule"], float(batch["seconds"])
    hard = seconds + 1.0
    sys.setrecursionlimit(3000)
    try:
        lib = os.environ.get("VERIFIER_LIB") or "/opt/verifier"
        sys.path.insert(0, lib)
        symbolic = Symbolic(seconds)
    except Exception as exc:  # noqa: BLE001
        emit({"fatal": f"cannot import math_verify from {lib}: {type(exc).__name__}: {exc}"})
        sys.exit(3)
    emit({"ready": round(time.monotonic() - began, 3)})
    done = 0
    while done < len(items):
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read_end)
            try:
                child(items, done, rule, seconds, write_end, symbolic)
            finally:
                os._exit(1)
        os.close(write_end)
        buffer, deadline, started = b"", time.monotonic() + hard, time.monotonic()
        ended = timed_out = False
        while not ended:
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            ready, _, _ = select.select([read_end], [], [], left)
            if not ready:
                continue
            chunk = os.read(read_end, 1 << 16)
            if not chunk:
                ended = True
                break
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                sys.stdout.write(line.decode("utf-8", "replace") + "\n")
                done += 1
                deadline, started = time.monotonic() + hard, time.monotonic()
            sys.stdout.flush()
        if timed_out:
            os.kill(pid, signal.SIGKILL)
        os.close(read_end)
        _, status = os.waitpid(pid, 0)
        if done < len(items) and (timed_out or status != 0):
            code = os.waitstatus_to_exitcode(status)
            if timed_out:
                result = {"s": "timeout", "d": f"no verdict within {hard:g} s: killed"}
            elif code == -signal.SIGKILL:
                result = {"s": "error", "d": "killed (out of memory, most likely)"}
            else:
                result = {"s": "error", "d": f"the verifier's process ended ({code})"}
            result.update(i=done, t=round(time.monotonic() - started, 6))
            emit(result)
            done += 1
        elif done < len(items) and status == 0 and not timed_out:
            # a child that exits cleanly after an item that raised: the next child goes on
            continue
    emit({"done": len(items)})
