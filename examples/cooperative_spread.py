"""Train three cooperating agents of a PettingZoo env: MPE2's ``simple_spread``.

Three agents and three landmarks on a plane: the agents are rewarded together for
covering every landmark (minus the distance from each landmark to its nearest agent) and
each is penalised for colliding. Each agent sees its velocity and position, where the
landmarks and the other agents are, and acts by pushing in one of four directions (or
not). No agent is told which landmark is its own: they have to spread out.

fastrl steps the PettingZoo env under its Parallel API with each (env, agent) pair as one
row of the slot, so ``infra.envs_per_worker`` counts rows (8 envs x 3 agents = 24); the
three agents share one policy (docs/multi-agent.md). It needs the ``multiagent`` extra
(``pip install -c constraints.txt -e ".[multiagent]"``). Run it from the repository root::

    python examples/cooperative_spread.py          # or: python -m examples.cooperative_spread

and the same from the command line:
``python -m fastrl.train env.id=mpe2.simple_spread_v3 env.kwargs.max_cycles=25
infra.envs_per_worker=24 ...`` with the keys of :func:`config`.
"""

from __future__ import annotations

import fastrl


def config(*overrides: str) -> fastrl.MainConfig:
    """PPO with one policy shared by the three agents; ``overrides`` (``key=value``) go on
    top, as on the command line."""
    return fastrl.load_config(None, [
        "env.id=mpe2.simple_spread_v3",  # a PettingZoo module: its parallel_env(**kwargs)
        "env.kwargs.max_cycles=25",
        "algo.name=ppo",
        "algo.lr=7e-4",
        "algo.update_epochs=10",
        "algo.num_minibatches=4",
        "algo.hidden_sizes=[128,128]",
        "algo.total_steps=1000000",
        "algo.target_return=-19",       # each agent's return over an episode of 25 steps
        "infra.num_workers=2",
        "infra.envs_per_worker=24",      # rows: 8 envs x 3 agents
        "infra.rollout_len=50",
        "log.eval_every_steps=100000",
        "log.eval_episodes=20",
        "log.console=false",
        *overrides,
    ])


def main() -> None:
    """Train the three agents and print what the run produced."""
    result = fastrl.Trainer(config()).fit()
    print(f"{result.global_step} agent steps in {result.wall_s:.0f} s; evaluation return per "
          f"agent {result.eval['return_mean']:.1f} (uniform random actions: about -27); run "
          f"directory {result.run_dir}")


if __name__ == "__main__":  # worker processes re-import this file: train only when run
    main()
