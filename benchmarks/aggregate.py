"""Across-seed figures of one preset: the mean and the interquartile mean (IQM), each
with a 95% percentile-bootstrap interval over seeds (the reporting protocol of
docs/results.md; Agarwal et al. 2021, "Deep RL at the edge of the statistical
precipice", recommend the IQM and bootstrap intervals for few seeds).

Pure numpy and deterministic: the resamples come from a fixed seed, so the same
rows always give the same table (`make results` is checked byte for byte).
"""

from typing import NamedTuple

import numpy as np

RESAMPLES = 10_000
CONFIDENCE = 0.95
SEED = 0


def iqm(values) -> float:
    """The interquartile mean: the mean of what is left after cutting int(n / 4) of the
    values off each end of the sorted [n] array (scipy's `trim_mean(x, 0.25)`)."""
    x = np.sort(np.asarray(values, dtype=np.float64).ravel())
    if not len(x):
        raise ValueError("iqm of no values")
    cut = len(x) // 4
    return float(x[cut : len(x) - cut].mean())


def _iqm_rows(samples: np.ndarray) -> np.ndarray:
    """iqm of each row of [R, n] samples, vectorised."""
    x = np.sort(samples, axis=1)
    cut = x.shape[1] // 4
    return x[:, cut : x.shape[1] - cut].mean(axis=1)


STATISTICS = {"mean": lambda s: s.mean(axis=1), "iqm": _iqm_rows}


def bootstrap_interval(
    values,
    statistic: str = "mean",
    resamples: int = RESAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = SEED,
) -> tuple[float, float]:
    """The percentile bootstrap interval of `statistic` ("mean" or "iqm") of [n] values:
    `resamples` draws of n values with replacement, the statistic of each, and its
    (1 - confidence) / 2 and (1 + confidence) / 2 quantiles (numpy's linear rule)."""
    x = np.asarray(values, dtype=np.float64).ravel()
    if not len(x):
        raise ValueError("bootstrap interval of no values")
    rng = np.random.Generator(np.random.PCG64(seed))
    picks = rng.integers(0, len(x), size=(resamples, len(x)))
    stats = STATISTICS[statistic](x[picks])
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(stats, [tail, 1.0 - tail])
    return float(low), float(high)


class Summary(NamedTuple):
    """Across-seed figures of [n] per-seed values."""

    n: int
    mean: float
    mean_low: float
    mean_high: float
    iqm: float
    iqm_low: float
    iqm_high: float
    min: float
    max: float


def summarize(values, resamples: int = RESAMPLES, seed: int = SEED) -> Summary:
    """Summary of [n] per-seed values (n >= 1): mean and IQM with their 95% bootstrap
    intervals (one seed gives a point), min and max."""
    x = np.asarray(values, dtype=np.float64).ravel()
    mean_low, mean_high = bootstrap_interval(x, "mean", resamples, seed=seed)
    iqm_low, iqm_high = bootstrap_interval(x, "iqm", resamples, seed=seed)
    return Summary(
        n=len(x),
        mean=float(x.mean()),
        mean_low=mean_low,
        mean_high=mean_high,
        iqm=iqm(x),
        iqm_low=iqm_low,
        iqm_high=iqm_high,
        min=float(x.min()),
        max=float(x.max()),
    )
