"""pinlab's version, for the records and studies that store it (the package's metadata says the same)."""

__version__ = "0.1.0"
