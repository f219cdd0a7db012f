"""Validation of config values that must be one of a fixed set of names."""
from typing import Collection, Type, TypeVar

from .errors import UserInputError

T = TypeVar('T')


class InvalidChoiceError(UserInputError, ValueError):
    """A config value is not one of the names the setting accepts (the message lists them)."""


class ConfigValueError(UserInputError, ValueError):
    """A config value is outside what its setting accepts (the message names the setting and what it accepts)."""


def check_choice(name: str, value: T, choices: Collection[T],
                 error_cls: Type[UserInputError] = InvalidChoiceError) -> T:
    """Return ``value`` if it is in ``choices``, else raise ``error_cls`` naming the value and the valid choices.

    Message: ``Unknown <name> <value!r>; choose one of <sorted choices>.``
    """
    if value not in choices:
        raise error_cls(f'Unknown {name} {value!r}; choose one of {sorted(choices)}.')
    return value
