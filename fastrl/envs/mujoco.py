"""MuJoCo locomotion: Gymnasium's ``Hopper-v5``, ``HalfCheetah-v5``, ``Walker2d-v5``,
``Ant-v5``, ``Humanoid-v5`` and the rest of ``gymnasium.envs.mujoco``.

Gymnasium makes these envs itself; fastrl only checks that the ``mujoco`` extra is there
(one line naming it when not) and quiets MuJoCo's model-compiler warnings: MuJoCo 4 warns
about a deprecated attribute of Gymnasium's bundled models every time one is compiled,
which is once per env, so that a run of 2 workers with 16 envs each printed the same line
33 times. Each distinct message is now printed once per process.
"""

from __future__ import annotations

import sys

import gymnasium as gym

EXTRA = "pip install -c constraints.txt -e '.[mujoco]'"
_ENTRY = "gymnasium.envs.mujoco"
_seen: set[str] = set()


def is_mujoco(env_id: str) -> bool:
    """Whether ``env_id`` is registered as one of Gymnasium's MuJoCo envs."""
    try:
        entry = gym.spec(env_id).entry_point
    except gym.error.Error:
        return False
    return isinstance(entry, str) and entry.startswith(_ENTRY)


def prepare_mujoco(env_id: str) -> None:
    """Import MuJoCo for ``env_id`` and send its warnings through :func:`_warn_once`.
    Raises ImportError naming the extra when MuJoCo is missing."""
    try:
        import mujoco
    except ImportError as e:
        raise ImportError(f"env.id={env_id} needs MuJoCo, the mujoco extra: {EXTRA} "
                          f"({e})") from None
    if mujoco.get_mju_user_warning() is not _warn_once:
        mujoco.set_mju_user_warning(_warn_once)


def _warn_once(message: str) -> None:
    """MuJoCo's warning callback: each distinct message once per process, on stderr."""
    if message not in _seen:
        _seen.add(message)
        print(f"MuJoCo warning (shown once): {message}", file=sys.stderr)
