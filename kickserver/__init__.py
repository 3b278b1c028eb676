"""kickserver: a background service that generates kick drums and drops them into a DAW's folder."""

from kickmodel import __version__

__all__ = ["__version__"]
