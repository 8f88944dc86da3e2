"""ImageFolder: discovery, decoding, and undecodable files skipped by the data module."""

import logging

import numpy as np
import pytest
from PIL import Image

from datamodules import ImageFolder, PretextDataModule
from tasks import Example, SkipItem, Task
from tests.helpers import decoded_sizes


class Brightness(Task):
    """Asks for the mean brightness of an image, rounded down to a multiple of 32."""

    name = "brightness"
    modality = "image"

    def make_example(self, item, rng):
        level = int(np.asarray(item.convert("L")).mean()) // 32 * 32
        messages = self.user_message([{"type": "image", "image": item}], "How bright, to a multiple of 32?")
        meta = {"size": item.size, "draw": rng.random()}
        return Example(messages, answer=str(level), task=self.name, meta=meta)

    def answer_text(self, example):
        return example.answer

    def score(self, example, answer):
        return {"accuracy": float(answer == example.answer)}


def save(path, value, size=(12, 8), fmt=None):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", size, (value, value, value)).save(path, format=fmt)
    return path


def truncated_jpeg(path):
    noise = np.random.default_rng(0).integers(0, 256, (64, 64, 3), dtype=np.uint8)
    Image.fromarray(noise).save(path, format="JPEG", quality=95)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return path


@pytest.fixture
def folder(tmp_path):
    save(tmp_path / "a.png", 10)
    save(tmp_path / "sub" / "b.JPG", 60)
    save(tmp_path / "sub" / "deeper" / "c.jpeg", 110)
    save(tmp_path / "d.bmp", 160)
    save(tmp_path / "e.gif", 200)  # not a default extension
    (tmp_path / "notes.txt").write_text("not an image")
    return tmp_path


def test_finds_images_recursively_in_sorted_order(folder):
    source = ImageFolder(str(folder))
    names = [p.removeprefix(str(folder) + "/") for p in source.paths]
    assert names == ["a.png", "d.bmp", "sub/b.JPG", "sub/deeper/c.jpeg"]
    assert len(source) == 4 and source.describe(2).endswith("b.JPG")
    image = source[2]
    assert image.mode == "RGB" and image.size == (12, 8)
    assert abs(np.asarray(image).mean() - 60) < 3


def test_extension_filter_is_case_insensitive(folder):
    source = ImageFolder(str(folder), extensions=(".GIF", "jpg"))
    assert [p.rsplit("/", 1)[1] for p in source.paths] == ["e.gif", "b.JPG"]


def test_missing_or_empty_folder_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="not an existing directory"):
        ImageFolder(str(tmp_path / "missing"))
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(FileNotFoundError, match="no files ending in"):
        ImageFolder(str(tmp_path))


def test_max_side_downsizes_keeping_the_aspect_ratio(tmp_path):
    save(tmp_path / "wide.png", 50, size=(100, 40))
    save(tmp_path / "small.png", 50, size=(10, 4))
    source = ImageFolder(str(tmp_path), max_side=50)
    assert source[1].size == (50, 20)
    assert source[0].size == (10, 4)  # never enlarged


def test_exif_orientation_and_transparency(tmp_path):
    exif = Image.Exif()
    exif[0x0112] = 6  # stored sideways: the camera was turned 90 degrees
    Image.new("RGB", (30, 20), (90, 90, 90)).save(tmp_path / "a.jpg", exif=exif.tobytes())
    Image.new("RGBA", (6, 6), (0, 0, 0, 0)).save(tmp_path / "b.png")
    source = ImageFolder(str(tmp_path))
    assert source[0].size == (20, 30)
    assert source[1].mode == "RGB" and np.asarray(source[1]).min() == 255  # transparent shows as white


def test_undecodable_files_raise_skip_item(tmp_path):
    (tmp_path / "garbage.png").write_bytes(b"\x89PNG definitely not an image" * 10)
    truncated_jpeg(tmp_path / "cut.jpg")
    source = ImageFolder(str(tmp_path))
    for index in range(2):
        with pytest.raises(SkipItem, match=source.describe(index)):
            source[index]


def test_data_module_skips_corrupt_and_truncated_files(tmp_path, caplog):
    for i in range(10):
        save(tmp_path / f"good{i}.png", 20 * i)
    (tmp_path / "garbage.png").write_bytes(b"garbage" * 50)
    truncated_jpeg(tmp_path / "cut.jpg")
    dm = PretextDataModule(ImageFolder(str(tmp_path)), Brightness(), batch_size=4, val_size=0)
    with caplog.at_level(logging.WARNING, logger="datamodules"):
        epochs = [list(dm.train_dataloader()) for _ in range(2)]
    for batches in epochs:
        assert len(batches) == 3 and all(len(b) == 4 for b in batches)
        assert all(e.meta["size"] == (12, 8) for b in batches for e in b)  # only the good images
    assert dm.skipped >= 4  # two bad files, met at least once per epoch
    for name in ("garbage.png", "cut.jpg"):
        assert sum(name in r.getMessage() for r in caplog.records) == 1


def test_a_folder_of_broken_files_raises(tmp_path):
    for i in range(3):
        (tmp_path / f"bad{i}.png").write_bytes(b"nope")
    dm = PretextDataModule(ImageFolder(str(tmp_path)), Brightness(), batch_size=2, val_size=0)
    with pytest.raises(ValueError, match="source looks broken"):
        list(dm.train_dataloader())


def test_an_image_over_max_image_pixels_is_skipped_unread_and_counted(tmp_path, monkeypatch):
    """Before: no limit below Pillow's own (a 13000 x 13000 image was decoded whole)."""
    for i in range(6):
        save(tmp_path / f"good{i}.png", 20 * i, size=(10, 10))
    save(tmp_path / "huge.png", 50, size=(40, 40))
    source = ImageFolder(str(tmp_path), max_image_pixels=400)
    decoded = decoded_sizes(monkeypatch)
    with pytest.raises(SkipItem, match="image too large.*huge.png.*1600 pixels") as err:
        source[source.paths.index(str(tmp_path / "huge.png"))]
    assert err.value.kind == "too_large" and not decoded  # refused from the header alone
    dm = PretextDataModule(source, Brightness(), batch_size=3, val_size=0)
    batches = list(dm.train_dataloader())
    assert len(batches) == 2 and all(e.meta["size"] == (10, 10) for b in batches for e in b)
    assert dm.skip_counts[("ImageFolder", "too_large")] >= 1 and max(decoded) == (10, 10)


def test_a_jpeg_over_max_image_pixels_decodes_at_a_scale_that_fits(tmp_path, monkeypatch):
    noise = np.random.default_rng(0).integers(0, 256, (64, 96, 3), dtype=np.uint8)
    Image.fromarray(noise).save(tmp_path / "big.jpg", quality=90)
    decoded = decoded_sizes(monkeypatch)
    assert ImageFolder(str(tmp_path), max_image_pixels=48 * 32)[0].size == (48, 32)  # 1/2 scale
    assert ImageFolder(str(tmp_path), max_image_pixels=12 * 8)[0].size == (12, 8)  # 1/8 scale
    with pytest.raises(SkipItem, match="image too large"):
        ImageFolder(str(tmp_path), max_image_pixels=12 * 8 - 1)[0]  # not even 1/8 fits
    assert decoded == [(48, 32), (12, 8)]
    with pytest.raises(ValueError, match="max_image_pixels"):
        ImageFolder(str(tmp_path), max_image_pixels=0)
