"""Typed run configuration: dataclasses merged from YAML and ``key=value`` overrides.

OmegaConf does the merging and type checking; this module adds the value checks OmegaConf
cannot express (``num_workers >= 1``, ``lr > 0``, ...) and turns every failure into one
:class:`ConfigError` whose message names the key and what is accepted.
"""

from __future__ import annotations

import hashlib
from dataclasses import MISSING, dataclass, field, fields, is_dataclass, make_dataclass
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from fastrl.algos.base import Algorithm, DataMode, ReplayConfig, changed_from_default
from fastrl.algos.registry import ALGORITHMS, algorithm
from fastrl.compat import algorithm_names, check_config_pairs
from fastrl.core.errors import ConfigError
from fastrl.core.settings import bound_problem, setting
from fastrl.envs.source import EnvConfig
from fastrl.models.encoders import ENCODERS
from fastrl.models.policy import HIDDEN_ACTIVATIONS
from fastrl.models.recurrent import CORES, NO_CORE
from fastrl.population.config import PopulationConfig, check_population, member_config
from fastrl.selfplay.config import SelfPlayConfig
from fastrl.tracking.config import MlflowConfig, WandbConfig


@dataclass
class AlgoSettings:
    """Algorithm choice and the hyper-parameters every algorithm may read (CleanRL's names
    and defaults where they exist). The policy-gradient keys (gae_lambda ... target_kl) are
    PPO's, shared by appo and a2c."""

    name: str = setting("ppo", "algorithm: " + "; ".join(
        f"{a.name}: {a.summary}" for a in ALGORITHMS.values()), choices=tuple(ALGORITHMS))
    random_actions: bool = setting(False, "with name=none: workers act uniformly at random "
                                   "instead of running the policy")
    total_steps: int = setting(500_000, "env steps to train for", gt=0)
    target_return: float | None = setting(
        475.0, "stop early once the evaluation mean return reaches this (null: never)"
    )
    lr: float = setting(2.5e-4, "Adam learning rate", gt=0)
    anneal_lr: bool = setting(True, "decay lr linearly to 0 over total_steps")
    gamma: float = setting(0.99, "discount factor", gt=0, le=1)
    gae_lambda: float = setting(0.95, "GAE lambda", ge=0, le=1)
    update_epochs: int = setting(4, "passes over each batch", gt=0)
    num_minibatches: int = setting(4, "minibatches per epoch (must divide the batch)", gt=0)
    clip_coef: float = setting(0.2, "PPO ratio clip", gt=0)
    anneal_clip: bool = setting(False, "decay clip_coef linearly to 0 over total_steps, as "
                                "anneal_lr does lr (SB3's linear clip_range)")
    clip_vloss: bool = setting(True, "clip the value loss like the policy ratio")
    ent_coef: float = setting(0.01, "entropy bonus coefficient", ge=0)
    vf_coef: float = setting(0.5, "value loss coefficient", ge=0)
    max_grad_norm: float = setting(0.5, "gradient norm clip (PPO, DQN)", gt=0)
    norm_adv: bool = setting(True, "normalise advantages per minibatch")
    target_kl: float | None = setting(None, "stop an update's epochs early past this approx-KL")
    policy_per_group: bool = setting(False, "a multi-agent env of several agent groups: one "
                                     "built-in network per group instead of one shared by "
                                     "all agents (ppo, appo, a2c; docs/multi-agent.md)")
    hidden_sizes: list[int] = setting([64, 64], "MLP hidden layer widths of every network, "
                                      "after its encoder ([]: the output layers on the "
                                      "encoder's features)")
    activation: str = setting("tanh", "activation of the hidden layers of the actor-critic "
                              "algorithms' built-in MLPs", choices=tuple(HIDDEN_ACTIVATIONS))
    ortho_init: bool = setting(True, "orthogonal init of the actor-critic algorithms' built-in "
                               "network (CleanRL's); false: torch's default init (SB3's "
                               "ortho_init=False)")
    log_std_init: float = setting(0.0, "initial log-std of the actor-critic algorithms' "
                                  "built-in Gaussian policy for Box actions (SB3's "
                                  "log_std_init)")
    encoder: str = setting("auto", "observation encoder of the built-in networks: flat "
                           "(flattened / one-hot), nature (the Nature-DQN CNN over uint8 "
                           "images of at least 36x36), impala (IMPALA's residual CNN, at "
                           "least 8x8), small (two convolutions keeping every pixel, for "
                           "grids), auto (nature for uint8 images, else flat); an image "
                           "smaller than its CNN reads gets the largest that reads it, as a "
                           "start-up note says; for Dict and Tuple observations, per leaf "
                           "(the CNN for image leaves, flat for the others), features joined",
                           choices=ENCODERS)
    normalize_obs: bool = setting(False, "standardise vector observations by running "
                                  "statistics the learner updates from its batches (the "
                                  "actor-critic algorithms' built-in network; a Dict's or "
                                  "Tuple's Box leaves each by their own)")
    core: str = setting(NO_CORE, "recurrent core of the actor-critic algorithms' built-in "
                        "network, between the encoder and the MLPs: none, lstm or gru (each "
                        "env's state kept by the workers, sequences replayed by the learner)",
                        choices=CORES)
    core_size: int = setting(128, "units of algo.core", gt=0)
    shared_core: bool = setting(True, "one algo.core feeds actor and critic; false: the "
                                "critic has a core of its own, of the same kind and size "
                                "(sb3-contrib RecurrentPPO's shared_lstm=False, "
                                "enable_critic_lstm=True)")
    normalize_reward: bool = setting(False, "scale the rewards trained on by the running std "
                                     "of discounted returns (SB3 VecNormalize's; the "
                                     "actor-critic algorithms; logged returns stay the env's)")
    policy: str = setting("", "import string 'package.module:MyPolicy' of a fastrl.BasePolicy "
                          "subclass to act and train with (empty: the built-in network of name)")

    @property
    def algorithm(self) -> Algorithm:
        """The plug-in of ``name`` (fastrl.algos)."""
        return algorithm(self.name)


def _algo_sections() -> list[tuple[str, type, Any]]:
    """The ``algo.<section>`` fields: each algorithm's own section, and ``replay`` just
    before the first algorithm that learns from a replay buffer (the order of the saved
    YAML, and so of the config hash, stays what it was before the plug-ins)."""
    sections = []
    for a in ALGORITHMS.values():
        if a.data is DataMode.REPLAY and ("replay", ReplayConfig) not in sections:
            sections.append(("replay", ReplayConfig))
        if a.section:
            sections.append((a.name, a.section))
    return [(name, cls, field(default_factory=cls)) for name, cls in sections]


def section_users(section: str) -> list[str]:
    """The algorithms that read ``algo.<section>``."""
    return [a.name for a in ALGORITHMS.values() if a.name == section
            or (section == "replay" and a.data is DataMode.REPLAY)]


#: The ``algo`` section: :class:`AlgoSettings` plus one section per plug-in that has one
#: (``algo.appo``, ``algo.dqn``, ``algo.sac``, ``algo.replay``).
AlgoConfig = make_dataclass("AlgoConfig", _algo_sections(), bases=(AlgoSettings,))
AlgoConfig.__module__ = __name__  # (spawned children unpickle it from here)
AlgoConfig.__doc__ = AlgoSettings.__doc__ + (
    " Each algorithm with keys of its own has its section: algo.<name>, and algo.replay for "
    "the algorithms that learn from a replay buffer.")


@dataclass
class InfraConfig:
    """Processes, shared memory and devices."""

    num_workers: int = setting(2, "rollout worker processes", gt=0)
    envs_per_worker: int = setting(4, "environments each worker steps; for a multi-agent env, "
                                   "rows: envs x agents, a multiple of its agents", gt=0)
    rollout_len: int = setting(64, "steps per env in one trajectory slot", gt=0)
    ring_slots: int = setting(2, "trajectory slots in each worker's ring", gt=0)
    max_policy_lag: int | None = setting(
        None, "policy versions a slot may lag the learner before it is dropped unread (the "
        "on-policy algorithms; null: the algorithm's default, " + ", ".join(
            f"{a.default_max_policy_lag} for {a.name}" for a in ALGORITHMS.values()
            if a.data.on_policy) + "; 0 is strictly on-policy)", ge=0)
    deterministic: bool | None = setting(
        None, "two runs of one seed give bit-identical weights and episodes: each slot is "
        "collected with the weights its sequence number and the lag bound fix (a worker "
        "waits only until those are published), the learner takes slots and replay samples "
        "in a fixed order, and the replay rate limiter decides on counts alone "
        "(docs/training.md); null: on, except where the weights it keeps would need more "
        "than 64 copies (ppo and a2c: infra.max_policy_lag above 63; dqn and sac: "
        "num_workers * ring_slots above 63)")
    staging_depth: int = setting(
        2, "on-policy batches staged ahead of training: on CUDA, pinned host buffers and "
        "device buffers in rotation, copied on their own stream while the batch before "
        "trains (2: double buffering); on the CPU slots are used in place (one slot) or "
        "copied once into reused buffers; 0: synchronous copies (a fresh concatenation and "
        "a blocking transfer per batch, the baseline of python -m fastrl.bench --scenario "
        "learner)", ge=0)
    device: str = setting("auto", "learner device: auto picks cuda when available", choices=(
        "auto", "cpu", "cuda"))
    worker_timeout_s: float = setting(
        60.0, "a worker silent this long (neither stepping nor waiting) is restarted; under "
        "runtime=ray a worker reports once per slot, so one slot must take less", gt=0
    )
    max_restarts: int = setting(
        3, "worker restarts allowed within restart_window_s; one more stops the run", ge=0
    )
    restart_window_s: float = setting(300.0, "window over which worker restarts are counted", gt=0)
    check_slots: bool = setting(
        False, "workers stamp every slot with a CRC32 that the learner verifies (torn data)"
    )
    learner_timeout_s: float = setting(
        300.0, "a learner (one update) or periodic evaluation (one env step) silent this "
        "long is reported hung", gt=0
    )
    learner_threads: int = setting(1, "torch threads of the learner process", gt=0)
    pin_workers: bool = setting(False, "pin worker i to CPU core i mod cores")
    worker_inference: str = setting(
        "numpy", "how workers choose actions with the built-in MLP actor-critic (ppo, appo, "
        "a2c, none): numpy (BLAS calls on views of the policy's parameters; a fraction of torch's "
        "per-op cost at a worker's batch sizes) or torch; other policies always act through "
        "torch", choices=("numpy", "torch"))
    runtime: str = setting("local", "local: workers and learner in their own processes; serial: "
                           "everything in the calling process, for breakpoints in envs and "
                           "losses (same algorithm and policy code); ray: workers as Ray actors, "
                           "spread over the nodes of a Ray cluster (pip install '.[ray]')",
                           choices=("local", "serial", "ray"))
    ray_address: str | None = setting(
        None, "runtime=ray: the Ray cluster to join ('auto', or the head's HOST:PORT; run "
        "fastrl on a node of it, the learner's); null: start a local Ray for this run")


@dataclass
class LogConfig:
    """Where results go and how often."""

    run_dir: str = setting("runs", "parent folder of run directories")
    run_name: str | None = setting(None, "run folder name (null: env_algo_seed_time)")
    tensorboard: bool = setting(True, "write TensorBoard scalars")
    console: bool = setting(True, "show a progress line on the console")
    metrics_every_s: float = setting(
        0.5, "seconds between the learner's metrics reports (TensorBoard, console, "
        "Callback.on_update); update statistics are summed on the learner's device in "
        "between and leave it only then (0: report every update)", ge=0)
    eval_every_steps: int = setting(10_000, "env steps between evaluations", gt=0)
    eval_episodes: int = setting(20, "seeds of the evaluation suite: eval_seed..eval_seed+n-1",
                                 gt=0)
    eval_seed: int = setting(10_000, "first seed of the evaluation suite", ge=0)
    eval_episodes_per_seed: int = setting(1, "episodes played from each evaluation seed", gt=0)
    eval_on_checkpoint: bool = setting(
        False, "also evaluate every checkpoint in a separate process (python -m fastrl.eval "
        "harness; the learner does not wait for it)")
    eval_max_steps: int = setting(
        100_000, "step cap of an evaluation episode (for envs without a TimeLimit)", gt=0
    )
    checkpoint_every_steps: int = setting(20_000, "env steps between checkpoints", gt=0)
    keep_checkpoints: int = setting(3, "newest checkpoints kept in RUN_DIR/checkpoints", gt=0)
    wandb: WandbConfig = field(default_factory=WandbConfig)
    mlflow: MlflowConfig = field(default_factory=MlflowConfig)


@dataclass
class MainConfig:
    """The whole run: env, algorithm, infrastructure, logging and the run seed."""

    env: EnvConfig = field(default_factory=EnvConfig)
    algo: AlgoConfig = field(default_factory=AlgoConfig)
    infra: InfraConfig = field(default_factory=InfraConfig)
    log: LogConfig = field(default_factory=LogConfig)
    selfplay: SelfPlayConfig = field(default_factory=SelfPlayConfig)
    population: PopulationConfig = field(default_factory=PopulationConfig)
    seed: int = setting(1, "run seed; every worker's env seeds derive from it", ge=0)

    @property
    def total_envs(self) -> int:
        """Envs stepped by all workers together."""
        return self.infra.num_workers * self.infra.envs_per_worker

    @property
    def batch_slots(self) -> int:
        """Ring slots per on-policy update, as the algorithm takes them: one from every
        worker (SYNC), or ``algo.appo.batch_slots`` from whichever workers have one (appo)."""
        return self.algo.algorithm.batch_slots(self)

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
        return self.algo.algorithm.default_max_policy_lag


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


def load_config(path: str | Path | None = None, overrides: list[str] = (), *,
                saved: bool = False) -> MainConfig:
    """Build a checked :class:`MainConfig` from defaults, an optional YAML file and overrides.

    Raises :class:`ConfigError` naming the offending key and what it accepts. ``saved``
    reads the config a run saved (to evaluate, export or compare with): keys that the run
    ignored are not refused then, so that a run directory written before a rule against
    them stays readable.
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
    check_values(cfg, refuse_ignored=not saved)
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


def check_values(cfg: MainConfig, refuse_ignored: bool = True) -> None:
    """Enforce each field's ``gt``/``ge``/``le``/``choices`` metadata and cross-field rules;
    with ``refuse_ignored``, refuse settings the rest of the config would ignore too."""
    for prefix, section in _sections(cfg):
        for f in fields(section):
            value = getattr(section, f.name)
            if value is None or is_dataclass(value):
                continue
            problem = bound_problem(value, f.metadata)
            if problem:
                raise ConfigError(f"config key '{prefix}{f.name}={value}': {problem}")
    algo = cfg.algo.algorithm
    check_config_pairs(cfg)  # (the features that do not combine: fastrl.compat)
    if cfg.algo.core == NO_CORE:
        for key in ("core_size", "shared_core"):
            if changed_from_default(cfg.algo, [key]):
                raise ConfigError(f"config key 'algo.{key}={getattr(cfg.algo, key)}' shapes a "
                                  "recurrent core; algo.core=none has none: set algo.core="
                                  "lstm or gru")
    if cfg.env.fn and cfg.env.vector_fn:
        raise ConfigError(f"config keys 'env.fn={cfg.env.fn}' and 'env.vector_fn="
                          f"{cfg.env.vector_fn}': give one env factory, not both")
    if cfg.algo.hidden_sizes and min(cfg.algo.hidden_sizes) <= 0:
        raise ConfigError(
            f"config key 'algo.hidden_sizes={cfg.algo.hidden_sizes}': "
            "must be a list of positive widths ([]: no hidden layers)"
        )
    if not cfg.env.id.strip():
        raise ConfigError("config key 'env.id' is empty: name the env (a gymnasium id, or "
                          "with env.fn / env.vector_fn the run's name for it)")
    if algo.data is DataMode.REPLAY:
        _check_replay_fits_the_run(cfg)
    if algo.check_config:
        algo.check_config(cfg)
    check_population(cfg)
    if cfg.population.vary:  # (each member's values within their keys' bounds)
        for k in range(cfg.population.size):
            try:
                check_values(member_config(cfg, k), refuse_ignored)
            except ConfigError as e:
                raise ConfigError(f"population member {k} (population.vary's value {k}): "
                                  f"{e}") from None
    if refuse_ignored:
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
    data = algo.algorithm.data
    if infra.max_policy_lag and not data.on_policy:
        bound = " (algo.replay.max_ahead_steps bounds how far collection runs ahead)" \
            if data is DataMode.REPLAY else ""
        raise ConfigError(
            f"config key 'infra.max_policy_lag={infra.max_policy_lag}' only applies to "
            f"{algorithm_names(lambda a: a.data.on_policy)}: {algo.name} never drops slots "
            f"for their lag{bound}; leave it unset")
    defaults = MainConfig()
    for name, _, _ in _algo_sections():
        users = section_users(name)
        if algo.name not in users and getattr(algo, name) != getattr(defaults.algo, name):
            raise ConfigError(f"config section 'algo.{name}' ({getattr(algo, name)}) only "
                              f"applies to algo.name={' or '.join(users)}, not {algo.name}; "
                              "leave it at its defaults")
    if not data.on_policy and infra.staging_depth != defaults.infra.staging_depth:
        raise ConfigError(f"config key 'infra.staging_depth={infra.staging_depth}' only "
                          f"applies to {algorithm_names(lambda a: a.data.on_policy)}, not "
                          f"{algo.name}")
    if cfg.log.eval_on_checkpoint and not algo.algorithm.trains:
        raise ConfigError(f"config key 'log.eval_on_checkpoint=true' needs training: "
                          f"algo.name={algo.name} writes no checkpoints to evaluate")
    if infra.pin_workers and infra.runtime != "local":
        raise ConfigError("config key 'infra.pin_workers=true' needs infra.runtime=local: "
                          f"the {infra.runtime} runtime places the workers itself")
    if infra.ray_address is not None and infra.runtime != "ray":
        raise ConfigError(f"config key 'infra.ray_address={infra.ray_address}' only applies "
                          f"to infra.runtime=ray, not {infra.runtime}")
    if not cfg.selfplay.enabled and cfg.selfplay != defaults.selfplay:
        raise ConfigError(f"config section 'selfplay' ({cfg.selfplay}) only applies with "
                          "selfplay.enabled=true; leave it at its defaults")


def _sections(node: Any, prefix: str = "") -> Any:
    """``(dotted prefix, dataclass)`` of ``node`` and every section nested in it."""
    yield prefix, node
    for f in fields(node):
        sub = getattr(node, f.name)
        if is_dataclass(sub):
            yield from _sections(sub, f"{prefix}{f.name}.")


def to_yaml(cfg: MainConfig) -> str:
    """The resolved config as YAML, the form saved in the run directory."""
    return OmegaConf.to_yaml(OmegaConf.structured(cfg))


def flat_config(cfg: MainConfig) -> dict[str, Any]:
    """Every leaf of the resolved config by its dotted key (``algo.lr``); lists and empty
    maps as they are."""
    def flat(node: Any, prefix: str = "") -> dict[str, Any]:
        if isinstance(node, dict) and node:
            return {k: v for key, sub in node.items() for k, v in flat(sub, f"{prefix}{key}.")
                    .items()}
        return {prefix[:-1]: node}

    return flat(OmegaConf.to_container(OmegaConf.structured(cfg)))


def config_changes(before: MainConfig, after: MainConfig) -> list[str]:
    """``key: old -> new`` for every leaf whose value differs between two configs."""
    a, b = flat_config(before), flat_config(after)
    return [f"{k}: {a.get(k)!r} -> {b.get(k)!r}" for k in sorted(set(a) | set(b))
            if a.get(k) != b.get(k)]


def config_hash(cfg: MainConfig) -> str:
    """SHA-256 of the resolved YAML: equal configs hash equal, whatever their source."""
    return hashlib.sha256(to_yaml(cfg).encode()).hexdigest()
