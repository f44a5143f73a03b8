"""python -m fastrl.bench.sb3_solve: Stable-Baselines3 trains a solve task from scratch, the
peer of the bench's ``solve`` scenario (fastrl.bench.solve), in a process of its own.

Every hyper-parameter comes from the RL Baselines3 Zoo (DLR-RM/rl-baselines3-zoo,
``hyperparams/<algo>.yml``, the entry of the env), or where the zoo has none from the
algorithm's own documentation (sb3-contrib's MaskablePPO example); the zoo's ``lin_X``
schedules are linear from X to 0 over its ``n_timesteps``, which is also what SB3 is asked
to train for. Each training episode that ends is appended to ``--out`` as fastrl writes its
own ``episodes.csv`` (step, return, length, time), so that one criterion judges both.
"""

from __future__ import annotations

import argparse
import csv
import importlib
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any


def _linear(start: float):
    """The zoo's ``lin_<start>``: ``start`` times the fraction of training left."""
    return lambda progress_remaining: progress_remaining * start


@dataclass(frozen=True)
class ZooEntry:
    """One entry of the zoo's ``hyperparams/<algo>.yml``: what SB3 is made with."""

    algo: str  # SB3 algorithm class
    env_id: str
    n_envs: int
    n_timesteps: int
    kwargs: dict[str, Any]
    normalize: bool = False  # the zoo's ``normalize: true``: VecNormalize (obs and reward)
    atari: bool = False  # the zoo's ``atari`` entry: AtariWrapper, 4 frames stacked, CnnPolicy
    net: Callable[[], dict[str, Any]] | None = None  # policy_kwargs that need torch
    package: str = "stable_baselines3"  # where the algorithm class lives (or sb3_contrib)
    policy: str = ""  # the policy's name, when not MlpPolicy (CnnPolicy for atari)


def _mujoco_ppo_net() -> dict[str, Any]:
    """The zoo's tuned MuJoCo PPO network: ReLU, 256x256 apart, log std -2, no orthogonal
    init."""
    from torch import nn

    return dict(log_std_init=-2, ortho_init=False, activation_fn=nn.ReLU,
                net_arch=dict(pi=[256, 256], vf=[256, 256]))


def _zoo_lstm_net() -> dict[str, Any]:
    """The zoo's CartPoleNoVel-v1 RecurrentPPO network: an LSTM of 64 units for the actor
    and one for the critic, then one ReLU layer of 64 each, no orthogonal init."""
    from torch import nn

    return dict(ortho_init=False, activation_fn=nn.ReLU, lstm_hidden_size=64,
                enable_critic_lstm=True, net_arch=dict(pi=[64], vf=[64]))


#: the bench's solve task -> its zoo entry (the zoo has v4 MuJoCo and NoFrameskip-v4 Atari
#: entries; the bench runs the v5 ids with them)
ZOO: dict[str, ZooEntry] = {
    # hyperparams/ppo.yml, CartPole-v1 ("Tuned")
    "cartpole-ppo": ZooEntry("PPO", "CartPole-v1", 8, 100_000, dict(
        n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98, n_epochs=20, ent_coef=0.0,
        learning_rate=_linear(0.001), clip_range=_linear(0.2))),
    # hyperparams/dqn.yml, CartPole-v1 ("Almost Tuned")
    "cartpole-dqn": ZooEntry("DQN", "CartPole-v1", 1, 50_000, dict(
        learning_rate=2.3e-3, batch_size=64, buffer_size=100_000, learning_starts=1000,
        gamma=0.99, target_update_interval=10, train_freq=256, gradient_steps=128,
        exploration_fraction=0.16, exploration_final_eps=0.04,
        policy_kwargs=dict(net_arch=[256, 256]))),
    # hyperparams/sac.yml, Pendulum-v1 (the rest: SB3's SAC defaults)
    "pendulum-sac": ZooEntry("SAC", "Pendulum-v1", 1, 20_000, dict(learning_rate=1e-3)),
    # hyperparams/ppo.yml, Hopper-v4 ("Tuned")
    "hopper-ppo": ZooEntry("PPO", "Hopper-v5", 1, 1_000_000, dict(
        batch_size=32, n_steps=512, gamma=0.999, learning_rate=9.80828e-05,
        ent_coef=0.00229519, clip_range=0.2, n_epochs=5, gae_lambda=0.99, max_grad_norm=0.7,
        vf_coef=0.835671), normalize=True, net=_mujoco_ppo_net),
    # hyperparams/sac.yml, HalfCheetah-v3 (&mujoco-defaults; the rest: SB3's SAC defaults)
    "halfcheetah-sac": ZooEntry("SAC", "HalfCheetah-v5", 1, 1_000_000,
                                dict(learning_starts=10_000)),
    # sb3-contrib's MaskablePPO documentation example (InvalidActionEnvDiscrete(dim=80,
    # n_invalid_actions=60), gamma=0.4; the rest: SB3's PPO defaults), on its seeded twin
    "identity-masked-ppo": ZooEntry("MaskablePPO", "fastrl.envs.identity:MaskedIdentity-v0",
                                    1, 300_000, dict(gamma=0.4), package="sb3_contrib"),
    # hyperparams/ppo_lstm.yml, CartPoleNoVel-v1 (with its policy_kwargs: MlpLstmPolicy's
    # defaults would be an LSTM of 256 units, then 64x64 tanh MLPs)
    "cartpole-novel-lstm": ZooEntry("RecurrentPPO", "fastrl.envs.partial:CartPoleNoVel-v1", 8,
                                    100_000, dict(
        n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98, n_epochs=20, ent_coef=0.0,
        learning_rate=_linear(0.001), clip_range=_linear(0.2)), normalize=True,
        net=_zoo_lstm_net, package="sb3_contrib", policy="MlpLstmPolicy"),
    # hyperparams/ppo.yml, atari (the ALE/ id with frameskip=1: AtariWrapper skips frames)
    "breakout-ppo": ZooEntry("PPO", "ALE/Breakout-v5", 8, 10_000_000, dict(
        n_steps=128, n_epochs=4, batch_size=256, learning_rate=_linear(2.5e-4),
        clip_range=_linear(0.1), vf_coef=0.5, ent_coef=0.01), atari=True),
}


def _ale_game(env_id: str, **kwargs: Any):
    """``gymnasium.make`` of an ALE game, registering ale-py's ids first (in each of
    SubprocVecEnv's processes too)."""
    import ale_py
    import gymnasium as gym

    gym.register_envs(ale_py)
    return gym.make(env_id, **kwargs)


def make_env(entry: ZooEntry, vec: str, seed: int):
    """The entry's vectorised env as the zoo makes it: Monitor on each env (episode returns
    before any normalisation or clipping), then Atari's wrappers and frame stack, or
    VecNormalize with the entry's gamma."""
    from stable_baselines3.common.env_util import make_atari_env, make_vec_env
    from stable_baselines3.common.vec_env import (
        DummyVecEnv,
        SubprocVecEnv,
        VecFrameStack,
        VecNormalize,
    )

    vec_cls = SubprocVecEnv if vec == "subproc" else DummyVecEnv
    if entry.atari:
        env = make_atari_env(partial(_ale_game, entry.env_id), n_envs=entry.n_envs,
                             seed=seed, vec_env_cls=vec_cls, env_kwargs={"frameskip": 1})
        return VecFrameStack(env, n_stack=4)
    env = make_vec_env(entry.env_id, n_envs=entry.n_envs, seed=seed, vec_env_cls=vec_cls)
    if entry.normalize:
        env = VecNormalize(env, gamma=entry.kwargs.get("gamma", 0.99))
    return env


def main(argv: list[str] | None = None) -> int:
    """Train until SB3's step budget ends or a SIGINT (the bench's stop) arrives."""
    p = argparse.ArgumentParser(prog="python -m fastrl.bench.sb3_solve",
                                description=__doc__.splitlines()[0])
    p.add_argument("--task", choices=tuple(ZOO), required=True,
                   help="the solve task whose zoo entry SB3 trains")
    p.add_argument("--vec", choices=("dummy", "subproc"), default="dummy",
                   help="SB3's DummyVecEnv (envs in this process) or SubprocVecEnv")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", required=True, help="CSV file of the ended training episodes")
    args = p.parse_args(argv)
    # the bench stops a run with SIGINT; a shell that started the bench in the background
    # (`&`, nohup) made its children ignore SIGINT, and SB3 would run on until killed
    signal.signal(signal.SIGINT, signal.default_int_handler)

    from stable_baselines3.common.callbacks import BaseCallback

    entry = ZOO[args.task]
    out = open(args.out, "w", newline="")  # noqa: SIM115 (closed in the finally below)
    rows = csv.writer(out)
    rows.writerow(("step", "return", "length", "time"))
    out.flush()

    class LogEpisodes(BaseCallback):
        """Appends each ended episode (Monitor's ``info["episode"]``) to the CSV."""

        def _on_step(self) -> bool:
            now = time.time()
            ended = [(self.num_timesteps, i["episode"]["r"], i["episode"]["l"], now)
                     for i in self.locals["infos"] if "episode" in i]
            if ended:
                rows.writerows(ended)
                out.flush()
            return True

    env = make_env(entry, args.vec, args.seed)
    kwargs = dict(entry.kwargs)
    if entry.net:
        kwargs["policy_kwargs"] = entry.net()
    policy = entry.policy or ("CnnPolicy" if entry.atari else "MlpPolicy")
    algo_cls = getattr(importlib.import_module(entry.package), entry.algo)
    try:
        model = algo_cls(policy, env, seed=args.seed, device="cpu", verbose=0, **kwargs)
        model.learn(total_timesteps=entry.n_timesteps, callback=LogEpisodes())
    except KeyboardInterrupt:
        pass  # the bench stops a run once it has solved the task
    finally:
        env.close()
        out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
