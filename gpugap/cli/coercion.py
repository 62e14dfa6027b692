"""Typer's value coercion, built only for values that need it.

typer >= 0.2x coerces every parameter's value through a pydantic ``TypeAdapter`` that
it builds on the parameter's first value, whether the user gave the option or not: one
adapter per option of the command (about 15 ms each, 20 options for ``analyze``) and
pydantic's import (0.15-0.25 s), a third of ``gpugap analyze``'s start-up on a small
report. Most values need no coercion: an option not given (None), a default already of
the parameter's type (``--max-findings`` 20), a report path given as text (a ``Path``
with no checks asked: ``Path(text)``, what pydantic returns too). :func:`defer_coercion`
answers those itself and hands every other value to typer's own coercion, built then.

Duck-typed: older typer (click's own parameters, no runtime coercion) is left as it is.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, get_args, get_origin

# Path checks a parameter may ask for (typer.Argument(exists=True), ...): any of them
# set and typer's own coercion runs.
_PATH_CHECKS = ("exists", "resolve_path", "allow_dash", "path_type")


def defer_coercion(command: Any) -> None:
    """Give each typer parameter of *command* (and of its subcommands) the coercion
    below, in place of the one typer would build on the first value: the parameters a
    command parses with (its own, and the help option click makes as it parses)."""
    params_of = getattr(command, "get_params", None)
    if params_of is not None:
        def get_params(ctx: Any) -> list[Any]:
            params = params_of(ctx)
            for param in params:
                if hasattr(param, "get_runtime_param") and \
                        getattr(param, "_runtime_param", False) is None:
                    param._runtime_param = _Deferred()
            return params

        command.get_params = get_params
    for sub in (getattr(command, "commands", None) or {}).values():
        defer_coercion(sub)


class _Deferred:
    """A parameter's coercion: the value itself where it needs none, else typer's."""

    def coerce(self, value: Any, param: Any, ctx: Any) -> Any:
        if value is None:                    # typer's RuntimeParam.coerce, first lines
            return () if param.multiple or param.nargs == -1 else None
        done = _plain(value, param, ctx)
        if done is not _NEEDS_TYPER:
            return done
        param._runtime_param = None          # typer builds its own, kept from now on
        return param.get_runtime_param().coerce(value, param=param, ctx=ctx)


_NEEDS_TYPER = object()


def _plain(value: Any, param: Any, ctx: Any) -> Any:
    """*value* as typer would coerce it, where that is certain without pydantic; else
    _NEEDS_TYPER."""
    descriptor = getattr(param, "type_descriptor", None)
    if descriptor is None:
        return _NEEDS_TYPER
    annotation, info = descriptor.annotation, descriptor.parameter_info
    if type(value) is annotation and annotation in (bool, int, float, str) \
            and _from_default(param, ctx):
        return value
    if getattr(info, "parser", None) is not None or any(getattr(info, check, None)
                                                        for check in _PATH_CHECKS):
        return _NEEDS_TYPER
    if annotation is Path and type(value) is str:
        return Path(value)
    if get_origin(annotation) is list and get_args(annotation) == (Path,) \
            and isinstance(value, (list, tuple)) and all(type(v) is str for v in value):
        return [Path(v) for v in value]
    return _NEEDS_TYPER


def _from_default(param: Any, ctx: Any) -> bool:
    """The value is the parameter's declared default (not the user's text)."""
    source = getattr(ctx, "get_parameter_source", lambda name: None)(param.name)
    return source is not None and getattr(source, "name", "") == "DEFAULT"


__all__ = ["defer_coercion"]
