"""Items that cannot be used never stop a run that can go on: an unusable held-out item is replaced
from the held-out pool (spares of the val_source first); a held-out split with no usable item stops
with one line naming its files; an item a source fails on in any way, or whose example no completion
could get right, is skipped and counted like an undecodable one."""

import logging

import pytest
from PIL import Image

from datamodules import PretextDataModule
from datamodules.sources.base import Source
from tasks import MultipleChoice, Question, Rotation, SkipItem


class Listed(Source):
    """Solid images whose red channel is their index; the indices in ``bad`` fail with ``error``."""

    modality = "image"

    def __init__(self, size: int, bad=(), error=SkipItem):
        self.size, self.bad, self.error, self.reads = size, set(bad), error, []

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int):
        self.reads.append(index)
        if index in self.bad:
            raise self.error(f"{self.describe(index)}: cannot decode")
        return Image.new("RGB", (32, 32), (index, 0, 0))

    def describe(self, index: int) -> str:
        return f"/data/val/frame{index}.png"


def shown_indices(batches) -> list[int]:
    """The source index each example's image came from (its red channel)."""
    return [example.messages[0]["content"][0]["image"].getpixel((0, 0))[0] for batch in batches for example in batch]


def data_module(val_source, val_size, train=None):
    task = Rotation(labels="letters", answer_format="bare")
    data = PretextDataModule(train or Listed(8), task, batch_size=2, val_source=val_source, val_size=val_size)
    data.setup("fit")
    return data


def test_an_unusable_held_out_item_is_replaced_by_a_spare_of_the_pool():
    data = data_module(Listed(6, bad={0, 1}), val_size=2)
    assert shown_indices(data.val_dataloader()) == [2, 3]  # the spares beyond val_size, one each, in order
    assert data.skip_counts == {("Listed", "unreadable"): 2}
    assert shown_indices(data.val_dataloader()) == [2, 3]  # fixed: the same replacements every pass


def test_without_spares_the_replacement_is_another_held_out_item():
    data = data_module(Listed(3, bad={1}), val_size=3)
    assert shown_indices(data.val_dataloader()) == [0, 2, 2]


def test_a_held_out_split_of_only_unusable_files_stops_with_one_line_naming_them():
    val = Listed(5, bad=range(5))
    data = data_module(val, val_size=5)
    with pytest.raises(ValueError) as error:  # a ValueError: `zoo` prints it as its one line
        next(iter(data.val_dataloader()))
    message = str(error.value)
    assert "\n" not in message and "no usable held-out item" in message
    assert all(f"/data/val/frame{i}.png" in message for i in range(5))
    assert sorted(val.reads) == list(range(5))  # each held-out file tried once, not a hundred times
    assert len(list(data.train_dataloader())) == 4  # the training files are fine


def test_an_item_a_source_fails_on_in_any_way_is_skipped_and_logged(caplog):
    data = data_module(None, val_size=0, train=Listed(8, bad={3}, error=IndexError))
    with caplog.at_level(logging.WARNING):
        batches = list(data.train_dataloader())
    assert sum(len(batch) for batch in batches) == 8 and 3 not in shown_indices(batches)
    assert data.skip_counts == {("Listed", "unreadable"): 1}
    assert "/data/val/frame3.png" in caplog.text and "IndexError" in caplog.text


class Questions(Source):
    """Two questions; the first one's right option cannot be written inside <answer> tags."""

    modality = "mcq"

    def __len__(self) -> int:
        return 2

    def __getitem__(self, index: int) -> Question:
        image = Image.new("RGB", (32, 32))
        if index == 0:
            return Question("Which tag closes an answer?", ["</answer>", "</b>"], "</answer>", [image], "q0")
        return Question("Which colour?", ["black", "white"], "black", [image], "q1")


def test_an_example_no_completion_can_get_right_is_skipped_and_counted():
    task = MultipleChoice(labels="text", answer_format="tags")
    data = PretextDataModule(Questions(), task, batch_size=2, val_size=0, seed=0)
    data.setup("fit")
    examples = [example for batch in data.train_dataloader() for example in batch]
    assert {example.answer for example in examples} == {"black"}
    assert data.skip_counts[("Questions", "rejected_by_mcq")] >= 1 and len(examples) == 2
    assert all(task.verify(e, task.render_answer(e)).total == task.max_reward for e in examples)
