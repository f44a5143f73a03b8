"""What a checkpoint holds and how a run resumes from one.

fastrl.checkpoint writes and verifies checkpoint folders; this module says what goes into
them and how each process takes its part back:

- ``learner.pt``: the model, the algorithm's state, the RNG states, the learner's counters
  and schedule, its feed's state (fastrl.learner.feeds: the return scale, the replay
  counters) and, deterministic, the weights each bank holds
  (:meth:`~fastrl.memory.weights.SharedWeights.banks_state`);
  ``replay.npz``: the replay buffer (DQN, SAC);
- ``rings.npz``: each ring's cursors and its published, unread slots (:func:`ring_contents`,
  put back by :func:`restore_rings` into the new run's rings before any process starts);
- ``worker-<i>.pkl``: a worker's parked state (:func:`park_blob`, :func:`load_parked`);
- ``config.yaml``, and the manifest's description of the run (:func:`manifest_info`):
  env, spaces, network shapes, ring and replay shapes (:func:`ring_shape`,
  :func:`replay_shape`), which :func:`check_resumable` compares with the run that resumes.
"""

from __future__ import annotations

import os
import pickle
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from fastrl.algos.base import DataMode
from fastrl.checkpoint import Checkpoint, CheckpointError, parked_path
from fastrl.config import MainConfig, config_hash, to_yaml
from fastrl.core.files import telling_disk_full
from fastrl.memory.ring import INCARNATION, STEPS, WRITE_SEQ, Ring
from fastrl.plan import RunPlan, slot_schedule
from fastrl.selfplay.checks import pool_reshaped

#: Modules whose classes parked states (worker-<i>.pkl) name, by their former path: a
#: checkpoint written before they moved still resumes.
MOVED_MODULES = {"fastrl.rollout.envs": "fastrl.envs.source",
                 "fastrl.rollout.actors": "fastrl.models.actors"}


def ring_shape(cfg: MainConfig, slot_bytes: int) -> dict:
    """What saved slots and parked worker states depend on: a resumed run restores them only
    when all of it is unchanged (a lower lag bound would drop restored slots and put the
    cursors out of step with the weights version; unstamped slots would fail a CRC check).
    APPO's and the replay algorithms' deterministic runs number their slots in an order
    of their own (fastrl.plan.SlotSchedule): their rings are kept only within that mode
    and batch size (SYNC's order is the same either way)."""
    infra = cfg.infra
    shape = {"num_workers": infra.num_workers, "envs_per_worker": infra.envs_per_worker,
             "rollout_len": infra.rollout_len, "ring_slots": infra.ring_slots,
             "max_policy_lag": cfg.policy_lag_bound, "check_slots": infra.check_slots,
             "slot_bytes": slot_bytes, "env_kwargs": dict(cfg.env.kwargs)}
    schedule = slot_schedule(cfg)
    if schedule and schedule.data is not DataMode.SYNC:
        shape["deterministic"] = {"batch_slots": schedule.batch_slots}
    return shape


def ring_changes(ckpt: Checkpoint, plan: RunPlan) -> list[str]:
    """``key: saved -> now`` for what keeps a checkpoint's unread slots and parked worker
    states from this run's rings (:func:`ring_shape`); empty when they fit."""
    saved, now = ckpt.manifest["rings"], ring_shape(plan.cfg, plan.layout.nbytes)
    return [f"{k}: {saved.get(k)} -> {now.get(k)}" for k in sorted(set(saved) | set(now))
            if saved.get(k) != now.get(k)]


def replay_shape(cfg: MainConfig) -> dict | None:
    """The settings that shape a run's replay buffer (None on-policy): a checkpoint's buffer
    can only be resumed into a run with the same ones."""
    if cfg.algo.algorithm.data is not DataMode.REPLAY:
        return None
    rc = cfg.algo.replay
    return {"capacity": rc.capacity, "n_step": rc.n_step, "gamma": cfg.algo.gamma,
            "prioritized": rc.prioritized, "alpha": rc.alpha if rc.prioritized else None,
            "num_envs": cfg.total_envs}


def check_resumable(ckpt: Checkpoint, env_id: str, obs_space: Any, act_space: Any,
                    param_shapes: dict[str, list[int]], algo: str = "ppo",
                    replay: dict[str, Any] | None = None) -> None:
    """Refuse to resume ``ckpt`` into a run whose env, algorithm, network or replay buffer
    (``replay``: :func:`replay_shape`) differs."""
    m = ckpt.manifest
    where = f"cannot resume from {ckpt.path}"
    if m["env_id"] != env_id:
        raise CheckpointError(f"{where}: it trained env.id={m['env_id']!r}, the config asks "
                              f"for env.id={env_id!r}")
    if m.get("algo", "ppo") != algo:
        raise CheckpointError(f"{where}: it trained algo.name={m.get('algo', 'ppo')}, the "
                              f"config asks for algo.name={algo}")
    saved_replay = m.get("replay")
    if saved_replay != replay:
        changed = [f"{k}={saved_replay.get(k)} -> {replay.get(k)}" for k in sorted(replay)
                   if saved_replay.get(k) != replay.get(k)]
        raise CheckpointError(f"{where}: its replay buffer does not fit the config "
                              f"({', '.join(changed)}); keep those settings to resume")
    for role, saved, now in (("observation", m["observation_space"], repr(obs_space)),
                             ("action", m["action_space"], repr(act_space))):
        if saved != now:
            raise CheckpointError(f"{where}: its env had the {role} space {saved}, the env "
                                  f"made now has {now}")
    for name in sorted(set(m["param_shapes"]) | set(param_shapes)):
        saved, now = m["param_shapes"].get(name), param_shapes.get(name)
        if saved != now:
            raise CheckpointError(
                f"{where}: its network has {name} of shape {saved}, the config builds "
                f"{now} (algo.hidden_sizes must stay as it was)")


def check_selfplay_kept(ckpt: Checkpoint, before: Any, now: Any) -> None:
    """Refuse to resume ``ckpt`` with self-play turned on or off, or its pool reshaped: the
    snapshots a worker may draw would be missing or in other banks
    (fastrl.selfplay.checks.pool_reshaped)."""
    changed = pool_reshaped(before, now)
    if changed:
        raise CheckpointError(f"cannot resume from {ckpt.path}: its self-play pool does not "
                              f"fit the config ({'; '.join(changed)}); keep those settings "
                              "to resume")


def manifest_info(plan: RunPlan, param_shapes: dict[str, list[int]], updates: int,
                  final: bool, rings: list[Ring], parked: list[int]) -> dict[str, Any]:
    """What the manifest says about the run that wrote a checkpoint (beside the versions,
    step and checksums fastrl.checkpoint adds)."""
    cfg = plan.cfg
    return {
        "config_hash": config_hash(cfg), "env_id": cfg.env.id,
        "observation_space": repr(plan.obs_space), "action_space": repr(plan.act_space),
        "updates": updates, "final": final, "algo": cfg.algo.name,
        "replay": replay_shape(cfg), "param_shapes": param_shapes,
        "rings": ring_shape(cfg, plan.layout.nbytes), "worker_states": sorted(parked),
        "worker_incarnations": [r.get(INCARNATION) for r in rings],
    }


def checkpoint_writers(cfg: MainConfig, learner: dict, rings: dict[str, np.ndarray],
                       parked: dict[int, Path],
                       files: dict[str, Callable[[Path], None]]) -> dict[str, Callable]:
    """The writer of each file of a checkpoint (fastrl.checkpoint.save_checkpoint): the
    learner's state, the rings' contents (:func:`ring_contents`), the config, the parked
    worker states (by worker) and the feed's ``files``."""
    writers = {"learner.pt": lambda p: _torch_save(learner, p),
               "rings.npz": lambda p: savez(p, rings),
               "config.yaml": lambda p: p.write_text(to_yaml(cfg)), **files}
    for i, src in parked.items():
        writers[f"worker-{i}.pkl"] = lambda p, src=src: shutil.copyfile(src, p)
    return writers


def savez(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """``arrays`` as an uncompressed ``.npz`` at ``path``."""
    with path.open("wb") as f:
        np.savez(f, **arrays)


def _torch_save(obj: object, path: Path) -> None:
    # A file of our own, closed however the write ends: given a path, torch.save's writer
    # holds the file open until it is collected, and the failed write's traceback (kept
    # to be raised in the learner's thread) keeps it; a full disk then stays full after
    # the half-written checkpoint is removed.
    with path.open("wb") as f:
        torch.save(obj, f)


def save_model(run_dir: Path | str, state: dict) -> Path:
    """``RUN_DIR/model.pt`` (the trained model, for ``torch.load``) written through a
    temporary file, so that the last one stays whole if this write fails."""
    model = Path(run_dir) / "model.pt"
    tmp = model.with_name(f".tmp-model.pt-{os.getpid()}")
    with telling_disk_full(model, lambda: tmp.unlink(missing_ok=True)):
        _torch_save(state, tmp)
        tmp.replace(model)
    return model


def load_learner_state(ckpt_dir: Path, device: torch.device) -> dict:
    """What the learner saved in ``learner.pt`` (tensors and plain containers only)."""
    state = torch.load(ckpt_dir / "learner.pt", map_location=device, weights_only=True)
    # (checkpoints before the off-policy algorithms kept PPO's optimizer at the top)
    state.setdefault("algo", {"optimizer": state.get("optimizer")})
    return state


def ring_contents(rings: list[Ring]) -> dict[str, np.ndarray]:
    """Each ring's cursors (``seqs<i>``) and published, unread slots (``slots<i>``)."""
    out = {}
    for i, ring in enumerate(rings):
        read_seq, write_seq, data = ring.pending()
        out[f"seqs{i}"] = np.array([read_seq, write_seq], np.int64)
        out[f"slots{i}"] = data
    return out


def restore_rings(ckpt: Checkpoint, rings: list[Ring], plan: RunPlan,
                  run_dir: Path) -> dict[int, str]:
    """Put the checkpoint's unread slots back into new ``rings`` and set each ring's
    incarnation; returns the parked worker states to continue from, by worker.

    Slots and worker states are used only when the ring shape and env arguments are
    those of the checkpoint; otherwise every worker starts fresh episodes with new seeds.
    """
    manifest = ckpt.manifest
    incarnations = manifest["worker_incarnations"]
    same = not ring_changes(ckpt, plan)
    states = {}
    with np.load(ckpt.file("rings.npz"), allow_pickle=False) as saved:
        for i, ring in enumerate(rings):
            # Each worker's step count goes on from the run's.
            ring.set(STEPS, ckpt.global_step // len(rings))
            if same:
                read_seq, write_seq = saved[f"seqs{i}"].tolist()
                ring.restore(read_seq, write_seq, saved[f"slots{i}"])
                state = ckpt.file(f"worker-{i}.pkl")
                if state is not None:
                    # A private copy: checkpoint retention may delete the folder before
                    # the worker has read it.
                    states[i] = str(parked_path(run_dir, i, -1))
                    with telling_disk_full(states[i]):
                        Path(states[i]).parent.mkdir(parents=True, exist_ok=True)
                        shutil.copyfile(state, states[i])
                ring.set(INCARNATION, incarnations[i] + (state is None))
            else:
                start = _fresh_start(plan, i, manifest["updates"], ckpt.global_step)
                ring.restore(start, start, np.empty((0, plan.layout.nbytes), np.uint8))
                ring.set(INCARNATION, max(incarnations, default=0) + 1)
    return states


def _fresh_start(plan: RunPlan, worker: int, version: int, global_step: int) -> int:
    """Where an empty ring of a resumed run starts: at the learner's version (a SYNC slot
    ``k`` trains in update ``k``); deterministic, where the run-wide slot order continues
    (fastrl.plan.SlotSchedule)."""
    if plan.schedule is None:
        return version
    slot = plan.schedule.next_slot(version, global_step, plan.slot_steps)
    return plan.schedule.first_seq(worker, slot)


def parked_states(run_dir: Path | str, rings: list[Ring]) -> dict[int, Path]:
    """The state files of the workers that parked right after the last slot their ring
    holds, by worker (an empty one: the worker had no state to keep)."""
    found = {}
    for i, ring in enumerate(rings):
        path = parked_path(run_dir, i, ring.get(WRITE_SEQ))
        if path.exists() and path.stat().st_size:
            found[i] = path
    return found


def park_blob(state: dict) -> bytes:
    """A worker's state as its parked file holds it (raises when its envs cannot be
    pickled)."""
    return pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)


class _ParkedUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        return super().find_class(MOVED_MODULES.get(module, module), name)


def load_parked(path: str | None) -> dict | None:
    """The worker state a parked file holds (our own checkpoint, its checksum verified), or
    None for no file."""
    if path is None:
        return None
    with open(path, "rb") as f:
        return _ParkedUnpickler(f).load()
