"""CompileIQ's ``SearchResult``: the evaluated candidates as a pandas DataFrame.

Columns, in order: ``metadata``, ``generation``, ``score_1..N``, ``params`` and, when the
search normalised its scores, ``norm_score_1..N``. Invalid objectives hold ``"*"``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ciq_optuna.compileiq._compat.scores import INVALID_SCORE, Score
from ciq_optuna.compileiq.types import MultiScoreComparison, ProblemType

__all__ = ["SearchResult", "calculate_pareto_front"]

_SCORE = re.compile(r"score_\d+")
_NORM = re.compile(r"norm_score_\d+")
_ALL_INVALID = "All resulting scores are marked as invalid. Make sure your search ran correctly."


def calculate_pareto_front(
    scores: np.ndarray, problem_type: ProblemType | str = ProblemType.MIN
) -> np.ndarray:
    """CompileIQ's front: a boolean mask of the points that survive its weak-domination rule.

    Walking the points in order, each point still on the front keeps only the points that are
    at least as good as it in *at least one* objective. Unlike strict Pareto domination,
    a point that ties another on one objective and is worse on the rest stays on the front
    (``(1, 1), (5, 5), (1, 5)`` keeps ``(1, 1)`` and ``(1, 5)``), and identical points are all kept.
    """
    points = np.asarray(scores, dtype=float)
    if ProblemType(problem_type) == ProblemType.MAX:
        points = -points
    keep = np.ones(len(points), dtype=bool)
    for i, point in enumerate(points):
        if keep[i]:
            keep[keep] = np.any(points[keep] <= point, axis=1)
            keep[i] = True
    return keep


def _decode(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _number_or_invalid(value: Any) -> Any:
    if isinstance(value, str):
        if value == INVALID_SCORE:
            return value
        try:
            f = float(value)
        except ValueError:
            return INVALID_SCORE
        return int(f) if f.is_integer() and "." not in value and "e" not in value.lower() else f
    return value


class SearchResult:
    """The rows of a search. ``result[i]`` is row ``i`` (``iloc``).

    ``SearchResult(df, problem_type, num_scores)`` wraps a DataFrame as CompileIQ does; without
    ``df`` it starts empty with the columns of ``num_scores`` objectives (and ``norm_score_*``
    when ``normalize``). ``df_results=`` is ciq-optuna's older name for ``df``.
    """

    def __init__(
        self,
        df: pd.DataFrame | None = None,
        problem_type: ProblemType | str = ProblemType.MIN,
        num_scores: int | None = None,
        normalize: bool = False,
        *,
        df_results: pd.DataFrame | None = None,
    ) -> None:
        if df is not None and df_results is not None:
            raise TypeError("pass the DataFrame as df or as df_results, not both")
        df = df if df is not None else df_results
        self._problem_type = ProblemType(problem_type)
        self._rows: list[dict[str, Any]] = []
        self._df: pd.DataFrame | None = None
        if df is None:
            n = 1 if num_scores is None else int(num_scores)
            cols = ["metadata", "generation", *[f"score_{i + 1}" for i in range(n)], "params"]
            if normalize:
                cols += [f"norm_score_{i + 1}" for i in range(n)]
            df = pd.DataFrame(columns=cols)
        elif num_scores is not None:
            have = sum(1 for c in df.columns if _SCORE.fullmatch(str(c)))
            if have != int(num_scores):
                raise ValueError(f"num_scores={num_scores} but the DataFrame has {have} score_<n> column(s)")
        self._columns = list(df.columns)
        self._df = df

    # -- building ---------------------------------------------------------------------------
    def add_result(
        self,
        score: Score,
        generation_num: int | None = None,
        normalize: bool | None = None,
        *,
        gen: int | None = None,
    ) -> None:
        """Append one evaluated candidate (or baseline) of generation ``generation_num``.

        ``gen=`` is ciq-optuna's older name for ``generation_num``.
        """
        if (generation_num is None) == (gen is None):
            raise TypeError("add_result() needs generation_num (or its older name gen), once")
        generation_num = gen if generation_num is None else generation_num
        normalize = self.is_normalized if normalize is None else normalize
        row: dict[str, Any] = {"metadata": score.metadata, "generation": int(generation_num)}
        for i, v in enumerate(score.values(False)):
            row[f"score_{i + 1}"] = v
        row["params"] = score.params
        if normalize:
            norm = (
                score.values(True) if score.norm_score is not None else [INVALID_SCORE] * score.num_objectives
            )
            for i, v in enumerate(norm):
                row[f"norm_score_{i + 1}"] = v
        self._rows.append(row)

    @property
    def df_results(self) -> pd.DataFrame:
        """The results DataFrame."""
        if self._rows:
            new = pd.DataFrame(self._rows, columns=self._columns)
            base = self._df if self._df is not None and len(self._df) else None
            self._df = new if base is None else pd.concat([base, new], ignore_index=True)
            self._rows = []
        return self._df

    @df_results.setter
    def df_results(self, df: pd.DataFrame) -> None:
        self._rows = []
        self._df = df
        self._columns = list(df.columns)

    # -- properties -------------------------------------------------------------------------
    @property
    def problem_type(self) -> ProblemType:
        """MIN or MAX, for every objective."""
        return self._problem_type

    @property
    def score_columns(self) -> list[str]:
        """``score_1..N`` (exact names; ``baseline_score_1`` does not count)."""
        return [c for c in self._columns if _SCORE.fullmatch(c)]

    @property
    def norm_score_columns(self) -> list[str]:
        """``norm_score_1..N`` when normalised, else empty."""
        return [c for c in self._columns if _NORM.fullmatch(c)]

    @property
    def is_normalized(self) -> bool:
        """True when the rows carry normalised scores."""
        return bool(self.norm_score_columns)

    @property
    def num_scores(self) -> int:
        """The number of objectives."""
        return len(self.score_columns)

    def __getitem__(self, index: int) -> pd.Series:
        return self.df_results.iloc[index]

    def __len__(self) -> int:
        return len(self.df_results)

    # -- queries ----------------------------------------------------------------------------
    def get_results(self) -> pd.DataFrame:
        """The DataFrame of all rows."""
        return self.df_results

    def _ranked(self) -> tuple[pd.DataFrame, list[str]]:
        """Rows without any invalid objective, and the (normalised if present) score columns."""
        df = self.df_results
        cols = self.norm_score_columns or self.score_columns
        numeric = df[cols].apply(pd.to_numeric, errors="coerce")
        valid = numeric.notna().all(axis=1)
        return df[valid], cols

    def get_best_result(
        self, multiscore_scope: MultiScoreComparison | str = MultiScoreComparison.PARETO
    ) -> dict[str, Any] | list[dict[str, Any]]:
        """The best row as a dict (one objective), or the Pareto front / the best by mean or std.

        Ties go to the first row. Raises ValueError when every row is invalid.
        """
        df, cols = self._ranked()
        if df.empty:
            raise ValueError(_ALL_INVALID)
        scope = MultiScoreComparison(multiscore_scope)
        if len(cols) > 1 and scope == MultiScoreComparison.PARETO:
            return self.pareto_front()
        numeric = df[cols].apply(pd.to_numeric)
        if len(cols) == 1:
            key = numeric[cols[0]]
        elif scope == MultiScoreComparison.AVERAGE:
            key = numeric.mean(axis=1)
        else:
            key = numeric.std(axis=1)
        index = key.idxmin() if self._problem_type == ProblemType.MIN else key.idxmax()
        return df.loc[index].to_dict()

    def pareto_front(self) -> list[dict[str, Any]]:
        """The rows on CompileIQ's front (see :func:`calculate_pareto_front`), invalid rows dropped."""
        if self.num_scores < 2:
            raise ValueError("pareto_front() needs at least two scores; use get_best_result() for one")
        df, cols = self._ranked()
        if df.empty:
            raise ValueError(_ALL_INVALID)
        mask = self.calculate_pareto_front(df[cols].apply(pd.to_numeric).to_numpy())
        return [row.to_dict() for _, row in df[mask].iterrows()]

    def calculate_pareto_front(self, scores: np.ndarray) -> np.ndarray:
        """The boolean front mask of ``scores`` (rows x objectives) in this result's direction.

        Same rule as the module function :func:`calculate_pareto_front`; ``pareto_front()``
        applies it to the valid rows.
        """
        return calculate_pareto_front(scores, self._problem_type)

    def clear_duplicates(self) -> SearchResult:
        """Drop rows whose params and raw scores repeat; invalid scores become NaN."""
        df = self.df_results.copy()
        key = df["params"].map(lambda p: json.dumps(p, sort_keys=True, default=str)).astype(str)
        for c in self.score_columns:
            key = key + "|" + df[c].astype(str)
        df = df[~key.duplicated()].reset_index(drop=True)
        for c in self.score_columns + self.norm_score_columns:
            df[c] = pd.to_numeric(df[c], errors="coerce")
        self.df_results = df
        return self

    # -- files ------------------------------------------------------------------------------
    def save(self, path: str | Path = "./search_results.csv") -> Path:
        """Write the rows as CSV; ``params`` are JSON-encoded."""
        df = self.df_results.copy()
        df["params"] = df["params"].map(lambda p: json.dumps(p))
        path = Path(path)
        df.to_csv(path, index=False)
        return path

    @classmethod
    def from_csv(
        cls,
        path: str | Path,
        problem_type: ProblemType | str = ProblemType.MIN,
        clear_duplicates: bool = True,
    ) -> SearchResult:
        """Load a CSV written by :meth:`save` (or by CompileIQ).

        Scores and params are read as text (so ``"*"`` and JSON survive); ``metadata`` and
        ``generation`` get pandas' type inference, as in CompileIQ (an int metadata stays int64).
        """
        columns = pd.read_csv(path, nrows=0).columns
        text = {c: str for c in columns if c not in ("metadata", "generation")}
        df = pd.read_csv(path, keep_default_na=False, dtype=text)
        return cls.from_dataframe(df, problem_type, clear_duplicates=clear_duplicates)

    @classmethod
    def from_dataframe(
        cls,
        df: pd.DataFrame,
        problem_type: ProblemType | str = ProblemType.MIN,
        clear_duplicates: bool = True,
    ) -> SearchResult:
        """Wrap a DataFrame; it needs ``score_<n>`` columns and a ``params`` column."""
        if not any(_SCORE.fullmatch(str(c)) for c in df.columns) or "params" not in df.columns:
            raise ValueError("a search result needs at least one score_<n> column and a params column")
        df = df.copy()
        df["params"] = df["params"].map(_decode)
        for c in df.columns:
            if _SCORE.fullmatch(str(c)) or _NORM.fullmatch(str(c)):
                df[c] = df[c].map(_number_or_invalid)
                if not (df[c] == INVALID_SCORE).any():
                    df[c] = pd.to_numeric(df[c])
        if "generation" in df.columns:
            df["generation"] = pd.to_numeric(df["generation"])
        if "metadata" in df.columns and df["metadata"].dtype == object:
            df["metadata"] = df["metadata"].fillna("")
        result = cls(problem_type=problem_type, df_results=df.reset_index(drop=True))
        return result.clear_duplicates() if clear_duplicates else result

    @classmethod
    def concat(cls, results: Iterable[SearchResult]) -> SearchResult:
        """One result holding the rows of several (same columns)."""
        results = list(results)
        df = pd.concat([r.df_results for r in results], ignore_index=True)
        return cls(problem_type=results[0].problem_type, df_results=df)
