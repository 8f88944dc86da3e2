"""Optional dependencies: import them where they are needed, failing with the install line that
fixes it."""

import ctypes
import ctypes.util
import importlib
from types import ModuleType


def require(module: str, extra: str, purpose: str) -> ModuleType:
    """Import ``module`` or raise an ImportError naming the ``zoo`` extra that installs it.

    Args:
        module: Importable name, e.g. ``decord``.
        extra: The extra of this package that provides it, e.g. ``video``.
        purpose: What needs it, for the message, e.g. ``video sources decode with decord``.
    """
    if module == "open3d":
        preload_libusb()
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise ImportError(
            f'{purpose}: pip install "zoo[{extra}]" (or pip install -e ".[{extra}]" in a '
            f"checkout); import failed with: {err}"
        ) from err


def preload_libusb() -> None:
    """open3d links the system library libusb-1.0, which a fresh machine may lack: load the copy
    that the ``libusb-package`` wheel (in the ``3d`` extra) ships, once, so that ``import open3d``
    finds it loaded. A no-op where the system has the library or the wheel is not installed."""
    if ctypes.util.find_library("usb-1.0"):
        return
    try:
        import libusb_package
    except ImportError:
        return
    path = libusb_package.get_library_path()
    if path is not None:
        ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)  # global: open3d's own library links against it
