"""Where the learner's metrics end up: TensorBoard and a console progress line."""

from __future__ import annotations

import time
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from fastrl.config import LogConfig


class MetricsLogger:
    """Writes update and evaluation metrics to TensorBoard and the console.

    Scalars go under their own names (``episode/return_mean``, ``eval/return_mean``,
    ``loss/policy_loss``, ...) with the env-step count as the x axis.
    """

    LOSS_KEYS = ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_frac",
                 "grad_norm", "explained_variance")

    def __init__(self, run_dir: Path, cfg: LogConfig, total_steps: int) -> None:
        self._writer = None
        if cfg.tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            self._writer = SummaryWriter(str(run_dir / "tb"))
        self._progress = None
        if cfg.console:
            self._progress = Progress(
                TextColumn("[bold]fastrl"), BarColumn(), TextColumn("{task.completed:,} steps"),
                TextColumn("{task.fields[sps]:,.0f} SPS"),
                TextColumn("return {task.fields[ret]}"), TimeElapsedColumn(),
                console=Console(stderr=True),
            )
            self._task = self._progress.add_task("train", total=total_steps, sps=0.0, ret="-")
            self._progress.start()
        self._t0 = time.monotonic()
        self._first: tuple[float, int] | None = None  # (time, step) of the first update
        self.last_return: float | None = None
        self.steps_per_sec = 0.0

    def update(self, step: int, stats: dict[str, float]) -> None:
        """Log one learner update's statistics.

        Steps/sec counts from the first update, so process start-up does not dilute it (from
        the logger's creation until a second update exists).
        """
        now = time.monotonic()
        if self._first is None:
            self._first = (now, step)
        t_ref, step_ref = self._first if now > self._first[0] else (self._t0, 0)
        self.steps_per_sec = (step - step_ref) / max(now - t_ref, 1e-9)
        if "episode/return_mean" in stats:
            self.last_return = stats["episode/return_mean"]
        if self._writer:
            for key, value in stats.items():
                tag = f"loss/{key}" if key in self.LOSS_KEYS else (
                    key if "/" in key else f"train/{key}")
                self._writer.add_scalar(tag, value, step)
            self._writer.add_scalar("train/steps_per_sec", self.steps_per_sec, step)
        if self._progress:
            ret = "-" if self.last_return is None else f"{self.last_return:.1f}"
            self._progress.update(self._task, completed=step, sps=self.steps_per_sec, ret=ret)

    def evaluation(self, step: int, result: dict[str, float]) -> None:
        """Log one evaluation's results."""
        if self._writer:
            for key, value in result.items():
                self._writer.add_scalar(f"eval/{key}", value, step)
        if self._progress:
            self._progress.console.print(
                f"eval @ {step:,} steps: return {result['return_mean']:.1f} "
                f"± {result['return_std']:.1f} (min {result['return_min']:.0f})"
            )

    def close(self) -> None:
        """Flush TensorBoard and end the progress line."""
        if self._progress:
            self._progress.stop()
            self._progress = None
        if self._writer:
            self._writer.close()
            self._writer = None
