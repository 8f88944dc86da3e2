"""`zoo repro kl_penalty`: no KL term (Visual Jigsaw) vs a KL penalty of 0.04 (Jigsaw-R1, TRL's
default).

Visual Jigsaw (arXiv 2509.25190, §4.1) removes the KL term and trains from the Instruct model;
Jigsaw-R1 and R1-AQA keep beta 0.04 to the initial policy. The question checked here: does the
penalty hold a policy back when it must move far from where it started? The quickstart task (4-way
rotation of synthetic scenes, 56 px, one letter), B=8 x G=8 with the fast recipe measured when zoo
was planned (lr 1e-3, entropy bonus 0.02), trained with beta 0 and with beta 0.04 (k3).
"""

from __future__ import annotations

from datamodules import SyntheticScenes
from tasks import Rotation
from zoo.tools.repro.common import Arm, Options, paired, run_claim

CLAIM = "dropping the KL penalty (beta 0, Visual Jigsaw) learns at least as fast as beta 0.04 (Jigsaw-R1)"
STEPS = 300
OPTIONS = Options(steps=STEPS)


def arms() -> list[Arm]:
    source = SyntheticScenes(size=10000, image_size=56)
    task = Rotation(labels="letters", answer_format="bare")
    settings = {"task": "Rotation 4-way, letters, 56 px (the quickstart)"}
    return [
        Arm(
            f"beta {beta:g}", task, source, {"rotation": task}, lr=1e-3, beta=beta, entropy_coef=0.02, settings=settings
        )
        for beta in (0.0, 0.04)
    ]


def verdict(rows: list[dict]) -> tuple[bool | None, str]:
    """Held if, for every seed, beta 0 ends with held-out accuracy and final training reward at
    least those of beta 0.04."""
    pairs = paired(rows, "beta 0", "beta 0.04")
    notes = []
    held = True if pairs else None
    for s, free, kl in pairs:
        fa = free["after"]["rotation"]["accuracy"]
        ka = kl["after"]["rotation"]["accuracy"]
        fr = free["train"]["reward"][1]
        kr = kl["train"]["reward"][1]
        held &= fa >= ka and fr >= kr
        notes.append(
            f"seed {s}: held-out {fa:.2f} (beta 0) vs {ka:.2f} (beta 0.04), final training reward "
            f"{fr:.2f} vs {kr:.2f}, final KL {kl['train'].get('kl', [None, 0])[1]:.3f}"
        )
    return held, "; ".join(notes) or "needs both arms"


def main(options: Options) -> dict:
    """Run the claim with ``options`` (`zoo.tools.repro.repro`)."""
    return run_claim(options, arms(), CLAIM, verdict, ["reward", "frac_zero_std", "kl"], [("rotation", "accuracy")])
