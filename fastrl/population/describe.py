"""A population's part of ``python -m fastrl.describe`` (fastrl.describe.FEATURE_PARTS)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import torch

from fastrl.core.text import human_bytes
from fastrl.population.actor import acts_stacked
from fastrl.population.update import BatchedUpdate


def part(plan: Any) -> dict[str, Any] | None:
    """The members of a run (fastrl.plan.RunPlan), how the workers and the learner compute
    them and what each costs; None for one member."""
    pop, cfg = plan.population, plan.cfg
    if pop is None:
        return None
    policy = plan.policy()
    batched = plan.device == "cpu" and isinstance(
        plan.make_update(policy, torch.device("cpu")), BatchedUpdate)
    return {"members": pop.size, "seeds": [c.seed for c in pop.configs],
            "vary": dict(cfg.population.vary), "rows": pop.rows,
            "exact": cfg.population.exact, "batched_update": batched,
            "stacked_acting": acts_stacked(policy, cfg.population.exact,
                                           cfg.infra.worker_inference),
            "pbt": asdict(cfg.population.pbt) if cfg.population.pbt.every_steps else None,
            "params_per_member": plan.num_params // pop.size,
            "shm_bytes_per_member": (cfg.infra.num_workers * plan.ring_bytes
                                     + plan.weights_bytes) // pop.size}


def lines(pop: dict[str, Any]) -> list[str]:
    """Its lines in the rollout box."""
    seeds = pop["seeds"]
    varied = "".join(f"; {key}: {values}" for key, values in pop["vary"].items())
    rows = pop["rows"]
    return [
        f"population: {pop['members']} members (seeds {seeds[0]}..{seeds[-1]}{varied}); "
        f"member k owns rows [{rows}k, {rows}k+{rows}) of every worker's slot",
        "  workers act for them " + ("with one stacked forward" if pop["stacked_acting"]
                                     else "one member after another") +
        "; the learner updates them " + ("all at once" if pop["batched_update"] else
                                         "one after another") +
        (" (population.exact: each bit-identical to its single run)" if pop["exact"] else ""),
        f"  per member: {pop['params_per_member']:,} params, "
        f"{human_bytes(pop['shm_bytes_per_member'])} of shared memory",
        *([f"  PBT every {pbt['every_steps']:,} member steps: the bottom {pbt['fraction']:.0%} "
           f"copy the top {pbt['fraction']:.0%}, perturbing {', '.join(pop['vary'])} by "
           f"{pbt['perturb']}; lineage in members.csv"] if (pbt := pop["pbt"]) else [])]
