"""RGBDFolder: pairing, real 16-bit PNG and .npy depth, depth scale, invalid depth, intrinsics,
skipped files."""

import importlib.util
import json
import logging
import random

import numpy as np
import pytest
from PIL import Image

from datamodules import PretextDataModule, RGBDFolder
from tasks import DepthOrder, RelativePosition3D, SkipItem

H, W = 24, 32


def rgb(path, value=100, size=(W, H)):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", size, (value, value // 2, 255 - value)).save(path)


def png16(path, millimetres):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.asarray(millimetres, dtype=np.uint16)).save(path)
    return path


def ramp_mm():
    """Depth rising 1 mm per column from 1000 mm, with a row of 0 (no reading) at the top."""
    mm = 1000 + np.tile(np.arange(W, dtype=np.uint16), (H, 1))
    mm[0] = 0
    return mm


def intrinsics(path, fx=30.0, cx=16.0, **extra):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"fx": fx, "fy": fx, "cx": cx, "cy": 12.0, **extra}))


@pytest.fixture
def folder(tmp_path):
    scene = tmp_path / "scene0"
    rgb(scene / "rgb" / "a.jpg")
    png16(scene / "depth" / "a.png", ramp_mm())
    rgb(scene / "rgb" / "b.png", 50)
    metres = np.full((H, W), 2.5, np.float32)
    metres[1, 1], metres[2, 2], metres[3, 3] = np.nan, np.inf, -1.0
    np.save(scene / "depth" / "b.npy", metres)
    intrinsics(scene / "intrinsics.json")
    intrinsics(scene / "rgb" / "b.json", fx=60.0, cx=8.0, width=W // 2, height=H // 2)  # for half the size
    rgb(scene / "rgb" / "lonely.jpg")  # no depth
    png16(scene / "depth" / "orphan.png", ramp_mm())  # no colour
    return tmp_path


def test_pairs_read_depth_in_metres_and_mask_invalid(folder, caplog):
    with caplog.at_level(logging.WARNING, logger="datamodules"):
        source = RGBDFolder(str(folder))
    assert [p[0].name for p in source.pairs] == ["a.jpg", "b.png"]
    assert sorted(p.rsplit("/", 1)[1] for p in source.unpaired) == ["lonely.jpg", "orphan.png"]
    assert sum("without a partner" in r.getMessage() for r in caplog.records) == 1
    a, b = source[0], source[1]
    assert a.rgb.shape == (H, W, 3) and a.rgb.dtype == np.uint8 and a.depth.dtype == np.float32
    np.testing.assert_allclose(a.depth[5], 1.0 + np.arange(W) / 1000, rtol=1e-6)  # millimetres
    assert np.isnan(a.depth[0]).all()  # 0 is no reading
    assert np.isnan([b.depth[1, 1], b.depth[2, 2], b.depth[3, 3]]).all()  # NaN, inf, negative
    assert np.nanmin(b.depth) == np.nanmax(b.depth) == 2.5  # .npy is in metres
    np.testing.assert_allclose(a.intrinsics, [[30, 0, 16], [0, 30, 12], [0, 0, 1]])  # the folder's file
    np.testing.assert_allclose(b.intrinsics, [[120, 0, 16], [0, 120, 24], [0, 0, 1]])  # its own, scaled x2


def test_depth_scale_applies_to_every_file(folder):
    source = RGBDFolder(str(folder), depth_scale=0.0001)
    np.testing.assert_allclose(source[0].depth[5, :3], [0.1, 0.1001, 0.1002], rtol=1e-6)
    assert np.nanmax(source[1].depth) == pytest.approx(0.00025)


def test_one_folder_layout_with_a_suffix_and_fov(tmp_path):
    rgb(tmp_path / "x.png")
    np.save(tmp_path / "x_depth.npy", np.ones((H, W), np.float32))
    with pytest.raises(ValueError, match="depth_suffix"):
        RGBDFolder(str(tmp_path), rgb_dir="", depth_dir="")
    source = RGBDFolder(str(tmp_path), rgb_dir="", depth_dir="", depth_suffix="_depth", fov=90.0)
    assert len(source) == 1 and not source.unpaired
    np.testing.assert_allclose(source[0].intrinsics, [[16, 0, 16], [0, 16, 12], [0, 0, 1]])  # W/2 / tan(45)
    unknown = RGBDFolder(str(tmp_path), rgb_dir="", depth_dir="", depth_suffix="_depth")[0]
    assert unknown.intrinsics is None  # depth ordering works without; back-projecting tasks skip the frame
    with pytest.raises(SkipItem, match="no camera intrinsics"):
        RelativePosition3D().make_example(unknown, random.Random(0))


def test_colour_is_resized_to_the_depth_and_max_side_scales_everything(tmp_path):
    rgb(tmp_path / "rgb" / "a.png", size=(2 * W, 2 * H))
    png16(tmp_path / "depth" / "a.png", ramp_mm())
    intrinsics(tmp_path / "intrinsics.json")
    item = RGBDFolder(str(tmp_path))[0]
    assert item.rgb.shape == (H, W, 3)
    small = RGBDFolder(str(tmp_path), max_side=W // 2)[0]
    assert small.rgb.shape == (H // 2, W // 2, 3) and small.depth.shape == (H // 2, W // 2)
    np.testing.assert_allclose(small.intrinsics, [[15, 0, 8], [0, 15, 6], [0, 0, 1]])
    assert set(np.unique(small.depth[1:])) <= set(np.unique(item.depth[1:]))  # nearest: no invented depths


def corrupt(folder):
    scene = folder / "scene0"
    rgb(scene / "rgb" / "c.jpg")
    (scene / "depth" / "c.png").write_bytes(b"\x89PNG not really" * 20)  # corrupt depth
    rgb(scene / "rgb" / "d.jpg")
    Image.new("L", (W, H), 7).save(scene / "depth" / "d.png")  # 8-bit: not a depth map
    (scene / "rgb" / "e.jpg").write_bytes(b"garbage" * 30)  # corrupt colour
    np.save(scene / "depth" / "e.npy", np.ones((H, W)))
    rgb(scene / "rgb" / "f.jpg")
    np.save(scene / "depth" / "f.npy", np.ones((H, W, 3)))  # not [H, W]
    rgb(scene / "rgb" / "g.jpg")
    np.save(scene / "depth" / "g.npy", np.ones((H, W)))
    (scene / "rgb" / "g.json").write_text("{not json")  # broken intrinsics
    return ["c.jpg", "d.jpg", "e.jpg", "f.jpg", "g.jpg"]


def test_unreadable_frames_raise_skip_item(folder):
    bad = corrupt(folder)
    source = RGBDFolder(str(folder))
    for index, (colour, _) in enumerate(source.pairs):
        if colour.name in bad:
            with pytest.raises(SkipItem, match=colour.name):
                source[index]
        else:
            source[index]


def test_data_module_skips_and_counts_broken_frames(folder, caplog):
    bad = corrupt(folder)
    for i in range(4):  # good frames with real depth structure
        rgb(folder / "scene1" / "rgb" / f"{i}.png", 30 * i)
        png16(folder / "scene1" / "depth" / f"{i}.png", ramp_mm() * (i + 1))
    intrinsics(folder / "scene1" / "intrinsics.json")
    task = DepthOrder(points=2, min_distance=0.2, min_gap=0.01, marker_size=0.1)
    data = PretextDataModule(RGBDFolder(str(folder)), task, batch_size=3, val_size=0, epoch_size=12)
    with caplog.at_level(logging.WARNING, logger="datamodules"):
        batches = list(data.train_dataloader())
    assert sum(len(b) for b in batches) == 12
    assert data.skipped >= len(bad)
    for name in bad:
        assert sum(name in r.getMessage() for r in caplog.records) == 1, name


@pytest.mark.skipif(importlib.util.find_spec("cv2") is not None, reason="OpenCV is installed: .exr is readable")
def test_exr_without_opencv_is_a_clear_error(tmp_path):
    rgb(tmp_path / "rgb" / "a.png")
    (tmp_path / "depth").mkdir()
    (tmp_path / "depth" / "a.exr").write_bytes(b"v/1\x01")
    with pytest.raises(ImportError, match="opencv-python-headless"):
        RGBDFolder(str(tmp_path))


def test_missing_root_or_no_pairs(tmp_path):
    with pytest.raises(FileNotFoundError, match="not an existing directory"):
        RGBDFolder(str(tmp_path / "missing"))
    rgb(tmp_path / "rgb" / "a.png")
    with pytest.raises(FileNotFoundError, match="no colour image with a depth map"):
        RGBDFolder(str(tmp_path))


def test_depth_order_on_a_read_frame_agrees_with_the_stored_depth(folder):
    item = RGBDFolder(str(folder))[0]
    example = DepthOrder(points=2, min_distance=0.2, min_gap=0.005).make_example(item, random.Random(0))
    stored = ramp_mm()  # depth rises to the right
    columns = [example.meta["points"][label - 1][0] for label in example.answer]
    assert columns == sorted(columns) and [stored[5, c] for c in columns] == sorted(stored[5, c] for c in columns)
