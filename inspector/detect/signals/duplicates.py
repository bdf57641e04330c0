"""Near-duplicate prompts: pairs whose TF-IDF cosine similarity reaches a threshold, found
exactly and sparsely (all-pairs prefix filtering), within or across task sets."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from typing import Any, NamedTuple

import numpy as np


class DuplicatePair(NamedTuple):
    key_a: Hashable
    key_b: Hashable
    similarity: float  # TF-IDF cosine, rounded to 4 places

    @property
    def confidence(self) -> float:
        # 0.5 at the default threshold 0.9, 1.0 for identical prompts.
        return round(min(1.0, max(0.0, 0.5 + 5.0 * (self.similarity - 0.9))), 4)

    @property
    def explanation(self) -> str:
        return f"prompts of {self.key_a} and {self.key_b} are {self.similarity:.0%} alike (TF-IDF cosine)"


# Candidate pairs whose cosine is computed at a time: each holds both prompts' rows, so 200,000
# at once were 57 MB at 100,000 prompts, more than the rest of the search.
_CANDIDATES_AT_ONCE = 50_000
# Rows of the matrix the prefix index is worked out on at a time (`_prefix_index`).
INDEX_BLOCK_ROWS = 8192


def near_duplicates(
    prompts: Mapping[Hashable, str] | Iterable[tuple[Hashable, str]],
    *,
    threshold: float = 0.9,
    max_pairs: int = 10_000,
    chunk_rows: int = 1024,
) -> list[DuplicatePair]:
    """Pairs of prompts whose TF-IDF vectors (words, sublinear tf, unit length; bigrams would
    cost seven times the time for little gain at a 0.9 threshold) have a cosine similarity of at least `threshold`: most similar first, then by
    position in `prompts`; at most `max_pairs`. Empty prompts are left out. Keys may be anything
    hashable, e.g. (taskset, task_id) to look across task sets. `prompts` is a mapping or
    (key, prompt) pairs, read once: a caller may stream them (say, from the database), so no
    prompt's text is held, only its row of the sparse matrix.

    Exact, and sparse all the way (all-pairs prefix filtering): the features of each prompt are
    ordered from the most common to the rarest, and the longest run of common ones that cannot
    reach `threshold` on their own is left out of a candidate index (their contribution to a
    cosine is at most min(sum of weight x the feature's largest weight anywhere, the norm of
    those weights)). Two prompts at or over the threshold must share their rarest common
    feature in both indexes, so the sparse product of the index with itself, in chunks of
    `chunk_rows` rows, finds every such pair among far fewer candidates than n², and each
    candidate's cosine is then computed exactly (or, for a chunk with candidates nearly
    everywhere, the chunk's full sparse product is). No dense n x n matrix is ever made.
    """
    from sklearn.feature_extraction.text import TfidfVectorizer

    keys: list[Hashable] = []

    def texts(pairs: Iterable[tuple[Hashable, str]]):
        for key, text in pairs:
            if isinstance(text, str) and text.strip():
                keys.append(key)
                yield text

    vectorizer = TfidfVectorizer(token_pattern=r"(?u)\b\w+\b", sublinear_tf=True, dtype=np.float64)
    pairs = prompts.items() if isinstance(prompts, Mapping) else prompts
    try:
        matrix = vectorizer.fit_transform(texts(pairs)).tocsr()
    except ValueError:  # no prompt, or no words at all
        return []
    del vectorizer  # its vocabulary: every word of every prompt
    if len(keys) < 2:
        return []
    matrix.sort_indices()
    df = np.bincount(matrix.indices, minlength=matrix.shape[1])  # prompts holding each word
    index = _prefix_index(matrix, threshold)
    index_t = index.T.tocsr()
    matrix_t = None
    found_rows: list[Any] = []
    found_cols: list[Any] = []
    found_sims: list[Any] = []
    for start in range(0, matrix.shape[0], chunk_rows):
        block = (index[start : start + chunk_rows] @ index_t).tocoo()
        rows = block.row.astype(np.int64) + start
        keep = block.col > rows
        rows, cols = rows[keep], block.col[keep].astype(np.int64)
        chunk = matrix[start : start + chunk_rows]
        # The chunk's full product makes one entry per (row, other prompt, shared word) at most:
        # cheaper than looking each candidate up only when candidates are nearly everywhere
        # (a vocabulary without rare words). With rare words shared by a few hundred prompts
        # each, the full product would also hold every pair sharing a common word ("the"),
        # gigabytes at 100,000 prompts.
        full_entries = int(df[chunk.indices].sum())
        lookups = len(rows) * max(1, chunk.nnz // max(1, chunk.shape[0]))
        if len(rows) > 64 * chunk_rows and full_entries <= 2 * lookups:
            if matrix_t is None:
                matrix_t = matrix.T.tocsr()
            full = (chunk @ matrix_t).tocoo()
            rows = full.row.astype(np.int64) + start
            keep = full.col > rows
            rows, cols, sims = rows[keep], full.col[keep].astype(np.int64), full.data[keep]
        else:
            sims = np.empty(len(rows))
            for at in range(0, len(rows), _CANDIDATES_AT_ONCE):
                left = matrix[rows[at : at + _CANDIDATES_AT_ONCE]]
                right = matrix[cols[at : at + _CANDIDATES_AT_ONCE]]
                sims[at : at + _CANDIDATES_AT_ONCE] = np.asarray(
                    left.multiply(right).sum(axis=1)
                ).ravel()
        keep = sims >= threshold - 1e-9
        found_rows.append(rows[keep])
        found_cols.append(cols[keep])
        found_sims.append(np.minimum(sims[keep], 1.0))
    rows = np.concatenate(found_rows)
    cols = np.concatenate(found_cols)
    sims = np.concatenate(found_sims)
    order = np.lexsort((cols, rows, -np.round(sims, 6)))[:max_pairs]
    return [
        DuplicatePair(keys[rows[i]], keys[cols[i]], round(float(sims[i]), 4))
        for i in order.tolist()
    ]


def _prefix_index(matrix: Any, threshold: float) -> Any:
    """`matrix` without, in each row, the longest run of its most common features whose
    contribution to any cosine is bounded below `threshold` (see `near_duplicates`). Worked out
    INDEX_BLOCK_ROWS rows at a time: each row's cut depends on that row and two figures per feature
    only, and the whole matrix at once held a dozen arrays of its size (90 MB at 100,000
    prompts, the analysis's peak)."""
    from scipy import sparse

    df = np.bincount(matrix.indices, minlength=matrix.shape[1])
    largest = matrix.max(axis=0).toarray().ravel()
    kept_data, kept_rows, kept_features = [], [], []
    for first in range(0, matrix.shape[0], INDEX_BLOCK_ROWS):
        block = matrix[first : first + INDEX_BLOCK_ROWS]
        counts = np.diff(block.indptr)
        rows = np.repeat(np.arange(block.shape[0]), counts)
        features = block.indices
        # Within each row: most common feature first (ties by feature number, for determinism).
        order = np.lexsort((features, -df[features], rows))
        data, features, rows = block.data[order], features[order], rows[order]
        starts = block.indptr[:-1]

        def running(values: Any, counts=counts, starts=starts) -> Any:
            total = np.cumsum(values)
            before = np.concatenate(([0.0], total))[starts]
            return total - np.repeat(before, counts)

        bound = np.minimum(running(data * largest[features]), np.sqrt(running(data * data)))
        keep = bound >= threshold - 1e-6
        kept_data.append(data[keep])
        kept_rows.append(rows[keep] + first)
        kept_features.append(features[keep])
    return sparse.csr_matrix(
        (np.concatenate(kept_data), (np.concatenate(kept_rows), np.concatenate(kept_features))),
        shape=matrix.shape,
    )
