"""Self-play in a worker (fastrl.selfplay.actor): the learner's seats alternate, each slot's
opponent is drawn from the pool by the seed alone at the slot's start (the actor's
begin_slot hook), the other seat acts with that snapshot, and only the learner's rows are
weighted to train (its end_step hook)."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from fastrl.envs.duel import BatchedDuel
from fastrl.memory.layout import trajectory_layout
from fastrl.memory.weights import SharedWeights
from fastrl.models.actors import Actor, RandomActor
from fastrl.rollout.collector import Collector
from fastrl.selfplay.actor import SelfPlayActor, opponent_key
from fastrl.selfplay.config import SelfPlayConfig
from fastrl.selfplay.seats import learning_rows


def test_the_learner_sits_in_seat_g_mod_2_across_workers():
    assert learning_rows(0, 6).tolist() == [True, False, False, True, True, False]
    # a worker whose envs start at run-wide env 3 continues the alternation
    assert learning_rows(3, 4).tolist() == [False, True, True, False]


def test_opponents_are_drawn_from_the_pool_window_by_the_seed_alone():
    cfg = SelfPlayConfig(enabled=True, pool_size=3, snapshot_every=5, latest_prob=0.25)
    keys = [opponent_key(cfg, 7, 1, seq, version=42) for seq in range(400)]
    assert keys == [opponent_key(cfg, 7, 1, seq, version=42) for seq in range(400)]
    newest = 42 // 5
    drawn = [k for k in keys if k is not None]
    assert set(drawn) == {newest - 2, newest - 1, newest}
    assert abs(keys.count(None) / 400 - 0.25) < 0.07
    assert keys != [opponent_key(cfg, 8, 1, seq, version=42) for seq in range(400)]
    always = SelfPlayConfig(enabled=True, latest_prob=1.0)
    assert {opponent_key(always, 7, 1, seq, 42) for seq in range(50)} == {None}
    early = SelfPlayConfig(enabled=True, latest_prob=0.0, pool_size=8)
    assert {opponent_key(early, 7, 1, seq, 3) for seq in range(50)} == {0}


class Constant(nn.Module):
    """A 'policy' whose one parameter is the action it takes."""

    def __init__(self):
        super().__init__()
        self.action = nn.Parameter(torch.zeros(1))

    def actor(self) -> Actor:
        policy = self

        class Acts(Actor):
            def __call__(self, obs):
                return (np.full(len(obs), int(policy.action.item())), np.zeros(len(obs)),
                        np.zeros(len(obs)))

        return Acts()


def test_the_other_seat_acts_with_the_snapshot_the_slot_drew():
    pool = SharedWeights(memoryview(bytearray(SharedWeights.nbytes(1, 4))), 1, 4)
    for key in range(3):  # snapshot k acts k + 1
        pool.write(np.array([key + 1.0], np.float32), key * 2, key)
    learner, opponent = Constant(), Constant()
    cfg = SelfPlayConfig(enabled=True, pool_size=4, snapshot_every=2, latest_prob=0.0)
    learning = learning_rows(0, 4)
    act = SelfPlayActor(learner.actor(), opponent, opponent.actor(), learning, pool, cfg,
                        seed=1, worker=0, should_stop=lambda: False)
    for seq in range(6):
        act.begin_slot({}, seq, version=4)
        actions = act(np.zeros((4, 7), np.float32))[0]
        assert actions[learning].tolist() == [0, 0]
        assert actions[~learning].tolist() == [act.key + 1] * 2
    newest = SelfPlayActor(learner.actor(), opponent, opponent.actor(), learning, pool,
                           SelfPlayConfig(enabled=True, latest_prob=1.0), seed=1, worker=0,
                           should_stop=lambda: False)
    newest.begin_slot({}, 0, version=4)
    assert newest(np.zeros((4, 7), np.float32))[0].tolist() == [0] * 4


def test_only_the_learner_s_rows_train_and_count_as_episodes():
    envs = BatchedDuel([0, 1], steps=8)
    layout = trajectory_layout(envs.observation_space, envs.action_space, 16, 4,
                               weighted=True)
    slot = layout.views(memoryview(bytearray(layout.nbytes)), 0)
    slot["weight"][...] = False  # stale bytes of an earlier slot
    learning = learning_rows(0, 4)
    pool = SharedWeights(memoryview(bytearray(SharedWeights.nbytes(1, 1))), 1, 1)
    act = SelfPlayActor(RandomActor(envs.action_space, 4, 0), Constant(),
                        RandomActor(envs.action_space, 4, 1), learning, pool,
                        SelfPlayConfig(enabled=True, latest_prob=1.0), seed=1, worker=0,
                        should_stop=lambda: False)
    Collector(envs, act, 0, 4).fill(slot, 0, 0)
    assert (slot["weight"] == learning).all()
    ended = (slot["terminated"] | slot["truncated"]) & slot["weight"]
    assert ended.sum() == 4 and (ended.sum(0) == 2 * learning).all()
    # the other seat's returns are not even counted: its running totals stay at zero
    assert (slot["episode_length"][:, ~learning] == 0).all()
