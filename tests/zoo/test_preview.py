"""`zoo preview` draws what the policy sees for every task into a PNG, from the data section
alone."""

import functools
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import tasks
from tasks import Task
from tests.helpers import discover, make_item
from zoo import PolicyModule
from zoo import panels as drawing
from zoo.cli import main
from zoo.tools import preview

ROOT = Path(__file__).parents[2]
TASKS = discover(tasks, Task)


def _media_area(sheet: Image.Image) -> np.ndarray:
    """The first row of panels of the first tile, ``[PANEL_HEIGHT, TILE_WIDTH - 2 PAD, 3]``."""
    top = 2 + preview.PAD
    box = (2 + preview.PAD, top, 2 + preview.TILE_WIDTH - preview.PAD, top + preview.PANEL_HEIGHT)
    return np.asarray(sheet.crop(box), np.float32)


@pytest.mark.parametrize("cls", TASKS, ids=lambda c: c.__name__)
def test_every_task_renders_what_the_policy_sees(cls, tmp_path):
    task = cls()
    item = make_item(cls.modality)
    raw = [item, make_item(cls.modality, seed=1)] if cls.partners else item
    example = task.make_example(raw, random.Random(0))
    path = tmp_path / "sheet.png"
    preview.contact_sheet([preview.shown(task, example, raw)]).save(path)
    with Image.open(path) as png:
        sheet = png.convert("RGB")
    assert sheet.width == preview.TILE_WIDTH + 4 and sheet.height > preview.PANEL_HEIGHT + 40
    media = _media_area(sheet)
    assert media.std() > 10, "the panels are blank"
    parts = [p["type"] for m in example.messages for p in m["content"] if p["type"] != "text"]
    drawn = drawing.panels(example, raw)
    assert parts and all("cannot draw" not in p.caption and "not drawn" not in p.caption for p in drawn)
    if cls.modality == "rgbd":  # the depth map beside the marked RGB
        assert any(p.caption.startswith("depth") for p in drawn)


def test_image_files_are_opened_and_unknown_parts_noted_not_fatal(tmp_path, caplog):
    make_item("image").save(tmp_path / "a.png")
    content = [
        {"type": "image", "image": str(tmp_path / "a.png")},
        {"type": "mesh", "mesh": None},
        {"type": "image", "image": str(tmp_path / "missing.png")},
        {"type": "text", "text": "Which?"},
    ]
    example = tasks.Example([{"role": "user", "content": content}], "A", "probe")
    captions = [p.caption for p in drawing.panels(example)]
    assert captions[0] == "1: 112x84" and captions[1] == "2: <mesh> not drawn"
    assert captions[2] == "3: cannot draw image"
    assert "missing.png" in caplog.text
    sheet = preview.contact_sheet([preview.Shown(example, "A")])
    assert _media_area(sheet).std() > 10


def test_spectrogram_puts_a_tone_in_its_frequency_row():
    rate = 16000
    t = np.arange(rate) / rate
    image = np.asarray(drawing.spectrogram(np.sin(2 * np.pi * 2000 * t).astype(np.float32), rate))  # [F, T, 3]
    loudness = image.astype(float).sum(-1).mean(1)[::-1]  # per frequency bin, low first
    bins = image.shape[0] - 1  # rfft bins span 0 .. rate / 2
    assert abs(loudness.argmax() - 2000 / (rate / 2) * bins) <= 1
    assert loudness.min() < loudness.max() / 4


def _entries(out: str) -> list[tuple[str, str, str, str]]:
    """``(number, task, uid, answer)`` of each printed example."""
    heads = re.findall(r"^--- #(\d+) (\S+) \((\S+)\)$", out, flags=re.MULTILINE)
    answers = re.findall(r"^answer: (.*)$", out, flags=re.MULTILINE)
    assert len(heads) == len(answers)
    return [(*head, answer) for head, answer in zip(heads, answers, strict=True)]


def test_quickstart_from_the_command_line_shows_what_training_gets(tmp_path):
    out = tmp_path / "q.png"
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT))
    result = subprocess.run(
        [sys.executable, "-m", "zoo", "preview", "--config", "configs/quickstart.yaml", "--n", "4", "--out", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    with Image.open(out) as png:
        assert png.size == (4 * (preview.TILE_WIDTH + 2) + 2, png.height) and png.height > preview.PANEL_HEIGHT
    # the first training batch of the same configuration, drawn by its own loader
    data = preview.build_data(["--config", str(ROOT / "configs/quickstart.yaml")])
    batch = next(iter(data.train_dataloader()))[:4]
    expected = [(str(n), e.task, e.uid, data.tasks[e.task].answer_text(e)) for n, e in enumerate(batch)]
    assert _entries(result.stdout) == expected
    assert result.stdout.count("By how many degrees?") == 4
    assert f"4 train examples -> {out}" in result.stdout


@pytest.mark.parametrize(
    "config, kind, caption",
    [
        ("video_demo", "<video>", r"\d\.\d\ds"),
        ("audio_demo", "<audio>", r"Hz"),
        ("depth_demo", "<image>", r"depth"),
        ("pointlm_demo", "<point_cloud>", r"points"),
    ],
)
def test_multimodal_configs_preview(config, kind, caption, tmp_path, capsys):
    out = tmp_path / f"{config}.png"
    main(
        [
            "preview",
            "--config",
            str(ROOT / "configs" / f"{config}.yaml"),
            "--n",
            "3",
            "--columns",
            "2",
            "--split",
            "val",
            "--out",
            str(out),
        ]
    )
    printed = capsys.readouterr().out
    entries = _entries(printed)
    assert [uid for _, _, uid, _ in entries] == ["0:val:0:0", "0:val:0:1", "0:val:0:2"]
    assert all(answer for *_, answer in entries) and printed.count(kind) >= 3
    with Image.open(out) as png:
        assert png.size[0] == 2 * (preview.TILE_WIDTH + 2) + 2
        assert _media_area(png.convert("RGB")).std() > 10
    data = preview.build_data(["--config", str(ROOT / "configs" / f"{config}.yaml")])
    drawn = preview.draw(data, 1, "val")
    assert any(re.search(caption, panel.caption) for panel in drawing.panels(drawn[0].example, drawn[0].item))


def test_the_model_is_never_built(tmp_path, capsys, monkeypatch):
    @functools.wraps(PolicyModule.__init__)  # the signature stays, so the configuration still parses
    def refuse(self, *args, **kwargs):
        pytest.fail("a policy was instantiated")

    monkeypatch.setattr(PolicyModule, "__init__", refuse)
    out = tmp_path / "p.png"
    main(
        [
            "preview",
            "--config",
            str(ROOT / "configs/quickstart.yaml"),
            "--model.init_args.pretrained",
            str(tmp_path / "no-such-checkpoint"),
            "--seed",
            "5",
            "--n",
            "2",
            "--out",
            str(out),
        ]
    )
    assert [uid for _, _, uid, _ in _entries(capsys.readouterr().out)] == ["5:train:0:0", "5:train:0:1"]
    with Image.open(out) as png:
        assert png.width == 2 * (preview.TILE_WIDTH + 2) + 2


def test_unreadable_items_are_reported_not_fatal(tmp_path, capsys):
    folder = tmp_path / "images"
    folder.mkdir()
    for i in range(6):
        make_item("image", seed=i).save(folder / f"{i}.png")
    (folder / "0_broken.png").write_bytes(b"not a png")
    config = (
        (ROOT / "configs/quickstart.yaml")
        .read_text()
        .replace(
            "{class_path: datamodules.SyntheticScenes, init_args: {image_size: 56}}",
            f"{{class_path: datamodules.ImageFolder, init_args: {{root: {folder}}}}}",
        )
    )
    (tmp_path / "folder.yaml").write_text(config)
    main(
        [
            "preview",
            "--config",
            str(tmp_path / "folder.yaml"),
            "--data.init_args.val_size",
            "1",
            "--data.init_args.test_size",
            "0",
            "--data.init_args.batch_size",
            "2",
            "--n",
            "6",
            "--out",
            str(tmp_path / "f.png"),
        ]
    )
    printed = capsys.readouterr().out
    assert len(_entries(printed)) == 6
    assert "skipped 1 item(s) of ImageFolder: unreadable" in printed


@pytest.mark.parametrize(
    "config, args, message",
    [
        ("papers/ssl4rl_rotation.yaml", [], "cannot build the data section: FileNotFoundError: ImageFolder root"),
        ("quickstart.yaml", ["--data.init_args.val_size", "0", "--split", "val"], "has no val examples"),
        ("quickstart.yaml", ["--data.init_args.epoch_size", "4"], "holds no full global batch"),
    ],
)
def test_what_would_stop_the_run_is_one_clear_line(config, args, message, tmp_path):
    with pytest.raises(SystemExit, match=message):
        main(["preview", "--config", str(ROOT / "configs" / config), *args, "--out", str(tmp_path / "x.png")])
    assert not (tmp_path / "x.png").exists()


class DemonstratedLook(tasks.Rotation):
    """Rotation with the `Look` tool of tests/zoo/test_turns.py; its expert looks (k = ``look``)
    before answering, and its answer is the last turn."""

    look = 2

    @property
    def toolbox(self):
        from tests.zoo.test_turns import BOX

        return BOX

    def extract_answer(self, completion):  # the transcript's last turn, as tasks.ToolUseTask reads it
        from tasks.tools.base import turns_of

        return super().extract_answer(turns_of(completion)[-1])

    def render_answer(self, example):
        from tasks.tools.base import transcript

        return transcript([f"<look>{self.look}</look>", super().render_answer(example)])


def test_a_tool_task_shows_its_demonstration_turn_by_turn_with_the_tool_results(tmp_path):
    from datamodules import PretextDataModule, SyntheticScenes

    data = PretextDataModule(
        SyntheticScenes(size=8, image_size=56), [DemonstratedLook(answer_format="bare")], batch_size=2, val_size=2
    )
    first, _ = preview.draw(data, 2)
    answer = str(first.example.answer)
    assert first.turns == ["<look>2</look>", answer] and not first.error
    (part,) = first.results[0]  # the tool's grey 56 x 28 image after the call; nothing after the answer
    assert part["image"].size == (56, 28) and first.results[1] == []
    pictures = preview._pictures(first)
    assert [p.caption for p in pictures[1:]] == ["turn 1 -> 56x28"] and len(pictures) == 2
    assert (np.asarray(pictures[-1].image) == 100).all()
    text = preview.describe(first, 0)
    assert f"turn 1: <look>2</look>\n  tool result: image\nturn 2: {answer}\nanswer: " in text
    plain = preview.Shown(first.example, first.answer)
    assert preview.tile(first, 0).height > preview.tile(plain, 0).height  # the turns are drawn too


def test_a_demonstration_call_the_tool_refuses_is_noted_not_fatal():
    task = DemonstratedLook(answer_format="bare")
    task.look = 9  # Look refuses k = 9
    item = preview.shown(task, task.make_example(make_item("image"), random.Random(0)))
    assert "k = 9 is out of the image" in item.error and item.results == []
    assert preview._pictures(item)[-1].caption == "demonstration refused"
    assert "k = 9" in preview.describe(item, 0)
    preview.contact_sheet([item])
