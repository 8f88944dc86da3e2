"""Shared test utilities."""

import numpy as np
from PIL import Image

from tasks import Example, Task, answers
from tasks.audio.common import audio_part, waveform_of
from tasks.discovery import discover as discover_in


def discover(package, base):
    """Import every module under ``package``; return the concrete subclasses of ``base`` defined in
    it (test-local subclasses elsewhere are left out), sorted by import path."""
    return discover_in(package.__name__, base)


class LoudOrQuiet(Task):
    """Hear a clip and see a bar whose height is its loudness; answer whether the two agree (audio +
    image)."""

    name = "loud_or_quiet"
    modality = "audio"

    def make_example(self, item, rng):
        wave = waveform_of(item) * rng.choice((0.1, 1.0))
        agree = rng.random() < 0.5
        loud = np.abs(wave).max() > 0.2
        height = 50 if loud == agree else 20  # a tall bar says "loud"
        bar = np.zeros((56, 56, 3), np.uint8)
        bar[56 - height :, 20:36] = 255
        media = [audio_part(wave, item.sampling_rate), {"type": "image", "image": Image.fromarray(bar)}]
        question = f"Does the bar show how loud the sound is?\n{answers.choice_prompt(['yes', 'no'])}"
        return Example(self.user_message(media, question), "yes" if agree else "no", self.name)

    def answer_text(self, example):
        return answers.letter(["yes", "no"].index(example.answer))

    def score(self, example, answer):
        chosen = answers.parse_letter(answer, ["yes", "no"])
        return None if chosen is None else {"accuracy": float(chosen == example.answer)}


def make_item(modality: str, seed: int = 0):
    """A raw media item of ``modality`` with visible structure (no two pixels regions alike)."""
    rng = np.random.default_rng(seed)
    if modality == "image":
        h, w = 84, 112
        y, x = np.mgrid[0:h, 0:w]
        arr = np.stack([x * 255 // w, y * 255 // h, (x + y) * 127 // (h + w)], -1).astype(np.uint8)
        arr = arr + rng.integers(0, 8, arr.shape, dtype=np.uint8)
        return Image.fromarray(arr)
    if modality == "video":
        from tasks import Video

        # 16 frames at 4 fps: a gradient background and a bright square moving left to right
        t, h, w = 16, 48, 64
        y, x = np.mgrid[0:h, 0:w]
        frames = np.empty((t, h, w, 3), np.uint8)
        for i in range(t):
            frames[i] = np.stack([x * 255 // w, y * 255 // h, np.full_like(x, 40 + 8 * i)], -1)
            left = 2 + 3 * i
            frames[i, 16:32, left : left + 12] = (255, 255, 0)
        frames = frames + rng.integers(0, 6, frames.shape, dtype=np.uint8)
        return Video(frames=frames, fps=4.0, name=f"sample-video-{seed}")
    if modality == "rgbd":
        return _rgbd_item(rng, seed)
    if modality == "gui":
        return sample_transition(rng)
    if modality == "frame_pair":
        from tasks import FramePair

        # a yellow agent one cell right of where it was, on a noisy gradient
        frames = [_gradient(48, 48, rng) for _ in range(2)]
        frames[0][16:28, 8:20] = frames[1][16:28, 20:32] = (255, 220, 0)
        return FramePair(
            *map(Image.fromarray, frames),
            "right",
            ("up", "down", "left", "right", "stay"),
            name=f"sample-frame-pair-{seed}",
        )
    if modality == "point_cloud":
        from datamodules.sources.synthetic_points import make_object
        from tasks import PointCloud

        # an upright stack of coloured primitives, 256 points [256, 6]
        return PointCloud(points=make_object(rng, 256), name=f"sample-cloud-{seed}")
    if modality == "audio":
        from tasks import Audio

        # 2 s at 16 kHz: a rising chirp under decaying clicks every 0.25 s, plus a little noise
        sr = 16000
        t = np.arange(2 * sr) / sr
        wave = 0.4 * np.sin(2 * np.pi * (200 * t + 150 * t**2)) + 0.4 * np.exp(-30 * (t % 0.25))
        wave = wave + 0.01 * rng.standard_normal(len(t))
        return Audio(waveform=wave.astype(np.float32), sampling_rate=sr, name=f"sample-audio-{seed}")
    if modality == "audio_qa":
        from tasks import AudioQA

        return AudioQA(make_item("audio", seed), "What do you hear?", ["a chirp", "a dog", "speech", "rain"], "a chirp")
    if modality == "mcq":
        from tasks import Question

        return Question(
            "Which way does the colour get brighter?",
            ["left", "right", "up", "down"],
            "right",
            [make_item("image", seed)],
            name=f"sample-question-{seed}",
        )
    if modality == "referring":
        from tasks import Referring

        # three disjoint boxes of the 112 x 84 image (any two have IoU 0)
        targets = [
            ("the left part", [0, 0, 40, 84]),
            ("the top right corner", [56, 0, 112, 40]),
            ("the bottom right corner", [60, 44, 112, 84]),
        ]
        return Referring(make_item("image", seed), targets, name=f"sample-referring-{seed}")
    if modality == "moments":
        from tasks import Moments

        # the 4 s sample video: three disjoint moments
        targets = [
            ("the square enters", [0.0, 1.0]),
            ("the square crosses the middle", [1.5, 2.5]),
            ("the square nears the right edge", [3.0, 4.0]),
        ]
        return Moments(make_item("video", seed), targets, name=f"sample-moments-{seed}")
    return _source_item(modality, seed)


def _source_item(modality: str, seed: int):
    """An item of a modality with no sample above: from a source of that modality that builds with
    no arguments (a synthetic one), so a new modality's tasks get the contract tests with its
    source."""
    import datamodules
    from datamodules.sources.base import Source
    from tasks.discovery import discover

    for source in discover(datamodules.__name__, Source):
        if source.modality == modality:
            try:
                built = source()
            except TypeError:  # it needs arguments (a folder, a file)
                continue
            return built[seed % len(built)]
    raise NotImplementedError(f"no sample item for modality {modality!r}")


def _rgbd_item(rng, seed):
    """A 128x96 view of a room, analytic: floor 0.6 m below the camera, a wall 6 m ahead, five
    upright panels facing the camera at 1.5 to 5 m, and a hole of invalid depth (NaN) in a top
    corner."""
    from tasks import RGBD

    h, w, f = 96, 128, 90.0
    intrinsics = np.array([[f, 0, w / 2], [0, f, h / 2], [0, 0, 1]])
    v, u = np.mgrid[0:h, 0:w] + 0.5
    ray_y = (v - h / 2) / f  # y / z along each pixel's ray (y down)
    floor = np.where(ray_y > 0, 0.6 / np.maximum(ray_y, 1e-9), np.inf)
    depth = np.minimum(floor, 6.0)
    rgb = np.where((depth < 6.0)[..., None], [150, 120, 90], [200, 200, 210]).astype(np.float64)
    rgb += 40 * ((np.floor(u / 16) + np.floor(v / 16)) % 2)[..., None] * (depth < 6.0)[..., None]
    panels = [
        ((8, 40, 40, 90), 1.5, (40, 90, 200)),
        ((48, 76, 30, 70), 2.3, (60, 170, 60)),
        ((84, 120, 20, 60), 3.0, (220, 60, 40)),
        ((30, 70, 8, 36), 4.0, (230, 200, 40)),
        ((96, 124, 2, 18), 5.0, (150, 60, 160)),
    ]
    for (left, right, top, bottom), z, colour in panels:
        panel = (u >= left) & (u < right) & (v >= top) & (v < bottom) & (depth > z)
        depth[panel], rgb[panel] = z, colour
    depth[:12, :20] = np.nan
    rgb = np.clip(rgb + rng.integers(0, 8, rgb.shape), 0, 255).astype(np.uint8)
    return RGBD(rgb=rgb, depth=depth.astype(np.float32), intrinsics=intrinsics, name=f"sample-rgbd-{seed}")


SAMPLE_NODES = [  # (bounds, text, kind): a mail app; "Send" is a small button inside the bottom bar
    ((0, 0, 120, 200), "", "screen"),
    ((0, 0, 120, 30), "Inbox", "app_bar"),
    ((0, 40, 120, 160), "", "list"),
    ((0, 40, 120, 80), "Alice", "row"),
    ((0, 80, 120, 120), "Bob", "row"),
    ((0, 160, 120, 200), "", "bar"),
    ((80, 170, 110, 190), "Send", "button"),
]


def sample_transition(rng=None, action=None, nodes=True):
    """A 120 x 200 mail screen, a click on its "Send" button (or ``action``), and the screen after
    it."""
    from tasks import GUITransition, Node

    rng = rng or np.random.default_rng(0)
    before = _gradient(200, 120, rng)
    for (left, top, right, bottom), _, kind in SAMPLE_NODES[1:]:
        before[top:bottom, left:right] = {"button": (30, 120, 220), "row": (240, 240, 240)}.get(kind, (90, 90, 90))
    after = before.copy()
    after[30:40] = (0, 160, 0)  # a "sent" banner
    tree = [Node(*node) for node in SAMPLE_NODES] if nodes else None
    return GUITransition(
        Image.fromarray(before),
        Image.fromarray(after),
        action or {"action": "click", "x": 95, "y": 180},
        tree,
        name="sample-transition",
    )


def _gradient(h, w, rng):
    y, x = np.mgrid[0:h, 0:w]
    arr = np.stack([x * 255 // w, y * 255 // h, (x + y) * 127 // (h + w)], -1).astype(np.uint8)
    return arr + rng.integers(0, 8, arr.shape, dtype=np.uint8)


def grpo_fit(policy, data, steps: int = 2, **grpo):
    """``steps`` GRPO steps of ``policy`` on ``data`` then one validation, at tiny settings (G=2, 4
    new tokens; ``grpo`` overrides); checks every step ran with a finite loss and returns the
    trainer."""
    import torch
    from lightning.pytorch import Trainer

    from callbacks import GRPOMetrics
    from zoo import GRPOStrategy

    strategy = GRPOStrategy(**dict(num_generations=2, max_new_tokens=4) | grpo)
    trainer = Trainer(
        max_steps=steps,
        strategy=strategy,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[GRPOMetrics(summary=False)],
        num_sanity_val_steps=0,
        val_check_interval=steps,
        check_val_every_n_epoch=None,
    )
    trainer.fit(policy, data)
    assert trainer.global_step == steps and torch.isfinite(trainer.callback_metrics["train/grpo/loss"])
    return trainer


def decoded_sizes(monkeypatch) -> list[tuple[int, int]]:
    """The size of every image Pillow decodes from now on (``ImageFile.load`` calls that decode)."""
    from PIL import ImageFile

    sizes, load = [], ImageFile.ImageFile.load

    def spy(image):
        if image.tile:  # not decoded yet: an image is loaded again by later calls, at no cost
            sizes.append(image.size)
        return load(image)

    monkeypatch.setattr(ImageFile.ImageFile, "load", spy)
    return sizes


def text_rollout(examples, num_generations: int, texts: list[str]):
    """A `zoo.rollout.rollout.Rollout` of the given completion ``texts`` (``len(examples) *
    num_generations``, rows of one example contiguous) and no real tokens: one placeholder token
    each, all kept, none truncated; what a canned ``policy.sample`` returns to an evaluation."""
    import torch

    from zoo.rollout.rollout import Rollout

    n = len(texts)
    return Rollout(
        list(examples),
        None,
        num_generations,
        torch.zeros(n, 1, dtype=torch.long),
        torch.ones(n, 1, dtype=torch.bool),
        torch.zeros(n, dtype=torch.bool),
        texts,
    )
