"""Algorithms as plug-ins: one module each, declaring an ``ALGORITHM`` record
(:class:`fastrl.algos.base.Algorithm`) beside its losses and update rule;
:mod:`fastrl.algos.registry` finds them. See docs/architecture.md."""
