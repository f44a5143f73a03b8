"""V-trace against a direct numpy reading of the paper's sum form; its special cases."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from fastrl.algos.ppo import compute_gae
from fastrl.algos.vtrace import vtrace

CLIPS = [(1.0, 1.0, 1.0), (0.5, 2.0, 0.95), (2.0, 1.0, 1.0)]  # (rho_bar, c_bar, lam)


def reference(blogp, tlogp, rewards, values, next_values, terminated, truncated,
              gamma, rho_bar, c_bar, lam):
    """(vs, pg_adv) from Espeholt et al. (2018), eq. (1) and section 4.2, one env at a time:
    vs_s = V(x_s) + sum_{t=s}^{e} gamma^(t-s) (prod_{i=s}^{t-1} c_i) delta_t, with e the last
    step of s's episode in the slot; pg_s = rho_s (r_s + gamma v_{s+1} - V(x_s))."""
    T, N = rewards.shape
    vs = np.zeros((T, N))
    pg = np.zeros((T, N))
    for n in range(N):
        ratio = [math.exp(float(tlogp[t, n]) - float(blogp[t, n])) for t in range(T)]
        rho = [min(rho_bar, x) for x in ratio]
        c = [lam * min(c_bar, x) for x in ratio]
        done = [bool(terminated[t, n] or truncated[t, n]) for t in range(T)]
        delta = []
        for t in range(T):
            bootstrap = 0.0 if terminated[t, n] else gamma * float(next_values[t, n])
            delta.append(rho[t] * (float(rewards[t, n]) + bootstrap - float(values[t, n])))
        for s in range(T):
            e = s
            while not done[e] and e < T - 1:
                e += 1
            total = float(values[s, n])
            for t in range(s, e + 1):
                total += gamma ** (t - s) * math.prod(c[s:t]) * delta[t]
            vs[s, n] = total
        for s in range(T):
            if terminated[s, n]:
                q = float(rewards[s, n])
            elif done[s] or s == T - 1:  # the state after s is not in the slot
                q = float(rewards[s, n]) + gamma * float(next_values[s, n])
            else:
                q = float(rewards[s, n]) + gamma * vs[s + 1, n]
            pg[s, n] = rho[s] * (q - float(values[s, n]))
    return vs, pg


def make_batch(seed, T=20, shape=(7,), dtype=torch.float64, p_end=0.1):
    """Random data laid out as the collector and PPO.advantages lay it out: next_values[t] is
    values[t+1] mid-episode, a bootstrap / final-observation value at T-1 and at truncations,
    garbage at terminations. Ratios pi/mu spread over about [0.1, 10]."""
    g = torch.Generator().manual_seed(seed)
    size = (T, *shape)
    blogp = -2.0 * torch.rand(size, generator=g, dtype=torch.float64)
    tlogp = blogp + 0.8 * torch.randn(size, generator=g, dtype=torch.float64)
    rewards = torch.randn(size, generator=g, dtype=torch.float64)
    values = torch.randn(size, generator=g, dtype=torch.float64)
    u = torch.rand(size, generator=g, dtype=torch.float64)
    terminated = u < p_end
    truncated = (u >= p_end) & (u < 2 * p_end)  # never both at one step
    next_values = torch.cat([values[1:], torch.randn((1, *shape), generator=g,
                                                     dtype=torch.float64)])
    other = 3.0 * torch.randn(size, generator=g, dtype=torch.float64)
    next_values = torch.where(truncated | terminated, other, next_values)
    return {"behaviour_logp": blogp.to(dtype), "target_logp": tlogp.to(dtype),
            "rewards": rewards.to(dtype), "values": values.to(dtype),
            "next_values": next_values.to(dtype), "terminated": terminated,
            "truncated": truncated}


def run_reference(b, gamma, rho_bar=1.0, c_bar=1.0, lam=1.0):
    """:func:`reference` (vs, pg_adv) of a batch of :func:`make_batch`, in float64."""
    a = {k: v.double().numpy() if v.is_floating_point() else v.numpy() for k, v in b.items()}
    return reference(a["behaviour_logp"], a["target_logp"], a["rewards"], a["values"],
                     a["next_values"], a["terminated"], a["truncated"],
                     gamma, rho_bar, c_bar, lam)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize("rho_bar, c_bar, lam", CLIPS)
def test_matches_paper_sum_form_float64(seed, rho_bar, c_bar, lam):
    b = make_batch(seed)
    ratio = (b["target_logp"] - b["behaviour_logp"]).exp()
    # the data exercises both sides of every clip, and every kind of step
    assert (ratio < 0.5).any() and (ratio > 2.0).any()
    assert b["terminated"].any() and b["truncated"].any()
    assert (b["terminated"] | b["truncated"])[:-1].logical_not().any()
    vs, pg = vtrace(**b, gamma=0.9, rho_bar=rho_bar, c_bar=c_bar, lam=lam)
    ref_vs, ref_pg = run_reference(b, 0.9, rho_bar, c_bar, lam)
    assert vs.dtype == pg.dtype == torch.float64
    assert vs.shape == pg.shape == b["rewards"].shape
    np.testing.assert_allclose(vs.numpy(), ref_vs, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(pg.numpy(), ref_pg, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("seed", [10, 11])
@pytest.mark.parametrize("rho_bar, c_bar, lam", CLIPS)
def test_matches_paper_sum_form_float32(seed, rho_bar, c_bar, lam):
    b = make_batch(seed, dtype=torch.float32)
    vs, pg = vtrace(**b, gamma=0.99, rho_bar=rho_bar, c_bar=c_bar, lam=lam)
    ref_vs, ref_pg = run_reference(b, 0.99, rho_bar, c_bar, lam)
    assert vs.dtype == pg.dtype == torch.float32
    np.testing.assert_allclose(vs.numpy(), ref_vs, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(pg.numpy(), ref_pg, rtol=1e-5, atol=1e-5)


def test_hand_computed_two_steps():
    # One env, T=2, no episode end; gamma 0.5. Ratios e^{ln 2} = 2 (clipped to rho_bar=1,
    # c = 0.5 * min(1.5, 2) = 0.75) and e^{-ln 2} = 0.5 (rho = c/lam = 0.5).
    # delta0 = 1 * (1 + 0.5*2 - 1) = 1; delta1 = 0.5 * (2 + 0.5*4 - 2) = 1
    # vs1 = 2 + 1 = 3; vs0 = 1 + 1 + 0.5*0.75*1 = 2.375
    # pg0 = 1 * (1 + 0.5*vs1 - 1) = 1.5; pg1 = 0.5 * (2 + 0.5*4 - 2) = 1
    col = lambda xs, dt=torch.float64: torch.tensor(xs, dtype=dt).reshape(2, 1)  # noqa: E731
    vs, pg = vtrace(col([0.0, 0.0]), col([math.log(2), -math.log(2)]), col([1.0, 2.0]),
                    col([1.0, 2.0]), col([2.0, 4.0]), col([False, False], torch.bool),
                    col([False, False], torch.bool), gamma=0.5, rho_bar=1.0, c_bar=1.5,
                    lam=0.5)
    assert vs.flatten().tolist() == pytest.approx([2.375, 3.0])
    assert pg.flatten().tolist() == pytest.approx([1.5, 1.0])


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("gamma", [0.9, 0.99])
def test_on_policy_equals_lambda_one_returns(seed, gamma):
    # float32 as in training: compute_gae works in float32 (its masks are .float()).
    b = make_batch(seed, dtype=torch.float32)
    b["target_logp"] = b["behaviour_logp"].clone()
    vs, pg = vtrace(**b, gamma=gamma)
    adv = compute_gae(b["rewards"], b["values"], b["next_values"], b["terminated"],
                      b["truncated"], gamma, lam=1.0)
    torch.testing.assert_close(vs, adv + b["values"], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(pg, adv, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("lam", [0.9, 0.5])
def test_on_policy_values_equal_gae_returns(lam):
    # rho = 1, c = lam: the trace is TD(lambda), vs - V the GAE(lambda) advantage.
    b = make_batch(5, dtype=torch.float32)
    b["target_logp"] = b["behaviour_logp"].clone()
    vs, _ = vtrace(**b, gamma=0.95, lam=lam)
    adv = compute_gae(b["rewards"], b["values"], b["next_values"], b["terminated"],
                      b["truncated"], 0.95, lam=lam)
    torch.testing.assert_close(vs, adv + b["values"], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("end", ["terminated", "truncated", None])
def test_episode_end_cuts_the_trace(end):
    T, k = 10, 4
    b = make_batch(7, T=T, shape=(3,), p_end=0.0)
    if end is not None:
        b[end][k] = True
    # ratios above 1 everywhere: unclipped c would carry the later episode's corrections back
    b["target_logp"] = b["behaviour_logp"] + 0.5
    vs, pg = vtrace(**b, gamma=0.9, rho_bar=2.0, c_bar=2.0)

    later = {key: v.clone() for key, v in b.items()}
    later["rewards"][k + 1:] += 5.0
    later["values"][k + 1:] -= 3.0
    later["target_logp"][k + 1:] += 0.3
    vs2, pg2 = vtrace(**later, gamma=0.9, rho_bar=2.0, c_bar=2.0)

    assert not torch.allclose(vs2[k + 1:], vs[k + 1:])  # the change is real
    if end is None:  # control: within one episode the later steps do flow back
        assert not torch.allclose(vs2[k], vs[k])
        assert not torch.allclose(pg2[k], pg[k])
    else:
        assert torch.equal(vs2[: k + 1], vs[: k + 1])
        assert torch.equal(pg2[: k + 1], pg[: k + 1])


def test_truncation_bootstraps_from_next_values_termination_does_not():
    b = make_batch(8, T=6, shape=(2,), p_end=0.0)
    b["terminated"][2, 0] = True
    b["truncated"][2, 1] = True
    vs, pg = vtrace(**b, gamma=0.9)
    changed = {key: v.clone() for key, v in b.items()}
    changed["next_values"][2] += 10.0  # V(final obs) / garbage after the termination
    vs2, pg2 = vtrace(**changed, gamma=0.9)
    assert torch.equal(vs2[:, 0], vs[:, 0]) and torch.equal(pg2[:, 0], pg[:, 0])
    assert not torch.allclose(vs2[2, 1], vs[2, 1])
    assert not torch.allclose(pg2[2, 1], pg[2, 1])


def test_garbage_after_termination_may_be_non_finite():
    b = make_batch(9)
    assert b["terminated"].any()
    vs, pg = vtrace(**b, gamma=0.9, rho_bar=0.5, c_bar=2.0, lam=0.95)
    for garbage in (math.inf, math.nan):
        bad = dict(b, next_values=b["next_values"].masked_fill(b["terminated"], garbage))
        vs2, pg2 = vtrace(**bad, gamma=0.9, rho_bar=0.5, c_bar=2.0, lam=0.95)
        assert torch.equal(vs2, vs) and torch.equal(pg2, pg)


def test_pg_bootstraps_from_next_value_plus_next_correction():
    # vs_next_t = next_values[t] + (vs_{t+1} - values[t+1]) mid-episode: moving next_values[t]
    # by d (values[t+1] kept) moves pg_t by rho_t * gamma * d (and vs_{t+1} not at all).
    b = make_batch(4, T=5, shape=(1,), p_end=0.0)
    vs, pg = vtrace(**b, gamma=0.9)
    moved = dict(b, next_values=b["next_values"].clone())
    moved["next_values"][1] += 1.0
    vs2, pg2 = vtrace(**moved, gamma=0.9)
    rho = (b["target_logp"][1] - b["behaviour_logp"][1]).exp().clamp(max=1.0)
    torch.testing.assert_close(pg2[1] - pg[1], rho * 0.9, rtol=1e-12, atol=1e-12)
    assert torch.equal(vs2[2:], vs[2:])


@pytest.mark.parametrize("rho_bar, c_bar, lam", CLIPS)
def test_trailing_env_dims_match_flattened(rho_bar, c_bar, lam):
    T = 20
    b = make_batch(6, T=T, shape=(2, 3))
    vs, pg = vtrace(**b, gamma=0.9, rho_bar=rho_bar, c_bar=c_bar, lam=lam)
    assert vs.shape == pg.shape == (T, 2, 3)
    flat = {key: v.reshape(T, 6) for key, v in b.items()}
    vs_f, pg_f = vtrace(**flat, gamma=0.9, rho_bar=rho_bar, c_bar=c_bar, lam=lam)
    torch.testing.assert_close(vs.reshape(T, 6), vs_f, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(pg.reshape(T, 6), pg_f, rtol=1e-12, atol=1e-12)
    ref_vs, ref_pg = run_reference(flat, 0.9, rho_bar, c_bar, lam)
    np.testing.assert_allclose(vs_f.numpy(), ref_vs, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(pg_f.numpy(), ref_pg, rtol=1e-12, atol=1e-12)


def test_no_host_sync_and_no_graph():
    # Meta tensors have no data: .item(), .cpu(), .tolist(), bool(tensor) all raise on them,
    # so this runs only if vtrace never reads a value on the host.
    b = {k: v.to("meta") for k, v in make_batch(0, dtype=torch.float32).items()}
    vs, pg = vtrace(**b, gamma=0.99, rho_bar=0.5, c_bar=2.0, lam=0.95)
    assert vs.device.type == pg.device.type == "meta"
    assert vs.dtype == pg.dtype == torch.float32 and vs.shape == b["rewards"].shape

    g = make_batch(0)
    for key in ("behaviour_logp", "target_logp", "values", "next_values"):
        g[key].requires_grad_(True)
    vs, pg = vtrace(**g, gamma=0.99)
    assert not vs.requires_grad and not pg.requires_grad


def test_mismatched_shapes_are_refused():
    b = make_batch(0)
    b["values"] = b["values"][..., None]  # [T, N, 1] would broadcast against [T, N]
    with pytest.raises(ValueError, match="values"):
        vtrace(**b, gamma=0.9)
