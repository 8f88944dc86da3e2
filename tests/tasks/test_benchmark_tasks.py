"""The labelled benchmark tasks on hand-computed cases: option parsing, box and temporal IoU,
coordinates."""

import random

import numpy as np
import pytest
from PIL import Image

from tasks import (
    Audio,
    AudioMCQ,
    Moments,
    MultipleChoice,
    Question,
    Referring,
    ReferringGrounding,
    TemporalGrounding,
    Video,
)
from tasks.grounding import box_iou, fit_size, parse_box
from tests.helpers import make_item


def mcq(labels="letters", **kwargs):
    task = MultipleChoice(labels=labels, shuffle_choices=False, **kwargs)
    item = Question("How many?", ["one", "two", "three"], "two", [make_item("image")])
    return task, task.make_example(item, random.Random(0))


@pytest.mark.parametrize(
    "answer, accuracy, valid",
    [
        ("B", 1.0, True),
        ("b", 1.0, True),
        ("(B)", 1.0, True),
        ("B.", 1.0, True),
        ("A", 0.0, True),
        ("D", 0.0, False),
        ("B) two", 0.0, False),
        ("AB", 0.0, False),
        ("two", 0.0, False),
        ("B, C", 0.0, False),
    ],
)
def test_letters_are_parsed_strictly(answer, accuracy, valid):
    task, example = mcq(format_weight=0.5)
    reward = task.verify(example, f"<answer>{answer}</answer>")
    assert reward.parts == {"accuracy": accuracy, "format": float(valid)}
    assert reward.total == accuracy + 0.5 * valid


def test_text_labels_need_the_option_exactly():
    task, example = mcq("text")
    assert "Options: ['one', 'two', 'three']" in example.prompt_text
    assert task.verify(example, "<answer>two</answer>").parts["accuracy"] == 1.0
    assert task.verify(example, "<answer>Two</answer>").parts["format"] == 0.0
    assert task.verify(example, "<answer>B</answer>").parts["format"] == 0.0


def test_any_media_mix_is_shown_in_order():
    video = Video(np.zeros((5, 8, 8, 3), np.uint8), 2.0)  # an odd frame count: the last frame is dropped
    audio = Audio(np.zeros(1600, np.float32), 16000)
    item = Question("?", ["a", "b"], "a", [Image.new("L", (8, 8)), video, audio])
    example = MultipleChoice().make_example(item, random.Random(0))
    parts = example.messages[0]["content"]
    assert [p["type"] for p in parts] == ["image", "video", "audio", "text"]
    assert parts[0]["image"].mode == "RGB" and len(parts[1]["video"]) == 4


def test_audio_mcq_is_the_same_verifier():
    assert issubclass(AudioMCQ, MultipleChoice) and AudioMCQ.verify is MultipleChoice.verify
    example = AudioMCQ(shuffle_choices=False).make_example(make_item("audio_qa"), random.Random(0))
    assert example.messages[0]["content"][0]["type"] == "audio" and example.meta["choices"][0] == "a chirp"


def test_box_iou_by_hand():
    assert box_iou([0, 0, 10, 10], [0, 0, 10, 10]) == 1.0
    assert box_iou([0, 0, 10, 10], [5, 0, 15, 10]) == pytest.approx(50 / 150)
    assert box_iou([0, 0, 10, 10], [0, 0, 10, 5]) == 0.5
    assert box_iou([0, 0, 10, 10], [10, 10, 20, 20]) == 0.0
    assert box_iou([3, 3, 3, 3], [3, 3, 3, 3]) == 0.0


@pytest.mark.parametrize(
    "answer, box",
    [
        ("[250, 0, 750, 500]", [250, 0, 750, 500]),
        ("250,0,750,500", [250, 0, 750, 500]),
        ("(250,0),(750,500)", [250, 0, 750, 500]),
        ("<|box_start|>(250,0),(750,500)<|box_end|>", [250, 0, 750, 500]),
        ("<|object_ref_start|>the dog<|object_ref_end|><|box_start|>(250,0),(750,500)<|box_end|>", [250, 0, 750, 500]),
        ('{"bbox_2d": [250, 0, 750.5, 500], "label": "dog"}', [250, 0, 750.5, 500]),
        ('```json\n[\n  {"bbox_2d": [250, 0, 750, 500], "label": "dog"}\n]\n```', [250, 0, 750, 500]),
        ("[750, 0, 250, 500]", None),
        ("[1, 2, 3]", None),
        ("[-1, 0, 5, 5]", None),
        ("[1, 2, 3, 4] [1, 2, 3, 4]", None),
        ('[{"bbox_2d": [1, 2, 3, 4]}, {"bbox_2d": [1, 2, 3, 4]}]', None),
        ('{"bbox_2d": [1, 2, 3, "4"]}', None),
        ('{"bbox": [1, 2, 3, 4]}', None),
        ("box: 1 2 3 4", None),
    ],
)
def test_box_answers_in_every_model_style(answer, box):
    assert parse_box(answer) == box


def referring(coords="normalized", **kwargs):
    task = ReferringGrounding(coords=coords, answer_format="bare", **kwargs)
    item = Referring(Image.new("RGB", (200, 100)), [("the left half's top", [0, 0, 100, 50])])
    return task, task.make_example(item, random.Random(0))


@pytest.mark.parametrize(
    "answer, iou",
    [
        ("[0, 0, 500, 500]", 1.0),
        ("[0, 0, 500, 250]", 0.5),
        ("[250, 0, 750, 500]", 1 / 3),
        ("[500, 500, 1000, 1000]", 0.0),
    ],
)
def test_normalised_boxes_earn_their_iou_and_accuracy_from_half(answer, iou):
    task, example = referring()
    assert example.answer == [0, 0, 500, 500]
    reward = task.verify(example, answer)
    assert reward.parts["iou"] == pytest.approx(iou) and reward.total == pytest.approx(iou)
    assert reward.parts["accuracy"] == float(iou >= 0.5) and reward.parts["format"] == 1.0


def test_threshold_and_bounds():
    task, example = referring(threshold=0.75, format_weight=0.5)
    assert task.verify(example, "[0, 0, 500, 250]").parts == {"accuracy": 0.0, "iou": 0.5, "format": 1.0}
    assert task.verify(example, "[0, 0, 500, 250]").total == 1.0  # IoU 0.5 + 0.5 format
    assert task.verify(example, "[0, 0, 1001, 500]").parts["format"] == 0.0  # past 1000: no valid box
    with pytest.raises(ValueError):
        ReferringGrounding(threshold=0.0)


def test_absolute_coordinates_are_pixels_of_the_resized_image():
    assert fit_size(200, 100, 28, 10**7) == (196, 112)
    assert fit_size(1000, 500, 28, 100 * 28 * 28) == (392, 196)
    task, example = referring("absolute")
    assert example.messages[0]["content"][0]["image"].size == (196, 112) and example.meta["bounds"] == [196, 112]
    assert example.answer == [0, 0, 98, 56] and "196 x 112" in example.prompt_text
    assert task.verify(example, "[0, 0, 98, 56]").parts["accuracy"] == 1.0
    assert task.verify(example, "[0, 0, 197, 56]").parts["format"] == 0.0


@pytest.mark.parametrize(
    "answer, iou, valid",
    [
        ("1.0-3.0", 1.0, 1),
        ("1-3", 1.0, 1),
        ("2.0-4.0", 1 / 3, 1),
        ("1.0-2.0", 0.5, 1),
        ("3.0-1.0", 0.0, 1),
        ("5-6", 0.0, 1),
        ("1.0 to 3.0", 0.0, 0),
        ("1.0-3.0s", 0.0, 0),
    ],
)
def test_temporal_iou_by_hand(answer, iou, valid):
    task = TemporalGrounding(answer_format="tags", format_weight=0.5)
    item = Moments(Video(np.zeros((8, 16, 16, 3), np.uint8), 2.0), [("a person sits down", [1.0, 3.0])])
    example = task.make_example(item, random.Random(0))
    assert task.answer_text(example) == "1.00-3.00"
    reward = task.verify(example, f"<answer>{answer}</answer>")
    assert reward.parts == {"accuracy": float(iou >= 0.5), "iou": pytest.approx(iou), "format": valid}
    assert reward.total == pytest.approx(iou + 0.5 * valid)
