"""The exceptions attnmt raises for bad input: each names the file, line or config key at fault."""


class AttnmtError(Exception):
    """Base class: an error a user can fix, reported without a traceback by the CLIs."""


class ConfigError(AttnmtError):
    """A config value is missing, unknown or impossible; the message names the key."""


class DataError(AttnmtError):
    """An input file is missing or malformed; the message names the file (and line)."""


class CheckpointError(AttnmtError):
    """A checkpoint cannot be loaded or does not fit the model being built."""
