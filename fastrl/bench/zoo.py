"""The RL Baselines3 Zoo's hyper-parameters of the bench's solve tasks, as the zoo's files
write them: what Stable-Baselines3 is made with when it races at its own settings.

Each entry is copied from ``hyperparams/<algo>.yml`` of DLR-RM/rl-baselines3-zoo at
:data:`ZOO_COMMIT` (the masked task, which the zoo lacks, from sb3-contrib's MaskablePPO
documentation example). A key the zoo leaves out takes SB3's default. The zoo's ``lin_X``
schedules are :class:`Linear`: from X to 0 over the entry's ``n_timesteps``, which is also
what SB3 is asked to train for.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: the zoo's commit every entry was checked against (2026-04-23)
ZOO_COMMIT = "22e3ff2450fd92033f7f032915e1f64894a09584"


@dataclass(frozen=True)
class Linear:
    """The zoo's ``lin_<start>``: ``start`` times the fraction of training left (SB3's
    ``progress_remaining``)."""

    start: float

    def __call__(self, progress_remaining: float) -> float:
        return progress_remaining * self.start


@dataclass(frozen=True)
class ZooEntry:
    """One entry of the zoo's ``hyperparams/<algo>.yml``: what SB3 is made with.
    ``policy_kwargs`` name their activation (``"ReLU"``) rather than hold torch's class, so
    that this table imports no torch."""

    algo: str  # SB3 algorithm class
    env_id: str
    n_envs: int
    n_timesteps: int
    kwargs: dict[str, Any]
    normalize: bool = False  # the zoo's ``normalize: true``: VecNormalize (obs and reward)
    atari: bool = False  # the zoo's ``atari`` entry: AtariWrapper, 4 frames stacked, CnnPolicy
    policy_kwargs: dict[str, Any] = field(default_factory=dict)
    package: str = "stable_baselines3"  # where the algorithm class lives (or sb3_contrib)
    policy: str = ""  # the policy's name, when not MlpPolicy (CnnPolicy for atari)


#: the bench's solve task -> its zoo entry (the zoo has v4 MuJoCo and NoFrameskip-v4 Atari
#: entries; the bench runs the v5 ids with them)
ZOO: dict[str, ZooEntry] = {
    # hyperparams/ppo.yml, CartPole-v1 ("Tuned")
    "cartpole-ppo": ZooEntry("PPO", "CartPole-v1", 8, 100_000, dict(
        n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98, n_epochs=20, ent_coef=0.0,
        learning_rate=Linear(0.001), clip_range=Linear(0.2))),
    # hyperparams/dqn.yml, CartPole-v1 ("Almost Tuned")
    "cartpole-dqn": ZooEntry("DQN", "CartPole-v1", 1, 50_000, dict(
        learning_rate=2.3e-3, batch_size=64, buffer_size=100_000, learning_starts=1000,
        gamma=0.99, target_update_interval=10, train_freq=256, gradient_steps=128,
        exploration_fraction=0.16, exploration_final_eps=0.04),
        policy_kwargs=dict(net_arch=[256, 256])),
    # hyperparams/sac.yml, Pendulum-v1 (the rest: SB3's SAC defaults)
    "pendulum-sac": ZooEntry("SAC", "Pendulum-v1", 1, 20_000, dict(learning_rate=1e-3)),
    # hyperparams/ppo.yml, Hopper-v4 ("Tuned")
    "hopper-ppo": ZooEntry("PPO", "Hopper-v5", 1, 1_000_000, dict(
        batch_size=32, n_steps=512, gamma=0.999, learning_rate=9.80828e-05,
        ent_coef=0.00229519, clip_range=0.2, n_epochs=5, gae_lambda=0.99, max_grad_norm=0.7,
        vf_coef=0.835671), normalize=True, policy_kwargs=dict(
        log_std_init=-2, ortho_init=False, activation_fn="ReLU",
        net_arch=dict(pi=[256, 256], vf=[256, 256]))),
    # hyperparams/sac.yml, HalfCheetah-v4 (&mujoco-defaults; the rest: SB3's SAC defaults)
    "halfcheetah-sac": ZooEntry("SAC", "HalfCheetah-v5", 1, 1_000_000,
                                dict(learning_starts=10_000)),
    # sb3-contrib's MaskablePPO documentation example (InvalidActionEnvDiscrete(dim=80,
    # n_invalid_actions=60), gamma=0.4; the rest: SB3's PPO defaults), on its seeded twin
    "identity-masked-ppo": ZooEntry("MaskablePPO", "fastrl.envs.identity:MaskedIdentity-v0",
                                    1, 300_000, dict(gamma=0.4), package="sb3_contrib"),
    # hyperparams/ppo_lstm.yml, CartPoleNoVel-v1, with its policy_kwargs (MlpLstmPolicy's
    # defaults would be an LSTM of 256 units, then 64x64 tanh MLPs)
    "cartpole-novel-lstm": ZooEntry("RecurrentPPO", "fastrl.envs.partial:CartPoleNoVel-v1", 8,
                                    100_000, dict(
        n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98, n_epochs=20, ent_coef=0.0,
        learning_rate=Linear(0.001), clip_range=Linear(0.2)), normalize=True,
        policy_kwargs=dict(ortho_init=False, activation_fn="ReLU", lstm_hidden_size=64,
                           enable_critic_lstm=True, net_arch=dict(pi=[64], vf=[64])),
        package="sb3_contrib", policy="MlpLstmPolicy"),
    # hyperparams/ppo.yml, atari (the ALE/ id with frameskip=1: AtariWrapper skips frames)
    "breakout-ppo": ZooEntry("PPO", "ALE/Breakout-v5", 8, 10_000_000, dict(
        n_steps=128, n_epochs=4, batch_size=256, learning_rate=Linear(2.5e-4),
        clip_range=Linear(0.1), vf_coef=0.5, ent_coef=0.01), atari=True),
}
