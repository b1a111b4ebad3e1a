"""rlax, imported without loading TensorFlow for it.

rlax imports distrax, whose TFP JAX substrate imports TensorFlow, where it is installed,
only to copy TensorFlow's docstrings onto its functions
(tensorflow_probability/python/internal/backend/jax/_utils.py). That is 2.4 of the 3.5
CPU s it takes the evaluator node or `distrl.local` to import their code, and neither
uses TensorFlow. TensorFlow hidden for this one import leaves TFP as on a stack without
it (the core's); a later `import reverb` loads it as usual.
"""

import sys

if "tensorflow" in sys.modules:  # loaded already: nothing to save
    import rlax
else:
    sys.modules["tensorflow"] = None  # meanwhile `import tensorflow...` raises ImportError
    try:
        import rlax
    finally:
        del sys.modules["tensorflow"]

__all__ = ["rlax"]
