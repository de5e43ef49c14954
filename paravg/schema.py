"""The config schema's defaults and bounds, read once, for the code's option classes.

``config/config.schema.yaml`` is the one place where an option's default and bounds are
written. :func:`paravg.config.validate_config` checks a user's config against it with
jsonschema at start-up; the option dataclasses built in code
(:class:`paravg.optim.options.NgsgdOptions`, :class:`paravg.decode.options.SearchOptions`)
take their defaults from it with :func:`defaults` and hold their values to the same
bounds with :func:`check`, so an option built by a test, a benchmark or a job's JSON
obeys what a config would, and no default or bound is written twice.

:func:`check` reads the keywords those sections use: ``type`` (``integer``, ``number``,
``boolean``, ``string``, ``null``), ``enum``, ``minimum``, ``maximum``,
``exclusiveMinimum``, ``exclusiveMaximum``. It is stricter than jsonschema in two ways the
code needs: an ``integer`` is an int (not 3.0), and a ``number`` is finite.
"""

from __future__ import annotations

import copy
import functools
import math
import numbers
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from paravg.errors import ConfigError

SCHEMA_PATH = Path(__file__).resolve().parent.parent / "config" / "config.schema.yaml"


@functools.lru_cache(maxsize=8)
def parsed_schema(path: str = str(SCHEMA_PATH)) -> dict:
    """The YAML schema as parsed (cached per process: callers must not change it).

    libyaml's loader when PyYAML has it (its wheels do): the schema is read by every
    cluster job's snakemake at start-up, and the pure-Python parser costs 0.1 s per read.
    """
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with open(path) as f:
        return yaml.load(f, Loader=loader)


def section(dotted: str, path: str | Path = SCHEMA_PATH) -> dict:
    """The sub-schema of a config section (``"decode"``, ``"trainer.ngsgd"``), its
    ``$ref`` to ``#/$defs/…`` followed."""
    root = parsed_schema(str(path))
    node = root
    for name in dotted.split("."):
        node = node["properties"][name]
        while "$ref" in node:
            node = root["$defs"][node["$ref"].removeprefix("#/$defs/")]
    return node


def defaults(dotted: str) -> dict[str, Any]:
    """The ``default`` of every key of section ``dotted`` that has one (copies)."""
    props = section(dotted)["properties"]
    return {k: copy.deepcopy(p["default"]) for k, p in props.items() if "default" in p}


def _fmt(x: Any) -> str:
    return format(x, "g") if isinstance(x, float) else str(x)


def describe(prop: Mapping[str, Any]) -> str:
    """What a key's schema allows, in words: ``an integer >= 1``, ``a number in (0, 1e-05]``,
    ``true or false``, ``one of ['a', 'b']``."""
    if "enum" in prop:
        return f"one of {prop['enum']}"
    types = prop.get("type", [])
    types = [types] if isinstance(types, str) else list(types)
    if types == ["boolean"]:
        return "true or false"
    what = "an integer" if "integer" in types else "a number" if "number" in types else "a value"
    lo = ("(", prop["exclusiveMinimum"]) if "exclusiveMinimum" in prop else None
    lo = ("[", prop["minimum"]) if "minimum" in prop else lo
    hi = (")", prop["exclusiveMaximum"]) if "exclusiveMaximum" in prop else None
    hi = ("]", prop["maximum"]) if "maximum" in prop else hi
    if lo and hi:
        what += f" in {lo[0]}{_fmt(lo[1])}, {_fmt(hi[1])}{hi[0]}"
    elif lo:
        what += f" {'>' if lo[0] == '(' else '>='} {_fmt(lo[1])}"
    elif hi:
        what += f" {'<' if hi[0] == ')' else '<='} {_fmt(hi[1])}"
    return what + (" or null" if "null" in types else "")


def _allowed(value: Any, prop: Mapping[str, Any]) -> bool:
    if "enum" in prop:
        return value in prop["enum"]
    types = prop.get("type", [])
    types = [types] if isinstance(types, str) else list(types)
    if value is None:
        return "null" in types
    if isinstance(value, bool):
        return "boolean" in types
    if "string" in types and isinstance(value, str):
        return True
    if isinstance(value, numbers.Integral):
        if "integer" not in types and "number" not in types:
            return False
    elif isinstance(value, numbers.Real):
        if "number" not in types or not math.isfinite(value):
            return False
    else:
        return False
    return (
        ("minimum" not in prop or value >= prop["minimum"])
        and ("exclusiveMinimum" not in prop or value > prop["exclusiveMinimum"])
        and ("maximum" not in prop or value <= prop["maximum"])
        and ("exclusiveMaximum" not in prop or value < prop["exclusiveMaximum"])
    )


def check(dotted: str, values: Mapping[str, Any], where: str | None = None) -> None:
    """Raise :class:`ConfigError` naming the first key of ``values`` that section
    ``dotted`` does not have or whose value it does not allow, and the bound:
    ``trainer.ngsgd.alpha = -1.0: expected a number >= 0``. ``where`` is the config path
    the message names (default ``dotted``; ``experiments.x.trainer.ngsgd``)."""
    where = where or dotted
    props = section(dotted)["properties"]
    unknown = sorted(set(values) - set(props))
    if unknown:
        raise ConfigError(f"{where}: unknown option(s) {unknown}; known: {sorted(props)}")
    for key, value in values.items():
        if not _allowed(value, props[key]):
            raise ConfigError(f"{where}.{key} = {value!r}: expected {describe(props[key])}")
