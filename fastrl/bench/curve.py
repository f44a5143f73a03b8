"""A run's learning curve: ``python -m fastrl.bench.curve RUN_DIR [--out PNG] [--window N]``.

Reads the run's ``episodes.csv`` and ``evals.csv`` (fastrl.telemetry.csvlog) and draws the
training return (the mean of the last ``--window`` episodes) and every evaluation's mean
against env steps and against minutes since the first episode ended; prints the numbers a
report quotes. Needs matplotlib (the bench extra).
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

import numpy as np

from fastrl.bench.report import pyplot, save_figure


def read_rows(path: Path) -> dict[str, np.ndarray]:
    """The numeric columns of a run CSV (empty arrays when the file has no rows)."""
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    names = rows[0].keys() if rows else ()
    return {k: np.array([float(r[k]) for r in rows if _number(r[k])]) for k in names}


def _number(text: str | None) -> bool:
    try:
        float(text)
    except (TypeError, ValueError):  # (None: a row of a file written before the column was)
        return False
    return True


def rolling_mean(values: np.ndarray, window: int) -> np.ndarray:
    """Mean of the last ``window`` values at each point (fewer at the start)."""
    sums = np.cumsum(np.insert(values, 0, 0.0))
    n = np.minimum(np.arange(1, len(values) + 1), window)
    return (sums[1:] - sums[np.arange(1, len(values) + 1) - n]) / n


def summary(episodes: dict[str, np.ndarray], evals: dict[str, np.ndarray],
            window: int) -> dict[str, float]:
    """Episodes, env steps and minutes covered, the best and the final mean of ``window``
    training episodes, and the best evaluation mean."""
    mean = rolling_mean(episodes["return"], window)
    minutes = (episodes["time"][-1] - episodes["time"][0]) / 60
    judged = evals.get("return_mean", np.array([]))
    return {"episodes": len(mean), "steps": int(episodes["step"][-1]), "minutes": minutes,
            "best_mean": float(mean.max()), "final_mean": float(mean[-1]),
            "best_eval": float(judged.max()) if len(judged) else float("nan")}


def plot_curve(path: Path, title: str, episodes: dict[str, np.ndarray],
               evals: dict[str, np.ndarray], window: int) -> bool:
    """Write the two-panel PNG; False without matplotlib."""
    plt = pyplot()
    if plt is None:
        return False
    mean = rolling_mean(episodes["return"], window)
    minutes = (episodes["time"] - episodes["time"][0]) / 60
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, x, label in ((axes[0], episodes["step"], "env steps"),
                         (axes[1], minutes, "minutes since the first episode")):
        ax.plot(x, episodes["return"], ".", ms=2, alpha=0.25, color="C0")
        ax.plot(x, mean, color="C0", label=f"training return, mean of last {window}")
        ax.set_xlabel(label)
        ax.set_ylabel("episode return")
        ax.grid(alpha=0.3)
    axes[0].xaxis.set_major_formatter(plt.FuncFormatter(
        lambda x, _: f"{x / 1e6:g}M" if x >= 1e6 else f"{x / 1e3:g}k"))
    if len(evals.get("return_mean", ())):
        axes[0].plot(evals["step"], evals["return_mean"], "o-", color="C1", label="evaluation")
    axes[0].legend(fontsize=8)
    fig.suptitle(title)
    save_figure(plt, fig, path)
    return True


def main(argv: list[str] | None = None) -> int:
    """The command (module doc); exit status 2 for a folder without episodes."""
    parser = argparse.ArgumentParser(prog="python -m fastrl.bench.curve",
                                     description="A run's learning curve as a PNG.")
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--out", type=Path, default=None, help="PNG path (default: "
                        "RUN_DIR/curve.png)")
    parser.add_argument("--window", type=int, default=100, help="episodes per mean (100)")
    args = parser.parse_args(argv)
    episodes_csv = args.run_dir / "episodes.csv"
    episodes = read_rows(episodes_csv) if episodes_csv.is_file() else {}
    if not len(episodes.get("return", ())):
        print(f"fastrl.bench.curve: error: {episodes_csv} has no episodes", file=sys.stderr)
        return 2
    evals_csv = args.run_dir / "evals.csv"
    evals = read_rows(evals_csv) if evals_csv.is_file() else {}
    stats = summary(episodes, evals, args.window)
    print(", ".join(f"{k} {v:,.2f}" if isinstance(v, float) else f"{k} {v:,}"
                    for k, v in stats.items()))
    out = args.out or args.run_dir / "curve.png"
    if plot_curve(out, args.run_dir.name, episodes, evals, args.window):
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
