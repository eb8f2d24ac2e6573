"""The package's version, in one place: the build reads it from here
(``[tool.hatch.version]`` in pyproject.toml) and ``handoffs.__version__`` and
``handoffs --version`` answer from it without reading installed metadata.
"""

__version__ = "0.3.0"
