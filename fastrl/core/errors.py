"""The base errors of fastrl, low enough for every layer to raise."""


class ConfigError(ValueError):
    """A config key, type or value that fastrl does not accept."""


class ExplainedError(Exception):
    """An error whose message says all there is to say (a broken env contract, say): crash
    reports show the message alone, not the traceback."""
