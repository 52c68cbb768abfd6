"""Statistics of a benchmark: stopping rule, robust summaries, outliers, interleaved measurement.

Plain code with a pluggable timer, so it is tested on the CPU with synthetic clocks. An *arm* is
a callable that performs one timed run and returns its duration (any unit, ms by convention);
the cupy harness builds arms from CUDA events, tests build them from synthetic clocks.

Rules and their defaults (see docs/gpu.md):

- warm-up: ``warmup`` untimed rounds of every arm (10);
- stop when the distribution-free confidence interval of the median of *every* arm has a
  relative half-width <= ``rel_precision`` (0.5 %, at 95 % confidence), checked every
  ``check_every`` rounds once ``min_repeats`` (20) rounds are done; or at ``max_repeats`` (1000)
  rounds; or after ``max_seconds`` (30 s) of timed phase;
- interleaving: every round runs each arm once, the order mirrored on odd rounds (ABBA for two
  arms), so that a clock or thermal drift linear in time adds the same mean offset to every arm;
- outliers: a sample farther than ``outlier_k`` (5) scaled MADs from the median is kept in the raw
  samples but left out of the summary (median, mean, sd, percentile), unless more than 5 % of the
  samples would be dropped (a second mode is data, not an outlier).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from statistics import NormalDist

import numpy as np

#: Factor that makes the median absolute deviation a consistent estimator of sigma for normal data.
MAD_TO_SIGMA = 1.4826


@dataclass(frozen=True)
class StoppingRule:
    """When to stop repeating a measurement; a round runs every arm once.

    ``rel_precision`` is the target relative half-width of the ``confidence`` interval of the
    median (0.005 = +-0.5 %); 0 disables the precision test (always run ``max_repeats``).
    """

    warmup: int = 10
    min_repeats: int = 20
    max_repeats: int = 1000
    rel_precision: float = 0.005
    confidence: float = 0.95
    max_seconds: float = 30.0
    check_every: int = 10

    def __post_init__(self) -> None:
        if self.warmup < 0 or self.min_repeats < 1 or self.max_repeats < self.min_repeats:
            raise ValueError("need warmup >= 0 and 1 <= min_repeats <= max_repeats")
        if not 0 < self.confidence < 1 or self.rel_precision < 0 or self.check_every < 1:
            raise ValueError("need 0 < confidence < 1, rel_precision >= 0, check_every >= 1")


def median_ci(samples: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """Distribution-free confidence interval of the median (order statistics).

    The ranks come from the normal approximation of Binomial(n, 1/2): the interval is
    ``[x(j), x(k)]`` with ``j, k = n/2 -+ z sqrt(n)/2`` (rounded outwards, clamped to the sample).
    It assumes nothing about the shape of the distribution, which is why bimodal or skewed timing
    noise does not fool it.
    """
    x = np.sort(np.asarray(samples, dtype=float))
    n = x.size
    if n == 0:
        raise ValueError("no samples")
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    half = z * math.sqrt(n) / 2
    lo = max(int(math.floor(n / 2 - half)), 1)
    hi = min(int(math.ceil(n / 2 + half)) + 1, n)
    return float(x[lo - 1]), float(x[hi - 1])


def relative_halfwidth(samples: Sequence[float], confidence: float = 0.95) -> float:
    """Half-width of :func:`median_ci` divided by the median (inf when the median is 0)."""
    lo, hi = median_ci(samples, confidence)
    med = float(np.median(samples))
    if med == 0:
        return math.inf
    return (hi - lo) / 2 / abs(med)


def outlier_mask(samples: Sequence[float], k: float = 5.0, max_fraction: float = 0.05) -> np.ndarray:
    """True where a sample lies more than ``k`` scaled MADs from the median.

    Outliers are rare by definition: when more than ``max_fraction`` of the samples would be
    flagged, the data has a second mode (e.g. two clock states), not outliers, and nothing is
    flagged. Nothing is flagged either when more than half the samples are equal (MAD 0, a coarse
    timer): the spread is then unknown and dropping every differing sample would invent precision.
    """
    x = np.asarray(samples, dtype=float)
    none = np.zeros(x.size, dtype=bool)
    if x.size == 0 or k <= 0:
        return none
    med = np.median(x)
    mad = np.median(np.abs(x - med)) * MAD_TO_SIGMA
    if mad == 0:
        return none
    mask = np.abs(x - med) > k * mad
    return mask if mask.mean() <= max_fraction else none


@dataclass(frozen=True)
class Summary:
    """Robust summary of one arm's samples; ``samples`` are the raw values, outliers included."""

    n: int
    n_outliers: int
    median: float
    mean: float
    std: float
    percentile: float
    percentile_value: float
    minimum: float
    maximum: float
    rel_ci_halfwidth: float
    samples: tuple[float, ...] = field(repr=False)

    def to_dict(self) -> dict:
        """Plain-JSON form (for trial user attributes and validation records)."""
        d = asdict(self)
        d["samples"] = list(self.samples)
        return d


def summarize(
    samples: Sequence[float], *, percentile: float = 90.0, outlier_k: float = 5.0, confidence: float = 0.95
) -> Summary:
    """Median, mean, sd, ``percentile``, extremes and CI half-width, outliers left out."""
    raw = np.asarray(samples, dtype=float)
    if raw.size == 0:
        raise ValueError("no samples")
    if not 0 <= percentile <= 100:
        raise ValueError("percentile must be in [0, 100]")
    mask = outlier_mask(raw, outlier_k)
    kept = raw[~mask]
    return Summary(
        n=int(raw.size),
        n_outliers=int(mask.sum()),
        median=float(np.median(kept)),
        mean=float(kept.mean()),
        std=float(kept.std(ddof=1)) if kept.size > 1 else 0.0,
        percentile=float(percentile),
        percentile_value=float(np.percentile(kept, percentile)),
        minimum=float(kept.min()),
        maximum=float(kept.max()),
        rel_ci_halfwidth=relative_halfwidth(kept, confidence),
        samples=tuple(float(v) for v in raw),
    )


@dataclass
class Measurement:
    """Samples of every arm from one interleaved measurement, and why it stopped."""

    samples: dict[str, list[float]]
    rounds: int
    stop_reason: str  # "precision" | "max_repeats" | "max_seconds"
    seconds: float

    def summaries(self, *, percentile: float = 90.0, outlier_k: float = 5.0) -> dict[str, Summary]:
        """:func:`summarize` of every arm."""
        return {
            name: summarize(s, percentile=percentile, outlier_k=outlier_k) for name, s in self.samples.items()
        }


def round_order(names: Sequence[str], round_index: int) -> list[str]:
    """Order of the arms in round ``round_index``: as given on even rounds, mirrored on odd ones."""
    return list(names) if round_index % 2 == 0 else list(reversed(names))


def _precise(samples: Mapping[str, list[float]], rule: StoppingRule) -> bool:
    if rule.rel_precision <= 0:
        return False
    return all(relative_halfwidth(s, rule.confidence) <= rule.rel_precision for s in samples.values())


def measure_interleaved(
    arms: Mapping[str, Callable[[], float]],
    rule: StoppingRule | None = None,
    *,
    clock: Callable[[], float] = time.perf_counter,
) -> Measurement:
    """Run the arms in mirrored rounds (ABBA...) until ``rule`` says stop.

    With one arm this is an ordinary repeated measurement. The precision test applies to every
    arm, so the baseline and the candidate end with the same number of samples.
    """
    if not arms:
        raise ValueError("no arms to measure")
    rule = rule or StoppingRule()
    names = list(arms)
    for r in range(rule.warmup):
        for name in round_order(names, r):
            arms[name]()
    samples: dict[str, list[float]] = {name: [] for name in names}
    start = clock()
    rounds = 0
    reason = "max_repeats"
    while rounds < rule.max_repeats:
        for name in round_order(names, rounds):
            samples[name].append(float(arms[name]()))
        rounds += 1
        if rounds >= rule.min_repeats and (rounds - rule.min_repeats) % rule.check_every == 0:
            if _precise(samples, rule):
                reason = "precision"
                break
        if clock() - start > rule.max_seconds:
            reason = "max_seconds"
            break
    return Measurement(samples=samples, rounds=rounds, stop_reason=reason, seconds=clock() - start)
