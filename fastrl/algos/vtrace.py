"""V-trace off-policy targets (Espeholt et al. 2018, IMPALA, section 4), on a ring batch.

Same conventions as :func:`fastrl.algos.ppo.compute_gae`: time-major ``[T, *env_dims]``,
``next_values[t]`` is the value of the state after step ``t`` of the same episode, termination
ends the return, truncation bootstraps from the value of the real final observation, and every
episode end cuts the recursion.
"""

from __future__ import annotations

import torch


@torch.no_grad()
def vtrace(
    behaviour_logp: torch.Tensor,
    target_logp: torch.Tensor,
    rewards: torch.Tensor,
    values: torch.Tensor,
    next_values: torch.Tensor,
    terminated: torch.Tensor,
    truncated: torch.Tensor,
    gamma: float,
    rho_bar: float = 1.0,
    c_bar: float = 1.0,
    lam: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """V-trace value targets and policy-gradient advantages, ``(vs, pg_advantages)``.

    All tensors are time-major ``[T, *env_dims]`` of one shape; ``terminated`` and
    ``truncated`` are bool. ``behaviour_logp`` is log mu(a_t|x_t) of the actor that acted,
    ``target_logp`` log pi(a_t|x_t) of the learner's policy, ``values[t]`` V(x_t) under the
    learner's value function. ``next_values[t]`` is the value of the state after step ``t`` of
    the same episode: ``V(x_{t+1})`` mid-episode, the bootstrap observation's value at
    ``t = T-1``, ``V(final_obs[t])`` where truncated, anything where terminated.

    With ``rho_t = min(rho_bar, pi/mu)``, ``c_t = lam * min(c_bar, pi/mu)``,
    ``done = terminated | truncated`` and
    ``delta_t = rho_t (r_t + gamma (1 - term_t) next_values[t] - values[t])``::

        vs_t = values[t] + delta_t + gamma c_t (1 - done_t) (vs_{t+1} - values[t+1])
        pg_t = rho_t (r_t + gamma (1 - term_t) vs_next_t - values[t])

    where the correction after step ``T-1`` is 0 and ``vs_next_t``, the v-trace target of the
    state after ``t`` in the same episode, is ``next_values[t]`` plus the correction of
    ``t+1`` unless the episode ended at ``t``. Both results have the shape, dtype and device
    of the inputs. No host synchronisation: only tensor ops and one loop over ``T``.
    """
    shape = rewards.shape
    for name, x in (("behaviour_logp", behaviour_logp), ("target_logp", target_logp),
                    ("values", values), ("next_values", next_values),
                    ("terminated", terminated), ("truncated", truncated)):
        # Broadcasting (say values [T, N, 1] against rewards [T, N]) would silently mix envs.
        if x.shape != shape:
            raise ValueError(f"{name} has shape {tuple(x.shape)}, rewards {tuple(shape)}")

    # exp of the log difference, not a ratio of probabilities: no underflow for rare actions.
    ratio = (target_logp - behaviour_logp).exp()
    rho = ratio.clamp(max=rho_bar)
    c = lam * ratio.clamp(max=c_bar)
    done = terminated | truncated
    # masked_fill, not a multiply by (1 - term): next_values past a termination is "anything",
    # and inf * 0 would poison the whole trace with NaN.
    boot = next_values.masked_fill(terminated, 0.0)
    deltas = rho * (rewards + gamma * boot - values)
    # The trace coefficient is zero across an episode end, so the next episode's correction
    # cannot leak into this one's targets.
    decay = (gamma * c).masked_fill(done, 0.0)

    corr = torch.empty_like(deltas)  # vs - values
    acc = torch.zeros_like(deltas[0])
    for t in range(shape[0] - 1, -1, -1):
        acc = deltas[t] + decay[t] * acc
        corr[t] = acc
    vs = values + corr

    # vs_{t+1} is the state after t's target only mid-episode: after an episode end (or the
    # last step) no step of this slot starts from that state, so its target is its value.
    next_corr = torch.zeros_like(corr)
    next_corr[:-1] = corr[1:]
    vs_next = boot + next_corr.masked_fill(done, 0.0)
    pg_advantages = rho * (rewards + gamma * vs_next - values)
    return vs, pg_advantages
