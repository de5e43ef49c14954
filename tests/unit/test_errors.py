"""The one error hierarchy (paravg.errors): every exception class paravg defines derives from
ParavgError, and no module gives an error class a second name."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import paravg
from paravg import errors
from paravg.errors import ParavgError


def _modules():
    for info in pkgutil.walk_packages(paravg.__path__, "paravg."):
        if not info.name.endswith("__main__"):
            yield importlib.import_module(info.name)


def test_every_exception_class_is_in_the_hierarchy_under_one_name():
    own, aliases = [], []
    for module in _modules():
        for name, obj in vars(module).items():
            if not (inspect.isclass(obj) and issubclass(obj, BaseException)):
                continue
            if obj.__module__ == module.__name__ and not issubclass(obj, ParavgError):
                own.append(f"{module.__name__}.{name}")
            if obj.__module__.startswith("paravg.") and name != obj.__name__:
                aliases.append(f"{module.__name__}.{name} = {obj.__module__}.{obj.__name__}")
    assert not own, f"exception classes outside ParavgError: {own}"
    assert not aliases, f"second names of error classes: {aliases}"


def test_each_class_is_also_the_builtin_a_caller_expects():
    assert issubclass(errors.ConfigError, ValueError)
    assert issubclass(errors.DataError, ValueError)
    assert issubclass(errors.ModelFileError, OSError)
    assert issubclass(errors.TrainingError, RuntimeError)
    assert issubclass(errors.HostError, RuntimeError)
