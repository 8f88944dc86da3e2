"""Lightning DataModules that compose raw-media sources with pretext tasks into batches of `tasks.Example`.

Imports no model code: the data is model-agnostic, the policy encodes it.
"""

from datamodules.base import PretextDataModule
from datamodules.benchmark import BenchmarkDataModule
from datamodules.difficulty import SelectedItems
from datamodules.sources import *  # noqa: F403  (short class names on the command line)
from datamodules.sources import __all__ as _sources

__all__ = ["BenchmarkDataModule", "PretextDataModule", "SelectedItems", *_sources]
