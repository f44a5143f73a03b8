"""Adam for the learner's updates: torch's fused Adam kernel without torch.optim around it.

``torch.optim.Adam(fused=True)`` runs one kernel, ``torch._fused_adam_``, over every
parameter. The class around it is what costs: torch.optim imports ``torch._dynamo`` the
first time an optimizer is built or stepped, about 0.7 s of one core in the learner before
its first update, on the critical path of every run. This optimizer calls the same kernel
with the same arguments (the results are identical, which tests/algos/test_adam.py checks)
and reads and writes state dicts in ``torch.optim.Adam``'s layout, so a checkpoint written
with either loads into the other.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch


class Adam:
    """Adam (Kingma & Ba, 2015) over ``params``, one parameter group, no weight decay.

    The interface is the part of ``torch.optim.Optimizer`` the algorithms use:
    ``zero_grad()``, ``step()``, ``param_groups[0]["lr"]`` (set to anneal) and
    ``state_dict()`` / ``load_state_dict()``.
    """

    def __init__(self, params: Iterable[torch.nn.Parameter], lr: float,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8) -> None:
        self.params = list(params)
        if not self.params:
            raise ValueError("Adam got no parameters to optimize")
        self.param_groups: list[dict[str, Any]] = [{
            "lr": lr, "betas": betas, "eps": eps, "weight_decay": 0.0, "amsgrad": False,
            "maximize": False, "foreach": None, "capturable": False, "differentiable": False,
            "fused": True, "decoupled_weight_decay": False,
            "params": list(range(len(self.params)))}]
        self.exp_avgs = [torch.zeros_like(p, memory_format=torch.preserve_format)
                         for p in self.params]
        self.exp_avg_sqs = [torch.zeros_like(p, memory_format=torch.preserve_format)
                            for p in self.params]
        # (a float step count on the parameter's device: what the fused kernel reads)
        self.steps = [torch.zeros((), dtype=torch.float32, device=p.device)
                      for p in self.params]

    def zero_grad(self) -> None:
        """Drop every parameter's gradient (the next backward writes fresh ones)."""
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        """One Adam step on every parameter that has a gradient."""
        have = [i for i, p in enumerate(self.params) if p.grad is not None]
        if not have:
            return
        group = self.param_groups[0]
        beta1, beta2 = group["betas"]
        steps = [self.steps[i] for i in have]
        torch._foreach_add_(steps, 1)
        torch._fused_adam_(
            [self.params[i] for i in have], [self.params[i].grad for i in have],
            [self.exp_avgs[i] for i in have], [self.exp_avg_sqs[i] for i in have], [], steps,
            amsgrad=False, lr=group["lr"], beta1=beta1, beta2=beta2, weight_decay=0.0,
            eps=group["eps"], maximize=False, grad_scale=None, found_inf=None)

    def state_dict(self) -> dict[str, Any]:
        """The state in ``torch.optim.Adam``'s layout (parameters by index; moments and step
        counts only for parameters stepped at least once)."""
        state = {i: {"step": self.steps[i].clone(), "exp_avg": self.exp_avgs[i].clone(),
                     "exp_avg_sq": self.exp_avg_sqs[i].clone()}
                 for i in range(len(self.params)) if self.steps[i].item() > 0}
        return {"state": state, "param_groups": [dict(g) for g in self.param_groups]}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load a state written by :meth:`state_dict` or by ``torch.optim.Adam`` over
        parameters of the same shapes, in the same order."""
        groups = state_dict["param_groups"]
        if len(groups) != 1 or len(groups[0]["params"]) != len(self.params):
            raise ValueError(
                f"optimizer state is for {sum(len(g['params']) for g in groups)} parameters "
                f"in {len(groups)} group(s); this optimizer has {len(self.params)} in one")
        saved = groups[0]
        group = self.param_groups[0]
        group.update(lr=saved["lr"], betas=tuple(saved["betas"]), eps=saved["eps"])
        for i, key in enumerate(saved["params"]):
            entry = state_dict["state"].get(key)
            p = self.params[i]
            if entry is None:
                self.steps[i].zero_()
                self.exp_avgs[i].zero_()
                self.exp_avg_sqs[i].zero_()
                continue
            self.steps[i].copy_(torch.as_tensor(entry["step"], dtype=torch.float32))
            self.exp_avgs[i].copy_(entry["exp_avg"].to(p.device, p.dtype))
            self.exp_avg_sqs[i].copy_(entry["exp_avg_sq"].to(p.device, p.dtype))
