"""Optional dependencies: import them where they are needed, failing with the install line that
fixes it."""

import importlib
from types import ModuleType


def require(module: str, extra: str, purpose: str) -> ModuleType:
    """Import ``module`` or raise an ImportError naming the ``zoo`` extra that installs it.

    Args:
        module: Importable name, e.g. ``decord``.
        extra: The extra of this package that provides it, e.g. ``video``.
        purpose: What needs it, for the message, e.g. ``video sources decode with decord``.
    """
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise ImportError(
            f'{purpose}: pip install "zoo[{extra}]" (or pip install -e ".[{extra}]" in a '
            f"checkout); import failed with: {err}"
        ) from err
