"""A task's training settings in neither system's terms, one table per algorithm family
(PPO's, SAC's), and their translations both ways: fastrl's config keys and
Stable-Baselines3's constructor arguments.

The solve scenario races each system at its own published settings, then SB3 at fastrl's
shipped config and fastrl at the zoo's entry, so that the engine, not the settings, is what
a ratio measures. :data:`TWINS` and :data:`SAC_TWINS` pair each setting with the key of each
system (the tables in docs/bench.md); :data:`NO_TWIN` names what one system has and the
other cannot take.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from fastrl.algos import ppo, sac
from fastrl.bench.zoo import ZOO, Linear, ZooEntry
from fastrl.config import MainConfig

#: SB3's defaults where an entry leaves a key out: PPO and MaskablePPO, and RecurrentPPO's
#: own rollout and minibatch (sb3-contrib)
SB3_PPO_DEFAULTS = dict(n_steps=2048, batch_size=64, n_epochs=10, learning_rate=3e-4,
                        gamma=0.99, gae_lambda=0.95, clip_range=0.2, clip_range_vf=None,
                        ent_coef=0.0, vf_coef=0.5, max_grad_norm=0.5)
SB3_RECURRENT_DEFAULTS = dict(SB3_PPO_DEFAULTS, n_steps=128, batch_size=128)
SB3_POLICY_DEFAULTS = dict(net_arch=dict(pi=[64, 64], vf=[64, 64]), activation_fn="Tanh",
                           ortho_init=True, log_std_init=0.0, lstm_hidden_size=256,
                           enable_critic_lstm=True, shared_lstm=False)
ACTIVATIONS = {"tanh": "Tanh", "relu": "ReLU"}  # fastrl's algo.activation -> torch.nn's
PPO_FAMILY = ("PPO", "MaskablePPO", "RecurrentPPO")


class NoTwin(ValueError):
    """A setting of one system that the other cannot take."""


@dataclass(frozen=True)
class PPOSettings:
    """A PPO task's settings: what both systems are given when they race at them."""

    n_envs: int
    rollout_len: int  # steps per env per update (SB3's n_steps)
    minibatch: int  # transitions per gradient step (SB3's batch_size)
    epochs: int
    lr: float
    lr_decays: bool  # linearly to 0 over total_steps
    clip: float
    clip_decays: bool
    value_clip: bool  # clip the value update by ``clip`` too
    gamma: float
    gae_lambda: float
    ent_coef: float
    vf_coef: float  # weight of the mean squared value error (SB3's vf_coef: see TWINS)
    max_grad_norm: float
    hidden: tuple[int, ...]  # actor and critic MLPs alike
    activation: str  # tanh | relu
    ortho_init: bool
    log_std_init: float
    normalize: bool  # observations and rewards, by running statistics
    total_steps: int
    lstm: int = 0  # units of the actor's LSTM and of the critic's own one (0: none)


#: setting -> (fastrl's key, SB3's): the translation table of docs/bench.md
TWINS: dict[str, tuple[str, str]] = {
    "n_envs": ("infra.num_workers x infra.envs_per_worker", "n_envs"),
    "rollout_len": ("infra.rollout_len", "n_steps"),
    "minibatch": ("n_envs x rollout_len / algo.num_minibatches", "batch_size"),
    "epochs": ("algo.update_epochs", "n_epochs"),
    "lr": ("algo.lr", "learning_rate"),
    "lr_decays": ("algo.anneal_lr", "learning_rate=lin_X"),
    "clip": ("algo.clip_coef", "clip_range"),
    "clip_decays": ("algo.anneal_clip", "clip_range=lin_X"),
    "value_clip": ("algo.clip_vloss", "clip_range_vf"),
    "gamma": ("algo.gamma", "gamma"),
    "gae_lambda": ("algo.gae_lambda", "gae_lambda"),
    "ent_coef": ("algo.ent_coef", "ent_coef"),
    # fastrl's value loss is half the squared error (CleanRL's), SB3's the whole
    "vf_coef": ("algo.vf_coef / 2", "vf_coef"),
    "max_grad_norm": ("algo.max_grad_norm", "max_grad_norm"),
    "hidden": ("algo.hidden_sizes", "policy_kwargs net_arch=dict(pi=..., vf=...)"),
    "activation": ("algo.activation", "policy_kwargs activation_fn"),
    "ortho_init": ("algo.ortho_init", "policy_kwargs ortho_init"),
    "log_std_init": ("algo.log_std_init", "policy_kwargs log_std_init"),
    "normalize": ("algo.normalize_obs and algo.normalize_reward", "VecNormalize"),
    "total_steps": ("algo.total_steps", "learn(total_timesteps)"),
    "lstm": ("algo.core=lstm, algo.core_size, algo.shared_core=false",
             "RecurrentPPO policy_kwargs lstm_hidden_size, shared_lstm=False, "
             "enable_critic_lstm=True"),
}

#: what one system has and the other cannot take: refused (NoTwin) where a config or an
#: entry sets it, or, where each system always has its own, kept apart in every race
NO_TWIN: dict[str, str] = {
    "critic without an LSTM": "RecurrentPPO's shared_lstm=False with enable_critic_lstm="
                              "False: fastrl's critic reads a core, the actor's or its own",
    "one shared LSTM": "RecurrentPPO's shared_lstm=True trains the LSTM on the actor's loss "
                       "only (its critic reads it detached); fastrl's algo.shared_core=true "
                       "trains it on both losses",
    "orthogonal LSTM init": "fastrl's algo.ortho_init=true initialises its LSTM cells "
                            "orthogonally too; SB3's ortho_init leaves RecurrentPPO's LSTMs "
                            "at torch's init",
    "apart pi and vf widths": "SB3's net_arch=dict(pi=A, vf=B) with A != B: fastrl's "
                              "algo.hidden_sizes sizes both",
    "value clip": "fastrl's algo.clip_vloss takes the larger of the clipped and unclipped "
                  "value losses (CleanRL); SB3's clip_range_vf takes the clipped one only",
    "normalisation": "VecNormalize clips observations and rewards at 10 and updates its "
                     "statistics at every step; fastrl's normalisers update once a batch, "
                     "unclipped",
    "policy lag": "fastrl's infra.max_policy_lag (1 in configs/cartpole_novel_lstm.yaml) is "
                  "its engine's: SB3 collects and trains in turn (lag 0)",
    "apart SAC networks": "SB3's SAC net_arch=dict(pi=A, qf=B) or an activation other than "
                          "ReLU: fastrl's algo.hidden_sizes sizes the actor and the critics, "
                          "ReLU",
    "SAC's actor": "SB3's SAC clips the actor's log std to [-20, 2] and starts at torch's "
                   "init (std about 1); fastrl's squashes it into [-5, 2] by a tanh and "
                   "starts from an orthogonal init with a 0.01 output gain (std about 0.22), "
                   "as CleanRL's does",
    "SAC's log-probabilities": "fastrl's are of the env's actions (CleanRL's: the squashing "
                               "scaled to the Box), SB3's of actions in [-1, 1]: with a Box "
                               "wider than [-1, 1] the same target entropy asks fastrl's "
                               "policy for less spread (Pendulum's [-2, 2]: by log 2)",
    "SAC's first update": "fastrl's learner takes its first gradient step once the replay "
                          "holds learning_starts and a batch of transitions; SB3 once it "
                          "holds learning_starts (the zoo's Pendulum: 100 < batch 256)",
    "SAC's entropy step": "SB3 steps the entropy coefficient first and trains the critics "
                          "and the actor with the new one; fastrl trains them with the "
                          "coefficient before its step (CleanRL's order)",
    "collection ahead": "fastrl's workers collect up to algo.replay.max_ahead_steps ahead of "
                        "the update-to-data ratio (its engine's); SB3 collects and trains "
                        "in turn",
}


def _value(v: Any) -> tuple[float, bool]:
    """A constant or a zoo ``lin_X`` schedule as (X, decays)."""
    return (v.start, True) if isinstance(v, Linear) else (float(v), False)


def _ppo_from_zoo(entry: ZooEntry) -> PPOSettings:
    """The settings of a PPO-family zoo entry, SB3's defaults where it sets nothing."""
    kw = {**(SB3_RECURRENT_DEFAULTS if entry.algo == "RecurrentPPO" else SB3_PPO_DEFAULTS),
          **entry.kwargs}
    pk = {**SB3_POLICY_DEFAULTS, **entry.policy_kwargs}
    net = pk["net_arch"]
    pi, vf = (net["pi"], net["vf"]) if isinstance(net, dict) else (net, net)
    if pi != vf:
        raise NoTwin(NO_TWIN["apart pi and vf widths"])
    recurrent = entry.algo == "RecurrentPPO"
    if recurrent and pk["shared_lstm"]:
        raise NoTwin(NO_TWIN["one shared LSTM"])
    if recurrent and not pk["enable_critic_lstm"]:
        raise NoTwin(NO_TWIN["critic without an LSTM"])
    if recurrent and pk["ortho_init"]:
        raise NoTwin(NO_TWIN["orthogonal LSTM init"])
    lr, lr_decays = _value(kw["learning_rate"])
    clip, clip_decays = _value(kw["clip_range"])
    return PPOSettings(
        n_envs=entry.n_envs, rollout_len=kw["n_steps"], minibatch=kw["batch_size"],
        epochs=kw["n_epochs"], lr=lr, lr_decays=lr_decays, clip=clip,
        clip_decays=clip_decays, value_clip=kw["clip_range_vf"] is not None,
        gamma=kw["gamma"], gae_lambda=kw["gae_lambda"], ent_coef=kw["ent_coef"],
        vf_coef=kw["vf_coef"], max_grad_norm=kw["max_grad_norm"], hidden=tuple(pi),
        activation={v: k for k, v in ACTIVATIONS.items()}[pk["activation_fn"]],
        ortho_init=pk["ortho_init"], log_std_init=pk["log_std_init"],
        normalize=entry.normalize, total_steps=entry.n_timesteps,
        lstm=pk["lstm_hidden_size"] if recurrent else 0)


def _ppo_from_fastrl(cfg: MainConfig) -> PPOSettings:
    """The settings of a fastrl PPO config."""
    a, infra = cfg.algo, cfg.infra
    if a.normalize_obs != a.normalize_reward:
        raise NoTwin("algo.normalize_obs != algo.normalize_reward: VecNormalize in the zoo's "
                     "use normalises both")
    if a.core == "gru":
        raise NoTwin(f"algo.core={a.core}: RecurrentPPO has an LSTM only")
    if a.core == "lstm" and a.shared_core:
        raise NoTwin(NO_TWIN["one shared LSTM"])
    if a.core == "lstm" and a.ortho_init:
        raise NoTwin(NO_TWIN["orthogonal LSTM init"])
    n_envs = infra.num_workers * infra.envs_per_worker
    return PPOSettings(
        n_envs=n_envs, rollout_len=infra.rollout_len,
        minibatch=n_envs * infra.rollout_len // a.num_minibatches, epochs=a.update_epochs,
        lr=a.lr, lr_decays=a.anneal_lr, clip=a.clip_coef, clip_decays=a.anneal_clip,
        value_clip=a.clip_vloss, gamma=a.gamma, gae_lambda=a.gae_lambda,
        ent_coef=a.ent_coef, vf_coef=a.vf_coef / 2, max_grad_norm=a.max_grad_norm,
        hidden=tuple(a.hidden_sizes), activation=a.activation, ortho_init=a.ortho_init,
        log_std_init=a.log_std_init, normalize=a.normalize_obs, total_steps=a.total_steps,
        lstm=a.core_size if a.core == "lstm" else 0)


def _ppo_to_fastrl(s: PPOSettings) -> list[str]:
    """fastrl's overrides for ``s`` beyond those every family has (:func:`to_fastrl`)."""
    batch = s.n_envs * s.rollout_len
    if batch % s.minibatch:
        raise NoTwin(f"minibatches of {s.minibatch} do not divide a batch of {batch}: "
                     "fastrl's algo.num_minibatches splits it evenly")
    return [
        f"infra.rollout_len={s.rollout_len}", f"algo.num_minibatches={batch // s.minibatch}",
        f"algo.update_epochs={s.epochs}", f"algo.lr={s.lr}",
        f"algo.anneal_lr={str(s.lr_decays).lower()}", f"algo.clip_coef={s.clip}",
        f"algo.anneal_clip={str(s.clip_decays).lower()}",
        f"algo.clip_vloss={str(s.value_clip).lower()}", f"algo.gamma={s.gamma}",
        f"algo.gae_lambda={s.gae_lambda}", f"algo.ent_coef={s.ent_coef}",
        f"algo.vf_coef={2 * s.vf_coef}", f"algo.max_grad_norm={s.max_grad_norm}",
        f"algo.activation={s.activation}",
        f"algo.ortho_init={str(s.ortho_init).lower()}", f"algo.log_std_init={s.log_std_init}",
        f"algo.normalize_obs={str(s.normalize).lower()}",
        f"algo.normalize_reward={str(s.normalize).lower()}",
        *(["algo.core=lstm", f"algo.core_size={s.lstm}",
           "algo.shared_core=false"] if s.lstm
          else ["algo.core=none"]),
    ]


def _ppo_to_sb3(s: PPOSettings, like: ZooEntry) -> ZooEntry:
    """``like`` (a PPO-family zoo entry: its env and algorithm) trained at ``s``."""
    clip = Linear(s.clip) if s.clip_decays else s.clip
    kwargs = dict(
        n_steps=s.rollout_len, batch_size=s.minibatch, n_epochs=s.epochs,
        learning_rate=Linear(s.lr) if s.lr_decays else s.lr, clip_range=clip,
        clip_range_vf=clip if s.value_clip else None, gamma=s.gamma,
        gae_lambda=s.gae_lambda, ent_coef=s.ent_coef, vf_coef=s.vf_coef,
        max_grad_norm=s.max_grad_norm)
    policy_kwargs = dict(net_arch=dict(pi=list(s.hidden), vf=list(s.hidden)),
                         activation_fn=ACTIVATIONS[s.activation], ortho_init=s.ortho_init)
    if s.log_std_init != SB3_POLICY_DEFAULTS["log_std_init"]:
        # (a Gaussian's: MaskablePPO's policy, Discrete only, takes no such argument)
        policy_kwargs["log_std_init"] = s.log_std_init
    if s.lstm:
        policy_kwargs.update(lstm_hidden_size=s.lstm, shared_lstm=False,
                             enable_critic_lstm=True)
    return replace(like, n_envs=s.n_envs, n_timesteps=s.total_steps, kwargs=kwargs,
                   normalize=s.normalize, policy_kwargs=policy_kwargs)


@dataclass(frozen=True)
class SACSettings:
    """A SAC task's settings: what both systems are given when they race at them."""

    n_envs: int
    lr: float  # the actor's, the critics' and the entropy coefficient's (SB3 has one)
    batch: int  # transitions per gradient step
    buffer: int  # transitions the replay holds
    learning_starts: int  # env steps collected before the first update
    updates_per_step: float  # gradient steps per env step
    gamma: float
    tau: float  # Polyak factor of the target critics, every gradient step
    autotune: bool  # the entropy coefficient tuned towards target_entropy
    alpha: float  # the entropy coefficient (its start value when autotune)
    target_entropy: float | None  # None: minus the action's dimensions
    hidden: tuple[int, ...]  # actor and critics alike, ReLU
    total_steps: int


#: setting -> (fastrl's key, SB3's): the SAC table of docs/bench.md
SAC_TWINS: dict[str, tuple[str, str]] = {
    "n_envs": ("infra.num_workers x infra.envs_per_worker", "n_envs"),
    "lr": ("algo.lr = algo.sac.q_lr", "learning_rate"),
    "batch": ("algo.replay.batch_size", "batch_size"),
    "buffer": ("algo.replay.capacity", "buffer_size"),
    "learning_starts": ("algo.replay.learning_starts", "learning_starts"),
    "updates_per_step": ("algo.replay.updates_per_step",
                         "gradient_steps / (train_freq x n_envs)"),
    "gamma": ("algo.gamma", "gamma"),
    "tau": ("algo.sac.tau", "tau"),
    "autotune": ("algo.sac.autotune", "ent_coef=auto_X"),
    "alpha": ("algo.sac.alpha", "ent_coef (auto: 1.0, auto_X: X)"),
    "target_entropy": ("algo.sac.target_entropy (null)", "target_entropy (auto)"),
    "hidden": ("algo.hidden_sizes", "policy_kwargs net_arch"),
    "total_steps": ("algo.total_steps", "learn(total_timesteps)"),
}

#: SB3's SAC defaults where an entry leaves a key out
SB3_SAC_DEFAULTS = dict(learning_rate=3e-4, buffer_size=1_000_000, learning_starts=100,
                        batch_size=256, tau=0.005, gamma=0.99, train_freq=1,
                        gradient_steps=1, ent_coef="auto", target_entropy="auto",
                        target_update_interval=1, n_steps=1, use_sde=False)
SB3_SAC_NET = [256, 256]


def _entropy_coef(ent_coef: str | float) -> tuple[bool, float]:
    """SB3's ``ent_coef`` as (autotune, start value): ``auto`` starts at 1.0, ``auto_X`` at
    X; any other value (a number, or a number as a string) is fixed."""
    if isinstance(ent_coef, str) and ent_coef.startswith("auto"):
        return True, float(ent_coef.partition("_")[2] or 1.0)
    return False, float(ent_coef)


#: the SAC keyword arguments and policy_kwargs the translation reads; an entry setting any
#: other is refused (action noise, HER, gSDE at warm-up, n_critics, ... have no twin)
SAC_KEYS = frozenset(SB3_SAC_DEFAULTS)
SAC_POLICY_KEYS = frozenset({"net_arch", "activation_fn"})


def _sac_from_zoo(entry: ZooEntry) -> SACSettings:
    """The settings of a SAC zoo entry, SB3's defaults where it sets nothing."""
    kw = {**SB3_SAC_DEFAULTS, **entry.kwargs}
    extra = sorted(set(kw) - SAC_KEYS) + sorted(set(entry.policy_kwargs) - SAC_POLICY_KEYS)
    if extra or entry.normalize:
        raise NoTwin(f"SAC's {', '.join(extra) or 'VecNormalize'}: fastrl's SAC has no twin "
                     "of it")
    for key in ("target_update_interval", "n_steps", "use_sde"):
        if kw[key] != SB3_SAC_DEFAULTS[key]:
            raise NoTwin(f"SAC's {key}={kw[key]}: fastrl's SAC has "
                         f"{SB3_SAC_DEFAULTS[key]} only")
    freq = kw["train_freq"]
    freq, unit = freq if isinstance(freq, tuple) else (freq, "step")
    if isinstance(kw["learning_rate"], Linear) or unit != "step":
        raise NoTwin("a decaying learning rate or a train_freq in episodes: fastrl's SAC "
                     "has neither")
    pk = entry.policy_kwargs
    net = pk.get("net_arch", SB3_SAC_NET)
    if isinstance(net, dict) and net.get("pi") == net.get("qf"):
        net = net["pi"]
    if pk.get("activation_fn", "ReLU") != "ReLU" or not isinstance(net, list):
        raise NoTwin(NO_TWIN["apart SAC networks"])
    collected = freq * entry.n_envs  # env steps between two train() calls
    # (SB3: a negative gradient_steps takes as many as were collected)
    gradient_steps = collected if kw["gradient_steps"] < 0 else kw["gradient_steps"]
    if gradient_steps < 1:
        raise NoTwin(f"SAC's gradient_steps={gradient_steps}: fastrl's SAC always trains")
    autotune, alpha = _entropy_coef(kw["ent_coef"])
    target = kw["target_entropy"]
    return SACSettings(
        n_envs=entry.n_envs, lr=kw["learning_rate"], batch=kw["batch_size"],
        buffer=kw["buffer_size"], learning_starts=kw["learning_starts"],
        updates_per_step=gradient_steps / collected, gamma=kw["gamma"], tau=kw["tau"],
        autotune=autotune, alpha=alpha,
        target_entropy=None if target == "auto" else float(target), hidden=tuple(net),
        total_steps=entry.n_timesteps)


def _sac_from_fastrl(cfg: MainConfig) -> SACSettings:
    """The settings of a fastrl SAC config."""
    a, r = cfg.algo, cfg.algo.replay
    if a.lr != a.sac.q_lr:
        raise NoTwin(f"algo.lr={a.lr} != algo.sac.q_lr={a.sac.q_lr}: SB3's SAC trains the "
                     "actor, the critics and the entropy coefficient at one learning_rate")
    if r.prioritized or r.n_step != 1 or a.normalize_obs or a.normalize_reward:
        raise NoTwin("prioritized or n-step replay, or normalisation: the zoo's SAC "
                     "entries have none")
    return SACSettings(
        n_envs=cfg.infra.num_workers * cfg.infra.envs_per_worker, lr=a.lr,
        batch=r.batch_size, buffer=r.capacity, learning_starts=r.learning_starts,
        updates_per_step=r.updates_per_step, gamma=a.gamma, tau=a.sac.tau,
        autotune=a.sac.autotune, alpha=a.sac.alpha, target_entropy=a.sac.target_entropy,
        hidden=tuple(a.hidden_sizes), total_steps=a.total_steps)


def _sac_to_fastrl(s: SACSettings) -> list[str]:
    """fastrl's overrides for ``s`` beyond those every family has (:func:`to_fastrl`)."""
    target = "null" if s.target_entropy is None else s.target_entropy
    return [
        f"algo.lr={s.lr}", f"algo.sac.q_lr={s.lr}", f"algo.replay.batch_size={s.batch}",
        f"algo.replay.capacity={s.buffer}", f"algo.replay.learning_starts={s.learning_starts}",
        f"algo.replay.updates_per_step={s.updates_per_step}", f"algo.gamma={s.gamma}",
        f"algo.sac.tau={s.tau}", f"algo.sac.autotune={str(s.autotune).lower()}",
        f"algo.sac.alpha={s.alpha}", f"algo.sac.target_entropy={target}",
        # what the zoo's SAC has none of
        "algo.replay.prioritized=false", "algo.replay.n_step=1", "algo.normalize_obs=false",
        "algo.normalize_reward=false",
    ]


def _sac_to_sb3(s: SACSettings, like: ZooEntry) -> ZooEntry:
    """``like`` (a SAC zoo entry: its env) trained at ``s``: one vectorised step of every
    env, then the gradient steps that keep ``s.updates_per_step``."""
    gradient_steps = round(s.updates_per_step * s.n_envs)
    if not math.isclose(gradient_steps, s.updates_per_step * s.n_envs) or gradient_steps < 1:
        raise NoTwin(f"{s.updates_per_step} updates per env step over {s.n_envs} envs: SB3 "
                     "takes a whole number of gradient steps per step of its envs")
    kwargs = dict(
        learning_rate=s.lr, buffer_size=s.buffer, learning_starts=s.learning_starts,
        batch_size=s.batch, tau=s.tau, gamma=s.gamma, train_freq=1,
        gradient_steps=gradient_steps,
        ent_coef=(f"auto_{s.alpha}" if s.alpha != 1.0 else "auto") if s.autotune
        else s.alpha,
        target_entropy="auto" if s.target_entropy is None else s.target_entropy)
    return replace(like, n_envs=s.n_envs, n_timesteps=s.total_steps, kwargs=kwargs,
                   normalize=False, policy_kwargs=dict(net_arch=list(s.hidden)))


Settings = PPOSettings | SACSettings


def from_zoo(entry: ZooEntry) -> Settings:
    """The settings of a zoo entry, SB3's defaults where it sets nothing."""
    if entry.algo in PPO_FAMILY:
        return _ppo_from_zoo(entry)
    if entry.algo == "SAC":
        return _sac_from_zoo(entry)
    raise NoTwin(f"{entry.algo}: only the PPO family and SAC have a settings translation")


def from_fastrl(cfg: MainConfig) -> Settings:
    """The settings of a fastrl config."""
    if cfg.algo.algorithm is ppo.ALGORITHM:
        return _ppo_from_fastrl(cfg)
    if cfg.algo.algorithm is sac.ALGORITHM:
        return _sac_from_fastrl(cfg)
    raise NoTwin(f"algo.name={cfg.algo.name}: only PPO and SAC have a settings translation")


def to_fastrl(s: Settings, num_workers: int) -> list[str]:
    """fastrl's overrides for ``s``, its envs split over up to ``num_workers`` workers (as
    many as divide them)."""
    workers = max(w for w in range(1, num_workers + 1) if s.n_envs % w == 0)
    hidden = "[" + ", ".join(map(str, s.hidden)) + "]"
    family = _ppo_to_fastrl if isinstance(s, PPOSettings) else _sac_to_fastrl
    return [f"infra.num_workers={workers}", f"infra.envs_per_worker={s.n_envs // workers}",
            f"algo.hidden_sizes={hidden}", f"algo.total_steps={s.total_steps}", *family(s)]


def to_sb3(s: Settings, like: ZooEntry) -> ZooEntry:
    """``like`` (the task's zoo entry: its env and algorithm) trained at ``s``."""
    return (_ppo_to_sb3 if isinstance(s, PPOSettings) else _sac_to_sb3)(s, like)


def sb3_at_fastrl(task: str, cfg: MainConfig) -> ZooEntry:
    """SB3's entry for ``task`` given fastrl's config ``cfg`` of it."""
    return to_sb3(from_fastrl(cfg), ZOO[task])


def fastrl_at_zoo(task: str, cfg: MainConfig) -> list[str]:
    """fastrl's overrides that give its config ``cfg`` of ``task`` the zoo's settings (its
    engine's infra kept: workers, policy lag)."""
    return to_fastrl(from_zoo(ZOO[task]), cfg.infra.num_workers)
