"""The experiment: what a run derives from its config, built once.

`make(config)` checks the config (its shape here, then each section by the module that
owns it: `config.OWNERS`) and returns the `Experiment`: the env the config names, the
agent's config dataclass, the agent and its pipeline. Every node, the single-process
trainer, policy loading, the memory estimate and the evaluation take an `Experiment`;
none rebuilds these from the config.

An experiment crosses a process boundary (Launchpad pickles each node's arguments) as
its config alone: the receiving process builds each part once, on first use, from the
same config, so nothing unpicklable (a jitted function, a gymnasium env) travels.
"""

import functools

from distrl import agents, pipelines
from distrl import config as config_lib
from distrl.envs import section as env_section


class Experiment:
    """One experiment: `config`, and the parts built from it on first use.

    `env` may be given (`distrl.local.train(config, env=...)`: any env of the
    interface, not one the config names); it then travels with the experiment.
    Building a part of an unchecked config raises the ConfigError naming its field.
    """

    def __init__(self, config, env=None):
        self.config = config
        self._given_env = env
        if env is not None:
            self.__dict__["env"] = env  # the cached_property's slot

    @functools.cached_property
    def env(self):
        """The env `config.env` names (`envs.section.make`)."""
        return env_section.make(self.config.env)

    @functools.cached_property
    def agent_config(self):
        """The algorithm's config dataclass, from `config.agent` (every field)."""
        return agents.config_of(self.config.algorithm, self.config.agent.to_dict())

    @functools.cached_property
    def agent(self) -> agents.Agent:
        """The agent of the config's algorithm on `env`."""
        return agents.make_agent(self.agent_config, self.env.spec)

    @functools.cached_property
    def pipeline(self) -> pipelines.Pipeline:
        """How the agent's data travels (`distrl.pipelines`)."""
        return pipelines.of(self.agent_config)

    def with_config(self, config) -> "Experiment":
        """The same experiment on a changed config (e.g. another actor count)."""
        return Experiment(config, self._given_env)

    def __getstate__(self):
        return {"config": self.config, "env": self._given_env}

    def __setstate__(self, state):
        self.__init__(state["config"], state["env"])


def make(config, env=None) -> Experiment:
    """The checked experiment of `config`; ConfigError naming the first value that cannot
    work, before anything starts. `env`: a caller's own env instead of config.env's."""
    experiment = Experiment(config, env)
    config_lib.validate(experiment)
    return experiment
