"""Verifiers in linear time, for every discovered Task: 100 KB completions built to make a
backtracking parser stall (runs of spaces inside an answer, repeated or nested tags, brackets,
digits) are each verified within `BUDGET_S`; the linear parsers of `tasks.answers` agree with the
regular expressions they replace; junk around the right answer never earns the right answer's
reward; strict letters accept one uppercase letter."""

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
ALL_FORMATS = [("tags", False), ("tags", True), ("boxed", False), ("boxed", True), ("bare", False)]
# per task: tags without a think block and boxed with one parse like these (their extraction is
# tested alone)
FORMATS = [("tags", True), ("boxed", False), ("bare", False)]
#: Seconds one verify call may take on any 100 KB completion (a linear parser needs milliseconds;
#: the backtracking ones took 1.7 s on 300 characters and minutes on 100 KB).
BUDGET_S = 0.25
SIZE = 100_000
PROPERTY = settings(
    max_examples=30,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
_examples: dict = {}


def example_of(cls, answer_format="tags", think=False, format_weight=0.5, repetition_penalty=0.0):
    """One task and example per class and format, built once."""
    key = (cls, answer_format, think, format_weight, repetition_penalty)
    if key not in _examples:
        task = cls(
            answer_format=answer_format, think=think, format_weight=format_weight, repetition_penalty=repetition_penalty
        )
        _examples[key] = task, task.make_example(make_item(cls.modality), random.Random(0))
    return _examples[key]


def adversarial(right: str) -> list[str]:
    """Answers of about `SIZE` characters that send a backtracking parser into quadratic or
    exponential time: spaces between the pieces of the right answer with a stray tail, and runs of
    the characters the parsers of the tasks look for."""
    spaces = " " * SIZE
    head, tail = right[:1], right[1:]
    pieces = [
        head + spaces + "zz",
        right + spaces + "zz",
        spaces + right + spaces + "z",
        head + spaces + tail + "z",
        "(" + spaces + head + spaces + ")" + spaces + ". z",
        right.replace(" ", spaces) + "z",
        right.replace(",", spaces + "," + spaces) + "z",
    ]
    n = SIZE // 10
    runs = [
        "(" * SIZE,
        "[" * SIZE,
        "{" * SIZE,
        "[{" * n,
        "9" * SIZE + "z",
        "1," * n + "z",
        "1 " * n + "z",
        "1.5-" * n,
        "1" + spaces + "-" + spaces + "2z",
        "```" + spaces + "z",
        "```json" + "`" * SIZE,
        "<|box_start|>" * (n // 2),
        "<|object_ref_start|>" * (n // 2),
        '{"action": ' * n,
        "0[1, 2, 3, 4]" * (n // 2),
        "(1, 2)" * n,
        "90" + spaces + "degree",
        "°" * SIZE,
    ]
    return pieces + runs


def tag_soups() -> list[str]:
    """Completions of `SIZE` characters of repeated or nested format tags (the ``<answer>``
    pattern's quadratic case among them: ``<think>`` then ``</think><answer>`` over and over)."""
    n = SIZE // 16
    return [
        "<think>" + "</think><answer>" * n,
        "<think>" + "</think> <answer>x</answer>y" * n,
        "<answer>" * n * 2,
        "<answer>" + "</answer>x" * n,
        "<think>" * n * 2 + "</think>",
        "<think></think>" * n + "<answer>",
        "\\boxed{" * n * 2,
        "<think>" + "\\boxed{" * n,
        " " * SIZE + "<answer>",
        "<answer>" + " " * SIZE,
        "\n" * SIZE,
        "a b c d e f g\n" * (SIZE // 14),
        "a b c d e f g\n\n" * (SIZE // 15) + "<answer>",
    ]


by_task = pytest.mark.parametrize("cls", TASKS, ids=lambda c: c.__name__)
by_format = pytest.mark.parametrize("answer_format, think", FORMATS, ids=[f"{f}-think{t:d}" for f, t in FORMATS])


def timed_verify(task, example, completion: str) -> float:
    start = time.perf_counter()
    reward = task.verify(example, completion)
    elapsed = time.perf_counter() - start
    assert -task.repetition_penalty <= reward.total <= task.max_reward + 1e-9
    return elapsed


@by_task
@by_format
def test_adversarial_completions_are_verified_within_budget(cls, answer_format, think):
    task, example = example_of(cls, answer_format, think, repetition_penalty=0.5)  # its line scan runs too
    right = task.answer_text(example)
    completions = [answers.wrap(a, answer_format, think) for a in adversarial(right)] + tag_soups()
    slow = {c[:40]: round(s, 3) for c in completions if (s := timed_verify(task, example, c)) > BUDGET_S}
    assert not slow, f"{cls.__name__}: verify took longer than {BUDGET_S} s on {slow}"


@pytest.mark.parametrize("answer_format, think", ALL_FORMATS, ids=[f"{f}-think{t:d}" for f, t in ALL_FORMATS])
def test_answer_extraction_is_within_budget_in_every_format(answer_format, think):
    for completion in tag_soups() + [answers.wrap(a, answer_format, think) for a in adversarial("B")]:
        start = time.perf_counter()
        answers.extract(completion, answer_format, think)
        assert time.perf_counter() - start < BUDGET_S, (answer_format, think, completion[:40])


# ---- the linear parsers agree with the patterns they replace (on inputs short enough for those)
# ----
_OLD_THINK = r"\s*<think>(?P<think>.*?)</think>"
_OLD_TAGS = re.compile(r"(?:" + _OLD_THINK + r")?\s*<answer>(?P<answer>.*?)</answer>\s*", re.DOTALL)
_OLD_CHOICE = re.compile(r"\s*[(\[]?\s*([^()\[\]]+?)\s*[)\]]?\s*\.?\s*")
TAG_PIECES = st.lists(
    st.sampled_from(["<think>", "</think>", "<answer>", "</answer>", " ", "\n", "x", "B", "\\boxed{", "}", "{"]),
    max_size=12,
).map("".join)
CHOICE_PIECES = st.lists(st.sampled_from(["B", "b", "a", " ", "\t", "(", ")", "[", "]", ".", "z"]), max_size=10).map(
    "".join
)


def old_tags(completion: str, think: bool) -> str | None:
    match = _OLD_TAGS.fullmatch(completion)
    if not match or (think and match["think"] is None):
        return None
    return match["answer"].strip()


def old_choice(answer: str) -> str | None:
    match = _OLD_CHOICE.fullmatch(answer)
    return match[1] if match else None


@PROPERTY
@given(completion=TAG_PIECES, think=st.booleans())
def test_tag_extraction_agrees_with_the_pattern_it_replaces(completion, think):
    old = old_tags(completion, think)
    expected = None if not old or answers._TAG.search(old) else old
    assert answers.extract(completion, "tags", think)[0] == expected


@PROPERTY
@given(completion=TAG_PIECES)
def test_boxed_think_block_agrees_with_the_pattern_it_replaces(completion):
    match = re.match(_OLD_THINK, completion, re.DOTALL)
    assert answers.after_think(completion) == (match.end() if match else None)


@PROPERTY
@given(answer=CHOICE_PIECES)
def test_choice_unwrapping_agrees_with_the_pattern_it_replaces(answer):
    old = old_choice(answer)  # which may be all spaces: no option is (extracted answers are stripped)
    assert answers._unwrap(answer) == (old if old and old.strip() else None)


# ---- junk never earns the true answer's reward ----
def junk_around(right: str) -> st.SearchStrategy[str]:
    """The right answer with characters glued before or after it that no task's answer grammar
    allows there (``0[56, 0, 112, 40]``): digits only beside a non-digit, so no number just gains a
    leading zero."""
    glue = "xyzq#!@~"
    before = st.text(glue + ("" if right[:1].isdigit() else "0123456789"), min_size=1, max_size=3)
    after = st.text(glue + ("" if right[-1:].isdigit() else "0123456789"), min_size=1, max_size=3)
    return st.one_of(
        before.map(lambda b: b + right),
        after.map(lambda a: right + a),
        st.tuples(before, after).map(lambda p: p[0] + right + p[1]),
    )


@by_task
@pytest.mark.parametrize("answer_format, think", [("tags", True), ("bare", False)], ids=["tags", "bare"])
@settings(PROPERTY, max_examples=20)
@given(data=st.data())
def test_junk_around_the_right_answer_earns_less_than_the_answer(cls, answer_format, think, data):
    task, example = example_of(cls, answer_format, think)
    right = task.answer_text(example)
    best = task.verify(example, task.render_answer(example)).total
    junk = data.draw(junk_around(right))
    reward = task.verify(example, answers.wrap(junk, answer_format, think))
    assert reward.total < best and reward.parts["accuracy"] < 1.0, (junk, reward)


def test_referring_grounding_pays_nothing_for_a_box_with_a_stray_digit():
    task, example = example_of(tasks.ReferringGrounding, "bare")
    right = task.answer_text(example)
    assert task.verify(example, right).total == task.max_reward
    for junk in ("0" + right, right + "7", right.replace(", ", ",0[", 1), "[" + right + "]", right[1:-1] + "]"):
        assert task.verify(example, junk).parts == {"accuracy": 0.0, "iou": 0.0, "format": 0.0}, junk


# ---- strict letters ----
@pytest.mark.parametrize(
    "answer, default, strict",
    [
        ("B", "right", "right"),
        (" B ", "right", "right"),
        ("b", "right", None),
        ("(B)", "right", None),
        ("B.", "right", None),
        ("[b].", "right", None),
        ("BB", None, None),
        ("B C", None, None),
        ("E", None, None),
        ("", None, None),
        ("Ｂ", None, None),
    ],
)
def test_strict_letters_take_one_uppercase_option_letter_only(answer, default, strict):
    options = ["left", "right", "up", "down"]
    assert answers.parse_letter(answer, options) == default
    assert answers.parse_letter(answer, options, strict=True) == strict


def lettered_tasks() -> list[tuple[type, dict]]:
    """Every task with a lettered answer, with the options that make it lettered."""
    found = []
    for cls in TASKS:
        for options in (
            {},
            {"labels": "letters"},
            {"style": "choice"},
            {"style": "choice", "points": 3},
            {"output": "letter"},
        ):
            try:
                task = cls(**options)
            except (TypeError, ValueError):
                continue
            example = task.make_example(make_item(cls.modality), random.Random(0))
            if re.fullmatch(r"[A-Z]", task.answer_text(example)):
                found.append((cls, options))
                break
    return found


LETTERED_TASKS = lettered_tasks()


def test_every_kind_of_lettered_task_is_found():
    names = {cls.name for cls, _ in LETTERED_TASKS}
    assert {
        "rotation",
        "mcq",
        "jigsaw_pair",
        "arrow_of_time",
        "temporal_jigsaw",
        "depth_order",
        "crop_inpaint",
        "audio_speed",
        "gui_inverse_dynamics",
    } <= names, names


@pytest.mark.parametrize("cls, options", LETTERED_TASKS, ids=[c.__name__ for c, _ in LETTERED_TASKS])
def test_every_lettered_task_has_strict_letters(cls, options):
    strict = cls(answer_format="bare", strict_letters=True, **options)
    lenient = cls(answer_format="bare", **options)
    example = strict.make_example(make_item(cls.modality), random.Random(0))
    right = strict.answer_text(example)
    for variant in (right.lower(), f"({right})", f"{right}."):
        assert lenient.verify(example, variant).parts["accuracy"] == 1.0, variant
        assert strict.verify(example, variant).parts == dict.fromkeys(strict.verify(example, variant).parts, 0.0)
    # the right letter alone, after the expert's tool calls where the task has tools
    assert strict.verify(example, strict.render_answer(example)).total == strict.max_reward


# ---- examples no completion can get right are refused ----
@by_task
def test_examples_of_many_items_and_seeds_are_answerable(cls):
    """The contract's perfect-answer test on one example, extended: several items and seeds per
    task."""
    task = cls(answer_format="tags", format_weight=0.5)
    for seed in range(4):
        example = task.make_example(make_item(cls.modality, seed), random.Random(seed))
        assert task.check_answerable(example) is example


def test_an_option_the_answer_format_cannot_carry_is_refused():
    question = tasks.Question("Which tag?", ["<answer>", "</think>", "plain"], "<answer>", [make_item("image")])
    task = tasks.MultipleChoice(labels="text", answer_format="tags")
    example = task.make_example(question, random.Random(0))
    with pytest.raises(tasks.SkipItem, match="unanswerable"):
        task.check_answerable(example)
    # spaces around an option are not part of it: the stripped answer can be chosen
    spaced = tasks.Question("Which?", [" yes ", "no"], " yes ", [make_item("image")])
    example = task.make_example(spaced, random.Random(0))
    assert task.verify(example, "<answer>yes</answer>").total == task.max_reward
