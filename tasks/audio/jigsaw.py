"""Audio jigsaw: cut a clip into segments, shuffle them, ask for their original order.

The temporal jigsaw of VideoSSR (arXiv 2511.06281) and Visual Jigsaw (arXiv 2509.25190) carried over
to audio, in the permutation convention of `tasks.answers`; graded by the footrule or the fraction
in place.
"""

from __future__ import annotations

import random

import numpy as np

from tasks import answers
from tasks.audio.common import Audio, audio_part, segments, waveform_of
from tasks.base import Example
from tasks.order import OrderReward, OrderTask


class AudioJigsaw(OrderTask):
    """Shuffle equal consecutive segments of a clip and ask for the segment numbers in original
    order.

    Args:
        segments: Number of segments K, at least 2. Samples left over after an equal split are
            dropped.
        min_segment_seconds: Shortest usable segment; shorter clips are skipped.
        composite: Play the shuffled segments back to back as one clip, numbered in the order they
            play, instead of one audio part per segment after its number.
        reward: Which graded score is the accuracy (see `tasks.OrderTask`).
        partial_credit: Scale of the graded accuracy of a valid but wrong order; an exact order
            earns 1.
        **kwargs: Answer format options, see `tasks.Task`.
    """

    name = "audio_jigsaw"
    modality = "audio"
    levels = {f"{k}segments": {"segments": k} for k in (3, 4, 6)}

    def __init__(
        self,
        segments: int = 3,
        min_segment_seconds: float = 0.25,
        composite: bool = True,
        reward: OrderReward = "footrule",
        partial_credit: float = 1.0,
        **kwargs,
    ):
        super().__init__(reward=reward, partial_credit=partial_credit, **kwargs)
        if segments < 2:
            raise ValueError(f"segments must be >= 2, got {segments}")
        if not min_segment_seconds > 0:
            raise ValueError(f"min_segment_seconds must be > 0, got {min_segment_seconds}")
        self.segments = segments
        self.min_segment_seconds = min_segment_seconds
        self.composite = composite

    def make_example(self, item: Audio, rng: random.Random) -> Example:
        wave = waveform_of(item, self.segments * self.min_segment_seconds)
        pieces = segments(wave, self.segments)
        shown = list(range(self.segments))
        rng.shuffle(shown)
        ordered = [pieces[slot] for slot in shown]
        k = self.segments
        seconds = len(pieces[0]) / item.sampling_rate
        if self.composite:
            media = [audio_part(np.concatenate(ordered), item.sampling_rate)]
            intro = (
                f"This recording is made of {k} segments of {seconds:.2f} seconds each, cut from one recording "
                f"and played in a shuffled order. Number the segments 1 to {k} in the order they play here.\n"
            )
        else:
            media = [
                {
                    "type": "text",
                    "text": f"These {k} recordings are segments of equal length cut from one "
                    f"recording, shown in a shuffled order and numbered 1 to {k}.\n",
                }
            ]
            for i, piece in enumerate(ordered, start=1):
                media += [{"type": "text", "text": f"Segment {i}:"}, audio_part(piece, item.sampling_rate)]
            intro = ""
        question = intro + (
            f"Put the segments back in their original order: give the segment numbers from the "
            f"first segment to the last, {k} numbers separated by commas."
        )
        meta = {"segments": k, "shown": shown, "segment_samples": len(pieces[0])}
        return Example(self.user_message(media, question), answers.shuffle_answer(shown), self.name, meta)
