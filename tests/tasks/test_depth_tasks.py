"""Depth tasks: answers follow the depth map and intrinsics (change the depth, the answer changes
with it)."""

import itertools
import math
import random

import numpy as np
import pytest

from tasks import RGBD, DepthOrder, RegionalDepthOrder, RelativePosition3D, SkipItem
from tasks.depth.common import MARKER_COLOURS, back_project, draw_markers
from tests.helpers import make_item

H, W, F = 96, 128, 90.0
K = np.array([[F, 0, W / 2], [0, F, H / 2], [0, 0, 1]])
STRIPS = [(8, 40), (48, 80), (88, 120)]  # columns of three upright flat panels


def strips(depths, gap=np.nan) -> RGBD:
    """Three flat panels side by side at ``depths``, invalid depth (``gap``) between and around
    them; the colour image is the same whatever the depths, so only the depth can tell the answers
    apart."""
    depth = np.full((H, W), gap, dtype=np.float32)
    rgb = np.full((H, W, 3), 90, dtype=np.uint8)
    for (left, right), z, colour in zip(STRIPS, depths, [(200, 40, 40), (40, 200, 40), (40, 40, 200)], strict=True):
        depth[10:86, left:right] = z
        rgb[10:86, left:right] = colour
    return RGBD(rgb, depth, K.copy(), name="strips")


def strip_of(point) -> int:
    return next(i for i, (left, right) in enumerate(STRIPS) if left <= point[0] < right)


@pytest.mark.parametrize(
    "task", [DepthOrder(points=3, min_distance=0.1), RegionalDepthOrder(patch=0.1)], ids=lambda t: t.name
)
def test_order_follows_the_depth_and_nothing_else(task):
    orders, marked = set(), set()
    for depths in itertools.permutations([1.5, 3.5, 5.5]):  # normalised: 0, 0.5 and 1
        example = task.make_example(strips(depths), random.Random(0))
        points = example.meta["points"]
        # read from near to far, the answer walks the panels in the order of their depths
        walked = [strip_of(points[label - 1]) for label in example.answer]
        assert walked == sorted(range(3), key=lambda i: depths[i])
        assert task.verify(example, task.render_answer(example)).parts["exact"] == 1.0
        orders.add(tuple(walked))
        marked.add(tuple(sorted(map(tuple, points))))
    assert len(orders) == 6  # every order of the depths gives its own answer
    if isinstance(task, DepthOrder):
        assert len(marked) == 1  # at the same marked pixels (regions are picked by depth band)


def test_depth_order_respects_distance_gap_and_range():
    item = make_item("rgbd")
    task = DepthOrder(points=4, min_distance=0.15, min_gap=0.4, depth_range=(1.0, 5.5))
    for seed in range(20):
        example = task.make_example(item, random.Random(seed))
        points, depths = np.array(example.meta["points"]), np.array(example.meta["depths"])
        assert np.allclose(depths, item.depth[points[:, 1], points[:, 0]], atol=1e-3)
        assert ((depths >= 1.0) & (depths <= 5.5)).all()
        pairs = list(itertools.combinations(range(4), 2))
        assert min(np.hypot(*(points[i] - points[j])) for i, j in pairs) >= 0.15 * H
        assert min(abs(depths[i] - depths[j]) for i, j in pairs) >= 0.4
        assert [depths[label - 1] for label in example.answer] == sorted(depths)


def test_items_without_enough_depth_are_skipped_with_a_reason():
    with pytest.raises(SkipItem, match="0 pixels of usable depth, need 6 points"):
        DepthOrder().make_example(strips([np.nan] * 3), random.Random(0))
    with pytest.raises(SkipItem, match="0.2 m apart"):  # one depth only: no two points 0.2 m apart
        DepthOrder(points=2).make_example(strips([2.0, 2.0, 2.0]), random.Random(0))
    with pytest.raises(SkipItem, match="normalised depth"):
        RegionalDepthOrder().make_example(strips([2.0, 2.0, 2.0]), random.Random(0))
    with pytest.raises(SkipItem, match="uint8 rgb and"):
        DepthOrder().make_example(RGBD(np.zeros((4, 4, 3), np.uint8), np.ones((5, 4)), K), random.Random(0))


@pytest.mark.parametrize(
    "facing, displacement, expected",
    [
        ("away", (1.0, 0.0), "right"),
        ("away", (-1.0, 0.0), "left"),
        ("away", (0.0, 1.0), "front"),
        ("away", (0.0, -1.0), "back"),
        ("away", (1.0, 1.0), "front-right"),
        ("toward", (1.0, 0.0), "left"),
        ("toward", (0.0, 1.0), "back"),
        ("toward", (-1.0, -1.0), "front-right"),
        ("left", (-1.0, 0.0), "front"),
        ("left", (0.0, 1.0), "right"),
        ("right", (0.0, 1.0), "left"),
        ("right", (1.0, -1.0), "front-right"),
    ],
)
def test_relation_by_hand(facing, displacement, expected):
    observer = np.array([0.5, 0.3, 3.0])
    other = observer + np.array([displacement[0], -0.7, displacement[1]])  # height is ignored
    assert RelativePosition3D().relation(observer, other, facing) == expected
    cardinal = RelativePosition3D(diagonals=False).relation(observer, other, facing)
    assert cardinal == (None if "-" in expected else expected)  # a diagonal is on a boundary of 4 sectors


def test_relation_refuses_close_or_borderline_pairs():
    task = RelativePosition3D(margin=10.0, min_separation=0.2)
    observer = np.array([0.0, 0.0, 4.0])
    assert task.relation(observer, observer + [1.0, 0, 0.0], "away") == "right"
    # "right" spans 67.5-112.5 degrees from straight ahead: 80 is 12.5 inside it, 75 is within the
    # 10 degree margin
    assert task.relation(observer, observer + [1.0, 0, math.tan(math.radians(10))], "away") == "right"
    assert task.relation(observer, observer + [1.0, 0, math.tan(math.radians(15))], "away") is None
    assert task.relation(observer, observer + [0.7, 0, 0.0], "away") is None  # under 0.2 x 4 m apart


def reference_relation(observer, other, facing) -> str:
    """An independent reading of the geometry: rotate the ground-plane displacement into the
    observer's frame."""
    heading = {"away": 0.0, "right": 90.0, "toward": 180.0, "left": 270.0}[facing]  # clockwise seen from above
    bearing = math.degrees(math.atan2(other[0] - observer[0], other[2] - observer[2]))  # clockwise from +z
    sector = round(((bearing - heading) % 360) / 45) % 8
    return ["front", "front-right", "right", "back-right", "back", "back-left", "left", "front-left"][sector]


@pytest.mark.parametrize("depths", [(3.0, 3.0, 3.0), (1.5, 3.0, 6.0)])
def test_relative_position_follows_back_projected_depth(depths):
    task = RelativePosition3D(facing_weights=[0, 0, 0, 1], patch=0.1, min_separation=0.05)
    item = strips(depths)
    seen = set()
    for seed in range(15):
        example = task.make_example(item, random.Random(seed))
        points = np.array(example.meta["points"])
        z = item.depth[points[:, 1], points[:, 0]]
        # pixel centres back-projected by hand: x = (u + 0.5 - cx) z / fx
        x = (points[:, 0] + 0.5 - K[0, 2]) * z / K[0, 0]
        assert np.allclose(np.array(example.meta["positions"])[:, [0, 2]], np.stack([x, z], 1), atol=1e-3)
        me = example.meta["observer"] - 1
        positions = back_project(points, z, K)
        assert example.answer == reference_relation(positions[me], positions[1 - me], "away")
        seen.add(example.answer)
    diagonal = {answer for answer in seen if "-" in answer}
    # panels side by side give only sideways answers; panels at other depths give diagonal ones too
    assert len(seen) >= 2 and (not diagonal if len(set(depths)) == 1 else diagonal)


def test_moving_a_region_behind_the_observer_flips_front_and_back():
    task = RelativePosition3D(facing_weights=[0, 0, 0, 1], patch=0.1, min_separation=0.05)
    # facing away from the camera; the right panel moves from 6 m (behind the left one at 3 m) to 1
    # m (in front)
    flip = {"front-right": "back-right", "back-left": "front-left"}
    compared = 0
    for seed in range(15):
        far = task.make_example(strips((3.0, np.nan, 6.0)), random.Random(seed))
        near = task.make_example(strips((3.0, np.nan, 1.0)), random.Random(seed))
        points = far.meta["points"]
        # compare where the same pixels were marked in both, one on each panel
        if points == near.meta["points"] and strip_of(points[0]) != strip_of(points[1]):
            assert near.answer == flip[far.answer], (far.meta, near.meta)
            compared += 1
    assert compared >= 5


def test_markers_are_drawn_where_the_points_are():
    rgb = np.zeros((60, 80, 3), np.uint8)
    marked = np.asarray(draw_markers(rgb, [(20, 30), (60, 15)], radius=8)).astype(int)
    for u, v in [(20, 30), (60, 15)]:
        assert marked[v, u - 6, 0] > 100 and marked[v, u - 6, 1] < 60  # red disc around the centre
    assert marked[50, 5].sum() == 0  # untouched elsewhere


def test_colour_markers_are_opaque_discs_of_the_named_colours_without_digits():
    rgb = np.full((60, 80, 3), 90, np.uint8)
    points = [(20, 30), (60, 15), (40, 45)]
    marked = np.asarray(draw_markers(rgb, points, radius=8, colours=True)).astype(int)
    for (u, v), colour in zip(points, [(230, 20, 20), (30, 80, 240), (250, 220, 20)], strict=True):
        inside = marked[v - 4 : v + 5, u - 4 : u + 5]  # [9, 9, 3]: no white digit, no blend with the background
        assert (inside == colour).all(), (u, v)
        assert (marked[v, u - 8] < 40).all()  # a dark ring at the edge
    assert (marked[5, 5] == 90).all()
    black = np.asarray(draw_markers(np.zeros_like(rgb), [(40, 30)] * 9, radius=8, colours=True)).astype(int)
    assert (black[30, 40] == 0).all() and (black[30, 32] > 200).all()  # the ninth, black, ringed in white


def test_colour_labels_name_the_nearest_colour_first():
    task = DepthOrder(points=3, min_distance=0.1, labels="colours")
    for depths in itertools.permutations([1.5, 3.5, 5.5]):
        example = task.make_example(strips(depths), random.Random(0))
        image = np.asarray(next(p["image"] for p in example.messages[0]["content"] if p["type"] == "image"))
        # the colour drawn at each point, named: what the policy sees is what the answer is written
        # in
        name_of = {colour: name for name, colour in MARKER_COLOURS.items()}
        by_depth = sorted(example.meta["points"], key=lambda p: depths[strip_of(p)])
        expected = ", ".join(name_of[tuple(map(int, image[v, u]))] for u, v in by_depth)
        assert task.answer_text(example) == expected
        assert "circles coloured red, blue and yellow" in example.prompt_text
        assert "the 3 colours from the closest" in example.prompt_text
        assert task.verify(example, task.render_answer(example)).parts["exact"] == 1.0


@pytest.mark.parametrize(
    "answer, exact",
    [
        ("blue, red, yellow", 1.0),
        ("Blue red YELLOW", 1.0),
        ("red, blue, yellow", 0.0),
        ("blue, red", None),
        ("blue, red, red", None),
        ("2, 1, 3", None),
        ("blue, red, green", None),
        ("blue-red-yellow", None),
    ],
)
def test_colour_answers_are_read_by_name(answer, exact):
    task = DepthOrder(points=3, min_distance=0.1, labels="colours", reward="exact", answer_format="bare")
    example = next(
        e
        for e in (task.make_example(strips([3.5, 1.5, 5.5]), random.Random(s)) for s in range(50))
        if e.answer == [2, 1, 3]
    )
    assert (task.parse(answer, 3) is None) == (exact is None)
    parts = task.verify(example, answer).parts
    assert parts["format"] == float(exact is not None) and parts["exact"] == (exact or 0.0)
    dashed = RegionalDepthOrder(patch=0.1, labels="colours", separator="dash", reward="exact", answer_format="bare")
    assert dashed.verify(example, "blue-red-yellow").parts["exact"] == 1.0
    assert dashed.verify(example, "blue, red, yellow").parts["format"] == 0.0


def test_colour_choice_lists_coloured_orders_and_grades_the_letter():
    task = DepthOrder(
        points=2, min_distance=0.1, labels="colours", style="choice", reward="exact", answer_format="bare"
    )
    example = task.make_example(strips([1.5, 5.5, 3.5]), random.Random(0))
    assert "A) red, blue\nB) blue, red\n" in example.prompt_text and "lists the colours" in example.prompt_text
    right = "A" if example.answer == [1, 2] else "B"
    assert task.answer_text(example) == right
    assert task.verify(example, right).parts["accuracy"] == 1.0
    assert task.verify(example, "AB".replace(right, "")).parts["accuracy"] == 0.0
    regional = RegionalDepthOrder(patch=0.1, labels="colours").make_example(strips([1.5, 3.5, 5.5]), random.Random(0))
    assert "marked with red, blue and yellow circles" in regional.prompt_text
    with pytest.raises(ValueError, match="labels must be"):
        DepthOrder(labels="letters")


def test_choice_style_letters_every_order_and_grades_the_chosen_one():
    task = DepthOrder(points=3, min_distance=0.1, style="choice", answer_format="bare")
    example = task.make_example(strips([1.5, 3.5, 5.5]), random.Random(0))
    options = list(itertools.permutations([1, 2, 3]))  # A) 1, 2, 3  B) 1, 3, 2 ...
    assert "F) 3, 2, 1" in example.prompt_text
    right = options.index(tuple(example.answer))
    assert task.answer_text(example) == "ABCDEF"[right]
    for i, order in enumerate(options):
        parts = task.verify(example, "ABCDEF"[i]).parts
        expected = 1 - sum(abs(order.index(label) - p) for p, label in enumerate(example.answer)) / 4
        assert parts["accuracy"] == pytest.approx(expected) and parts["exact"] == float(i == right)
    assert task.verify(example, "G").parts["format"] == 0.0
    with pytest.raises(ValueError, match="at most 4 points"):
        DepthOrder(points=5, style="choice")


@pytest.mark.parametrize(
    "answer, accuracy",
    [
        ("2-1-3", 1.0),
        (" 2 - 1 - 3 ", 1.0),
        ("1-2-3", 0.0),  # only 3 in place: fraction 1/3, footrule 1 - 2/4
        ("2, 1, 3", None),
        ("2 1 3", None),
        ("2-1", None),
        ("2-1-3-3", None),
        ("2-1-4", None),
        ("2--1-3", None),
        ("-2-1-3", None),
        ("2-1-3.", None),
    ],
)
def test_dash_separator_reads_spatial_ssrl_answers(answer, accuracy):
    # Spatial-SSRL writes the regions from the smallest to the largest depth as
    # 'Smallest-Middle-Largest'
    task = RegionalDepthOrder(patch=0.1, separator="dash", reward="exact", answer_format="bare", format_weight=0.1)
    example = next(
        e
        for e in (task.make_example(strips([3.5, 1.5, 5.5]), random.Random(s)) for s in range(50))
        if e.answer == [2, 1, 3]
    )
    assert task.answer_text(example) == "2-1-3"
    assert "format 'Smallest-Middle-Largest'" in example.prompt_text
    parts = task.verify(example, answer).parts
    if accuracy is None:
        assert parts["format"] == 0.0 and parts["accuracy"] == 0.0
    else:
        assert parts["format"] == 1.0 and parts["accuracy"] == accuracy
    if answer == "1-2-3":
        assert parts["fraction"] == pytest.approx(1 / 3) and parts["footrule"] == pytest.approx(0.5)
    comma = RegionalDepthOrder(patch=0.1, reward="exact", answer_format="bare")
    assert comma.verify(example, "2, 1, 3").parts["accuracy"] == 1.0
    assert comma.verify(example, "2-1-3").parts["format"] == 0.0  # the default reads commas or spaces


def test_dashed_layout_and_bad_separators():
    from tasks.depth.common import dashed_layout

    assert dashed_layout(3) == "Smallest-Middle-Largest"
    assert dashed_layout(4) == "Smallest-Middle1-Middle2-Largest" and dashed_layout(2) == "Smallest-Largest"
    with pytest.raises(ValueError, match="separator"):
        DepthOrder(separator="slash")
    with pytest.raises(ValueError, match="separator"):
        DepthOrder(points=3, style="choice", separator="dash")
