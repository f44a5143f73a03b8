"""Typed run configuration: dataclasses merged from YAML and ``key=value`` overrides.

OmegaConf does the merging and type checking; this module adds the value checks OmegaConf
cannot express (``num_workers >= 1``, ``lr > 0``, ...) and turns every failure into one
:class:`ConfigError` whose message names the key and what is accepted.
"""

from __future__ import annotations

import hashlib
from dataclasses import MISSING, dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from fastrl.core.errors import ConfigError

APPO_MAX_POLICY_LAG = 16  # infra.max_policy_lag of appo when unset


def _f(default: Any, doc: str, **check: Any) -> Any:
    """A dataclass field with its documentation and value checks in the metadata.

    ``check`` takes ``gt``, ``ge``, ``le`` (numeric bounds) or ``choices`` (allowed values).
    """
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: type(default)(default), metadata={"doc": doc, **check})
    return field(default=default, metadata={"doc": doc, **check})


@dataclass
class EnvConfig:
    """Which environment the workers step."""

    id: str = _f("CartPole-v1", "gymnasium.make id ('module:Env-v0' imports module first); "
                 "with fn or vector_fn, the run's name for the env")
    kwargs: dict[str, Any] = _f({}, "keyword arguments passed to gymnasium.make, fn or "
                                "vector_fn")
    fn: str = _f("", "import string 'package.module:make_env' of a Gymnasium-API env factory, "
                 "called as make_env(**kwargs), instead of gymnasium.make(id)")
    vector_fn: str = _f("", "import string 'package.module:make_sim' of a batched simulator "
                        "factory, called as make_sim(seeds, **kwargs) (fastrl.envs.BatchedEnv)")


@dataclass
class ReplayConfig:
    """Off-policy data path (dqn, sac): replay buffer and the samples-per-insert limiter."""

    capacity: int = _f(100_000, "transitions the replay buffer holds", gt=0)
    batch_size: int = _f(128, "transitions per gradient update", gt=0)
    prioritized: bool = _f(False, "prioritized replay (sum tree) instead of uniform")
    alpha: float = _f(0.6, "priority exponent: priority = (|td| + eps) ** alpha", ge=0)
    beta: float = _f(0.4, "importance-sampling exponent at the start, annealed linearly to 1 "
                     "over algo.total_steps", ge=0, le=1)
    eps: float = _f(1e-6, "added to |td| so that no priority is 0", gt=0)
    n_step: int = _f(1, "n-step returns (cut at episode ends)", gt=0)
    learning_starts: int = _f(10_000, "transitions collected before the first update", ge=0)
    updates_per_step: float = _f(
        0.25, "update-to-data ratio: gradient updates per env step collected; the learner "
        "samples batch_size * updates_per_step transitions per transition inserted", gt=0)
    max_ahead_steps: int = _f(
        1024, "how far (env steps) collection may run ahead of that ratio, or training behind "
        "it, before one side waits for the other", gt=0)


@dataclass
class DQNConfig:
    """DQN: double Q, target network, dueling head, per-worker epsilon (Ape-X)."""

    double: bool = _f(True, "double Q-learning: the online net picks the next action")
    dueling: bool = _f(False, "dueling head: Q = V + A - mean(A)")
    target_tau: float = _f(1.0, "target update: 1.0 copies the online net (hard), < 1 moves "
                           "the target that fraction towards it (Polyak)", gt=0, le=1)
    target_every: int = _f(500, "gradient updates between target updates (1 with Polyak)",
                           gt=0)
    eps_start: float = _f(1.0, "every worker's epsilon at step 0", ge=0, le=1)
    eps_base: float = _f(0.4, "Ape-X: worker i of N ends at eps_base ** (1 + eps_alpha * i / "
                         "(N - 1))", ge=0, le=1)
    eps_alpha: float = _f(7.0, "Ape-X spread of the final epsilons across workers", ge=0)
    exploration_fraction: float = _f(
        0.5, "fraction of algo.total_steps over which epsilon decays linearly", gt=0, le=1)


@dataclass
class SACConfig:
    """SAC: twin Q, tanh-squashed Gaussian actor, automatic entropy tuning."""

    q_lr: float = _f(1e-3, "critic learning rate (the actor uses algo.lr)", gt=0)
    tau: float = _f(0.005, "Polyak factor of the target critics", gt=0, le=1)
    autotune: bool = _f(True, "tune the entropy coefficient towards target_entropy")
    alpha: float = _f(0.2, "entropy coefficient (its start value when autotune)", gt=0)
    target_entropy: float | None = _f(None, "entropy target (null: -action dimensions)")


@dataclass
class APPOConfig:
    """APPO (asynchronous PPO, Sample Factory's): workers never wait for new weights; the
    learner trains on whichever slots are ready, with V-trace targets (Espeholt et al. 2018)
    correcting for the policy lag, and PPO's clipped surrogate against the behaviour
    policy."""

    batch_slots: int | None = _f(None, "ring slots per update, taken from whichever workers "
                                 "have one ready (null: infra.num_workers)", gt=0)
    rho_bar: float = _f(1.0, "V-trace: clip of the importance ratios in the targets' "
                        "temporal differences and the policy-gradient advantages", gt=0)
    c_bar: float = _f(1.0, "V-trace: clip of the trace-cutting ratios", gt=0)
    vtrace_lambda: float = _f(1.0, "V-trace: lambda of the traces (1: the paper's)", ge=0,
                              le=1)


@dataclass
class AlgoConfig:
    """Algorithm choice and hyper-parameters (CleanRL's names and defaults where they
    exist). The PPO keys sit at this level; ``replay``, ``dqn`` and ``sac`` hold the
    off-policy ones."""

    name: str = _f("ppo", "algorithm: ppo (on-policy), appo (asynchronous PPO with "
                   "V-trace), dqn (Discrete actions), sac (Box actions); none: no training, "
                   "the learner only drains slots (collection throughput)",
                   choices=("ppo", "appo", "dqn", "sac", "none"))
    random_actions: bool = _f(False, "with name=none: workers act uniformly at random "
                              "instead of running the policy")
    total_steps: int = _f(500_000, "env steps to train for", gt=0)
    target_return: float | None = _f(
        475.0, "stop early once the evaluation mean return reaches this (null: never)"
    )
    lr: float = _f(2.5e-4, "Adam learning rate", gt=0)
    anneal_lr: bool = _f(True, "decay lr linearly to 0 over total_steps")
    gamma: float = _f(0.99, "discount factor", gt=0, le=1)
    gae_lambda: float = _f(0.95, "GAE lambda", ge=0, le=1)
    update_epochs: int = _f(4, "passes over each batch", gt=0)
    num_minibatches: int = _f(4, "minibatches per epoch (must divide the batch)", gt=0)
    clip_coef: float = _f(0.2, "PPO ratio clip", gt=0)
    clip_vloss: bool = _f(True, "clip the value loss like the policy ratio")
    ent_coef: float = _f(0.01, "entropy bonus coefficient", ge=0)
    vf_coef: float = _f(0.5, "value loss coefficient", ge=0)
    max_grad_norm: float = _f(0.5, "gradient norm clip (PPO, DQN)", gt=0)
    norm_adv: bool = _f(True, "normalise advantages per minibatch")
    target_kl: float | None = _f(None, "stop an update's epochs early past this approx-KL")
    hidden_sizes: list[int] = _f([64, 64], "MLP hidden layer widths of every network")
    policy: str = _f("", "import string 'package.module:MyPolicy' of a fastrl.BasePolicy "
                     "subclass to act and train with (empty: the built-in network of name)")
    appo: APPOConfig = field(default_factory=APPOConfig)
    replay: ReplayConfig = field(default_factory=ReplayConfig)
    dqn: DQNConfig = field(default_factory=DQNConfig)
    sac: SACConfig = field(default_factory=SACConfig)

    @property
    def off_policy(self) -> bool:
        """True for the algorithms that learn from a replay buffer."""
        return self.name in ("dqn", "sac")

    @property
    def on_policy(self) -> bool:
        """True for the algorithms that train on ring slots as they come (ppo, appo)."""
        return self.name in ("ppo", "appo")


@dataclass
class InfraConfig:
    """Processes, shared memory and devices."""

    num_workers: int = _f(2, "rollout worker processes", gt=0)
    envs_per_worker: int = _f(4, "environments each worker steps", gt=0)
    rollout_len: int = _f(64, "steps per env in one trajectory slot", gt=0)
    ring_slots: int = _f(2, "trajectory slots in each worker's ring", gt=0)
    max_policy_lag: int | None = _f(
        None, "policy versions a slot may lag the learner before it is dropped unread (ppo, "
        "appo; null: 0 for ppo, which is strictly on-policy, and "
        f"{APPO_MAX_POLICY_LAG} for appo)", ge=0)
    staging_depth: int = _f(
        2, "on-policy batches staged ahead of training: on CUDA, pinned host buffers and "
        "device buffers in rotation, copied on their own stream while the batch before "
        "trains (2: double buffering); on the CPU slots are used in place (one slot) or "
        "copied once into reused buffers; 0: synchronous copies (a fresh concatenation and "
        "a blocking transfer per batch, the baseline of python -m fastrl.bench --scenario "
        "learner)", ge=0)
    device: str = _f("auto", "learner device: auto picks cuda when available", choices=(
        "auto", "cpu", "cuda"))
    worker_timeout_s: float = _f(
        60.0, "a worker silent this long (neither stepping nor waiting) is restarted; under "
        "runtime=ray a worker reports once per slot, so one slot must take less", gt=0
    )
    max_restarts: int = _f(
        3, "worker restarts allowed within restart_window_s; one more stops the run", ge=0
    )
    restart_window_s: float = _f(300.0, "window over which worker restarts are counted", gt=0)
    check_slots: bool = _f(
        False, "workers stamp every slot with a CRC32 that the learner verifies (torn data)"
    )
    learner_timeout_s: float = _f(
        300.0, "a learner silent this long (one update or eval step) is reported hung", gt=0
    )
    learner_threads: int = _f(1, "torch threads of the learner process", gt=0)
    pin_workers: bool = _f(False, "pin worker i to CPU core i mod cores")
    runtime: str = _f("local", "local: workers and learner in their own processes; serial: "
                      "everything in the calling process, for breakpoints in envs and "
                      "losses (same algorithm and policy code); ray: workers as Ray actors, "
                      "spread over the nodes of a Ray cluster (pip install '.[ray]')",
                      choices=("local", "serial", "ray"))
    ray_address: str | None = _f(
        None, "runtime=ray: the Ray cluster to join ('auto', or the head's HOST:PORT; run "
        "fastrl on a node of it, the learner's); null: start a local Ray for this run")


@dataclass
class LogConfig:
    """Where results go and how often."""

    run_dir: str = _f("runs", "parent folder of run directories")
    run_name: str | None = _f(None, "run folder name (null: env_algo_seed_time)")
    tensorboard: bool = _f(True, "write TensorBoard scalars")
    console: bool = _f(True, "show a progress line on the console")
    metrics_every_s: float = _f(
        0.5, "seconds between the learner's metrics reports (TensorBoard, console, "
        "Callback.on_update); update statistics are summed on the learner's device in "
        "between and leave it only then (0: report every update)", ge=0)
    eval_every_steps: int = _f(10_000, "env steps between evaluations", gt=0)
    eval_episodes: int = _f(20, "seeds of the evaluation suite: eval_seed..eval_seed+n-1",
                            gt=0)
    eval_seed: int = _f(10_000, "first seed of the evaluation suite", ge=0)
    eval_episodes_per_seed: int = _f(1, "episodes played from each evaluation seed", gt=0)
    eval_on_checkpoint: bool = _f(
        False, "also evaluate every checkpoint in a separate process (python -m fastrl.eval "
        "harness; the learner does not wait for it)")
    eval_max_steps: int = _f(
        100_000, "step cap of an evaluation episode (for envs without a TimeLimit)", gt=0
    )
    checkpoint_every_steps: int = _f(20_000, "env steps between checkpoints", gt=0)
    keep_checkpoints: int = _f(3, "newest checkpoints kept in RUN_DIR/checkpoints", gt=0)


@dataclass
class MainConfig:
    """The whole run: env, algorithm, infrastructure, logging and the run seed."""

    env: EnvConfig = field(default_factory=EnvConfig)
    algo: AlgoConfig = field(default_factory=AlgoConfig)
    infra: InfraConfig = field(default_factory=InfraConfig)
    log: LogConfig = field(default_factory=LogConfig)
    seed: int = _f(1, "run seed; every worker's env seeds derive from it", ge=0)

    @property
    def total_envs(self) -> int:
        """Envs stepped by all workers together."""
        return self.infra.num_workers * self.infra.envs_per_worker

    @property
    def batch_slots(self) -> int:
        """Ring slots per on-policy update: one from every worker (ppo), or
        ``algo.appo.batch_slots`` from whichever workers have one ready (appo)."""
        if self.algo.name == "appo" and self.algo.appo.batch_slots is not None:
            return self.algo.appo.batch_slots
        return self.infra.num_workers

    @property
    def batch_size(self) -> int:
        """Transitions per on-policy update."""
        return self.batch_slots * self.infra.envs_per_worker * self.infra.rollout_len

    @property
    def policy_lag_bound(self) -> int:
        """``infra.max_policy_lag``, or its default for the algorithm when unset."""
        lag = self.infra.max_policy_lag
        if lag is not None:
            return lag
        return APPO_MAX_POLICY_LAG if self.algo.name == "appo" else 0


def field_docs(cls: type = MainConfig, prefix: str = "") -> list[tuple[str, str, Any, str]]:
    """``(dotted key, type, default, doc)`` of every leaf field, in declaration order."""
    rows = []
    for f in fields(cls):
        default = f.default_factory() if callable(f.default_factory) else f.default
        if is_dataclass(default):
            rows += field_docs(type(default), f"{prefix}{f.name}.")
        else:
            type_name = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", "")
            rows.append((prefix + f.name, type_name, default, f.metadata.get("doc", "")))
    return rows


def load_config(path: str | Path | None = None, overrides: list[str] = ()) -> MainConfig:
    """Build a checked :class:`MainConfig` from defaults, an optional YAML file and overrides.

    Raises :class:`ConfigError` naming the offending key and what it accepts.
    """
    bad = [o for o in overrides if "=" not in o]
    if bad:
        raise ConfigError(f"override {bad[0]!r} is not key=value (e.g. algo.lr=3e-4)")
    layers = [OmegaConf.structured(MainConfig)]
    if path is not None:
        layers.append(_load_yaml(Path(path)))
    try:
        layers.append(OmegaConf.from_dotlist(list(overrides)))
        cfg: MainConfig = OmegaConf.to_object(OmegaConf.merge(*layers))  # resolves ${...}
    except OmegaConfBaseException as e:
        raise ConfigError(_explain(e)) from None
    except TypeError as e:  # e.g. algo.hidden_sizes.0=32: merging into a list by index
        raise ConfigError(f"cannot apply {' '.join(overrides)}: {e} (give whole lists, "
                          "e.g. algo.hidden_sizes=[32,32])") from None
    check_values(cfg)
    return cfg


def _load_yaml(path: Path):
    """A config file as an OmegaConf mapping, or a ConfigError saying what is wrong."""
    try:
        node = OmegaConf.load(path)
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except OSError as e:
        raise ConfigError(f"cannot read config file {path}: {e.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"config file {path} is not UTF-8 text") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"config file {path} is not valid YAML: {str(e).splitlines()[0]} "
                          f"({getattr(e, 'problem_mark', '')})".replace("\n", " ")) from None
    if not isinstance(node, DictConfig):
        raise ConfigError(f"config file {path} must hold a mapping of sections (env, algo, "
                          "infra, log, seed), not a list")
    return node


def _explain(e: OmegaConfBaseException) -> str:
    """One line for an OmegaConf error: the key, and the valid keys or the expected type."""
    key = getattr(e, "full_key", None) or "?"
    msg = getattr(e, "msg", None) or str(e).splitlines()[0]
    section, _, name = key.rpartition(".")
    node = _section_type(section)
    if "not in struct" in str(e) or "Key '" in msg and "not in" in msg:
        valid = ", ".join(f.name for f in fields(node)) if node else "?"
        where = f"section '{section}'" if section else "the top level"
        return f"unknown config key '{key}'; valid keys in {where}: {valid}"
    if node and name in {f.name for f in fields(node)}:
        ftype = {f.name: f.type for f in fields(node)}[name]
        return f"config key '{key}': {msg.splitlines()[0]} (expected {ftype})"
    return f"config key '{key}': {msg.splitlines()[0]}"


def _section_type(section: str) -> type | None:
    """The dataclass at a dotted path of MainConfig ('' is MainConfig itself)."""
    node: type = MainConfig
    for part in [p for p in section.split(".") if p]:
        sub = {f.name: f for f in fields(node)}.get(part)
        if sub is None:
            return None
        if sub.default_factory is MISSING:
            return None
        node = type(sub.default_factory())
        if not is_dataclass(node):
            return None
    return node


def check_values(cfg: MainConfig) -> None:
    """Enforce each field's ``gt``/``ge``/``le``/``choices`` metadata and cross-field rules."""
    for prefix, section in _sections(cfg):
        for f in fields(section):
            value = getattr(section, f.name)
            if value is None or is_dataclass(value):
                continue
            problem = _bound_problem(value, f.metadata)
            if problem:
                raise ConfigError(f"config key '{prefix}{f.name}={value}': {problem}")
    mb = cfg.algo.num_minibatches
    if cfg.algo.on_policy and (cfg.batch_size % mb or cfg.batch_size // mb < 2):
        slots = "algo.appo.batch_slots" if cfg.algo.name == "appo" else "num_workers"
        raise ConfigError(
            f"config key 'algo.num_minibatches={mb}' must divide the batch "
            f"{slots}*envs_per_worker*rollout_len={cfg.batch_size} into minibatches of "
            "at least 2 transitions"
        )
    if cfg.algo.name == "appo" and cfg.batch_slots > cfg.infra.num_workers * \
            cfg.infra.ring_slots:
        raise ConfigError(
            f"config key 'algo.appo.batch_slots={cfg.batch_slots}' is more slots than the "
            f"rings hold (infra.num_workers*infra.ring_slots="
            f"{cfg.infra.num_workers * cfg.infra.ring_slots}): the learner would wait for "
            "good; lower it or raise infra.ring_slots")
    if cfg.algo.random_actions and cfg.algo.name != "none":
        raise ConfigError("config key 'algo.random_actions=true' needs algo.name=none "
                          "(nothing can learn from random actions)")
    if cfg.env.fn and cfg.env.vector_fn:
        raise ConfigError(f"config keys 'env.fn={cfg.env.fn}' and 'env.vector_fn="
                          f"{cfg.env.vector_fn}': give one env factory, not both")
    if not cfg.algo.hidden_sizes or min(cfg.algo.hidden_sizes) <= 0:
        raise ConfigError(
            f"config key 'algo.hidden_sizes={cfg.algo.hidden_sizes}': "
            "must be a non-empty list of positive widths"
        )
    if not cfg.env.id.strip():
        raise ConfigError("config key 'env.id' is empty: name the env (a gymnasium id, or "
                          "with env.fn / env.vector_fn the run's name for it)")
    if cfg.algo.off_policy:
        _check_replay_fits_the_run(cfg)
    _check_no_knob_is_ignored(cfg)


def _check_replay_fits_the_run(cfg: MainConfig) -> None:
    """The replay buffer holds a batch and a slot, and training starts before the run ends."""
    algo, replay = cfg.algo, cfg.algo.replay
    slot = cfg.infra.rollout_len * cfg.infra.envs_per_worker
    if replay.capacity < max(replay.batch_size, slot):
        raise ConfigError(
            f"config key 'algo.replay.capacity={replay.capacity}' must hold at least one "
            f"batch (algo.replay.batch_size={replay.batch_size}) and one slot "
            f"(infra.rollout_len*infra.envs_per_worker={slot})"
        )
    # the rate limiter samples nothing before max(learning_starts, batch_size) inserts, and
    # the learner stops inserting at total_steps: such a run would end untrained
    start = max(replay.learning_starts, replay.batch_size)
    if algo.total_steps <= start:
        raise ConfigError(
            f"config key 'algo.total_steps={algo.total_steps}': {algo.name} trains only after "
            f"max(algo.replay.learning_starts={replay.learning_starts}, "
            f"algo.replay.batch_size={replay.batch_size}) transitions, so the run would end "
            f"before its first update; give algo.total_steps > {start} or a smaller "
            "algo.replay.learning_starts"
        )


def _check_no_knob_is_ignored(cfg: MainConfig) -> None:
    """Refuse settings that the rest of the config would make silently do nothing."""
    infra, algo = cfg.infra, cfg.algo
    if infra.max_policy_lag and not algo.on_policy:
        bound = " (algo.replay.max_ahead_steps bounds how far collection runs ahead)" \
            if algo.off_policy else ""
        raise ConfigError(
            f"config key 'infra.max_policy_lag={infra.max_policy_lag}' only applies to "
            f"algo.name=ppo or appo: {algo.name} never drops slots for their lag{bound}; "
            "leave it unset")
    defaults = MainConfig()
    if algo.name != "appo" and algo.appo != defaults.algo.appo:
        raise ConfigError(f"config section 'algo.appo' ({algo.appo}) only applies to "
                          f"algo.name=appo, not {algo.name}; leave it at its defaults")
    if algo.name == "appo" and algo.gae_lambda != defaults.algo.gae_lambda:
        raise ConfigError(f"config key 'algo.gae_lambda={algo.gae_lambda}' is GAE's, which "
                          "appo does not use: set algo.appo.vtrace_lambda instead")
    if not algo.on_policy and infra.staging_depth != defaults.infra.staging_depth:
        raise ConfigError(f"config key 'infra.staging_depth={infra.staging_depth}' only "
                          f"applies to algo.name=ppo or appo, not {algo.name}")
    if cfg.log.eval_on_checkpoint and algo.name == "none":
        raise ConfigError("config key 'log.eval_on_checkpoint=true' needs training: "
                          "algo.name=none writes no checkpoints to evaluate")
    if infra.pin_workers and infra.runtime != "local":
        raise ConfigError("config key 'infra.pin_workers=true' needs infra.runtime=local: "
                          f"the {infra.runtime} runtime places the workers itself")
    if infra.ray_address is not None and infra.runtime != "ray":
        raise ConfigError(f"config key 'infra.ray_address={infra.ray_address}' only applies "
                          f"to infra.runtime=ray, not {infra.runtime}")


def _sections(node: Any, prefix: str = "") -> Any:
    """``(dotted prefix, dataclass)`` of ``node`` and every section nested in it."""
    yield prefix, node
    for f in fields(node):
        sub = getattr(node, f.name)
        if is_dataclass(sub):
            yield from _sections(sub, f"{prefix}{f.name}.")


def _bound_problem(value: Any, meta: Any) -> str | None:
    if "choices" in meta and value not in meta["choices"]:
        return f"must be one of {', '.join(map(str, meta['choices']))}"
    if "gt" in meta and not value > meta["gt"]:
        return f"must be > {meta['gt']}"
    if "ge" in meta and not value >= meta["ge"]:
        return f"must be >= {meta['ge']}"
    if "le" in meta and not value <= meta["le"]:
        return f"must be <= {meta['le']}"
    return None


def to_yaml(cfg: MainConfig) -> str:
    """The resolved config as YAML, the form saved in the run directory."""
    return OmegaConf.to_yaml(OmegaConf.structured(cfg))


def config_changes(before: MainConfig, after: MainConfig) -> list[str]:
    """``key: old -> new`` for every leaf whose value differs between two configs."""
    def flat(node: Any, prefix: str = "") -> dict[str, Any]:
        if isinstance(node, dict) and node:
            return {k: v for key, sub in node.items() for k, v in flat(sub, f"{prefix}{key}.")
                    .items()}
        return {prefix[:-1]: node}

    a, b = (flat(OmegaConf.to_container(OmegaConf.structured(c))) for c in (before, after))
    return [f"{k}: {a.get(k)!r} -> {b.get(k)!r}" for k in sorted(set(a) | set(b))
            if a.get(k) != b.get(k)]


def config_hash(cfg: MainConfig) -> str:
    """SHA-256 of the resolved YAML: equal configs hash equal, whatever their source."""
    return hashlib.sha256(to_yaml(cfg).encode()).hexdigest()
