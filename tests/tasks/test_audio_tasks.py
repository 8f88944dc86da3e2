"""Audio tasks: every answer can be recovered from the audio the policy hears."""

import random

import numpy as np
import pytest

from tasks import Audio, AudioAnomalyGrounding, AudioJigsaw, AudioMCQ, AudioSpeed, SkipItem, answers
from tasks.audio.anomaly_grounding import PERTURBATIONS
from tasks.audio.common import segments
from tests.helpers import make_item


def heard(example) -> list[np.ndarray]:
    return [p["audio"] for p in example.messages[0]["content"] if p["type"] == "audio"]


@pytest.mark.parametrize("composite", [True, False])
@pytest.mark.parametrize("k", [2, 3, 5])
def test_jigsaw_answer_reassembles_the_original(k, composite):
    item = make_item("audio", 1)
    task = AudioJigsaw(segments=k, composite=composite)
    for seed in range(5):
        example = task.make_example(item, random.Random(seed))
        parts = heard(example)
        shown = segments(parts[0], k) if composite else parts
        answer = answers.parse_permutation(task.answer_text(example), k)
        rebuilt = np.concatenate(answers.restore(shown, answer))
        np.testing.assert_array_equal(rebuilt, item.waveform[: len(rebuilt)])
        assert len(rebuilt) == len(item.waveform) // k * k


def test_jigsaw_grades_partial_orders_and_skips_short_clips():
    task = AudioJigsaw(segments=3, reward="fraction")
    example = task.make_example(make_item("audio"), random.Random(0))
    right = example.answer
    wrong = [right[1], right[0], right[2]]
    assert task.verify(example, answers.wrap(", ".join(map(str, wrong)), "tags", False)).total == pytest.approx(1 / 3)
    with pytest.raises(SkipItem):
        task.make_example(Audio(np.zeros(1000, np.float32), 16000, "short"), random.Random(0))


@pytest.mark.parametrize("kind", sorted(PERTURBATIONS))
def test_anomaly_answer_is_where_the_audio_changed(kind):
    item = make_item("audio", 2)
    task = AudioAnomalyGrounding(perturbations=[kind], min_seconds=0.3, max_seconds=0.6)
    for seed in range(4):
        example = task.make_example(item, random.Random(seed))
        (altered,) = heard(example)
        start, end = answers.parse_interval(task.answer_text(example))
        first, stop = round(start * 16000), round(end * 16000)
        assert 3 <= (end - start) * 10 <= 6 + 1e-6
        np.testing.assert_array_equal(altered[:first], item.waveform[:first])
        np.testing.assert_array_equal(altered[stop:], item.waveform[stop:])
        changed = np.abs(altered[first:stop] - item.waveform[first:stop]).mean()
        assert changed > 0.05, (kind, changed)
        if kind == "silence":
            assert not altered[first:stop].any()
        if kind == "reverse":
            np.testing.assert_array_equal(altered[first:stop], item.waveform[first:stop][::-1])
        truth = task.verify(example, task.render_answer(example))
        near = task.verify(example, answers.wrap(f"{start:.1f}-{end + 0.1:.1f}", "tags", False))
        assert truth.total == 1.0 and 0.5 < near.total < 1.0


def tone(freq, seconds=2.0, rate=16000):
    t = np.arange(int(seconds * rate)) / rate
    return Audio((0.5 * np.sin(2 * np.pi * freq * t) * np.linspace(0.2, 1, len(t))).astype(np.float32), rate, "tone")


def test_speed_answer_matches_the_pitch_and_direction_heard():
    item = tone(500.0)
    task = AudioSpeed(speeds=[0.5, 1.0, 2.0], reverse=True)
    seen = set()
    for seed in range(24):
        example = task.make_example(item, random.Random(seed))
        (clip,) = heard(example)
        assert len(clip) == 16000  # duration / max speed, whatever the option
        chosen = answers.parse_letter(task.answer_text(example), task.options)
        seen.add(chosen)
        spectrum = np.abs(np.fft.rfft(clip * np.hanning(len(clip))))
        peak = np.fft.rfftfreq(len(clip), 1 / 16000)[spectrum.argmax()]
        assert peak == pytest.approx(500 * example.meta["speed"], abs=4)
        ramp = np.abs(clip[-800:]).max() - np.abs(clip[:800]).max()  # the tone swells: reversed, it fades
        assert (ramp < 0) == (chosen == "played backwards")
    assert seen == set(task.options)


def test_mcq_letters_and_strict_text():
    item = make_item("audio_qa")
    letters = AudioMCQ()
    example = letters.make_example(item, random.Random(3))
    pick = answers.letter(example.meta["choices"].index("a chirp"))
    assert letters.verify(example, f"<answer>{pick.lower()}</answer>").parts["accuracy"] == 1.0
    text = AudioMCQ(labels="text", shuffle_choices=False, format_weight=1.0)
    example = text.make_example(item, random.Random(0))
    assert example.meta["choices"] == item.choices
    assert text.verify(example, "<answer>a chirp</answer>").total == 2.0
    assert text.verify(example, "<answer>a dog</answer>").total == 1.0  # valid option, wrong: format only
    assert text.verify(example, "<answer>A chirp</answer>").total == 0.0  # not exactly an option
    assert text.verify(example, "a chirp").total == 0.0


def test_mcq_skips_items_whose_answer_is_not_a_choice():
    item = make_item("audio_qa")
    item.answer = "thunder"
    with pytest.raises(SkipItem, match="thunder"):
        AudioMCQ().make_example(item, random.Random(0))


@pytest.mark.parametrize("task", [AudioJigsaw(), AudioAnomalyGrounding(), AudioSpeed()], ids=lambda t: t.name)
def test_the_item_is_left_unchanged(task):
    item = make_item("audio", 4)
    before = item.waveform.copy()
    for seed in range(6):
        example = task.make_example(item, random.Random(seed))
        for clip in heard(example):
            assert not np.shares_memory(clip, item.waveform) and clip.dtype == np.float32
    np.testing.assert_array_equal(item.waveform, before)
