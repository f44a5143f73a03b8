"""Proximal Policy Optimization (clipped), as in CleanRL's ppo.py, on a ring batch.

The batch is time-major ``[T, N]`` (N = every env of every worker) and carries, besides the
transitions, ``bootstrap_obs`` ``[N, *obs]`` (observation after step T-1) and ``final_obs``
``[N, rows, *obs]`` (the real last observations of each env's episodes truncated in the
batch, in step order: fastrl.memory.layout), and optionally ``weight`` ``[T, N]`` (bool:
the steps that count; padding, at 0, is kept out of every mean). Termination ends the
return; truncation bootstraps from the value of the final observation.

What a minibatch takes, transitions or whole env sequences, is the policy's unit of data,
chosen once (fastrl.algos.units); nothing here depends on which. The built-in MLP
actor-critic's minibatch steps on the CPU are computed in numpy (fastrl.models.numpy_grad),
the same loss with its gradient written out.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from fastrl.algos.adam import Adam
from fastrl.algos.base import Algorithm, DataMode, RunConfig, annealed, set_lr
from fastrl.algos.units import ValueAfter, units_of
from fastrl.core.errors import ConfigError
from fastrl.models.families import ACTOR_CRITIC
from fastrl.models.numpy_grad import NumpyGrad
from fastrl.models.policy import ActorCritic
from fastrl.models.recurrent import NO_CORE


def compute_gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    next_values: torch.Tensor,
    terminated: torch.Tensor,
    truncated: torch.Tensor,
    gamma: float,
    lam: float,
) -> torch.Tensor:
    """Generalised advantage estimates, ``[T, N]``.

    ``next_values[t]`` is the value of the state after step ``t`` *of the same episode*:
    ``V(obs[t+1])`` mid-episode, ``V(final_obs[t])`` where truncated, anything where
    terminated (it is multiplied by zero). The recursion is cut at every episode end.
    """
    not_term = (~terminated).to(rewards.dtype)
    not_done = (~(terminated | truncated)).to(rewards.dtype)
    deltas = rewards + gamma * next_values * not_term - values
    # one op per step, the rows viewed and the result stacked once: the recursion is a
    # Python loop over T, and at a few envs each op costs more in overhead than arithmetic
    decays, deltas_t = (gamma * lam * not_done).unbind(0), deltas.unbind(0)
    last = torch.zeros_like(rewards[0])
    adv = []
    for t in range(rewards.shape[0] - 1, -1, -1):
        last = torch.addcmul(deltas_t[t], decays[t], last)
        adv.append(last)
    return torch.stack(adv[::-1])


def masked_mean(x: torch.Tensor, weight: torch.Tensor | None) -> torch.Tensor:
    """The mean of ``x``, or with ``weight`` (1 where a step counts, 0 where not: a batch's
    ``weight``) the mean of the steps that count."""
    if weight is None:
        return x.mean()
    return (x * weight).sum() / weight.sum().clamp(min=1)


def _variance(x: torch.Tensor, weight: torch.Tensor | None) -> torch.Tensor:
    if weight is None:
        return x.var()
    return masked_mean((x - masked_mean(x, weight)) ** 2, weight)


def explained_variance(returns: torch.Tensor, values: torch.Tensor,
                       weight: torch.Tensor | None = None) -> torch.Tensor:
    """``1 - Var(returns - values) / Var(returns)`` (NaN when the returns do not vary), a
    0-d tensor on their device; over the steps that count, with ``weight``."""
    var_y = _variance(returns, weight)
    return torch.where(var_y > 0, 1 - _variance(returns - values, weight) / var_y, torch.nan)


STAT_NAMES = ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_frac", "grad_norm")
APPROX_KL = STAT_NAMES.index("approx_kl")


def normalized(adv: torch.Tensor, weight: torch.Tensor | None = None) -> torch.Tensor:
    """Advantages shifted and scaled to zero mean and unit standard deviation (of the steps
    that count, with ``weight``)."""
    if weight is None:
        return (adv - adv.mean()) / (adv.std() + 1e-8)
    return (adv - masked_mean(adv, weight)) / (_variance(adv, weight).sqrt() + 1e-8)


class PPO:
    """Owns the optimizer; :meth:`update` trains the policy on one batch, read through the
    policy's unit of data (``units``, fastrl.algos.units)."""

    def __init__(self, policy: ActorCritic, cfg: Any) -> None:
        self.policy = policy
        self.cfg = cfg
        self.units = units_of(policy)
        self.optimizer = Adam(policy.parameters(), lr=cfg.lr, eps=1e-5)
        # small MLP steps in numpy: a fraction of their cost in torch ops (numpy_grad)
        self._numpy = NumpyGrad(policy) if NumpyGrad.supports(policy) else None
        self._grads: list[np.ndarray] = []  # its gradients' views, bound per update

    def state_dict(self) -> dict:
        """What continues training besides the policy's weights."""
        return {"optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict`."""
        self.optimizer.load_state_dict(state["optimizer"])

    @torch.no_grad()
    def next_values(self, batch: dict[str, torch.Tensor],
                    values: torch.Tensor) -> torch.Tensor:
        """The value of the state after each step of the same episode (see the module doc):
        ``values[t+1]``, the bootstrap observation's after the last step, the real final
        observation's where truncated. On a GPU the value of every row of ``final_obs`` is
        computed and the truncated steps' picked on the device (a data-dependent branch
        would wait for it); on the CPU only the truncated steps'.
        """
        value_after = self.units.value_after(batch)
        steps, envs = batch["truncated"].shape
        every_env = torch.arange(envs, device=values.device)
        bootstrap = value_after(batch["bootstrap_obs"], every_env, steps - 1)
        after = torch.cat([values[1:], bootstrap[None]])
        if batch["truncated"].device.type == "cpu":
            return self._final_values_where_truncated(batch, after, value_after)
        return self._final_values_everywhere(batch, after, value_after)

    def _final_values_where_truncated(self, batch: dict[str, torch.Tensor],
                                      after: torch.Tensor,
                                      value_after: ValueAfter) -> torch.Tensor:
        """``after`` with the final observations' values written where truncated."""
        truncated = batch["truncated"]
        t, n = truncated.nonzero(as_tuple=True)
        if len(t):
            row = truncated.cumsum(0)[t, n] - 1  # the env's truncations up to this step
            after[t, n] = value_after(batch["final_obs"][n, row], n, t)
        return after

    def _final_values_everywhere(self, batch: dict[str, torch.Tensor],
                                 after: torch.Tensor,
                                 value_after: ValueAfter) -> torch.Tensor:
        """The same without a data-dependent branch: the value of every final-observation
        row, each truncated step's picked."""
        truncated, finals = batch["truncated"], batch["final_obs"]
        envs, rows = finals.shape[:2]
        truncations = truncated.cumsum(0)  # [T, N]
        # rows past an env's truncations hold stale bytes (zeros at first): the network
        # sees the env's bootstrap observation there instead, always a valid one
        written = torch.arange(rows, device=finals.device) < truncations[-1][:, None]
        written = written.view(envs, rows, *[1] * (finals.dim() - 2))
        finals = torch.where(written, finals, batch["bootstrap_obs"][:, None])
        # row r of an env holds the final observation of its (r+1)-th truncating step, the
        # step after those with at most r truncations (the last step for unwritten rows)
        r = torch.arange(rows, device=finals.device)
        step = (truncations.T[:, :, None] <= r).sum(1).clamp(max=len(truncated) - 1)
        env = torch.arange(envs, device=finals.device)[:, None].expand(envs, rows)
        values = value_after(finals.flatten(0, 1), env.flatten(), step.flatten())
        row = (truncations - 1).clamp(0, rows - 1)
        return torch.where(truncated, values.view(envs, rows).gather(1, row.T).T, after)

    @torch.no_grad()
    def advantages(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """``(advantages, returns)`` of a batch, bootstrapping as the module doc says."""
        values = batch["value"]
        adv = compute_gae(
            batch["reward"], values, self.next_values(batch, values), batch["terminated"],
            batch["truncated"], self.cfg.gamma, self.cfg.gae_lambda,
        )
        return adv, adv + values

    def clip_coef(self, step: int) -> float:
        """The ratio's (and with ``clip_vloss`` the value's) clip at env step ``step``:
        ``clip_coef``, annealed like the learning rate with ``anneal_clip``."""
        cfg = self.cfg
        return annealed(cfg.clip_coef, cfg.anneal_clip, step, cfg.total_steps)

    def update(self, batch: dict[str, torch.Tensor], lr: float,
               step: int) -> dict[str, torch.Tensor]:
        """Run ``update_epochs`` of minibatch PPO on ``batch``, clipped as at env step
        ``step`` (:meth:`clip_coef`); returns the loss statistics of the last epoch run
        (means over its minibatches) as 0-d tensors on the batch's device: nothing here
        waits for a GPU, unless ``target_kl`` is set (stopping early needs the KL on the
        host).

        At CartPole sizes a gradient step through autograd is bound by the number of small
        torch ops, not by arithmetic: the built-in MLP actor-critic on the CPU steps in
        numpy instead (:meth:`_numpy_step`), and either does only what the step needs:
        statistics are measured in the last epoch only (in every epoch under
        ``target_kl``, whose last is not known ahead), one minibatch's advantages are
        normalised once, and a zero ``ent_coef`` keeps the entropy out of the backward
        pass.
        """
        cfg = self.cfg
        set_lr(self.optimizer, lr)
        clip = self.clip_coef(step)
        adv, returns = self.advantages(batch)
        data = self._split({**batch, "adv": adv, "returns": returns})
        n = len(data["log_prob"])  # units: transitions, or env sequences
        mb_size = n // cfg.num_minibatches
        whole = cfg.num_minibatches == 1  # the same minibatch, in any order, every epoch
        weights = data.get("weight")
        if whole and cfg.norm_adv:
            data["adv"] = normalized(data["adv"], weights)
        minibatch_step = self._torch_step
        if self._numpy is not None and weights is None:
            minibatch_step = self._numpy_step
            data = self._numpy_data(data)
            self._grads = self._numpy.bind_grads()  # (zero_grad drops them)
        for epoch in range(cfg.update_epochs):
            measure = cfg.target_kl is not None or epoch == cfg.update_epochs - 1
            measured: list[torch.Tensor] = []
            perm = None if whole else torch.randperm(n, device=adv.device)
            for start in range(0, n, mb_size):
                mb = slice(None) if perm is None else perm[start : start + mb_size]
                stats = minibatch_step(data, mb, clip, measure, normalize=not whole)
                if measure:
                    measured.append(stats)
            if cfg.target_kl is not None and measured[-1][APPROX_KL] > cfg.target_kl:
                break
        out = dict(zip(STAT_NAMES, torch.stack(measured).mean(0)))
        out["explained_variance"] = explained_variance(returns, batch["value"],
                                                       step_weights(batch))
        return out

    def _torch_step(self, data: dict[str, torch.Tensor], mb: Any, clip: float,
                    measure: bool, normalize: bool) -> torch.Tensor | None:
        """One gradient step on the units ``mb`` of ``data`` through autograd (advantages
        normalised here with ``normalize``); their statistics when ``measure``."""
        cfg = self.cfg
        weights = data.get("weight")
        w = None if weights is None else weights[mb]
        logp, entropy, value = self.units.evaluate(data, mb)
        log_ratio = logp - data["log_prob"][mb]
        ratio = log_ratio.exp()
        mb_adv = data["adv"][mb]
        if normalize and cfg.norm_adv:
            mb_adv = normalized(mb_adv, w)
        pg_loss = masked_mean(torch.max(
            -mb_adv * ratio,
            -mb_adv * ratio.clamp(1 - clip, 1 + clip),
        ), w)
        v_loss = self._value_loss(value, data["returns"][mb], data["value"][mb], w, clip)
        loss = pg_loss + cfg.vf_coef * v_loss
        if cfg.ent_coef:
            loss = loss - cfg.ent_coef * masked_mean(entropy, w)
        grad_norm = self.step(loss)
        if not measure:
            return None
        return self._measure(pg_loss, v_loss, entropy, log_ratio.detach(), grad_norm, w, clip)

    def _numpy_data(self, data: dict[str, torch.Tensor]) -> dict[str, np.ndarray]:
        """:meth:`_split`'s transitions as :meth:`_numpy_step` reads them: numpy views, the
        observations as features ``x`` ``[size, n]`` (and ``legal`` ``[classes, n]``)."""
        x, legal = self._numpy.inputs(data["obs"].numpy())
        action = self.policy._flat_action(data["action"]).numpy()
        # (class indices to index with; Box actions of any dtype as float32, as torch
        # promotes them against the float32 mean)
        action = action.astype(np.float32 if self._numpy.continuous else np.intp)
        return {"x": x, "legal": legal, "action": action,
                **{k: data[k].numpy().astype(np.float32, copy=False)
                   for k in NUMPY_FIELDS[1:]}}

    def _numpy_step(self, data: dict[str, np.ndarray], mb: Any, clip: float, measure: bool,
                    normalize: bool) -> torch.Tensor | None:
        """:meth:`_torch_step` in numpy (fastrl.models.numpy_grad): the same loss, its
        gradient written out (:func:`numpy_ppo_backward`); the optimizer is the same."""
        if not isinstance(mb, slice):
            mb = mb.numpy()
        legal = data["legal"]
        minibatch = {"x": data["x"][:, mb], "legal": None if legal is None else legal[:, mb],
                     **{k: data[k][mb] for k in NUMPY_FIELDS}}
        stats = numpy_ppo_backward(self._numpy, minibatch, clip, self.cfg, normalize, measure)
        grad_norm = clip_numpy_grads(self._grads, self.cfg.max_grad_norm)
        self.optimizer.step()
        if not measure:
            return None
        return torch.from_numpy(np.append(stats, np.float32(grad_norm)))

    def evaluate_batch(self, batch: dict[str, torch.Tensor]):
        """``(log_prob, entropy, value)`` ``[T, N]`` of a whole time-major batch's actions
        under the current weights."""
        return self.units.evaluate_batch(batch)

    def _split(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The batch's fields as the units minibatches take, along dim 0: ``obs``,
        ``action``, ``log_prob``, ``value``, ``adv``, ``returns``, and ``weight`` where
        :func:`step_weights` gives one."""
        keys = ("obs", "action", "log_prob", "value", "adv", "returns")
        weight = step_weights(batch)
        if weight is not None:
            batch, keys = {**batch, "weight": weight}, (*keys, "weight")
        return self.units.split(batch, keys)

    def _value_loss(self, value: torch.Tensor, returns: torch.Tensor,
                    old_values: torch.Tensor, weight: torch.Tensor | None,
                    clip: float) -> torch.Tensor:
        """Half the squared error to the returns, clipped at ``clip`` around the old values
        when ``clip_vloss``."""
        if not self.cfg.clip_vloss:
            return 0.5 * masked_mean((value - returns) ** 2, weight)
        v_clipped = old_values + (value - old_values).clamp(-clip, clip)
        return 0.5 * masked_mean(torch.max((value - returns) ** 2, (v_clipped - returns) ** 2),
                                 weight)

    @torch.no_grad()
    def _measure(self, pg_loss: torch.Tensor, v_loss: torch.Tensor, entropy: torch.Tensor,
                 log_ratio: torch.Tensor, grad_norm: torch.Tensor,
                 weight: torch.Tensor | None, clip: float) -> torch.Tensor:
        """One minibatch's statistics, in :data:`STAT_NAMES` order (``clip_frac``: the
        ratios beyond ``clip``)."""
        ratio = log_ratio.exp()
        approx_kl = masked_mean((ratio - 1) - log_ratio, weight)
        clip_frac = masked_mean(((ratio - 1).abs() > clip).float(), weight)
        return torch.stack([pg_loss.detach(), v_loss.detach(), masked_mean(entropy, weight),
                            approx_kl, clip_frac, grad_norm])

    def step(self, loss: torch.Tensor) -> torch.Tensor:
        """One optimizer step on ``loss``, gradients clipped at ``max_grad_norm``; returns
        the gradient norm before clipping."""
        self.optimizer.zero_grad()
        loss.backward()
        grad_norm = nn.utils.clip_grad_norm_(self.policy.parameters(), self.cfg.max_grad_norm)
        self.optimizer.step()
        return grad_norm.detach()


#: the per-transition arrays of :meth:`PPO._numpy_data` besides the features
NUMPY_FIELDS = ("action", "log_prob", "value", "adv", "returns")


def numpy_ppo_backward(grad: NumpyGrad, mb: dict[str, np.ndarray], clip: Any, coef: Any,
                       normalize: bool, measure: bool) -> np.ndarray | None:
    """PPO's loss on the minibatch ``mb`` (:meth:`PPO._numpy_data`'s arrays, its
    transitions picked), its gradient written by ``grad`` (fastrl.models.numpy_grad);
    returns the loss statistics when ``measure`` (:data:`STAT_NAMES` but the gradient
    norm). ``coef`` holds ``norm_adv``, ``clip_vloss``, ``ent_coef`` and ``vf_coef`` (an
    AlgoConfig). ``clip`` None: A2C's loss instead (fastrl.algos.a2c), the plain policy
    gradient, no ratio and no clip (statistics: the policy and value losses and the
    entropy). Networks stacked along a leading axis (fastrl.population.stacked) take
    ``[K, n]`` arrays, ``clip`` and the coefficients as ``[K, 1]`` float32 arrays, and
    give statistics ``[K, 5]`` (``[K, 3]``)."""
    logp, entropy, value = grad.evaluate(mb["x"], mb["legal"], mb["action"])
    adv = mb["adv"]
    if normalize and coef.norm_adv:
        adv = (adv - adv.mean(-1, keepdims=True)) / (
            adv.std(-1, ddof=1, keepdims=True) + np.float32(1e-8))
    n = np.float32(logp.shape[-1])
    if clip is None:
        pg_loss, d_log_prob, ratio_stats = (-adv * logp).mean(-1), -adv / n, []
    else:
        log_ratio = logp - mb["log_prob"]
        ratio = np.exp(log_ratio)
        unclipped, clipped = -adv * ratio, -adv * np.clip(ratio, 1 - clip, 1 + clip)
        # (torch.max's gradient: the larger side's; inside the clip range both are -adv)
        d_log_prob = np.where(unclipped >= clipped, -adv, np.float32(0)) * ratio / n
        pg_loss = np.maximum(unclipped, clipped).mean(-1)
        ratio_stats = [((ratio - 1) - log_ratio).mean(-1), (np.abs(ratio - 1) > clip).mean(-1)]
    v_loss, d_value = numpy_value_loss(value, mb["returns"], mb["value"], clip,
                                       coef.clip_vloss)
    grad.backward(d_log_prob, -coef.ent_coef / n, coef.vf_coef * d_value / n)
    if not measure:
        return None
    return np.stack([pg_loss, v_loss, entropy.mean(-1), *ratio_stats], -1).astype(np.float32)


def numpy_value_loss(value: np.ndarray, returns: np.ndarray, old_values: np.ndarray,
                     clip: Any, clip_vloss: bool) -> tuple[np.ndarray, np.ndarray]:
    """:meth:`PPO._value_loss` (means over the last axis) and its gradient times the
    batch size, in numpy."""
    err = value - returns
    if not clip_vloss:
        return 0.5 * np.mean(err * err, -1), err
    clipped_err = old_values + np.clip(value - old_values, -clip, clip) - returns
    sq, clipped_sq = err * err, clipped_err * clipped_err
    inside = np.abs(value - old_values) <= clip  # where the clip passes a gradient
    # torch.max's gradient: the larger side's, half to each where they are equal
    d = np.where(sq > clipped_sq, err, np.where(sq < clipped_sq, clipped_err * inside,
                                                0.5 * (err + clipped_err * inside)))
    return 0.5 * np.mean(np.maximum(sq, clipped_sq), -1), d


def clip_numpy_grads(grads: list[np.ndarray], max_norm: Any) -> np.ndarray:
    """Scale the gradients ``grads`` (numpy arrays) to a norm of at most ``max_norm``, as
    ``clip_grad_norm_``; returns the norm before. With ``max_norm`` ``[K, 1]`` each array's
    leading axis is K networks' (fastrl.population.stacked), each clipped to its own."""
    lead = np.shape(max_norm)[:-1]
    norm = np.sqrt(sum(np.einsum("...i,...i->...", g, g)
                       for g in (g.reshape(*lead, -1) for g in grads)))
    scale = max_norm / (np.asarray(norm, np.float64)[..., None] + 1e-6)
    scale = np.minimum(scale, 1).astype(np.float32)
    if not np.all(scale == 1):  # (a NaN norm too: clip_grad_norm_ makes every gradient NaN)
        for g in grads:
            g.reshape(*lead, -1)[...] *= scale
    return norm


def step_weights(batch: dict[str, torch.Tensor]) -> torch.Tensor | None:
    """A batch's ``weight`` ``[T, N]`` as floats (1.0 where a step trains, 0.0 where not);
    None for a batch without one."""
    weight = batch.get("weight")
    return None if weight is None else weight.to(batch["reward"].dtype)


def check_minibatches(cfg: RunConfig, slots: str) -> None:
    """``algo.num_minibatches`` splits the batch (``slots`` names what sets its slot count)
    into equal minibatches of at least 2 transitions."""
    mb = cfg.algo.num_minibatches
    if cfg.batch_size % mb or cfg.batch_size // mb < 2:
        raise ConfigError(
            f"config key 'algo.num_minibatches={mb}' must divide the batch "
            f"{slots}*envs_per_worker*rollout_len={cfg.batch_size} into minibatches of "
            "at least 2 transitions"
        )
    envs = cfg.batch_slots * cfg.infra.envs_per_worker
    if cfg.algo.core != NO_CORE and envs % mb:
        raise ConfigError(
            f"config key 'algo.num_minibatches={mb}' must divide the {envs} env sequences "
            f"of a batch ({slots}*envs_per_worker): with algo.core={cfg.algo.core} a "
            "minibatch takes whole sequences")


ALGORITHM = Algorithm(
    name="ppo",
    summary="PPO, on-policy (the clipped surrogate; its keys sit at the top of algo)",
    data=DataMode.SYNC,
    policy=ACTOR_CRITIC,
    make_update=lambda algo, policy, obs_space, act_space, device: PPO(policy, algo),
    check_config=lambda cfg: check_minibatches(cfg, "num_workers"),
    minibatches=lambda algo: (algo.num_minibatches, algo.update_epochs),
)
