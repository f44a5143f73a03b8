"""The package's version, where every layer may read it (``fastrl.__version__`` is this)."""

__version__ = "0.1.0"
