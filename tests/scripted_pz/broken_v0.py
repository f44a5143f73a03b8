"""A PettingZoo-style env module whose own import fails (a dependency missing): fastrl must
say so, not take the id for a Gymnasium one (tests/envs/test_multiagent.py)."""

import a_dependency_that_is_not_installed  # noqa: F401
