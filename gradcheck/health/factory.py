"""``gradcheck doctor module:factory``: the setup a project's factory function returns.

The module is found and permitted as an op module is (gradcheck.checking.opcheck.loader: a file of
the project, or an installed module an ``--allow-op-module`` pattern names), so a
command line naming a module runs only the project's own code; the factory must be a
function defined in that module."""

from __future__ import annotations

import importlib
import inspect

from ..base.errors import CaseFileError, describe_exception

KEYS = ("model", "loss_fn", "batch", "optimizer", "train_step", "frozen")


class FactoryError(CaseFileError):
    """The factory cannot be loaded, or returned no setup the doctor can run."""


def load(spec: str, allowed: tuple[str, ...] = ()):
    """The factory function ``spec`` (``module:function``) names."""
    from ..project import imports as op

    module_name, colon, attr = spec.partition(":")
    if not colon or not module_name or not attr.isidentifier():
        raise FactoryError(f"{spec!r}: expected module:function, e.g. "
                           "examples.doctor_gallery:loss_broadcast")
    try:
        _, folder = op.refuse(spec, "", tuple(allowed), command="doctor", what="factory")
        module = (importlib.import_module(module_name) if folder is None
                  else op._import_from(folder, module_name))
    except op.OpImportError as exc:
        raise FactoryError(str(exc)) from None
    except Exception as exc:   # importing the user's module runs the user's code
        raise FactoryError(f"cannot import {module_name!r}: "
                           f"{describe_exception(exc)}") from None
    factory = getattr(module, attr, None)
    if not inspect.isfunction(factory) or factory.__module__ != module.__name__:
        raise FactoryError(f"{spec!r}: {attr} is no function defined in {module_name}")
    return factory


def setup(spec: str, allowed: tuple[str, ...] = ()) -> dict:
    """The factory's dict, checked: ``model``, ``loss_fn`` and ``batch`` (a tuple, or
    one tensor) required, ``optimizer``, ``train_step`` and ``frozen`` optional."""
    factory = load(spec, allowed)
    try:
        made = factory()
    except Exception as exc:   # the factory is the user's code
        raise FactoryError(f"{spec!r} raised {describe_exception(exc)}") from None
    if not isinstance(made, dict):
        raise FactoryError(f"{spec!r} returned {type(made).__name__}, not a dict with "
                           f"the keys {', '.join(KEYS)}")
    unknown = sorted(set(made) - set(KEYS))
    missing = [k for k in KEYS[:3] if k not in made]
    if unknown or missing:
        raise FactoryError(f"{spec!r}: " + "; ".join(
            ([f"unknown keys {unknown}"] if unknown else [])
            + ([f"missing keys {missing}"] if missing else [])))
    batch = made["batch"]
    made["batch"] = tuple(batch) if isinstance(batch, (tuple, list)) else (batch,)
    return made
