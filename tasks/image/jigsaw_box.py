"""Jigsaw box questions: equal boxes are swapped between the regions of an image; where did one come
from?

Follows the ``box`` question of Jigsaw-R1 (arXiv 2505.23590; zifuwanggg/Jigsaw-R1
utils/jigsaw_utils.py ``create_box_jigsaw_image``, utils/reward.py ``score_boxes``): the image is
divided into ``m x n`` regions, one box of a common random size is placed in each, the boxes'
contents are permuted (the asked region's always moves), and the answer is the box, in pixels, where
the content now in the asked region was; the reward is the IoU with it (boxes with exclusive right
and bottom edges; Jigsaw-R1's ``score_boxes`` gives the same IoU except that an overlap only one
pixel wide or high counts as none).
"""

from __future__ import annotations

import random

from PIL import Image

from tasks.base import Example, SkipItem
from tasks.grounding import BoxTask, fit_size
from tasks.image import grid


class JigsawBox(BoxTask):
    """Swap equal boxes between the ``rows x cols`` regions of an image and ask for the original box
    of the one now in a named region, as ``[x1, y1, x2, y2]`` in pixels of the image shown.

    Args:
        rows: Region rows.
        cols: Region columns; ``rows * cols`` must be at least 2.
        box_size: ``[low, high]``: the boxes' width and height are drawn (separately, once per
            example) between these fractions of a region's width and height (Jigsaw-R1: 0.1 to 0.6).
        mask_ratio: Black out this fraction of each region at its borders first (as `tasks.Jigsaw`
            does with tiles); boxes are placed clear of the blacked-out parts.
        min_tile: Images whose regions would be smaller than this many pixels on a side are skipped.
        factor: Side multiple of the shown image (28 for Qwen2.5-VL, whose processor then keeps its
            size, so the pixel coordinates are those the policy sees).
        max_pixels: Most pixels of the shown image (set the processor's ``max_pixels`` to at least
            this).
        threshold: IoU at which an answer counts as correct (``accuracy``; Jigsaw-R1 counts IoU
            above 0.5); the reward is the IoU itself.
        **kwargs: Answer format options, see `tasks.Task`.
    """

    name = "jigsaw_box"
    modality = "image"
    levels = {"2x1": {"rows": 2, "cols": 1}, "2x2": {"rows": 2, "cols": 2}, "3x3": {"rows": 3, "cols": 3}}

    def __init__(
        self,
        rows: int = 2,
        cols: int = 1,
        box_size: list[float] = [0.1, 0.6],  # noqa: B006
        mask_ratio: float = 0.0,
        min_tile: int = 14,
        factor: int = 28,
        max_pixels: int = 1280 * 28 * 28,
        threshold: float = 0.5,
        **kwargs,
    ):
        super().__init__(threshold=threshold, **kwargs)
        if rows < 1 or cols < 1 or rows * cols < 2:
            raise ValueError(f"need rows, cols >= 1 and at least two regions, got {rows}x{cols}")
        if len(box_size) != 2 or not 0 < box_size[0] <= box_size[1] <= 1:
            raise ValueError(f"box_size must be [low, high] with 0 < low <= high <= 1, got {box_size}")
        if not 0 <= mask_ratio < 0.5 or min_tile < 1 or factor < 1 or max_pixels < factor * factor:
            raise ValueError(
                f"need 0 <= mask_ratio < 0.5, min_tile >= 1, factor >= 1 and max_pixels >= factor^2, "
                f"got {mask_ratio}, {min_tile}, {factor}, {max_pixels}"
            )
        self.rows = rows
        self.cols = cols
        self.box_size = list(box_size)
        self.mask_ratio = mask_ratio
        self.min_tile = min_tile
        self.factor = factor
        self.max_pixels = max_pixels

    def make_example(self, item: Image.Image, rng: random.Random) -> Example:
        image = item.convert("RGB")
        size = fit_size(*image.size, self.factor, self.max_pixels)
        image = image.resize(size, Image.Resampling.BICUBIC) if image.size != size else image
        width, height = image.width // self.cols, image.height // self.rows  # one region
        if min(width, height) < self.min_tile:
            raise SkipItem(f"{item.size} image: {width}x{height} regions, below min_tile={self.min_tile}")
        if self.mask_ratio:
            image = grid.mask_borders(image, self.rows, self.cols, self.mask_ratio)
        boxes = self._boxes(width, height, rng)
        region = rng.randrange(len(boxes))  # 0-based
        order = self._order(len(boxes), region, rng)  # the content of box i moves to box order[i]
        canvas = image.copy()
        for i, box in enumerate(boxes):
            canvas.paste(image.crop(box), tuple(boxes[order[i]][:2]))
        truth = boxes[order.index(region)]
        meta = {
            "rows": self.rows,
            "cols": self.cols,
            "region": region + 1,
            "boxes": boxes,
            "order": order,
            "bounds": list(image.size),
        }
        media = [{"type": "image", "image": canvas}]
        return Example(self.user_message(media, self._question(region + 1, image.size)), truth, self.name, meta)

    def _boxes(self, width: int, height: int, rng: random.Random) -> list[list[int]]:
        """One ``[x1, y1, x2, y2]`` box per region in raster order, all of one random size, each
        placed at random inside its region clear of the blacked-out borders."""
        cuts = [
            grid.borders(self.rows, self.cols, r, c, width, height, self.mask_ratio)
            for r in range(self.rows)
            for c in range(self.cols)
        ]
        room_w = width - max(left + right for left, _, right, _ in cuts)
        room_h = height - max(top + bottom for _, top, _, bottom in cuts)
        box_w, box_h = (self._side(side, room, rng) for side, room in ((width, room_w), (height, room_h)))
        boxes = []
        for i, (left, top, right, bottom) in enumerate(cuts):
            x0 = (i % self.cols) * width
            y0 = (i // self.cols) * height
            x = x0 + rng.randint(left, width - box_w - right)
            y = y0 + rng.randint(top, height - box_h - bottom)
            boxes.append([x, y, x + box_w, y + box_h])
        return boxes

    def _side(self, side: int, room: int, rng: random.Random) -> int:
        high = max(1, min(int(self.box_size[1] * side), room))
        return rng.randint(max(1, min(int(self.box_size[0] * side), high)), high)

    @staticmethod
    def _order(k: int, region: int, rng: random.Random) -> list[int]:
        """A random permutation of ``range(k)`` that moves ``region`` (Jigsaw-R1 swaps it with
        another if not)."""
        order = list(range(k))
        rng.shuffle(order)
        if order[region] == region:
            other = rng.choice([i for i in range(k) if i != region])
            order[region], order[other] = order[other], order[region]
        return order

    def _question(self, region: int, size: tuple[int, int]) -> str:
        k = self.rows * self.cols
        layout = grid.grid_name(self.rows, self.cols)
        masked = " The borders of every region are blacked out." if self.mask_ratio else ""
        return (
            f"This image is divided into regions on a grid of {layout}, numbered 1 to {k} "
            f"left to right, top to bottom.{masked} Patches of one size inside the regions have been swapped with "
            f"each other, so the picture looks wrong in places. Where in the original image was the patch that is "
            f"now in region {region}? Answer with its bounding box as [x1, y1, x2, y2] in pixel coordinates of "
            f"this {size[0]} x {size[1]} image, x from the left edge and y from the top."
        )
