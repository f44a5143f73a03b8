"""python -m fastrl.describe [CONFIG.yaml] [key=value ...] [--json]: the run's architecture.

Prints the four layers of a run (docs/architecture.md: rollout workers, experience buffer,
learner, evaluation and logging, under the supervisor) filled in with one config's
numbers: processes and devices, envs, slot and ring sizes, the replay buffer, the weights
transport, the shared memory in all, and where logs, checkpoints and evaluations go.
Nothing is started and no memory is allocated: the env is made once to read its spaces, as
every run does first. A config that :func:`fastrl.config.check_values` rejects exits 2
with the reason, as ``python -m fastrl.train`` would.

``--json`` prints the same content as one JSON object (exact bytes where the text rounds):

- ``run``: ``env_id``, ``algo``, ``seed``, ``total_steps``, ``runtime`` (local | serial |
  ray), ``processes``: ``supervisor``, ``learner``, ``workers`` (own processes, 0 under
  serial and ray), ``ray_actors`` (the workers under ray, else 0), ``checkpoint_eval`` (1
  with ``log.eval_on_checkpoint``), ``total`` (local processes, actors not included);
  ``ray_address`` (under ray: the cluster, null for a local Ray started for the run).
- ``env``: ``id``, ``source`` (``gymnasium.make``, ``atari``, ``envpool``, ``env.fn``,
  ``env.vector_fn`` or ``built-in batched``), ``factory`` (its import string, or null), ``kwargs``,
  ``observation_space``, ``action_space``, ``agents`` and ``agent_groups`` (a multi-agent
  env's; null otherwise), ``policy_per_group``.
- ``rollout``: ``workers``, ``processes``, ``device`` (cpu), ``torch_threads`` (under
  serial the process's: infra.learner_threads),
  ``envs_per_worker``, ``total_envs``, ``rollout_len``, ``transitions_per_slot``,
  ``actions`` (how workers choose them), ``policy`` (the network's class).
- ``buffer``: ``memory`` (``shared`` or ``process``), ``rings``, ``ring_slots``,
  ``slot_bytes``, ``ring_bytes``, ``rings_bytes``, ``final_obs`` (``rows_per_env`` a slot
  keeps, from the env's ``max_episode_steps`` or null, and ``rings_bytes_saved`` against
  one per step), ``mode`` (``on-policy``, ``off-policy``
  or ``drain``: algo.name=none releases slots unread), ``batch_size`` (transitions per
  update; null for drain), ``replay`` (off-policy: ``class``, ``capacity``, ``bytes``,
  ``n_step``, ``learning_starts``, ``updates_per_step``; null otherwise).
- ``learner``: ``processes`` (0 under serial), ``device``, ``torch_threads`` (as in
  ``rollout``), ``algo``,
  ``policy``, ``num_params``, ``images`` (each image input of the observations the
  network reads with a CNN: ``input``, ``pixels``, ``cnn``), ``encoder_notes`` (one line per
  image too small for the CNN ``algo.encoder`` names, saying which reads it instead);
  PPO adds ``num_minibatches`` and ``update_epochs``.
- ``weights``: ``transport``, ``num_params`` (float32), ``bytes`` (the self-play pool's
  included), ``selfplay`` (``pool_size``, ``snapshot_every``, ``latest_prob``,
  ``pool_banks``, ``pool_bytes``, ``baseline``; null without self-play).
- ``logging``: ``run_dir``, ``tensorboard`` (its folder, or null), ``console``,
  ``checkpoints`` (``every_steps``, ``keep``; null when nothing is trained),
  ``evaluation`` (``every_steps``, ``first_seed``, ``seeds``, ``episodes_per_seed``,
  ``episodes``, ``device``, ``target_return``; null when nothing is trained),
  ``eval_on_checkpoint``.
- ``supervisor``: ``restarts_workers``, ``worker_timeout_s``, ``max_restarts``,
  ``restart_window_s``, ``learner_timeout_s``.
- ``shared_memory``: ``segments`` (count), ``by_kind`` (bytes per kind of segment, as
  ``RunPlan.shm_bytes``; empty under serial), ``total_bytes``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gymnasium import spaces

from fastrl.algos.base import DataMode
from fastrl.config import MainConfig, load_config
from fastrl.core.text import human_bytes, plural
from fastrl.envs import BUILTIN_BATCHED
from fastrl.envs.atari import is_atari
from fastrl.envs.envpool import envpool_task
from fastrl.envs.multiagent import agents_lines, describe_agents
from fastrl.envs.source import EnvSource, import_string
from fastrl.errors import INPUT_ERRORS
from fastrl.memory.layout import storage_of, trajectory_layout
from fastrl.memory.records import describe_record, record_lines
from fastrl.models.encoders import ImageEncoder, encoder_notes, image_encoders
from fastrl.models.recurrent import core_lines, describe_core
from fastrl.plan import RunPlan, plan_run
from fastrl.population import describe as population_describe
from fastrl.replay import PrioritizedReplayBuffer, ReplayBuffer
from fastrl.selfplay import describe as selfplay_describe

WIDTH = 80  # of the boxes, borders included
INNER = WIDTH - 4
STEM = 20  # column of the arrows between the boxes
SIZE_SPACE = re.compile(r"(\d) (B|KiB|MiB|GiB|TiB)\b")

# --- the report as data --------------------------------------------------------------------

Part = Callable[[RunPlan], "dict[str, Any] | None"]
Lines = Callable[[dict[str, Any]], list[str]]

#: Each cross-cutting feature's part of the report, made by functions of the feature's own
#: module: ``(section, key, part, lines)``. ``part(plan)`` is its plain data (None where
#: the run does not use it), put at ``report[section][key]``, or merged into the section
#: where ``key`` is None; ``lines(data)`` are its lines in the rollout box. A new feature
#: adds a row here (docs/architecture.md, "Adding a feature").
FEATURE_PARTS: tuple[tuple[str, str | None, Part, Lines], ...] = (
    ("env", None, describe_record, record_lines),
    ("env", None, describe_agents, agents_lines),
    ("weights", "selfplay", selfplay_describe.part, selfplay_describe.lines),
    ("rollout", "core", describe_core, core_lines),
    ("rollout", "population", population_describe.part, population_describe.lines),
)


def _with_features(report: dict[str, Any], plan: RunPlan) -> dict[str, Any]:
    """``report`` with every feature's part of :data:`FEATURE_PARTS` put in."""
    for section, key, part, _ in FEATURE_PARTS:
        data = part(plan)
        if key is None:
            report[section].update(data)
        else:
            report[section][key] = data
    return report


def _feature_lines(report: dict[str, Any]) -> list[str]:
    """The rollout box's lines of every feature the run uses (:data:`FEATURE_PARTS`)."""
    lines = []
    for section, key, _, to_lines in FEATURE_PARTS:
        data = report[section] if key is None else report[section][key]
        if data is not None:
            lines += to_lines(data)
    return lines


def describe(plan: RunPlan, run_dir: str | Path | None = None) -> dict[str, Any]:
    """The architecture of the run ``plan`` describes, as plain data (see the module doc).

    ``run_dir`` is the run's folder when it exists already (a resumed run); by default the
    report names it from ``log.run_dir`` and ``log.run_name`` (``<new run>`` when unnamed).
    """
    cfg = plan.cfg
    network = plan.policy()  # (built once: a CNN or a population is not free)
    policy = _class_name(type(network))
    return _with_features({
        "run": {"env_id": cfg.env.id, "algo": cfg.algo.name, "seed": cfg.seed,
                "total_steps": cfg.algo.total_steps, "runtime": cfg.infra.runtime,
                "processes": _processes(cfg), "ray_address": cfg.infra.ray_address},
        "env": _env_part(plan),
        "rollout": _rollout_part(cfg, policy),
        "buffer": _buffer_part(plan),
        "learner": _learner_part(plan, policy, network),
        "weights": {"transport": f"{_memory(cfg)}-memory seqlock" + (
            ", broadcast to the actors through Ray's object store" if _ray(cfg) else ""),
                    "num_params": plan.num_params, "bytes": plan.weights_bytes},
        "logging": _logging_part(plan, str(run_dir) if run_dir else _new_run_dir(cfg)),
        "supervisor": _supervisor_part(cfg),
        "shared_memory": _shared_memory_part(plan),
    }, plan)


def _serial(cfg: MainConfig) -> bool:
    return cfg.infra.runtime == "serial"


def _ray(cfg: MainConfig) -> bool:
    return cfg.infra.runtime == "ray"


def _memory(cfg: MainConfig) -> str:
    """Where rings and weights live: the serial runtime keeps them in its own memory."""
    return "process" if _serial(cfg) else "shared"


def _class_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _processes(cfg: MainConfig) -> dict[str, int]:
    """Processes of the run by role (the checkpoint evaluator runs one at a time)."""
    own = 0 if _serial(cfg) else 1
    actors = cfg.infra.num_workers if _ray(cfg) else 0
    counts = {"supervisor": 1, "learner": own,
              "workers": 0 if actors else own * cfg.infra.num_workers,
              "checkpoint_eval": int(cfg.log.eval_on_checkpoint)}
    return {**counts, "ray_actors": actors, "total": sum(counts.values())}


def _factory_name(ref: Any) -> str:
    """A factory as an import string where it has one, else its repr."""
    return ref if isinstance(ref, str) else import_string(ref) or repr(ref)


def _env_part(plan: RunPlan) -> dict[str, Any]:
    env: EnvSource = plan.env
    if env.backend == "envpool":
        task, _ = envpool_task(env.env_id, {}, env.atari)
        source, factory = "envpool", (f"envpool.make_gymnasium({task!r}, num_envs="
                                      f"{plan.cfg.infra.envs_per_worker}, num_threads=1) per "
                                      "worker, episodes reset within their last step")
    elif env.vector_env_fn is not None:
        source, factory = "env.vector_fn", _factory_name(env.vector_env_fn)
    elif env.env_fn is not None:
        source, factory = "env.fn", _factory_name(env.env_fn)
    elif env.batched:
        source, factory = "built-in batched", _factory_name(BUILTIN_BATCHED[env.env_id])
    elif is_atari(env.env_id):
        a = env.atari
        source, factory = "atari", (
            f"frame skip {a.frame_skip} max-pooled, {a.screen_size}x{a.screen_size} grayscale, "
            f"{a.frame_stack} stacked, up to {a.noop_max} no-ops, sticky actions "
            f"{a.sticky_actions}" + (", life loss ends episodes" if a.terminal_on_life_loss
                                     else ""))
    else:
        source, factory = "gymnasium.make", None
    return {"id": env.env_id, "source": source, "factory": factory, "kwargs": dict(env.kwargs),
            "observation_space": _space_text(plan.obs_space),
            "action_space": _space_text(plan.act_space)}


def _rows_text(envs_per_worker: int, agents: list[str] | None) -> str:
    """A worker's rows: ``8 envs`` or, for a multi-agent env, ``2 envs x 3 agents = 6
    rows``."""
    if not agents:
        return f"{envs_per_worker:,} envs"
    return (f"{envs_per_worker // len(agents):,} envs x {len(agents)} agents = "
            f"{envs_per_worker:,} rows")


def _space_text(space: Any) -> str:
    """A space in a few words: a Box by shape and dtype (its bounds can be long arrays)."""
    if isinstance(space, spaces.Box):
        return f"Box{tuple(space.shape)} {space.dtype}"
    return str(space)


def _actions(cfg: MainConfig) -> str:
    return "uniformly random" if cfg.algo.random_actions else cfg.algo.algorithm.actions


def _rollout_part(cfg: MainConfig, policy: str) -> dict[str, Any]:
    infra = cfg.infra
    return {"workers": infra.num_workers, "processes": _processes(cfg)["workers"],
            "device": "cpu",
            "torch_threads": cfg.infra.learner_threads if _serial(cfg) else 1,
            "envs_per_worker": infra.envs_per_worker,
            "total_envs": cfg.total_envs, "rollout_len": infra.rollout_len,
            "transitions_per_slot": infra.rollout_len * infra.envs_per_worker,
            "actions": _actions(cfg), "policy": policy}


def replay_nbytes(cfg: MainConfig, obs_space: Any, act_space: Any) -> int:
    """Bytes the replay buffer of ``cfg`` allocates for these env spaces, computed without
    allocating: its rows, the per-env n-step tails and, when prioritized, the sum/min tree."""
    rc = cfg.algo.replay
    cls = PrioritizedReplayBuffer if rc.prioritized else ReplayBuffer
    return cls.nbytes(rc.capacity, *storage_of(obs_space, "observation"),
                      *storage_of(act_space, "action"), cfg.total_envs, rc.n_step)


def _buffer_part(plan: RunPlan) -> dict[str, Any]:
    cfg = plan.cfg
    workers, data = cfg.infra.num_workers, cfg.algo.algorithm.data
    batch_size = cfg.algo.replay.batch_size if data is DataMode.REPLAY else \
        cfg.batch_size if data.on_policy else None
    replay = None
    if data is DataMode.REPLAY:
        rc = cfg.algo.replay
        cls = PrioritizedReplayBuffer if rc.prioritized else ReplayBuffer
        replay = {"class": cls.__name__, "capacity": rc.capacity,
                  "bytes": replay_nbytes(cfg, plan.obs_space, plan.act_space),
                  "n_step": rc.n_step, "learning_starts": rc.learning_starts,
                  "updates_per_step": rc.updates_per_step}
    return {"memory": _memory(cfg), "rings": workers, "ring_slots": cfg.infra.ring_slots,
            "slot_bytes": plan.layout.nbytes, "ring_bytes": plan.ring_bytes,
            "rings_bytes": workers * plan.ring_bytes, "final_obs": _final_obs_part(plan),
            "mode": data.value,
            "batch_size": batch_size,
            "batch_slots": cfg.batch_slots if data.on_policy else None,
            "max_policy_lag": cfg.policy_lag_bound if data.on_policy else None,
            "replay": replay}


def _final_obs_part(plan: RunPlan) -> dict[str, Any]:
    """How many final observations a slot keeps per env, and the ring bytes that saves
    against one per step."""
    infra = plan.cfg.infra
    core = plan.layout.shape_of("core_state")
    dense = trajectory_layout(plan.obs_space, plan.act_space, infra.rollout_len,
                              infra.envs_per_worker, core_state_size=core[1] if core else 0,
                              weighted=plan.layout.shape_of("weight") is not None)
    saved = (dense.nbytes - plan.layout.nbytes) * infra.ring_slots * infra.num_workers
    rows = plan.layout.shape_of("final_obs")[1]
    return {"rows_per_env": rows, "max_episode_steps": plan.max_episode_steps,
            "rings_bytes_saved": saved}


def _learner_part(plan: RunPlan, policy: str, network: Any) -> dict[str, Any]:
    cfg = plan.cfg
    part = {"processes": _processes(cfg)["learner"], "device": plan.device,
            "torch_threads": cfg.infra.learner_threads,
            "algo": cfg.algo.name,
            "policy": policy, "num_params": plan.num_params, **_images_part(plan, network)}
    minibatches = cfg.algo.algorithm.minibatches
    if minibatches:
        num_minibatches, update_epochs = minibatches(cfg.algo)
        part.update(num_minibatches=num_minibatches, update_epochs=update_epochs,
                    staging=_staging(cfg.infra.staging_depth, plan.device))
    return part


def _images_part(plan: RunPlan, network: Any) -> dict[str, Any]:
    """The CNN reading each image of the observations, where ``network`` (the run's) has
    one, and the notes on those that got another than ``algo.encoder`` names (too small
    for it)."""
    if not any(isinstance(m, ImageEncoder) for m in network.modules()):
        return {"images": [], "encoder_notes": []}
    kind = plan.cfg.algo.encoder
    return {"images": [{"input": name, "pixels": pixels, "cnn": cnn}
                       for name, pixels, cnn in image_encoders(plan.obs_space, kind)],
            "encoder_notes": encoder_notes(plan.obs_space, kind)}


def _staging(depth: int, device: str) -> str:
    """How batches reach the learner's device (fastrl.learner.staging)."""
    if depth == 0:
        return "synchronous copies (infra.staging_depth=0)"
    if device == "cuda":
        return f"pinned host buffers, async copy stream, {depth} deep"
    return "in place (one slot) or one copy into reused buffers"


def _new_run_dir(cfg: MainConfig) -> str:
    return f"{cfg.log.run_dir}/{cfg.log.run_name or '<new run>'}"


def _logging_part(plan: RunPlan, run_dir: str) -> dict[str, Any]:
    cfg, log = plan.cfg, plan.cfg.log
    # algo.name=none only drains the rings: no update, so nothing to evaluate or save
    checkpoints = {"every_steps": log.checkpoint_every_steps,
                   "keep": log.keep_checkpoints} if plan.trains else None
    evaluation = {"every_steps": log.eval_every_steps, "first_seed": log.eval_seed,
                  "seeds": log.eval_episodes, "episodes_per_seed": log.eval_episodes_per_seed,
                  "episodes": log.eval_episodes * log.eval_episodes_per_seed,
                  "device": plan.device,
                  "target_return": cfg.algo.target_return} if plan.trains else None
    return {"run_dir": run_dir, "tensorboard": f"{run_dir}/tb" if log.tensorboard else None,
            "console": log.console, "checkpoints": checkpoints, "evaluation": evaluation,
            "eval_on_checkpoint": log.eval_on_checkpoint}


def _supervisor_part(cfg: MainConfig) -> dict[str, Any]:
    infra = cfg.infra
    return {"restarts_workers": not _serial(cfg), "worker_timeout_s": infra.worker_timeout_s,
            "max_restarts": infra.max_restarts, "restart_window_s": infra.restart_window_s,
            "learner_timeout_s": infra.learner_timeout_s}


def _shared_memory_part(plan: RunPlan) -> dict[str, Any]:
    if _serial(plan.cfg):
        return {"segments": 0, "by_kind": {}, "total_bytes": 0}
    by_kind = plan.shm_bytes()
    return {"segments": plan.cfg.infra.num_workers + 1, "by_kind": by_kind,
            "total_bytes": sum(by_kind.values())}


# --- the report as text --------------------------------------------------------------------


def _threads(n: int, each: str = "") -> str:
    """``n`` torch threads."""
    return plural(n, "torch thread") + each


def _process_list(processes: dict[str, int]) -> str:
    roles = ["supervisor"]
    if processes["learner"]:
        roles.append("learner")
    if processes["workers"]:
        roles.append(plural(processes["workers"], "worker"))
    if processes["checkpoint_eval"]:
        roles.append("checkpoint evaluator")
    return ", ".join(roles)


def _runtime_line(report: dict[str, Any]) -> str:
    run = report["run"]
    processes = run["processes"]
    if run["runtime"] == "serial":
        extra = " (+ the checkpoint evaluator)" if processes["checkpoint_eval"] else ""
        return f"runtime serial: everything runs in the calling process{extra}"
    line = (f"runtime {run['runtime']}: {plural(processes['total'], 'process', 'processes')} "
            f"({_process_list(processes)})")
    if run["runtime"] == "ray":
        cluster = f"the Ray cluster at {run['ray_address']}" if run["ray_address"] else \
            "a local Ray started for the run"
        line += f" + {plural(processes['ray_actors'], 'worker actor')} on {cluster}"
    return line


def _env_text(env: dict[str, Any]) -> str:
    kwargs = ", ".join(f"{k}={v!r}" for k, v in env["kwargs"].items())
    if env["source"] in ("gymnasium.make", "atari"):
        made = f"gymnasium.make({', '.join([repr(env['id'])] + ([kwargs] if kwargs else []))})"
        return made if env["source"] == "gymnasium.make" else f"{made}; {env['factory']}"
    if env["source"] == "envpool":
        return env["factory"] + (f" ({kwargs})" if kwargs else "")
    return f"{env['source']} {env['factory']}({kwargs}) as {env['id']!r}"


def _box(title: str, paths: str, lines: list[str]) -> list[str]:
    """A layer's box: title and package paths, then the lines wrapped to the box."""
    body = [f"{title:<28}{paths}"]
    for line in lines:
        # a size is not split from its unit: textwrap breaks at ASCII spaces only
        glued = SIZE_SPACE.sub("\\1\xa0\\2", line)
        body += [part.replace("\xa0", " ") for part in
                 textwrap.wrap(glued, INNER - 1, initial_indent=" ", subsequent_indent="   ")]
    return [f"│ {text:<{INNER}} │" for text in body]


def _edge(top: str, bottom: str) -> str:
    """A horizontal border with the arrow stem's junction at column STEM."""
    return top + "─" * (STEM - 1) + bottom + "─" * (WIDTH - STEM - 2)


def _link(label: str) -> list[str]:
    """The bottom border of a box, the arrow with its label, the next box's top."""
    return [_edge("└", "┬") + "┘", " " * STEM + "│ " + label, _edge("┌", "▼") + "┐"]


def _rollout_lines(report: dict[str, Any]) -> list[str]:
    r, runtime = report["rollout"], report["run"]["runtime"]
    if runtime == "serial":
        workers = f"{plural(r['workers'], 'worker')} stepped in the calling process"
    elif runtime == "ray":
        workers = (f"{plural(r['workers'], 'worker')} as Ray actors (one CPU each, spread "
                   "over the cluster's nodes)")
    else:
        workers = plural(r["processes"], "worker process", "worker processes")
    return [
        f"{workers} on {r['device'].upper()}, {_threads(r['torch_threads'], ' each')}",
        f"{_rows_text(r['envs_per_worker'], report['env']['agents'])} each, "
        f"{r['total_envs']:,} in total: {_env_text(report['env'])}",
        f"observations {report['env']['observation_space']}, actions "
        f"{report['env']['action_space']}",
        f"actions: {r['actions']}, {r['policy']} on a local copy of the weights",
        *_feature_lines(report),
        f"{r['rollout_len']:,} steps per env per slot: {r['transitions_per_slot']:,} "
        "transitions a slot",
    ]


def run_agents(report: dict[str, Any]) -> list[str] | None:
    """A multi-agent env's agents as the report lists them (None for one agent an env)."""
    return report["env"]["agents"]


def _final_obs_line(f: dict[str, Any], rollout_len: int) -> str:
    if f["max_episode_steps"] is None:
        return (f"final observations: {rollout_len:,} per env a slot, one per step (the env "
                "declares no max_episode_steps that bounds its truncations)")
    return (f"final observations: {plural(f['rows_per_env'], 'row')} per env a slot, as "
            f"episodes are truncated at {f['max_episode_steps']:,} steps, not one per step: "
            f"{human_bytes(f['rings_bytes_saved'])} less ring memory")


def _buffer_lines(report: dict[str, Any]) -> list[str]:
    b = report["buffer"]
    lines = [
        f"{plural(b['rings'], 'SPSC ring')} (one per worker) in {b['memory']} memory",
        f"{plural(b['ring_slots'], 'slot')} of {human_bytes(b['slot_bytes'])} a ring: "
        f"{human_bytes(b['ring_bytes'])} a ring, {human_bytes(b['rings_bytes'])} in all",
        _final_obs_line(b["final_obs"], report["rollout"]["rollout_len"]),
    ]
    if DataMode(b["mode"]).on_policy:
        lines.append(f"{b['mode']}: {_batch_text(b)}")
    elif b["mode"] == DataMode.REPLAY.value:
        rp = b["replay"]
        lines += [f"off-policy: slots feed a {rp['class']} of {rp['capacity']:,} transitions "
                  f"({human_bytes(rp['bytes'])}, in the learner's memory)",
                  f"{rp['n_step']}-step returns; learning starts after "
                  f"{rp['learning_starts']:,}; batch {b['batch_size']:,}, "
                  f"update-to-data ratio {rp['updates_per_step']:g}"]
    else:
        lines.append(f"algo.name={report['learner']['algo']}: the learner releases every slot "
                     "unread (no training)")
    return lines


def _batch_text(b: dict[str, Any]) -> str:
    """What one on-policy batch is."""
    if b["mode"] == DataMode.ASYNC.value:
        return (f"{plural(b['batch_slots'], 'slot')} from whichever workers have them is one "
                f"batch of {b['batch_size']:,} transitions, V-trace-corrected, lag <= "
                f"{b['max_policy_lag']}")
    return f"one slot per worker is one batch of {b['batch_size']:,} transitions"


def _learner_lines(report: dict[str, Any]) -> list[str]:
    lr, w = report["learner"], report["weights"]
    where = "learner in the calling process" if report["run"]["runtime"] == "serial" else \
        plural(lr["processes"], "learner process", "learner processes")
    lines = [f"{where} on {lr['device']}, {_threads(lr['torch_threads'])}: {lr['algo']}",
             f"network {lr['policy']}, {lr['num_params']:,} params"]
    lines += [f"{i['input']} ({i['pixels']} pixels): the {i['cnn']} CNN" for i in lr["images"]]
    if "num_minibatches" in lr:
        lines.append(f"batch {report['buffer']['batch_size']:,}: {lr['num_minibatches']} "
                     f"minibatches x {lr['update_epochs']} epochs; staged: {lr['staging']}")
    lines.append(f"publishes weights: {w['transport']}, {w['num_params']:,} float32 params "
                 f"({human_bytes(w['bytes'])})")
    return lines


def _logging_lines(report: dict[str, Any]) -> list[str]:
    lg = report["logging"]
    lines = [f"TensorBoard: {lg['tensorboard'] or 'off'}",
             f"console progress line: {'on' if lg['console'] else 'off'}"]
    ck, ev = lg["checkpoints"], lg["evaluation"]
    if ck is None:
        lines.append("no checkpoints and no evaluation: nothing is trained")
    else:
        lines.append(f"checkpoints every {ck['every_steps']:,} steps in "
                     f"{lg['run_dir']}/checkpoints, newest {ck['keep']} kept")
        stop = "" if ev["target_return"] is None else \
            f"; stops at mean return {ev['target_return']:g}"
        lines.append(f"evaluation every {ev['every_steps']:,} steps: {ev['seeds']} seeds x "
                     f"{plural(ev['episodes_per_seed'], 'episode')} from seed "
                     f"{ev['first_seed']}, in the learner on {ev['device']}{stop}")
    lines.append("eval-on-checkpoint process: "
                 + ("on (python -m fastrl.eval harness)" if lg["eval_on_checkpoint"] else "off"))
    return lines


def _supervisor_lines(report: dict[str, Any]) -> list[str]:
    s, shm = report["supervisor"], report["shared_memory"]
    head = "supervisor (main process): fastrl/runtime/supervisor.py"
    if not s["restarts_workers"]:
        return [head, "runs workers and learner in turn in this process; no worker restarts",
                "no shared-memory segments: rings and weights are in process memory"]
    processes = report["run"]["processes"]
    workers = plural(processes["workers"], "worker") if processes["workers"] else \
        plural(processes["ray_actors"], "worker actor")
    return [head,
            f"spawns the learner and {workers}; restarts a worker silent "
            f"{s['worker_timeout_s']:g} s (at most {s['max_restarts']} in "
            f"{s['restart_window_s']:g} s)",
            f"owns {plural(shm['segments'], 'shared-memory segment')}, "
            f"{human_bytes(shm['total_bytes'])} in all; unlinks them on every exit path"]


def render(report: dict[str, Any]) -> str:
    """The four-layer diagram of docs/architecture.md filled in with ``report``'s numbers."""
    run = report["run"]
    shared = report["buffer"]["memory"] == "shared"
    head = [f"fastrl run: {run['env_id']}, {run['algo']} for {run['total_steps']:,} steps, "
            f"seed {run['seed']}", _runtime_line(report)]
    to_buffer = "shared memory, lock-free cursors" if shared else \
        "process memory (serial runtime)"
    if run["runtime"] == "ray":
        to_buffer = "Ray's object store, then the supervisor's relay into " + to_buffer
    lines = [*head, "┌" + "─" * (WIDTH - 2) + "┐",
             *_box("ROLLOUT WORKER LAYER", "fastrl/rollout/", _rollout_lines(report)),
             *_link(to_buffer),
             *_box("EXPERIENCE BUFFER LAYER", "fastrl/memory/  fastrl/replay/",
                   _buffer_lines(report)),
             *_link(f"copied to the learner's device ({report['learner']['device']})"),
             *_box("LEARNER LAYER", "fastrl/learner/  fastrl/algos/", _learner_lines(report)),
             *_link("metrics (low rate), checkpoints"),
             *_box("EVALUATION / LOGGING LAYER", "fastrl/telemetry/  fastrl/checkpoint.py",
                   _logging_lines(report)),
             "└" + "─" * (WIDTH - 2) + "┘"]
    lines += ["  " + text for text in _supervisor_lines(report)]
    return "\n".join(lines)


def summary(report: dict[str, Any]) -> str:
    """The short form of :func:`render`, five lines (and a note per image too small for the
    CNN asked for), for a run's start-up."""
    run, r, b = report["run"], report["rollout"], report["buffer"]
    lr, w, shm, lg = report["learner"], report["weights"], report["shared_memory"], \
        report["logging"]
    if b["mode"] == DataMode.REPLAY.value:
        rp = b["replay"]
        data = (f"{rp['class']} of {rp['capacity']:,} ({human_bytes(rp['bytes'])}), "
                f"batch {b['batch_size']:,}")
    elif DataMode(b["mode"]).on_policy:
        data = _batch_text(b)
    else:
        data = "slots released unread (no training)"
    memory = "none (serial runtime)" if shm["segments"] == 0 else \
        f"{plural(shm['segments'], 'segment')}, {human_bytes(shm['total_bytes'])}"
    return "\n".join([
        f"fastrl: {run['env_id']} {run['algo']}, {_runtime_line(report)}",
        f"  workers: {r['workers']} x {_rows_text(r['envs_per_worker'], run_agents(report))} "
        f"on CPU = {r['total_envs']} {'rows' if run_agents(report) else 'envs'}, "
        f"{r['rollout_len']} steps a slot ({human_bytes(b['slot_bytes'])})",
        f"  buffer: {b['rings']} rings x {b['ring_slots']} slots in {b['memory']} memory; "
        f"{data}",
        f"  learner: {lr['policy'].rsplit('.', 1)[-1]} on {lr['device']}, "
        f"{lr['num_params']:,} params; weights via {w['transport']} "
        f"({human_bytes(w['bytes'])})",
        f"  shared memory: {memory}; TensorBoard: {lg['tensorboard'] or 'off'}",
        *(f"  note: {note}" for note in lr["encoder_notes"]),
    ])


# --- command line --------------------------------------------------------------------------


def config_and_overrides(args: list[str]) -> tuple[str | None, list[str]]:
    """Split CLI arguments into an optional leading config path and ``key=value``
    overrides."""
    if args and "=" not in args[0]:
        return args[0], list(args[1:])
    return None, list(args)


def main(argv: list[str] | None = None) -> int:
    """CLI entry point; returns the exit status (0, or 2 for a config that is rejected)."""
    parser = argparse.ArgumentParser(
        prog="python -m fastrl.describe", description=__doc__.split("\n")[0],
        epilog="example: python -m fastrl.describe configs/cartpole_dqn.yaml "
               "infra.num_workers=4 --json")
    parser.add_argument("args", nargs="*", metavar="CONFIG_OR_OVERRIDE",
                        help="a YAML config file first (optional), then key=value overrides")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    ns = parser.parse_args(sys.argv[1:] if argv is None else argv)
    path, overrides = config_and_overrides(ns.args)
    try:
        report = describe(plan_run(load_config(path, overrides)))
    except INPUT_ERRORS as e:
        print(f"fastrl.describe: error: {e}", file=sys.stderr)
        return 2
    print(json.dumps(report, indent=2) if ns.json else render(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
