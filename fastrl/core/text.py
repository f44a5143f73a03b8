"""Sizes and counts in words, for reports."""

from __future__ import annotations


def human_bytes(n: int) -> str:
    """``n`` bytes in B, KiB, MiB, GiB or TiB (one decimal above bytes)."""
    if n < 1024:
        return f"{n} B"
    value = float(n)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if value < 1024 or unit == "TiB":
            break
    return f"{value:.1f} {unit}"


def plural(n: int, word: str, many: str | None = None) -> str:
    """``n`` and ``word``, or ``many`` (default ``word + 's'``) when ``n`` is not 1."""
    return f"{n:,} {word if n == 1 else many or word + 's'}"
