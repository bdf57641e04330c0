"""Two readings or one truth and a shared mistake: the between-model test behind `ambiguous`
(numpy and scipy only; plain arrays in, a dataclass out).

On a task whose samples split between two answers A and B, two stories explain the split:

- **H0, one truth and a shared mistake**: one of them (either) is the truth, the other the
  task's common mistake. A model of reliability p answers right with chance
  pi = logistic(logit p - delta), delta the task's difficulty (one shift for every model), and
  when wrong lands on the mistake with chance d (one share for every model): its split between
  the two follows its reliability, a reliable model mostly on the truth, a weak one on the
  mistake.
- **H1, two readings**: both are right; every model answers right with the same chance pi, and
  splits its right answers between the readings by a lean of its own (lambda_m, free per model).
  The wrong answers go elsewhere.
- **Neither** (part of the null too): both are mistakes of a broken question, and every model's
  answers land on A, B and the rest at the same rates whatever its reliability.

What tells them apart is *between* models: under H0 the share of B falls as reliability rises,
for every model alike; under H1 a reliable model can sit on either reading. A clean hard task
(every model about 3:1 truth against the distractor, weak ones mostly on it) is H0 with a high
delta, an ambiguous question is H1. The difficulty delta is integrated over its distribution on
the set (`difficulty_prior`: a nonparametric maximum-likelihood estimate, Kiefer-Wolfowitz, of
how delta spreads over the set's tasks, each task's most probable answer taken as its truth), so
"everybody is only 50% right here" costs what such a hard task costs on this set; the leans, d
and the rates of "neither" are integrated over Jeffreys priors. The statistic is twice the log
of the Bayes factor of H1 against the best null (H0 in the better of its two orientations, or
neither), and its p-value a parametric bootstrap from that null, delta drawn from the set's
distribution (prior-predictive: over the clean tasks of a set whose difficulty is as estimated,
the test rejects at level alpha on a share alpha of them).

Each model's likelihood counts as its share of one independent voice (`voice`): two output
sets of one base model lean alike and err alike, and count as about one. A model's samples on
a task are taken as independent draws given its reliability and the task's difficulty.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import betaln, expit, gammaln

__all__ = ["DELTA_GRID", "ReadingTest", "difficulty_prior", "logsumexp", "reading_test"]

DELTA_GRID = np.linspace(-6.0, 6.0, 97)
_EDGE = 1e-6


def logsumexp(a: np.ndarray, axis: int | None = None, keepdims: bool = False) -> np.ndarray:
    """`scipy.special.logsumexp` for real arrays without weights, the same operations in the
    same order (so the same bits), without its array-API dispatch: that overhead was most of
    the time of the readings test, which calls it a few times per task and per bootstrap
    round. The largest term is taken out of the sum and added back as log(its count)."""
    a = np.atleast_1d(np.asarray(a, dtype=float))
    axes = tuple(range(a.ndim)) if axis is None else axis
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        a_max = np.max(a, axis=axes, keepdims=True)
        mask = a == a_max
        count = np.sum(mask.astype(a.dtype), axis=axes, keepdims=True, dtype=a.dtype)
        rest = np.where(mask, -np.inf, a)
        s = np.sum(np.exp(rest - a_max), axis=axes, keepdims=True, dtype=a.dtype)
        s = np.where(s == 0, s, s / count)
        out = np.log1p(s) + np.log(count) + a_max
        finite = np.isfinite(out)
        if not finite.all():  # scipy's own fallback: the direct sum, C99's infinities
            out = np.where(finite, out, np.log(np.sum(np.exp(a), axis=axes, keepdims=True)))
    if not keepdims:
        out = np.squeeze(out, axis=axes)
    return out[()] if out.ndim == 0 else out


@dataclass(frozen=True)
class ReadingTest:
    statistic: float  # 2 log (marginal likelihood of H1 / that of H0)
    pvalue: float  # of the statistic under the fitted H0 (parametric bootstrap)
    replicates: int
    truth_under_h0: int  # 0: A is the truth and B the mistake under H0; 1: the other way round
    neither_fits_better: bool  # "both are mistakes" explains the split better than one truth
    mistake_share: float  # d: the share of H0's wrong answers on its mistake
    difficulty_h0: float  # delta, posterior mean under H0
    difficulty_h1: float  # delta, posterior mean under H1
    expected_a: tuple[float, ...]  # per model: its samples on A and B that H0 predicts
    expected_b: tuple[float, ...]
    leans: tuple[float | None, ...]  # per model: its share of A among its A and B (H1's lean)
    # log marginal likelihoods: two readings, A the truth (B the mistake), B the truth, neither
    log_marginals: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)


def difficulty_prior(
    right: np.ndarray, wrong: np.ndarray, logit_p: np.ndarray, weight: np.ndarray, task: np.ndarray
) -> np.ndarray:
    """The distribution of a task's difficulty delta over the set, as log weights on
    `DELTA_GRID`: the nonparametric maximum-likelihood mixing distribution (EM on the grid) of
    rows (task, model) with `right` and `wrong` counts, the model's reliability as a logit and
    the row's weight (its share of one independent voice). A sprinkling of 1% is spread over the
    grid, so that no difficulty is impossible."""
    grid = DELTA_GRID
    if len(task) == 0:
        return np.full(len(grid), -np.log(len(grid)))
    tasks, index = np.unique(task, return_inverse=True)
    pi = np.clip(expit(logit_p[:, None] - grid[None, :]), _EDGE, 1 - _EDGE)  # rows x grid
    per_row = (weight * right)[:, None] * np.log(pi) + (weight * wrong)[:, None] * np.log1p(-pi)
    loglik = np.zeros((len(tasks), len(grid)))
    np.add.at(loglik, index, per_row)
    mix = np.full(len(grid), 1.0 / len(grid))
    for _ in range(200):
        joint = loglik + np.log(np.maximum(mix, 1e-300))
        resp = np.exp(joint - logsumexp(joint, axis=1, keepdims=True))
        new = resp.mean(axis=0)
        if np.abs(new - mix).max() < 1e-6:
            mix = new
            break
        mix = new
    mix = 0.99 * mix + 0.01 / len(grid)
    return np.log(mix)


def _marginals(
    a: np.ndarray,
    b: np.ndarray,
    o: np.ndarray,
    log_pi: np.ndarray,
    log_miss: np.ndarray,
    weight: np.ndarray,
    log_prior: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Log marginal likelihoods of H1, H0 with A the truth, H0 with B the truth and "neither",
    for counts of shape (..., models); log_pi and log_miss are (grid, models)."""
    wa, wb, wo = a * weight, b * weight, o * weight
    # Each model's lean, and H0's mistake share, integrated over a Jeffreys Beta(1/2, 1/2)
    # prior: maximised, a free lean per model would fit any split and only add noise.
    lean = (betaln(wa + 0.5, wb + 0.5) - betaln(0.5, 0.5)).sum(-1)

    def mistake(x: np.ndarray) -> np.ndarray:
        return betaln(x.sum(-1) + 0.5, wo.sum(-1) + 0.5) - betaln(0.5, 0.5)

    h1 = (wa + wb) @ log_pi.T + wo @ log_miss.T
    h0a = wa @ log_pi.T + (wb + wo) @ log_miss.T
    h0b = wb @ log_pi.T + (wa + wo) @ log_miss.T
    # Neither: both are mistakes (a broken question), every model's answers land on A, B and
    # the rest at the same rates, whatever its reliability (a Dirichlet(1/2) over them).
    total = np.stack([wa.sum(-1), wb.sum(-1), wo.sum(-1)], axis=-1)
    neither = (
        gammaln(total + 0.5).sum(-1)
        - gammaln(total.sum(-1) + 1.5)
        - 3 * gammaln(0.5)
        + gammaln(1.5)
    )
    return (
        logsumexp(h1 + log_prior, axis=-1) + lean,
        logsumexp(h0a + log_prior, axis=-1) + mistake(wb),
        logsumexp(h0b + log_prior, axis=-1) + mistake(wa),
        neither,
    )


def reading_test(
    a: np.ndarray,
    b: np.ndarray,
    o: np.ndarray,
    logit_p: np.ndarray,
    weight: np.ndarray,
    log_prior: np.ndarray,
    *,
    seed: int,
    replicates: tuple[int, ...] = (199, 1999),
    refine_below: float = 0.05,
    min_statistic: float = -np.inf,
) -> ReadingTest:
    """The test of one task: per model, its answered samples on A, on B and on anything else,
    its reliability (a logit) and its weight. Bootstrap replicates come in rounds (199, then
    1999 more while the p-value is below `refine_below`), seeded by `seed` (reproducible); with
    no rounds, or a statistic below `min_statistic` (no flag can follow), only the marginal
    likelihoods are computed, and the p-value is 1."""
    a, b, o = (np.asarray(x, dtype=float) for x in (a, b, o))
    pi = np.clip(expit(logit_p[None, :] - DELTA_GRID[:, None]), _EDGE, 1 - _EDGE)
    log_pi, log_miss = np.log(pi), np.log1p(-pi)
    h1, h0a, h0b, h2 = _marginals(a, b, o, log_pi, log_miss, weight, log_prior)
    statistic = float(2 * (h1 - max(h0a, h0b, h2)))
    truth = 0 if h0a >= h0b else 1
    neither = bool(h2 > max(h0a, h0b))
    rates = np.array([(x * weight).sum() + 0.5 for x in (a, b, o)])
    rates = rates / rates.sum()
    t, m = (a, b) if truth == 0 else (b, a)
    on, off = float((m * weight).sum()), float((o * weight).sum())
    d = on / (on + off) if on + off > 0 else 0.5
    d = min(1 - _EDGE, max(_EDGE, d))

    def posterior(right: np.ndarray, wrong: np.ndarray) -> np.ndarray:
        joint = (right * weight) @ log_pi.T + (wrong * weight) @ log_miss.T + log_prior
        return np.exp(joint - logsumexp(joint))

    post0 = posterior(t, m + o)
    post1 = posterior(a + b, o)
    mean_pi = post0 @ pi  # per model, under H0
    n = a + b + o
    expected_t = n * mean_pi
    expected_m = n * (1 - mean_pi) * d

    rng = np.random.default_rng(seed)
    prior = np.exp(log_prior - logsumexp(log_prior))
    exceed, drawn = 0, 0
    for count in replicates if statistic >= min_statistic else ():
        size = np.broadcast_to(n.astype(int), (count, len(n)))
        if neither:
            ra = rng.binomial(size, rates[0])
            rb = rng.binomial(size - ra, rates[1] / (1 - rates[0]))
        else:
            deltas = rng.choice(len(DELTA_GRID), size=count, p=prior)
            right = rng.binomial(size, pi[deltas])  # replicates x models
            mistaken = rng.binomial(size - right, d)
            ra, rb = (right, mistaken) if truth == 0 else (mistaken, right)
        other = (size - ra - rb).astype(float)
        r1, r0a, r0b, r2 = _marginals(
            ra.astype(float), rb.astype(float), other, log_pi, log_miss, weight, log_prior
        )
        null = np.maximum(np.maximum(r0a, r0b), r2)
        exceed += int((2 * (r1 - null) >= statistic - 1e-9).sum())
        drawn += count
        if (exceed + 1) / (drawn + 1) > refine_below:
            break
    return ReadingTest(
        statistic=statistic,
        pvalue=(exceed + 1) / (drawn + 1),
        replicates=drawn,
        truth_under_h0=truth,
        neither_fits_better=neither,
        mistake_share=d,
        difficulty_h0=float(post0 @ DELTA_GRID),
        difficulty_h1=float(post1 @ DELTA_GRID),
        expected_a=tuple(float(x) for x in (expected_t if truth == 0 else expected_m)),
        expected_b=tuple(float(x) for x in (expected_m if truth == 0 else expected_t)),
        leans=tuple(float(x / (x + y)) if x + y > 0 else None for x, y in zip(a, b, strict=True)),
        log_marginals=(float(h1), float(h0a), float(h0b), float(h2)),
    )
