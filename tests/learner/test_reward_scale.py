"""Return-based reward scaling (fastrl.learner.reward_scale) against a plainly written
per-env loop: running returns across batches and episode ends, two slots of one worker in a
batch, the factor, and a state round trip."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fastrl.learner.reward_scale import ReturnScale

GAMMA = 0.9


def one_group(envs: int, envs_per_slot: int) -> ReturnScale:
    """Every row of a slot in one group: a run's own statistics."""
    return ReturnScale(envs, [GAMMA], np.zeros(envs_per_slot, np.intp))


def plain_returns(rewards: list[float], dones: list[bool]) -> list[float]:
    """SB3's VecNormalize returns of one env: ret = gamma * ret + r, zeroed after an end."""
    out, ret = [], 0.0
    for r, d in zip(rewards, dones):
        ret = GAMMA * ret + r
        out.append(ret)
        ret = 0.0 if d else ret
    return out


def test_returns_run_on_across_batches_and_slots_and_scale_by_their_std():
    rng = np.random.default_rng(0)
    T, E, envs = 5, 2, 4  # two workers of two envs
    scale = one_group(envs, E)
    history = {e: ([], []) for e in range(envs)}
    # batches: worker 0 then 1 (one slot each); then two slots of worker 1 in one batch
    for workers in ([0, 1], [1, 1], [0, 1]):
        cols = [w * E + e for w in workers for e in range(E)]
        reward = rng.normal(size=(T, len(cols)))
        done = rng.random((T, len(cols))) < 0.2
        env_id = np.tile(np.array(cols), (T, 1))
        factor = scale.update(reward, done, env_id, envs_per_slot=E)
        for j, e in enumerate(cols):
            history[e][0].extend(reward[:, j])
            history[e][1].extend(done[:, j])
    seen = np.concatenate([plain_returns(*history[e]) for e in range(envs)])
    assert scale.stats[0].count.item() == pytest.approx(seen.size, abs=1e-3)
    assert scale.stats[0].var.item() == pytest.approx(seen.var(), rel=1e-4)
    assert factor == pytest.approx(1 / np.sqrt(seen.var()), rel=1e-4)
    for e in range(envs):  # the running return each env carries into its next batch
        rewards, dones = history[e]
        expected = 0.0 if dones[-1] else plain_returns(rewards, dones)[-1]
        assert scale.returns[e] == pytest.approx(expected)

    again = one_group(envs, E)
    again.load_state_dict({k: v.clone() for k, v in scale.state_dict().items()})
    assert np.array_equal(again.returns, scale.returns)
    assert torch.equal(again.stats[0].var, scale.stats[0].var)


def test_padding_steps_of_a_multi_agent_batch_leave_the_statistics_alone():
    rng = np.random.default_rng(0)
    reward = rng.normal(size=(6, 4))
    done = np.zeros((6, 4), bool)
    env_id = np.tile(np.arange(4), (6, 1))
    active = np.ones((6, 4), bool)
    active[3:, 1] = False  # row 1's agent is gone: padding, reward 0, terminated
    done[2, 1], done[3:, 1] = True, True
    reward[3:, 1] = 0.0
    padded, clean = one_group(4, 4), one_group(4, 4)
    factor = padded.update(reward, done, env_id, 4, active)
    # the same statistics as the batch without those steps: row 1's steps 3-5 left out
    seen_without = clean.update(reward, done, env_id, 4)
    assert factor != seen_without
    kept = one_group(4, 4)
    returns = np.zeros(4)
    samples = []
    for t in range(6):
        returns = returns * GAMMA + reward[t]
        samples += [returns[e] for e in range(4) if active[t, e]]
        returns = np.where(done[t], 0.0, returns)
    kept.stats[0].update(torch.tensor(samples, dtype=torch.float32).reshape(-1, 1))
    assert factor == pytest.approx(float(torch.rsqrt(kept.stats[0].var + 1e-8)))


def test_each_group_of_rows_keeps_its_own_statistics_and_discount():
    # a population of two members of two envs a worker: rows [0, 1] member 0's, [2, 3] 1's
    rng = np.random.default_rng(1)
    T, gammas = 6, [0.9, 0.5]
    grouped = ReturnScale(8, gammas, np.array([0, 0, 1, 1]))
    alone = [ReturnScale(4, [g], np.zeros(2, np.intp)) for g in gammas]
    for workers in ([0, 1], [1, 0]):
        cols = [w * 4 + r for w in workers for r in range(4)]
        reward, done = rng.normal(size=(T, 8)), rng.random((T, 8)) < 0.2
        factor = grouped.update(reward, done, np.tile(np.array(cols), (T, 1)), 4)
        for k in range(2):  # member k's columns and env ids, as its single run has them
            mine = [j for j, c in enumerate(cols) if (c % 4) // 2 == k]
            ids = np.array([(cols[j] // 4) * 2 + cols[j] % 2 for j in mine])
            theirs = alone[k].update(reward[:, mine], done[:, mine], np.tile(ids, (T, 1)), 2)
            assert np.all(factor[mine] == np.float32(theirs))
    again = ReturnScale(8, gammas, np.array([0, 0, 1, 1]))
    again.load_state_dict({k: v for k, v in grouped.state_dict().items()})
    assert all(torch.equal(a.var, b.var) for a, b in zip(again.stats, grouped.stats))
