"""Config error wording: what a key allows, in the schema's own words."""

from __future__ import annotations

import math
import typing
from typing import Any

from ..errors import ConfigError


def _describe(tp: Any) -> str:
    """A type annotation in words: int -> 'an integer', Optional[float] -> 'a number or null', ..."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Union:
        inner = [a for a in args if a is not type(None)]
        text = " or ".join(_describe(a) for a in inner)
        return text + " or null" if len(inner) < len(args) else text
    if origin in (list, tuple, typing.List, typing.Tuple):
        return f"a list of {_describe(args[0]).split(' ', 1)[-1]}s" if args else "a list"
    return {int: "an integer", float: "a number", bool: "true or false", str: "a string"}.get(tp, "a value of its type")


# values that a schema's range checks usually refuse (lists first: a list check often refuses a number in other
# words): probing with them finds the check's words
PROBES = ([-(10**9)], ["\x00not-an-option"], -(10**9), 0, -1e300, math.nan, 0.0, "\x00not-an-option")


def type_allowed(schema: type, key: str) -> str:
    """What `key` of dataclass `schema` allows, in the schema's own words where its checks say them.

    A value of the wrong type never reaches the schema's `__post_init__` checks, so they are probed with
    values that such checks refuse (e.g. depth = 0 -> "an integer >= 2"); without a check for the key, the
    type itself in words ("an integer", "a number or null")."""
    for probe in PROBES:
        try:
            schema(**{key: probe})
        except ConfigError as e:
            if e.key == key:
                return e.allowed
        except Exception:  # a probe of another type than the check expects
            pass
    try:
        return _describe(typing.get_type_hints(schema)[key])
    except Exception:  # an annotation that cannot be resolved
        return "a value of its type"
