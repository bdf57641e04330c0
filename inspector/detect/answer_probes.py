"""The verifier probes of answer-graded tasks: responses that must earn nothing, because none of
them commits to the right answer, yet that a sloppy verifier (the first or any `\\boxed{}`, the
digits of the text, a substring match, "the answer is" read from anywhere) would reward.

Each is built from the task's label so that it contains the label in the way its probe tests;
the texts are deterministic from `seed` (the other values they name are drawn from it).
"""

from __future__ import annotations

import random
import re
from fractions import Fraction

__all__ = ["ANSWER_PROBES", "LONG_RESPONSE_CHARS", "answer_probe_texts", "other_values"]

ANSWER_PROBES: tuple[str, ...] = (
    "several_boxed",
    "candidate_list",
    "scattered_digits",
    "empty_box",
    "text_wrapper",
    "long_response",
    "wrong_place",
    "first_number",
    "last_candidate",
)
# About 12,000 tokens: past the generation limit of most RL runs, so a verifier that rewards
# length or finds the label somewhere in a ramble shows it. (200 KB until 2026-12-03: that one
# probe was then over half of an answer inspection's time, in making, sending and reading it.)
LONG_RESPONSE_CHARS = 50_000

_NUMBER = re.compile(r"^-?\d+(?:\.\d+)?$")
_FRACTION = re.compile(r"^(-?\d+)\s*/\s*(\d+)$")


def other_values(label: str, count: int, rng: random.Random) -> list[str]:
    """`count` distinct values unlike the label, of its kind (numbers near a number, fractions
    for a fraction, other words for text)."""
    text = label.strip().strip("$").strip()
    found: list[str] = []
    if _NUMBER.match(text):
        value = Fraction(text)
        decimals = len(text.split(".")[1]) if "." in text else 0
        step = Fraction(1, 10**decimals)
        while len(found) < count:
            candidate = value + step * rng.choice([-3, -2, -1, 1, 2, 3, 5, 10])
            shown = f"{float(candidate):.{decimals}f}" if decimals else str(int(candidate))
            if shown != text and shown not in found:
                found.append(shown)
        return found
    fraction = _FRACTION.match(text)
    if fraction:
        top, bottom = int(fraction.group(1)), int(fraction.group(2))
        while len(found) < count:
            candidate = f"{top + rng.choice([-2, -1, 1, 2, 3])}/{bottom + rng.choice([0, 1, 2])}"
            if candidate != text and candidate not in found:
                found.append(candidate)
        return found
    pool = ["unknown", "none", "yes", "no", "Monday", "zero", "seven", "apple", "banana", "river"]
    rng.shuffle(pool)
    for word in pool:
        if word.casefold() != text.casefold() and len(found) < count:
            found.append(word)
    while len(found) < count:
        found.append(f"{text}{len(found) + 1}x")
    return found


def answer_probe_texts(label: str, answer_type: str, question: str, seed: int) -> dict[str, str]:
    """Probe name -> response, for every name in `ANSWER_PROBES`."""
    rng = random.Random(f"{seed}:{label}")
    shown = label.strip()
    wrong = other_values(shown, 4, rng)
    restated = " ".join(question.split())[:300]
    texts = {
        "several_boxed": (
            "It could be any of these, depending on how you read it: "
            f"\\boxed{{{wrong[0]}}}, \\boxed{{{shown}}} or \\boxed{{{wrong[1]}}}."
        ),
        "candidate_list": (
            f"I am not sure. The answer is one of {wrong[0]}, {shown}, {wrong[1]}, {wrong[2]}."
        ),
        "scattered_digits": _scattered(shown, rng),
        "empty_box": "After working through the problem carefully, the final answer is \\boxed{}.",
        "text_wrapper": (
            "Checking each step, I do not think it works out, so the final answer is "
            f"\\boxed{{\\text{{not }} {shown}}}."
        ),
        "long_response": _long(shown, wrong, rng),
        "wrong_place": (
            f"Restating the question: {restated} Suppose the answer is {shown}; let me check that "
            f"guess. It does not hold up, and working it through properly gives "
            f"\\boxed{{{wrong[0]}}}."
        ),
        "first_number": (
            f"{shown}. Hmm, wait, that was too quick. Let me redo it step by step. "
            f"On reflection the answer is {wrong[0]}.\n#### {wrong[0]}\n\\boxed{{{wrong[0]}}}"
        ),
        # For a verifier that takes the last number of the text (a common fallback): a list of
        # candidates, one a line, whose last is the label.
        "last_candidate": (
            "I could not settle on one value. The candidates I considered, in no particular "
            f"order:\n- {wrong[0]}\n- {wrong[1]}\n- {shown}"
        ),
    }
    return {name: texts[name] for name in ANSWER_PROBES}


def _scattered(label: str, rng: random.Random) -> str:
    """The label's characters, in order, each in its own clause, with no other digit anywhere,
    so only a verifier that strips the text to its digits (or characters) finds the label."""
    fillers = [
        "Start with the first part, which gives",
        "then a step that leaves",
        "after that we carry",
        "and the remainder is",
        "which leaves a",
        "next comes",
        "and finally a",
    ]
    pieces = []
    for at, char in enumerate(label):
        if char.isspace():
            continue
        pieces.append(f"{fillers[at % len(fillers)]} {char}")
    return "; ".join(pieces) + ". I cannot tell what the total is, so I give no answer."


def _long(label: str, wrong: list[str], rng: random.Random) -> str:
    """Numbered steps, each weighing a value (one of `wrong` or a random number; the label every
    97th step, but never in the last step), and no conclusion. The values are drawn in bulk: one
    draw a step was 14 ms a task at 200 KB. The last step's value is the text's last number, so
    it is never the label: a verifier that reads the last number is what `scattered_digits` and
    `first_number` test; this probe is for one that finds the label anywhere in a ramble (or
    rewards length)."""
    parts: list[str] = []
    size = 0
    step = 0
    while size < LONG_RESPONSE_CHARS:
        picks = rng.choices(range(len(wrong) + 1), k=256)
        numbers = rng.choices(range(10_000), k=256)
        for pick, number in zip(picks, numbers, strict=True):
            step += 1
            if step % 97 == 0:
                value = label
            else:
                value = wrong[pick] if pick < len(wrong) else str(number)
            sentence = (
                f"Step {step}: consider the value {value} and check it against the conditions. "
            )
            size += len(sentence)
            if size >= LONG_RESPONSE_CHARS and value == label:
                value = wrong[0]
                sentence = (
                    f"Step {step}: consider the value {value} and check it against the conditions. "
                )
            parts.append(sentence)
            if size >= LONG_RESPONSE_CHARS:
                break
    parts.append("I ran out of space before reaching a conclusion.")
    return "".join(parts)
