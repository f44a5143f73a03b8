"""Recurrent policies (fastrl.models.recurrent): what a worker acts with is what the learner
replays (the slot's stored first-step state, zeroed where an episode starts), the workers'
states survive a stop and resume bit for bit, PPO minibatches whole sequences, and the
config refuses a core where it cannot apply."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import scripted_envs  # noqa: F401 - registers Count-v0
import torch
from gymnasium import spaces

from fastrl.algos.a2c import A2C
from fastrl.algos.appo import APPO
from fastrl.algos.ppo import PPO
from fastrl.config import AlgoConfig, ConfigError, load_config
from fastrl.envs.source import EnvGroup, EnvSource
from fastrl.memory.layout import trajectory_layout
from fastrl.models.actors import RecurrentActor, policy_actor
from fastrl.models.families import build_actor_critic
from fastrl.models.policy import ActorCritic
from fastrl.models.recurrent import (
    RecurrentActorCritic,
    episode_starts,
    is_recurrent,
    state_size,
)
from fastrl.plan import plan_run
from fastrl.rollout.collector import Collector

BOX = spaces.Box(-1, 1, (3,), np.float32)
COUNT = spaces.Box(-1e9, 1e9, (1,), np.float32)  # Count-v0's observations


THREE = spaces.Discrete(3)


def recurrent(core: str, obs_space=BOX, act_space=THREE,
              shared: bool = True) -> RecurrentActorCritic:
    policy = build_actor_critic(obs_space, act_space, AlgoConfig(
        hidden_sizes=[8], core=core, core_size=6, shared_core=shared))
    assert isinstance(policy, RecurrentActorCritic)
    return policy


def collector(policy, rollout_len: int, num_envs: int = 2):
    envs = EnvGroup(EnvSource("scripted_envs:Count-v0", {"terminate_at": 3}),
                    list(range(num_envs)))
    layout = trajectory_layout(envs.observation_space, envs.action_space, rollout_len,
                               num_envs, core_state_size=policy.state_size)
    return Collector(envs, policy_actor(policy), 0, num_envs), layout


def fill(coll: Collector, layout, seq: int) -> dict[str, np.ndarray]:
    slot = layout.views(memoryview(bytearray(layout.nbytes)), 0)
    torch.manual_seed(seq)  # the actions sampled: the same in a resumed collector
    coll.fill(slot, seq, 0)
    return {k: v.copy() for k, v in slot.items()}


def assert_replayed(policy: RecurrentActorCritic, slot: dict[str, np.ndarray]) -> torch.Tensor:
    """The learner's replay of ``slot`` from its stored states gives the log-probs and
    values the worker stored; returns where it reset the states (episode starts)."""
    batch = {k: torch.from_numpy(v) for k, v in slot.items()}
    first = episode_starts(batch["terminated"], batch["truncated"])
    with torch.no_grad():
        log_prob, _, value = policy.evaluate_sequences(batch["obs"], batch["action"], first,
                                                       batch["core_state"])
    torch.testing.assert_close(log_prob, batch["log_prob"], atol=1e-5, rtol=0)
    torch.testing.assert_close(value, batch["value"], atol=1e-5, rtol=0)
    return first


CORE_KINDS = [("lstm", True), ("gru", True), ("lstm", False), ("gru", False)]
CORE_IDS = ["lstm", "gru", "lstm-critic-own", "gru-critic-own"]


@pytest.mark.parametrize("core, shared", CORE_KINDS, ids=CORE_IDS)
def test_the_learner_replays_what_the_worker_did(core, shared):
    # Episodes of 3 steps in slots of 6: one ends at each slot's last step, so the next
    # slot's stored state must be zeros, and one ends mid-slot, where the replay resets.
    torch.manual_seed(0)
    policy = recurrent(core, COUNT, spaces.Discrete(2), shared)
    coll, layout = collector(policy, rollout_len=6)
    assert isinstance(coll.act, RecurrentActor)
    first_slot = fill(coll, layout, 0)
    second = fill(coll, layout, 1)
    assert not first_slot["core_state"].any()  # every env starts an episode
    assert not second["core_state"].any()  # episodes ended at the first slot's last step
    third = fill(coll, layout, 2)  # (Count-v0's episodes restart: the same 3 steps)
    for slot in (first_slot, second, third):
        first = assert_replayed(policy, slot)
        assert first[3].all() and not first[[0, 1, 2, 4, 5]].any()


@pytest.mark.parametrize("core, shared", CORE_KINDS, ids=CORE_IDS)
def test_the_sequence_kernel_replays_as_the_cell_does_step_by_step(core, shared):
    torch.manual_seed(0)
    policy = recurrent(core, shared=shared)
    obs, state = torch.randn(9, 5, 3), torch.randn(5, policy.state_size)
    first = torch.rand(9, 5) < 0.3  # (a reset at step 0 zeroes the stored state too)
    first[:, 0] = False  # one piece as long as the slot
    first[1:, 1] = True  # pieces of one step
    first[0, 2] = True
    params = list(policy.parameters())

    def outputs_and_grads(outputs):
        out = outputs()
        grads = torch.autograd.grad((out * torch.linspace(-1, 1, out.numel()).view_as(out))
                                    .sum(), params, allow_unused=True)
        return out, [g for g in grads if g is not None]

    kernel, kernel_grads = outputs_and_grads(
        lambda: torch.cat(policy.outputs(obs, first, state), -1))
    steps, step_grads = outputs_and_grads(
        lambda: torch.cat(policy._read(policy.unroll(obs, first, state)), -1))
    torch.testing.assert_close(kernel, steps, atol=1e-6, rtol=1e-5)
    assert len(kernel_grads) == len(step_grads) > 0
    for a, b in zip(kernel_grads, step_grads):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("core", ["lstm", "gru"])
def test_a_critic_with_a_core_of_its_own_trains_it_alone(core):
    torch.manual_seed(0)
    policy, shared = recurrent(core, shared=False), recurrent(core)
    assert policy.state_size == 2 * shared.state_size
    obs, first = torch.randn(5, 4, 3), torch.zeros(5, 4, dtype=torch.bool)
    state = torch.randn(4, policy.state_size)
    log_prob, _, value = policy.evaluate_sequences(obs, torch.zeros(5, 4, dtype=torch.long),
                                                   first, state)
    grads = dict(zip(dict(policy.named_parameters()), torch.autograd.grad(
        value.sum(), list(policy.parameters()), allow_unused=True)))
    assert grads["core.weight_hh"] is None and grads["actor.0.weight"] is None
    assert grads["critic_core.weight_hh"].abs().sum() > 0
    # the actor reads the first half of the state, the critic the second
    _, _, value_again = policy.evaluate_sequences(
        obs, torch.zeros(5, 4, dtype=torch.long), first,
        torch.cat([torch.zeros_like(state[:, :shared.state_size]),
                   state[:, shared.state_size:]], -1))
    torch.testing.assert_close(value_again, value)


def test_a_slot_stores_the_state_mid_episode():
    # episodes of 3 steps, slots of 4: the second slot starts one step into an episode
    torch.manual_seed(0)
    policy = recurrent("lstm", COUNT, spaces.Discrete(2))
    coll, layout = collector(policy, rollout_len=4)
    fill(coll, layout, 0)
    carried = coll.act.core.clone()
    slot = fill(coll, layout, 1)
    assert np.abs(slot["core_state"]).min() > 0  # carried over, not reset
    np.testing.assert_array_equal(slot["core_state"], carried.numpy())
    assert_replayed(policy, slot)


def test_a_resumed_collector_continues_the_states_bit_for_bit():
    torch.manual_seed(0)
    policy = recurrent("lstm", COUNT, spaces.Discrete(2))
    straight, layout = collector(policy, rollout_len=4)
    fill(straight, layout, 0)
    parked = pickle.loads(pickle.dumps(straight.state()))  # as a worker parks it
    want = fill(straight, layout, 1)
    resumed, _ = collector(policy, rollout_len=4)
    resumed.restore(parked)
    got = fill(resumed, layout, 1)
    assert want["core_state"].any()
    for name in ("core_state", "obs", "action", "log_prob", "value"):
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)


def test_the_actor_zeroes_the_states_of_ended_episodes_only():
    torch.manual_seed(0)
    actor = RecurrentActor(recurrent("gru"))
    actor(np.ones((3, 3), np.float32))
    assert actor.core.abs().min() > 0
    actor.episodes_ended(np.array([False, True, False]))
    assert not actor.core[1].any() and actor.core[[0, 2]].abs().min() > 0


def batch_of(policy: RecurrentActorCritic, T: int = 8, N: int = 4) -> dict[str, torch.Tensor]:
    """A time-major batch that ``policy`` could have collected, its log-probs and values its
    own (a ratio of 1 to start from)."""
    obs, first = torch.randn(T, N, 3), torch.zeros(T, N, dtype=torch.bool)
    terminated = torch.rand(T, N) < 0.2
    state = torch.randn(N, policy.state_size)
    action = torch.randint(0, 3, (T, N))
    with torch.no_grad():
        log_prob, _, value = policy.evaluate_sequences(
            obs, action, episode_starts(terminated, first), state)
    return {"obs": obs, "action": action, "reward": torch.randn(T, N),
            "terminated": terminated, "truncated": first, "log_prob": log_prob,
            "value": value, "final_obs": torch.zeros(N, 1, 3), "bootstrap_obs": torch.randn(N, 3),
            "core_state": state}


@pytest.mark.parametrize("update", [PPO, APPO, A2C])
def test_updates_train_a_recurrent_policy_on_whole_sequences(update):
    torch.manual_seed(0)
    policy = recurrent("lstm")
    cfg = load_config(None, ["algo.num_minibatches=2", "algo.core=lstm"]).algo
    batch = batch_of(policy)
    before = [p.detach().clone() for p in policy.parameters()]
    stats = update(policy, cfg).update(batch, 1e-3, 0)
    assert all(torch.isfinite(v) for v in stats.values())
    core = dict(policy.named_parameters())["core.weight_hh"]
    assert not torch.equal(core, before[[n for n, _ in policy.named_parameters()]
                                        .index("core.weight_hh")])  # the core learned


def test_ppo_minibatches_are_whole_env_sequences(monkeypatch):
    policy = recurrent("gru")
    batch = batch_of(policy)
    seen = []
    evaluate = policy.evaluate_sequences

    def spy(obs, action, first, state):
        seen.append((obs.shape[:2], state.shape[0]))
        return evaluate(obs, action, first, state)

    monkeypatch.setattr(policy, "evaluate_sequences", spy)
    PPO(policy, AlgoConfig(num_minibatches=2, update_epochs=1)).update(batch, 1e-3, 0)
    assert seen == [((8, 2), 2), ((8, 2), 2)]  # [T, envs] from each env's stored state


@pytest.mark.parametrize("overrides, words", [
    (["algo.name=dqn", "algo.core=lstm"], "algo.core=lstm"),
    (["algo.core=gru", "algo.policy=scripted_envs:Anything"], "built-in network"),
    (["algo.core=lstm", "infra.num_workers=1", "infra.envs_per_worker=3",
      "algo.num_minibatches=2", "infra.rollout_len=8"], "whole sequences"),
    (["algo.core=rnn"], "algo.core"),
    (["algo.core_size=64"], "algo.core=none has none"),
    (["algo.shared_core=false"], "algo.core=none has none"),
])
def test_the_config_refuses_a_core_where_it_cannot_apply(overrides, words):
    with pytest.raises(ConfigError, match=words):
        load_config(None, overrides)


def test_a_user_policy_brings_its_own_memory():
    # (a policy given to the Trainer, not named by algo.policy: refused at plan time)
    with pytest.raises(ConfigError, match="'algo.core=lstm' is a part of the built-in "
                                          "network; a user policy is trained as it is"):
        plan_run(load_config(None, ["algo.core=lstm"]), policy=torch.nn.Linear(4, 3))


def test_only_the_built_in_core_makes_a_policy_recurrent():
    # a user's policy may have an attribute of that name (a latent's size, say)
    policy = ActorCritic(BOX, THREE, [8])
    policy.state_size = 4
    assert not is_recurrent(policy) and state_size(policy) == 0
    assert state_size(recurrent("lstm")) == 12  # h and c of 6 units
