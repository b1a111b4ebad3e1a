"""The error every check of user input raises (`ConfigError`), below every module that
checks something, so that the config, the pipelines and the checkpoints share it."""


class ConfigError(ValueError):
    """A config value that cannot work; the message names it and what is valid."""


def check(ok, message: str) -> None:
    """ConfigError(message) unless `ok`."""
    if not ok:
        raise ConfigError(message)
