"""The collector (fastrl.rollout.collector): episode ends reset in place without fake
transitions, truncations keep the real final observation that PPO bootstraps from (in the
slot's sparse rows, refusing an env that truncates more often than it declared),
non-finite rewards are refused naming the env and step, and clipped rewards leave the
episode returns the env's."""

from __future__ import annotations

import numpy as np
import pytest
import scripted_envs  # noqa: F401 - registers Count-v0
import torch
from gymnasium import spaces
from scripted_envs import Relay
from torch import nn

from fastrl.algos.ppo import PPO
from fastrl.config import AlgoConfig
from fastrl.envs import BatchedCartPole
from fastrl.envs.batched import copy_step
from fastrl.envs.duel import BatchedDuel
from fastrl.envs.source import CheckedBatchedEnv, EnvContractError, EnvGroup, EnvSource
from fastrl.memory.layout import trajectory_layout
from fastrl.models.actors import Actor, RandomActor, policy_actor
from fastrl.models.policy import ActorCritic
from fastrl.rollout.collector import Collector, check_rewards

G, L = 0.5, 0.5


class ObsValue(nn.Module):
    """Stand-in policy whose value is the observation itself (so V(s) tells which s)."""

    def __init__(self):
        super().__init__()
        self.dummy = nn.Parameter(torch.zeros(1))

    def value(self, obs):
        return obs[..., 0].float()


def collect(env_kwargs: dict, rollout_len: int, num_envs: int = 1,
            max_episode_steps: int | None = None):
    """One slot collected from Count-v0 envs by a fresh ActorCritic, at policy version 3,
    its final observations kept for envs of ``max_episode_steps``."""
    envs = EnvGroup(EnvSource("scripted_envs:Count-v0", env_kwargs), list(range(num_envs)))
    policy = ActorCritic(envs.observation_space, envs.action_space, [8])
    layout = trajectory_layout(envs.observation_space, envs.action_space, rollout_len, num_envs,
                               max_episode_steps)
    slot = layout.views(memoryview(bytearray(layout.nbytes)), 0)
    Collector(envs, policy_actor(policy), first_env_id=0, total_envs=num_envs).fill(slot, 0, 3)
    return slot


def test_collector_terminations_reset_in_place_without_fake_transitions():
    slot = collect({"terminate_at": 3}, rollout_len=7)
    assert slot["obs"][:, 0, 0].tolist() == [0, 1, 2, 100, 101, 102, 200]
    assert slot["terminated"][:, 0].tolist() == [0, 0, 1, 0, 0, 1, 0]
    assert not slot["truncated"].any()
    assert (slot["reward"] == 1).all(), "a fake (autoreset) transition entered the slot"
    assert slot["episode_return"][[2, 5], 0].tolist() == [3, 3]
    assert slot["episode_length"][[2, 5], 0].tolist() == [3, 3]
    assert slot["episode_id"][:, 0].tolist() == [0, 0, 0, 1, 1, 1, 2]
    assert slot["bootstrap_obs"][0, 0] == 201
    assert (slot["policy_version"] == 3).all()
    assert slot["global_step"][:, 0].tolist() == list(range(7))


@pytest.mark.parametrize("declared", [None, 2])
def test_truncation_bootstraps_from_the_real_final_observation(declared):
    # Episodes truncated after 2 steps by TimeLimit; the slot ends mid-episode. Without a
    # declared limit the slot keeps a row per step, with one ceil(5 / 2) = 3 rows.
    slot = collect({"max_episode_steps": 2}, rollout_len=5, max_episode_steps=declared)
    assert slot["obs"][:, 0, 0].tolist() == [0, 1, 100, 101, 200]
    assert slot["truncated"][:, 0].tolist() == [0, 1, 0, 1, 0]
    assert not slot["terminated"].any()
    assert slot["final_obs"].shape[:2] == (1, 5 if declared is None else 3)
    assert slot["final_obs"][0, :2, 0].tolist() == [2, 102]  # in step order
    assert slot["bootstrap_obs"][0, 0] == 201

    batch = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in slot.items()}
    batch["value"] = batch["obs"][..., 0].clone()  # as ObsValue would have said in rollout
    cfg = AlgoConfig(gamma=G, gae_lambda=L)
    adv, returns = PPO(ObsValue(), cfg).advantages(batch)
    v = [0, 1, 100, 101, 200]
    # next-state values of the same episode: V(1), V(final 2), V(101), V(final 102), V(201)
    nxt = [1, 2, 101, 102, 201]
    delta = [1 + G * n - x for n, x in zip(nxt, v)]
    cont = [1, 0, 1, 0, 1]
    a = [0.0] * 5
    for i in reversed(range(5)):
        a[i] = delta[i] + (G * L * cont[i] * a[i + 1] if i < 4 else 0.0)
    assert adv[:, 0].tolist() == pytest.approx(a)
    assert returns[:, 0].tolist() == pytest.approx([x + y for x, y in zip(a, v)])


def test_an_env_truncating_more_often_than_it_declared_is_refused_naming_it():
    # Count-v0 truncates every 2 steps; declared 5 leaves one row per env in 5 steps
    with pytest.raises(EnvContractError, match=r"env 0 truncated more than 1 episode\(s\) "
                       r"within one slot of 5 steps, more than its declared max_episode"):
        collect({"max_episode_steps": 2}, rollout_len=5, num_envs=3, max_episode_steps=5)


def test_non_finite_rewards_are_refused_naming_env_and_step():
    rewards = np.zeros((4, 3), np.float32)
    check_rewards(rewards, np.array([6, 7, 8]))
    rewards[2, 1], rewards[3, 0] = np.nan, np.inf
    with pytest.raises(EnvContractError, match="env 7 returned the reward nan at step 2.*2 non"):
        check_rewards(rewards, np.array([6, 7, 8]))



class ScriptedRewards:
    """One env paying 5, -3, 0, 2.5 and terminating on the last of them, over and over."""

    REWARDS = (5.0, -3.0, 0.0, 2.5)
    num_envs = 1
    observation_space = spaces.Box(-1, 1, (1,), np.float32)
    action_space = spaces.Discrete(2)

    def __init__(self):
        self.t = 0

    def reset(self):
        return np.zeros((1, 1), np.float32)

    def step(self, actions):
        reward = np.array([self.REWARDS[self.t % 4]])
        done = np.array([self.t % 4 == 3])
        self.t += 1
        return (np.zeros((1, 1), np.float32), reward, done, np.zeros(1, bool),
                np.zeros((1, 1), np.float32))


@pytest.mark.parametrize("clip", [False, True])
def test_clipped_rewards_are_signs_and_returns_stay_the_env_s(clip):
    envs = ScriptedRewards()
    layout = trajectory_layout(envs.observation_space, envs.action_space, 8, 1)
    slot = layout.views(memoryview(bytearray(layout.nbytes)), 0)
    class Zeros(Actor):
        def __call__(self, obs):
            return np.zeros(1, np.int64), np.zeros(1, np.float32), np.zeros(1, np.float32)

    Collector(envs, Zeros(), 0, 1, clip_rewards=clip).fill(slot, 0, 0)
    raw = [5, -3, 0, 2.5] * 2
    assert slot["reward"][:, 0].tolist() == (np.sign(raw).tolist() if clip else raw)
    assert slot["episode_return"][[3, 7], 0].tolist() == [4.5, 4.5]


class StepsOnly:
    """A simulator's step forms without its rollout_into: the collector steps it one step
    at a time."""

    def __init__(self, sim):
        self.sim = sim
        self.num_envs, self.observation_space = sim.num_envs, sim.observation_space
        self.reset, self.step, self.step_into = sim.reset, sim.step, sim.step_into


def test_a_whole_slot_in_one_call_writes_what_step_by_step_writes():
    """Random actions and the numba CartPole: the slot filled by one rollout_into call
    equals the one filled step by step, field by field (the sparse final observations
    too), over slots where episodes end and are truncated."""
    T, n = 50, 8
    slots = []
    for wrap in (lambda sim: sim, StepsOnly):
        envs = wrap(BatchedCartPole(list(range(n)), max_episode_steps=20))
        layout = trajectory_layout(envs.observation_space, spaces.Discrete(2), T, n, 20)
        collector = Collector(envs, RandomActor(spaces.Discrete(2), n, seed=3), 8, 16)
        filled = []
        for seq in range(4):
            slot = layout.views(memoryview(bytearray(layout.nbytes)), 0)
            collector.fill(slot, seq, 2)
            filled.append(slot)
        slots.append(filled)
    whole, stepped = slots
    assert any(s["terminated"].any() for s in whole) and any(s["truncated"].any() for s in whole)
    assert any(s["final_obs"].any() for s in whole)
    for a, b in zip(whole, stepped):
        for name in a:
            np.testing.assert_array_equal(a[name], b[name], err_msg=name)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
@pytest.mark.parametrize("wrap", [False, True], ids=["step", "checked step_into"])
def test_a_non_finite_reward_stops_the_slot_naming_env_and_step(bad, wrap):
    class BadAtStep3(ScriptedRewards):
        def step(self, actions):
            out = super().step(actions)
            return (out[0], np.array([bad if self.t == 3 else 1.0]), *out[2:])

        def close(self):
            pass

    class BadIntoRows(BadAtStep3):
        def step_into(self, actions, rows):
            copy_step(BadAtStep3.step(self, actions), rows)

        step = property()  # step_into alone

    envs = BadAtStep3()
    layout = trajectory_layout(envs.observation_space, envs.action_space, 8, 1)
    slot = layout.views(memoryview(bytearray(layout.nbytes)), 0)
    act = RandomActor(envs.action_space, 1, seed=0)
    for clip in (False, True):  # the sign of nan or inf is no cover for it
        sim = CheckedBatchedEnv(BadIntoRows(), "Bad", 1) if wrap else BadAtStep3()
        with pytest.raises(EnvContractError, match=f"env 5 returned the reward {bad} at step 2"):
            Collector(sim, act, 5, 6, clip_rewards=clip).fill(slot, 0, 0)


class Periodic:
    """Two envs paying 1 a step whose episodes end every 3 and every 4 steps."""

    PERIODS = np.array([3, 4])
    num_envs = 2
    observation_space = spaces.Box(0, 10, (1,), np.float32)
    action_space = spaces.Discrete(2)

    def __init__(self):
        self.t = 0

    def reset(self):
        return np.zeros((2, 1), np.float32)

    def step(self, actions):
        self.t += 1
        done = self.t % self.PERIODS == 0
        obs = np.zeros((2, 1), np.float32)
        return obs, np.ones(2, np.float32), done, np.zeros(2, bool), obs


def test_ids_steps_and_episode_totals_continue_across_slots():
    """Slots 0-2 of a worker whose first env is env 10 of 16: every transition's global
    step, env id, episode id and running totals follow from its time step alone."""
    T, first, total = 5, 10, 16
    envs = Periodic()
    layout = trajectory_layout(envs.observation_space, envs.action_space, T, 2)
    collector = Collector(envs, RandomActor(envs.action_space, 2, seed=0), first, total)
    for seq in range(3):
        slot = layout.views(memoryview(bytearray(layout.nbytes)), 0)
        collector.fill(slot, seq, 7)
        g = seq * T + np.arange(T)[:, None]  # the time step of every row, [T, 1]
        env = first + np.arange(2)
        assert (slot["global_step"] == g * total + env).all()
        assert (slot["env_id"] == env).all() and (slot["policy_version"] == 7).all()
        assert (slot["episode_id"] == g // Periodic.PERIODS * total + env).all()
        length = g % Periodic.PERIODS + 1
        assert (slot["episode_length"] == length).all()
        assert (slot["episode_return"] == length).all()
        assert (slot["terminated"] == (length == Periodic.PERIODS)).all()


def test_a_multi_agent_slot_marks_padding_and_keeps_it_out_of_episodes():
    envs = EnvSource("relay", {"length": 4, "runner_steps": 2}, env_fn=Relay).make([0])
    layout = trajectory_layout(envs.observation_space, envs.action_space, 9, 3,
                               weighted=True)
    slot = layout.views(memoryview(bytearray(layout.nbytes)), 0)
    Collector(envs, RandomActor(envs.action_space, 3, 0), first_env_id=0,
              total_envs=3).fill(slot, 0, 0)
    runner_0, runner_1, chaser = slot["weight"].T.tolist()
    assert runner_0 == [True] * 9
    assert runner_1 == [True, True, False, False, True, True, False, False, True]
    assert chaser == [False, True, True, True, False, True, True, True, False]
    # runner_1's episodes are 2 steps long: its padding steps add nothing to them
    ended = (slot["terminated"] | slot["truncated"]) & slot["weight"]
    assert slot["episode_length"][:, 1][ended[:, 1]].tolist() == [2, 2]
    assert slot["episode_length"][:, 2][ended[:, 2]].tolist() == [3, 3]
    assert (slot["reward"][~slot["weight"]] == 0).all()
    assert slot["terminated"][~slot["weight"]].all()


class LeavesSilently(BatchedDuel):
    """A user's multi-agent simulator whose second players go inactive after step 2 with
    no episode end, and whose padding steps do not set terminated."""

    def __init__(self, seeds):
        super().__init__(seeds)
        self.active = np.ones(self.num_envs, np.bool_)
        self.t = 0

    def step_into(self, actions, out):
        super().step_into(actions, out)
        self.t += 1
        self.active[1::2] = self.t < 2


def multi_agent_slot(envs, steps: int):
    layout = trajectory_layout(envs.observation_space, envs.action_space, steps,
                               envs.num_envs, weighted=True)
    return layout.views(memoryview(bytearray(layout.nbytes)), 0)


def test_a_user_s_multi_agent_simulator_is_held_to_the_padding_rules():
    # (the env edge enforces them: a user's simulator comes wrapped in a CheckedBatchedEnv)
    envs = CheckedBatchedEnv(LeavesSilently([0, 1]), "leaves", 2)
    slot = multi_agent_slot(envs, 4)
    with pytest.raises(EnvContractError, match="env 'leaves': row 1 of its batched simulator "
                                               "went from active to inactive"):
        Collector(envs, RandomActor(envs.action_space, 4, 0), 0, 4).fill(
            slot, 0, 0)

    class EndsThenPads(LeavesSilently):
        def step_into(self, actions, out):
            super().step_into(actions, out)
            out.terminated[1::2] |= self.t == 2  # the episode ends as the agent leaves

    envs = CheckedBatchedEnv(EndsThenPads([0, 1]), "ends", 2)
    slot = multi_agent_slot(envs, 4)
    Collector(envs, RandomActor(envs.action_space, 4, 0), 0, 4).fill(slot, 0, 0)
    # the padding steps after it end no return: terminated set at the env edge
    assert slot["terminated"][2:, 1::2].all() and not slot["weight"][2:, 1::2].any()


def test_a_weighted_slot_of_a_simulator_without_live_rows_weights_every_row():
    class TwoAgentCartPole(BatchedCartPole):  # (rollout_into: a whole slot in one call)
        agents = ("left", "right")

    envs = TwoAgentCartPole(list(range(4)))
    slot = multi_agent_slot(envs, 64)
    slot["weight"][...] = False  # stale bytes of an earlier slot
    Collector(envs, RandomActor(envs.action_space, 4, 0), 0, 4).fill(slot, 0, 0)
    assert slot["weight"].all()
    assert (slot["episode_length"][slot["terminated"]] > 0).all()
