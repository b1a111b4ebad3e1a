"""The one CLI style of distrl: absl flags and an ml_collections config file.

`launch/train.py` (the distributed program) and `python -m distrl.local` (the
single-process trainer) both take `--config=<config file>` and override any field
with `--config.<section>.<field>=<value>`. `run(main)` is absl's `app.run` with a
flags parser that turns every bad flag into one line on stderr and exit status 2,
before `main` runs: an unknown flag, a value of the wrong type, a missing or broken
config file, an unknown config field, and `--config.algorithm` (the config file
fixes the algorithm, since its agent section holds that preset's defaults). A
command without `--config` (`launch/evaluate.py`, which reads a run directory)
gets the same one-line flag errors.
`load(flag)` reads the parsed config (ConfigError for a file that failed to load).

Commands that run several configs (launch/compare.py, the benchmarks) take the same
overrides through `parse_several`: `--config.<section>.<field>=<value>` sets a field
of every config, `--<name>.<section>.<field>=<value>` (e.g. `--dqn.actor.num_envs=256`)
that config's alone, over `--config.`'s. Values are parsed by ml_collections as for
train.py, and every bad flag, field or value exits 2 in one line the same way.
"""

import copy
import dataclasses
import importlib.util
import logging
import os
import re
import sys
import traceback

from absl import app, flags
from ml_collections import config_dict, config_flags

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
    return _get_config(path, arg)


def _get_config(path: str, arg: str = ""):
    """The ConfigDict the config file at `path` returns from get_config(arg); ConfigError
    saying what the file did instead (raised, with the line; returned something else)."""
    name = os.path.basename(path).rpartition(".")[0]
    spec = importlib.util.spec_from_file_location(f"distrl_config_{name}", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
        get_config = getattr(module, "get_config", None)
        config = get_config(*([arg] if arg else [])) if callable(get_config) else get_config
    except config_lib.ConfigError:
        raise  # distrl's own check, already one line naming the value (from_json.py)
    except Exception as err:  # noqa: BLE001 - a config file may raise anything
        raise config_lib.ConfigError(_raised(path, err)) from None
    if not callable(get_config):
        raise config_lib.ConfigError(
            f"config file {path} defines no get_config(); it must define one that returns "
            f"a ConfigDict (as configs/dqn.py does)"
        )
    if not isinstance(config, config_dict.ConfigDict):
        what = "None" if config is None else f"a {type(config).__name__}"
        raise config_lib.ConfigError(
            f"config file {path}: get_config() returned {what} instead of a ConfigDict; "
            f"return distrl.config.base_config(<algorithm>) with fields set, as configs/dqn.py does"
        )
    return config


def _raised(path: str, err: Exception) -> str:
    """'config file F raised KeyError: 'X' at line N' (the file's last line in the traceback)."""
    here = os.path.realpath(path)
    lines = [
        f.lineno
        for f in traceback.extract_tb(err.__traceback__)
        if os.path.realpath(f.filename) == here
    ]
    at = f" at line {lines[-1]}" if lines else ""
    text = " ".join(str(err).split()) or "(no message)"
    return f"config file {path} raised {type(err).__name__}: {text}{at}"


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
    if "config" not in flags.FLAGS:  # a command on a run directory (launch/evaluate.py)
        try:
            return flags.FLAGS(argv)
        except flags.Error as err:
            fail(f"bad flag: {_last_line(err)}")
    _refuse_algorithm_override(argv)
    given = [a for a in argv[1:] if a == "--config" or a.startswith("--config=")]
    if len(given) > 1:
        fail(f"bad flag: --config is given {len(given)} times ({', '.join(given)}); give one")
    default = flags.FLAGS["config"].default_as_str.strip("'")
    _refuse_missing_file(argv, default)
    _refuse_broken_file(argv, default)
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
    # JAX reports at INFO every accelerator plugin it does not find ("Unable to
    # initialize backend 'tpu'"), twice through absl: noise before every command's output.
    logging.getLogger("jax._src.xla_bridge").setLevel(logging.WARNING)
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


@dataclasses.dataclass
class Overrides:
    """The overrides of a command that runs several configs (`parse_several`)."""

    common: dict  # --config.<path>: every config's, {path: value}
    own: dict  # --<name>.<path>: {name: {path: value}}, that config's alone

    def of(self, name: str) -> dict:
        """Config `name`'s overrides: its own over the common ones."""
        return {**self.common, **self.own.get(name, {})}

    def flags(self) -> list:
        """The same overrides as flags of a child command that takes them."""
        own = [flag for name, values in self.own.items() for flag in override_flags(values, name)]
        return override_flags(self.common) + own


def override_flags(values: dict, prefix: str = "config") -> list:
    """{'actor.num_envs': 8} -> ['--config.actor.num_envs=8'], as ml_collections parses
    them back (a string field takes the text as it is, other fields a literal)."""
    return [f"--{prefix}.{path}={value}" for path, value in values.items()]


def require_integers(name: str, flag_values) -> None:
    """List flag `name` must hold integers (else absl's parse fails, naming it)."""
    flags.register_validator(
        name,
        lambda items: all(item.lstrip("-").isdigit() for item in items),
        message=f"--{name} takes integers, comma-separated, e.g. 0,1,2",
        flag_values=flag_values,
    )


def parse_several(flag_values, argv, configs, check=None, usage: str = "") -> Overrides:
    """Parses the flags of a command that runs several configs, and its overrides.

    `flag_values` holds the command's own flags. `configs(flag_values)` returns the
    configs the overrides apply to, {name: ConfigDict}, once those flags are read
    (e.g. from --configs); a name that is an identifier gets its own `--<name>.`
    flags. Every override is checked against every config it applies to, and
    `check(overrides)` (which may raise ConfigError) validates the configs they
    make, all before the command starts anything: a bad flag, field or value ends
    the command with one line and exit status 2. --help prints `usage` and the flags.
    """
    try:
        flag_values(argv, known_only=True)  # the command's own flags, e.g. --configs
        targets = configs(flag_values)
    except flags.Error as err:
        fail(f"bad flag: {_last_line(err)}")
    except config_lib.ConfigError as err:
        fail(f"bad config: {err}")
    names = [n for n in targets if n.isidentifier() and n != "config" and n not in flag_values]
    if any(a.split("=")[0] in _HELP for a in argv[1:]):
        _print_help(flag_values, usage, names)
    _check_fields(argv, targets, names)
    overrides = _parse_overrides(flag_values, argv, targets, names)
    try:
        if check is not None:
            check(overrides)
    except config_lib.ConfigError as err:
        fail(f"bad config: {err}")
    return overrides


def _parse_overrides(flag_values, argv, targets: dict, names) -> Overrides:
    """Parses argv again with a config flag for `--config.` (every field of every
    target) and one for each `--<name>.`, so ml_collections parses each value by its
    field's type, as it does train.py's."""
    flag_values.unparse_flags()  # the command's own flags are parsed again, with these
    own = {name: targets[name] for name in names}
    try:
        for name, config in {"config": _union(targets.values()), **own}.items():
            config_flags.DEFINE_config_dict(name, config, flag_values=flag_values, sys_argv=argv)
        rest = flag_values(argv)
    except flags.Error as err:
        fail(f"bad flag: {_last_line(err)}{_override_hint(err, names)}")
    except Exception as err:  # noqa: BLE001 - ml_collections raises its own kinds too
        fail(f"bad flag: {_last_line(err)}")
    if len(rest) > 1:
        fail(f"unexpected arguments {rest[1:]}; every setting is a --flag")
    given = {name: config_flags.get_override_values(flag_values[name]) for name in own}
    return Overrides(config_flags.get_override_values(flag_values["config"]), given)


_HELP = ("--help", "-h", "-?", "--helpfull", "--helpshort")


def _print_help(flag_values, usage: str, names) -> None:
    own = "".join(f", --{name}.<field>=<value> ({name} only)" for name in names)
    print(f"{usage.strip()}\n\nFlags:\n{flag_values.get_help()}")
    print(f"\nConfig overrides: --config.<field>=<value> (every config){own}.")
    sys.exit(0)


def _check_fields(argv, targets: dict, names) -> None:
    """Exits 2 for an override of `algorithm` or of a field a config lacks."""
    checks = [(path, "config", list(targets)) for path in _override_paths(argv, "config")]
    checks += [(path, n, [n]) for n in names for path in _override_paths(argv, n)]
    for path, prefix, owners in checks:
        flag = f"--{prefix}.{path}"
        if path == "algorithm":
            fail(
                f"bad config: {flag} cannot be overridden: each config file sets it with "
                f"that preset's agent defaults; choose the configs instead"
            )
        for owner in owners:
            unknown = _unknown_path(targets[owner], path, flag, owner if len(targets) > 1 else "")
            if unknown:
                fail(f"bad config: {unknown}")


def _union(configs):
    """One ConfigDict with every field of `configs` (the first config's where they
    share one): what `--config.` overrides are parsed against."""
    configs = list(configs)
    union = copy.deepcopy(configs[0]) if configs else config_dict.ConfigDict()
    for config in configs[1:]:
        _add_missing(union, config)
    return union


def _add_missing(into, config) -> None:
    for key, value in config.items():
        if key not in into:
            into[key] = value
        elif hasattr(value, "keys") and hasattr(into[key], "keys"):
            _add_missing(into[key], value)


def _override_hint(err, names) -> str:
    """For an unknown flag with a dot: which override flags the command takes."""
    if "Unknown command line flag" not in str(err) or "." not in str(err):
        return ""
    own = "".join(f", --{name}.<field>" for name in names)
    return f" (overrides: --config.<field>=<value> for every config{own} for one)"


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


def _refuse_broken_file(argv, default: str) -> None:
    """Exits 2 naming what the config file did when it does not give a ConfigDict (else
    ml_collections' error would name a symptom: an override's field unknown, a key)."""
    file, _, arg = _config_path(argv, default).partition(":")
    try:
        _get_config(file, arg)
    except config_lib.ConfigError as err:
        fail(f"bad config: {err}")


def _unknown_field(argv, default: str) -> str:
    """'config.env.slipery is unknown; valid fields of config.env: ...' for the first
    override that names no field of the config file, or ''."""
    path = _config_path(argv, default)
    try:
        config = load_file(path)
    except Exception:  # noqa: BLE001 - the file itself is what failed; say that instead
        return ""
    for override in _override_paths(argv, "config"):
        unknown = _unknown_path(config, override, f"--config.{override}")
        if unknown:
            return unknown
    return ""


def _override_paths(argv, prefix: str) -> list:
    """The field paths of argv's `--<prefix>.<path>[=value]` flags, in order."""
    head = re.compile(rf"^--?(no)?{re.escape(prefix)}\.([^=]+)")
    return [m.group(2) for m in map(head.match, argv[1:]) if m]


def _unknown_path(config, path: str, flag: str, owner: str = "") -> str:
    """'config.env.slipery is unknown (in --config.env.slipery); valid fields of
    config.env: ...' when `path` names no field of `config`, else ''. `owner`
    ('ppo') names the config when the command has several."""
    node, parts = config, path.split(".")
    for depth, name in enumerate(parts):
        keys = list(node.keys()) if hasattr(node, "keys") else []
        if name not in keys:
            where = (f"{owner}'s " if owner else "") + ".".join(["config", *parts[:depth]])
            return (
                f"{where}.{name} is unknown (in {flag}); valid fields of {where}: "
                f"{', '.join(sorted(keys))}"
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
