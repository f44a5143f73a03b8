"""A2C, the plug-in added as one module (fastrl/algos/a2c.py): its update, its config rules
and what describe says of it."""

from __future__ import annotations

import pytest
import torch
from gymnasium import spaces

from fastrl.algos.registry import ALGORITHMS
from fastrl.config import ConfigError, load_config
from fastrl.describe import main as describe_main
from fastrl.models.policy import ActorCritic

OBS = spaces.Box(-1.0, 1.0, (3,))
ACT = spaces.Discrete(2)


def one_step_batch(n: int, seed: int) -> dict[str, torch.Tensor]:
    """A ``[1, n]`` batch of single-step episodes: action 0 earns 1, action 1 earns 0."""
    g = torch.Generator().manual_seed(seed)
    obs = torch.rand(1, n, 3, generator=g) * 2 - 1
    action = torch.randint(0, 2, (1, n), generator=g)
    return {"obs": obs, "action": action, "reward": (action == 0).float(),
            "terminated": torch.ones(1, n, dtype=torch.bool),
            "truncated": torch.zeros(1, n, dtype=torch.bool),
            "value": torch.zeros(1, n), "log_prob": torch.full((1, n), -0.69),
            "bootstrap_obs": obs[0].clone(), "final_obs": obs.transpose(0, 1).clone()}


def test_a2c_steps_towards_the_rewarded_action_once_per_batch():
    cfg = load_config(None, ["algo.name=a2c", "algo.lr=0.05", "algo.anneal_lr=false"])
    torch.manual_seed(0)
    policy = ActorCritic(OBS, ACT, [16])
    update = ALGORITHMS["a2c"].make_update(cfg.algo, policy, OBS, ACT, torch.device("cpu"))
    batch = one_step_batch(256, seed=1)
    taken = torch.zeros(256, dtype=torch.long)

    def p_rewarded() -> float:
        with torch.no_grad():
            return policy.evaluate(batch["obs"][0], taken)[0].exp().mean().item()

    before = p_rewarded()
    optimizer_steps = []
    for _ in range(5):
        stats = update.update(batch, cfg.algo.lr, 0)
        optimizer_steps.append(update.optimizer.state_dict()["state"][0]["step"].item())
    assert p_rewarded() > before + 0.05
    assert optimizer_steps == [1, 2, 3, 4, 5]  # one gradient step per batch
    assert set(stats) == {"policy_loss", "value_loss", "entropy", "grad_norm",
                          "explained_variance"}
    assert all(torch.isfinite(v) for k, v in stats.items() if k != "explained_variance")


@pytest.mark.parametrize("key", ["algo.update_epochs=2", "algo.num_minibatches=2",
                                 "algo.clip_coef=0.1", "algo.anneal_clip=true",
                                 "algo.target_kl=0.01"])
def test_a2c_refuses_ppo_keys_it_would_ignore(key):
    with pytest.raises(ConfigError) as err:
        load_config(None, ["algo.name=a2c", key])
    # (a bool is named as Python writes it: algo.anneal_clip=True)
    assert key.lower() in str(err.value).lower() and "algo.name=a2c" in str(err.value)


def test_describe_shows_one_step_per_batch(capsys):
    assert describe_main(["algo.name=a2c"]) == 0
    out = capsys.readouterr().out
    assert "a2c" in out and "1 minibatches x 1 epochs" in out
