"""python -m fastrl.bench.sb3_solve: Stable-Baselines3 trains a solve task from scratch, the
peer of the bench's ``solve`` scenario (fastrl.bench.solve), in a process of its own.

Every hyper-parameter comes from the RL Baselines3 Zoo (DLR-RM/rl-baselines3-zoo,
``hyperparams/<algo>.yml``, the entry of the env); the zoo's ``lin_X`` schedules are linear
from X to 0 over its ``n_timesteps``, which is also what SB3 is asked to train for. Each
training episode that ends is appended to ``--out`` as fastrl writes its own
``episodes.csv`` (step, return, length, time), so that one criterion judges both.
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from typing import Any


def _linear(start: float):
    """The zoo's ``lin_<start>``: ``start`` times the fraction of training left."""
    return lambda progress_remaining: progress_remaining * start


#: SB3 algorithm class -> (env id, n_envs, n_timesteps, SB3 keyword arguments) of the zoo
ZOO: dict[str, tuple[str, int, int, dict[str, Any]]] = {
    # hyperparams/ppo.yml, CartPole-v1 ("Tuned")
    "PPO": ("CartPole-v1", 8, 100_000, dict(
        n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98, n_epochs=20, ent_coef=0.0,
        learning_rate=_linear(0.001), clip_range=_linear(0.2))),
    # hyperparams/dqn.yml, CartPole-v1 ("Almost Tuned")
    "DQN": ("CartPole-v1", 1, 50_000, dict(
        learning_rate=2.3e-3, batch_size=64, buffer_size=100_000, learning_starts=1000,
        gamma=0.99, target_update_interval=10, train_freq=256, gradient_steps=128,
        exploration_fraction=0.16, exploration_final_eps=0.04,
        policy_kwargs=dict(net_arch=[256, 256]))),
    # hyperparams/sac.yml, Pendulum-v1 (the rest: SB3's SAC defaults)
    "SAC": ("Pendulum-v1", 1, 20_000, dict(learning_rate=1e-3)),
}


def main(argv: list[str] | None = None) -> int:
    """Train until SB3's step budget ends or a SIGINT (the bench's stop) arrives."""
    p = argparse.ArgumentParser(prog="python -m fastrl.bench.sb3_solve",
                                description=__doc__.splitlines()[0])
    p.add_argument("--algo", choices=tuple(ZOO), required=True,
                   help="the SB3 algorithm class")
    p.add_argument("--vec", choices=("dummy", "subproc"), default="dummy",
                   help="SB3's DummyVecEnv (envs in this process) or SubprocVecEnv")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", required=True, help="CSV file of the ended training episodes")
    args = p.parse_args(argv)

    import stable_baselines3
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

    env_id, n_envs, n_timesteps, kwargs = ZOO[args.algo]
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

    vec_cls = SubprocVecEnv if args.vec == "subproc" else DummyVecEnv
    env = make_vec_env(env_id, n_envs=n_envs, seed=args.seed, vec_env_cls=vec_cls)
    algo_cls = getattr(stable_baselines3, args.algo)
    try:
        model = algo_cls("MlpPolicy", env, seed=args.seed, device="cpu", verbose=0, **kwargs)
        model.learn(total_timesteps=n_timesteps, callback=LogEpisodes())
    except KeyboardInterrupt:
        pass  # the bench stops a run once it has solved the task
    finally:
        env.close()
        out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
