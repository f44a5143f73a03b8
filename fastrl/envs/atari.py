"""Atari through ale-py (Gymnasium's ``ALE/<Game>-v5`` ids, ROMs inside the ale-py wheel)
with the standard preprocessing of Mnih et al. 2015 and Machado et al. 2018.

``env.id=ALE/...`` makes the game with ``frameskip=1`` and wraps it in Gymnasium's
``AtariPreprocessing`` (no-op starts, frame skip with a max over the last two frames,
84x84 grayscale by area interpolation, optionally a life loss as episode end) and
``FrameStackObservation``: uint8 observations ``[frame_stack, 84, 84]``, channels first, which
the Nature CNN encoder (fastrl.models.encoders) reads. Sticky actions stay on at the v5
default. Reward clipping is ``env.clip_rewards`` (the collector's, so that logged returns are
the game's scores). ale-py and opencv-python-headless come with the ``atari`` extra.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from fastrl.core.settings import setting

PREFIX = "ALE/"
EXTRA = "pip install -c constraints.txt -e '.[atari]'"


@dataclass
class AtariSettings:
    """Preprocessing of ``env.id=ALE/...`` games (ignored for other envs)."""

    frame_skip: int = setting(4, "emulator frames per agent step (max-pooled over the last "
                              "two)", gt=0)
    screen_size: int = setting(84, "side of the square grayscale frame", gt=0)
    frame_stack: int = setting(4, "frames stacked into one observation", gt=0)
    noop_max: int = setting(30, "up to this many no-op actions at every reset", ge=0)
    terminal_on_life_loss: bool = setting(False, "end the episode at every lost life")
    sticky_actions: float = setting(0.25, "probability that the previous action repeats "
                                    "(the v5 default)", ge=0, le=1)
    fire_reset: bool = setting(False, "press FIRE at every reset and after every lost life "
                               "in games that have it (Breakout's ball waits for it: a "
                               "deterministic policy that never fires stalls)")


class FireOnReset(gym.Wrapper):
    """Presses FIRE after every reset and every lost life, in agent steps of the wrapped
    (preprocessed) game; the FIRE step's reward is added to the step that lost the life."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self._fire = env.unwrapped.get_action_meanings().index("FIRE")
        self._lives = 0

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        obs, _, terminated, truncated, info = self.env.step(self._fire)
        if terminated or truncated:  # (a game over within one step: start again)
            obs, info = self.env.reset(**kwargs)
        self._lives = self.env.unwrapped.ale.lives()
        return obs, info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        lives = self.env.unwrapped.ale.lives()
        if lives < self._lives and not (terminated or truncated):
            obs, fired, terminated, truncated, info = self.env.step(self._fire)
            reward += fired
        self._lives = lives
        return obs, reward, terminated, truncated, info


def is_atari(env_id: str) -> bool:
    """Whether ``env_id`` names an ale-py game."""
    return env_id.startswith(PREFIX)


def make_atari(env_id: str, kwargs: dict[str, Any], settings: AtariSettings) -> gym.Env:
    """The preprocessed game (module doc); ``kwargs`` go to ``gymnasium.make``. Raises
    ImportError naming the extra when ale-py or OpenCV is missing."""
    try:
        import ale_py
        import cv2  # noqa: F401 - AtariPreprocessing resizes with it
    except ImportError as e:
        raise ImportError(f"env.id={env_id} needs ale-py and opencv-python-headless, the "
                          f"atari extra: {EXTRA} ({e})") from None
    from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation

    gym.register_envs(ale_py)
    # grayscale frames from the emulator: the wrapper reads the screen itself, and an RGB
    # observation per emulated frame would be copied for nothing (8% of a step)
    env = gym.make(env_id, **{"disable_env_checker": True, "frameskip": 1,
                              "obs_type": "grayscale",
                              "repeat_action_probability": settings.sticky_actions, **kwargs})
    env = AtariPreprocessing(
        env, noop_max=settings.noop_max, frame_skip=settings.frame_skip,
        screen_size=settings.screen_size, terminal_on_life_loss=settings.terminal_on_life_loss,
        grayscale_obs=True, scale_obs=False)
    if settings.fire_reset and "FIRE" in env.unwrapped.get_action_meanings():
        env = FireOnReset(env)
    return FrameStackObservation(env, settings.frame_stack)


def atari_step_limit(env: gym.Env, settings: AtariSettings) -> int | None:
    """The fewest agent steps in which the game made by :func:`make_atari` can reach its
    truncation, ALE's ``max_num_frames_per_episode`` emulator frames (None: no limit). A
    step takes at most ``2 * frame_skip`` frames (a FIRE after a lost life), a reset at most
    ``noop_max + frame_skip`` (its no-ops and a FIRE)."""
    frames = env.unwrapped.ale.getInt("max_num_frames_per_episode")
    if frames <= 0:
        return None
    reset = settings.noop_max + settings.frame_skip
    return max(1, (frames - reset) // (2 * settings.frame_skip))
