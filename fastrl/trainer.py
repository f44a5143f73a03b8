"""``Trainer``: the embedded API that ``python -m fastrl.train`` is built on."""

from __future__ import annotations

import re
import time
from pathlib import Path

from fastrl.config import ConfigError, MainConfig, check_values, config_hash, to_yaml
from fastrl.supervisor import RunResult, Supervisor


def make_run_dir(cfg: MainConfig) -> Path:
    """Create a new run directory and save the resolved config and its hash in it.

    An existing run is never written over: a generated name gets a numeric suffix, an
    explicit ``log.run_name`` that exists is an error.
    """
    parent = Path(cfg.log.run_dir)
    if cfg.log.run_name:
        run_dir = parent / cfg.log.run_name
        if run_dir.exists():
            raise ConfigError(f"config key 'log.run_name={cfg.log.run_name}': {run_dir} "
                              "already exists; choose a new name")
    else:
        base = "{}_{}_s{}_{}".format(re.sub(r"[^A-Za-z0-9_.-]+", "-", cfg.env.id),
                                     cfg.algo.name, cfg.seed, time.strftime("%Y%m%d-%H%M%S"))
        run_dir, n = parent / base, 1
        while run_dir.exists():
            run_dir, n = parent / f"{base}-{n}", n + 1
    try:
        run_dir.mkdir(parents=True)
    except OSError as e:
        raise ConfigError(f"config key 'log.run_dir={cfg.log.run_dir}': cannot create "
                          f"{run_dir}: {e.strerror}") from None
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
