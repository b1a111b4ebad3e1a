"""Observability, replay node: the Reverb table's numbers as metric rows.

The replay node is Reverb's own server and runs no Python of ours, so the
evaluator polls `server_info` (through `replay.table_stats`) and logs, to
`logs/replay.csv` and `tb/replay/`: table size and fill, inserts and samples per
second, the samples per insert achieved so far, and the fraction of time the
table held inserts back (rate limiter or full queue: actors blocked) or samples
back (not enough data: learner blocked).
"""

from absl import logging

from distrl import metrics, replay


class ReplayMonitor:
    """Polls the table at most every `every_seconds` and writes one row each time."""

    def __init__(self, client, run_dir: str, every_seconds: float):
        self._client = client
        self._log = metrics.MetricsLogger(run_dir, "replay", every_seconds)
        self._deltas = None
        self.totals = {}  # the latest cumulative stats, for result.json

    def maybe_log(self, env_steps: float) -> None:
        if not self._log.due():
            return
        try:
            stats = replay.table_stats(self._client)
        except Exception as err:  # noqa: BLE001 - grpc surfaces several error types
            logging.info("replay monitor: server_info failed (%s)", err)
            return
        self.totals = stats
        if self._deltas is None:  # the first poll is the baseline of the rates
            self._deltas = metrics.Deltas(stats)
            return
        deltas, seconds = self._deltas.step(stats)
        self._log.write(int(env_steps), row(stats, deltas, seconds))

    def summary(self) -> dict:
        """Cumulative inserts, samples and samples per insert (items), or {}."""
        if not self.totals:
            return {}
        t = self.totals
        return dict(
            inserts=t["inserts"],
            samples=t["samples"],
            samples_per_insert=t["samples"] / max(t["inserts"], 1.0),
        )

    def close(self) -> None:
        self._log.close()


def row(stats: dict, deltas: dict, seconds: float) -> dict:
    """One replay row from cumulative `stats` and their `deltas` over `seconds`."""
    return dict(
        size=stats["size"],
        fill=stats["size"] / max(stats["max_size"], 1.0),
        inserts=stats["inserts"],
        samples=stats["samples"],
        inserts_per_s=deltas["inserts"] / seconds,
        samples_per_s=deltas["samples"] / seconds,
        samples_per_insert=stats["samples"] / max(stats["inserts"], 1.0),
        inserts_blocked_frac=deltas["waiting_for_sampling_ms"] / 1000.0 / seconds,
        samples_blocked_frac=deltas["waiting_for_inserts_ms"] / 1000.0 / seconds,
    )
