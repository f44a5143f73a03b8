"""fastrl's own scenarios, run through the real supervisor, workers and rings."""

from __future__ import annotations

import tempfile
import threading
import time

from fastrl.bench.measure import Result, Snapshot, snapshot, summarize
from fastrl.config import load_config
from fastrl.supervisor import Supervisor
from fastrl.trainer import make_run_dir

SCENARIOS = {
    # name: overrides that make it
    "collect": ["algo.name=none", "algo.random_actions=true"],
    "collect-policy": ["algo.name=none"],
    "train": ["algo.name=ppo"],
    "train-appo": ["algo.name=appo"],  # the same workers and envs as train: PPO vs APPO
}
START_TIMEOUT_S = 120.0


def run_fastrl(scenario: str, env_id: str, env_kwargs: dict, workers: int,
               envs_per_worker: int, rollout_len: int, warmup_s: float, duration_s: float,
               extra: list[str] = (), label_env: bool = False) -> Result:
    """Measure one fastrl run: start it, wait until every worker has published a slot and
    ``warmup_s`` more, then measure ``duration_s`` and stop it."""
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
        failure: list[BaseException] = []

        def state() -> tuple[int, dict[str, int]]:
            counters = sup.ring_counters()
            stages = {k: sum(c[k] for c in counters) for k in ("act_ns", "env_ns", "fill_ns")}
            return sum(c["slots"] for c in counters) * steps_per_slot, stages

        run_over = threading.Event()

        def started() -> bool:
            counters = sup.ring_counters()
            return bool(counters) and all(c["slots"] for c in counters)

        def measure() -> None:
            # Waits are on run_over, so that a run that ends early (a signal, a crash) ends
            # the measurement too instead of leaving this thread sleeping.
            try:
                deadline = time.monotonic() + START_TIMEOUT_S
                while not started():
                    if run_over.wait(0.05):
                        return
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"fastrl workers did not start within "
                                           f"{START_TIMEOUT_S:.0f} s")
                if run_over.wait(warmup_s):
                    return
                window.append(snapshot(*state()))
                if run_over.wait(duration_s):
                    return
                window.append(snapshot(*state()))
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
    name = f"fastrl {scenario}" + (f" [{env_id}]" if label_env else "")
    return summarize(name, scenario, workers, workers * envs_per_worker, *window)
