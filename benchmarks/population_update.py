"""A population's gradient step on the CPU (issue 44): K members' MLP actor-critics, each on
its own minibatch, computed four ways, against the arithmetic floor.

    python benchmarks/population_update.py [--members 1,8,32] [--rounds 5] [--out FILE.json]

The work of one member is what PPO's learner does per minibatch for CartPole's shipped
config (``configs/cartpole_ppo.yaml``: 64x64 tanh actor and critic, minibatches of 256):
the actor's log-probabilities and the critic's values of the minibatch, then the gradient
of a loss given its derivatives with respect to those (fastrl.models.numpy_grad's split;
the PPO arithmetic between is elementwise and left out of every variant). The variants:

- ``loop``: today's numpy step (``NumpyGrad``) once per member, one policy each (it also
  computes the entropy and clamps the log-probabilities, which the others leave out: a
  little more work);
- ``stacked numpy``: every layer's weights stacked ``[K, out, in]``, one ``np.matmul`` per
  layer and pass for all members, into reused arrays;
- ``stacked autograd``: the same stacked weights as torch parameters, ``torch.baddbmm``
  forward and autograd's backward;
- ``vmap``: ``torch.func.vmap`` of ``torch.func.grad`` over the members' stacked
  parameters (one member's ``functional_call``).

A third table times the learner's whole update of a K-member population (CartPole's
shipped config: advantages, then every epoch's gradient steps), one member after another
(``population.exact=true``) against all at once (the default), per member-update, against
the floor of its gradient steps.

A fourth table times recurrent members (``RECURRENT_CONFIG``'s LSTM actor-critic): one
epoch's gradient of each on its env sequences, through autograd one member after another
(``loop``, what a population of recurrent members runs) against ``torch.func``'s per-member
gradient under ``vmap`` over their stacked parameters. torch has no batching rule for its
LSTM sequence kernel, which ``vmap`` then runs once per member, with a warning that is
silenced here.

A second table times a worker's side: the action choice for every member's envs (the
config's ``envs_per_worker`` each), the numpy actor once per member against one stacked
forward with the same sampling.

Each figure is microseconds per member-step (one member's forward and backward on its
minibatch), medians of alternating rounds on one torch and BLAS thread (the learner's
setting); ``floor`` is the step's matmul FLOPs at this machine's peak for a 512x512
product. Every variant's gradients are checked against ``loop``'s before timing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import warnings
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # (as in learner_cpu.py)

import numpy as np
import torch
from learner_cpu import CONFIGS, matmul_flops_per_cpu_second
from shared import linears, seconds_per_call
from torch import nn

from fastrl.bench.learner import synthetic_batch
from fastrl.bench.report import provenance
from fastrl.config import load_config
from fastrl.core.process import learner_torch
from fastrl.models.numpy_grad import NumpyGrad
from fastrl.plan import plan_run

Step = Callable[[], None]


class Member:
    """One member's policy, minibatch and upstream derivatives (the loss's with respect
    to each log-probability and value)."""

    def __init__(self, plan, batch: int, rng: np.random.Generator) -> None:
        self.policy = plan.policy()
        self.grad = NumpyGrad(self.policy)
        self.grad.bind_grads()
        n_obs = int(np.prod(plan.obs_space.shape))
        self.x = np.ascontiguousarray(rng.standard_normal((n_obs, batch), np.float32))
        self.action = rng.integers(0, plan.act_space.n, batch)
        self.d_log_prob = rng.standard_normal(batch).astype(np.float32)
        self.d_value = rng.standard_normal(batch).astype(np.float32)

    def step(self) -> None:
        """Today's numpy step: evaluate, then backward into the policy's gradients."""
        self.grad.evaluate(self.x, None, self.action)
        self.grad.backward(self.d_log_prob, 0.0, self.d_value.copy())  # (d is overwritten)

    def act(self) -> np.ndarray:
        """A worker's action choice for this member's envs (``x``'s columns): today's
        numpy actor; returns the values."""
        return self.grad.net(self.x.T)[2]

    def grads(self) -> list[np.ndarray]:
        """The actor's, then the critic's, (weight, bias) gradients, per layer."""
        return [p.grad.numpy().copy() for net in (self.policy.actor, self.policy.critic)
                for p in net.parameters()]


def log_softmax(head: np.ndarray) -> np.ndarray:
    """Log-probabilities of logits ``[K, classes, n]`` over the classes."""
    log_p = head - head.max(1, keepdims=True)
    log_p -= np.log(np.exp(log_p).sum(1, keepdims=True))
    return log_p


class StackedNumpy:
    """The members' actor and critic MLPs with each layer's weights stacked ``[K, out,
    in]``, computed feature-major (``[K, features, n]``) by one ``np.matmul`` per layer."""

    def __init__(self, members: list[Member]) -> None:
        self.x = np.stack([m.x for m in members])
        self.action = np.stack([m.action for m in members])
        self.d_log_prob = np.stack([m.d_log_prob for m in members])
        self.d_value = np.stack([m.d_value for m in members])
        self.nets = [self._stack([linears(getattr(m.policy, net)) for m in members])
                     for net in ("actor", "critic")]

    def _stack(self, per_member: list[list[nn.Linear]]) -> list[dict[str, np.ndarray]]:
        """Per layer: stacked weight and bias, and arrays for its output and gradients."""
        k, n = self.x.shape[0], self.x.shape[2]
        layers = []
        for i, first in enumerate(per_member[0]):
            w = np.stack([ls[i].weight.detach().numpy() for ls in per_member])
            b = np.stack([ls[i].bias.detach().numpy() for ls in per_member])[:, :, None]
            layers.append({"w": w, "b": b, "out": np.empty((k, first.out_features, n),
                                                           np.float32),
                           "gw": np.empty_like(w), "gb": np.empty(b.shape[:2], np.float32),
                           "back": np.empty((k, first.in_features, n), np.float32)})
        return layers

    def _forward(self, layers: list[dict[str, np.ndarray]]) -> np.ndarray:
        x = self.x
        for j, layer in enumerate(layers):
            out = layer["out"]
            np.matmul(layer["w"], x, out=out)
            out += layer["b"]
            if j < len(layers) - 1:
                np.tanh(out, out=out)
            x = out
        return x

    def _backward(self, layers: list[dict[str, np.ndarray]], d: np.ndarray) -> None:
        for j in range(len(layers) - 1, -1, -1):
            layer = layers[j]
            if j < len(layers) - 1:
                y = layer["out"]
                d *= 1 - y * y
            below = layers[j - 1]["out"] if j else self.x
            np.matmul(d, below.transpose(0, 2, 1), out=layer["gw"])
            np.sum(d, axis=2, out=layer["gb"])
            if j:
                d = np.matmul(layer["w"].transpose(0, 2, 1), d, out=layer["back"])

    def step(self) -> None:
        """Every member's forward and backward at once."""
        actor, critic = self.nets
        head = self._forward(actor)  # [K, classes, n]
        self._forward(critic)
        log_p = log_softmax(head)
        p = np.exp(log_p)
        # d log p[a] / d logits = onehot(a) - p
        d_head = p * -self.d_log_prob[:, None, :]
        np.put_along_axis(d_head, self.action[:, None, :],
                          np.take_along_axis(d_head, self.action[:, None, :], 1)
                          + self.d_log_prob[:, None, :], 1)
        self._backward(actor, d_head)
        self._backward(critic, self.d_value[:, None, :].copy())

    def act(self) -> np.ndarray:
        """Every member's action choice at once, as the numpy actor makes it (Gumbel-max
        over the log-softmax); returns the values ``[K, n]``."""
        actor, critic = self.nets
        head = self._forward(actor)
        log_p = log_softmax(head)
        noise = np.random.standard_exponential(head.shape)
        np.log(np.maximum(noise, np.finfo(np.float64).tiny, out=noise), out=noise)
        action = (log_p - noise).argmax(1)
        log_prob = np.take_along_axis(log_p, action[:, None, :], 1)
        del log_prob  # (computed as a worker computes it; only the values are checked)
        return self._forward(critic)[:, 0]

    def grads(self, k: int) -> list[np.ndarray]:
        """Member ``k``'s gradients, in :meth:`Member.grads`' order."""
        return [a[k] for net in self.nets for layer in net for a in (layer["gw"], layer["gb"])]


class StackedTorch:
    """The same stacked weights as torch parameters: ``torch.baddbmm`` forward, and either
    autograd's backward over all members or ``torch.func``'s per-member gradient under
    ``vmap``."""

    def __init__(self, members: list[Member], vmap: bool) -> None:
        def stack(net: str) -> list[tuple[torch.Tensor, torch.Tensor]]:
            per = [linears(getattr(m.policy, net)) for m in members]
            return [(torch.stack([ls[i].weight.detach() for ls in per]).requires_grad_(),
                     torch.stack([ls[i].bias.detach() for ls in per])[:, :, None]
                     .requires_grad_()) for i in range(len(per[0]))]

        self.actor, self.critic = stack("actor"), stack("critic")
        self.x = torch.from_numpy(np.stack([m.x for m in members]))
        self.action = torch.from_numpy(np.stack([m.action for m in members]))
        self.d_log_prob = torch.from_numpy(np.stack([m.d_log_prob for m in members]))
        self.d_value = torch.from_numpy(np.stack([m.d_value for m in members]))
        self.vmap = vmap
        if vmap:
            self._per_member = torch.func.vmap(torch.func.grad(self._loss))
        self._grads: list[torch.Tensor] = []

    @staticmethod
    def _mlp(layers, x: torch.Tensor) -> torch.Tensor:
        for j, (w, b) in enumerate(layers):
            x = torch.baddbmm(b, w, x) if x.dim() == 3 else torch.addmm(b, w, x)
            if j < len(layers) - 1:
                x = torch.tanh(x)
        return x

    @classmethod
    def _loss(cls, params, x, action, d_log_prob, d_value) -> torch.Tensor:
        """The loss whose derivatives are ``d_log_prob`` and ``d_value`` (summed)."""
        actor, critic = params
        log_p = torch.log_softmax(cls._mlp(actor, x), dim=-2)
        chosen = log_p.gather(-2, action.unsqueeze(-2)).squeeze(-2)
        value = cls._mlp(critic, x).squeeze(-2)
        return (chosen * d_log_prob).sum() + (value * d_value).sum()

    def step(self) -> None:
        """Every member's gradients."""
        params = (self.actor, self.critic)
        if self.vmap:
            grads = self._per_member(params, self.x, self.action, self.d_log_prob,
                                     self.d_value)
            self._grads = [g for net in grads for layer in net for g in layer]
            return
        flat = [t for net in params for layer in net for t in layer]
        for t in flat:
            t.grad = None
        self._loss(params, self.x, self.action, self.d_log_prob, self.d_value).backward()
        self._grads = [t.grad for t in flat]

    def grads(self, k: int) -> list[np.ndarray]:
        """Member ``k``'s gradients, in :meth:`Member.grads`' order."""
        return [g[k].detach().numpy() for g in self._grads]


def variants(members: list[Member]) -> dict[str, tuple[Step, Callable[[int], list]]]:
    """Each variant's step over all members and its per-member gradients."""
    def loop() -> None:
        for m in members:
            m.step()

    stacked = StackedNumpy(members)
    autograd, vmapped = StackedTorch(members, vmap=False), StackedTorch(members, vmap=True)
    return {"loop": (loop, lambda k: members[k].grads()),
            "stacked numpy": (stacked.step, stacked.grads),
            "stacked autograd": (autograd.step, autograd.grads),
            "vmap": (vmapped.step, vmapped.grads)}


class _Sequences(nn.Module):
    """A recurrent policy's ``evaluate_sequences`` as a module's forward, the one method
    ``torch.func.functional_call`` runs."""

    def __init__(self, policy: nn.Module) -> None:
        super().__init__()
        self.policy = policy

    def forward(self, *args: torch.Tensor):
        return self.policy.evaluate_sequences(*args)


class RecurrentMembers:
    """K recurrent members (RECURRENT_CONFIG's LSTM actor-critic), each with its own env
    sequences (the config's batch: a slot of every worker, one minibatch), and one epoch's
    gradient of each: through autograd one member after another (``loop``: what a
    population of recurrent members runs), or ``torch.func``'s per-member gradient under
    ``vmap`` over the members' stacked parameters. As above, the loss is given by its
    derivatives with respect to each log-probability and value. The members share where
    episodes start, so that ``vmap`` lays the sequences out once for all."""

    def __init__(self, plan, k: int, rng: np.random.Generator) -> None:
        steps, envs = plan.cfg.infra.rollout_len, plan.cfg.batch_size // plan.cfg.infra.rollout_len
        self.members = [plan.policy() for _ in range(k)]
        state = self.members[0].state_size

        def floats(*shape: int) -> torch.Tensor:
            return torch.from_numpy(rng.standard_normal(shape, np.float32))

        self.first = torch.from_numpy(rng.random((steps, envs)) < 0.02)
        self.obs = floats(k, steps, envs, *plan.obs_space.shape)
        self.action = torch.from_numpy(rng.integers(0, plan.act_space.n, (k, steps, envs)))
        self.state, self.d_log_prob, self.d_value = (
            0.1 * floats(k, envs, state), floats(k, steps, envs), floats(k, steps, envs))
        self.params, self.buffers = torch.func.stack_module_state(self.members)
        self._sequences = _Sequences(self.members[0])
        self._per_member = torch.func.vmap(torch.func.grad(self._loss))
        self._grads: dict[str, torch.Tensor] = {}

    def _loss(self, params, buffers, obs, action, state, d_log_prob, d_value) -> torch.Tensor:
        """One member's loss whose derivatives are ``d_log_prob`` and ``d_value``."""
        named = {f"policy.{n}": v for n, v in {**params, **buffers}.items()}
        log_prob, _, value = torch.func.functional_call(self._sequences, named,
                                                        (obs, action, self.first, state))
        return (log_prob * d_log_prob).sum() + (value * d_value).sum()

    def loop(self) -> None:
        """Each member's gradient through autograd, one after another."""
        for k, member in enumerate(self.members):
            member.zero_grad(set_to_none=True)
            log_prob, _, value = member.evaluate_sequences(self.obs[k], self.action[k],
                                                           self.first, self.state[k])
            ((log_prob * self.d_log_prob[k]).sum() + (value * self.d_value[k]).sum()).backward()

    def vmap(self) -> None:
        """Every member's gradient under ``vmap``."""
        self._grads = self._per_member(self.params, self.buffers, self.obs, self.action,
                                       self.state, self.d_log_prob, self.d_value)

    def check_gradients(self) -> None:
        """``vmap``'s gradients equal the loop's (float32 rounding)."""
        self.loop()
        self.vmap()
        for k, member in enumerate(self.members):
            for name, p in member.named_parameters():
                if not p.requires_grad:  # (the observation normaliser's statistics)
                    continue
                np.testing.assert_allclose(self._grads[name][k].detach().numpy(),
                                           p.grad.numpy(), rtol=1e-4, atol=1e-5,
                                           err_msg=f"vmap, member {k}, {name}")


class StackedCores:
    """The LSTM core alone, K members' cells over their own sequences (no episode starts),
    forward and backward: torch's sequence kernel once per member (``kernel loop``), or
    one unroll over the members' stacked weights, a ``torch.bmm`` per step (``stacked
    unroll``)."""

    def __init__(self, members: RecurrentMembers) -> None:
        k, (steps, envs) = len(members.members), members.first.shape
        cells = [m.core for m in members.members]
        self.cells = cells
        self.x = torch.randn(k, steps, envs, cells[0].input_size)
        self.w_ih = torch.stack([c.weight_ih.detach().T for c in cells]).requires_grad_()
        self.w_hh = torch.stack([c.weight_hh.detach().T for c in cells]).requires_grad_()
        self.bias = torch.stack([(c.bias_ih + c.bias_hh).detach() for c in cells])[:, None]
        self.bias.requires_grad_()

    def kernel_loop(self) -> None:
        """Each member's cell through the sequence kernel, summed, then backward."""
        total = 0
        for cell, x in zip(self.cells, self.x):
            zeros = x.new_zeros(1, x.shape[1], cell.hidden_size)
            weights = [cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh]
            total = total + torch.lstm(x, (zeros, zeros), weights, True, 1, 0.0, True, False,
                                       False)[0].square().sum()
        total.backward()

    def stacked_unroll(self) -> None:
        """Every member's cell at once, step by step, summed, then backward."""
        k, steps, envs, _ = self.x.shape
        gates_x = torch.matmul(self.x.transpose(0, 1), self.w_ih) + self.bias  # [T, K, B, 4H]
        h = c = self.x.new_zeros(k, envs, self.w_hh.shape[1])
        total = 0
        for t in range(steps):
            i, f, g, o = (gates_x[t] + torch.bmm(h, self.w_hh)).chunk(4, -1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
            total = total + h.square().sum()
        total.backward()

    def check_gradients(self) -> None:
        """Both give each member's cell the same gradients (float32 rounding)."""
        for cell in self.cells:
            cell.zero_grad(set_to_none=True)
        self.w_hh.grad = None
        self.kernel_loop()
        self.stacked_unroll()
        for k, cell in enumerate(self.cells):
            np.testing.assert_allclose(self.w_hh.grad[k].T.numpy(), cell.weight_hh.grad.numpy(),
                                       rtol=1e-4, atol=1e-4, err_msg=f"core, member {k}")


def check_gradients(found: dict[str, tuple[Step, Callable[[int], list]]], k: int) -> None:
    """Every variant's gradients equal ``loop``'s (float32 rounding)."""
    for step, _ in found.values():
        step()
    want = [found["loop"][1](i) for i in range(k)]
    for name, (_, grads) in found.items():
        for i in range(k):
            for a, b in zip(grads(i), want[i], strict=True):
                np.testing.assert_allclose(a.reshape(b.shape), b, rtol=1e-4, atol=1e-5,
                                           err_msg=f"{name}, member {i}")


def step_flops(policy: nn.Module, batch: int) -> int:
    """Matmul FLOPs of one member-step: each weight's forward, input and weight gradient
    products (2 FLOPs each), less the first layers' input gradients."""
    flops = 0
    for net in (policy.actor, policy.critic):
        for j, layer in enumerate(linears(net)):
            flops += 2 * layer.weight.numel() * batch * (3 if j else 2)
    return flops


def median_us(steps: dict[str, Step], k: int, rounds: int, seconds: float
              ) -> tuple[dict[str, float], dict[str, list[float]]]:
    """Microseconds per member of each step (medians over alternating rounds), and the
    rounds."""
    us: dict[str, list[float]] = {name: [] for name in steps}
    for r in range(rounds):
        for name in (list(steps) if r % 2 == 0 else list(steps)[::-1]):
            us[name].append(1e6 * seconds_per_call(steps[name], seconds) / k)
    return {name: statistics.median(xs) for name, xs in us.items()}, us


def acting_steps(plan, envs: int, k: int) -> dict[str, Step]:
    """A worker's action choice for ``k`` members of ``envs`` envs each: the numpy actor
    once per member, or one stacked forward; both checked to give the same values."""
    members = [Member(plan, envs, np.random.default_rng(i)) for i in range(k)]
    stacked = StackedNumpy(members)
    np.testing.assert_allclose(stacked.act(), np.stack([m.act() for m in members]),
                               rtol=1e-5, atol=1e-5)

    def loop() -> None:
        for m in members:
            m.act()

    return {"loop": loop, "stacked numpy": stacked.act}


#: the configs of the whole-update table, by algorithm: CartPole's shipped PPO; a2c and appo
#: at their defaults on CartPole (they refuse the PPO config's epochs, or its GAE lambda)
#: the recurrent table's config: an LSTM actor-critic (its own core for the critic)
RECURRENT_CONFIG = CONFIGS / "cartpole_novel_lstm.yaml"

UPDATE_CONFIGS = {"ppo": (CONFIGS / "cartpole_ppo.yaml", []),
                  "a2c": (None, ["algo.name=a2c"]), "appo": (None, ["algo.name=appo"])}


def update_steps(k: int, algo: str = "ppo") -> tuple[dict[str, Step], int]:
    """The learner's whole update of K members of ``algo``'s config (UPDATE_CONFIGS) on a
    synthetic batch (two slots a member, as its single run trains), one member after
    another (``population.exact``) and all at once (fastrl.population.update's
    BatchedUpdate; for K=1 both are the single run's update); and the gradient steps of one
    member-update."""
    steps = {}
    path, overrides = UPDATE_CONFIGS[algo]
    for name, exact in (("exact loop", "true"), ("batched", "false")):
        cfg = load_config(path, [*overrides, f"population.size={k}",
                                 f"population.exact={exact}"])
        plan = plan_run(cfg)
        update = plan.make_update(plan.policy(), torch.device("cpu"))
        batch = synthetic_batch(plan, 2)
        steps[name] = lambda update=update, batch=batch: update.update(batch, 0.0, 0)
    minibatches, epochs = cfg.algo.algorithm.minibatches(cfg.algo)
    return steps, minibatches * epochs


def main() -> None:
    """Time every variant at each K in alternating rounds; print and write medians."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--members", default="1,8,32")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--seconds", type=float, default=1.0, help="per variant and round")
    p.add_argument("--out", type=Path, help="JSON file of every round and median")
    p.add_argument("--update-algos", default="ppo",
                   help=f"algorithms of the whole-update table, of {', '.join(UPDATE_CONFIGS)}")
    args = p.parse_args()
    # (vmap's per-member fallback for the LSTM kernel: what the recurrent table measures)
    warnings.filterwarnings("ignore", message="There is a performance drop")
    cfg = load_config(CONFIGS / "cartpole_ppo.yaml")
    plan = plan_run(cfg)
    batch = cfg.batch_size // cfg.algo.num_minibatches
    envs = cfg.infra.envs_per_worker
    peak = matmul_flops_per_cpu_second()
    floor_us = step_flops(plan.policy(), batch) / peak * 1e6
    rows, acting = [], []
    print(f"CartPole PPO, minibatches of {batch}: microseconds per member-step, medians of "
          f"{args.rounds} rounds (floor {floor_us:.1f}: matmul FLOPs at {peak / 1e9:.0f} "
          "GFLOP/s)")
    with learner_torch(1):
        for k in map(int, args.members.split(",")):
            found = variants([Member(plan, batch, np.random.default_rng(k)) for _ in range(k)])
            check_gradients(found, k)
            med, us = median_us({n: step for n, (step, _) in found.items()}, k, args.rounds,
                                args.seconds)
            rows.append({"members": k, "median_us": med, "rounds_us": us,
                         "over_floor": {n: v / floor_us for n, v in med.items()}})
            print(f"  K={k:3d}  " + "  ".join(f"{n} {v:7.1f} ({v / floor_us:4.1f}x floor)"
                                            for n, v in med.items()))
        print(f"Acting, {envs} envs a member (a worker's): microseconds per member")
        for k in map(int, args.members.split(",")):
            med, us = median_us(acting_steps(plan, envs, k), k, args.rounds, args.seconds)
            acting.append({"members": k, "median_us": med, "rounds_us": us})
            print(f"  K={k:3d}  " + "  ".join(f"{n} {v:7.1f}" for n, v in med.items()))
        recurrent = []
        rplan = plan_run(load_config(RECURRENT_CONFIG))
        print(f"Recurrent members ({RECURRENT_CONFIG.name}), one epoch's gradients: "
              "microseconds per member")
        for k in map(int, args.members.split(",")):
            members = RecurrentMembers(rplan, k, np.random.default_rng(k))
            members.check_gradients()
            cores = StackedCores(members)
            cores.check_gradients()
            med, us = median_us({"loop": members.loop, "vmap": members.vmap,
                                 "core: kernel loop": cores.kernel_loop,
                                 "core: stacked unroll": cores.stacked_unroll}, k, args.rounds,
                                args.seconds)
            recurrent.append({"members": k, "median_us": med, "rounds_us": us})
            print(f"  K={k:3d}  " + "  ".join(f"{n} {v:8.1f}" for n, v in med.items()))
        updates = []
        print("The whole update (advantages, every epoch and minibatch): milliseconds per "
              "member-update (a2c, appo: floor at PPO's minibatch size)")
        for algo in args.update_algos.split(","):
            for k in map(int, args.members.split(",")):
                steps, gradient_steps = update_steps(k, algo)
                med, us = median_us(steps, k, args.rounds, args.seconds)
                floor = floor_us * gradient_steps
                updates.append({"algo": algo, "members": k, "median_us": med, "rounds_us": us,
                                "floor_us": floor,
                                "over_floor": {n: v / floor for n, v in med.items()}})
                print(f"  {algo:4s} K={k:3d}  " + "  ".join(
                    f"{n} {v / 1e3:6.2f} ({v / floor:4.1f}x floor)" for n, v in med.items()))
    if args.out:
        doc = {**provenance("python benchmarks/population_update.py"),
               "options": {k: str(v) for k, v in vars(args).items()},
               "minibatch": batch, "floor_us": floor_us, "peak_flops": peak, "rows": rows,
               "acting_envs": envs, "acting": acting, "recurrent": recurrent,
               "updates": updates}
        args.out.write_text(json.dumps(doc, indent=2) + "\n")


if __name__ == "__main__":
    main()
