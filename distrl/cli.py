"""The one CLI style of distrl: absl flags and an ml_collections config file.

`launch/train.py` (the distributed program) and `python -m distrl.local` (the
single-process trainer) both take `--config=<config file>` and override any field
with `--config.<section>.<field>=<value>`. `run(main)` is absl's `app.run` with a
flags parser that turns every bad flag into one line on stderr and exit status 2,
before `main` runs: an unknown flag, a value of the wrong type, a missing or broken
config file, an unknown config field, and `--config.algorithm` (the config file
fixes the algorithm, since its agent section holds that preset's defaults).
`load(flag)` reads the parsed config (ConfigError for a file that failed to load).
"""

import ast
import importlib.util
import os
import sys

from absl import app, flags
from ml_collections import config_flags

from distrl import agents, compile_cache, exits
from distrl import config as config_lib

BAD_INPUT = 2  # the exit status of every bad flag, config or checkpoint
# configs/ of the checkout this package runs from (an editable install).
CONFIGS_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "configs")


def load_file(name_or_path: str):
    """A config file's get_config(): `name` (configs/<name>.py), a path, or `path:arg`.

    The one loader of config files outside absl's flag (comparisons, benchmarks,
    tests); ConfigError when the file does not exist.
    """
    path, _, arg = name_or_path.partition(":")
    if not path.endswith(".py"):
        path = os.path.join(CONFIGS_DIR, f"{path}.py")
    if not os.path.isfile(path):
        raise config_lib.ConfigError(f"config {name_or_path!r}: {path} does not exist")
    name = os.path.basename(path)[:-3]
    spec = importlib.util.spec_from_file_location(f"distrl_config_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.get_config(*([arg] if arg else []))


def parse_override(item: str) -> tuple:
    """'actor.num_envs=32' -> ('actor.num_envs', 32): a Python literal where the value
    parses as one (32, 1.5, True, (64, 64)), else the string ('8x8')."""
    key, sep, text = item.partition("=")
    if not sep or not key:
        raise config_lib.ConfigError(f"override {item!r}: expected <field>=<value>")
    try:
        return key, ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return key, text


def apply_overrides(config, overrides: dict) -> None:
    """Sets each dotted field of `overrides`; ConfigError naming a field the config lacks
    or a value of the wrong type."""
    config.lock()  # a field the config lacks is an error, not a new field
    try:
        config.update_from_flattened_dict(dict(overrides))
    except (KeyError, AttributeError, TypeError, ValueError) as err:
        raise config_lib.ConfigError(f"override {overrides}: {_last_line(err)}") from None
    finally:
        config.unlock()


def define_config(default: str):
    """The `--config` flag (a config file; `--config.x.y=v` overrides a field).

    ml_collections loads the default file and applies sys.argv's overrides right
    here when `--config` is not given, so a bad override fails here too.
    """
    try:
        return config_flags.DEFINE_config_file(
            "config",
            default,
            "Experiment config file (configs/*.py); override any field "
            "with --config.<section>.<field>=<value>.",
        )
    except Exception as err:  # noqa: BLE001 - a config file may raise anything
        fail(f"bad config: {_unknown_field(sys.argv, default) or _last_line(err)}")


def fail(message: str) -> None:
    """One line on stderr, exit status 2."""
    print(f"distrl: {message}", file=sys.stderr)
    sys.exit(BAD_INPUT)


def parse_flags(argv):
    """absl's flags parser, with every failure reported in one line (exit status 2)."""
    _refuse_algorithm_override(argv)
    given = [a for a in argv[1:] if a == "--config" or a.startswith("--config=")]
    if len(given) > 1:
        fail(f"bad flag: --config is given {len(given)} times ({', '.join(given)}); give one")
    default = flags.FLAGS["config"].default_as_str.strip("'")
    _refuse_missing_file(argv, default)
    try:
        return flags.FLAGS(argv)
    except flags.Error as err:
        fail(f"bad flag: {_unknown_field(argv, default) or _last_line(err)}")
    except Exception as err:  # noqa: BLE001 - a config file may raise anything
        fail(f"bad config: {_unknown_field(argv, default) or _last_line(err)}")


def run(main) -> None:
    """app.run(main) with `parse_flags`; a UsageError is a bad input too. Turns on
    JAX's compilation cache for the run's processes."""

    def checked(argv):
        if len(argv) > 1:
            fail(f"unexpected arguments {argv[1:]}; every setting is a --flag")
        return main(argv)

    compile_cache.enable()
    try:
        app.run(checked, flags_parser=parse_flags)
    except SystemExit as done:
        exits.now(done.code)  # nothing is left to do


def load(holder):
    """The parsed config of `define_config`'s flag; ConfigError if its file did not load."""
    try:
        config = holder.value
        config.keys()  # a config file that failed to load raises here
    except flags.IllegalFlagValueError:
        raise config_lib.ConfigError(
            "the config file's get_config() returned None; it must return a ConfigDict"
        ) from None
    except (OSError, AttributeError, TypeError) as err:
        message = f"the config file cannot be loaded: {_last_line(err)}"
        raise config_lib.ConfigError(message) from None
    return config


def _refuse_algorithm_override(argv) -> None:
    for i, arg in enumerate(argv):
        if arg == "--config.algorithm" or arg.startswith("--config.algorithm="):
            value = arg.partition("=")[2] if "=" in arg else " ".join(argv[i + 1 : i + 2])
            presets = ", ".join(sorted(agents.PRESETS))
            unknown = "" if value in agents.PRESETS else f"config.algorithm={value!r} is unknown; "
            fail(
                f"bad config: {unknown}--config.algorithm cannot be overridden: the config file "
                f"sets it with that preset's agent defaults; use --config=configs/preset.py:<name> "
                f"(valid: {presets}) or a file in configs/"
            )


def _config_path(argv, default: str) -> str:
    """The --config value in argv (the last one), or `default`."""
    path = default
    for i, arg in enumerate(argv[1:], 1):
        if arg.startswith("--config="):
            path = arg.split("=", 1)[1]
        elif arg == "--config" and i + 1 < len(argv):
            path = argv[i + 1]
    return path


def _refuse_missing_file(argv, default: str) -> None:
    path = _config_path(argv, default)
    file = path.split(":", 1)[0]
    if not file:
        fail("bad config: --config= is empty; give a config file, e.g. --config=configs/dqn.py")
    if not os.path.isfile(file):
        fail(
            f"bad config: config file {file!r} does not exist (--config={path}); "
            f"e.g. --config=configs/dqn.py, or configs/preset.py:<algorithm>"
        )


def _unknown_field(argv, default: str) -> str:
    """'config.env.slipery is unknown; valid fields of config.env: ...' for the first
    override that names no field of the config file, or ''."""
    path = _config_path(argv, default)
    overrides = []
    for arg in argv[1:]:
        if arg.startswith("--config."):
            overrides.append(arg[len("--config.") :].partition("=")[0])
    try:
        config = load_file(path)
    except Exception:  # noqa: BLE001 - the file itself is what failed; say that instead
        return ""
    for override in overrides:
        node, parts = config, override.split(".")
        for depth, name in enumerate(parts):
            keys = list(node.keys()) if hasattr(node, "keys") else []
            if name not in keys:
                where = ".".join(["config", *parts[:depth]])
                return (
                    f"{where}.{name} is unknown (in --config.{override}); valid fields of "
                    f"{where}: {', '.join(sorted(keys))}"
                )
            node = node[name]
    return ""


def _last_line(err) -> str:
    """The useful line of an error: a ConfigError's own message, else its last line."""
    text = str(err).strip()
    marker = "ConfigError: "
    if marker in text:
        return text.rsplit(marker, 1)[1].splitlines()[0]
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return type(err).__name__
    if len(lines) > 1 and lines[0].startswith("flag --config"):
        return f"{lines[0]} {lines[-1]}"
    return lines[-1] if len(lines) > 1 and "Traceback" in text else " ".join(lines)
