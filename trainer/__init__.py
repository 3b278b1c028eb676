"""trainer: turns a folder of kicks into kickmodel artifacts (data, augmentation, the loop, export, evaluation, CLI)."""

from kickmodel import __version__

__all__ = ["__version__"]
