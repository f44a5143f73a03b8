"""``Trainer``: the embedded API that ``python -m fastrl.train`` is built on."""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

from fastrl.checkpoint import Checkpoint, check_resumable, load_for_resume
from fastrl.config import (
    ConfigError,
    MainConfig,
    check_values,
    config_changes,
    config_hash,
    load_config,
    to_yaml,
)
from fastrl.learner.offpolicy import replay_shape
from fastrl.models.policy import param_shapes
from fastrl.plan import RunPlan, plan_run
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
                              "already exists; choose a new name, or continue it with "
                              f"--resume {run_dir}")
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
    save_config(run_dir, cfg)
    return run_dir


def save_config(run_dir: Path, cfg: MainConfig) -> None:
    """The run's current config and its hash, as a run directory keeps them."""
    (run_dir / "config.yaml").write_text(to_yaml(cfg))
    (run_dir / "config_hash").write_text(config_hash(cfg) + "\n")


class Trainer:
    """Train the policy that ``config`` describes through workers, rings and a learner.

    >>> result = Trainer(load_config("configs/cartpole_ppo.yaml")).fit()  # doctest: +SKIP
    >>> result = Trainer.resume("runs/CartPole-v1_ppo_s1_20261202-120000").fit()  # +SKIP
    """

    def __init__(self, config: MainConfig | None = None) -> None:
        self.config = config or MainConfig()
        check_values(self.config)
        self._resume: tuple[Path, Checkpoint, RunPlan] | None = None

    @classmethod
    def resume(cls, run_dir: str | Path, overrides: list[str] = ()) -> Trainer:
        """A trainer that continues ``run_dir`` from its newest valid checkpoint: same global
        step, same TensorBoard run, the run's config with ``overrides`` applied.

        A checkpoint whose env or network differs from the config's is refused
        (:class:`~fastrl.checkpoint.CheckpointError`) before anything is written. What it
        skipped (corrupt checkpoints) and every config change is printed to stderr and
        appended to ``RUN_DIR/resume.log``.
        """
        run_dir = Path(run_dir)
        if not (run_dir / "config.yaml").is_file():
            raise ConfigError(f"--resume {run_dir}: not a fastrl run directory (no config.yaml)")
        config = load_config(run_dir / "config.yaml", list(overrides))
        ckpt, notes = load_for_resume(run_dir)
        plan = plan_run(config)
        check_resumable(ckpt, config.env.id, plan.obs_space, plan.act_space,
                        param_shapes(plan.policy()), config.algo.name, replay_shape(config))
        trained_with = load_config(ckpt.path / "config.yaml")
        changes = config_changes(trained_with, config)
        notes.append(f"resuming {run_dir} from {ckpt.path.name} at global step "
                     f"{ckpt.global_step:,}; config changes: "
                     + ("; ".join(changes) if changes else "none"))
        if ckpt.global_step >= config.algo.total_steps:
            notes.append(f"the run already reached algo.total_steps={config.algo.total_steps:,}"
                         "; raise it to train further")
        with (run_dir / "resume.log").open("a") as log:
            for note in notes:
                print(f"fastrl: {note}", file=sys.stderr)
                log.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {note}\n")
        save_config(run_dir, config)
        trainer = cls(config)
        trainer._resume = (run_dir, ckpt, plan)
        return trainer

    def fit(self) -> RunResult:
        """Run to ``algo.total_steps`` (or the target return, or a stop signal)."""
        if self._resume:
            run_dir, ckpt, plan = self._resume
            return Supervisor(self.config, run_dir, ckpt, plan).run()
        return Supervisor(self.config, make_run_dir(self.config)).run()
