"""python -m fastrl.bench.sb3_solve: Stable-Baselines3 trains a solve task from scratch, the
peer of the bench's ``solve`` scenario (fastrl.bench.solve), in a process of its own.

With ``--settings zoo`` every hyper-parameter comes from the RL Baselines3 Zoo
(fastrl.bench.zoo); with ``--settings fastrl`` SB3 is given fastrl's shipped config of the
task instead, translated by fastrl.bench.settings (PPO and SAC tasks). Each training
episode that ends is appended to ``--out`` as fastrl writes its own ``episodes.csv`` (step,
return, length, time), so that one criterion judges both.
"""

from __future__ import annotations

import argparse
import csv
import importlib
import signal
import sys
import time
from functools import partial
from typing import Any

from fastrl.bench.zoo import ZOO, ZooEntry


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


def _at_fastrl_settings(task: str) -> ZooEntry:
    """SB3's entry of ``task`` at fastrl's shipped config of it."""
    from fastrl.bench.settings import sb3_at_fastrl
    from fastrl.bench.solve import shipped_config

    return sb3_at_fastrl(task, shipped_config(task))


def make_model(entry: ZooEntry, env: Any, seed: int, **overrides: Any) -> Any:
    """SB3's algorithm of ``entry`` on ``env``, on the CPU, with the entry's settings (and
    ``overrides`` of its keyword arguments)."""
    from torch import nn

    kwargs = {**entry.kwargs, **overrides}
    if entry.policy_kwargs:
        pk = dict(entry.policy_kwargs)
        if "activation_fn" in pk:  # (named in the table: torch's class here)
            pk["activation_fn"] = getattr(nn, pk["activation_fn"])
        kwargs["policy_kwargs"] = pk
    policy = entry.policy or ("CnnPolicy" if entry.atari else "MlpPolicy")
    algo_cls = getattr(importlib.import_module(entry.package), entry.algo)
    return algo_cls(policy, env, seed=seed, device="cpu", verbose=0, **kwargs)


def main(argv: list[str] | None = None) -> int:
    """Train until SB3's step budget ends or a SIGINT (the bench's stop) arrives."""
    p = argparse.ArgumentParser(prog="python -m fastrl.bench.sb3_solve",
                                description=__doc__.splitlines()[0])
    p.add_argument("--task", choices=tuple(ZOO), required=True,
                   help="the solve task whose zoo entry SB3 trains")
    p.add_argument("--vec", choices=("dummy", "subproc"), default="dummy",
                   help="SB3's DummyVecEnv (envs in this process) or SubprocVecEnv")
    p.add_argument("--settings", choices=("zoo", "fastrl"), default="zoo",
                   help="the zoo's hyper-parameters of the task, or fastrl's shipped config "
                        "of it translated (fastrl.bench.settings; PPO and SAC tasks)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", required=True, help="CSV file of the ended training episodes")
    args = p.parse_args(argv)
    # the bench stops a run with SIGINT; a shell that started the bench in the background
    # (`&`, nohup) made its children ignore SIGINT, and SB3 would run on until killed
    signal.signal(signal.SIGINT, signal.default_int_handler)

    from stable_baselines3.common.callbacks import BaseCallback

    entry = ZOO[args.task] if args.settings == "zoo" else _at_fastrl_settings(args.task)
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
    try:
        model = make_model(entry, env, args.seed)
        model.learn(total_timesteps=entry.n_timesteps, callback=LogEpisodes())
    except KeyboardInterrupt:
        pass  # the bench stops a run once it has solved the task
    finally:
        env.close()
        out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
