"""Answer leaks: a distinctive line of the reference solution that appears word for word in
the prompt."""

from __future__ import annotations

import re
from dataclasses import dataclass

from inspector.detect.signals.compare import clip


@dataclass(frozen=True)
class AnswerLeak:
    line: str  # the longest reference line found in the prompt (whitespace collapsed)
    lines: int  # distinctive reference lines found in the prompt
    distinctive: int  # distinctive lines the reference has
    confidence: float  # 0.5 + 0.5 * lines / distinctive
    explanation: str

    def __str__(self) -> str:
        return self.line


MIN_LEAK_CHARS = 20
_CONTROL = ("for ", "async for ", "while ", "if ", "elif ", "else", "try", "except", "with ")
_OPERATOR = re.compile(r"[-+*/%<>=!&|^~]|\b(and|or|not|is)\b")
_STRING = re.compile(r"""(['"])((?:\\.|(?!\1).){5,})\1""")


def _distinctive(line: str) -> bool:
    if len(line) < MIN_LEAK_CHARS or line.startswith(
        ("#", "def ", "class ", "import ", "from ", "@")
    ):
        return False
    if line.startswith(('"""', "'''", 'r"""', "r'''")):
        return False
    if _STRING.search(line):
        return True
    # A loop or branch header that only names things (`for i, x in enumerate(xs):`) says how to
    # walk the input, not what to compute.
    return not (line.startswith(_CONTROL) and not _OPERATOR.search(line))


def answer_leak(prompt: str, reference: str) -> AnswerLeak | None:
    """A distinctive line of the reference that appears word for word in the prompt (both with
    whitespace collapsed). Distinctive: at least 20 characters; not a comment, decorator, def,
    class, import or docstring; and not a loop or branch header without an operator or a string
    literal (`for i, x in enumerate(xs):` is not distinctive, `if abs(a - b) < threshold:` is).
    Confidence: 0.5 + 0.5 x the share of the distinctive lines that leaked."""
    flat_prompt = " ".join(prompt.split())
    if not flat_prompt:
        return None
    lines = list(dict.fromkeys(" ".join(raw.split()) for raw in reference.splitlines()))
    distinctive = [line for line in lines if _distinctive(line)]
    leaked = [line for line in distinctive if line in flat_prompt]
    if not leaked:
        return None
    longest = max(leaked, key=len)
    return AnswerLeak(
        line=longest,
        lines=len(leaked),
        distinctive=len(distinctive),
        confidence=round(0.5 + 0.5 * len(leaked) / len(distinctive), 4),
        explanation=(
            f"the prompt contains {len(leaked)} of the reference's {len(distinctive)} distinctive "
            f"line{'s' if len(distinctive) != 1 else ''} word for word, e.g. {clip(longest)}"
        ),
    )
