"""What a task's Dockerfile may ask of the engine, checked before it is built.

Builds run with no network (`networkmode`) and never pull, but two instructions reach past both:
the engine itself fetches `ADD <url>` (and `ADD <git repository>`) whatever the build's network,
and a `FROM` (or `COPY --from`, `RUN --mount=from=`) image missing from the engine is pulled
from whatever registry its name points to, `pull=False` notwithstanding (that only skips
refreshing an image already there). `refusal(text, image_exists)` reads the Dockerfile as the
builder does (parser directives, line continuations, comments, ARG defaults before the first
FROM) and says why it must not be built, or "" when it may.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

_DIRECTIVE = re.compile(r"^#\s*([a-zA-Z][a-zA-Z0-9_-]*)\s*=\s*(.*?)\s*$")
_URL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://|^git@")
_VARIABLE = re.compile(
    r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)(?::?([-+])([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*))"
)


def instructions(text: str) -> list[tuple[int, str, str]]:
    """(line number, INSTRUCTION, arguments) of a Dockerfile, continuation lines joined and
    comments dropped, with its `escape` parser directive honoured."""
    lines = text.splitlines()
    escape = "\\"
    for line in lines:  # parser directives: only at the very top, before any other line
        match = _DIRECTIVE.match(line.strip())
        if not match:
            break
        if match.group(1).lower() == "escape" and match.group(2) in ("\\", "`"):
            escape = match.group(2)
    out: list[tuple[int, str, str]] = []
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(lines, 1):
        stripped = raw.strip()
        if stripped.startswith("#") or (not stripped and pending):
            continue  # a comment, or an empty line inside a continued instruction
        if not stripped:
            continue
        if not pending:
            start = number
        body = raw.rstrip()
        if body.endswith(escape):
            pending.append(body[: -len(escape)])
            continue
        pending.append(body)
        joined = " ".join(part.strip() for part in pending)
        pending = []
        word, _, rest = joined.partition(" ")
        out.append((start, word.upper(), rest.strip()))
    if pending:
        joined = " ".join(part.strip() for part in pending)
        word, _, rest = joined.partition(" ")
        out.append((start, word.upper(), rest.strip()))
    return out


def _words(arguments: str) -> list[str]:
    """An instruction's arguments: the JSON (exec) form, or words split on white space."""
    if arguments.startswith("["):
        try:
            value = json.loads(arguments)
        except ValueError:
            value = None
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return value
    return arguments.split()


def _flags(words: list[str]) -> tuple[dict[str, list[str]], list[str]]:
    flags: dict[str, list[str]] = {}
    rest = list(words)
    while rest and rest[0].startswith("--"):
        name, _, value = rest.pop(0)[2:].partition("=")
        flags.setdefault(name.lower(), []).append(value)
    return flags, rest


def _substitute(value: str, defaults: dict[str, str]) -> str | None:
    """`value` with the ARG defaults put in; None when it uses a variable with no default."""
    missing = False

    def one(match: re.Match) -> str:
        nonlocal missing
        name, operator, word = match.group(1) or match.group(4), match.group(2), match.group(3)
        if operator == "+":  # ${NAME:+word}: the word when set, else nothing
            return word if name in defaults else ""
        if name in defaults:
            return defaults[name]
        if operator == "-":  # ${NAME:-word}: the word when unset
            return word
        missing = True
        return ""

    result = _VARIABLE.sub(one, value)
    return None if missing else result


def refusal(text: str, image_exists: Callable[[str], bool]) -> str:
    """Why the Dockerfile `text` must not be built ("" when it may). `image_exists(name)` says
    whether an image is on the engine (it may raise the engine's own errors)."""
    defaults: dict[str, str] = {}
    stages: set[str] = set()
    stage_count = 0

    def source_image(where: str, name: str) -> str:
        resolved = _substitute(name, defaults)
        if resolved is None:
            return f"{where}: {name} uses a build argument with no default; builds take none"
        if resolved.lower() in stages or resolved.isdigit() and int(resolved) < stage_count:
            return ""
        if resolved.lower() == "scratch" or image_exists(resolved):
            return ""
        return (
            f"{where}: the image {resolved} is not on this Docker engine, and builds never pull "
            "(load it with `docker load` first)"
        )

    def check(number: int, word: str, arguments: str) -> str:
        where = f"Dockerfile line {number}, {word}"
        if word == "ONBUILD":
            inner, _, rest = arguments.partition(" ")
            return check(number, inner.upper(), rest.strip())
        flags, words = _flags(_words(arguments))
        if word == "ARG" and not stage_count:
            for word_ in words:
                name, sep, value = word_.partition("=")
                if sep:
                    defaults[name] = value.strip("\"'")
            return ""
        if word == "ADD":
            for source in words[:-1]:
                if _URL.match(source):
                    return (
                        f"{where} fetches {source}: the engine would download it whatever the "
                        "build's network; put the file in the build context instead"
                    )
            return ""
        if word == "COPY":
            for name in flags.get("from", []):
                problem = source_image(f"{where} --from", name)
                if problem:
                    return problem
            return ""
        if word == "RUN":
            for mount in flags.get("mount", []):
                for part in mount.split(","):
                    key, _, value = part.partition("=")
                    if key.strip().lower() == "from":
                        problem = source_image(f"{where} --mount", value.strip())
                        if problem:
                            return problem
            return ""
        return ""

    for number, word, arguments in instructions(text):
        if word == "FROM":
            _, words = _flags(_words(arguments))
            if not words:
                return f"Dockerfile line {number}: FROM names no image"
            problem = source_image(f"Dockerfile line {number}, FROM", words[0])
            if problem:
                return problem
            if len(words) >= 3 and words[1].lower() == "as":
                stages.add(words[2].lower())
            stage_count += 1
            continue
        problem = check(number, word, arguments)
        if problem:
            return problem
    return ""


__all__ = ["instructions", "refusal"]
