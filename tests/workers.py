"""How many test processes at once (`pytest -n auto`, as `make test` runs): by the CPU
this machine has free when the suite starts, measured over a second.

Most tests wait on node processes, so on an idle machine the suite runs 1.5 processes a
free core (3 on 2 cores). Beside other busy processes each test then had a fraction of
its usual CPU, and tests judged on deadlines or on learning within a time budget failed.
With fewer test processes each test keeps about the CPU it has on an idle machine; the
suite takes longer instead."""

import math

import psutil

PER_FREE_CORE = 1.5  # test processes a free core
_MEASURE_S = 1.0


def free_cores(measure_s: float = _MEASURE_S) -> tuple[int, float]:
    """(cores, cores not busy over `measure_s`) of this machine, from its CPU times."""
    cores = psutil.cpu_count() or 1
    busy = psutil.cpu_percent(interval=measure_s) / 100.0
    return cores, cores * (1.0 - busy)


def count(free: float) -> int:
    """Test processes for `free` idle cores, rounded up (an idle machine's noise costs
    none), at least one."""
    return max(1, math.ceil(PER_FREE_CORE * free - 0.01))


def decide() -> tuple[int, str]:
    """(test processes, the line that says what they came from)."""
    cores, free = free_cores()
    n = count(free)
    return n, f"test processes: {n} ({free:.1f} of {cores} cores free over {_MEASURE_S:g} s)"
