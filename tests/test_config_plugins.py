"""The algo section assembled from the plug-ins: its keys, their order (what the saved YAML
and the config hash depend on), and the refusal of sections the algorithm ignores."""

from __future__ import annotations

from dataclasses import fields

import pytest

from fastrl.algos.registry import ALGORITHMS
from fastrl.config import AlgoConfig, ConfigError, MainConfig, config_hash, load_config, to_yaml

#: The default config's hash: the algorithms' plug-in sections must not move it (it was
#: d99b3b0e before they became plug-ins, and until issue 18 added env.clip_rewards,
#: env.atari, algo.encoder and algo.normalize_obs/normalize_reward, issue 19
#: infra.worker_inference, issue 29 infra.deterministic, issue 31 env.backend, and issue
#: 32 algo.core/core_size, issue 33 selfplay and algo.policy_per_group, issue 43
#: algo.anneal_clip/activation/ortho_init/log_std_init, then algo.shared_core, issue 45
#: log.wandb and log.mlflow). A change
#: of keys moves it on purpose; an accidental reordering of sections must not.
DEFAULT_HASH = "b32f6234"


def test_plugin_sections_keep_their_order_and_the_default_hash():
    sections = [f.name for f in fields(AlgoConfig) if f.name in
                {"appo", "replay", "dqn", "sac"} | set(ALGORITHMS)]
    assert sections == ["appo", "replay", "dqn", "sac"]
    assert config_hash(MainConfig()).startswith(DEFAULT_HASH)


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_every_algorithm_loads_with_its_defaults_and_round_trips(name, tmp_path):
    overrides = [f"algo.name={name}"]
    if name in ("dqn", "sac"):
        overrides.append("algo.replay.learning_starts=1000")
    if name == "sac":
        overrides.append("env.id=Pendulum-v1")
    cfg = load_config(None, overrides)
    assert cfg.algo.algorithm is ALGORITHMS[name]
    path = tmp_path / "config.yaml"
    path.write_text(to_yaml(cfg))
    assert load_config(path) == cfg


def test_a_section_the_algorithm_ignores_is_refused_but_a_saved_one_still_reads(tmp_path):
    overrides = ["algo.name=ppo", "algo.dqn.double=false"]
    with pytest.raises(ConfigError) as err:
        load_config(None, overrides)
    assert "'algo.dqn'" in str(err.value) and "algo.name=dqn, not ppo" in str(err.value)
    saved = MainConfig()
    saved.algo.dqn.double = False  # as a run written before the rule saved it
    path = tmp_path / "config.yaml"
    path.write_text(to_yaml(saved))
    assert load_config(path, saved=True).algo.dqn.double is False
    with pytest.raises(ConfigError):
        load_config(path)
