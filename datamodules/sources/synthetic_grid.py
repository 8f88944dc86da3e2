"""`SyntheticGridWorld`: a sprite moving on a grid with walls, drawn before and after each move, so
embodied inverse dynamics needs no data on disk."""

from __future__ import annotations

import random

import numpy as np
from PIL import Image

from datamodules.sources.base import Source
from tasks.gui.common import FramePair

MOVES = {"up": (0, -1), "down": (0, 1), "left": (-1, 0), "right": (1, 0), "stay": (0, 0)}
_WALL = (60, 60, 70)
_FLOOR = (205, 215, 190)
_AGENT = (230, 40, 40)


class SyntheticGridWorld(Source):
    """Frame pairs of an agent (a red square) on a ``grid x grid`` board with random walls; item
    ``i`` is a pure function of ``(seed, i)``.

    Item ``i`` draws walls (each cell with probability ``walls``), the agent on a free cell, and a
    move from ``actions`` that the board allows (never into a wall or off the board, so each label
    is visible; ``stay`` leaves the frames equal).

    Args:
        size: Number of distinct frame pairs (the length of the source).
        grid: Cells per side.
        image_size: Side of the square frames in pixels.
        actions: The action set, a subset of ``up``, ``down``, ``left``, ``right``, ``stay``, in
            option order.
        walls: Probability that a cell is a wall.
        seed: Selects a different family of boards.
    """

    modality = "frame_pair"

    def __init__(
        self,
        size: int = 10000,
        grid: int = 4,
        image_size: int = 56,
        actions: list[str] = list(MOVES),  # noqa: B006, B008
        walls: float = 0.15,
        seed: int = 0,
    ):
        if size < 1 or grid < 2 or image_size < grid:
            raise ValueError(f"need size >= 1, grid >= 2 and image_size >= grid; got {size}, {grid}, {image_size}")
        if len(set(actions)) != len(actions) or len(actions) < 2 or not set(actions) <= set(MOVES):
            raise ValueError(f"actions must be >= 2 distinct of {list(MOVES)}, got {actions}")
        if not 0 <= walls < 1:
            raise ValueError(f"walls must be in [0, 1), got {walls}")
        self.size = size
        self.grid = grid
        self.image_size = image_size
        self.actions = tuple(actions)
        self.walls = walls
        self.seed = seed

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> FramePair:
        if not 0 <= index < self.size:
            raise IndexError(f"index {index} out of range for SyntheticGridWorld of size {self.size}")
        rng = random.Random(f"grid-world:{self.seed}:{index}")
        while True:  # a board where the agent has at least one allowed action (nearly always the first)
            wall = [[rng.random() < self.walls for _ in range(self.grid)] for _ in range(self.grid)]
            free = [(x, y) for y in range(self.grid) for x in range(self.grid) if not wall[y][x]]
            if not free:
                continue
            x, y = rng.choice(free)
            allowed = [a for a in self.actions if self._open(wall, x + MOVES[a][0], y + MOVES[a][1])]
            if allowed:
                break
        action = rng.choice(allowed)
        dx, dy = MOVES[action]
        frames = [Image.fromarray(self.render(wall, cell)) for cell in ((x, y), (x + dx, y + dy))]
        return FramePair(*frames, action, self.actions, name=f"SyntheticGridWorld(seed={self.seed})[{index}]")

    def _open(self, wall: list[list[bool]], x: int, y: int) -> bool:
        return 0 <= x < self.grid and 0 <= y < self.grid and not wall[y][x]

    def render(self, wall: list[list[bool]], agent: tuple[int, int]) -> np.ndarray:
        """The board as ``[S, S, 3]`` uint8: walls dark, floor light, the agent a red square inset
        in its cell."""
        cell = np.arange(self.image_size) * self.grid // self.image_size  # pixel -> cell index
        board = np.array(wall)[cell[:, None], cell[None, :]]  # [S, S]
        image = np.where(board[..., None], _WALL, _FLOOR).astype(np.uint8)
        edges = np.searchsorted(cell, [agent[0], agent[0] + 1, agent[1], agent[1] + 1])
        inset = max(1, (edges[1] - edges[0]) // 6)
        image[edges[2] + inset : edges[3] - inset, edges[0] + inset : edges[1] - inset] = _AGENT
        return image
