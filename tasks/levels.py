"""Difficulty levels of every pretext task, for the fixed-seed pretext benchmark (`zoo pretext-bench`).

A level is a name and the constructor arguments that set its difficulty (jigsaw ``3x3`` is
``Jigsaw(rows=3, cols=3)``), in the spirit of VideoSSR's VIUBench (arXiv 2511.06281), which scores each pretext
task at several difficulties. The other arguments keep their defaults. A task with no natural difficulty has
one level, ``default``. Every `tasks.Task` subclass is in `LEVELS` or, when it needs labelled data no pretext
source provides, in `LABELLED` (a test enforces it).
"""

from __future__ import annotations

import re

from tasks.audio import AudioAnomalyGrounding, AudioJigsaw, AudioMCQ, AudioSpeed
from tasks.base import Task
from tasks.depth import DepthOrder, RegionalDepthOrder, RelativePosition3D
from tasks.grounding import ReferringGrounding
from tasks.gui import EmbodiedInverseDynamics, GUIGrounding, GUIInverseDynamics
from tasks.image import (
    Contrastive,
    CropInpaint,
    FlippedPatch,
    Jigsaw,
    JigsawBox,
    JigsawMultiple,
    JigsawPair,
    JigsawSingle,
    PatchPosition,
    PatchReorder,
    Rotation,
)
from tasks.mcq import MultipleChoice
from tasks.pointcloud import PointCloudJigsaw, PointCloudRotation
from tasks.temporal_grounding import TemporalGrounding
from tasks.video import AnomalyGrounding, ArrowOfTime, ObjectCounting, TemporalJigsaw

DEFAULT = {"default": {}}
_PERTURBATIONS = ["channel_swap", "mirror", "zoom_out", "rotate180", "grayscale", "invert", "zoom_in", "blur", "noise",
                  "shuffle", "stutter"]

#: Task class -> level name -> constructor arguments, easiest level first.
LEVELS: dict[type[Task], dict[str, dict]] = {
    # image
    Rotation: {"4way": {"angles": [0, 90, 180, 270]}, "8way": {"angles": [0, 45, 90, 135, 180, 225, 270, 315]}},
    Jigsaw: {f"{k}x{k}": {"rows": k, "cols": k} for k in (2, 3, 4)},  # Visual Jigsaw trains 3x3, SSL4RL 2x2
    JigsawPair: {"2x1": {"rows": 2, "cols": 1}, "3x1": {"rows": 3, "cols": 1}, "2x2": {"rows": 2, "cols": 2},
                 "3x3": {"rows": 3, "cols": 3}},  # Jigsaw-R1: 2x1 learned, 3x1 transfers, 2x2 does not
    JigsawMultiple: {"2x1": {"rows": 2, "cols": 1, "choices": 2}, "3x1": {"rows": 3, "cols": 1},
                     "2x2": {"rows": 2, "cols": 2}},
    JigsawSingle: {"2x1": {"rows": 2, "cols": 1}, "3x1": {"rows": 3, "cols": 1}, "2x2": {"rows": 2, "cols": 2},
                   "3x3": {"rows": 3, "cols": 3}},
    JigsawBox: {"2x1": {"rows": 2, "cols": 1}, "2x2": {"rows": 2, "cols": 2}, "3x3": {"rows": 3, "cols": 3}},
    PatchReorder: {"2x2": {"grids": ["2x2"]}, "2x2masked": {"grids": ["2x2"], "mask": 1.0},
                   "strips4": {"grids": ["1x4", "4x1"]}, "3x3": {"grids": ["3x3"]}},  # Spatial-SSRL's mix, then 3x3
    FlippedPatch: {f"{k}x{k}": {"rows": k, "cols": k} for k in (2, 3, 4)},
    CropInpaint: {"rotated": {"distractors": ["rotate_left", "rotate_right", "interior"]},
                  "context": {"distractors": ["interior", "context_quarter", "context_half"]}},
    PatchPosition: {"large": {"scale": [0.5, 0.8]}, "small": {"scale": [0.2, 0.4], "min_size": 8},
                    "augmented": {"augment": True}},
    Contrastive: {"mild": {"scale": [0.3, 0.6], "p": 0.3}, "strong": {}},  # strong: SSL4RL's augmentations
    # video (VideoSSR trains 6 clips, VIUBench's hard counting is up to 4 frames and 4 shapes)
    TemporalJigsaw: {f"{k}clips": {"clips": k} for k in (3, 4, 6)},
    AnomalyGrounding: {"4types": {}, "11types": {"perturbations": _PERTURBATIONS}},
    ObjectCounting: {"easy": {"max_frames_per_kind": 1, "max_per_frame": 2}, "medium": {},
                     "hard": {"max_frames_per_kind": 4, "max_per_frame": 4}},
    ArrowOfTime: DEFAULT,
    # RGB-D (Visual Jigsaw 3D orders 6 points)
    DepthOrder: {f"{k}points": {"points": k} for k in (2, 3, 4, 6)},
    RegionalDepthOrder: {"2regions": {"bands": [[0.0, 0.3], [0.7, 1.0]]}, "3regions": {},
                         "4regions": {"bands": [[0.0, 0.2], [0.27, 0.47], [0.53, 0.73], [0.8, 1.0]]}},
    RelativePosition3D: {"4way": {"diagonals": False}, "8way": {"diagonals": True}},
    # point clouds
    PointCloudJigsaw: {f"{k}slabs": {"num_slabs": k} for k in (2, 3, 4)},
    PointCloudRotation: {"4way": {"rotations": ["none", "x90", "x180", "x270"]}, "6way": {}},
    # audio
    AudioJigsaw: {f"{k}segments": {"segments": k} for k in (3, 4, 6)},
    AudioAnomalyGrounding: {"long": {"min_seconds": 0.5, "max_seconds": 1.0},
                            "short": {"min_seconds": 0.1, "max_seconds": 0.3}},
    AudioSpeed: {"2way": {"speeds": [0.5, 2.0], "reverse": False}, "4way": {},
                 "fine": {"speeds": [0.75, 1.0, 1.25, 1.5], "reverse": False}},
    # GUI and embodied
    GUIInverseDynamics: {"type": {"output": "letter"}, "action": {"output": "json"}},
    GUIGrounding: DEFAULT,
    EmbodiedInverseDynamics: DEFAULT,
}

#: Tasks that ask about labels a dataset provides (no synthetic source can make them): no pretext levels.
LABELLED: frozenset[type[Task]] = frozenset({AudioMCQ, MultipleChoice, ReferringGrounding, TemporalGrounding})

_NAME = re.compile(r"[A-Za-z0-9_.-]+")


def level_id(task_name: str, level: str) -> str:
    """How a task at a level is named in the benchmark, its metrics and its predictions: ``jigsaw@3x3``."""
    if not _NAME.fullmatch(level):
        raise ValueError(f"a level name is letters, digits, '_', '.' or '-', got {level!r}")
    return f"{task_name}@{level}"


def level_arguments(cls: type[Task], level: str, **common) -> dict:
    """The constructor arguments of ``cls`` at ``level``, after ``common`` ones (answer format options)."""
    levels = LEVELS.get(cls)
    if levels is None:
        raise KeyError(f"{cls.__name__} has no difficulty levels; tasks with levels: "
                       f"{sorted(c.__name__ for c in LEVELS)}")
    if level not in levels:
        raise KeyError(f"{cls.__name__} has no level {level!r}; its levels: {list(levels)}")
    return {**common, **levels[level]}
