"""The errors that come from the user's input: the base class, and the config that cannot be used at all.

The command-line tools (``tools/train.py``, ``tools/test.py``, the converters) end such errors with their
one-line message instead of a traceback; anything else is a bug and keeps its traceback.
"""


class UserInputError(Exception):
    """An error the user fixes by changing a config, a file or a command-line argument.

    Its message must say what to change, at its end: the tools print its last line as ``<ErrorType>: <line>``, and
    lines before it (key or file lists) above that one.
    """


class ConfigError(UserInputError, ValueError):
    """The config file cannot be loaded, ``--cfg-options`` cannot be merged, or it names an unknown type."""
