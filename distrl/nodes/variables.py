"""Stage 6 of the data flow: how actors and the evaluator get the learner's params.

The learner serves `get_params() -> (version, params)` over courier. A
`ParamsClient` asks for them in the background (a courier future) every
`update_period` calls of `update()`, so an actor keeps stepping with the params it
has while fresh ones travel; it swaps them in when they have arrived.
"""

import time
from collections.abc import Callable
from typing import Any

import jax
from absl import logging


class ParamsClient:
    """Versioned params from a learner handle, refreshed without blocking."""

    def __init__(self, learner, update_period: int = 1):
        self._learner = learner
        self._period = update_period
        self._calls = 0
        self._future = None
        self.version = -1
        self.params: Any = None
        self.last_lag = 0  # versions the learner had moved on when params last arrived

    def wait_first(self, should_stop: Callable[[], bool]) -> bool:
        """Blocks until the first params arrive (True) or a stop is requested (False)."""
        while not should_stop():
            try:
                if self._set(self._learner.get_params()):
                    return True
            except Exception as err:  # noqa: BLE001 - courier raises grpc-level errors
                logging.warning("params: learner not answering (%s); retrying", err)
            time.sleep(0.1)
        return False

    def refresh_now(self) -> bool:
        """Pulls the latest params synchronously; True when they were newer."""
        try:
            return self._set(self._learner.get_params())
        except Exception as err:  # noqa: BLE001 - a busy learner: keep the params we have
            logging.info("params: refresh failed (%s)", err)
            return False

    def wait_for_version(self, version: int, wait_s: float = 0.5) -> bool:
        """Asks for params of at least `version`; True when newer params were swapped in.

        The learner holds the call until it publishes that version or `wait_s`
        passes (`Learner.wait_params`), so callers wait without polling; after a
        timeout this holds the newest params the learner had.
        """
        try:
            return self._set(self._learner.wait_params(version - 1, wait_s))
        except Exception as err:  # noqa: BLE001 - courier raises grpc-level errors
            logging.info("params: wait for version %d failed (%s)", version, err)
            return False

    def update(self) -> bool:
        """Call once per rollout; returns True when new params were swapped in."""
        self._calls += 1
        swapped = False
        if self._future is not None and self._future.done():
            try:
                swapped = self._set(self._future.result())
            except Exception as err:  # noqa: BLE001 - a slow or busy learner: ask again
                logging.info("params: refresh failed (%s)", err)
            self._future = None
        if self._future is None and self._calls % self._period == 0:
            self._future = self._learner.futures.get_params()
        return swapped

    def _set(self, versioned: tuple[int, Any]) -> bool:
        version, params = versioned
        if version <= self.version:
            return False
        self.last_lag = version - self.version if self.version >= 0 else 0
        # On the device once per version: numpy params passed to the jitted rollout
        # would be copied host to device on every call.
        self.version, self.params = version, jax.device_put(params)
        return True
