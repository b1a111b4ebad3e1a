"""A user's own gymnax-style environment module, as
`--config.env.name=tests.gymnax_user_envs:make` loads it: an env written against gymnax's
`Environment` (reset_env, step_env, default_params, action_space(params),
observation_space(params)), a factory returning it alone and one returning the
`(env, params)` pair `gymnax.make` returns, and factories whose answers distrl refuses."""

import jax
import jax.numpy as jnp
from flax import struct
from gymnax.environments import environment, spaces


@struct.dataclass
class State(environment.EnvState):
    context: jax.Array  # int32 []: the action that pays this step
    time: int


@struct.dataclass
class Params(environment.EnvParams):
    max_steps_in_episode: int = 4


class Contexts(environment.Environment[State, Params]):
    """tests.user_envs.Contexts in gymnax's form: each step shows one of `contexts`
    one-hot contexts and the action equal to it earns 1; every episode is truncated
    after params.max_steps_in_episode steps (gymnax's is_truncated), so the best
    return is that many."""

    def __init__(self, contexts: int = 3):
        super().__init__()
        self.contexts = contexts

    @property
    def default_params(self) -> Params:
        return Params()

    def step_env(self, key, state, action, params):
        reward = jnp.where(action == state.context, 1.0, 0.0)
        state = State(context=jax.random.randint(key, (), 0, self.contexts), time=state.time + 1)
        return self.get_obs(state), state, reward, jnp.bool_(False), {}

    def reset_env(self, key, params):
        state = State(context=jax.random.randint(key, (), 0, self.contexts), time=0)
        return self.get_obs(state), state

    def get_obs(self, state, params=None, key=None):
        return jax.nn.one_hot(state.context, self.contexts)

    def action_space(self, params=None):
        return spaces.Discrete(self.contexts)

    def observation_space(self, params):
        return spaces.Box(0.0, 1.0, (self.contexts,), jnp.float32)


def make(contexts: int = 3) -> Contexts:
    """The env alone: its default_params (4 steps an episode)."""
    return Contexts(contexts)


def make_pair(contexts: int = 3, length: int = 4):
    """The (env, params) pair, as gymnax.make returns one."""
    return Contexts(contexts), Params(max_steps_in_episode=length)


def pair_without_a_time_limit():
    return Contexts(), {"length": 4}


def two_numbers():
    return 1, 2


class _NoObservationSpace(Contexts):
    def observation_space(self, params):
        raise NotImplementedError


def without_an_observation_space():
    return _NoObservationSpace()
