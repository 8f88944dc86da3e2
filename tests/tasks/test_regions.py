"""Grounding answers are `Region` ballots, and maj@k votes over them by overlap (GUI-RC): the
prediction that lies most within the consensus of the k wins, where exact-match voting would find
no majority among boxes that differ by a pixel."""

import torch

from tasks import Example, GUIGrounding, ReferringGrounding
from tasks.regions import Region, cells, region_winner
from zoo.evaluation import majority_at_k


def box(*corners):
    return Region(tuple(float(c) for c in corners), 100, 100)


def test_the_region_inside_the_consensus_wins():
    # box 1 covers 20 x 20 cells, box 2 the 10 x 10 in its middle, box 3 lies apart: the middle
    # cells hold the peak, 2 votes; box 2's mean vote is the peak (density 1), box 1's is
    # (100 * 2 + 300 * 1) / (2 * 400) = 0.625, box 3's 1 / 2
    ballots = [box(10, 10, 30, 30), box(15, 15, 25, 25), box(70, 70, 80, 80)]
    assert region_winner(ballots) == 1
    assert region_winner([None, *ballots]) == 2
    assert region_winner([None, None]) is None
    # equal densities go to the first: two boxes overlapping symmetrically
    assert region_winner([box(10, 10, 30, 30), box(12, 12, 32, 32)]) == 0


def test_a_point_votes_as_the_square_around_it_clipped_to_the_answer_space():
    assert cells(box(50, 50, 50, 50), point_size=10) == (40, 40, 60, 60)
    assert cells(box(3, 97, 3, 97), point_size=10) == (0, 87, 13, 100)
    assert cells(box(0, 0, 100, 100), max_area=0.5) is None  # the whole space votes for nothing
    # two clicks 4 pixels apart agree with each other against a third far away: one of them wins
    assert region_winner([box(80, 10, 80, 10), box(40, 40, 40, 40), box(44, 40, 44, 40)]) == 1


def test_maj_at_k_of_regions_scores_the_consensus_prediction():
    ballots = [box(10, 10, 30, 30), box(15, 15, 25, 25), box(70, 70, 80, 80), None]
    accuracy = torch.tensor([0.0, 1.0, 0.0, 0.0])  # only the consensus one hits its target
    # exact-match voting would see three different answers and take the first (accuracy 0)
    assert majority_at_k(ballots, accuracy, n=4, k=3).tolist() == [1.0]
    assert majority_at_k(ballots, accuracy, n=4, k=1).tolist() == [0.0]
    assert majority_at_k([None] * 4, accuracy, n=4, k=4).tolist() == [0.0]


def test_grounding_tasks_give_region_ballots_in_their_answer_space():
    clicks = GUIGrounding(answer_format="bare")
    screen = Example([], [40, 40], clicks.name, {"box": [30, 30, 50, 50], "text": "Send", "screen": [100, 80]})
    assert clicks.canonical_answer(screen, "(12, 30)") == Region((12.0, 30.0, 12.0, 30.0), 100, 80)
    assert clicks.canonical_answer(screen, "(12.0,30)") == clicks.canonical_answer(screen, "(12, 30)")
    assert clicks.canonical_answer(screen, "(120, 30)") is None  # off the screen
    boxes = ReferringGrounding(coords="normalized", answer_format="bare")
    image = Example([], [0, 0, 100, 100], boxes.name, {"bounds": [1000, 1000], "box": [0, 0, 10, 10]})
    assert boxes.canonical_answer(image, "[1, 2, 3, 4]") == Region((1.0, 2.0, 3.0, 4.0), 1000, 1000)
    assert boxes.canonical_answer(image, "(1.0,2.0),(3.0,4.0)") == boxes.canonical_answer(image, "[1, 2, 3, 4]")
