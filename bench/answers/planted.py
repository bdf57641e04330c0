"""The planted benchmark of answer-graded tasks: questions with verified answers from
reasoning-gym, simulated models' samples, and defects planted on known tasks.

    python -m bench.answers.planted --out DIR --seed N --tasks 600

writes DIR/tasks.jsonl (our own schema), DIR/samples.jsonl, DIR/truth.json (task_id -> the
planted defects, [] for a clean task) and DIR/meta.json (the simulated models' accuracies, and
the verifier-gaming samples: responses that must not be rewarded).

The simulation: ten models of accuracy 0.1 to 0.9 (shifted per task by a difficulty), four
samples each per task, each written in one of several styles (a chain of thought ending in
`\\boxed{}`, GSM8K's "#### X", "The answer is X."), some without any final answer. Wrong answers
are drawn from each task's distractors, most often its one common mistake, so that models share
mistakes as real ones do. Three pairs of models share a base model (`FOLLOWS`, as real output
sets come in pairs: two prompts of one model, a model and its verifier-best-of-n): the follower
repeats its leader's wrong answer, sample for sample, with probability 0.85, and otherwise answers
on its own at an accuracy chosen so that its overall accuracy is its nominal one. Defects are
planted on disjoint tasks, about 6% each:

- `mislabeled`: the label is replaced by the task's common mistake; models answer the true value.
- `ambiguous`: the question has two valid answers whose readings attract different models: each
  base model (a pair shares one) leans to one reading (0.8 to 1 of its right answers) or, one
  time in five, splits evenly; each reading is taken by at least one capable model (accuracy 0.6
  or more: a reading only weak models take is indistinguishable from a shared mistake); the
  label is one of them.
- `unsolvable`: a number the question needs is removed; the answers scatter; the label is kept.
- `unverifiable_label`: the label is garbage or empty LaTeX.
- `answer_leak`: the question states its answer.
- `duplicate`: a near-copy (case, spacing, punctuation) of another, clean, question; both are
  marked.
- `no_signal`: a trivial question every model gets right.

Seed 0 is the development set (thresholds may be tuned on it); seed 1 is held out.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
from dataclasses import dataclass, field
from pathlib import Path

DOMAINS: dict[str, str] = {
    "basic_arithmetic": "number",
    "chain_sum": "number",
    "gsm_symbolic": "number",
    "fraction_simplification": "number",
    "letter_counting": "number",
    "leg_counting": "number",
    "simple_equations": "number",
    "lcm": "number",
    "products": "number",
    "spell_backward": "text",
}
MODELS: dict[str, float] = {
    "sim-large": 0.9,
    "sim-large-cot": 0.85,
    "sim-medium": 0.78,
    "sim-tuned": 0.68,
    "sim-tuned-best": 0.62,
    "sim-small": 0.5,
    "sim-base": 0.35,
    "sim-base-fewshot": 0.28,
    "sim-tiny": 0.18,
    "sim-micro": 0.1,
}
# Output sets that share a base model (another prompt, a best-of-n variant): the follower makes
# its leader's mistake, sample for sample, with probability SHARED_MISTAKE.
FOLLOWS: dict[str, str] = {
    "sim-large-cot": "sim-large",
    "sim-tuned-best": "sim-tuned",
    "sim-base-fewshot": "sim-base",
}
SHARED_MISTAKE = 0.85
SAMPLES_PER_MODEL = 4
DEFECTS = (
    "mislabeled",
    "ambiguous",
    "unsolvable",
    "unverifiable_label",
    "answer_leak",
    "duplicate",
    "no_signal",
)
DEFECT_SHARE = 0.06
GAMING_SAMPLES = 40
# The probes whose texts the gaming samples are drawn from: the seven the set was built with
# (long_response left out), fixed so that a seed makes the same set when probes are added.
GAMING_PROBES = (
    "several_boxed",
    "candidate_list",
    "scattered_digits",
    "empty_box",
    "text_wrapper",
    "wrong_place",
    "first_number",
)
GARBAGE_LABELS = ("\\frac{", "$\\,$", "\\left( \\right", "{{}", "\\sqrt{}", "$ $", "\\boxed{")
LEAK_PHRASES = (
    "{q} (Hint: the answer is {a}.)",
    "{q}\nThe answer is {a}.",
    "{q} Note that the result is {a}.",
    "{q} Answer: {a}",
)
_NUMBER = re.compile(r"(?<![\w.])\d+(?![\w.])")


@dataclass
class PlantedTask:
    task_id: str
    question: str
    label: str
    domain: str
    answer_type: str
    truth: str  # the answer models aim for
    valid: tuple[str, ...]  # every right answer (two for an ambiguous question)
    distractors: list[str]
    defects: list[str] = field(default_factory=list)
    difficulty: float = 0.0
    scatter: bool = False  # unanswerable: the answers scatter
    trivial: bool = False


def generate(
    out: Path, *, seed: int, tasks: int, samples_per_model: int = SAMPLES_PER_MODEL
) -> dict[str, list[str]]:
    """Write the four files into `out`; returns the truth (task_id -> defects). Each of the ten
    simulated models answers each question `samples_per_model` times (4 by default: 40 samples
    a question)."""
    rng = random.Random(seed)
    planted = _questions(tasks, seed, rng)
    _plant(planted, rng)
    out.mkdir(parents=True, exist_ok=True)
    samples, gaming = _samples(planted, rng, samples_per_model)
    with open(out / "tasks.jsonl", "w", encoding="utf-8") as fh:
        for t in planted:
            line = {
                "task_id": t.task_id,
                "question": t.question,
                "answer": t.label,
                "answer_type": t.answer_type,
                "domain": t.domain,
                "metadata": {"generator": "reasoning-gym"},
            }
            fh.write(json.dumps(line, ensure_ascii=False) + "\n")
    with open(out / "samples.jsonl", "w", encoding="utf-8") as fh:
        for s in samples:
            fh.write(json.dumps(s, ensure_ascii=False) + "\n")
    truth = {t.task_id: sorted(set(t.defects)) for t in planted}
    (out / "truth.json").write_text(json.dumps(truth, indent=1, sort_keys=True))
    (out / "meta.json").write_text(
        json.dumps(
            {"seed": seed, "models": MODELS, "follows": FOLLOWS, "gaming_samples": gaming},
            indent=1,
        )
    )
    return truth


# --- questions --------------------------------------------------------------------------------


def _questions(count: int, seed: int, rng: random.Random) -> list[PlantedTask]:
    import reasoning_gym

    per_domain = math.ceil(count * 1.3 / len(DOMAINS))
    pools: dict[str, list[dict]] = {}
    for at, name in enumerate(DOMAINS):
        data = reasoning_gym.create_dataset(name, size=per_domain, seed=seed * 1000 + at)
        pools[name] = [dict(entry) for entry in data]
    planted: list[PlantedTask] = []
    seen: set[tuple[str, ...]] = set()
    names = list(DOMAINS)
    while len(planted) < count:
        name = names[len(planted) % len(names)]
        if not pools[name]:
            names.remove(name)
            continue
        entry = pools[name].pop(0)
        question = str(entry["question"]).replace("$", "")
        label = str(entry["answer"]).strip().strip("$").strip()
        # Natural near-duplicates ("1 + 5" and "5 + 1") would be unplanted duplicates: drop them.
        words = tuple(sorted(re.findall(r"\w+", question.lower())))
        if words in seen or not label:
            continue
        seen.add(words)
        planted.append(
            PlantedTask(
                task_id=f"rg/{name}/{len(planted)}",
                question=question,
                label=label,
                domain=name,
                answer_type=DOMAINS[name],
                truth=label,
                valid=(label,),
                distractors=_distractors(label, DOMAINS[name], rng),
                difficulty=rng.gauss(0.0, 0.3),
            )
        )
    return planted


def _distractors(label: str, kind: str, rng: random.Random) -> list[str]:
    """The task's plausible mistakes, the common one first."""
    found: list[str] = []
    if kind == "text":
        letters = list(label)
        if len(letters) > 2:
            i = rng.randrange(len(letters) - 1)
            letters[i], letters[i + 1] = letters[i + 1], letters[i]
        found += ["".join(letters), label[::-1], label[:-1], label + label[-1]]
    elif re.fullmatch(r"\\frac\{\d+\}\{\d+\}", label):  # reasoning-gym's \frac{a}{b}
        top, bottom = (int(x) for x in re.findall(r"\d+", label))
        found += [
            f"\\frac{{{top + 1}}}{{{bottom}}}",
            f"\\frac{{{bottom}}}{{{top}}}",
            f"\\frac{{{top}}}{{{bottom + 1}}}",
            f"\\frac{{{top - 1}}}{{{bottom}}}",
        ]
    elif "/" in label:
        top, bottom = (int(x) for x in label.split("/"))
        found += [
            f"{top + 1}/{bottom}",
            f"{bottom}/{top}",
            f"{top}/{bottom + 1}",
            f"{top - 1}/{bottom}",
        ]
    else:
        value = int(label) if re.fullmatch(r"-?\d+", label) else None
        if value is None:
            found += [label + "1", "0", "1", "2"]
        else:
            found += [
                str(value + d)
                for d in (
                    rng.choice([-1, 1]),
                    rng.choice([-2, 2, 10, -10]),
                    2 * value if value else 7,
                    -value if value else 3,
                )
            ]
    unique = []
    for value in found:
        if value != label and value not in unique and value not in ("", "/"):
            unique.append(value)
    while len(unique) < 3:
        unique.append(f"{label}{len(unique)}")
    return unique


# --- the defects ------------------------------------------------------------------------------


def _plant(planted: list[PlantedTask], rng: random.Random) -> None:
    per_defect = max(1, round(DEFECT_SHARE * len(planted)))
    free = list(range(len(planted)))
    rng.shuffle(free)

    def take(n: int, fit=lambda t: True) -> list[PlantedTask]:
        chosen = [i for i in free if fit(planted[i])][:n]
        for i in chosen:
            free.remove(i)
        return [planted[i] for i in chosen]

    for t in take(per_defect):
        t.defects.append("mislabeled")
        t.label = t.distractors[0]
    for t in take(per_defect):
        t.defects.append("ambiguous")
        t.valid = (t.label, t.distractors[0])
        t.distractors = t.distractors[1:]
    has_number = lambda t: t.answer_type == "number" and bool(_NUMBER.search(t.question))  # noqa: E731
    for t in take(per_defect, has_number):
        t.defects.append("unsolvable")
        numbers = list(_NUMBER.finditer(t.question))
        gone = numbers[-1] if t.domain != "gsm_symbolic" else rng.choice(numbers)
        t.question = t.question[: gone.start()] + "some amount" + t.question[gone.end() :]
        t.scatter = True
    for t in take(per_defect):
        t.defects.append("unverifiable_label")
        t.label = rng.choice(GARBAGE_LABELS)
    for t in take(per_defect):
        t.defects.append("answer_leak")
        t.question = rng.choice(LEAK_PHRASES).format(q=t.question.rstrip(), a=t.label)
    for t in take(per_defect):
        t.defects.append("no_signal")
        t.trivial = True
    # Duplicates: a near-copy replaces a task, its original is another, clean, task.
    pairs = max(1, per_defect // 2)
    copies = take(pairs)
    originals = take(pairs)
    for copy, original in zip(copies, originals, strict=True):
        copy.question = _near_copy(original.question, rng)
        copy.label = copy.truth = original.label
        copy.valid = (original.label,)
        copy.domain, copy.answer_type = original.domain, original.answer_type
        copy.distractors = list(original.distractors)
        copy.defects.append("duplicate")
        original.defects.append("duplicate")


def _near_copy(question: str, rng: random.Random) -> str:
    """The same words and numbers, written differently: case, spacing, punctuation."""
    text = question
    edits = [
        lambda s: s.replace(" ", "  ", 2),
        lambda s: s[0].lower() + s[1:] if s else s,
        lambda s: s.rstrip(".?") + ("?" if s.rstrip().endswith(".") else "."),
        lambda s: s.replace(", ", " , ", 1),
        lambda s: "  " + s + " ",
        lambda s: s.upper() if len(s) < 80 else s.replace("\n", " "),
    ]
    for edit in rng.sample(edits, 3):
        text = edit(text)
    return text if text != question else question + " "


# --- samples ----------------------------------------------------------------------------------


def _samples(
    planted: list[PlantedTask], rng: random.Random, per_model: int
) -> tuple[list[dict], list[dict]]:
    from inspector.detect.answer_probes import answer_probe_texts, other_values

    samples: list[dict] = []
    for t in planted:
        numbers = _NUMBER.findall(t.question)[:6]
        preference = _preferences(rng) if len(t.valid) > 1 else {}
        leader_values: dict[str, list[str | None]] = {}
        for model, accuracy in MODELS.items():
            p = 1.0 if t.trivial else _logistic(_logit(accuracy) - t.difficulty)
            leader = FOLLOWS.get(model)
            if leader is not None and not t.trivial:
                # The leader is wrong with a value on about (1 - pl) 0.9 of its samples, and the
                # follower then repeats it with SHARED_MISTAKE; on the rest it answers on its own
                # at the accuracy that keeps its overall accuracy at p.
                pl = _logistic(_logit(MODELS[leader]) - t.difficulty)
                own = 1.0 - (1 - pl) * 0.9 * SHARED_MISTAKE
                p = min(0.99, p / own)
            values = []
            for k in range(per_model):
                copied = leader_values.get(leader, [None] * per_model)[k] if leader else None
                if copied is not None and copied not in t.valid and rng.random() < SHARED_MISTAKE:
                    value = copied
                elif t.scatter:
                    value = rng.choice(other_values(t.truth, 6, rng) + [str(rng.randint(1, 5000))])
                    if value == t.label:
                        value = None
                    value = None if rng.random() < 0.15 else value
                elif rng.random() < p:
                    value = (
                        t.valid[0]
                        if len(t.valid) == 1 or rng.random() < preference[leader or model]
                        else t.valid[1]
                    )
                elif rng.random() < 0.1:
                    value = None  # no final answer
                else:
                    roll = rng.random()
                    if roll < 0.55:
                        value = t.distractors[0]
                    elif roll < 0.75:
                        value = t.distractors[1 % len(t.distractors)]
                    else:
                        value = rng.choice(other_values(t.truth, 5, rng))
                values.append(value)
                samples.append(
                    {
                        "task_id": t.task_id,
                        "sample_id": f"{model}/{k}",
                        "model": model,
                        "response": _response(value, t, numbers, rng),
                    }
                )
            leader_values[model] = values
    # Verifier-gaming responses on a few samples of clean tasks: they must earn nothing.
    gaming: list[dict] = []
    by_id = {t.task_id: t for t in planted}
    clean = [i for i, s in enumerate(samples) if not by_id[s["task_id"]].defects]
    for i in rng.sample(clean, min(GAMING_SAMPLES, len(clean))):
        t = by_id[samples[i]["task_id"]]
        probe = rng.choice(GAMING_PROBES)
        samples[i]["response"] = answer_probe_texts(
            t.label, t.answer_type, t.question, rng.randint(0, 10**6)
        )[probe]
        gaming.append({"task_id": t.task_id, "sample_id": samples[i]["sample_id"], "probe": probe})
    return samples, gaming


def _preferences(rng: random.Random) -> dict[str, float]:
    """Each base model's chance of taking the first reading of an ambiguous question when it
    answers it right: it leans to one reading, or one time in five splits evenly; each reading
    is taken by at least one capable model (accuracy 0.6 or more)."""
    bases = [m for m in MODELS if m not in FOLLOWS]
    capable = [m for m in bases if MODELS[m] >= 0.6]
    while True:
        lean = {m: rng.choice((0, 1)) if rng.random() < 0.8 else None for m in bases}
        readings = {lean[m] for m in capable}
        if {0, 1} <= readings:
            break
    return {
        m: rng.uniform(0.4, 0.6)
        if lean[m] is None
        else rng.uniform(0.8, 1.0)
        if lean[m] == 0
        else rng.uniform(0.0, 0.2)
        for m in bases
    }


def _response(value: str | None, t: PlantedTask, numbers: list[str], rng: random.Random) -> str:
    steps = (
        " ".join(
            rng.choice(
                [
                    f"First I look at {n}.",
                    f"Taking {n} into account,",
                    f"we get an intermediate {n}.",
                    f"Then {n} matters here.",
                ]
            )
            for n in numbers[: rng.randint(1, 4)]
        )
        or "Let me read the question carefully."
    )
    if value is None:
        return (
            steps
            + " "
            + rng.choice(
                [
                    "I am not able to finish this.",
                    "This needs more information than I have.",
                    "Hmm.",
                ]
            )
        )
    shown = value
    if re.fullmatch(r"-?\d{4,}", value) and rng.random() < 0.3:
        shown = f"{int(value):,}"
    style = rng.random()
    if style < 0.45:
        boxed = shown
        if "/" in value and rng.random() < 0.5:
            top, bottom = value.split("/", 1)
            boxed = f"\\frac{{{top}}}{{{bottom}}}"
        return f"Let's think step by step. {steps} So the final answer is $\\boxed{{{boxed}}}$."
    if style < 0.7:
        return f"{steps}\n#### {shown}"
    return f"{steps} The answer is {shown}."


def _logit(p: float) -> float:
    return math.log(p / (1 - p))


def _logistic(x: float) -> float:
    return 1 / (1 + math.exp(-x))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Write the planted answer-graded benchmark.")
    parser.add_argument("--out", required=True, type=Path, help="folder to write the files to")
    parser.add_argument("--seed", type=int, default=0, help="0 is the dev set, 1 is held out")
    parser.add_argument("--tasks", type=int, default=600, help="how many questions")
    args = parser.parse_args(argv)
    truth = generate(args.out, seed=args.seed, tasks=args.tasks)
    defective = sum(1 for d in truth.values() if d)
    print(f"wrote {len(truth)} tasks ({defective} with a planted defect) to {args.out}")


if __name__ == "__main__":
    main()
