"""PettingZoo envs as rows (fastrl.envs.multiagent): one row per (env, agent), agents that
leave are padding until their env resets, agents that join come alive in their row, the
AEC API through PettingZoo's conversion, ids that name PettingZoo modules, and the
multi-agent contract's one-line errors."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from mpe2 import simple_spread_v3
from pettingzoo.classic import tictactoe_v3 as tictactoe
from scripted_envs import Relay

from fastrl.envs.batched import own_rows
from fastrl.envs.contract import check_env
from fastrl.envs.duel import BatchedDuel
from fastrl.envs.errors import EnvContractError, EnvError
from fastrl.envs.multiagent import agent_group, pettingzoo_factory
from fastrl.envs.source import EnvSource
from fastrl.memory.records import ObsRecord

RUNNER_0, RUNNER_1, CHASER = range(3)


def relay(*seeds: int, **kwargs):
    return EnvSource("relay", kwargs, env_fn=Relay).make(list(seeds))


def rows_of(envs, n: int):
    return own_rows(n, (ObsRecord(envs.observation_space).nbytes,), np.dtype(np.uint8))


def test_each_agent_of_each_env_is_a_row_and_absent_agents_are_padding():
    envs = relay(0, 1)
    assert envs.num_envs == 6 and envs.agents == ("runner_0", "runner_1", "chaser_0")
    obs = envs.reset()
    # env 1's runner_1 is row 4; chasers (rows 2, 5) join only after the first step
    assert obs[4].tolist() == [RUNNER_1, 0, 0]
    assert envs.active.tolist() == [True, True, False] * 2
    assert (obs[[2, 5]] == 0).all()


def test_agents_of_several_groups_see_their_own_spaces_and_their_group():
    envs = relay(0, breaks="chaser_sees_more")
    assert set(envs.observation_space["by_group"].spaces) == {"runner", "chaser"}
    assert envs.observation_space["by_group"]["chaser"].shape == (4,)
    envs.reset()
    rows = rows_of(envs, 3)
    envs.step_into(np.ones(3, np.int64), rows)  # the chaser joins
    leaves = ObsRecord(envs.observation_space).views(rows.obs)
    runner, chaser = leaves["by_group"]["runner"], leaves["by_group"]["chaser"]
    assert leaves["group"].tolist() == [0, 0, 1]
    assert chaser[CHASER].tolist() == [CHASER, 1, 0, -1] and (runner[CHASER] == 0).all()
    assert runner[RUNNER_0].tolist() == [RUNNER_0, 1, 0] and (chaser[RUNNER_0] == 0).all()


def test_groups_of_one_space_tell_their_group_only_where_a_network_each_asks():
    plain = relay(0)
    assert plain.observation_space == Relay().observation_space("runner_0")
    grouped = EnvSource("relay", {}, env_fn=Relay, grouped=True).make([0])
    assert set(grouped.observation_space.spaces) == {"group", "obs"}
    leaves = ObsRecord(grouped.observation_space).views(grouped.reset())
    assert leaves["group"].tolist() == [0, 0, 0]  # (the absent chaser's row: padding)
    assert leaves["obs"][RUNNER_1].tolist() == [RUNNER_1, 0, 0]


def test_agents_leave_join_and_come_back_when_their_env_resets():
    envs = relay(0, length=4, runner_steps=2)
    envs.reset()
    rows = own_rows(3, (3,), np.float32)
    steps = []
    for _ in range(5):
        before = envs.active.copy()
        envs.step_into(np.ones(3, np.int64), rows)
        steps.append((before.tolist(), rows.reward.tolist(), rows.terminated.tolist(),
                      rows.truncated.tolist(), envs.active.tolist()))
    # step 1: the chaser's row is padding (reward 0, terminated) and the chaser joins
    assert steps[0] == ([True, True, False], [1, 2, 0], [False, False, True],
                        [False, False, False], [True, True, True])
    # step 2: runner_1 terminates (its final observation kept) and leaves its row
    assert steps[1][2] == [False, True, False] and steps[1][4] == [True, False, True]
    # step 3: runner_1's row is padding
    assert steps[2][1][RUNNER_1] == 0 and steps[2][2][RUNNER_1]
    # step 4: the others truncate, the env resets: both runners are back, the chaser not
    assert steps[3][3] == [True, False, True] and steps[3][4] == [True, True, False]
    assert steps[4][1] == [1, 2, 0]


def test_a_truncated_agent_keeps_its_final_observation_and_its_row_the_next_episode():
    envs = relay(0, length=2, runner_steps=9)
    envs.reset()
    rows = own_rows(3, (3,), np.float32)
    envs.step_into(np.zeros(3, np.int64), rows)
    envs.step_into(np.zeros(3, np.int64), rows)
    assert rows.truncated.tolist() == [True, True, True]
    np.testing.assert_array_equal(rows.final_obs[CHASER], [CHASER, 2, 0])
    # the next episode's first observations (episode 1, t 0), the chaser absent again
    np.testing.assert_array_equal(rows.obs[RUNNER_0], [RUNNER_0, 0, 1])
    assert envs.active.tolist() == [True, True, False]


@pytest.mark.parametrize("breaks, says", [
    ("group_spaces", "agents 'runner_0' and 'runner_1' have different observation spaces"),
    ("box_actions", "agents 'runner_0' and 'chaser_0' act in Discrete.2. and Box"),
    ("leave_silently", "agent 'runner_1' should be terminated or truncated where it leaves"),
    ("reward_array", "the reward of 'runner_0' should be a real scalar"),
])
def test_the_contract_check_names_what_a_multi_agent_env_broke(breaks, says):
    source = EnvSource("relay", {"breaks": breaks}, env_fn=Relay)
    with pytest.raises(EnvContractError, match=says) as e:
        check_env(source, seed=0)
    assert "\n" not in str(e.value)


def test_a_pettingzoo_module_is_an_env_id_and_its_aec_env_is_made_parallel():
    assert pettingzoo_factory("CartPole-v1") is None
    assert pettingzoo_factory("no.such_module") is None
    check_env(EnvSource("mpe2.simple_spread_v3", {"max_cycles": 5}), seed=0)
    aec = EnvSource("spread", {"max_cycles": 5}, env_fn=simple_spread_v3.env).make([0])
    par = EnvSource("mpe2.simple_spread_v3", {"max_cycles": 5}).make([0])
    np.testing.assert_array_equal(aec.reset(), par.reset())
    assert aec.num_envs == 3


def test_a_turn_based_aec_game_is_refused_in_one_line():
    with pytest.raises(EnvError, match="cannot step in parallel.*give a Parallel env"):
        EnvSource("ttt", env_fn=tictactoe.env).make([0])


def test_agent_groups_follow_pettingzoo_names():
    assert [agent_group(a) for a in ("adversary_0", "adversary_12", "agent", "red_team_1")] \
        == ["adversary", "adversary", "agent", "red_team"]


class HalfLive(BatchedDuel):
    """Duel whose second players are not live at odd steps: a user's batched multi-agent
    simulator that keeps ``active``."""

    def __init__(self, seeds, **kwargs):
        super().__init__(seeds, **kwargs)
        self.active = np.ones(self.num_envs, np.bool_)
        self.t = 0

    def step_into(self, actions, out):
        super().step_into(actions, out)
        self.t += 1
        self.active[1::2] = self.t % 2 == 0


def test_a_batched_simulator_with_agents_takes_a_row_per_agent_and_keeps_active():
    envs = EnvSource("half", vector_env_fn=HalfLive).make([0, 1, 2])
    assert envs.num_envs == 6 and envs.agents == ("player_0", "player_1")
    envs.reset()
    envs.step(np.ones(6, np.int64))
    assert envs.active.tolist() == [True, False] * 3
    check_env(EnvSource("half", vector_env_fn=HalfLive), seed=0)


def test_a_batched_simulator_with_agents_but_one_row_an_env_is_refused():
    class OneRow(BatchedDuel):
        agents = ("player_0", "player_1", "player_2")

    with pytest.raises(EnvContractError, match=r"num_envs should be 6 \(one env per seed, "
                                               r"times its 3 agents\), got int 4"):
        EnvSource("one-row", vector_env_fn=OneRow).make([0, 1])


class StepIntoOnly:
    """A user's multi-agent simulator that writes with ``step_into`` only (Duel inside)."""

    def __init__(self, seeds):
        self.duel = BatchedDuel(seeds, steps=6)
        self.agents, self.num_envs = self.duel.agents, self.duel.num_envs
        self.observation_space, self.action_space = (self.duel.observation_space,
                                                     self.duel.action_space)
        self.baseline = "its own baseline"

    def reset(self):
        return self.duel.reset()

    def step_into(self, actions, out):
        self.duel.step_into(actions, out)

    def close(self):
        pass


def test_a_step_into_only_multi_agent_simulator_is_checked_with_a_row_per_agent():
    source = EnvSource("step-into", vector_env_fn=StepIntoOnly)
    check_env(source, seed=0)
    envs = source.make([0, 1])
    envs.reset()
    obs, reward, terminated, _, _ = envs.step(np.ones(4, np.int64))
    assert obs.shape == (4, 7) and reward.shape == terminated.shape == (4,)
    assert envs.baseline == "its own baseline"


def test_a_pettingzoo_env_s_baseline_is_passed_through():
    class WithBaseline(Relay):
        baseline = "relay's baseline"

    assert EnvSource("relay", env_fn=WithBaseline).make([0]).baseline == "relay's baseline"
    assert relay(0).baseline is None


def test_a_module_id_whose_own_imports_fail_says_so():
    with pytest.raises(EnvError, match="env.id='scripted_pz.broken_v0': importing the module "
                                       "failed .No module named 'a_dependency"):
        pettingzoo_factory("scripted_pz.broken_v0")


def test_groups_acting_in_different_discrete_spaces_act_in_the_largest_masked():
    envs = relay(0, breaks="chaser_acts_more")
    assert envs.action_space.n == 3 and "action_mask" in envs.observation_space.spaces
    envs.reset()
    rows = rows_of(envs, 3)
    envs.step_into(np.ones(3, np.int64), rows)  # the chaser joins
    mask = ObsRecord(envs.observation_space).views(rows.obs)["action_mask"]
    assert mask.tolist() == [[1, 1, 0], [1, 1, 0], [1, 1, 1]]
    check_env(EnvSource("relay", {"breaks": "chaser_acts_more"}, env_fn=Relay), seed=0)


def test_an_own_mask_that_hides_every_action_leaves_the_group_s_actions_legal():
    class NoLegal(Relay):  # its runners' own masks allow nothing at times
        def observation_space(self, agent):
            if agent == "chaser_0":
                return super().observation_space(agent)
            return gym.spaces.Dict({"pos": super().observation_space(agent),
                                    "action_mask": gym.spaces.MultiBinary(2)})

        def _obs(self, agent):
            seen = super()._obs(agent)
            if agent == "chaser_0":
                return seen
            return {"pos": seen, "action_mask": np.zeros(2, np.int8)}

    envs = EnvSource("relay", {"breaks": "chaser_acts_more"}, env_fn=NoLegal).make([0])
    mask = ObsRecord(envs.observation_space).views(envs.reset())["action_mask"]
    assert mask[:2].tolist() == [[1, 1, 0], [1, 1, 0]]  # never the chaser's third action


def test_an_own_mask_of_the_wrong_length_is_refused_in_one_line():
    class WrongMask(Relay):
        def observation_space(self, agent):
            return gym.spaces.Dict({"pos": super().observation_space(agent),
                                    "action_mask": gym.spaces.MultiBinary(3)})

    with pytest.raises(EnvContractError, match="the action_mask of agent 'runner_0' has shape "
                                               r"\(3,\); a mask takes one flag per action"):
        EnvSource("relay", env_fn=WrongMask).make([0])
