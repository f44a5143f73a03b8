"""``infra.runtime=ray``: rollout workers as Ray actors, spread over the nodes of a cluster.

The supervisor, the learner, the rings and the weights stay where ``python -m fastrl.train``
runs (the node with the GPU): the learner reads the same rings as with local workers, and
the algorithm code does not know the difference. What changes is who writes the rings: a
relay thread in the supervisor process.

- **Slots.** Each worker is a :class:`~fastrl.runtime.ray_actor.RemoteWorker` actor. The relay
  asks it for one slot at a time (at most ``PIPELINE`` calls queued, each holding a free
  slot of the learner's ring), and copies a slot into the ring and publishes it only once
  its bytes have arrived whole through Ray's object store. An actor that dies mid-call never
  returns its slot, so nothing torn is ever read, just as with a worker process.
- **Weights.** When the learner's weights version moves, the relay copies them out of the
  seqlock, puts them into the object store once, and sends that reference, with the same
  version number, with each worker's next call: a broadcast every node fetches once.
  PPO's rule (slot k waits for the weights of update k - max_policy_lag) is applied before a
  call is made, so a remote worker never waits. With self-play, the relay draws each slot's
  opponent as the worker will (fastrl.selfplay.actor.opponent_key) and sends that pool
  snapshot along with the call, once per actor while it keeps it.
- **Supervision.** Each actor has a process-like handle (:class:`ActorHandle`), so the
  supervisor restarts dead and hung actors, counts restarts and gives up exactly as it does
  for worker processes. Heartbeats are per call: a call in flight longer than
  ``infra.worker_timeout_s`` is a hung worker.
- **Placement.** The actors take one CPU each in a placement group with the SPREAD strategy:
  Ray places them over as many nodes as have room.

Without ``infra.ray_address``, a local Ray is started for the run and shut down with it.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import deque
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from fastrl.checkpoint import describe_latest, parked_path
from fastrl.core.files import DiskFull, write_atomically
from fastrl.core.forkserver import STOP_SIGNALS
from fastrl.core.process import write_crash
from fastrl.memory.control import RunControl
from fastrl.memory.ring import HEARTBEAT_NS, INCARNATION, READ_SEQ, VERSION_SEEN, WAIT_NS, Ring
from fastrl.memory.wait import Stopped
from fastrl.memory.weights import SharedWeights
from fastrl.plan import RunPlan
from fastrl.rollout.worker import EXIT_BROKEN_ENV, weights_needed
from fastrl.runtime.base import RunState
from fastrl.runtime.faults import ChildFailed
from fastrl.runtime.local import LocalRuntime
from fastrl.runtime.ray_actor import COUNTERS, RemoteWorker, WorkerCrash
from fastrl.selfplay.actor import opponent_key
from fastrl.telemetry.metrics import MetricsLogger

PIPELINE = 2  # calls queued per actor: the next slot is filled while the last one travels
PLACEMENT_TIMEOUT_S = 120.0  # for the cluster to find a CPU for every worker
JOIN_S = 10.0  # for the relay thread to end (each of its waits is WAIT_S)
WAIT_S = 0.005  # the relay's poll while an actor has no call (for ring room or weights)
BUSY_WAIT_S = 0.05  # its wait while every actor has a call: a result ends it at once
EXIT_DIED = -signal.SIGKILL  # an actor whose process or node went away


class RayUnavailable(RuntimeError):
    """Ray is not installed, cannot be reached, or cannot place the workers."""


def import_ray():
    """The ``ray`` module, or :class:`RayUnavailable` saying how to install it."""
    try:
        import ray
    except ImportError:
        raise RayUnavailable("infra.runtime=ray needs Ray, an optional extra: pip install -c "
                             "constraints.txt -e '.[ray]'") from None
    return ray


@dataclass
class ActorHandle:
    """A worker actor seen as a process by the supervisor: ``exitcode`` stays None while it
    runs; 0 after it finished at the end of the run; 1 (or EXIT_BROKEN_ENV) after it failed,
    its report in the run's errors folder; minus a signal number after it was ended or died.
    """

    worker_id: int
    actor: Any
    ray: Any
    lock: threading.RLock  # the relay's: it reads results while the supervisor ends actors
    pid: int | str = "?"  # the actor's pid, once it has started
    node: str = "?"
    exitcode: int | None = None
    started: bool = False
    calls: deque = field(default_factory=deque)  # (ref, kind) in call order
    key_sent: int = -1  # of the weights it acts with (fastrl.memory.weights)
    pool_held: dict = field(default_factory=dict)  # self-play: its pool's bank -> key
    idle_since_ns: int | None = None

    def is_alive(self) -> bool:
        """True until the actor finished, failed or was ended."""
        return self.exitcode is None

    def end(self, exitcode: int) -> None:
        """Kill the actor (if it still runs) and drop its calls: no later result is read."""
        with self.lock:
            if self.exitcode is None:
                self.exitcode = exitcode
                self.ray.kill(self.actor, no_restart=True)
            self.calls.clear()

    def terminate(self) -> None:
        """End the actor now (a Ray actor has no graceful SIGTERM; its envs die with it)."""
        self.end(-signal.SIGTERM)

    def kill(self) -> None:
        """End the actor now."""
        self.end(-signal.SIGKILL)

    def join(self, timeout: float | None = None) -> None:
        """Nothing to wait for: an ended handle reads no more results."""


class RayWorkers:
    """The Ray side of a run: the connection, the placement group, the worker actors and the
    relay thread that moves their slots into ``rings`` and the learner's weights to them."""

    def __init__(self, plan: RunPlan, run_dir: Path, rings: list[Ring],
                 weights: SharedWeights, control: RunControl,
                 stopping: Callable[[], bool], pool: SharedWeights | None = None) -> None:
        self.ray = ray = import_ray()
        self.plan, self.run_dir, self.rings, self.weights = plan, Path(run_dir), rings, weights
        self.pool = pool  # self-play's snapshots (fastrl.selfplay)
        self._snapshots: dict[int, tuple[int, Any]] = {}  # key -> (version, ref), the pool's
        self.control = control
        self.handles: dict[int, ActorHandle] = {}
        self._started: list[ActorHandle] = []  # started since the last take_started()
        self._lock = threading.RLock()  # handles and rings: the relay vs the supervisor
        self._closing = threading.Event()
        self._params = np.empty(plan.num_params, np.float32)
        self._weights_ref: tuple[int, Any] = (-1, None)  # the newest: (version, ref)
        self._keyed: dict[int, tuple[int, Any]] = {}  # deterministic: key -> (version, ref)
        self.relay_ns = {"get": 0, "copy": 0, "slots": 0}  # (the bench's cost breakdown)
        self.failure: BaseException | None = None  # what ended the relay thread, if anything
        self._connected = self._connect()
        self._group = None
        try:
            self._group = self._place(stopping)
            self._plan_ref = ray.put(plan)
            self._actor_cls = ray.remote(max_restarts=0, max_task_retries=0)(RemoteWorker)
        except BaseException:
            self.close()
            raise
        self._thread = threading.Thread(target=self._relay, name="fastrl ray relay",
                                        daemon=True)
        self._thread.start()

    # --- cluster ---------------------------------------------------------------------------
    def _connect(self) -> bool:
        """Join ``infra.ray_address`` or start a local Ray; False when the calling program
        had already connected (then it stays connected after the run)."""
        ray, infra = self.ray, self.plan.cfg.infra
        if ray.is_initialized():
            return False
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no calls home
        # A terminal's Ctrl-C, or a service manager's SIGTERM, reaches the whole process
        # group, the Ray daemons started here too: they start with both blocked, so the stop
        # stays graceful (see Supervisor). (Their shutdown then takes Ray's SIGKILL grace,
        # a few seconds, instead of one.)
        old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        old_term = signal.getsignal(signal.SIGTERM)
        # Ray runs its workers at nice 15 unless told otherwise: ours would lose the CPU to
        # every other process of the run (read by the raylet this starts).
        users_niceness = os.environ.get("RAY_worker_niceness")
        os.environ["RAY_worker_niceness"] = users_niceness or "0"
        try:
            if infra.ray_address is None:
                ray.init(num_cpus=max(infra.num_workers, os.cpu_count() or 1),
                         include_dashboard=False, log_to_driver=True)
            else:
                ray.init(address=infra.ray_address, log_to_driver=True)
        except Exception as e:
            ray.shutdown()  # (a local start can fail after some daemons began)
            where = infra.ray_address or "a local Ray"
            raise RayUnavailable(f"infra.runtime=ray could not start or join {where}: {e}") \
                from None
        finally:
            if users_niceness is None:
                del os.environ["RAY_worker_niceness"]
            signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
            if threading.current_thread() is threading.main_thread() and old_term is not None:
                signal.signal(signal.SIGTERM, old_term)  # ray.init installs its own
        return True

    def _place(self, stopping: Callable[[], bool]):
        """A placement group of one CPU per worker, spread over the nodes; raises
        :class:`RayUnavailable` when the cluster cannot hold it or ``stopping()`` turns true
        first."""
        ray, n = self.ray, self.plan.cfg.infra.num_workers
        from ray.util.placement_group import placement_group

        cpus = ray.cluster_resources().get("CPU", 0)
        if cpus < n:
            raise RayUnavailable(f"infra.num_workers={n} needs {n} CPUs of the Ray cluster "
                                 f"(one per worker actor); it has {cpus:g}: add nodes or "
                                 "lower infra.num_workers")
        group = placement_group([{"CPU": 1}] * n, strategy="SPREAD")
        deadline, ready = time.monotonic() + PLACEMENT_TIMEOUT_S, [group.ready()]
        while not ray.wait(ready, timeout=0.2)[0]:
            if not stopping() and time.monotonic() < deadline:
                continue
            ray.util.remove_placement_group(group)
            if stopping():
                raise RayUnavailable("stopped while the Ray cluster placed the workers")
            raise RayUnavailable(
                f"the Ray cluster could not place infra.num_workers={n} workers of one CPU "
                f"each within {PLACEMENT_TIMEOUT_S:.0f} s: of its {cpus:g} CPUs, "
                f"{ray.available_resources().get('CPU', 0):g} are free (other jobs hold the "
                "rest)")
        return group

    def take_started(self) -> list[ActorHandle]:
        """The actors that have started (built their envs) since the last call."""
        with self._lock:
            started, self._started = self._started, []
        return started

    # --- workers (the supervisor's calls) --------------------------------------------------
    def start_worker(self, i: int, incarnation: int, parked: str | None) -> ActorHandle:
        """Start worker ``i``'s actor in its bundle; it continues from the parked state file
        ``parked`` when given. Returns its handle at once (it starts in the background)."""
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        strategy = PlacementGroupSchedulingStrategy(self._group,
                                                    placement_group_bundle_index=i)
        actor = self._actor_cls.options(num_cpus=1, scheduling_strategy=strategy).remote(
            self._plan_ref, i, incarnation)
        blob = Path(parked).read_bytes() if parked else None
        ring = self.rings[i]
        with self._lock:
            handle = self.handles[i] = ActorHandle(i, actor, self.ray, self._lock)
            counters = {counter: ring.get(counter) for counter in COUNTERS}
            handle.calls.append((actor.start.remote(ring.write_seq, counters, blob), "start"))
        return handle

    def close(self) -> None:
        """Stop the relay, end every actor, release the placement group and disconnect (a
        local Ray started for the run shuts down). Safe to call more than once."""
        self._closing.set()
        thread = getattr(self, "_thread", None)
        if thread is not None:
            thread.join(JOIN_S)
        ray = self.ray
        try:
            with self._lock:
                for handle in self.handles.values():
                    handle.end(-signal.SIGKILL)
            if self._group is not None:
                group, self._group = self._group, None
                ray.util.remove_placement_group(group)
        finally:  # (a cluster whose head is gone fails the calls above: disconnect anyway)
            if self._connected:
                self._connected = False
                ray.shutdown()

    # --- the relay thread ------------------------------------------------------------------
    def _relay(self) -> None:
        try:
            while not self._closing.is_set():
                try:
                    self._refresh_weights()  # (outside the lock: it may wait for the learner)
                except Stopped:
                    pass  # the run is over: the calls below only finish the actors
                with self._lock:
                    for handle in self.handles.values():
                        self._call(handle)
                    refs = [h.calls[0][0] for h in self.handles.values() if h.calls]
                    idle = any(h.started and h.is_alive() and not h.calls
                               for h in self.handles.values())
                if not refs:
                    self._closing.wait(WAIT_S)
                    continue
                ready, _ = self.ray.wait(refs, num_returns=1,
                                         timeout=WAIT_S if idle else BUSY_WAIT_S)
                with self._lock:
                    for ref in ready:
                        self._take(ref)
        except BaseException as e:  # the supervisor stops the run with it (ChildFailed)
            self.failure = e

    def _refresh_weights(self) -> None:
        """Put the learner's newest weights into the object store, once per version and
        only when some actor has yet to get them."""
        def stop() -> bool:  # (a learner that died mid-write leaves the seqlock odd)
            return self._closing.is_set() or self.control.run_over()

        if self.plan.schedule:
            return  # (each slot's own weights: _weights_for)
        version = self.weights.version(stop)
        behind = any(h.started and h.is_alive() and h.key_sent < version
                     for h in list(self.handles.values()))
        if version > self._weights_ref[0] and behind:
            version = self.weights.read_into(self._params, stop)
            self._weights_ref = (version, self.ray.put(self._params))

    def _weights_for(self, worker: int, seq: int) -> tuple[int, int, Any] | None:
        """``(key, version, object ref)`` of the weights worker ``worker``'s slot ``seq`` is
        collected with, or None while they are not published: deterministic, its key's
        (put into the object store once, the last ``banks`` kept); else the newest, from
        the version the slot needs."""
        schedule = self.plan.schedule
        if schedule is None:
            version, ref = self._weights_ref
            return (version, version, ref) if version >= weights_needed(self.plan, seq) \
                else None
        key = schedule.weights_key(worker, seq)
        if key not in self._keyed:
            if not self.weights.has(key):
                return None
            version = self.weights.read_key(key, self._params, self.control.run_over)
            self._keyed[key] = (version, self.ray.put(self._params))
            for old in sorted(self._keyed)[:-schedule.banks]:
                del self._keyed[old]
        return (key, *self._keyed[key])

    def _call(self, handle: ActorHandle) -> None:
        """Queue fill calls while the ring has room and the weights allow; at the end of the
        run, once nothing is in flight, ask the actor to finish."""
        if not handle.is_alive() or not handle.started:
            return
        ring, now = self.rings[handle.worker_id], time.monotonic_ns()
        if self.control.run_over():
            if not handle.calls:
                self._end_wait(handle, ring, now)
                handle.calls.append((handle.actor.finish.remote(), "finish"))
            return
        while len(handle.calls) < PIPELINE:
            seq = ring.write_seq + len(handle.calls)
            if seq - ring.get(READ_SEQ) >= ring.slots:
                break
            weights = self._weights_for(handle.worker_id, seq)
            if weights is None:
                break
            key, version, ref = weights
            opponent = self._opponent_for(handle, seq, version)
            if opponent is False:
                break
            send = key != handle.key_sent
            # (Ray resolves object refs passed as arguments themselves, not inside a tuple)
            handle.calls.append((handle.actor.fill.remote(version, key, ref if send else None,
                                                          *(opponent or ())), "fill"))
            if send:
                handle.key_sent = key
                ring.set(VERSION_SEEN, version)
        if handle.calls:
            if handle.idle_since_ns is not None:  # a call's time starts now, not at a beat
                self._end_wait(handle, ring, now)
                ring.set(HEARTBEAT_NS, now)
        else:
            if handle.idle_since_ns is None:
                handle.idle_since_ns = now
            ring.set(HEARTBEAT_NS, now)  # waiting for the learner is not hanging

    def _opponent_for(self, handle: ActorHandle, seq: int, version: int):
        """Self-play: ``(key, version, ref)`` of the pool snapshot slot ``seq`` of
        ``handle``'s worker (collected with weights ``version``) plays against, where the
        actor does not hold it yet; None when it needs none; False while the learner has
        yet to write it."""
        if self.pool is None:
            return None
        cfg = self.plan.cfg
        key = opponent_key(cfg.selfplay, cfg.seed, handle.worker_id, seq, version)
        bank = None if key is None else key % self.pool.banks
        if key is None or handle.pool_held.get(bank) == key:
            return None
        if key not in self._snapshots:
            if not self.pool.has(key):
                return False
            snapshot = np.empty(self.plan.num_params, np.float32)
            held = self.pool.read_key(key, snapshot, self.control.run_over)
            self._snapshots[key] = (held, self.ray.put(snapshot))
            for old in sorted(self._snapshots)[:-self.pool.banks]:
                del self._snapshots[old]
        handle.pool_held[bank] = key
        return (key, *self._snapshots[key])

    @staticmethod
    def _end_wait(handle: ActorHandle, ring: Ring, now: int) -> None:
        """Count the time the actor waited for ring room or weights (the workers'
        ``waiting`` stage), up to ``now``."""
        if handle.idle_since_ns is not None:
            ring.set(WAIT_NS, ring.get(WAIT_NS) + now - handle.idle_since_ns)
            handle.idle_since_ns = None

    def _take(self, ref) -> None:
        """Handle the result of the call ``ref`` (the oldest of its actor)."""
        handle = next((h for h in self.handles.values() if h.calls and h.calls[0][0] == ref),
                      None)
        if handle is None:  # its actor was ended meanwhile
            return
        _, kind = handle.calls.popleft()
        ray, ring = self.ray, self.rings[handle.worker_id]
        t0 = time.monotonic_ns()
        try:
            result = ray.get(ref)
        except ray.exceptions.RayTaskError as e:
            crash = e.cause if isinstance(e.cause, WorkerCrash) else None
            if crash is None:
                self._fail(handle, 1, str(e))
            else:
                self._fail(handle, EXIT_BROKEN_ENV if crash.broken_env else 1, crash.report)
            return
        except ray.exceptions.RayError as e:  # the actor's process or node went away
            # Ray's explanation first: the event line shows the report's last line.
            self._fail(handle, EXIT_DIED, f"{e}\nworker {handle.worker_id} (Ray actor pid "
                       f"{handle.pid} on {handle.node}) died: its process ended or its node "
                       "went away")
            return
        t1 = time.monotonic_ns()
        if kind == "start":
            handle.pid, handle.node = result
            handle.started = True
            self._started.append(handle)
        elif kind == "fill":
            data, counters = result
            np.copyto(ring.write_bytes(), data)
            ring.publish()  # the slot is whole: only now may the learner see it
            for counter, value in counters.items():
                ring.set(counter, value)
            self.relay_ns["get"] += t1 - t0
            self.relay_ns["copy"] += time.monotonic_ns() - t1
            self.relay_ns["slots"] += 1
        else:  # finish
            if result is not None:
                try:
                    write_atomically(parked_path(self.run_dir, handle.worker_id,
                                                 ring.write_seq), result)
                except DiskFull:
                    pass  # (as a local worker's park: the run ends on it, told once)
                except OSError as e:
                    self._fail(handle, 1, f"worker {handle.worker_id}'s parked state could "
                               f"not be written: {e}")
                    return
            handle.end(0)
        ring.set(HEARTBEAT_NS, time.monotonic_ns())

    def _fail(self, handle: ActorHandle, exitcode: int, report: str) -> None:
        """Record a failed actor for the supervisor: its report, then its exit code."""
        if handle.is_alive():
            with suppress(OSError):  # (a full disk: the exit code tells it)
                write_crash(self.run_dir, f"worker {handle.worker_id}", report)
        handle.end(exitcode)


class RayRuntime(LocalRuntime):
    """``infra.runtime=ray``: the learner in a process of its own as ``local``, the workers
    as Ray actors (:class:`RayWorkers`), supervised through the same process interface."""

    def __init__(self) -> None:
        super().__init__()
        self.workers: RayWorkers | None = None

    def execute(self, run: RunState) -> None:
        """Connect to Ray and place the workers, then run as ``local``."""
        self.workers = RayWorkers(run.plan, run.run_dir, run.memory.rings, run.memory.weights,
                                  run.memory.control, run.stop.requested, run.memory.pool)
        super().execute(run)

    def start_worker(self, run: RunState, i: int, parked: str | None = None) -> None:
        """Start worker ``i``'s actor (in the background: it reports when it has started)."""
        handle = self.workers.start_worker(i, run.memory.rings[i].get_own(INCARNATION), parked)
        run.children.track(f"worker {i}", handle)

    def check_children(self, run: RunState) -> None:
        """As ``local``, after the relay thread's health, once the actors that started are
        logged."""
        if self.workers.failure is not None:
            raise ChildFailed(f"the Ray relay thread failed: {self.workers.failure!r}\n"
                              f"{describe_latest(run.run_dir)}")
        for actor in self.workers.take_started():
            run.events.logger.event(run.events.now(), f"worker {actor.worker_id} started on "
                                    f"{actor.node} (Ray actor pid {actor.pid})")
        super().check_children(run)

    def close(self, logger: MetricsLogger, step: int) -> None:
        """End the actors and the relay (its relay writes the rings: before the unlink), and
        disconnect; a failure is logged, never raised."""
        if self.workers is not None:
            workers, self.workers = self.workers, None
            try:
                workers.close()
            except Exception as e:
                logger.event(step, f"closing the Ray runtime failed: {e!r}")
        super().close(logger, step)

    def relay_counters(self) -> dict[str, int]:
        """Slots relayed so far and the ns the relay spent getting them from the object
        store and copying them into the rings."""
        return dict(self.workers.relay_ns) if self.workers is not None else {}
