"""Runnable examples of training fastrl on your own simulators (see examples/README.md)."""
