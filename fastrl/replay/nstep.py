"""N-step transitions from trajectory slots, kept per env across slot boundaries (numba).

Each env's experience is a stream: the ``n - 1`` steps the env's previous slot left behind
(its *tail*), then the ``T`` steps of the new slot. The transition of step ``t`` sums up to
``n`` rewards from ``t`` on and stops early at the first step that ends an episode: a
termination stores ``done = 1``; a truncation bootstraps from that step's real final
observation. ``discount`` is ``gamma ** k`` for the ``k`` rewards summed. A step whose
window neither reached ``n`` rewards nor hit an episode end stays in the tail, pending,
until the env's next slot completes it; the tail always holds the stream's last ``n - 1``
steps, so a slot shorter than ``n - 1`` steps works too.

A restarted worker starts fresh episodes without ending the old ones. An env whose new slot
does not begin with the observation its previous slot ended on (compared bit for bit) had
its stream broken: its tail's last step is treated as truncated, so the pending steps
bootstrap from the observation that followed it instead of running into another episode.

Streams are tuples ``(obs, action, reward, terminated, truncated, final_obs, final_at,
bootstrap_obs)`` of time-major ``[L, E, ...]`` arrays (obs-like ones as words), except
``final_obs`` ``[rows, words]``, the final observations of truncated steps, found at row
``final_at[t, e]`` (int32 ``[L, E]``, read where truncated), and bootstrap_obs ``[E, words]``:
a slot is one (its sparse final observations as they are), and so is the *head* built per
call from the tails and the slot's first ``n - 1`` steps, the only place where windows
cross the slot boundary. The hot loop then indexes plain arrays: helper calls that take arrays, or a
choice between tail and slot per element, made it ten times slower.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from fastrl.replay.rows import copy_row

# Per-env tail arrays, in the order insert_nstep takes them (shapes: [num_envs, n - 1, ...]
# except bootstrap_obs [num_envs, ...] and seen [num_envs]). next_obs is the observation
# that followed the step (its final one where it truncated).
TAIL_FIELDS = ("obs", "action", "reward", "terminated", "truncated", "next_obs", "pending",
               "bootstrap_obs", "seen")


@njit(cache=True, nogil=True)
def insert_nstep(slot: tuple, env_ids: np.ndarray, tail: tuple, store: tuple, cursor: int,
                 stamp0: int, n: int, gamma: float) -> int:
    """Write every completed n-step transition of one slot into the store; update the tails.

    ``slot``: a stream (see the module). ``env_ids``: the run-wide id of each slot column.
    ``tail``: the arrays of :data:`TAIL_FIELDS`, obs-like ones as words. ``store``: obs,
    action, next_obs as ``[capacity, words]``, then reward, done, discount (float32) and
    stamp (int64) ``[capacity]``. Rows are written from ``cursor`` on, wrapping, stamped
    ``stamp0, stamp0 + 1, ...``, in stream-time order. Returns how many were written.
    """
    steps, envs = slot[2].shape
    held = n - 1
    head, head_pending = _head(slot, env_ids, tail, held)
    keep = np.zeros((held, envs), np.bool_)  # pending flags of the new tails
    # new tail step i is stream step T + i: head step T + i, or slot step T + i - held
    count = _emit(head, head_pending, held, n, gamma, store, cursor, stamp0, 0, keep, -steps)
    count = _emit(slot, np.ones((steps, envs), np.bool_), steps, n, gamma, store, cursor,
                  stamp0, count, keep, held - steps)
    if steps >= held:
        _roll_tails(slot, steps - held, env_ids, tail, keep)
    else:  # the head is the whole stream
        _roll_tails(head, steps, env_ids, tail, keep)
    return count


@njit(cache=True, nogil=True)
def _head(slot, env_ids, tail, held):
    """The stream's first steps as a stream of their own: the ``held`` tail steps, then the
    slot's first ``min(held, T)``; and which of them are pending (tail steps only)."""
    obs, action, reward, terminated, truncated, final_obs, final_at, bootstrap_obs = slot
    t_obs, t_action, t_reward, t_term, t_trunc, t_next, t_pending, t_boot, t_seen = tail
    steps, envs = reward.shape
    fresh = min(held, steps)
    length = held + fresh
    h_obs = np.empty((length, envs, obs.shape[2]), obs.dtype)
    h_action = np.empty((length, envs, action.shape[2]), action.dtype)
    h_final = np.empty((length * envs, obs.shape[2]), obs.dtype)
    h_final_at = np.empty((length, envs), np.int32)
    h_reward = np.empty((length, envs), reward.dtype)
    h_term = np.empty((length, envs), np.bool_)
    h_trunc = np.empty((length, envs), np.bool_)
    pending = np.zeros((length, envs), np.bool_)
    for e in range(envs):
        env = env_ids[e]
        broken = False
        if held and t_seen[env]:
            for k in range(obs.shape[2]):
                broken |= obs[0, e, k] != t_boot[env, k]
        for j in range(held):
            copy_row(h_obs[j, e], t_obs[env, j])
            copy_row(h_action[j, e], t_action[env, j])
            h_final_at[j, e] = j * envs + e
            copy_row(h_final[j * envs + e], t_next[env, j])  # the successor where truncated
            h_reward[j, e] = t_reward[env, j]
            h_term[j, e] = t_term[env, j]
            h_trunc[j, e] = t_trunc[env, j] or (broken and j == held - 1)
            pending[j, e] = t_pending[env, j]
        for q in range(fresh):
            copy_row(h_obs[held + q, e], obs[q, e])
            copy_row(h_action[held + q, e], action[q, e])
            h_final_at[held + q, e] = (held + q) * envs + e
            if truncated[q, e]:
                copy_row(h_final[(held + q) * envs + e], final_obs[final_at[q, e]])
            h_reward[held + q, e] = reward[q, e]
            h_term[held + q, e] = terminated[q, e]
            h_trunc[held + q, e] = truncated[q, e]
    after = obs[fresh] if fresh < steps else bootstrap_obs  # what follows the head
    return (h_obs, h_action, h_reward, h_term, h_trunc, h_final, h_final_at, after.copy()), \
        pending


@njit(cache=True, nogil=True)
def _emit(stream, pending, stop, n, gamma, store, cursor, stamp0, count, keep, keep_shift):
    """Store the transition of every pending step ``t < stop`` of ``stream`` whose window
    is complete; flag the others in ``keep[t + keep_shift]``. Returns the new count."""
    obs, action, reward, terminated, truncated, final_obs, final_at, bootstrap_obs = stream
    s_obs, s_action, s_next, s_reward, s_done, s_discount, s_stamp = store
    length, envs = reward.shape
    capacity = s_reward.shape[0]
    for t in range(stop):
        for e in range(envs):
            if not pending[t, e]:
                continue
            ret, discount, end, ended, term = 0.0, 1.0, t, False, False
            for j in range(t, min(t + n, length)):
                ret += discount * reward[j, e]
                discount *= gamma
                end = j
                term = terminated[j, e]
                if term or truncated[j, e]:
                    ended = True
                    break
            if not ended and t + n > length:
                keep[t + keep_shift, e] = True  # fewer than n rewards so far: wait for more
                continue
            row = (cursor + count) % capacity
            # element loops, not copy_row: a view per row made this loop twice as slow
            for k in range(obs.shape[2]):
                s_obs[row, k] = obs[t, e, k]
            for k in range(action.shape[2]):
                s_action[row, k] = action[t, e, k]
            if truncated[end, e]:
                final = final_at[end, e]
                for k in range(obs.shape[2]):
                    s_next[row, k] = final_obs[final, k]
            elif end + 1 < length:
                for k in range(obs.shape[2]):
                    s_next[row, k] = obs[end + 1, e, k]
            else:
                for k in range(obs.shape[2]):
                    s_next[row, k] = bootstrap_obs[e, k]
            s_reward[row] = ret
            s_done[row] = term
            s_discount[row] = discount
            s_stamp[row] = stamp0 + count
            count += 1
    return count


@njit(cache=True, nogil=True)
def _roll_tails(stream, first, env_ids, tail, keep):
    """Make each env's tail the stream's last ``n - 1`` steps: steps ``first ..`` of
    ``stream`` (which ends where the slot does), with the pending flags in ``keep``; and
    remember the observation the slot ended on."""
    obs, action, reward, terminated, truncated, final_obs, final_at, after = stream
    t_obs, t_action, t_reward, t_term, t_trunc, t_next, t_pending, t_boot, t_seen = tail
    length = reward.shape[0]
    for e in range(env_ids.shape[0]):
        env = env_ids[e]
        for i in range(keep.shape[0]):
            j = first + i
            copy_row(t_obs[env, i], obs[j, e])
            copy_row(t_action[env, i], action[j, e])
            if truncated[j, e]:
                copy_row(t_next[env, i], final_obs[final_at[j, e]])
            elif j + 1 < length:
                copy_row(t_next[env, i], obs[j + 1, e])
            else:
                copy_row(t_next[env, i], after[e])
            t_reward[env, i] = reward[j, e]
            t_term[env, i] = terminated[j, e]
            t_trunc[env, i] = truncated[j, e]
            t_pending[env, i] = keep[i, e]
        copy_row(t_boot[env], after[e])
        t_seen[env] = True
