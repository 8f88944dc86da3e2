"""`zoo repro pretext_transfer`: GRPO on a self-supervised pretext task improves a pretrained model
on other, labelled tasks (Spatial-SSRL, arXiv 2510.27606: +4.6 points on seven spatial benchmarks at
3B; SSL4RL).

Here: the perception base (`tiny:qwen2_5_vl_perception`, the tiny Qwen2.5-VL after SFT on zoo's
    synthetic
perception corpus) trained by GRPO on one pretext task (4-way rotation of scenes; which of two
marked points of a ray-cast room is nearer; the order of two clips of a synthetic video) or on the
first two mixed, against the base itself and an equal-compute control (continued SFT on the base
corpus: as many trained sequences as the GRPO arm samples), each scored greedily on the held-out
downstream questions (spatial relations, counting, relative depth, temporal order; 32 of each by
default, `--val_size`).
"""

from __future__ import annotations

from datamodules import SyntheticRGBD, SyntheticScenes, SyntheticVideos
from tasks import DepthOrder, Rotation, TemporalJigsaw
from zoo.tools.repro.transfer import (
    GROUP,
    SFT_BATCH,
    Stage,
    TransferArm,
    TransferOptions,
    downstream,
    run_transfer_claim,
    seed_stats,
)

CLAIM = (
    "GRPO on a pretext task lifts held-out downstream accuracy over the base and over continued SFT "
    "(Spatial-SSRL, SSL4RL)"
)
STEPS = 60
PROBE_EVERY = 30
OPTIONS = TransferOptions(steps=STEPS, probe_every=PROBE_EVERY)
#: Declared before any run: a pretext arm holds the claim when its mean downstream accuracy (over
#: the four kinds and the seeds) beats both the base and the control by more than MARGIN and by more
#: than the seed spread (the larger sample standard deviation of the two arms compared).
MARGIN = 0.02
PRETEXT = ("rotation", "depth order", "mix", "clip order", "clip order (KL 0.04)")


def rotation() -> Rotation:
    return Rotation(labels="letters", answer_format="bare")


def depth_order() -> DepthOrder:
    return DepthOrder(
        points=2, min_distance=0.25, min_gap=0.5, marker_size=0.12, style="choice", reward="exact", answer_format="bare"
    )


def clip_order() -> TemporalJigsaw:
    """Added after the first three arms were measured, declared before its own run: the pretext
    nearest the downstream temporal questions (the order of two clips played back to back, as
    `configs/video_demo.yaml`)."""
    return TemporalJigsaw(clips=2, composite=True, style="choice", reward="exact", answer_format="bare")


def arms() -> list[TransferArm]:
    scenes = SyntheticScenes(size=10000, image_size=56)
    rooms = SyntheticRGBD(width=56, height=56)
    videos = SyntheticVideos(num_frames=6, height=56, width=56)
    grpo = dict(method="grpo", lr=3e-4, entropy_coef=0.02)
    control = Stage("sft", steps=8 * GROUP / SFT_BATCH, lr=3e-4)  # as many sequences as 8 prompts x G samples
    return [
        TransferArm("base"),
        TransferArm("control (SFT)", [control]),
        TransferArm("rotation", [Stage(task=rotation(), source=scenes, **grpo)]),
        TransferArm("depth order", [Stage(task=depth_order(), source=rooms, **grpo)]),
        TransferArm("mix", [Stage(task=[rotation(), depth_order()], source=[scenes, rooms], **grpo)]),
        TransferArm("clip order", [Stage(task=clip_order(), source=videos, **grpo)]),
        # declared after "clip order" learned its pretext and lost 0.245 downstream, before its
        # own run: the KL penalty of Jigsaw-R1 and R1-AQA (beta 0.04) towards the base, against
        # that forgetting
        TransferArm("clip order (KL 0.04)", [Stage(task=clip_order(), source=videos, beta=0.04, **grpo)]),
    ]


def verdict(rows: list[dict]) -> tuple[bool | None, str]:
    """Held if one pretext arm's mean downstream accuracy beats base and control by more than
    `MARGIN` and the seed spread; the note gives every arm's gains."""
    base = seed_stats(rows, "base")
    control = seed_stats(rows, "control (SFT)")
    if not base[2] or not control[2]:
        return None, "needs the base and the control arm"
    notes = []
    held = None
    for name in PRETEXT:
        mean, sd, n = seed_stats(rows, name)
        if not n:
            continue
        over_base = mean - base[0]
        over_control = mean - control[0]
        bar = max(MARGIN, sd, control[1], base[1])
        ok = over_base > bar and over_control > bar
        held = bool(held) or ok
        notes.append(
            f"{name}: {mean:.3f} ± {sd:.3f} ({n} seeds), {over_base:+.3f} over the base, "
            f"{over_control:+.3f} over the control (needs > {bar:.3f}): {'gain' if ok else 'no gain'}"
        )
    base_note = f"base {base[0]:.3f}, control {control[0]:.3f} ± {control[1]:.3f}"
    return held, f"{base_note}; " + "; ".join(notes) if notes else "needs a pretext arm"


def main(options: TransferOptions) -> dict:
    """Run the claim with ``options`` (`zoo.tools.repro.repro`)."""
    columns = [
        ("downstream mean", downstream()),
        *[(k, downstream(k)) for k in ("spatial", "counting", "depth", "temporal")],
    ]
    return run_transfer_claim(options, arms(), CLAIM, verdict, columns)
