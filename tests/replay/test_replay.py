"""fastrl.replay: n-step transitions against a brute-force reference, prioritized sampling,
priority updates, saved state, and the errors a caller can meet."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastrl.memory.layout import pack_final_obs
from fastrl.replay import PrioritizedReplayBuffer, ReplayBuffer, ReplayError, linear_schedule

OBS = 4  # obs = [env, step, episode, is_final_obs]: every observation is unique


# -- streams of experience, and the brute-force reference ------------------------------------

@dataclass
class Env:
    """One env's stream: what it saw so far, step by step, as the reference reads it."""

    env: int
    step: int = 0
    episode: int = 0
    steps: list[dict] = field(default_factory=list)

    def obs(self) -> np.ndarray:
        return np.array([self.env, self.step, self.episode, 0], np.float32)


class Streams:
    """Slots of random experience for groups of envs (one group per worker), with episode
    ends at random steps; every env's stream is recorded for the reference."""

    def __init__(self, groups: list[list[int]], p_term: float, p_trunc: float, seed: int):
        self.groups = groups
        self.envs = {e: Env(e) for g in groups for e in g}
        self.rng = np.random.default_rng(seed)
        self.p_term, self.p_trunc = p_term, p_trunc

    def slot(self, group: int, steps: int) -> dict[str, np.ndarray]:
        ids = self.groups[group]
        envs = len(ids)
        s = {"obs": np.zeros((steps, envs, OBS), np.float32),
             "final_obs": np.full((steps, envs, OBS), np.nan, np.float32),  # garbage
             "action": np.zeros((steps, envs), np.int64),
             "reward": self.rng.normal(size=(steps, envs)).astype(np.float32),
             "terminated": self.rng.random((steps, envs)) < self.p_term,
             "truncated": self.rng.random((steps, envs)) < self.p_trunc,
             "env_id": np.broadcast_to(np.array(ids, np.int32), (steps, envs)).copy(),
             "log_prob": np.zeros((steps, envs), np.float32)}  # ignored
        for e, env_id in enumerate(ids):
            env = self.envs[env_id]
            for t in range(steps):
                s["obs"][t, e] = obs = env.obs()
                s["action"][t, e] = 1000 * env_id + env.step
                term, trunc = bool(s["terminated"][t, e]), bool(s["truncated"][t, e])
                env.step += 1
                if trunc:
                    final = env.obs()
                    final[3] = 1
                    s["final_obs"][t, e] = final
                if term or trunc:
                    env.episode += 1
                succ = final if trunc and not term else env.obs()
                env.steps.append({"obs": obs, "action": s["action"][t, e],
                                  "reward": float(s["reward"][t, e]), "term": term,
                                  "trunc": trunc, "succ": succ})
        s["bootstrap_obs"] = np.stack([self.envs[i].obs() for i in ids])
        # as a ring keeps them: each env's in step order, rows past them garbage
        steps_final = s.pop("final_obs")
        rows = max(1, int(s["truncated"].sum(0).max()))
        s["final_obs"] = np.full((envs, rows, OBS), np.nan, np.float32)
        pack_final_obs(steps_final, s["truncated"], s["final_obs"])
        return s


def reference(streams: Streams, n: int, gamma: float) -> dict[tuple, dict]:
    """Every n-step transition that is complete, keyed by (env, step) of its first step."""
    out = {}
    for env in streams.envs.values():
        steps = env.steps
        for t in range(len(steps)):
            ret, disc = 0.0, 1.0
            for k in range(n):
                if t + k >= len(steps):
                    break
                s = steps[t + k]
                ret += disc * s["reward"]
                disc *= gamma
                if s["term"] or s["trunc"] or k == n - 1:
                    out[(env.env, t)] = {"obs": steps[t]["obs"], "action": steps[t]["action"],
                                         "reward": ret, "discount": disc,
                                         "done": float(s["term"]), "next_obs": s["succ"]}
                    break
    return out


def stored(buf: ReplayBuffer) -> dict[tuple, dict]:
    """The buffer's rows keyed like :func:`reference`."""
    rows = {}
    for i in range(buf.size):
        obs = buf.storage["obs"][i]
        rows[(int(obs[0]), int(obs[1]))] = {k: buf.storage[k][i] for k in buf.storage}
    return rows


def assert_matches(buf: ReplayBuffer, ref: dict[tuple, dict]) -> None:
    """The buffer holds exactly the reference's transitions."""
    got = stored(buf)
    assert sorted(got) == sorted(ref)
    for key, want in ref.items():
        row = got[key]
        assert np.array_equal(row["obs"], want["obs"]), key
        assert row["action"] == want["action"], key
        assert row["reward"] == pytest.approx(want["reward"], rel=1e-5, abs=1e-5), key
        assert row["discount"] == pytest.approx(want["discount"], rel=1e-6), key
        assert row["done"] == want["done"], key
        if not want["done"]:  # after a termination next_obs is never read
            assert np.array_equal(row["next_obs"], want["next_obs"]), key


def make(n: int = 1, capacity: int = 10_000, num_envs: int = 8, cls=ReplayBuffer, **kw):
    """A buffer of ``cls`` for the test streams' observations and actions."""
    return cls(capacity, (OBS,), np.float32, (), np.int64, num_envs, n_step=n, **kw)


@settings(deadline=None, max_examples=60)
@given(n=st.sampled_from([1, 3, 5]), steps=st.lists(st.integers(1, 7), min_size=1, max_size=8),
       groups=st.sampled_from([[[0]], [[0, 1, 2]], [[0, 3], [5, 1], [2]], [[7], [4, 6]]]),
       p_end=st.sampled_from([(0.0, 0.0), (0.15, 0.0), (0.0, 0.15), (0.2, 0.2)]),
       gamma=st.sampled_from([0.99, 0.5, 1.0]), seed=st.integers(0, 2**16))
def test_nstep_transitions_match_the_reference(n, steps, groups, p_end, gamma, seed):
    """Slots of several env groups interleave; windows cross slot boundaries and stop at
    episode ends; a step is stored once its window is complete."""
    streams = Streams(groups, *p_end, seed=seed)
    buf = make(n, gamma=gamma)
    order = np.random.default_rng(seed).integers(len(groups), size=len(steps))
    added = sum(buf.add_slot(streams.slot(int(g), t)) for g, t in zip(order, steps))
    ref = reference(streams, n, gamma)
    assert added == buf.size == buf.inserted == len(ref)
    assert_matches(buf, ref)
    assert np.array_equal(np.sort(buf.storage["stamp"][:buf.size]), np.arange(buf.size))


def test_nstep_by_hand():
    """One env, n=3, gamma=0.5: rewards 1, 2, 4, 8 with a truncation at step 2."""
    buf = make(3, gamma=0.5, num_envs=1)
    streams = Streams([[0]], 0.0, 0.0, seed=0)
    slot = streams.slot(0, 4)
    slot["reward"][:, 0] = [1, 2, 4, 8]
    slot["truncated"][:, 0] = [False, False, True, False]
    slot["final_obs"] = np.full((1, 2, OBS), np.nan, np.float32)  # env 0's rows
    slot["final_obs"][0, 0] = final = np.array([9, 9, 9, 9], np.float32)
    assert buf.add_slot(slot) == 3  # step 3 waits for two more rewards
    s = buf.storage
    assert s["reward"][:3].tolist() == [1 + 1 + 1, 2 + 2, 4]
    assert s["discount"][:3].tolist() == [0.125, 0.25, 0.5]
    assert s["done"][:3].tolist() == [0, 0, 0]
    assert all(np.array_equal(s["next_obs"][i], final) for i in range(3))
    assert buf.tail["pending"][0].tolist() == [False, True]


def test_a_restarted_worker_breaks_the_stream_without_mixing_episodes():
    """An env whose next slot does not start at its last bootstrap obs (its worker
    restarted) bootstraps its pending steps from that obs instead."""
    buf = make(3, num_envs=1, gamma=0.5)
    streams = Streams([[0]], 0.0, 0.0, seed=1)
    first = streams.slot(0, 4)
    assert buf.add_slot(first) == 2
    streams.envs[0].step += 100  # the restarted worker's env is somewhere else
    second = streams.slot(0, 4)
    assert buf.add_slot(second) == 4
    r = first["reward"][:, 0]
    rows = stored(buf)
    assert rows[(0, 2)]["reward"] == pytest.approx(r[2] + 0.5 * r[3])
    assert rows[(0, 3)]["reward"] == pytest.approx(r[3])
    assert rows[(0, 3)]["discount"] == 0.5
    for t in (2, 3):
        assert np.array_equal(rows[(0, t)]["next_obs"], first["bootstrap_obs"][0])
        assert rows[(0, t)]["done"] == 0


def test_wraparound_keeps_the_newest_rows():
    buf = make(1, capacity=10, num_envs=2)
    streams = Streams([[0, 1]], 0.1, 0.1, seed=2)
    for _ in range(3):
        buf.add_slot(streams.slot(0, 4))  # 8 transitions a slot
    assert buf.size == 10 and buf.inserted == 24
    assert sorted(buf.storage["stamp"].tolist()) == list(range(14, 24))


def test_uint8_frames_are_stored_and_sampled():
    frames = (84, 84)
    buf = ReplayBuffer(64, frames, np.uint8, (), np.int64, num_envs=2, n_step=2)
    rng = np.random.default_rng(3)
    obs = rng.integers(0, 256, (5, 2, *frames), dtype=np.uint8)
    boot = rng.integers(0, 256, (2, *frames), dtype=np.uint8)
    slot = {"obs": obs, "action": np.zeros((5, 2), np.int64),
            "reward": np.ones((5, 2), np.float32), "terminated": np.zeros((5, 2), bool),
            "truncated": np.zeros((5, 2), bool), "final_obs": np.zeros((2, 1, *frames),
                                                                        np.uint8),
            "bootstrap_obs": boot, "env_id": np.array([[0, 1]] * 5, np.int32)}
    assert buf.add_slot(slot) == 10 - 2
    batch = buf.sample(16, rng)
    assert batch["obs"].shape == (16, *frames) and batch["obs"].dtype == np.uint8
    for i, row in enumerate(batch["indices"]):
        t, e = divmod(int(row), 2)  # stored in stream-time order, env by env
        assert np.array_equal(batch["obs"][i], obs[t, e])
        nxt = obs[t + 2, e] if t + 2 < 5 else boot[e]
        assert np.array_equal(batch["next_obs"][i], nxt)


# -- sampling ----------------------------------------------------------------------------------

def filled(cls=PrioritizedReplayBuffer, capacity=64, slots=4, seed=0, **kw):
    """A buffer of ``cls`` filled with ``slots`` slots of two env groups; and the streams."""
    buf = make(3, capacity=capacity, num_envs=4, cls=cls, **kw)
    streams = Streams([[0, 1], [2, 3]], 0.1, 0.1, seed=seed)
    for i in range(slots):
        buf.add_slot(streams.slot(i % 2, 8))
    return buf, streams


def test_uniform_sample_gathers_the_rows_it_names():
    buf, _ = filled(ReplayBuffer)
    batch = buf.sample(32, np.random.default_rng(0))
    idx = batch["indices"]
    for key, src in [("obs", "obs"), ("action", "action"), ("reward", "reward"),
                     ("next_obs", "next_obs"), ("done", "done"), ("discount", "discount"),
                     ("stamps", "stamp")]:
        assert np.array_equal(batch[key], buf.storage[src][idx]), key
    assert (batch["weights"] == 1).all() and idx.min() >= 0 and idx.max() < buf.size


def test_sample_outputs_are_reused_per_batch_size():
    buf, _ = filled(ReplayBuffer)
    rng = np.random.default_rng(0)
    a, b, c = buf.sample(8, rng), buf.sample(8, rng), buf.sample(4, rng)
    assert a["obs"] is b["obs"] and c["obs"] is not a["obs"]


def test_sampling_frequencies_follow_priorities():
    """Chi-square of 200k stratified draws against P(i) = p_i^alpha / sum p^alpha."""
    buf, _ = filled(capacity=24, slots=4, alpha=0.7)
    rng = np.random.default_rng(1)
    prio = rng.uniform(0.1, 5.0, buf.size)
    order = np.arange(buf.size)
    assert buf.update_priorities(order, prio, buf.storage["stamp"][order]) == buf.size
    counts = np.zeros(buf.size)
    for _ in range(2_000):
        batch = buf.sample(100, rng, beta=0.5)
        counts += np.bincount(batch["indices"], minlength=buf.size)
    expected = counts.sum() * prio**0.7 / (prio**0.7).sum()
    chi2 = ((counts - expected) ** 2 / expected).sum()
    assert chi2 < 49.7  # df = 23, p = 0.001


def test_importance_weights_are_normalised_by_the_smallest_priority():
    buf, _ = filled(capacity=32, alpha=0.6)
    rng = np.random.default_rng(2)
    prio = rng.uniform(0.5, 3.0, buf.size)
    rows = np.arange(buf.size)
    buf.update_priorities(rows, prio, buf.storage["stamp"][rows])
    batch = buf.sample(64, rng, beta=0.4)
    p = prio**0.6
    want = (p[batch["indices"]] / p.min()) ** -0.4
    np.testing.assert_allclose(batch["weights"], want, rtol=1e-6)
    probs = p / p.sum()  # the definition: (N P(i))^-beta over its largest value
    definition = (buf.size * probs[batch["indices"]]) ** -0.4 / (buf.size * probs.min()) ** -0.4
    np.testing.assert_allclose(batch["weights"], definition, rtol=1e-6)


def test_new_transitions_enter_at_the_largest_priority():
    buf, streams = filled(alpha=0.5, capacity=200)
    assert np.all(buf.priority_leaves() == 1.0)
    batch = buf.sample(4, np.random.default_rng(0), beta=1.0)
    buf.update_priorities(batch["indices"], np.array([0.5, 9.0, 2.0, 3.0]), batch["stamps"])
    assert buf.max_priority == 9.0
    before = buf.size
    buf.add_slot(streams.slot(0, 8))
    assert np.all(buf.priority_leaves()[before:] == 3.0)  # 9 ** 0.5


def test_stale_priority_updates_are_dropped():
    buf, streams = filled(capacity=40, slots=3)
    batch = buf.sample(40, np.random.default_rng(0), beta=0.4)
    idx, stamps = batch["indices"].copy(), batch["stamps"].copy()
    overwritten = buf.add_slot(streams.slot(1, 8))  # the oldest rows are replaced
    fresh = buf.storage["stamp"][idx] == stamps
    assert 0 < fresh.sum() < len(idx)
    leaves = buf.priority_leaves().copy()
    applied = buf.update_priorities(idx, np.full(len(idx), 7.0), stamps)
    assert applied == fresh.sum() and overwritten > 0
    changed = buf.priority_leaves() != leaves
    assert set(np.flatnonzero(changed)) == set(idx[fresh])


@pytest.mark.parametrize("bad", [0.0, -1.0, np.nan, np.inf, -np.inf])
def test_invalid_priorities_are_rejected_and_nothing_changes(bad):
    buf, _ = filled()
    leaves = buf.priority_leaves().copy()
    prio = np.array([1.0, 2.0, bad, 3.0])
    with pytest.raises(ReplayError, match=r"1 of 4 priorities .* e\.g\. .* for index 2"):
        buf.update_priorities(np.arange(4), prio, buf.storage["stamp"][:4])
    assert np.array_equal(buf.priority_leaves(), leaves)


def test_out_of_range_indices_and_shapes_are_rejected():
    buf, _ = filled()
    with pytest.raises(ReplayError, match="not stored rows"):
        buf.update_priorities(np.array([0, buf.size]), np.ones(2), np.zeros(2))
    with pytest.raises(ReplayError, match="one length"):
        buf.update_priorities(np.arange(3), np.ones(2), np.zeros(3))


def test_td_priorities_and_beta_schedule():
    buf, _ = filled(eps=0.01)
    np.testing.assert_allclose(buf.td_priorities([-2.0, 0.0, 1.5]), [2.01, 0.01, 1.51])
    beta = linear_schedule(0.4, 1.0, 100)
    assert [beta(-5), beta(0), beta(50), beta(100), beta(10**9)] == pytest.approx(
        [0.4, 0.4, 0.7, 1.0, 1.0])
    with pytest.raises(ValueError, match="duration"):
        linear_schedule(0.4, 1.0, 0)


# -- state -------------------------------------------------------------------------------------

@pytest.mark.parametrize("cls", [ReplayBuffer, PrioritizedReplayBuffer])
def test_state_round_trip_through_npz_continues_identically(cls, tmp_path):
    buf, streams = filled(cls, capacity=50, slots=5)  # wrapped, with pending tails
    kw = {"beta": 0.5} if cls is PrioritizedReplayBuffer else {}
    if kw:
        batch = buf.sample(16, np.random.default_rng(0), **kw)
        buf.update_priorities(batch["indices"], np.linspace(0.1, 4, 16), batch["stamps"])
    np.savez(tmp_path / "replay.npz", **buf.state_dict())
    copy, _ = filled(cls, capacity=50, slots=0)
    with np.load(tmp_path / "replay.npz") as saved:
        copy.load_state_dict(saved)
    slot = streams.slot(0, 8)
    assert buf.add_slot(slot) == copy.add_slot(slot)
    rng_one, rng_two = np.random.default_rng(7), np.random.default_rng(7)
    for _ in range(3):
        one, two = buf.sample(32, rng_one, **kw), copy.sample(32, rng_two, **kw)
        for key in one:
            assert np.array_equal(one[key], two[key]), key
        if kw:
            prio = np.abs(one["reward"]) + 0.1
            assert buf.update_priorities(one["indices"], prio, one["stamps"]) == \
                copy.update_priorities(two["indices"], prio, two["stamps"])
    for key, value in buf.state_dict().items():
        assert np.array_equal(value, copy.state_dict()[key]), key


@pytest.mark.parametrize("other, words", [
    ({"capacity": 99}, "capacity: state has 50, buffer has 99"),
    ({"obs_dtype": np.float64}, "obs_dtype: state has 'float32', buffer has 'float64'"),
    ({"n_step": 2}, "n_step"),
    ({"obs_shape": (5,)}, r"obs_shape: state has \(4,\), buffer has \(5,\)"),
])
def test_mismatched_state_is_rejected_by_name(other, words):
    buf, _ = filled(ReplayBuffer, capacity=50)
    args = {"capacity": 50, "obs_shape": (OBS,), "obs_dtype": np.float32, "act_shape": (),
            "act_dtype": np.int64, "num_envs": 4, "n_step": 3, **other}
    with pytest.raises(ReplayError, match=words):
        ReplayBuffer(**args).load_state_dict(buf.state_dict())


def test_state_of_the_other_kind_or_truncated_is_rejected():
    uniform, _ = filled(ReplayBuffer)
    prioritized, _ = filled(PrioritizedReplayBuffer)
    with pytest.raises(ReplayError, match="'uniform' buffer, this one is 'prioritized'"):
        prioritized.load_state_dict(uniform.state_dict())
    state = prioritized.state_dict()
    del state["priority_leaves"]
    with pytest.raises(ReplayError, match=r"lacks \['priority_leaves'\]"):
        prioritized.load_state_dict(state)


# -- errors ------------------------------------------------------------------------------------

def test_sampling_an_empty_buffer_says_so():
    with pytest.raises(ReplayError, match="empty"):
        make().sample(4, np.random.default_rng(0))
    with pytest.raises(ReplayError, match="empty"):
        make(cls=PrioritizedReplayBuffer).sample(4, np.random.default_rng(0), beta=0.4)


@pytest.mark.parametrize("kw, words", [
    ({"capacity": 0}, "capacity must be an integer >= 1"), ({"n_step": 0}, "n_step"),
    ({"gamma": 0.0}, r"gamma must be in \(0, 1\]"), ({"gamma": 1.5}, "gamma"),
    ({"alpha": -0.1}, "alpha must be finite and >= 0"), ({"eps": 0.0}, "eps must be"),
    ({"alpha": float("nan")}, "alpha"),
])
def test_bad_constructor_arguments_are_named(kw, words):
    args = {"capacity": 8, "obs_shape": (OBS,), "obs_dtype": np.float32, "act_shape": (),
            "act_dtype": np.int64, "num_envs": 1, **kw}
    with pytest.raises(ReplayError, match=words):
        PrioritizedReplayBuffer(**args)


def test_bad_slots_are_named():
    buf = make(num_envs=2)
    slot = Streams([[0, 1]], 0, 0, seed=0).slot(0, 3)
    with pytest.raises(ReplayError, match=r"lacks \['final_obs'\]"):
        buf.add_slot({k: v for k, v in slot.items() if k != "final_obs"})
    with pytest.raises(ReplayError, match=r"'obs' has shape \(3, 2, 5\), expected \(3, 2, 4\)"):
        buf.add_slot({**slot, "obs": np.zeros((3, 2, 5), np.float32)})
    with pytest.raises(ReplayError, match="env_id 2 is outside 0 .. 1"):
        buf.add_slot({**slot, "env_id": slot["env_id"] + 1})
    with pytest.raises(ReplayError, match="repeats"):
        buf.add_slot({**slot, "env_id": np.zeros_like(slot["env_id"])})
    two = np.zeros((3, 2), bool)
    two[:2, 1] = True  # env 1 truncated twice, and the slot keeps one row per env
    with pytest.raises(ReplayError, match="keeps 1 final observation.*truncated 2 episodes"):
        buf.add_slot({**slot, "truncated": two})
    buf.add_slot(slot)
    with pytest.raises(ReplayError, match="batch_size must be an integer >= 1"):
        buf.sample(0, np.random.default_rng(0))
