"""Raw-media sources: indexable collections of items of one modality that pretext tasks turn into examples."""

from datamodules.sources.base import Source
from datamodules.sources.image_folder import ImageFolder
from datamodules.sources.synthetic import SyntheticScenes

__all__ = ["ImageFolder", "Source", "SyntheticScenes"]
