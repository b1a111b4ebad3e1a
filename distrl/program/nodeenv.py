"""Environment variables of each node group's processes.

Light on purpose (no Launchpad, JAX or TensorFlow): `launch/train.py` reads it
before its own imports, to start the preloaded parent (`zygote.start_early`) with
the environment every node will share.
"""

# CPU-side nodes share the machine's cores with each other and the learner: one
# XLA/TF thread each keeps them from oversubscribing it, and JAX_PLATFORMS=cpu keeps
# them off any accelerator, which the learner alone holds. (XLA has no
# intra_op_parallelism_threads flag: the often-copied bare token after the Eigen flag
# is not one XLA reads.)
_QUIET = {"TF_CPP_MIN_LOG_LEVEL": "2"}
_CPU_NODE = {
    **_QUIET,
    "JAX_PLATFORMS": "cpu",
    "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false",
    "TF_NUM_INTRAOP_THREADS": "1",
    "TF_NUM_INTEROP_THREADS": "1",
}


def node_envs(tmp_dir: str | None = None, learner_device: str = "auto") -> dict:
    """{group: the variables its node processes get}; with `tmp_dir`, temp files go there.
    The learner's JAX platform is `learner_device` ("auto": JAX's default, the host's
    accelerator where it has one); every other group's is the CPU."""
    tmp = {"TMPDIR": tmp_dir} if tmp_dir else {}
    cpu_node, quiet = {**_CPU_NODE, **tmp}, {**_QUIET, **tmp}
    learner = quiet if learner_device == "auto" else {**quiet, "JAX_PLATFORMS": learner_device}
    return {
        "actor": cpu_node,
        "evaluator": cpu_node,
        "counter": cpu_node,
        # Reverb's own threads serve; the env it builds for its tables stays off the chip
        "replay": {**quiet, "JAX_PLATFORMS": "cpu"},
        "learner": learner,
    }


def shared() -> dict:
    """The variables every group sets to the same value (a run's TMPDIR aside)."""
    first, *rest = node_envs().values()
    return {k: v for k, v in first.items() if all(env.get(k) == v for env in rest)}
