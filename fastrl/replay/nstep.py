"""N-step transitions from trajectory slots, kept per env across slot boundaries (numba).

Each env's experience is a stream: the ``n - 1`` steps the env's previous slot left
unfinished (its *tail*), then the ``T`` steps of the new slot. The transition of step ``t``
sums up to ``n`` rewards from ``t`` on and stops early at the first step that ends an
episode: a termination stores ``done = 1``; a truncation bootstraps from that step's real
final observation. ``discount`` is ``gamma ** k`` for the ``k`` rewards summed. A step whose
window neither reached ``n`` rewards nor hit an episode end stays in the tail, pending,
until the env's next slot completes it; the tail always holds the stream's last ``n - 1``
steps, so a slot shorter than ``n - 1`` steps works too.

A restarted worker starts fresh episodes without ending the old ones. An env whose new slot
does not begin with the observation its previous slot ended on (compared bit for bit) had
its stream broken: its tail's last step is treated as truncated, so the pending steps
bootstrap from the observation that followed it instead of running into another episode.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from fastrl.replay.rows import copy_row

# Per-env tail arrays, in the order insert_nstep takes them (shapes: [num_envs, n - 1, ...]
# except bootstrap_obs [num_envs, ...] and seen [num_envs]).
TAIL_FIELDS = ("obs", "action", "reward", "terminated", "truncated", "next_obs", "pending",
               "bootstrap_obs", "seen")


@njit(cache=True, nogil=True, inline="always")
def _at(tail, slot, env, e, j, held):
    """Step ``j`` of env ``e``'s stream (run-wide id ``env``): tail or slot."""
    return tail[env, j] if j < held else slot[j - held, e]


@njit(cache=True, nogil=True, inline="always")
def _truncated(t_trunc, truncated, env, e, j, held, broken):
    """Whether step ``j`` truncated its episode, counting a broken stream's last tail step."""
    return _at(t_trunc, truncated, env, e, j, held) or (broken and j == held - 1)


@njit(cache=True, nogil=True, inline="always")
def _successor(t_next, obs, final_obs, bootstrap_obs, truncated, env, e, j, held):
    """The observation that followed step ``j``: its final observation where it truncated,
    else the next step's observation, or the slot's bootstrap observation after its last
    step. Tail steps kept theirs."""
    if j < held:
        return t_next[env, j]
    q = j - held
    if truncated[q, e]:
        return final_obs[q, e]
    if q + 1 < obs.shape[0]:
        return obs[q + 1, e]
    return bootstrap_obs[e]


@njit(cache=True, nogil=True)
def _broken(obs, env_ids, t_boot, t_seen, held):
    """Envs whose slot does not start where their previous slot ended."""
    broken = np.zeros(env_ids.shape[0], np.bool_)
    if held == 0:
        return broken  # no tail: nothing crosses the boundary
    for e in range(env_ids.shape[0]):
        env = env_ids[e]
        if t_seen[env]:
            first, last = obs[0, e], t_boot[env]
            for k in range(first.shape[0]):
                if first[k] != last[k]:
                    broken[e] = True
                    break
    return broken


@njit(cache=True, nogil=True)
def insert_nstep(slot: tuple, env_ids: np.ndarray, tail: tuple, store: tuple, cursor: int,
                 stamp0: int, n: int, gamma: float) -> int:
    """Write every completed n-step transition of one slot into the store; update the tails.

    ``slot``: obs, action, final_obs as ``[T, E, words]``, reward ``[T, E]`` float32,
    terminated and truncated ``[T, E]`` bool, bootstrap_obs ``[E, words]``. ``env_ids``: the
    run-wide id of each slot column. ``tail``: the arrays of :data:`TAIL_FIELDS`, obs-like
    ones as words. ``store``: obs, action, next_obs as ``[capacity, words]``, then reward,
    done, discount (float32) and stamp (int64) ``[capacity]``. Rows are written from
    ``cursor`` on, wrapping, stamped ``stamp0, stamp0 + 1, ...``, in stream-time order.
    Returns how many were written.
    """
    obs, action, reward, terminated, truncated, final_obs, bootstrap_obs = slot
    t_obs, t_action, t_reward, t_term, t_trunc, t_next, t_pending, t_boot, t_seen = tail
    s_obs, s_action, s_next, s_reward, s_done, s_discount, s_stamp = store
    steps, envs = reward.shape
    held = n - 1
    length = held + steps
    capacity = s_reward.shape[0]
    broken = _broken(obs, env_ids, t_boot, t_seen, held)
    keep = np.zeros((held, envs), np.bool_)  # pending flags of the new tails
    count = 0
    for t in range(length):
        for e in range(envs):
            env = env_ids[e]
            if t < held and not t_pending[env, t]:
                continue
            ret, discount, end, ended, term = 0.0, 1.0, t, False, False
            for j in range(t, min(t + n, length)):
                ret += discount * _at(t_reward, reward, env, e, j, held)
                discount *= gamma
                end = j
                term = _at(t_term, terminated, env, e, j, held)
                if term or _truncated(t_trunc, truncated, env, e, j, held, broken[e]):
                    ended = True
                    break
            if not ended and t + n > length:
                keep[t - steps, e] = True  # fewer than n rewards so far: wait for more
                continue
            row = (cursor + count) % capacity
            copy_row(s_obs[row], _at(t_obs, obs, env, e, t, held))
            copy_row(s_action[row], _at(t_action, action, env, e, t, held))
            copy_row(s_next[row], _successor(t_next, obs, final_obs, bootstrap_obs, truncated,
                                             env, e, end, held))
            s_reward[row] = ret
            s_done[row] = term
            s_discount[row] = discount
            s_stamp[row] = stamp0 + count
            count += 1
    _roll_tails(slot, env_ids, tail, broken, keep)
    return count


@njit(cache=True, nogil=True)
def _roll_tails(slot, env_ids, tail, broken, keep):
    """Make each env's tail the last ``n - 1`` steps of its stream.

    Shifting in place is safe: tail step ``i`` is read from stream step ``T + i > i``,
    which has not been overwritten yet."""
    obs, action, reward, terminated, truncated, final_obs, bootstrap_obs = slot
    t_obs, t_action, t_reward, t_term, t_trunc, t_next, t_pending, t_boot, t_seen = tail
    steps = reward.shape[0]
    held = keep.shape[0]
    for e in range(env_ids.shape[0]):
        env = env_ids[e]
        for i in range(held):
            j = steps + i
            copy_row(t_obs[env, i], _at(t_obs, obs, env, e, j, held))
            copy_row(t_action[env, i], _at(t_action, action, env, e, j, held))
            copy_row(t_next[env, i], _successor(t_next, obs, final_obs, bootstrap_obs,
                                                truncated, env, e, j, held))
            t_reward[env, i] = _at(t_reward, reward, env, e, j, held)
            t_term[env, i] = _at(t_term, terminated, env, e, j, held)
            t_trunc[env, i] = _truncated(t_trunc, truncated, env, e, j, held, broken[e])
            t_pending[env, i] = keep[i, e]
        copy_row(t_boot[env], bootstrap_obs[e])
        t_seen[env] = True
