"""Launching a program on a Ray cluster: the only subpackage that knows Ray.

`cluster` (the entry points) and its parts run in the launcher; `nodehost` is the Ray
actor that hosts one node.
"""

# The file a node host watches for its node's stop request (lifecycle.stop_via_file).
# Here, not in lifecycle, so that a node host need not import Launchpad for it.
STOP_FILE_ENV = "DISTRL_STOP_FILE"
