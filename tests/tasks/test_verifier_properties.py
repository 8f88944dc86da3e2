"""Property tests of every discovered Task's verifier: any text in, a reward in range out, quickly,
and no cheap way to accuracy (near misses, repeated or extra list items, format alone)."""

import random
import re
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tasks
from tasks import Task, answers
from tests.helpers import discover, make_item

TASKS = discover(tasks, Task)
FORMATS = [("tags", False), ("tags", True), ("boxed", False), ("bare", False)]
PROPERTY = settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
_examples: dict = {}


def example_of(cls, answer_format="tags", think=False, format_weight=0.5):
    """One task and example per class and format, built once (media generation dominates
    otherwise)."""
    key = (cls, answer_format, think, format_weight)
    if key not in _examples:
        task = cls(answer_format=answer_format, think=think, format_weight=format_weight)
        _examples[key] = task, task.make_example(make_item(cls.modality), random.Random(0))
    return _examples[key]


def check_reward(task, reward) -> None:
    assert set(reward.parts) == set(type(task).parts) | {"format"}
    assert all(0.0 <= value <= 1.0 for value in reward.parts.values()), reward.parts
    assert 0.0 <= reward.total <= task.max_reward + 1e-9


def near_misses(text: str) -> st.SearchStrategy[str]:
    """Small edits of a right answer: a character dropped, doubled or replaced, or junk around
    it."""
    index = st.integers(0, max(len(text) - 1, 0))
    char = st.characters(codec="utf-8")
    return st.one_of(
        index.map(lambda i: text[:i] + text[i + 1 :]),
        index.map(lambda i: text[:i] + text[i : i + 1] * 2 + text[i + 1 :]),
        st.tuples(index, char).map(lambda p: text[: p[0]] + p[1] + text[p[0] + 1 :]),
        st.tuples(st.text(max_size=5), st.text(max_size=5)).map(lambda p: p[0] + text + p[1]),
    )


def nested(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """Answer / think / boxed wrappers nested and unbalanced around ``inner``."""
    wrappers = st.sampled_from(
        [
            ("<answer>", "</answer>"),
            ("<think>", "</think>"),
            ("\\boxed{", "}"),
            ("<answer>", ""),
            ("", "</answer>"),
            ("<answer><answer>", "</answer>"),
        ]
    )
    return st.recursive(inner, lambda s: st.tuples(wrappers, s).map(lambda p: p[0][0] + p[1] + p[0][1]), max_leaves=4)


by_task = pytest.mark.parametrize("cls", TASKS, ids=lambda c: c.__name__)
by_format = pytest.mark.parametrize("answer_format, think", FORMATS, ids=[f for f, _ in FORMATS])


@by_task
@by_format
@PROPERTY
@given(data=st.data())
def test_any_text_gives_a_reward_in_range(cls, answer_format, think, data):
    task, example = example_of(cls, answer_format, think)
    text = data.draw(
        st.one_of(
            st.text(),
            st.binary().map(lambda b: b.decode("latin-1")),
            nested(st.text(max_size=20)),
            nested(near_misses(task.answer_text(example))),
        )
    )
    check_reward(task, task.verify(example, text))


@by_task
@PROPERTY
@given(data=st.data())
def test_near_misses_of_a_lettered_or_listed_answer_never_beat_the_answer(cls, data):
    task, example = example_of(cls, "tags")
    right = task.answer_text(example)
    best = task.verify(example, task.render_answer(example)).total
    miss = data.draw(near_misses(right))
    reward = task.verify(example, answers.wrap(miss, "tags", False))
    check_reward(task, reward)
    if miss.strip() != right.strip():
        assert reward.total <= best


@by_task
def test_orderings_with_repeats_extras_or_gaps_earn_no_accuracy(cls):
    task, example = example_of(cls, "tags")
    items = re.split(r"\s*,\s*", task.answer_text(example).strip())
    if sorted(items) != [str(k) for k in range(1, len(items) + 1)] or len(items) < 2:
        pytest.skip("not an ordering answer")
    broken = [items[:-1], items + [items[0]], [items[0]] + items[1:-1] + [items[0]], items + items]
    for wrong in broken:
        reward = task.verify(example, answers.wrap(", ".join(wrong), "tags", False))
        assert reward.parts["accuracy"] == 0.0, wrong


@by_task
@by_format
def test_huge_completions_are_verified_quickly(cls, answer_format, think):
    task, example = example_of(cls, answer_format, think)
    right = task.render_answer(example)
    megabyte = 1 << 20
    for text in [
        "<answer>" * (megabyte // 8),
        "(" * megabyte,
        "1," * (megabyte // 2),
        "9" * megabyte,
        right + " " * megabyte,
        "<think>" + "a" * megabyte + right,
        "\\boxed{" * (megabyte // 7),
    ]:
        start = time.perf_counter()
        reward = task.verify(example, text)
        assert time.perf_counter() - start < 2.0, (cls.__name__, text[:30])
        check_reward(task, reward)


@by_task
def test_format_alone_is_worth_less_than_any_correct_answer(cls):
    for weight in (0.1, 0.5, 1.0):
        task, example = example_of(cls, "tags", format_weight=weight)
        correct = task.verify(example, task.render_answer(example)).total
        # a well-formed answer with no accuracy earns exactly the format reward
        assert weight < correct
        assert task.verify(example, "<answer></answer>").total < correct
