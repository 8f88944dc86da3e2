"""Hand-computed cases for answer extraction, parsing and the permutation convention."""

import random

import pytest

from tasks import answers


@pytest.mark.parametrize(
    "completion, answer_format, think, expected",
    [
        ("<answer>42</answer>", "tags", False, ("42", True)),
        ("  \n<answer>  42 \n</answer>\n ", "tags", False, ("42", True)),
        ("<think>hmm</think><answer>42</answer>", "tags", False, ("42", True)),
        ("<think>hmm</think>\n<answer>42</answer>", "tags", True, ("42", True)),
        ("<answer>42</answer>", "tags", True, (None, False)),  # thinking was required
        ("<think>a</think><answer>1</answer><answer>2</answer>", "tags", True, (None, False)),
        ("<answer><answer>1</answer></answer>", "tags", False, (None, False)),
        ("<answer>42</answer> and then", "tags", False, (None, False)),
        ("so <answer>42</answer>", "tags", False, (None, False)),
        ("<answer> </answer>", "tags", False, (None, False)),
        ("<answer>42", "tags", False, (None, False)),
        ("\\boxed{42}", "boxed", False, ("42", True)),
        ("The answer is \\boxed{ 42 }.", "boxed", False, ("42", True)),
        ("\\boxed{\\frac{1}{2}}", "boxed", False, ("\\frac{1}{2}", True)),
        ("<think>x</think> \\boxed{7}", "boxed", True, ("7", True)),
        ("\\boxed{7}", "boxed", True, (None, False)),
        ("\\boxed{1} or \\boxed{2}", "boxed", False, (None, False)),
        ("\\boxed{}", "boxed", False, (None, False)),
        ("\\boxed{ }", "boxed", False, (None, False)),
        ("\\boxed{1", "boxed", False, (None, False)),
        ("\\boxed{<answer>1</answer>}", "boxed", False, (None, False)),
        ("  42\n", "bare", False, ("42", True)),
        ("   ", "bare", False, (None, False)),
        ("<answer>42</answer>", "bare", False, (None, False)),
    ],
)
def test_extract(completion, answer_format, think, expected):
    assert answers.extract(completion, answer_format, think) == expected


@pytest.mark.parametrize("fmt, think", [("tags", False), ("tags", True), ("boxed", True), ("bare", False)])
def test_wrap_round_trips_through_extract(fmt, think):
    assert answers.extract(answers.wrap("3, 1, 2", fmt, think), fmt, think) == ("3, 1, 2", True)


def test_bare_with_think_is_refused():
    with pytest.raises(ValueError):
        answers.instruction("bare", think=True)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("90", 90),
        (" -90 ", -90),
        ("+7", 7),
        ("007", 7),
        ("about 90", None),
        ("90.0", None),
        ("9 0", None),
        ("nine", None),
        ("", None),
        ("1234567890", None),
    ],
)
def test_parse_int(text, expected):
    assert answers.parse_int(text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        ("B", "B"),
        ("b", "B"),
        ("(B)", "B"),
        ("B.", "B"),
        ("[c]", "C"),
        (" A ", "A"),
        ("E", None),
        ("AB", None),
        ("B) 90 degrees", None),
        ("", None),
    ],
)
def test_parse_choice(text, expected):
    assert answers.parse_choice(text, ["A", "B", "C", "D"]) == expected


@pytest.mark.parametrize(
    "text, k, expected",
    [
        ("3, 1, 4, 2", 4, [3, 1, 4, 2]),
        ("3,1,4,2", 4, [3, 1, 4, 2]),
        ("3 1 4 2", 4, [3, 1, 4, 2]),
        ("[3, 1, 4, 2]", 4, [3, 1, 4, 2]),
        ("3142", 4, [3, 1, 4, 2]),  # a digit string is unambiguous while every label is one digit
        ("1, 1, 2, 3", 4, None),  # duplicate
        ("0, 1, 2, 3", 4, None),  # out of range (labels are 1-based)
        ("1, 2, 3, 5", 4, None),
        ("1, 2, 3", 4, None),  # too short
        ("1, 2, 3, 4, 5", 4, None),  # too long
        ("1, 2, x, 4", 4, None),
        ("-1, 2, 3, 4", 4, None),
        ("², 1", 2, None),  # a superscript is a digit to str.isdigit but not to int()
        ("10, 9, 8, 7, 6, 5, 4, 3, 2, 1", 10, [10, 9, 8, 7, 6, 5, 4, 3, 2, 1]),
        ("12345678910", 10, None),  # two-digit labels need separators
        ("", 2, None),
    ],
)
def test_parse_permutation(text, k, expected):
    assert answers.parse_permutation(text, k) == expected


@pytest.mark.parametrize(
    "pred, truth, expected",
    [
        ([1, 2, 3, 4], [1, 2, 3, 4], {"exact": 1.0, "fraction": 1.0, "footrule": 1.0}),
        # one swap: 2 of 4 in place; labels 1 and 2 each one slot off, max distance floor(16 / 2) =
        # 8
        ([2, 1, 3, 4], [1, 2, 3, 4], {"exact": 0.0, "fraction": 0.5, "footrule": 0.75}),
        # reversal reaches the maximum distance 3 + 1 + 1 + 3 = 8
        ([4, 3, 2, 1], [1, 2, 3, 4], {"exact": 0.0, "fraction": 0.0, "footrule": 0.0}),
        # k = 3: distances 2 + 0 + 2 = 4 = floor(9 / 2), the middle label stays put
        ([3, 2, 1], [1, 2, 3], {"exact": 0.0, "fraction": 1 / 3, "footrule": 0.0}),
        # a 3-cycle: every label one or two slots off, 1 + 1 + 2 = 4 of max 4 for k = 3
        ([2, 3, 1], [1, 2, 3], {"exact": 0.0, "fraction": 0.0, "footrule": 0.0}),
        # k = 5, labels 1 and 5 swapped at the ends: distance 4 + 4 = 8 of floor(25 / 2) = 12
        ([5, 2, 3, 4, 1], [1, 2, 3, 4, 5], {"exact": 0.0, "fraction": 0.6, "footrule": 1 - 8 / 12}),
    ],
)
def test_permutation_scores(pred, truth, expected):
    assert answers.permutation_scores(pred, truth) == pytest.approx(expected)


def test_shuffle_answer_hand_computed():
    # shown[p] is the original slot of the piece at position p: slot 0 is shown third, slot 1 first,
    # ...
    assert answers.shuffle_answer([1, 3, 0, 2]) == [3, 1, 4, 2]


def test_restore_inverts_shuffle_answer():
    rng = random.Random(1234)
    for _ in range(200):
        k = rng.randint(1, 12)
        original = [f"piece{i}" for i in range(k)]
        shown = list(range(k))
        rng.shuffle(shown)
        shown_pieces = [original[slot] for slot in shown]
        answer = answers.shuffle_answer(shown)
        assert sorted(answer) == list(range(1, k + 1))
        assert answers.restore(shown_pieces, answer) == original
        text = ", ".join(map(str, answer))
        assert answers.parse_permutation(text, k) == answer


def test_lettered_choices_by_hand():
    assert answers.choice_prompt(["up", "down"]) == "A) up\nB) down\nAnswer with the letter of the correct option."
    assert answers.letter(2) == "C"
    assert answers.parse_letter("(b)", ["up", "down"]) == "down"
    assert answers.parse_letter("C", ["up", "down"]) is None  # not an option
    assert answers.parse_letter("A or B", ["up", "down"]) is None
