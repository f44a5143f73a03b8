"""``Trainer``: the embedded API that ``python -m fastrl.train`` is built on."""

from __future__ import annotations

import re
import time
from pathlib import Path

from fastrl.config import MainConfig, check_values, config_hash, to_yaml
from fastrl.supervisor import RunResult, Supervisor


def make_run_dir(cfg: MainConfig) -> Path:
    """Create the run directory and save the resolved config and its hash in it."""
    name = cfg.log.run_name or "{}_{}_s{}_{}".format(
        re.sub(r"[^A-Za-z0-9_.-]+", "-", cfg.env.id), cfg.algo.name, cfg.seed,
        time.strftime("%Y%m%d-%H%M%S"),
    )
    run_dir = Path(cfg.log.run_dir) / name
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.yaml").write_text(to_yaml(cfg))
    (run_dir / "config_hash").write_text(config_hash(cfg) + "\n")
    return run_dir


class Trainer:
    """Train the policy that ``config`` describes through workers, rings and a learner.

    >>> result = Trainer(load_config("configs/cartpole_ppo.yaml")).fit()  # doctest: +SKIP
    """

    def __init__(self, config: MainConfig | None = None) -> None:
        self.config = config or MainConfig()
        check_values(self.config)

    def fit(self) -> RunResult:
        """Run to ``algo.total_steps`` (or the target return, or a stop signal)."""
        run_dir = make_run_dir(self.config)
        return Supervisor(self.config, run_dir).run()
