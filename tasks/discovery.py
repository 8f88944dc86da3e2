"""Packages that find their own files: a package ``__init__`` imports every submodule and re-exports
its public classes, so a new file is importable by its short class path (``tasks.Jigsaw``) with no
edit elsewhere.

Used by the ``__init__`` of `tasks`, `datamodules`, `zoo` and `callbacks`; pure Python, no project
import.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Iterable
from types import ModuleType


def public_names(module: ModuleType) -> list[str]:
    """What ``module`` exports: its ``__all__`` when it has one, else the public classes it
    defines."""
    if hasattr(module, "__all__"):
        return list(module.__all__)
    return [
        name
        for name, obj in vars(module).items()
        if isinstance(obj, type) and obj.__module__ == module.__name__ and not name.startswith("_")
    ]


def export_submodules(package: str, path: Iterable[str], namespace: dict, skip: Iterable[str] = ()) -> list[str]:
    """Import every submodule of a package and put what each exports (`public_names`) into
    ``namespace``.

    Args:
        package: The package's ``__name__``.
        path: The package's ``__path__``.
        namespace: The package's ``globals()``; the exported names are added to it.
        skip: Submodule names not to import (ones that import this package back, or entry points).

    Returns:
        The sorted exported names (the package's ``__all__``). Two submodules exporting different
        objects under one name raise an ImportError naming both.
    """
    names, skip = [], set(skip)
    for info in pkgutil.iter_modules(path):
        if info.name.startswith("_") or info.name in skip:
            continue
        module = importlib.import_module(f"{package}.{info.name}")
        for name in public_names(module):
            value = getattr(module, name)
            if namespace.get(name, value) is not value:
                raise ImportError(
                    f"{package}.{name} is defined twice, in {_origin(namespace[name])} and "
                    f"{module.__name__}: rename one"
                )
            namespace[name] = value
            names.append(name)
    return sorted(set(names))


def _origin(value) -> str:
    return getattr(value, "__module__", None) or type(value).__name__


def concrete_subclasses(base: type, package: str | None = None) -> list[type]:
    """Every non-abstract subclass of ``base`` imported so far (direct or not), sorted by import
    path; with ``package``, only those defined in it (not a test's or a notebook's own
    subclasses)."""
    found = set()
    stack = [base]
    while stack:
        for sub in stack.pop().__subclasses__():
            stack.append(sub)
            inside = package is None or sub.__module__ == package or sub.__module__.startswith(f"{package}.")
            if inside and not inspect.isabstract(sub):
                found.add(sub)
    return sorted(found, key=lambda c: f"{c.__module__}.{c.__qualname__}")


def discover(package: str, base: type) -> list[type]:
    """Import every module under ``package`` (subpackages too), then its concrete subclasses of
    ``base``."""
    root = importlib.import_module(package)
    for info in pkgutil.walk_packages(root.__path__, prefix=f"{package}."):
        importlib.import_module(info.name)
    return concrete_subclasses(base, package)
