"""Config loading (fastrl.config): overrides, value checks, cross-section checks, nested
off-policy keys, hashes and change lists. (The train command's --help and one-line errors:
tests/cli/test_train_command.py.)"""

from __future__ import annotations

import pytest
from helpers import ROOT

from fastrl.config import (
    ConfigError,
    MainConfig,
    config_changes,
    config_hash,
    field_docs,
    load_config,
    to_yaml,
)


def test_yaml_and_overrides_merge():
    cfg = load_config(ROOT / "configs/cartpole_ppo.yaml", ["infra.num_workers=3", "algo.lr=3e-4"])
    assert cfg.infra.num_workers == 3
    assert cfg.algo.lr == pytest.approx(3e-4)
    assert cfg.env.id == "CartPole-v1"


def test_every_field_is_typed_and_documented():
    rows = field_docs()
    assert {"env.id", "algo.lr", "infra.num_workers", "log.run_dir", "seed"} <= {
        r[0] for r in rows}
    for key, type_name, _, doc in rows:
        assert type_name and doc, f"{key} lacks a type or a doc"


@pytest.mark.parametrize("override, words", [
    ("infra.nope=1", ["unknown config key 'infra.nope'", "num_workers"]),
    ("nope=1", ["unknown config key 'nope'", "algo"]),
    ("infra.num_workers=abc", ["infra.num_workers", "int"]),
    ("infra.num_workers=0", ["infra.num_workers", "> 0"]),
    ("algo.lr=-1", ["algo.lr", "> 0"]),
    ("infra.rollout_len=0", ["infra.rollout_len", "> 0"]),
    ("algo.gamma=1.5", ["algo.gamma", "<= 1"]),
    ("infra.device=tpu", ["infra.device", "auto, cpu, cuda"]),
    ("algo.num_minibatches=7", ["algo.num_minibatches", "divide"]),
    ("algo.anneal_lr=maybe", ["algo.anneal_lr", "bool"]),
    ("algo.hidden_sizes=[64,0]", ["algo.hidden_sizes", "positive"]),
    ("algo.encoder=resnet", ["algo.encoder", "auto", "flat", "nature", "impala"]),
    ("algo.activation=gelu", ["algo.activation=gelu", "one of tanh, relu"]),
    ("algo.name=sac algo.encoder=impala", ["algo.encoder=impala", "sac", "auto, flat"]),
    ("algo.name=dqn algo.normalize_obs=true", ["algo.normalize_obs=true", "ppo", "not "
                                               "algo.name=dqn"]),
    ("algo.name=sac algo.normalize_reward=true", ["algo.normalize_reward=true", "ppo",
                                                  "not algo.name=sac"]),
    ("infra.staging_depth=-1", ["infra.staging_depth", ">= 0"]),
    ("log.metrics_every_s=-1", ["log.metrics_every_s", ">= 0"]),
    ("algo.appo.rho_bar=0", ["algo.appo.rho_bar", "> 0"]),
])
def test_bad_values_name_the_key_and_what_is_accepted(override, words):
    with pytest.raises(ConfigError) as err:
        load_config(None, override.split())
    for w in words:
        assert w in str(err.value)


@pytest.mark.parametrize("text, words", [
    ("algo: {lr: [1, 2\n", "not valid YAML"),
    ("- 1\n- 2\n", "must hold a mapping"),
])
def test_bad_config_files_are_named(tmp_path, text, words):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=words):
        load_config(path)
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(tmp_path)  # a directory


def test_undefined_interpolation_and_non_utf8_files_are_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="algo.lr"):
        load_config(None, ["algo.lr=${nope}"])
    path = tmp_path / "latin1.yaml"
    path.write_bytes("seed: 1 # caf\xe9\n".encode("latin-1"))
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_config(path)


def test_run_dir_that_is_a_file_is_a_config_error(tmp_path):
    from fastrl.trainer import make_run_dir

    (tmp_path / "file").write_text("")
    with pytest.raises(ConfigError, match="log.run_dir"):
        make_run_dir(load_config(None, [f"log.run_dir={tmp_path / 'file'}"]))


def test_list_element_override_says_to_give_the_whole_list():
    with pytest.raises(ConfigError, match=r"algo.hidden_sizes=\[32,32\]"):
        load_config(None, ["algo.hidden_sizes.0=32"])


def test_minibatches_of_one_are_refused():
    with pytest.raises(ConfigError, match="at least 2"):
        load_config(None, ["infra.num_workers=1", "infra.envs_per_worker=1",
                           "infra.rollout_len=4", "algo.num_minibatches=4"])


def test_appo_batch_and_lag_defaults():
    ppo, appo = load_config(None, []), load_config(None, ["algo.name=appo"])
    assert (ppo.policy_lag_bound, appo.policy_lag_bound) == (0, 16)
    assert appo.batch_slots == appo.infra.num_workers == 2
    wide = load_config(None, ["algo.name=appo", "algo.appo.batch_slots=3",
                              "infra.max_policy_lag=4"])
    assert (wide.batch_size, wide.policy_lag_bound) == (3 * 4 * 64, 4)


@pytest.mark.parametrize("overrides, words", [
    (["algo.name=appo", "algo.appo.batch_slots=5"],
     ["algo.appo.batch_slots=5", "infra.num_workers*infra.ring_slots=4", "wait for good"]),
    (["algo.name=appo", "algo.appo.batch_slots=1", "algo.num_minibatches=3"],
     ["algo.num_minibatches=3", "algo.appo.batch_slots*envs_per_worker*rollout_len=256"]),
    (["algo.appo.batch_slots=3"], ["algo.appo", "only applies to algo.name=appo, not ppo"]),
    (["algo.name=appo", "algo.gae_lambda=0.9"], ["algo.gae_lambda=0.9",
                                                 "algo.appo.vtrace_lambda"]),
    (["algo.name=dqn", "infra.staging_depth=0"], ["infra.staging_depth=0", "not dqn"]),
    (["algo.name=dqn", "infra.max_policy_lag=2"],
     ["infra.max_policy_lag=2", "appo or ppo", "leave it unset"]),
])
def test_appo_settings_that_cannot_work_are_refused(overrides, words):
    with pytest.raises(ConfigError) as err:
        load_config(None, overrides)
    for w in words:
        assert w in str(err.value)


def test_override_without_equals_is_an_error():
    with pytest.raises(ConfigError, match="key=value"):
        load_config(None, ["configs/a.yaml", "oops"])


def test_hash_changes_with_any_value():
    assert config_hash(MainConfig()) != config_hash(load_config(None, ["seed=2"]))
    assert "num_workers: 2" in to_yaml(MainConfig())


def test_nested_off_policy_keys_are_checked():
    with pytest.raises(ConfigError, match="valid keys in section 'algo.replay': capacity"):
        load_config(None, ["algo.replay.size=10"])
    with pytest.raises(ConfigError, match="algo.sac.tau=0.0.*must be > 0"):
        load_config(None, ["algo.sac.tau=0"])
    with pytest.raises(ConfigError, match="algo.replay.capacity=100.*one batch"):
        load_config(None, ["algo.name=dqn", "algo.replay.capacity=100"])



def test_config_changes_lists_each_changed_key():
    a = load_config(None, [])
    b = load_config(None, ["algo.total_steps=5", "infra.num_workers=3"])
    assert config_changes(a, b) == ["algo.total_steps: 500000 -> 5",
                                    "infra.num_workers: 2 -> 3"]
    assert config_changes(a, a) == []

