"""The canonical text of a behaviour program's result, and its digest.

One code for both sides: `behaviour_program.py` (run in the sandbox) gets this file's text
pasted in, and the host runs it for the prompt's expected values (`value_digest`), so that
both digest alike. Standard library only; what it defines is private to the program."""

import hashlib as _hashlib
import re as _re

_ADDRESS = _re.compile(r" at 0x[0-9a-fA-F]+")
_CANON_LIMIT = 1 << 20


def _number(value):
    if value != value:
        return "nan"
    if value in (float("inf"), float("-inf")):
        return repr(value)
    if value == int(value) and abs(value) < 2**63:
        return str(int(value))
    return format(value, ".10g")


def _canon(value, out, budget, stack, depth):
    # Appends the canonical text of `value` to `out`, within `budget[0]` characters.
    if budget[0] <= 0:
        return
    kind = type(value)
    if value is None:
        piece = "N"
    elif kind is bool or kind is int:
        try:
            piece = "n" + str(int(value))
        except ValueError:  # more digits than int-to-str allows
            piece = "n" + hex(int(value))
    elif kind is float:
        piece = "n" + _number(value)
    elif kind is complex:
        if value.imag == 0:
            piece = "n" + _number(value.real)
        else:
            piece = "c" + _number(value.real) + "," + _number(value.imag)
    elif kind is str:
        piece = "s" + repr(value)
    elif kind is bytes or kind is bytearray:
        piece = "b" + repr(bytes(value))
    elif kind in (list, tuple, dict, set, frozenset):
        if id(value) in stack:
            piece = "<cycle>"
        elif depth > 100:
            piece = "<deep>"
        else:
            stack.add(id(value))
            try:
                if kind is dict or kind is set or kind is frozenset:
                    pairs = value.items() if kind is dict else ((item, None) for item in value)
                    items = []
                    for key, item in pairs:
                        parts = []
                        _canon(key, parts, budget, stack, depth + 1)
                        if kind is dict:
                            parts.append(":")
                            _canon(item, parts, budget, stack, depth + 1)
                        items.append("".join(parts))
                        if budget[0] <= 0:
                            break
                    items.sort()
                    opening = "{" if kind is dict else "S{"
                    piece = opening + ",".join(items) + "}"
                else:
                    parts = []
                    for item in value:
                        _canon(item, parts, budget, stack, depth + 1)
                        parts.append(",")
                        if budget[0] <= 0:
                            break
                    if kind is list:
                        piece = "[" + "".join(parts) + "]"
                    else:
                        piece = "(" + "".join(parts) + ")"
            finally:
                stack.discard(id(value))
    else:
        piece = "o" + type(value).__qualname__ + ":" + _ADDRESS.sub("", repr(value))[:10000]
    budget[0] -= len(piece) if kind not in (list, tuple, dict, set, frozenset) else 2
    out.append(piece)


def _digest(value):
    out = []
    _canon(value, out, [_CANON_LIMIT], set(), 0)
    text = "".join(out)
    return _hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]
