"""The contract every Task subclass meets; a new task file is picked up and tested here with no
edit."""

import inspect
import json
import random
import re

import numpy as np
import pytest
from PIL import Image

import tasks
from tasks import Task, answers
from tests.helpers import discover

TASKS = discover(tasks, Task)
FORMATS = [("tags", False), ("tags", True), ("boxed", False), ("boxed", True), ("bare", False)]
by_name = pytest.mark.parametrize("cls", TASKS, ids=lambda c: c.__name__)
by_format = pytest.mark.parametrize("answer_format, think", FORMATS, ids=[f"{f}-think{t:d}" for f, t in FORMATS])


def _example(cls, sample_item, seed=0, **kwargs):
    task = cls(**kwargs)
    return task, task.make_example(sample_item(cls.modality), random.Random(seed))


def _junk(task, example):
    """Completions that must never raise and never earn accuracy, for the task's answer format."""
    right = task.answer_text(example)
    noise = random.Random(7)
    twice = "\n".join([right] * 2) if task.answer_format == "bare" else task.render_answer(example) * 2
    return [
        "",
        "<answer></answer>",
        "<answer>" * 1000,
        "\\boxed{}",
        "1,1,1,1",
        "<answer> </answer>",
        "<think>x</think>",
        twice,
        answers.wrap(right + " and something else", task.answer_format, task.think),
        bytes(noise.randrange(256) for _ in range(500)).decode("latin-1"),
        "".join(noise.choice("0123456789, <>/answer{}\\boxed") for _ in range(100_000)),
    ]


def _freeze(value):
    """A comparable stand-in for a content value: images and arrays by their bytes (an array's repr
    elides)."""
    if isinstance(value, Image.Image):
        return value.mode, value.size, value.tobytes()
    if isinstance(value, np.ndarray):
        return value.dtype.str, value.shape, value.tobytes()
    return repr(value)


def _fingerprint(example):
    """Everything an example shows or hides, with media as bytes, for equality checks."""
    media = [
        {key: _freeze(value) for key, value in part.items()}
        for message in example.messages
        for part in message["content"]
    ]
    return example.task, json.dumps(example.answer), json.dumps(example.meta, sort_keys=True), media


def _snapshot(item):
    """Copies of what a task must leave unchanged in a raw item."""
    if isinstance(item, Image.Image):
        return (np.asarray(item).copy(),)
    if isinstance(item, tasks.Video):
        return item.frames.copy(), item.fps
    if isinstance(item, tasks.RGBD):
        return item.rgb.copy(), np.nan_to_num(item.depth, nan=-1.0), item.intrinsics.copy()  # NaN != NaN
    return ()


def test_tasks_are_discovered():
    expected = {"rotation", "jigsaw", "temporal_jigsaw", "anomaly_grounding", "object_counting", "arrow_of_time"}
    assert expected <= {cls.name for cls in TASKS}


@by_name
def test_class_declares_name_modality_parts(cls):
    assert isinstance(cls.name, str) and cls.name
    assert isinstance(cls.modality, str) and cls.modality
    assert cls.parts[0] == "accuracy" and "format" not in cls.parts
    assert len(set(cls.parts)) == len(cls.parts)


@by_name
def test_docstring_documents_exactly_the_arguments(cls):
    params = [p for p in inspect.signature(cls.__init__).parameters.values() if p.name != "self"]
    doc = inspect.getdoc(cls)
    assert "\nArgs:\n" in doc, "the Args: section is the --help text and config schema"
    args = doc.split("\nArgs:\n", 1)[1]
    documented = re.findall(r"^    (\*{0,2}\w+):", args, flags=re.MULTILINE)
    named = ["**" + p.name if p.kind is p.VAR_KEYWORD else p.name for p in params]
    assert documented == named
    assert all(p.annotation is not p.empty for p in params if p.kind is not p.VAR_KEYWORD)


@by_name
@by_format
@pytest.mark.parametrize("format_weight", [0.0, 0.5])
def test_perfect_answer_earns_max_reward(cls, sample_item, answer_format, think, format_weight):
    kwargs = dict(answer_format=answer_format, think=think, format_weight=format_weight)
    task, example = _example(cls, sample_item, **kwargs)
    reward = task.verify(example, task.render_answer(example))
    assert reward.total == pytest.approx(task.max_reward)
    assert reward.parts["accuracy"] == 1.0 and reward.parts["format"] == 1.0
    assert tuple(reward.parts) == cls.parts + ("format",)


@by_name
def test_bare_answer_cannot_ask_for_thinking(cls, sample_item):
    with pytest.raises(ValueError):
        cls(answer_format="bare", think=True).instruction()


@by_name
@by_format
def test_junk_never_raises_and_earns_no_accuracy(cls, sample_item, answer_format, think):
    task, example = _example(cls, sample_item, answer_format=answer_format, think=think, format_weight=0.5)
    for completion in _junk(task, example):
        reward = task.verify(example, completion)
        assert reward.parts["accuracy"] == 0.0, completion[:80]
        assert tuple(reward.parts) == cls.parts + ("format",)
        assert all(0.0 <= value <= 1.0 for value in reward.parts.values())
        assert reward.total == pytest.approx(reward.parts["accuracy"] + 0.5 * reward.parts["format"])


@by_name
def test_scores_of_any_answer_lie_in_unit_interval(cls, sample_item):
    task, example = _example(cls, sample_item, answer_format="bare")
    for answer in ["0", "1", "A", "1, 2", "2, 1, 3, 4", "270 degrees", task.answer_text(example)]:
        parts = task.score(example, answer)
        if parts is None:  # not a valid answer of this task: no accuracy and no format reward
            reward = task.verify(example, answer)
            assert reward.parts["format"] == 0.0 and reward.parts["accuracy"] == 0.0
            continue
        assert set(parts) <= set(cls.parts)
        assert all(0.0 <= value <= 1.0 for value in parts.values()), (answer, parts)


@by_name
def test_a_valid_wrong_answer_earns_format_but_no_accuracy(cls, sample_item):
    task, example = _example(cls, sample_item, answer_format="tags", format_weight=0.5)
    right = task.answer_text(example)
    # answers of other examples of the task are valid answers here too (same answer space)
    others = {task.answer_text(task.make_example(sample_item(cls.modality), random.Random(seed))) for seed in range(50)}
    wrong = sorted(others - {right})[0]
    reward = task.verify(example, answers.wrap(wrong, "tags", False))
    assert reward.parts["format"] == 1.0 and reward.parts["accuracy"] < 1.0
    assert task.verify(example, "<answer>banana</answer>").parts["format"] == 0.0


@by_name
@by_format
def test_a_completion_has_a_ballot_exactly_when_it_earns_the_format(cls, sample_item, answer_format, think):
    # self-rewards vote with canonical_answer: every valid answer votes, nothing else does
    task, example = _example(cls, sample_item, answer_format=answer_format, think=think)
    right = [task.render_answer(example), task.demonstration(example)]
    for completion in right + _junk(task, example):
        ballot = task.canonical_answer(example, completion)
        formatted = task.verify(example, completion).parts["format"]
        assert (ballot is not None) == bool(formatted), completion[:80]
        hash(ballot)


@by_name
def test_distinct_valid_answers_are_distinct_ballots(cls, sample_item):
    task, example = _example(cls, sample_item, answer_format="tags")
    texts = {
        task.answer_text(task.make_example(sample_item(cls.modality), random.Random(seed))) for seed in range(50)
    } | {task.answer_text(example)}
    # answers of other examples, where they are valid here too (a click may be off this screen)
    valid = [text for text in texts if task.score(example, text) is not None]
    ballots = {task.canonical_answer(example, answers.wrap(text, "tags", False)) for text in valid}
    assert len(valid) > 1 and len(ballots) == len(valid)


@by_name
def test_make_example_is_a_function_of_the_rng(cls, sample_item):
    task = cls()
    item = sample_item(cls.modality)
    same = [_fingerprint(task.make_example(item, random.Random(seed))) for seed in (5, 5)]
    assert same[0] == same[1]
    varied = {_fingerprint(task.make_example(item, random.Random(seed)))[1:3] for seed in range(20)}
    assert len(varied) > 1


@by_name
@by_format
def test_example_shape(cls, sample_item, answer_format, think):
    task, example = _example(cls, sample_item, answer_format=answer_format, think=think)
    assert example.task == task.name  # the name the data module routes verification by
    json.dumps(example.answer)
    json.dumps(example.meta)
    (message,) = example.messages
    assert message["role"] == "user"
    kinds = {part["type"] for part in message["content"]}
    assert kinds <= {"text", "image", "video", "audio", "point_cloud"}
    assert message["content"][-1]["type"] == "text"
    assert task.instruction() in message["content"][-1]["text"]
    for part in message["content"]:
        if part["type"] == "image":
            assert isinstance(part["image"], Image.Image) and part["image"].mode == "RGB"
        if part["type"] == "video":
            video = part["video"]
            assert isinstance(video, np.ndarray) and video.dtype == np.uint8
            assert video.ndim == 4 and video.shape[-1] == 3
            # Qwen-VL merges two consecutive frames into one token
            assert len(video) >= 2 and len(video) % 2 == 0
            assert isinstance(part["fps"], float) and part["fps"] > 0


@by_name
def test_item_is_not_modified(cls, sample_item):
    item = sample_item(cls.modality)
    before = _snapshot(item)
    cls().make_example(item, random.Random(0))
    after = _snapshot(item)
    for was, now in zip(before, after, strict=True):
        assert np.array_equal(now, was)
