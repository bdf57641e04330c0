"""The answer analysis run offline, before the integration exists: the planted sets (seed 0, the
development set, and seed 1, held out) and real GSM8K with its eight output sets.

    python -m bench.answers.offline [--tasks 600] [--work DIR] [--sloppy] [--samples-per-model 4]

**The verifier here is a stand-in, not the product's.** It runs on the host because it only
ever reads texts we generated ourselves (the planted samples and probes), plus, for GSM8K, the
output sets' own pre-extracted `answer` fields compared numerically with the label. The product
parses model text in the sandbox with math-verify (issue 17); nothing here should be reused
for untrusted text. `--sloppy` adds a run with a deliberately sloppy stand-in (any boxed value,
or any number of the text, counts) to show the probes and the harness finding at work.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
import tempfile
import time
from fractions import Fraction
from pathlib import Path

import pandas as pd

from bench.answers import planted
from bench.answers.scoring import report, score
from inspector.detect.answer_probes import answer_probe_texts
from inspector.detect.answers import analyse_answers
from inspector.formats.answers import read_answer_taskset

GSM8K = Path(__file__).resolve().parents[3] / "shared" / "data" / "answers"
_BOXED_ALL = re.compile(r"\\boxed\s*\{")
_FRAC = re.compile(r"\\d?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}")
_TEXT = re.compile(r"\\text\s*\{([^{}]*)\}")
_NUMBER = re.compile(r"^-?\d+(?:\.\d+)?(?:/\d+)?$")


# --- the stand-in verifier (our own synthetic texts only) ------------------------------------


def normalise(raw: str) -> tuple[str, str]:
    """(status, canonical): status "ok" with a canonical form, else "no_answer" or "error"."""
    text = raw.strip().strip("$").strip().rstrip(".").strip()
    text = _FRAC.sub(r"\1/\2", text)
    text = _TEXT.sub(r"\1", text)
    text = text.replace("\\,", "").replace("\\!", "").strip()
    if not text:
        return "no_answer", ""
    if "\\" in text or "{" in text or "}" in text:
        return "error", ""
    compact = text.replace(",", "").replace(" ", "")
    if _NUMBER.match(compact):
        try:
            value = Fraction(compact)
        except (ValueError, ZeroDivisionError):
            return "error", ""
        return "ok", str(
            value.numerator
        ) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"
    return "ok", " ".join(text.split()).casefold()


def extract(response: str) -> str | None:
    """The committed final answer: the one boxed value (several different ones commit to
    none), else GSM8K's last "#### ", else the last "the answer is"."""
    boxed = [_first_boxed(response[m.start() :]) for m in _BOXED_ALL.finditer(response)]
    boxed = [b for b in boxed if b is not None]
    if boxed:
        distinct = {normalise(b)[1] or b for b in boxed}
        return boxed[-1] if len(distinct) == 1 else None
    at = response.rfind("####")
    if at >= 0:
        return response[at + 4 :].strip().splitlines()[0] if response[at + 4 :].strip() else None
    found = re.findall(
        r"answer is[:\s]*([^\n]+?)\s*$", response, flags=re.IGNORECASE | re.MULTILINE
    )
    return found[-1] if found else None


def _first_boxed(text: str) -> str | None:
    """The content of the `\\boxed{}` `text` begins with (balanced braces)."""
    start = text.find("{") + 1
    depth, at = 1, start
    while at < len(text) and depth:
        depth += {"{": 1, "}": -1}.get(text[at], 0)
        at += 1
    return text[start : at - 1] if depth == 0 else None


def verify(response: str, label_canonical: str) -> dict:
    raw = extract(response)
    if raw is None:
        return {"status": "no_answer", "extracted": "", "canonical": "", "correct": False}
    status, canonical = normalise(raw)
    return {
        "status": status,
        "extracted": raw,
        "canonical": canonical,
        "correct": status == "ok" and canonical == label_canonical,
    }


def verify_sloppy(response: str, label_canonical: str) -> dict:
    """A verifier a policy can game: any boxed value, or any number in the text, that matches."""
    found = [_first_boxed(response[m.start() :]) or "" for m in _BOXED_ALL.finditer(response)]
    found += re.findall(r"-?\d+(?:/\d+)?", response)
    for raw in found:
        status, canonical = normalise(raw)
        if status == "ok" and canonical == label_canonical:
            return {"status": "ok", "extracted": raw, "canonical": canonical, "correct": True}
    return verify(response, label_canonical)


# --- frames -----------------------------------------------------------------------------------


def planted_frames(
    folder: Path, *, sloppy: bool = False
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    check = verify_sloppy if sloppy else verify
    with open(folder / "tasks.jsonl", "rb") as tf, open(folder / "samples.jsonl", "rb") as sf:
        parsed = read_answer_taskset(
            tf, tasks_name="tasks.jsonl", samples_file=sf, samples_name="samples.jsonl"
        )
    tasks, keys = [], {}
    for key, t in enumerate(parsed.tasks):
        status, canonical = normalise(t.label)
        keys[t.task_id] = key
        tasks.append(
            {
                "task_key": key,
                "task_id": t.task_id,
                "question": t.question,
                "label": t.label,
                "label_status": status,
                "label_canonical": canonical,
            }
        )
    by_key = {t["task_key"]: t for t in tasks}
    verdicts = []
    for run_id, s in enumerate(parsed.samples, start=1):
        key = keys[s.task_id]
        verdict = (
            check(s.response, by_key[key]["label_canonical"])
            if by_key[key]["label_status"] == "ok"
            else verify(s.response, "\x00")
        )
        verdicts.append(
            {
                "run_id": run_id,
                "task_key": key,
                "sample_id": s.sample_id,
                "model": s.model,
                "response_chars": len(s.response),
                **verdict,
            }
        )
    probes = []
    run_id = len(verdicts)
    for t in tasks:
        if t["label_status"] != "ok":
            continue
        for probe, text in answer_probe_texts(
            t["label"], "", t["question"], seed=t["task_key"]
        ).items():
            run_id += 1
            v = check(text, t["label_canonical"])
            probes.append(
                {
                    "run_id": run_id,
                    "task_key": t["task_key"],
                    "probe": probe,
                    **{k: v[k] for k in ("status", "extracted", "correct")},
                }
            )
    return pd.DataFrame(tasks), pd.DataFrame(verdicts), pd.DataFrame(probes)


def gsm8k_frames(folder: Path = GSM8K) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """GSM8K with each output set's own extracted `answer`, compared numerically (stand-in)."""
    with open(folder / "gsm8k_test.jsonl.gz", "rb") as tf:
        parsed = read_answer_taskset(tf, tasks_name="gsm8k_test.jsonl.gz")
    tasks, keys = [], {}
    for key, t in enumerate(parsed.tasks):
        status, canonical = normalise(t.label)
        keys[t.task_id] = key
        tasks.append(
            {
                "task_key": key,
                "task_id": t.task_id,
                "question": t.question,
                "label": t.label,
                "label_status": status,
                "label_canonical": canonical,
            }
        )
    verdicts = []
    for path in sorted(folder.glob("samples_*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            for line in fh:
                s = json.loads(line)
                key = keys[s["task_id"]]
                raw = "" if s.get("answer") is None else str(s["answer"])
                status, canonical = normalise(raw) if raw else ("no_answer", "")
                if status == "ok" and "/" not in canonical and not _NUMBER.match(canonical):
                    status, canonical = "no_answer", ""
                verdicts.append(
                    {
                        "run_id": len(verdicts) + 1,
                        "task_key": key,
                        "sample_id": s["model"],
                        "model": s["model"],
                        "status": status,
                        "extracted": raw,
                        "canonical": canonical,
                        "correct": status == "ok" and canonical == tasks[key]["label_canonical"],
                        "response_chars": len(s.get("response") or ""),
                    }
                )
    return (
        pd.DataFrame(tasks),
        pd.DataFrame(verdicts),
        pd.DataFrame(columns=["run_id", "task_key", "probe", "status", "extracted", "correct"]),
    )


def flags_by_task(tasks: pd.DataFrame, analysis) -> dict[str, set[str]]:
    ids = dict(zip(tasks["task_key"], tasks["task_id"], strict=True))
    flags: dict[str, set[str]] = {t: set() for t in ids.values()}
    for f in analysis.findings:
        flags[ids[f.task_key]].add(str(f.code))
    return flags


def run_planted(
    seed: int, tasks: int, work: Path, *, sloppy: bool = False, per_model: int = 4
) -> str:
    folder = work / f"seed{seed}-{per_model}"
    truth = planted.generate(folder, seed=seed, tasks=tasks, samples_per_model=per_model)
    frames = planted_frames(folder, sloppy=sloppy)
    started = time.perf_counter()
    analysis = analyse_answers(*frames)
    seconds = time.perf_counter() - started
    meta = json.loads((folder / "meta.json").read_text())
    verdicts = frames[1].set_index(["task_key", "sample_id"])
    keys = dict(zip(frames[0]["task_id"], frames[0]["task_key"], strict=True))
    rewarded = sum(
        bool(verdicts.loc[(keys[g["task_id"]], g["sample_id"]), "correct"])
        for g in meta["gaming_samples"]
    )
    lines = [
        report(
            score(truth, flags_by_task(frames[0], analysis)),
            f"planted seed {seed} ({'dev' if seed == 0 else 'held out'}{', sloppy stand-in verifier' if sloppy else ''}, {per_model} samples a model): "
            f"{len(truth)} tasks, {len(frames[1])} samples, analysed in {seconds:.1f} s",
        ),
        f"verifier-gaming samples rewarded: {rewarded} of {len(meta['gaming_samples'])}",
        "fitted reliability: "
        + ", ".join(
            f"{m} {p:.2f} (true {meta['models'].get(m, '?')})"
            for m, p in sorted(analysis.model_reliability.items())
        ),
        f"label prior {analysis.label_prior}, wrong-answer coincidence {analysis.coincidence}",
    ]
    for h in analysis.harness_findings:
        lines.append("harness finding: " + h["explanation"])
    return "\n".join(lines)


def run_gsm8k(examples: int = 10) -> str:
    started = time.perf_counter()
    tasks, verdicts, probes = gsm8k_frames()
    analysis = analyse_answers(tasks, verdicts, probes)
    seconds = time.perf_counter() - started
    ids = dict(zip(tasks["task_key"], tasks["task_id"], strict=True))
    labels = dict(zip(tasks["task_key"], tasks["label"], strict=True))
    by_code: dict[str, list] = {}
    for f in analysis.findings:
        by_code.setdefault(str(f.code), []).append(f)
    lines = [
        f"GSM8K ({len(tasks)} questions, {len(verdicts)} verdicts from {verdicts['model'].nunique()} output sets; "
        f"stand-in verdicts from their own extracted answers), read and analysed in {seconds:.1f} s",
        "fitted reliability: "
        + ", ".join(f"{m} {p:.2f}" for m, p in sorted(analysis.model_reliability.items())),
        f"label prior {analysis.label_prior}, wrong-answer coincidence {analysis.coincidence}",
    ]
    for code in sorted(by_code):
        found = by_code[code]
        lines.append(f"{code}: {len(found)}")
        for f in found[:examples]:
            top = [
                r
                for r in analysis.distribution[f.task_key]
                if not r["is_label"] and r["answer"] is not None
            ][:1]
            consensus = (
                f"{top[0]['answer']} ({top[0]['count']} of {sum(r['count'] for r in analysis.distribution[f.task_key])})"
                if top
                else "-"
            )
            lines.append(
                f"  {ids[f.task_key]:<12} label {labels[f.task_key]:<8} top other answer {consensus:<16} conf {f.confidence:.2f}"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description="The answer analysis on the planted sets and GSM8K (stand-in verifier)."
    )
    parser.add_argument("--tasks", type=int, default=600, help="questions per planted set")
    parser.add_argument(
        "--work",
        type=Path,
        default=None,
        help="folder for the generated sets (a temporary one if absent)",
    )
    parser.add_argument(
        "--sloppy", action="store_true", help="also run seed 0 with a sloppy stand-in verifier"
    )
    parser.add_argument("--skip-gsm8k", action="store_true", help="only the planted sets")
    parser.add_argument(
        "--samples-per-model", type=int, default=4, help="answers of each of the 10 models"
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or Path(tmp)
        for seed in (0, 1):
            said = run_planted(seed, args.tasks, work, per_model=args.samples_per_model)
            print(said, end="\n\n", flush=True)
        if args.sloppy:
            print(run_planted(0, args.tasks, work, sloppy=True), end="\n\n", flush=True)
    if not args.skip_gsm8k:
        print(run_gsm8k())


if __name__ == "__main__":
    sys.exit(main())
