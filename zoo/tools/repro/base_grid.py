"""`zoo repro base_grid`: training on one jigsaw grid size transfers to another (Jigsaw-R1, arXiv 2505.23590:
2x1 pair questions lift 3x1), redone from the perception base: GRPO on 2x1 `tasks.JigsawPair` questions of
synthetic scenes (84 px), scored on held-out 2x1 and 3x1 questions; `zoo repro grid_transfer` starts from the
random-init model instead.
"""

from __future__ import annotations

from datamodules import SyntheticScenes
from zoo.tools.repro.grid_transfer import task
from zoo.tools.repro.transfer import Stage, TransferArm, TransferOptions, run_transfer_claim, seed_stats

CLAIM = "training on 2x1 jigsaw pair questions lifts 3x1 accuracy, from the pretrained base (Jigsaw-R1)"
STEPS = 150
OPTIONS = TransferOptions(steps=STEPS)
#: Declared before any run: held when the 2x1-trained arm's held-out 3x1 accuracy beats the base's by more than
#: MARGIN and the seed spread (chance is 0.5).
MARGIN = 0.05


def grid(name: str):
    return lambda row: row["after"][name]["accuracy"]


def arms() -> list[TransferArm]:
    scenes = SyntheticScenes(size=10000, image_size=84)
    evals = {"2x1": (task(2), scenes), "3x1": (task(3), scenes)}
    return [TransferArm("base", [], evals),
            TransferArm("train 2x1", [Stage("grpo", task=task(2), source=scenes, lr=1e-3, entropy_coef=0.02)], evals)]


def verdict(rows: list[dict]) -> tuple[bool | None, str]:
    """Held if the 2x1-trained arm's mean held-out 3x1 accuracy beats the base's by more than `MARGIN` and the
    seed spread."""
    base, trained = seed_stats(rows, "base", grid("3x1")), seed_stats(rows, "train 2x1", grid("3x1"))
    if not base[2] or not trained[2]:
        return None, "needs both arms"
    bar, gap = max(MARGIN, trained[1]), trained[0] - base[0]
    two = seed_stats(rows, "train 2x1", grid("2x1"))
    return gap > bar, (f"held-out 3x1: base {base[0]:.3f}, trained on 2x1 {trained[0]:.3f} ± {trained[1]:.3f} "
                       f"(gap {gap:+.3f}, needs > {bar:.3f}); its 2x1 accuracy {two[0]:.3f} ± {two[1]:.3f}")


def main(options: TransferOptions) -> dict:
    """Run the claim with ``options`` (`zoo.tools.repro.repro`)."""
    return run_transfer_claim(options, arms(), CLAIM, verdict, [("held-out 2x1", grid("2x1")),
                                                                 ("held-out 3x1", grid("3x1"))])
