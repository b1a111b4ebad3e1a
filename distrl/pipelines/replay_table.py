"""The rate-limited replay table shared by the replay pipelines (`transitions`,
`sequences`): uniform or prioritized sampling, the oldest removed first, and a
`SampleToInsertRatio` limiter that keeps `replay.samples_per_insert`.

The config counts its sizes in transitions (one env step of one env); an item holds
`per_item` of them (k x B n-step transitions, or the new steps of one sequence), so
Reverb's own sizes count items (`items`, `error_buffer`).
"""

from distrl import replay
from distrl.errors import check

SAMPLERS = ("uniform", "prioritized")


def validate(config, per_item: int, batch: int, what: str, names: tuple) -> None:
    """ConfigError for a replay.* value that cannot work with items of `per_item`
    transitions and learner batches of `batch` transitions; `what` says what sizes
    must be a multiple of, `names` the fields (per_item's product, the batch's)."""
    r = config.replay
    for key, value in (("replay.max_size", r.max_size), ("replay.min_size", r.min_size)):
        check(
            value >= per_item and value % per_item == 0,
            f"config.{key}={value} transitions; need {what}",
        )
    check(r.sampler in SAMPLERS, f"config.replay.sampler={r.sampler!r}; valid: {SAMPLERS}")
    check(
        r.priority_exponent >= 0,
        f"config.replay.priority_exponent={r.priority_exponent}; need >= 0",
    )
    beta, anneal = r.importance_exponent, r.importance_anneal_updates
    check(0.0 <= beta <= 1.0, f"config.replay.importance_exponent={beta}; need 0..1")
    check(anneal >= 0, f"config.replay.importance_anneal_updates={anneal}; need >= 0")
    need = max(batch, r.min_size)
    check(
        r.max_size >= need,
        f"config.replay.max_size={r.max_size} transitions is smaller than the batch "
        f"({names[1]}={batch}) or min_size={r.min_size}; need max_size >= {need}",
    )
    check(
        r.samples_per_insert > 0,
        f"config.replay.samples_per_insert={r.samples_per_insert}; need a finite value > 0",
    )
    # With SampleToInsertRatio, inserts stop once samples lag by error_buffer; the
    # first batch needs min_size items and one batch's worth of sample allowance.
    low = max(r.samples_per_insert * per_item, batch)
    check(
        r.error_buffer == 0 or r.error_buffer >= low,
        f"config.replay.error_buffer={r.error_buffer} transitions can never be met: it "
        f"must be at least max(samples_per_insert x {names[0]}, {names[1]}) = {low:g}, or 0 "
        f"to derive it",
    )


def make(config, signature, per_item: int, batch_items: int):
    """The table (a `reverb.Table`) of items of `per_item` transitions, read
    `batch_items` at a time."""
    r = config.replay
    max_items, min_items = items(config, per_item)
    return replay.replay_table(
        signature=signature,
        max_items=max_items,
        min_items=min_items,
        samples_per_insert=r.samples_per_insert,
        error_buffer=error_buffer(config, per_item, batch_items),
        priority_exponent=r.priority_exponent if r.sampler == "prioritized" else None,
    )


def items(config, per_item: int) -> tuple:
    """(max_size, min_size) of the table in items of `per_item` transitions."""
    return config.replay.max_size // per_item, config.replay.min_size // per_item


def error_buffer(config, per_item: int, batch_items: int) -> float:
    """The rate limiter's error buffer in items, derived when the config leaves it 0."""
    r = config.replay
    if r.error_buffer:
        return float(r.error_buffer) / per_item
    return float(max(items(config, per_item)[1], r.samples_per_insert, batch_items) * 10)
