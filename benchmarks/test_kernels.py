"""Micro-benchmarks of the hot kernels: slot write, slot read, seqlock weight copy, GAE,
a worker's slot bookkeeping, zero-copy env steps into a slot, and its action choice.

Run: ``python -m pytest benchmarks/ --benchmark-columns=median,iqr,rounds``. Each group has
a plain-numpy baseline of the same work, run in the same process: read the ratios.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium import spaces

from fastrl.algos.ppo import compute_gae
from fastrl.envs import BatchedCartPole
from fastrl.envs.batched import copy_step
from fastrl.memory.layout import trajectory_layout
from fastrl.memory.ring import Ring
from fastrl.memory.weights import SharedWeights
from fastrl.models.actors import policy_actor
from fastrl.models.numpy_actor import numpy_actor
from fastrl.models.policy import ActorCritic
from fastrl.rollout.collector import finish_slot, slot_rows

OBS, ACT, T, E = spaces.Box(-1, 1, (4,), np.float32), spaces.Discrete(2), 64, 16


@pytest.fixture
def ring_pair():
    layout = trajectory_layout(OBS, ACT, T, E)
    buf = memoryview(bytearray(Ring.nbytes(layout, 4)))
    src = {f.name: np.ones(f.shape, f.dtype) for f in layout.fields}
    prod, cons = Ring(buf, layout, 4), Ring(buf, layout, 4)
    prod.publish(), cons.release()  # compile the numba kernels before measuring
    return prod, cons, src


@pytest.mark.benchmark(group="slot write")
def test_slot_write(benchmark, ring_pair):
    prod, cons, src = ring_pair

    def write():
        slot = prod.write_slot()
        for name, arr in src.items():
            slot[name][...] = arr
        prod.publish()
        cons.release()

    benchmark(write)


@pytest.mark.benchmark(group="slot write")
def test_slot_write_baseline_numpy(benchmark, ring_pair):
    _, _, src = ring_pair
    dst = {k: np.empty_like(v) for k, v in src.items()}
    benchmark(lambda: [np.copyto(dst[k], v) for k, v in src.items()])


@pytest.mark.benchmark(group="slot read")
def test_slot_read(benchmark, ring_pair):
    prod, cons, _ = ring_pair

    def read():
        prod.publish()
        out = {k: v.copy() for k, v in cons.read_slot().items()}
        cons.release()
        return out

    benchmark(read)


@pytest.mark.benchmark(group="slot read")
def test_slot_read_baseline_numpy(benchmark, ring_pair):
    _, _, src = ring_pair
    benchmark(lambda: {k: v.copy() for k, v in src.items()})


N_PARAMS = 1_000_000


@pytest.mark.benchmark(group="weights copy")
def test_seqlock_weight_copy(benchmark):
    w = SharedWeights(memoryview(bytearray(SharedWeights.nbytes(N_PARAMS))), N_PARAMS)
    w.write(np.ones(N_PARAMS, np.float32), 1)
    out = np.empty(N_PARAMS, np.float32)
    benchmark(w.read_into, out)


@pytest.mark.benchmark(group="weights copy")
def test_weight_copy_baseline_numpy(benchmark):
    src, out = np.ones(N_PARAMS, np.float32), np.empty(N_PARAMS, np.float32)
    benchmark(np.copyto, out, src)


@pytest.mark.benchmark(group="gae")
def test_gae_kernel(benchmark):
    g = torch.Generator().manual_seed(0)
    r, v, nv = (torch.rand(128, 64, generator=g) for _ in range(3))
    term, trunc = torch.rand(128, 64, generator=g) < 0.01, torch.rand(128, 64, generator=g) < 0.01
    benchmark(compute_gae, r, v, nv, term, trunc, 0.99, 0.95)


# --- a worker's slot: 64 steps of 64 envs, as python -m fastrl.bench runs fastrl/CartPole-v1
SLOT_T, SLOT_E = 64, 64


def rows_of(slot: dict[str, np.ndarray]):
    """The rows a simulator writes into ``slot``, final observations into rows of their own
    (as the collector hands them over)."""
    return slot_rows(slot, np.zeros_like(slot["obs"]))


@pytest.fixture
def cartpole_slot():
    """A slot of fastrl/CartPole-v1 transitions, its simulator and a slot of actions."""
    sim = BatchedCartPole(list(range(SLOT_E)))
    layout = trajectory_layout(sim.observation_space, sim.action_space, SLOT_T, SLOT_E)
    slot = layout.views(memoryview(bytearray(layout.nbytes)), 0)
    slot["obs"][0] = sim.reset()
    actions = np.random.default_rng(0).integers(2, size=(SLOT_T, SLOT_E))
    sim.rollout_into(actions, rows_of(slot))  # compiles the kernels; episodes end in it
    return sim, slot, actions


@pytest.mark.benchmark(group="slot bookkeeping")
def test_finish_slot_kernel(benchmark, cartpole_slot):
    _, slot, _ = cartpole_slot
    carry = np.zeros(SLOT_E), np.zeros(SLOT_E, np.int32), np.zeros(SLOT_E, np.int64)
    env_ids = np.arange(SLOT_E, dtype=np.int32)
    # (weight None: every row live, as a single-agent env's slot; the collector's call)
    benchmark(finish_slot, slot["reward"], slot["terminated"], slot["truncated"], None, *carry,
              env_ids, SLOT_E, 0, False, slot["episode_return"], slot["episode_length"],
              slot["episode_id"], slot["env_id"], slot["global_step"])


@pytest.mark.benchmark(group="slot bookkeeping")
def test_finish_slot_baseline_numpy(benchmark, cartpole_slot):
    """The same columns by whole-row numpy stores, one time step at a time (how workers
    wrote them before the kernel)."""
    _, slot, _ = cartpole_slot
    ep_return, ep_length, episodes = np.zeros(SLOT_E), np.zeros(SLOT_E, np.int32), \
        np.zeros(SLOT_E, np.int64)
    env_ids = np.arange(SLOT_E, dtype=np.int32)
    alive = np.zeros(SLOT_E, bool)

    def bookkeeping():
        for t in range(SLOT_T):
            ep_return[:] += slot["reward"][t]
            ep_length[:] += 1
            slot["episode_return"][t] = ep_return
            slot["episode_length"][t] = ep_length
            np.logical_not(slot["terminated"][t] | slot["truncated"][t], out=alive)
            ep_return[:] *= alive
            ep_length[:] *= alive
        done = slot["terminated"] | slot["truncated"]
        before = episodes + np.cumsum(done, axis=0) - done
        slot["episode_id"][:] = before * SLOT_E + env_ids
        episodes[:] += done.sum(axis=0)
        slot["env_id"][:] = env_ids
        steps = np.arange(SLOT_T)[:, None]
        slot["global_step"][:] = steps * SLOT_E + env_ids

    benchmark(bookkeeping)


@pytest.mark.benchmark(group="env step into a slot")
def test_step_into_slot_rows(benchmark, cartpole_slot):
    sim, slot, actions = cartpole_slot
    rows = rows_of(slot).step(3)
    benchmark(sim.step_into, actions[3], rows)


@pytest.mark.benchmark(group="env step into a slot")
def test_step_then_copy_baseline_numpy(benchmark, cartpole_slot):
    sim, slot, actions = cartpole_slot
    rows = rows_of(slot).step(3)
    benchmark(lambda: copy_step(sim.step(actions[3]), rows))


@pytest.mark.benchmark(group="whole slot")
def test_rollout_into_slot(benchmark, cartpole_slot):
    sim, slot, actions = cartpole_slot
    benchmark(sim.rollout_into, actions, rows_of(slot))


@pytest.mark.benchmark(group="whole slot")
def test_rollout_step_then_copy_baseline_numpy(benchmark, cartpole_slot):
    sim, slot, actions = cartpole_slot
    rows = rows_of(slot)
    benchmark(lambda: [copy_step(sim.step(actions[t]), rows.step(t)) for t in range(SLOT_T)])


# --- a worker's action choice: the default PPO policy over 64 CartPole observations
@pytest.fixture
def default_policy():
    torch.set_num_threads(1)  # as in a worker
    policy = ActorCritic(OBS, ACT, [64, 64])
    obs = np.random.default_rng(0).normal(size=(SLOT_E, 4)).astype(np.float32)
    return policy, obs


@pytest.mark.benchmark(group="inference")
def test_numpy_actor(benchmark, default_policy):
    policy, obs = default_policy
    benchmark(numpy_actor(policy), obs)


@pytest.mark.benchmark(group="inference")
def test_torch_actor(benchmark, default_policy):
    policy, obs = default_policy
    benchmark(policy_actor(policy), obs)


@pytest.mark.benchmark(group="inference")
def test_inference_baseline_numpy_matmuls(benchmark, default_policy):
    """The floor: the two MLPs' matmuls, biases and tanh alone, no sampling."""
    policy, obs = default_policy
    layers = [[(m.weight.detach().numpy().T, m.bias.detach().numpy())
               for m in net if isinstance(m, torch.nn.Linear)]
              for net in (policy.actor, policy.critic)]

    def forward():
        for net in layers:
            x = obs
            for i, (w, b) in enumerate(net):
                x = x @ w + b
                if i < len(net) - 1:
                    x = np.tanh(x)

    benchmark(forward)
