"""One RoboSumo bout as a PettingZoo ParallelEnv (optional: needs ``pip install 'sumo[pettingzoo]'``).

Nothing else in the package imports this module, so PettingZoo and Gymnasium are needed only by
those who use it::

    from sumo_cli.sim.pettingzoo_env import parallel_env
    env = parallel_env(body_a="ant", body_b="bug", render_mode="rgb_array")
    obs, infos = env.reset(seed=0)
    while env.agents:
        obs, rewards, terms, truncs, infos = env.step({a: env.action_space(a).sample() for a in env.agents})
    frame = env.render()            # (360, 480, 3) uint8
    env.close()

- Agents ``"agent_0"`` (body_a, drawn red) and ``"agent_1"`` (body_b, drawn blue); both act every
  step and leave together when the bout ends.
- Observations: ``Box(-inf, inf, (obs_size,), float32)``, the layout of ``sumo_env.BatchedSumo``
  (ant 120, bug 164, spider 208 values); actions: ``Box(-1, 1, (2 * legs,), float32)`` (ant 8,
  bug 12, spider 16), applied unclipped as in BatchedSumo (MuJoCo clamps the motors; the control
  cost sees the action as given).
- Reward = dense (control + push + move) + sparse (+-2000 on a decision, -1000 to both on a draw);
  every step's infos carry the parts (``dense``, ``sparse``, ``control``, ``push``, ``move``), and
  the last step's also ``outcome`` (``"win"``, ``"loss"``, ``"draw"`` from that agent's side),
  ``reason`` and ``length``.
- Terminations: a decided bout (ring-out or fall, a double loss included). Truncations: the step
  limit's draw (the 501st step without a decision) and a bout whose physics went unstable.
- ``reset(seed=s)`` re-seeds the bout generator (same seed, same start; PettingZoo's seed test
  passes); ``reset()`` draws the next start from it. An environment made without a seed starts
  from OS entropy.
- ``render_mode="rgb_array"``: ``render()`` returns the current frame via ``sim.render`` (headless;
  the GL backend is picked automatically, see there). ``close()`` releases the renderer.
"""

from __future__ import annotations

import numpy as np

try:
    from gymnasium import logger, spaces
    from pettingzoo import ParallelEnv
except ImportError as exc:  # pragma: no cover - exercised only without the optional group
    raise ImportError(
        "sumo_cli.sim.pettingzoo_env needs PettingZoo and Gymnasium: pip install 'sumo[pettingzoo]'"
    ) from exc

from .render import DEFAULT_FPS, DEFAULT_HEIGHT, DEFAULT_WIDTH
from .sumo_env import FALL_REASON, REASONS, RING_OUT_REASON, BatchedSumo

AGENTS = ("agent_0", "agent_1")
_FROM_A = {1: "win", 2: "loss", 3: "draw"}
_FROM_B = {1: "loss", 2: "win", 3: "draw"}


class SumoParallelEnv(ParallelEnv):
    """One bout of body_a ("agent_0") against body_b ("agent_1"); see the module notes."""

    metadata = {
        "name": "robosumo_v0",
        "render_modes": ["rgb_array"],
        "render_fps": DEFAULT_FPS,
        "is_parallelizable": True,
    }

    def __init__(self, body_a: str = "ant", body_b: str = "ant", physics: str = "faithful",
                 render_mode: str | None = None, width: int = DEFAULT_WIDTH, height: int = DEFAULT_HEIGHT,
                 shadows: bool | None = None, seed: int | None = None):
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be None or one of {self.metadata['render_modes']}, got {render_mode!r}")
        self.render_mode = render_mode
        self._size = (int(width), int(height))
        self._shadows = shadows
        self._sim = BatchedSumo(body_a, body_b, 1, physics=physics, seed=seed, auto_reset=False, n_threads=1)
        self.body_a, self.body_b, self.physics = self._sim.spec_a.name, self._sim.spec_b.name, physics
        self.possible_agents = list(AGENTS)
        self.agents: list[str] = []
        self._obs_spaces = {
            AGENTS[0]: spaces.Box(-np.inf, np.inf, (self._sim.obs_size_a,), np.float32),
            AGENTS[1]: spaces.Box(-np.inf, np.inf, (self._sim.obs_size_b,), np.float32),
        }
        self._act_spaces = {
            AGENTS[0]: spaces.Box(-1.0, 1.0, (self._sim.n_actions_a,), np.float32),
            AGENTS[1]: spaces.Box(-1.0, 1.0, (self._sim.n_actions_b,), np.float32),
        }
        self._renderer = None
        self._started = False

    # PettingZoo asks for the very same space object on every call: these return stored ones
    def observation_space(self, agent: str) -> spaces.Box:
        return self._obs_spaces[agent]

    def action_space(self, agent: str) -> spaces.Box:
        return self._act_spaces[agent]

    def _obs(self, obs_a: np.ndarray, obs_b: np.ndarray) -> dict[str, np.ndarray]:
        return {AGENTS[0]: obs_a[0].astype(np.float32), AGENTS[1]: obs_b[0].astype(np.float32)}

    def reset(self, seed: int | None = None, options: dict | None = None):
        obs_a, obs_b = self._sim.reset(seed=seed)
        self.agents = list(AGENTS)
        self._started = True
        return self._obs(obs_a, obs_b), {a: {} for a in AGENTS}

    def _action(self, actions: dict, agent: str) -> np.ndarray:
        if agent not in actions:
            raise ValueError(f"no action for {agent}: both agents act on every step of a bout")
        act = np.asarray(actions[agent], dtype=np.float64)
        shape = self._act_spaces[agent].shape
        if act.shape != shape:
            raise ValueError(f"{agent}: expected an action of shape {shape}, got {act.shape}")
        return act[None]

    def step(self, actions: dict):
        if not self.agents:
            raise RuntimeError("the bout is over (or was never started): call reset() first")
        r = self._sim.step(self._action(actions, AGENTS[0]), self._action(actions, AGENTS[1]))
        obs = self._obs(r.obs_a, r.obs_b)
        rewards = {AGENTS[0]: float(r.dense_a[0] + r.sparse_a[0]), AGENTS[1]: float(r.dense_b[0] + r.sparse_b[0])}
        infos = {
            AGENTS[0]: {"dense": float(r.dense_a[0]), "sparse": float(r.sparse_a[0]), "control": float(r.control_a[0]),
                        "push": float(r.push_a[0]), "move": float(r.move_a[0])},
            AGENTS[1]: {"dense": float(r.dense_b[0]), "sparse": float(r.sparse_b[0]), "control": float(r.control_b[0]),
                        "push": float(r.push_b[0]), "move": float(r.move_b[0])},
        }
        done = bool(r.done[0])
        decided = done and int(r.reason[0]) in (RING_OUT_REASON, FALL_REASON)
        terminations = dict.fromkeys(AGENTS, decided)
        truncations = dict.fromkeys(AGENTS, done and not decided)
        if done:
            outcome, reason, length = int(r.outcome[0]), REASONS[int(r.reason[0])], int(r.length[0])
            infos[AGENTS[0]].update(outcome=_FROM_A[outcome], reason=reason, length=length)
            infos[AGENTS[1]].update(outcome=_FROM_B[outcome], reason=reason, length=length)
            self.agents = []
        return obs, rewards, terminations, truncations, infos

    def render(self):
        if self.render_mode is None:
            logger.warn("render() was called without a render_mode; make the env with render_mode='rgb_array'")
            return None
        if self._renderer is None:
            from .render import BoutRenderer

            self._renderer = BoutRenderer(self._sim.model, *self._size, shadows=self._shadows)
        return self._renderer.render_qpos(self._sim.data[0].qpos)

    def close(self) -> None:
        renderer, self._renderer = self._renderer, None
        if renderer is not None:
            renderer.close()
        self._sim.close()

    @property
    def model(self):  # noqa: ANN201 - the scene's mujoco.MjModel, for those who want to look closer
        return self._sim.model


def parallel_env(**kwargs) -> SumoParallelEnv:
    """The ParallelEnv (PettingZoo's naming convention); keywords as for SumoParallelEnv."""
    return SumoParallelEnv(**kwargs)


def env(**kwargs):  # noqa: ANN201
    """The same bout as an AEC environment (PettingZoo's parallel_to_aec conversion)."""
    from pettingzoo.utils.conversions import parallel_to_aec

    return parallel_to_aec(parallel_env(**kwargs))
