"""Flags on answer-graded tasks (math and QA) from the verifier's verdicts (pandas, numpy and
scikit-learn only; plain data frames in, findings out).

Every sample's verdict says what final answer it committed to (`canonical`) and whether that
equals the label (`correct`). The label may be wrong, so the samples vote on the true answer,
weighed by how reliable their model is:

- **Reliability** is a one-coin Dawid-Skene estimate, fitted by a few rounds of EM: a model's
  chance of giving the true answer is its expected agreement with the true answer on the *other*
  tasks of the set (leave one task out, so a task's own votes never vouch for its model), smoothed
  by a Beta(2, 2) prior. The first round takes the labels as the truth; later rounds take the
  posterior, so mislabeled tasks stop counting against the models that saw through them.
- **Wrong answers are shared.** One-coin models assume a wrong answer is one of many; models share
  mistakes (an off-by-one, a step everybody skips), so `q`, the chance that a wrong answer is a
  given plausible value, is estimated from the set: the chance that two different models' wrong
  answers on a task coincide, square-rooted (one dominant distractor of share d makes that d²).
- **A model's samples are one opinion, not n**: its n answered samples on a task count as
  sqrt(n) votes (`sample_exponent`), split by its shares, each of weight log(p / ((1 - p) q))
  (zero when below). Samples whose model is unknown (`model` "") are pooled as one model. A set
  with no model known at all votes sample by sample, all samples sharing one reliability, and
  needs a higher posterior for `mislabeled` (nothing shows that agreeing samples are
  independent).
- **Output sets of one base model are not independent** (two prompts of one model, a model and
  its verifier-best-of-n): `_dependence` estimates every pair's error agreement rho on the
  decided tasks of the set, the excess of their shared wrong answers over what the task's other
  wrong models would give (so a task's common distractor is not taken for dependence). Each
  vote counts 1 / (1 + the sum of rho times the share of the other voters on the same answer):
  two models that always share their mistakes and agree are one voice, and the *effective
  number of independent models* behind an answer is the sum of those discounts.
- **The label has a prior**: the set's label accuracy, estimated on the tasks the vote decides
  (an answer's posterior at least 0.9) as the share whose label is that answer (bounded to
  [0.5, 0.99]; the first round starts from 0.7 so that the estimate can move); an undecided task
  (weak models scattering, a broken question) says nothing about the labels. The rest of the
  prior is spread over the answers at least two voters reached.

The posterior of an answer is then softmax(log prior + the weighted votes for it). The flags:

- `mislabeled`: a non-label answer's posterior reaches 0.9 (0.97 with no model known), at least
  two models give it half their samples or more, they are at least 1.5 independent models (see
  above), and it holds half the reliability-weighted vote or more (a weak models' majority,
  whose weight is near zero, never makes it). Where the vote hesitates (a hard question: even
  reliable models only 3:1 on the answer, weak ones on the label) the between-model comparison
  of `ambiguous`'s test decides instead: the posterior that the answer is the truth and the
  label the task's shared mistake rather than the other way round (each model's split following
  its reliability; the label prior as in the vote), at least 0.9, with the same support above.
  Confidence: the larger posterior. The evidence names the models, their weights, their shares
  of an independent voice and whom they share mistakes with.
- `ambiguous` (checked first): the label and each other answer among the three with most of
  the vote weighed by log-odds of reliability squared (`support_weight`: a shared mistake earns
  no support) that has 10% of it or more, each reached by two voters, are tested pair by pair
  (the second reading of a question can have less support than its common mistake; two other
  answers splitting the samples say the label is wrong or the question broken, not that it has
  two readings) by a **test between models** (`answer_readings`): "two readings, each model
  with its own lean" against "one of them is the truth and the other the task's shared mistake"
  (or "neither is right"). Under one truth every model's split follows its reliability (a
  reliable model mostly on the truth, a weak one on the mistake) at one difficulty for the
  task, whose distribution over the set is estimated from the set; under two readings a
  reliable model may sit on either. A clean hard question (every model about 3:1, weak ones on
  the distractor) is the first; a question that different capable models read differently the
  second. A pair is flagged when two readings are better supported (2 log Bayes factor >= 4)
  and the p-value (a parametric bootstrap under one truth) is at most 0.01 shared among the
  pairs tested. The evidence gives, per model, its samples on each answer, what one truth would
  give it at its reliability, its lean and its share of an independent voice, and the test's
  statistic and p-value.
- `unsolvable`: no sample is right and no other answer has half the weighted vote; confidence:
  the chance that at least one sample would have been right, from the models' reliabilities,
  a model's n samples counting as sqrt(n) tries and a dependent model as its share of one
  independent voice (output sets of one base model fail together).
- `no_signal`: at least 8 samples, all right or all wrong, and no blocking flag above (the task
  leaves the set anyway).
- `answer_leak`: a phrase of the question states the label ("the answer is 42", "(Answer: 42)",
  "hint ... 42", "the total is 42", "= 42?"); the label merely appearing is not enough, a word
  problem's answer is often one of its givens.
- `duplicate`: TF-IDF near-duplicates (`signals.near_duplicates`, 0.9) that hold the same numbers.
- `reward_hackable`: a probe the verifier rewarded; one rewarded on nearly every task is a harness
  finding instead.

Verdicts with status `sandbox_error` count as nothing; other statuses than `ok` are samples
without an answer.
Tasks whose label the verifier cannot parse (`label_status` not "ok") are `unverifiable_label`,
take no part in the estimates, and get no verdict-based flag (every sample would look wrong).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from inspector.detect.answer_readings import (
    DELTA_GRID,
    ReadingTest,
    difficulty_prior,
    reading_test,
)
from inspector.detect.codes import FlagCode
from inspector.detect.depth import severity
from inspector.detect.flags import FlagFinding
from inspector.detect.signals.duplicates import near_duplicates

__all__ = [
    "PROBE_COLUMNS",
    "TASK_COLUMNS",
    "VERDICT_COLUMNS",
    "AnswerAnalysis",
    "AnswerSettings",
    "AnswerStats",
    "analyse_answers",
    "stated_answer",
]

TASK_COLUMNS = ["task_key", "task_id", "question", "label", "label_status", "label_canonical"]
VERDICT_COLUMNS = [
    "run_id",
    "task_key",
    "sample_id",
    "model",
    "status",
    "extracted",
    "canonical",
    "correct",
    "response_chars",
]
PROBE_COLUMNS = ["run_id", "task_key", "probe", "status", "extracted", "correct"]
NOT_COUNTED = "sandbox_error"
OK = "ok"
_LABEL = "\x00label"  # the answer key of samples the verifier found equal to the label
MAX_SHOWN_ANSWERS = 8
MAX_EVIDENCE_RUNS = 5


@dataclass(frozen=True)
class AnswerSettings:
    mislabeled_posterior: float = 0.9
    mislabeled_posterior_unknown_models: float = 0.97
    min_supporters: int = 2  # distinct models (samples, with no model known) on the consensus
    support_share: float = 0.5  # a model supports an answer when this share of it gives it
    min_samples: int = 4  # answered-or-not samples a task needs for any verdict-based flag
    # `ambiguous` tests the two answers with most of the vote weighed by reliability (see
    # `support_weight`) when the runner-up has this share of it and the two together this
    # share (two answers, not a scatter: that is `unsolvable`'s) ...
    ambiguous_second_share: float = 0.1
    ambiguous_pair_share: float = 0.0
    # ... and flags the task when the between-model test (`answer_readings`) rejects one truth
    # and a shared mistake at this level.
    ambiguous_pvalue: float = 0.01
    # ... and its statistic (2 log of the Bayes factor of two readings against the best
    # explanation by one truth) is at least this (a Bayes factor of e squared, "positive" on
    # Kass and Raftery's scale): the p-value alone would also reject a null that fits badly
    # where two readings fit no better.
    ambiguous_evidence: float = 4.0
    ambiguous_contenders: int = 3  # the pairs among this many best supported answers
    # The set's distribution of task difficulty, for that test, is estimated on this many tasks.
    difficulty_max_tasks: int = 5000
    unsolvable_consensus: float = 0.5  # a non-label answer with this weighted share is consensus
    # unsolvable only where a fine question of this set, as hard as the set's questions come
    # (its difficulty drawn from the set's spread), would have been reached by a sample with
    # at least this chance: a hard question is not a broken one.
    unsolvable_min_confidence: float = 0.9
    no_signal_min_samples: int = 8
    label_prior_bounds: tuple[float, float] = (0.5, 0.99)
    # The label prior is the label's share of the tasks the vote decides (an answer's posterior
    # at least this): an undecided task (a broken question, weak models only) says nothing
    # about how often the labels are right.
    confident_posterior: float = 0.9
    # `mislabeled` also needs this share of the reliability-weighted vote on the consensus, and
    # this many independent models behind it (the effective number: two output sets of one base
    # model that share their mistakes count as about one).
    mislabeled_vote_share: float = 0.5
    min_independent: float = 1.5
    # Two models' error agreement (`_dependence`) is smoothed towards independence by this many
    # pseudo-tasks on which both were wrong; dependence is estimated for up to this many models.
    dependence_prior: float = 1.0
    dependence_max_models: int = 64
    reliability_prior: tuple[float, float] = (2.0, 2.0)  # Beta(a, b): a agreements, b not
    coincidence_bounds: tuple[float, float] = (0.02, 0.9)
    em_rounds: int = 6
    # A model's n samples on a task count as n ** sample_exponent independent votes.
    sample_exponent: float = 0.5
    # The label prior of the first round: low, so that a strong consensus can move the posterior
    # before the set's label accuracy is estimated (it starts from the labels, so a high start
    # would keep every posterior, and so the estimate, on the labels).
    start_label_prior: float = 0.7
    duplicate_similarity: float = 0.9


@dataclass(frozen=True)
class AnswerStats:
    task_key: int
    samples: int  # counted: every verdict but sandbox errors
    answered: int  # samples with a final answer (status ok)
    sample_pass_rate: float | None  # share of counted samples the verifier found correct
    answer_count: int  # distinct final answers (the label's equivalents count as one)
    top_answer: str | None
    top_share: float | None  # of answered samples
    models: tuple[str, ...]
    label_posterior: float | None = None


@dataclass(frozen=True)
class AnswerAnalysis:
    findings: list[FlagFinding]
    stats: dict[int, AnswerStats]
    harness_findings: list[dict]
    distribution: dict[int, list[dict]]
    # The fitted model, for the report and the evidence: model -> reliability on the whole set,
    # the label prior and the coincidence of wrong answers.
    model_reliability: dict[str, float] = field(default_factory=dict)
    label_prior: float | None = None
    coincidence: float | None = None
    # model -> {other model: error agreement}, for the pairs that share their mistakes beyond
    # chance (at least 0.2; see `_dependence`).
    model_dependence: dict[str, dict[str, float]] = field(default_factory=dict)


def analyse_answers(
    tasks: pd.DataFrame,
    verdicts: pd.DataFrame,
    probes: pd.DataFrame,
    *,
    harness_share: float = 0.9,
    harness_min_tasks: int = 5,
    settings: AnswerSettings | None = None,
    other_questions: Mapping[Hashable, tuple[str, str]] | None = None,
    distributions: bool = True,
) -> AnswerAnalysis:
    """Flags, stats, harness findings and the answer distribution of every task (see the module
    docstring for the model). `other_questions` (key -> (question, label)) are other sets'
    questions, for `duplicate` across sets. Findings are sorted by task_key, then severity.
    `distributions=False` keeps no task's distribution beyond its own findings' evidence (the
    platform stores only the findings: about 1 KB a question it would not read)."""
    settings = settings or AnswerSettings()
    tasks = _frame(tasks, TASK_COLUMNS)
    verdicts = _frame(verdicts, VERDICT_COLUMNS)
    probes = _frame(probes, PROBE_COLUMNS)
    task_rows = {int(r.task_key): r for r in tasks.itertuples(index=False)}
    verifiable = {k for k, r in task_rows.items() if r.label_status == OK}

    samples = _answer_keys(verdicts[verdicts["status"] != NOT_COUNTED])
    del verdicts  # the frames below are what the rest reads: 1.6 million rows at 100,000 tasks
    models_known = bool((samples["model"] != "").any())
    fit = _fit(samples, verifiable, models_known, settings)
    fit.difficulty = _difficulty(fit, verifiable, settings)
    # How hard this set's questions come among those some sample solved: a broken question
    # must not count as a hard fine one when `unsolvable` asks how likely a fine one is missed.
    solved = set(fit.votes.loc[fit.votes["key"] == _LABEL, "task_key"].unique().tolist())
    fit.difficulty_solved = (
        _difficulty(fit, verifiable & solved, settings) if verifiable & solved else None
    )

    findings: list[FlagFinding] = []
    stats: dict[int, AnswerStats] = {}
    distribution: dict[int, list[dict]] = {}
    by_task = _samples_by_task(samples)
    votes_by_task = _votes_by_task(fit.votes)
    # From here on every task is read from its own plain lists, each let go once its task is
    # done: the set-wide frames are not needed any more.
    del samples
    fit.votes = fit.votes.iloc[:0]
    for task_key, row in task_rows.items():
        group = by_task.pop(task_key)
        label_shown = row.label_canonical or row.label
        shown = _distribution(group, label_shown)
        if distributions:
            distribution[task_key] = shown
        stats[task_key] = _stats(task_key, group, label_shown, fit)
        if task_key not in verifiable:
            findings.append(_unverifiable(task_key, row))
            continue
        if not group:
            continue
        findings.extend(
            _verdict_flags(
                task_key,
                row,
                group,
                votes_by_task.pop(task_key),
                shown,
                fit,
                models_known,
                settings,
            )
        )
    findings.extend(_leaks(task_rows))
    findings.extend(_duplicates(task_rows, other_questions or {}, settings))
    hackable, harness = _probe_flags(probes, harness_share, harness_min_tasks)
    findings.extend(hackable)
    findings.sort(key=lambda f: (f.task_key, -f.severity, f.code))
    return AnswerAnalysis(
        findings=findings,
        stats=stats,
        harness_findings=harness,
        distribution=distribution,
        model_reliability=fit.reliability,
        label_prior=round(fit.label_prior, 4),
        coincidence=round(fit.coincidence, 4),
        model_dependence=_notable_dependence(fit.dependence),
    )


# --- the inputs -------------------------------------------------------------------------------


def _frame(data: Any, columns: list[str]) -> pd.DataFrame:
    # A shallow copy: pandas copies a column on write, so the caller's frame is never changed.
    frame = pd.DataFrame(data) if not isinstance(data, pd.DataFrame) else data.copy(deep=False)
    for column in columns:
        if column not in frame.columns:
            if column in ("correct",):
                frame[column] = False
            elif column in ("response_chars", "run_id"):
                frame[column] = 0
            elif column == "task_key":
                raise ValueError("every frame needs a task_key column")
            else:
                frame[column] = ""
    for column in ("model", "status", "extracted", "canonical", "label_canonical", "label"):
        if column in frame.columns:
            frame[column] = frame[column].fillna("").astype(str)
    if "correct" in frame.columns:
        frame["correct"] = frame["correct"].fillna(False).astype(bool)
    if "task_key" in frame.columns:
        frame["task_key"] = frame["task_key"].astype(int)
    return frame


def _answer_keys(samples: pd.DataFrame) -> pd.DataFrame:
    """Each sample's answer key: _LABEL if correct, its canonical answer if it gave one, else
    None (no answer, a timeout, an error)."""
    samples = samples.copy(deep=False)  # new columns only: the caller's frame stays as it was
    answered = (samples["status"] == OK) & (samples["canonical"] != "")
    key = samples["canonical"].where(answered, None)
    samples["key"] = key.where(~samples["correct"], _LABEL)
    samples["answered"] = samples["key"].notna()
    return samples


# --- the vote ---------------------------------------------------------------------------------


@dataclass
class _Fit:
    votes: pd.DataFrame  # task_key, voter, group, key, share, weight
    posterior: dict[int, dict[str, float]]
    reliability: dict[str, float]  # group -> reliability over the whole set
    task_reliability: dict[tuple[int, str], float]  # (task, group) -> leave-one-out estimate
    label_prior: float
    coincidence: float
    # voter -> voter -> error agreement in [0, 1] (zero on the diagonal); empty when the voters
    # are not models
    dependence: dict[str, dict[str, float]] = field(default_factory=dict)
    # log weights of a task's difficulty on `answer_readings.DELTA_GRID` (see `_difficulty`)
    difficulty: np.ndarray | None = None
    difficulty_solved: np.ndarray | None = None  # the same, over the questions some sample solved


def _fit(
    samples: pd.DataFrame, verifiable: set[int], models_known: bool, settings: AnswerSettings
) -> _Fit:
    # Only the columns the vote reads: a copy of every column was a few hundred MB at 100,000
    # questions.
    answered = samples.loc[samples["answered"], ["task_key", "run_id", "sample_id", "model", "key"]]
    if models_known:
        answered["voter"] = answered["model"]
    else:
        answered["voter"] = answered["run_id"].astype(str) + ":" + answered["sample_id"].astype(str)
    answered["group"] = answered["model"]
    counts = answered.groupby(["task_key", "voter", "group", "key"], sort=False).size()
    votes = counts.rename("n").reset_index()
    answered_n = votes.groupby(["task_key", "voter"])["n"].transform("sum")
    votes["share"] = votes["n"] / answered_n
    # A model's samples are not independent draws (they share its misconceptions): its n samples
    # on a task count as n ** sample_exponent (by default sqrt(n)) independent votes, split by
    # its shares.
    votes["strength"] = votes["share"] * answered_n**settings.sample_exponent
    votes["eligible"] = votes["task_key"].isin(verifiable)
    votes["is_label"] = votes["key"] == _LABEL

    # Candidates: every answer seen, and the label of every task that has votes.
    cands = votes[["task_key", "key"]].drop_duplicates()
    label_rows = pd.DataFrame({"task_key": votes["task_key"].unique(), "key": _LABEL})
    cands = pd.concat([cands, label_rows]).drop_duplicates().reset_index(drop=True)
    cands["is_label"] = cands["key"] == _LABEL
    # The truth, if not the label, is taken to be one of the answers at least two voters reached
    # (an answer only one voter gave is a mistake of its own far more often than the truth).
    reached = votes.groupby(["task_key", "key"])["voter"].nunique().rename("voters").reset_index()
    cands = cands.merge(reached, on=["task_key", "key"], how="left").fillna({"voters": 0})
    others = cands[~cands["is_label"] & (cands["voters"] >= 2)].groupby("task_key").size()
    cands["others"] = cands["task_key"].map(others).fillna(0).clip(lower=1)
    cands["post"] = cands["is_label"].astype(float)  # round one: the labels are the truth

    a, b = settings.reliability_prior
    label_prior = settings.start_label_prior
    coincidence = 0.5
    task_rel = pd.Series(dtype=float)
    dependence = pd.DataFrame(dtype=float)
    votes["discount"] = 1.0
    for round_ in range(max(1, settings.em_rounds)):
        merged = votes.merge(cands[["task_key", "key", "post"]], on=["task_key", "key"], how="left")
        merged["agree"] = merged["share"] * merged["post"].fillna(0.0)
        per_voter = (
            merged.groupby(["task_key", "voter", "group"], sort=False)
            .agg(agree=("agree", "sum"), eligible=("eligible", "first"))
            .reset_index()
        )
        per_voter = per_voter[per_voter["eligible"]]
        # A task counts by the posterior that its truth is among the answers given: one whose
        # probable truth nobody reached (a broken question) says nothing about who is reliable.
        seen = cands[cands["voters"] >= 1].groupby("task_key")["post"].sum()
        per_voter["n"] = per_voter["task_key"].map(seen).fillna(0.0)
        task_group = per_voter.groupby(["task_key", "group"]).agg(
            agree=("agree", "sum"), n=("n", "sum")
        )
        totals = task_group.groupby(level="group").sum()
        joined = task_group.join(totals.add_suffix("_all"))
        task_rel = (joined["agree_all"] - joined["agree"] + a) / (
            joined["n_all"] - joined["n"] + a + b
        )
        coincidence = _coincidence(votes, cands, settings)
        if round_ > 0:
            label_prior = _label_prior(cands, verifiable, settings)
            if models_known:
                dependence = _dependence(votes, cands, verifiable, coincidence, settings)
                votes["discount"] = _discount(votes, dependence)
        votes = votes.drop(columns=["weight"], errors="ignore")
        rel = votes.set_index(["task_key", "group"]).index.map(task_rel.to_dict())
        rel = pd.Series(rel, index=votes.index, dtype=float)
        # A task outside the estimate (unverifiable label) takes its group's whole-set figure.
        whole = ((totals["agree"] + a) / (totals["n"] + a + b)).to_dict()
        rel = rel.fillna(votes["group"].map(whole)).fillna(a / (a + b))
        p = rel.clip(0.01, 0.99)
        votes["weight"] = np.maximum(0.0, np.log(p / (1 - p)) - math.log(coincidence))
        votes["rel"] = p
        # For how well supported each answer is: the vote weighed by the log-odds of reliability
        # alone (no credit for agreeing, which `weight` adds: a shared mistake is no support).
        votes["support_weight"] = np.maximum(0.0, np.log(p / (1 - p))) ** 2
        scored = (
            votes.assign(s=votes["weight"] * votes["strength"] * votes["discount"])
            .groupby(["task_key", "key"])["s"]
            .sum()
        )
        cands = cands.drop(columns=["score"], errors="ignore")
        cands["score"] = pd.Series(
            cands.set_index(["task_key", "key"]).index.map(scored.to_dict()),
            index=cands.index,
            dtype=float,
        ).fillna(0.0)
        prior = np.where(cands["is_label"], label_prior, (1 - label_prior) / cands["others"])
        cands["score"] += np.log(prior)
        top = cands.groupby("task_key")["score"].transform("max")
        expo = np.exp(cands["score"] - top)
        cands["post"] = expo / expo.groupby(cands["task_key"]).transform("sum")

    posterior: dict[int, dict[str, float]] = {}
    for row in cands.itertuples(index=False):
        posterior.setdefault(int(row.task_key), {})[row.key] = float(row.post)
    whole = (
        ((totals["agree"] + a) / (totals["n"] + a + b)) if len(task_rel) else pd.Series(dtype=float)
    )
    return _Fit(
        votes=votes,
        posterior=posterior,
        reliability={str(k): round(float(v), 4) for k, v in whole.items()},
        task_reliability={(int(t), str(g)): float(v) for (t, g), v in task_rel.items()},
        label_prior=label_prior,
        coincidence=coincidence,
        dependence={
            str(i): {str(j): float(dependence.at[i, j]) for j in dependence.columns}
            for i in dependence.index
        },
    )


def _difficulty(fit: _Fit, verifiable: set[int], settings: AnswerSettings) -> np.ndarray:
    """How a task's difficulty spreads over the set (`answer_readings.difficulty_prior`), from
    every verifiable task's votes with its most probable answer as its truth (a hard task and a
    broken one count too: the prior must know how hard this set's tasks get), each model at its
    leave-one-out reliability and its share of one independent voice; on up to
    `difficulty_max_tasks` tasks, evenly spaced."""
    votes = fit.votes[fit.votes["task_key"].isin(verifiable)]
    keys = np.sort(votes["task_key"].unique())
    if len(keys) > settings.difficulty_max_tasks:
        keys = keys[np.linspace(0, len(keys) - 1, settings.difficulty_max_tasks).astype(int)]
        votes = votes[votes["task_key"].isin(set(keys.tolist()))]
    truth = {t: max(p, key=lambda k: (p[k], k == _LABEL)) for t, p in fit.posterior.items()}
    right = votes["n"].where(votes["key"] == votes["task_key"].map(truth), 0)
    rows = (
        votes.assign(right=right)
        .groupby(["task_key", "voter"], sort=False)
        .agg(right=("right", "sum"), n=("n", "sum"), rel=("rel", "first"))
        .reset_index()
    )
    voice = np.ones(len(rows))
    if fit.dependence:
        names = sorted(fit.dependence)
        rho = np.array([[fit.dependence[i].get(j, 0.0) for j in names] for i in names])
        present = (
            rows.assign(one=1.0)
            .pivot_table(index="task_key", columns="voter", values="one", fill_value=0.0)
            .reindex(columns=names, fill_value=0.0)
        )
        shared = pd.DataFrame(present.to_numpy() @ rho, index=present.index, columns=names)
        stacked = shared.stack()
        at = pd.MultiIndex.from_arrays([rows["task_key"], rows["voter"]])
        voice = 1.0 / (1.0 + stacked.reindex(at).fillna(0.0).to_numpy())
    p = rows["rel"].to_numpy(dtype=float)
    return difficulty_prior(
        rows["right"].to_numpy(dtype=float),
        (rows["n"] - rows["right"]).to_numpy(dtype=float),
        np.log(p / (1 - p)),
        voice,
        rows["task_key"].to_numpy(),
    )


def _label_prior(cands: pd.DataFrame, verifiable: set[int], settings: AnswerSettings) -> float:
    """The share of decided tasks (an answer's posterior at least `confident_posterior`) whose
    label is the answer decided, smoothed by one task each way and bounded. Counting every task
    by its label's posterior would take an undecided one (weak models scattering, a broken
    question) for half a wrong label."""
    low, high = settings.label_prior_bounds
    mine = cands[cands["task_key"].isin(verifiable)]
    if mine.empty:
        return high
    top = mine.loc[mine.groupby("task_key")["post"].idxmax()]
    decided = top[top["post"] >= settings.confident_posterior]
    right = float(decided["is_label"].sum())
    return float(np.clip((right + 1.0) / (len(decided) + 2.0), low, high))


def _dependence(
    votes: pd.DataFrame,
    cands: pd.DataFrame,
    verifiable: set[int],
    coincidence: float,
    settings: AnswerSettings,
) -> pd.DataFrame:
    """Error agreement of every pair of models, on the decided tasks of the set (an answer's
    posterior at least `confident_posterior`), from their shares of samples on the wrong
    answers: over the tasks on which both gave a wrong answer, S, the chance that a sample of
    each lands on the same wrong answer, against E, that chance if one of them gave its wrong
    answers as the other wrong models of the task do (as two wrong answers of the set coincide,
    q squared, where no other model was wrong): rho = (S - E) /
    (B - E + `dependence_prior`), B the chance that both are wrong, clipped to [0, 1]. A
    task's own distractor (one common mistake) or a second reading many models take raises E,
    not rho; two prompts of one model, or a model and its best-of-n variant, make the same
    mistakes beyond that: rho near 1. The figure is over the whole set, a task's own votes
    included: one task moves it by at most 1 / (B + the prior)."""
    voters = sorted(votes["voter"].unique())
    empty = pd.DataFrame(0.0, index=voters, columns=voters)
    if len(voters) < 2 or len(voters) > settings.dependence_max_models:
        return empty
    mine = cands[cands["task_key"].isin(verifiable)]
    top = mine.loc[mine.groupby("task_key")["post"].idxmax()]
    top = top[top["post"] >= settings.confident_posterior]
    truth = dict(zip(top["task_key"], top["key"], strict=True))
    decided = votes[votes["task_key"].isin(truth)]
    wrong = decided[decided["key"] != decided["task_key"].map(truth)]
    if wrong.empty:
        return empty
    # rows: (task, wrong answer); columns: voters; values: the voter's share of its samples
    shares = (
        wrong.groupby(["task_key", "key"], sort=True)["share"]
        .sum()
        .to_frame()
        .join(wrong.groupby(["task_key", "key", "voter"])["share"].sum().unstack("voter"))
        .drop(columns="share")
        .reindex(columns=voters)
        .fillna(0.0)
    )
    s = shares.to_numpy()
    task = pd.factorize(shares.index.get_level_values("task_key"))[0]
    tasks = int(task.max()) + 1

    def per_task(values: np.ndarray) -> np.ndarray:
        return np.bincount(task, weights=values, minlength=tasks)

    mass = np.stack([per_task(s[:, i]) for i in range(s.shape[1])], axis=1)  # wrong share
    total = s.sum(axis=1)
    m = len(voters)
    rho = np.zeros((m, m))
    for i in range(m):
        for j in range(i + 1, m):
            rest = total - s[:, i] - s[:, j]  # the other voters' wrong shares on each answer
            rest_mass = per_task(rest)
            usable = (mass[:, i] > 0) & (mass[:, j] > 0)
            if not usable.any():
                continue
            same = per_task(s[:, i] * s[:, j])
            # the chance that one would give the other's wrong answer, as the others do
            # (where nobody else was wrong, as two wrong answers of the set coincide: q squared)
            both = mass[:, i] * mass[:, j]
            expected = np.where(
                rest_mass > 0,
                0.5
                * (per_task(s[:, i] * rest) * mass[:, j] + per_task(s[:, j] * rest) * mass[:, i])
                / np.where(rest_mass > 0, rest_mass, 1.0),
                both * coincidence**2,
            )
            excess = float((same - expected)[usable].sum())
            room = float((both - expected)[usable].sum())
            rho[i, j] = rho[j, i] = min(1.0, max(0.0, excess) / (room + settings.dependence_prior))
    return pd.DataFrame(rho, index=voters, columns=voters)


def _discount(votes: pd.DataFrame, dependence: pd.DataFrame) -> pd.Series:
    """Each vote's share of one independent voice: 1 / (1 + the sum, over the other voters on
    the same answer of the task, of their error agreement with this one times their share of
    it). Two models that share every mistake and agree count as one voice together, two that
    disagree as two, independent ones are not discounted."""
    if dependence.empty or not dependence.to_numpy().any():
        return pd.Series(1.0, index=votes.index)
    voters = list(dependence.index)
    shares = (
        votes.groupby(["task_key", "key", "voter"], sort=False)["share"]
        .sum()
        .unstack("voter", fill_value=0.0)
    )
    shares = shares.reindex(columns=voters, fill_value=0.0)
    others = shares.to_numpy() @ dependence.to_numpy()  # row (task, key), column: the voter
    rows = shares.index.get_indexer(pd.MultiIndex.from_arrays([votes["task_key"], votes["key"]]))
    cols = pd.Index(voters).get_indexer(votes["voter"])
    return pd.Series(1.0 / (1.0 + others[rows, cols]), index=votes.index)


def _notable_dependence(dependence: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for model, row in dependence.items():
        strong = {o: round(r, 3) for o, r in sorted(row.items()) if o != model and r >= 0.2}
        if strong:
            out[model] = strong
    return out


def _coincidence(votes: pd.DataFrame, cands: pd.DataFrame, settings: AnswerSettings) -> float:
    """The chance that two different voters' wrong answers on a task are the same value, taking
    each task's most probable answer as its truth; square-rooted (see the module docstring)."""
    truth = cands.loc[cands.groupby("task_key")["post"].idxmax(), ["task_key", "key"]]
    truth = dict(zip(truth["task_key"], truth["key"], strict=True))
    wrong = votes[votes["key"] != votes["task_key"].map(truth)]
    if wrong.empty:
        return settings.coincidence_bounds[0]
    per_answer = (
        wrong.assign(square=wrong["share"] ** 2)
        .groupby(["task_key", "key"])
        .agg(total=("share", "sum"), squares=("square", "sum"))
    )
    same = (per_answer["total"] ** 2 - per_answer["squares"]).groupby(level="task_key").sum()
    per_voter = wrong.groupby(["task_key", "voter"])["share"].sum()
    mass = per_voter.groupby(level="task_key").sum()
    pairs = mass**2 - (per_voter**2).groupby(level="task_key").sum()
    if float(pairs.sum()) <= 0:
        return settings.coincidence_bounds[0]
    low, high = settings.coincidence_bounds
    return float(np.clip(math.sqrt(max(0.0, float(same.sum()) / float(pairs.sum()))), low, high))


# --- per task ---------------------------------------------------------------------------------


class _Sample(NamedTuple):
    run_id: int
    sample_id: str
    model: str
    key: str | None  # see `_answer_keys`
    correct: bool
    chars: int


class _Vote(NamedTuple):
    voter: str
    key: str
    share: float
    rel: float
    weight: float
    support_weight: float
    discount: float  # its share of one independent voice (see `_discount`)


class _ByTask:
    """A frame's rows by task, read one task at a time: `pop(task_key)` makes that task's rows
    into plain tuples (the per-task rules below loop in Python over a few dozen rows, where
    pandas would pay its overhead once per task) and lets them go with the task. Until then the
    rows wait as columns: numbers in numpy (8 bytes a value), strings in pandas' own compact
    arrays. Every task's tuples made at once, each with Python strings of its own, were the
    analysis's largest object at 100,000 questions (1.6 million rows)."""

    def __init__(
        self,
        task_keys: np.ndarray,
        columns: list[Any],
        make: Callable[..., Any],
        order: np.ndarray | None = None,
    ) -> None:
        """`columns`: numpy arrays, or pandas arrays (strings stay in pandas' compact form until
        their task is read, not one Python object a row); `order`: the rows' order, task keys
        ascending (default: the frame's order within a task)."""
        if order is None:
            order = np.argsort(task_keys, kind="stable")
        keys = task_keys[order]
        self._columns = [
            column[order] if isinstance(column, np.ndarray) else column.take(order)
            for column in columns
        ]
        starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]]) if len(keys) else keys
        ends = np.r_[starts[1:], len(keys)].astype(int)
        self._spans = dict(
            zip(
                keys[starts].tolist(), zip(starts.tolist(), ends.tolist(), strict=True), strict=True
            )
        )
        self._make = make

    def pop(self, task_key: int) -> list:
        span = self._spans.pop(task_key, None)
        if span is None:
            return []
        start, end = span
        return [
            self._make(*row)
            for row in zip(*(column[start:end].tolist() for column in self._columns), strict=True)
        ]


def _sample(
    run_id: int, sample_id: str, model: str, key: Any, correct: bool, chars: int
) -> _Sample:
    # pandas gives NaN (or None) for "no answer"
    return _Sample(run_id, sample_id, model, key if isinstance(key, str) else None, correct, chars)


def _samples_by_task(samples: pd.DataFrame) -> _ByTask:
    """Each task's samples, in the order of their runs (the columns are taken in that order,
    not the whole frame sorted: a copy of every column)."""
    task_keys = samples["task_key"].to_numpy(dtype=np.int64)
    run_ids = samples["run_id"].to_numpy(dtype=np.int64)
    return _ByTask(
        task_keys,
        [
            run_ids,
            samples["sample_id"].astype(str).array,
            samples["model"].array,
            samples["key"].array,
            samples["correct"].to_numpy(dtype=bool),
            samples["response_chars"].fillna(0).to_numpy(dtype=np.int64),
        ],
        _sample,
        order=np.lexsort((run_ids, task_keys)),  # stable, as the frame's order within a run
    )


def _votes_by_task(votes: pd.DataFrame) -> _ByTask:
    """Each task's votes, in the frame's order."""
    return _ByTask(
        votes["task_key"].to_numpy(dtype=np.int64),
        [
            votes["voter"].astype(str).array,
            votes["key"].array,
            *(
                votes[c].to_numpy(dtype=float)
                for c in ("share", "rel", "weight", "support_weight", "discount")
            ),
        ],
        _Vote,
    )


def _distribution(group: list[_Sample], label_shown: str) -> list[dict]:
    """Per final answer (the label's equivalents as one, "no answer" as None): count, share of
    counted samples, per-model counts, and a representative sample (the shortest response)."""
    if not group:
        return []
    parts: dict[str | None, list[_Sample]] = {}
    for sample in group:
        parts.setdefault(sample.key, []).append(sample)
    rows = []
    for key, part in parts.items():
        rep = min(part, key=lambda x: (x.chars, x.run_id))
        models: dict[str, int] = {}
        for sample in part:
            models[sample.model] = models.get(sample.model, 0) + 1
        rows.append(
            {
                "answer": label_shown if key == _LABEL else key,
                "count": len(part),
                "share": round(len(part) / len(group), 4),
                "models": dict(sorted(models.items(), key=lambda kv: (-kv[1], kv[0]))),
                "is_label": key == _LABEL,
                # the share of the reliability-weighted vote, set by the analysis of the votes
                "weighted_share": None,
                "sample_id": rep.sample_id,
                "run_id": rep.run_id,
            }
        )
    rows.sort(key=lambda r: (r["answer"] is None, -r["count"], not r["is_label"], str(r["answer"])))
    return rows


def _stats(task_key: int, group: list[_Sample], label_shown: str, fit: _Fit) -> AnswerStats:
    if not group:
        return AnswerStats(task_key, 0, 0, None, 0, None, None, ())
    counts: dict[str, int] = {}
    for sample in group:
        if sample.key is not None:
            counts[sample.key] = counts.get(sample.key, 0) + 1
    answered = sum(counts.values())
    top_key = max(counts, key=lambda k: (counts[k], k == _LABEL)) if counts else None
    return AnswerStats(
        task_key=task_key,
        samples=len(group),
        answered=answered,
        sample_pass_rate=round(sum(x.correct for x in group) / len(group), 4),
        answer_count=len(counts),
        top_answer=None if top_key is None else (label_shown if top_key == _LABEL else top_key),
        top_share=None if top_key is None else round(counts[top_key] / answered, 4),
        models=tuple(sorted({x.model for x in group if x.model})),
        label_posterior=(
            round(fit.posterior[task_key][_LABEL], 4) if task_key in fit.posterior else None
        ),
    )


def _verdict_flags(
    task_key: int,
    row: Any,
    group: list[_Sample],
    votes: list[_Vote],
    shown: list[dict],
    fit: _Fit,
    models_known: bool,
    settings: AnswerSettings,
) -> list[FlagFinding]:
    found: list[FlagFinding] = []
    counted = len(group)
    label_shown = row.label_canonical or row.label
    posterior = fit.posterior.get(task_key, {_LABEL: 1.0})
    # The support of each answer: its share of the vote weighed by the log-odds of reliability
    # squared, and of the vote weighed by `weight` (the mislabeled rule), each vote discounted
    # by the voters it shares its mistakes with; and the effective number of independent models
    # behind it (the discounts of those giving it `support_share` of their samples or more).
    weight_total = sum(v.support_weight * v.share * v.discount for v in votes)
    vote_total = sum(v.weight * v.share * v.discount for v in votes)
    voters = len({v.voter for v in votes}) or 1
    raw: dict[str, float] = {}
    vote_share: dict[str, float] = {}
    supporters: dict[str, int] = {}
    independent: dict[str, float] = {}
    any_votes: dict[str, int] = {}
    for v in votes:
        raw[v.key] = raw.get(v.key, 0.0) + (
            v.support_weight * v.share * v.discount / weight_total
            if weight_total > 0
            else v.share / voters
        )
        if vote_total > 0:
            vote_share[v.key] = (
                vote_share.get(v.key, 0.0) + v.weight * v.share * v.discount / vote_total
            )
        any_votes[v.key] = any_votes.get(v.key, 0) + 1
        if v.share >= settings.support_share:
            supporters[v.key] = supporters.get(v.key, 0) + 1
            independent[v.key] = independent.get(v.key, 0.0) + v.discount
    support = sorted(raw.items(), key=lambda kv: (-kv[1], kv[0] != _LABEL, kv[0]))
    present = sorted({v.voter for v in votes})
    task_independent = sum(_voice(m, present, fit) for m in present)
    for entry in shown:
        key = _LABEL if entry["is_label"] else entry["answer"]
        entry["weighted_share"] = None if key is None else round(raw.get(key, 0.0), 4)
    blocking = False

    def name(key: str) -> str:
        return label_shown if key == _LABEL else key

    def runs(key: str) -> list[int]:
        return [x.run_id for x in group if x.key == key][:MAX_EVIDENCE_RUNS]

    def evidence(extra: dict) -> dict:
        models: dict[str, dict] = {}
        for v in sorted(votes, key=lambda v: (-v.weight, v.voter)):
            entry = models.setdefault(
                v.voter,
                {
                    "reliability": round(v.rel, 3),
                    "weight": round(v.weight, 3),
                    "answers": {},
                    "independent_share": {},
                },
            )
            entry["answers"][name(v.key)] = round(v.share, 3)
            entry["independent_share"][name(v.key)] = round(v.discount, 3)
            shared = {
                o: round(r, 3)
                for o, r in sorted(fit.dependence.get(v.voter, {}).items())
                if o in present and r >= 0.2
            }
            if shared:
                entry["shares_mistakes_with"] = shared
        out = {
            "label": row.label,
            "label_canonical": label_shown,
            "label_posterior": round(posterior.get(_LABEL, 0.0), 4),
            "label_prior": round(fit.label_prior, 4),
            "coincidence": round(fit.coincidence, 4),
            "distribution": shown[:MAX_SHOWN_ANSWERS],
            "models": dict(list(models.items())[:12]) if models_known else {},
            "effective_models": round(task_independent, 2) if models_known else None,
            "samples": counted,
        }
        out.update(extra)
        return out

    if counted >= settings.min_samples and len(support) >= 2:
        # Every pair among the best supported answers is tested (the second reading may have
        # less support than the task's common mistake); the level is shared among the pairs.
        shares = dict(support)
        contenders = [
            k
            for k, v in support[: settings.ambiguous_contenders]
            if v >= settings.ambiguous_second_share
            and any_votes.get(k, 0) >= settings.min_supporters
        ]
        if _LABEL not in contenders and any_votes.get(_LABEL, 0) >= settings.min_supporters:
            contenders.append(_LABEL)  # the label is one reading by definition: always tried
        # A pair holds the label: two other answers splitting the samples say the label is
        # wrong (mislabeled) or the question broken (unsolvable), not that it has two readings.
        pairs = [
            (x, y)
            for i, x in enumerate(contenders)
            for y in contenders[i + 1 :]
            if _LABEL in (x, y) and shares[x] + shares[y] >= settings.ambiguous_pair_share
        ]
        test, per_model, level = None, {}, settings.ambiguous_pvalue / max(1, len(pairs))
        for x, y in pairs:
            tried, rows = _readings(
                task_key,
                group,
                (x, y),
                (name(x), name(y)),
                present,
                fit,
                models_known,
                min_statistic=settings.ambiguous_evidence,
            )
            if (
                tried is not None
                and tried.pvalue <= level
                and tried.statistic >= settings.ambiguous_evidence
                and (test is None or tried.statistic > test.statistic)
            ):
                test, per_model, (first, s1), (second, s2) = (
                    tried,
                    rows,
                    (x, shares[x]),
                    (y, shares[y]),
                )
        if test is not None:
            split = [name(first), name(second)]
            truth_h0 = split[test.truth_under_h0]
            found.append(
                _finding(
                    task_key,
                    FlagCode.AMBIGUOUS,
                    1.0 - test.pvalue,
                    f"the answers split between {split[0]} ({s1:.0%} of the reliability-weighted "
                    f"vote) and {split[1]} ({s2:.0%}), and the models split differently from "
                    f"what one truth ({truth_h0}) and a shared mistake would make of their "
                    f"reliabilities (likelihood ratio {test.statistic:.1f}, p = "
                    f"{test.pvalue:.3g}): two readings; the label is {label_shown}",
                    evidence(
                        {
                            "split": split,
                            "weighted_shares": [round(s1, 4), round(s2, 4)],
                            "readings_test": {
                                "statistic": round(test.statistic, 3),
                                "pvalue": float(f"{test.pvalue:.3g}"),
                                "replicates": test.replicates,
                                "truth_under_one_truth": truth_h0,
                                "mistake_share": round(test.mistake_share, 3),
                                "difficulty_one_truth": round(test.difficulty_h0, 2),
                                "difficulty_two_readings": round(test.difficulty_h1, 2),
                                "per_model": per_model,
                            },
                        }
                    ),
                    runs(first)[:2] + runs(second)[:2],
                )
            )
            blocking = True

    others = {k: p for k, p in posterior.items() if k != _LABEL}
    if not blocking and counted >= settings.min_samples and others:
        best = max(others, key=lambda k: (others[k], k))
        threshold = (
            settings.mislabeled_posterior
            if models_known
            else settings.mislabeled_posterior_unknown_models
        )
        backers = supporters.get(best, 0)
        voices = independent.get(best, 0.0) if models_known else float(backers)
        supported = (
            backers >= settings.min_supporters
            and voices >= (settings.min_independent if models_known else settings.min_supporters)
            and (not models_known or vote_share.get(best, 0.0) >= settings.mislabeled_vote_share)
        )
        confidence, between = others[best], None
        if supported and confidence < threshold and models_known:
            # The vote hesitates (a hard task: even reliable models 3:1): which answer is the
            # truth and which the shared mistake, from how the models split by reliability.
            between = _orientation(task_key, group, best, present, fit)
            if between is not None:
                confidence = max(confidence, between)
        if supported and confidence >= threshold:
            share = sum(x.key == best for x in group) / counted
            names = sorted(
                {v.voter for v in votes if v.key == best and v.share >= settings.support_share}
            )
            found.append(
                _finding(
                    task_key,
                    FlagCode.MISLABELED,
                    confidence,
                    f"the samples agree on {best} instead of the label {label_shown}: posterior "
                    f"{others[best]:.2f} against {posterior.get(_LABEL, 0):.2f} for the label, "
                    + (
                        f"{confidence:.2f} from how the models split by reliability (the label "
                        "as the shared mistake of a hard question), "
                        if confidence > others[best]
                        else ""
                    )
                    + (
                        f"{backers} models behind it ({', '.join(names)}; {voices:.1f} "
                        f"independent), {vote_share.get(best, 0.0):.0%} of the "
                        "reliability-weighted vote, "
                        if models_known
                        else f"{backers} samples behind it, "
                    )
                    + f"{share:.0%} of {counted} samples",
                    evidence(
                        {
                            "consensus": best,
                            "posterior": round(others[best], 4),
                            "posterior_between_models": None
                            if between is None
                            else round(between, 4),
                            "supporting_models": backers,
                            "independent_models": round(voices, 2),
                            "vote_share": round(vote_share.get(best, 0.0), 4),
                        }
                    ),
                    runs(best),
                )
            )
            blocking = True

    correct = sum(x.correct for x in group)
    if not blocking and counted >= settings.min_samples and correct == 0:
        top_other = [(k, v) for k, v in support if k != _LABEL]
        consensus = (
            bool(top_other)
            and top_other[0][1] >= settings.unsolvable_consensus
            and any_votes.get(top_other[0][0], 0) >= settings.min_supporters
        )
        if not consensus:
            # How sure: the chance that at least one sample would have reached a right label.
            # Each model's n answered-or-not samples count as n ** sample_exponent tries (as in
            # the vote), and a model that shares its mistakes with others present as its
            # share of one independent voice: output sets of one base model fail together.
            tries: dict[str, int] = {}
            for x in group:
                tries[x.model] = tries.get(x.model, 0) + 1
            # A fine question is as hard as the set's solved questions come: its difficulty
            # delta is drawn from their spread (`fit.difficulty_solved`, estimated as the
            # readings test's), each model right with logistic(logit p - delta).
            tries_of, logits = [], []
            for model, n in tries.items():
                p = fit.task_reliability.get((task_key, model), fit.reliability.get(model, 0.5))
                voice = _voice(model, present, fit) if models_known else 1.0
                exponent = n**settings.sample_exponent if models_known else n
                tries_of.append(exponent * voice)
                p = min(max(p, 1e-6), 0.999)
                logits.append(math.log(p / (1 - p)))
            confidence = 1.0 - math.exp(_log_all_miss(np.array(tries_of), np.array(logits), fit))
            if confidence >= settings.unsolvable_min_confidence:
                most = f", the most supported at {top_other[0][1]:.0%}" if top_other else ""
                found.append(
                    _finding(
                        task_key,
                        FlagCode.UNSOLVABLE,
                        confidence,
                        f"none of {counted} samples reaches the label {label_shown} and no other "
                        f"answer forms a consensus ({len(any_votes)} different answers{most}); "
                        f"a question of this set as hard as they come would have been solved "
                        f"with a chance of {confidence:.0%}",
                        evidence({"chance_one_would_be_right": round(confidence, 4)}),
                        [x.run_id for x in group[:MAX_EVIDENCE_RUNS]],
                    )
                )
                blocking = True

    if not blocking and counted >= settings.no_signal_min_samples and correct in (0, counted):
        which = "right" if correct else "wrong"
        found.append(
            _finding(
                task_key,
                FlagCode.NO_SIGNAL,
                1.0,
                f"all {counted} samples are {which}: a group filter drops the task, it teaches "
                "nothing",
                {"samples": counted, "correct": correct, "distribution": shown[:MAX_SHOWN_ANSWERS]},
                [x.run_id for x in group[:MAX_EVIDENCE_RUNS]],
            )
        )
    return found


def _log_all_miss(tries: np.ndarray, logits: np.ndarray, fit: _Fit) -> float:
    """log P(every try misses | a fine question): each model's `tries` misses at its reliability
    (`logits`), shifted by the question's difficulty, integrated over the spread of difficulty
    of the set's solved questions (`fit.difficulty_solved`, log weights on DELTA_GRID); at
    difficulty 0 without one."""
    from scipy.special import log_expit, logsumexp

    if fit.difficulty_solved is None:
        return float((tries * log_expit(-logits)).sum())
    per_delta = (tries[None, :] * log_expit(DELTA_GRID[:, None] - logits[None, :])).sum(axis=1)
    return float(logsumexp(fit.difficulty_solved + per_delta))


def _voice(model: str, present: list[str], fit: _Fit) -> float:
    """A model's share of one independent voice among the models present on a task."""
    row = fit.dependence.get(model, {})
    return 1.0 / (1.0 + sum(row.get(o, 0.0) for o in present if o != model))


def _readings(
    task_key: int,
    group: list[_Sample],
    pair: tuple[str, str],
    names: tuple[str, str],
    present: list[str],
    fit: _Fit,
    models_known: bool,
    replicates: tuple[int, ...] = (199, 1999),
    min_statistic: float = -math.inf,
) -> tuple[ReadingTest | None, dict[str, dict]]:
    """The between-model test (`answer_readings.reading_test`) of `first` and `second` on a
    task, and per model what a reviewer judges it by: its samples on each, what one truth and a
    shared mistake would give it at its reliability, and its lean if both are readings."""
    first, second = pair
    first_name, second_name = names
    counts: dict[str, list[int]] = {}
    for x in group:
        if x.key is None:
            continue
        row = counts.setdefault(x.model, [0, 0, 0])
        row[0 if x.key == first else 1 if x.key == second else 2] += 1
    if not counts or fit.difficulty is None:
        return None, {}
    models = sorted(counts)
    table = np.array([counts[m] for m in models], dtype=float)
    reliability = np.array(
        [fit.task_reliability.get((task_key, m), fit.reliability.get(m, 0.5)) for m in models]
    )
    reliability = np.clip(reliability, 0.01, 0.99)
    voices = np.array([_voice(m, present, fit) if models_known else 1.0 for m in models])
    test = reading_test(
        table[:, 0],
        table[:, 1],
        table[:, 2],
        np.log(reliability / (1 - reliability)),
        voices,
        fit.difficulty,
        seed=task_key,
        replicates=replicates,
        min_statistic=min_statistic,
    )
    per_model = {
        m: {
            "reliability": round(float(reliability[i]), 3),
            "samples": {
                first_name: int(table[i, 0]),
                second_name: int(table[i, 1]),
                "other": int(table[i, 2]),
            },
            "one_truth_expects": {
                first_name: round(test.expected_a[i], 2),
                second_name: round(test.expected_b[i], 2),
            },
            "lean_to_first": None if test.leans[i] is None else round(test.leans[i], 3),
            "independent_share": round(float(voices[i]), 3),
        }
        for i, m in enumerate(models)
    }
    return test, per_model


def _orientation(
    task_key: int, group: list[_Sample], other: str, present: list[str], fit: _Fit
) -> float | None:
    """The posterior that `other` is the truth and the label the task's shared mistake rather
    than the other way round, from the between-model test's marginal likelihoods of the two
    (`answer_readings`: each model's split following its reliability at one difficulty), the
    label prior spread as in the vote (over the answers at least two models reached)."""
    test, _ = _readings(
        task_key, group, (_LABEL, other), ("label", other), present, fit, True, replicates=()
    )
    if test is None:
        return None
    _, label_truth, other_truth, _ = test.log_marginals
    reached: dict[str, set[str]] = {}
    for x in group:
        if x.key is not None and x.key != _LABEL:
            reached.setdefault(x.key, set()).add(x.model)
    rivals = max(1, sum(len(m) >= 2 for m in reached.values()))
    prior = min(max(fit.label_prior, 1e-6), 1 - 1e-6)
    log_odds = other_truth + math.log((1 - prior) / rivals) - (label_truth + math.log(prior))
    return float(1.0 / (1.0 + math.exp(-max(-700.0, min(700.0, log_odds)))))


def _unverifiable(task_key: int, row: Any) -> FlagFinding:
    return _finding(
        task_key,
        FlagCode.UNVERIFIABLE_LABEL,
        1.0,
        f"the verifier cannot read the label {row.label!r} (status {row.label_status}), so no "
        "answer can ever be rewarded",
        {"label": row.label, "label_status": row.label_status},
        (),
    )


def _finding(
    task_key: int, code: FlagCode, confidence: float, explanation: str, evidence: dict, runs
) -> FlagFinding:
    return FlagFinding(
        task_key=task_key,
        code=code,
        severity=severity(code, confidence),
        explanation=explanation,
        evidence_run_ids=tuple(dict.fromkeys(int(r) for r in runs)),
        confidence=round(float(confidence), 3),
        evidence=evidence,
    )


# --- questions --------------------------------------------------------------------------------

_NUMBER_TEXT = re.compile(r"^-?\d+(?:\.\d+)?$")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}\b)")
_NUMBERS = re.compile(r"-?\d+(?:\.\d+)?")
# Phrases that state the answer, {x} standing for the label. Bare presence of the label is not
# enough: a word problem's answer is often one of its givens.
_LEAK_PHRASES = (
    (
        r"\b(?:the\s+)?(?:final\s+|correct\s+|right\s+)?answer\s*(?:is|was|will\s+be|should\s+be|would\s+be|equals|=|:)\s*",
        0.95,
    ),
    (r"\(\s*(?:answer|ans\.?)\s*[:=]?\s*", 0.95),
    (r"\bhint\b[^.\n?]{0,40}?(?:is|=|:|be)\s*", 0.85),
    (r"\b(?:the\s+)?(?:result|solution|total)\s+(?:is|comes\s+to|equals|will\s+be)\s*", 0.7),
    (r"=\s*", 0.6),  # "... = 42?": only when a question mark follows, see below
)


def stated_answer(question: str, label: str) -> tuple[str, float] | None:
    """The phrase of `question` that states `label` as its answer, and how sure that is."""
    value = label.strip().strip("$").strip()
    if not value or not question:
        return None
    text = _THOUSANDS.sub("", question)
    if value.casefold() not in text.casefold():
        return None  # the common case, decided without compiling a pattern for this label
    if _NUMBER_TEXT.match(value):
        shown = re.escape(value) + (r"(?:\.0+)?" if "." not in value else "")
        pattern = rf"(?<![\d.]){shown}(?![\d]|\.\d)"
    else:
        pattern = rf"(?<!\w){re.escape(value)}(?!\w)"
    for phrase, confidence in _LEAK_PHRASES:
        tail = r"\s*\?" if phrase == r"=\s*" else ""
        found = re.search(phrase + r"[\$\\(\"'\s]*" + pattern + tail, text, flags=re.IGNORECASE)
        if found:
            return found.group(0).strip(), confidence
    return None


def _leaks(task_rows: dict[int, Any]) -> list[FlagFinding]:
    found = []
    for task_key, row in task_rows.items():
        hit = stated_answer(str(row.question), str(row.label_canonical or row.label))
        if hit is None and row.label_canonical and row.label_canonical != row.label:
            hit = stated_answer(str(row.question), str(row.label))
        if hit is not None:
            phrase, confidence = hit
            found.append(
                _finding(
                    task_key,
                    FlagCode.ANSWER_LEAK,
                    confidence,
                    f"the question states its answer: {phrase!r}",
                    {"phrase": phrase, "label": row.label},
                    (),
                )
            )
    return found


def _duplicates(
    task_rows: dict[int, Any],
    other_questions: Mapping[Hashable, tuple[str, str]],
    settings: AnswerSettings,
) -> list[FlagFinding]:
    """Near-duplicate questions (TF-IDF cosine, `signals.near_duplicates`) that also hold the
    same numbers: templated questions (the same words, other numbers) are different questions.
    `other_questions` (key -> (question, label), e.g. (task set, task id) of other sets) are
    compared with this set's, never flagged themselves."""
    questions: dict[Hashable, str] = {("task", k): str(r.question) for k, r in task_rows.items()}
    for key, (question, _label) in other_questions.items():
        questions[("other", key)] = str(question)
    best: dict[int, tuple[float, Hashable]] = {}
    for a, b, similarity in near_duplicates(questions, threshold=settings.duplicate_similarity):
        if sorted(_NUMBERS.findall(_THOUSANDS.sub("", questions[a]))) != sorted(
            _NUMBERS.findall(_THOUSANDS.sub("", questions[b]))
        ):
            continue
        for mine, theirs in ((a, b), (b, a)):
            if mine[0] == "task" and best.get(mine[1], (0.0, None))[0] < similarity:
                best[mine[1]] = (similarity, theirs)
    found = []
    for task_key, (similarity, theirs) in sorted(best.items(), key=lambda kv: kv[0]):
        mine = task_rows[task_key]
        if theirs[0] == "task":
            row = task_rows[theirs[1]]
            name, label, where = row.task_id, row.label_canonical or row.label, "in this task set"
        else:
            label = other_questions[theirs[1]][1]
            if isinstance(theirs[1], tuple) and len(theirs[1]) == 2:  # (task set, task id)
                name, where = str(theirs[1][1]), f"in task set {theirs[1][0]}"
            else:
                name, where = str(theirs[1]), "in another task set"
        same_label = (mine.label_canonical or mine.label) == label
        found.append(
            _finding(
                task_key,
                FlagCode.DUPLICATE,
                min(1.0, max(0.0, (similarity - 0.5) / 0.5)),
                f"its question is {similarity:.0%} similar (TF-IDF cosine, the same numbers) to "
                f"{name} {where}, whose label is {label}"
                + ("" if same_label else f", not {mine.label}"),
                {
                    "other": name,
                    "other_taskset": str(theirs[1][0])
                    if theirs[0] == "other" and isinstance(theirs[1], tuple)
                    else None,
                    "where": where,
                    "similarity": similarity,
                    "other_label": label,
                    "same_label": same_label,
                },
                (),
            )
        )
    return found


# --- probes -----------------------------------------------------------------------------------


def _probe_flags(
    probes: pd.DataFrame, harness_share: float, harness_min_tasks: int
) -> tuple[list[FlagFinding], list[dict]]:
    """Per-task `reward_hackable` for each probe the verifier rewarded, except a probe rewarded
    on nearly every task (`harness_share` of at least `harness_min_tasks`): that is one finding
    on the set's verifier, and no task is flagged for it (as terminal.py does for harnesses)."""
    counted = probes[probes["status"] != NOT_COUNTED]
    harness: list[dict] = []
    harness_probes: set[str] = set()
    for probe, part in counted.groupby("probe", sort=True):
        tried = part["task_key"].nunique()
        beaten = part.loc[part["correct"], "task_key"].nunique()
        if tried < harness_min_tasks or beaten < harness_share * tried:
            continue
        harness_probes.add(str(probe))
        examples = part[part["correct"]].head(3)
        harness.append(
            {
                "probe": str(probe),
                "tasks_beaten": int(beaten),
                "tasks_tried": int(tried),
                "explanation": (
                    f"the {probe} probe earned the reward on {beaten} of {tried} tasks: a "
                    "weakness of the set's verifier (its answer extraction or comparison), not "
                    "of each task"
                ),
                "examples": [
                    {
                        "task_key": int(r.task_key),
                        "run_id": int(r.run_id),
                        "extracted": str(r.extracted),
                    }
                    for r in examples.itertuples(index=False)
                ],
            }
        )
    found = []
    beaten_rows = counted[counted["correct"] & ~counted["probe"].isin(harness_probes)]
    for task_key, part in beaten_rows.groupby("task_key", sort=True):
        named = {str(r.probe): str(r.extracted) for r in part.itertuples(index=False)}
        found.append(
            _finding(
                int(task_key),
                FlagCode.REWARD_HACKABLE,
                1.0,
                "the verifier rewards responses that do not commit to the answer: "
                + "; ".join(f"{p} (read as {e!r})" for p, e in sorted(named.items())),
                {"probes": named},
                part["run_id"].tolist(),
            )
        )
    return found, harness
