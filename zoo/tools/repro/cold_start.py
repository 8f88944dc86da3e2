"""`zoo repro cold_start`: an SFT cold start on pretext demonstrations before GRPO, or GRPO alone.

Spatial-SSRL (arXiv 2510.27606) runs its RGB-D tasks after an SFT cold start; Jigsaw-R1 (arXiv
2505.23590) finds that an SFT cold start can hinder later RL. Here, from the perception base: GRPO
on the two-point depth order of ray-cast rooms for ``--steps`` steps, alone or after ``--steps / 2``
SFT steps (16 demonstrations each, the task's perfect answers) on the same task; both scored on
held-out depth-order rooms and the downstream questions.
"""

from __future__ import annotations

from datamodules import SyntheticRGBD
from zoo.tools.repro.pretext_transfer import depth_order
from zoo.tools.repro.transfer import Stage, TransferArm, TransferOptions, downstream, run_transfer_claim, seed_stats

CLAIM = "an SFT cold start on pretext demonstrations before GRPO beats GRPO alone (Spatial-SSRL vs Jigsaw-R1)"
STEPS = 150
OPTIONS = TransferOptions(steps=STEPS)
#: Declared before any run: held when the cold-start arm's held-out depth-order accuracy beats GRPO
#: alone by more than MARGIN and the seed spread; "did not hold" otherwise (a gain of GRPO alone is
#: Jigsaw-R1's side).
MARGIN = 0.05


def pretext(row: dict) -> float:
    return row["after"]["depth order"]["accuracy"]


def arms() -> list[TransferArm]:
    rooms = SyntheticRGBD(width=56, height=56)
    grpo = Stage("grpo", task=depth_order(), source=rooms, lr=3e-4, entropy_coef=0.02)
    cold = Stage("sft", steps=0.5, task=depth_order(), source=rooms, lr=3e-4)
    evals = {"depth order": (depth_order(), rooms)}
    return [TransferArm("GRPO only", [grpo], evals), TransferArm("SFT cold start + GRPO", [cold, grpo], evals)]


def verdict(rows: list[dict]) -> tuple[bool | None, str]:
    """Held if the cold-start arm's mean held-out depth-order accuracy beats GRPO alone by more than
    `MARGIN` and the larger seed standard deviation."""
    alone = seed_stats(rows, "GRPO only", pretext)
    cold = seed_stats(rows, "SFT cold start + GRPO", pretext)
    if not alone[2] or not cold[2]:
        return None, "needs both arms"
    bar = max(MARGIN, alone[1], cold[1])
    gap = cold[0] - alone[0]
    down = [seed_stats(rows, a, downstream())[0] for a in ("GRPO only", "SFT cold start + GRPO")]
    return gap > bar, (
        f"held-out depth order: cold start {cold[0]:.3f} ± {cold[1]:.3f}, GRPO only {alone[0]:.3f} ± "
        f"{alone[1]:.3f} (gap {gap:+.3f}, needs > {bar:.3f}); downstream mean {down[1]:.3f} vs "
        f"{down[0]:.3f}"
    )


def main(options: TransferOptions) -> dict:
    """Run the claim with ``options`` (`zoo.tools.repro.repro`)."""
    return run_transfer_claim(
        options, arms(), CLAIM, verdict, [("held-out depth order", pretext), ("downstream mean", downstream())]
    )
