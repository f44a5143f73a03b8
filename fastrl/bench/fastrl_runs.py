"""fastrl's own scenarios, run through the real supervisor, workers and rings."""

from __future__ import annotations

import os
import tempfile
import threading
import time

from fastrl.bench.measure import Result, Snapshot, snapshot, summarize
from fastrl.config import load_config
from fastrl.runtime.supervisor import Supervisor
from fastrl.trainer import make_run_dir

SCENARIOS = {
    # name: overrides that make it
    "collect": ["algo.name=none", "algo.random_actions=true"],
    "collect-policy": ["algo.name=none"],
    # the same with the policy's forward through torch instead of numpy (fastrl.models.numpy_actor)
    "collect-policy-torch": ["algo.name=none", "infra.worker_inference=torch"],
    "train": ["algo.name=ppo"],
    # PPO whose workers collect the next batch while the learner trains on this one
    "train-lag1": ["algo.name=ppo", "infra.max_policy_lag=1"],
    "train-appo": ["algo.name=appo"],  # the same workers and envs as train: PPO vs APPO
    # collect with the workers as Ray actors on a local Ray that fastrl starts: vs collect
    "collect-ray": ["algo.name=none", "algo.random_actions=true", "infra.runtime=ray"],
}
ROLES = ("supervisor", "learner", "workers", "other")  # "other": Ray's daemons, trackers
START_TIMEOUT_S = 120.0


def run_fastrl(scenario: str, env_id: str, env_kwargs: dict, workers: int,
               envs_per_worker: int, rollout_len: int, warmup_s: float, duration_s: float,
               extra: list[str] = (), label_env: bool = False) -> Result:
    """Measure one fastrl run: start it, wait until every worker has published a slot (the
    run's start-up, ``costs["start_s"]``: processes, imports, numba's kernels, first
    steps) and ``warmup_s`` more, then measure ``duration_s`` and stop it."""
    with tempfile.TemporaryDirectory(prefix="fastrl-bench-") as tmp:
        cfg = load_config(None, [
            *SCENARIOS[scenario], f"env.id={env_id}", f"infra.num_workers={workers}",
            f"infra.envs_per_worker={envs_per_worker}", f"infra.rollout_len={rollout_len}",
            "algo.total_steps=1000000000000", "algo.target_return=null",
            "log.eval_every_steps=1000000000000", "log.checkpoint_every_steps=1000000000000",
            "log.console=false",
            "log.tensorboard=false", f"log.run_dir={tmp}", "algo.num_minibatches=1", *extra,
        ])
        cfg.env.kwargs = dict(env_kwargs)
        sup = Supervisor(cfg, make_run_dir(cfg))
        steps_per_slot = rollout_len * envs_per_worker
        window: list[Snapshot] = []
        roles: dict[str, int | str] = {}
        started_s: list[float] = []
        failure: list[BaseException] = []

        def state() -> tuple[int, dict[str, int]]:
            counters = sup.ring_counters()
            stages = {k: sum(c[k] for c in counters) for k in ("act_ns", "env_ns", "fill_ns")}
            stages["slots"] = sum(c["slots"] for c in counters)
            stages.update({f"relay_{k}": v for k, v in sup.relay_counters().items()})
            return stages["slots"] * steps_per_slot, stages

        run_over = threading.Event()

        def started() -> bool:
            counters = sup.ring_counters()
            return bool(counters) and all(c["slots"] for c in counters)

        def measure() -> None:
            # Waits are on run_over, so that a run that ends early (a signal, a crash) ends
            # the measurement too instead of leaving this thread sleeping.
            try:
                t0 = time.monotonic()
                deadline = t0 + START_TIMEOUT_S
                while not started():
                    if run_over.wait(0.01):
                        return
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"fastrl workers did not start within "
                                           f"{START_TIMEOUT_S:.0f} s")
                started_s.append(time.monotonic() - t0)
                if run_over.wait(warmup_s):
                    return
                window.append(snapshot(*state()))
                if run_over.wait(duration_s):
                    return
                window.append(snapshot(*state()))
                roles.update(sup.process_ids())
            except BaseException as e:  # re-raised in the caller's thread
                failure.append(e)
            finally:
                sup.stop()

        thread = threading.Thread(target=measure, daemon=True)
        thread.start()
        try:
            result = sup.run()
        finally:
            run_over.set()
            thread.join(10)
        if failure:
            raise failure[0]
        if result.stopped_by_signal:
            raise KeyboardInterrupt
        if len(window) != 2:
            raise RuntimeError("the fastrl run ended before its measurement window did")
    name = f"fastrl {scenario}" + (f" [{env_id}]" if label_env else "") + \
        (f" ({cfg.env.backend} backend)" if cfg.env.backend != "gymnasium" else "")
    result = summarize(name, scenario, workers, workers * envs_per_worker, *window)
    result.costs = {**window_costs(*window, roles), "start_s": started_s[0]}
    return result


def window_costs(start: Snapshot, end: Snapshot, roles: dict[str, int | str]
                 ) -> dict[str, float]:
    """Where a window's time and CPU went: ``cores_<role>`` (CPU seconds per wall second of
    the supervisor, the learner, the workers (processes or Ray actors) and everything else
    this process started), ``rollout_ms`` (a worker's time to fill a slot), ``write_ns``
    (a worker's time per transition writing the slot: filling it, less choosing actions
    and stepping envs) and, under Ray,
    ``relay_get_ms`` / ``relay_copy_ms`` (the relay's time per slot to fetch a slot from the
    object store and to copy it into a ring)."""
    role_of = {pid: name.split()[0] + ("s" if name.startswith("worker") else "")
               for name, pid in roles.items()}
    role_of[os.getpid()] = "supervisor"
    wall = end.t - start.t
    cores = dict.fromkeys(ROLES, 0.0)
    for pid, cpu in end.cpu.items():
        if pid in start.cpu:
            role = role_of.get(pid, "other")
            cores[role if role in cores else "other"] += (cpu - start.cpu[pid]) / wall
    slots = max(end.stages["slots"] - start.stages["slots"], 1)
    costs = {f"cores_{role}": v for role, v in cores.items()}
    costs["rollout_ms"] = (end.stages["fill_ns"] - start.stages["fill_ns"]) / slots / 1e6
    fill, act, env = (end.stages[k] - start.stages[k] for k in ("fill_ns", "act_ns", "env_ns"))
    costs["write_ns"] = (fill - act - env) / max(end.steps - start.steps, 1)
    for k in ("get", "copy"):
        if f"relay_{k}" in end.stages:
            relayed = max(end.stages["relay_slots"] - start.stages["relay_slots"], 1)
            costs[f"relay_{k}_ms"] = (end.stages[f"relay_{k}"] - start.stages[f"relay_{k}"]) \
                / relayed / 1e6
    return costs
