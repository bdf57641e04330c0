"""Modified prompts, the prompt-side defects and edits: a near copy (a few words of the
docstring replaced by synonyms), an answer leak (`Hint: <a distinctive line of the reference>`)
and a prompt without its examples (for a second reading)."""

from __future__ import annotations

import ast
import random
import re
import sys
from pathlib import Path

from bench.planted.editing import Source, parse

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


def _docstring(prompt: str, entry_point: str) -> ast.Constant | None:
    tree = parse(prompt + "    pass\n")
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
    root = str(Path(__file__).resolve().parents[2])
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
    before, after = parse(prompt + "    pass\n"), parse(stripped + "    pass\n")
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
    source = Source(prompt + "    pass\n")
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
