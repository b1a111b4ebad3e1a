"""How far the experiment config travels through the code before a run starts.

Traces `launcher.prepare` (validation, the memory check, the run directory) for a fresh
run of each config given, and prints, per config:
- stops: calls of distrl functions that receive the config, one of its sections, or an
  object holding the config as its `config` attribute (an experiment), as an argument;
- modules: the distinct modules those calls are in;
- config.py: the stops in `distrl/config.py`;
- climbs: stops in a module that is already on the call stack above the caller (the
  config going back up to a module it came down from);
- envs/: the stops inside `distrl/envs/`.

    .venv/bin/python -m benchmarks.config_path --configs=dqn,ppo_breakout
"""

import contextlib
import os
import sys
import tempfile

from absl import app, flags

from distrl import cli

_CONFIGS = flags.DEFINE_list("configs", ["dqn"], "config files of configs/ (names) to trace")

_PACKAGE = os.path.dirname(os.path.abspath(cli.__file__))


def _sections(config) -> set:
    """ids of the config and of each ConfigDict inside it."""
    seen = {id(config)}
    for value in config.values():
        if hasattr(value, "values") and hasattr(value, "to_dict"):
            seen |= _sections(value)
    return seen


def _module(code) -> str | None:
    path = os.path.abspath(code.co_filename)
    if not path.startswith(_PACKAGE + os.sep):
        return None
    return os.path.relpath(path, os.path.dirname(_PACKAGE))


def trace(config) -> dict:
    """The figures above for one `launcher.prepare` of `config` (a fresh run)."""
    from distrl.program import launcher  # noqa: PLC0415 - Launchpad only when run

    ids = _sections(config)
    stops, climbs, modules = [], 0, set()

    def profile(frame, event, arg):
        nonlocal climbs
        if event != "call":
            return
        module = _module(frame.f_code)
        if module is None:
            return
        code = frame.f_code
        names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
        values = [frame.f_locals.get(name) for name in names]
        if not any(id(v) in ids or id(getattr(v, "config", None)) == id(config) for v in values):
            return
        stops.append(module)
        modules.add(module)
        caller, first, mine = frame.f_back, True, None
        while caller is not None:
            owner = _module(caller.f_code)
            if owner is not None:
                if first:
                    first, mine = False, owner
                elif owner == module and mine != module:
                    climbs += 1
                    break
            caller = caller.f_back

    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        config.run_dir = os.path.join(tmp, "run")
        sys.setprofile(profile)
        try:
            launcher.prepare(config, resume=False, stack=stack)
        finally:
            sys.setprofile(None)
    return dict(
        stops=len(stops),
        modules=len(modules),
        config_py=sum(m == "distrl/config.py" for m in stops),
        climbs=climbs,
        envs=sum(m.startswith("distrl/envs/") for m in stops),
    )


def main(argv) -> None:
    del argv
    print("config | stops | modules | config.py | climbs | envs/")
    for name in _CONFIGS.value:
        config = cli.load_file(name)
        t = trace(config)
        print(
            f"{name} | {t['stops']} | {t['modules']} | {t['config_py']} | {t['climbs']} | "
            f"{t['envs']}"
        )


if __name__ == "__main__":
    app.run(main)
