"""Pass options checked against the pass dataclass's fields, with errors that name the pass,
the option, what it expects and the value given.

Two sources: the pipeline text of vllm-opt (`-p 'lower-dispatch{report=yes}'`, values as
xDSL's pipeline parser reads them) and `torch.compile(..., options={"pass_options": {...}})`
(Python values). xDSL's own message (`Incompatible types: given ('yes',), expected <class
'bool'>`) names neither the pass nor the option.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any

from xdsl.passes import ModulePass
from xdsl.utils.arg_spec import ArgSpec, ParameterListType, parse_pipeline
from xdsl.utils.hints import isa


class PassOptionError(ValueError):
    """A pass option that does not exist or has a value of the wrong type (one line)."""


def option_types(cls: type[ModulePass]) -> dict[str, Any]:
    """Field name -> type hint of each option of pass `cls`."""
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)
            if f.init and f.name != "name"}


def spelled(field: str) -> str:
    """An option as vllm-opt spells it (kebab-case)."""
    return field.replace("_", "-")


def expected(hint: Any, python: bool) -> str:
    """What an option of type `hint` takes, in words."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and len(args) == 1:
        return expected(args[0], python)
    if hint is bool:
        return "True or False" if python else "true or false"
    if typing.get_origin(hint) is tuple:
        return f"a list of {expected(typing.get_args(hint)[0], python)} values"
    return {int: "an integer", float: "a number", str: "a string"}.get(hint, str(hint))


def _matches(value: ParameterListType, hint: Any) -> bool:
    """Whether xDSL's ArgSpec conversion accepts `value` for a field of type `hint`."""
    if value == ():
        return type(None) in typing.get_args(hint)
    return (len(value) == 1 and isa(value[0], hint)) or isa(value, hint)


def _shown(value: ParameterListType, python: bool) -> str:
    if value == ():
        return "no value"
    if python:
        return repr(value[0]) if len(value) == 1 else repr(list(value))
    return ",".join(f"'{v}'" if isinstance(v, str) else str(v).lower() if isinstance(v, bool)
                    else str(v) for v in value)


def build_pass(cls: type[ModulePass], params: Mapping[str, ParameterListType],
               python: bool = False) -> ModulePass:
    """An instance of pass `cls` with `params` (option -> values, kebab- or snake-case);
    PassOptionError naming the pass and the option if one does not exist or does not fit."""
    fields = option_types(cls)
    checked: dict[str, ParameterListType] = {}
    for key, value in params.items():
        field = key.replace("-", "_")
        if field not in fields:
            known = ", ".join(spelled(f) for f in fields) or "none"
            raise PassOptionError(f"pass '{cls.name}' has no option '{key}' (options: {known})")
        if not _matches(value, fields[field]):
            raise PassOptionError(f"pass '{cls.name}': option '{spelled(field)}' expects "
                                  f"{expected(fields[field], python)}, got {_shown(value, python)}")
        checked[field] = value
    try:
        return cls.from_spec(ArgSpec(cls.name, checked))
    except ValueError as e:  # a value the pass itself rejects
        raise PassOptionError(f"pass '{cls.name}': {e}") from None


def python_params(cls: type[ModulePass], options: Any) -> dict[str, ParameterListType]:
    """`torch.compile`'s {option: Python value} for pass `cls` as ArgSpec parameters."""
    if not isinstance(options, Mapping):
        raise PassOptionError(f"pass '{cls.name}': options must be a dict of option -> value, "
                              f"got {options!r}")
    params: dict[str, ParameterListType] = {}
    for key, value in options.items():
        if not isinstance(key, str):
            raise PassOptionError(f"pass '{cls.name}': option names are strings, got {key!r}")
        if value is None:
            params[key] = ()
        elif isinstance(value, list | tuple):
            params[key] = tuple(value)
        else:
            params[key] = (value,)
    return params


def explain_pipeline(available: Mapping[str, Callable[[], type[ModulePass]]],
                     pipeline: str) -> str | None:
    """The first pass option of `pipeline` (vllm-opt's -p text) that does not fit its pass,
    as one line; None if every option fits (the error was something else)."""
    try:
        specs = list(parse_pipeline(pipeline))
    except Exception:  # noqa: BLE001 - not ours to explain: the caller re-raises its error
        return None
    for spec in specs:
        if spec.name in available:
            try:
                build_pass(available[spec.name](), spec.parameters)
            except PassOptionError as e:
                return str(e)
    return None
