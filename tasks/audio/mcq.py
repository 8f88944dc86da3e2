"""Labelled audio multiple choice, checked strictly: the GRPO recipe of R1-AQA (arXiv 2503.11197).

R1-AQA lists the options as text and rewards the exact option text inside ``<answer>``, plus a
format reward; lettered options are offered too. The verifier is `tasks.mcq.MultipleChoice`'s; only
the item differs.
"""

from __future__ import annotations

from tasks.audio.common import AudioQA, audio_part, waveform_of
from tasks.mcq import MultipleChoice


class AudioMCQ(MultipleChoice):
    """Ask a labelled question about a recording (`tasks.AudioQA`) and check the chosen option
    strictly.

    An answer that is not one of the options (in the form ``labels`` asks for) is invalid: it earns
    neither accuracy nor format reward.

    Args:
        labels: ``"letters"``: options listed as ``A) ...`` lines, the answer is a letter (any case,
            unless ``strict_letters``). ``"text"``: options listed as a Python-style list, the
            answer is the option's text exactly (R1-AQA).
        shuffle_choices: Present the options in a random order (from the example's rng) instead of
            as stored.
        **kwargs: Answer format options, see `tasks.Task` (R1-AQA: ``tags`` with ``format_weight``
            1).
    """

    name = "audio_mcq"
    modality = "audio_qa"
    levels = {}  # labelled data: no pretext source makes its items

    def media(self, item: AudioQA) -> list[dict]:
        return [audio_part(waveform_of(item.audio), item.audio.sampling_rate)]
