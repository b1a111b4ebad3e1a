"""The error every check of user input raises (`ConfigError`), below every module that
checks something, so that the config, each section's owner and the checkpoints share it."""


class ConfigError(ValueError):
    """A config value that cannot work; the message names it and what is valid."""


def check(ok, message: str) -> None:
    """ConfigError(message) unless `ok`."""
    if not ok:
        raise ConfigError(message)


def at_least(config, lowest: dict) -> None:
    """ConfigError for the first field of `lowest` ({'section.field': its lowest value})
    below its lowest value in `config`."""
    for key, low in lowest.items():
        value = config
        for name in key.split("."):
            value = value[name]
        check(value >= low, f"config.{key}={value}; need >= {low}")
