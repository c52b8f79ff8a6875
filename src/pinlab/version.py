"""pinlab's version, for the records and studies that store it and for ``pinlab --version``.

The git tag is its only source: the build writes it into ``pinlab/_version.py`` (see
pyproject.toml). A source tree that was never built (static checks read it) has no such file and
says so rather than guessing.
"""

try:
    from pinlab._version import __version__
except ImportError:  # a source tree that was never built
    __version__ = "0.0.0+unbuilt"
