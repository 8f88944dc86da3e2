"""Shared test utilities."""

import importlib
import inspect
import pkgutil


def discover(package, base):
    """Import every module under ``package``; return the concrete subclasses of ``base`` defined in it
    (test-local subclasses elsewhere are left out), sorted by import path."""
    for info in pkgutil.walk_packages(package.__path__, prefix=package.__name__ + "."):
        importlib.import_module(info.name)
    found, stack = set(), [base]
    while stack:
        for sub in stack.pop().__subclasses__():
            stack.append(sub)
            inside = sub.__module__ == package.__name__ or sub.__module__.startswith(package.__name__ + ".")
            if inside and not inspect.isabstract(sub):
                found.add(sub)
    return sorted(found, key=lambda c: f"{c.__module__}.{c.__qualname__}")
