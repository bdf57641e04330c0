"""The planted-defect benchmark's catalogue: the flag codes it knows, the kinds of defect it
plants (each with the flag it plants and its weight in the split), the HumanEval tasks it leaves
out, the advisory flags it never scores, HumanEval's own near-duplicates, and the hand-written
second readings of the prompts that admit one (the `ambiguous` kind)."""

from __future__ import annotations

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
