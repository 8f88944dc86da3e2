"""Benchmark sources read the released layouts, skip and count bad rows, and give every item to the
task once."""

import logging
import random
import sys

import numpy as np
import pytest
from PIL import Image

from datamodules import BenchmarkDataModule, GroundingBenchmark, MCQBenchmark, MomentBenchmark
from datamodules.sources.tables import table_files
from tasks import MultipleChoice, ReferringGrounding, TemporalGrounding, Video
from tests import benchmark_fixtures as fx


def write_video(path, seconds):
    from tests.datamodules.test_video_folder import clip, write

    return write(path, clip(int(seconds * 10)), fps=10)


def test_cv_bench_parquet(tmp_path, caplog):
    with caplog.at_level(logging.WARNING):
        source = MCQBenchmark(str(fx.cv_bench(tmp_path)), image="image", answer_as="letter")
    assert len(source) == 5 and source.skipped_rows == 3
    assert source.skip_reasons == {"answer not an option": 1, "undecodable image": 1, "missing column": 1}
    assert "skipped 3 unusable row(s)" in caplog.text and "(E)" in caplog.text
    item = source[1]
    assert item.choices == ["one", "two", "three"] and item.answer == "two" and item.question == "Question 1?"
    (image,) = item.media
    assert isinstance(image, Image.Image) and image.getpixel((0, 0)) == fx.COLOURS[1]


def test_mmbench_tsv_with_base64_images_option_columns_and_hints(tmp_path):
    source = MCQBenchmark(
        str(fx.mmbench(tmp_path)),
        choices=["A", "B", "C", "D"],
        answer_as="letter",
        hint="hint",
        image="image",
        image_strings="base64",
    )
    assert len(source) == 4 and source.skip_reasons == {"answer not an option": 1, "bad base64": 1}
    assert [source[i].answer for i in range(4)] == ["brown", "1", "left", "z"]
    assert source[1].choices == ["1", "2", "3"]  # the empty D column is no option
    assert source[1].question == "Hint: Count the squares.\nHow many?"
    assert source[2].question == "Where?"  # "nan" is pandas' empty cell
    assert source[0].media[0].size == (40, 30)


def test_mmau_json_with_audio_paths(tmp_path):
    source = MCQBenchmark(str(fx.mmau(tmp_path)), audio="audio_id", answer_as="text", sampling_rate=16000)
    assert len(source) == 3 and source.skip_reasons == {
        "bad path": 1,
        "answer not an option": 1,
        "undecodable audio": 1,
    }
    item = source[2]
    assert item.answer == "high" and item.media[0].sampling_rate == 16000
    assert item.media[0].duration == pytest.approx(1.0, abs=1e-3)
    example = MultipleChoice(labels="text", shuffle_choices=False).make_example(item, random.Random(0))
    assert [p["type"] for p in example.messages[0]["content"]] == ["audio", "text"]


def test_refcoco_boxes_are_converted_checked_and_each_sentence_is_an_item(tmp_path):
    path = str(fx.refcoco(tmp_path))
    source = GroundingBenchmark(path, box_format="xywh", expressions="answer")
    assert len(source) == 3 and source.skip_reasons == {"box outside the image": 1, "undecodable image": 1}
    assert [source[i].targets for i in range(3)] == [
        [("man on the left", [0, 0, 50, 80])],
        [("left guy", [0, 0, 50, 80])],
        [("top right", [50, 0, 100, 40])],
    ]
    # read as xyxy the same numbers are other boxes: [50, 0, 50, 40] and [60, 10, 50, 20] have no
    # area
    assert GroundingBenchmark(path, box_format="xyxy", expressions="answer").skip_reasons["bad box"] == 2
    with pytest.raises(TypeError):
        GroundingBenchmark(path)  # the box format is never guessed


def test_charades_jsonl_and_txt(tmp_path):
    pytest.importorskip("decord")
    path = fx.charades(tmp_path, write_video)
    source = MomentBenchmark(str(path), path_format="videos/{}.mp4", num_frames=8, fps=None)
    assert len(source) == 3 and source.skip_reasons == {"bad path": 1, "bad interval": 2}
    item = source[2]
    assert item.targets == [("the person leaves", [2.5, 4.0])]  # clipped to the duration
    assert isinstance(item.video, Video) and item.video.duration == pytest.approx(4.0)
    (tmp_path / "charades_sta_test.txt").write_text("AO8RW 0.0 2.0##a person opens a door.\nnot a line\n")
    txt = MomentBenchmark(str(tmp_path / "charades_sta_test.txt"), path_format="videos/{}.mp4", num_frames=8, fps=None)
    assert len(txt) == 1 and txt.skip_reasons == {"not a Charades-STA line": 1}
    assert txt[0].targets == [("a person opens a door.", [0.0, 2.0])]


def test_paths_may_not_leave_the_root_and_limit_keeps_the_first_items(tmp_path):
    path = fx.mmau(tmp_path)
    (tmp_path.parent / "outside.wav").write_bytes((tmp_path / "test-mini-audios" / "0.wav").read_bytes())
    source = MCQBenchmark(str(path), audio="audio_id", limit=2)
    assert len(source) == 2 and source.skipped_rows == 0
    assert MCQBenchmark(str(path), audio="audio_id").skip_reasons["bad path"] == 1  # even though it exists


def test_folder_of_parquet_shards_and_clear_errors(tmp_path):
    fx.cv_bench(tmp_path)
    (tmp_path / "data").mkdir()
    (tmp_path / "test.parquet").rename(tmp_path / "data" / "test-00000-of-00001.parquet")
    assert len(MCQBenchmark(str(tmp_path), image="image", answer_as="letter")) == 5
    with pytest.raises(FileNotFoundError, match="parquet"):
        table_files(str(tmp_path / "nothing.parquet"), "MCQBenchmark")
    with pytest.raises(ValueError, match="no usable rows"):
        MCQBenchmark(str(tmp_path), image="image", answer_as="index")
    with pytest.raises(ValueError, match="path_format"):
        MCQBenchmark(str(tmp_path), image="image", path_format="videos/{id}.mp4")


def test_missing_pyarrow_names_the_extra(tmp_path, monkeypatch):
    path = fx.cv_bench(tmp_path)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)  # as if not installed
    with pytest.raises(ImportError, match=r"zoo\[eval\]"):
        MCQBenchmark(str(path), image="image", answer_as="letter")


def test_benchmark_data_module_evaluates_every_item_once_in_order(tmp_path):
    source = MCQBenchmark(str(fx.cv_bench(tmp_path)), image="image", answer_as="letter")
    data = BenchmarkDataModule(source, MultipleChoice(shuffle_choices=False, answer_format="bare"), batch_size=2)
    batches = list(data.test_dataloader())
    assert [len(b) for b in batches] == [2, 2, 1]
    examples = [e for b in batches for e in b]
    assert [data.tasks["mcq"].answer_text(e) for e in examples] == list("ABACB")
    assert [e.uid.rsplit(":", 1)[1] for e in examples] == ["0", "1", "2", "3", "4"]
    with pytest.raises(RuntimeError, match="only evaluates"):
        data.train_dataloader()


def test_grounding_and_moment_items_make_examples(tmp_path):
    source = GroundingBenchmark(str(fx.refcoco(tmp_path)), box_format="xywh", expressions="answer")
    example = ReferringGrounding(coords="normalized").make_example(source[2], random.Random(0))
    assert example.answer == [500, 0, 1000, 500]
    absolute = ReferringGrounding(factor=28, max_pixels=56 * 56).make_example(source[2], random.Random(0))
    image = absolute.messages[0]["content"][0]["image"]
    assert image.size == (56, 56) and absolute.answer == [28, 0, 56, 28]
    frames = np.zeros((8, 16, 16, 3), np.uint8)
    from tasks import Moments

    example = TemporalGrounding().make_example(Moments(Video(frames, 2.0), [("x", [1.0, 2.5])]), random.Random(0))
    assert example.answer == [1.0, 2.5] and "lasts 4.0 seconds" in example.prompt_text


def test_video_paths_and_audio_structs_with_bytes(tmp_path):
    pytest.importorskip("decord")
    soundfile = pytest.importorskip("soundfile")
    import io
    import json

    write_video(tmp_path / "clips" / "v1.mp4", 2.0)
    (tmp_path / "q.jsonl").write_text(
        json.dumps(
            {"video": "clips/v1.mp4", "question": "What moves?", "choices": ["a square", "a circle"], "answer": 0}
        )
        + "\n"
    )
    source = MCQBenchmark(str(tmp_path / "q.jsonl"), video="video", answer_as="index", num_frames=4)
    (video,) = source[0].media
    assert isinstance(video, Video) and video.frames.shape[0] == 4 and source[0].answer == "a square"
    buffer = io.BytesIO()
    soundfile.write(buffer, np.zeros(4000, np.float32), 8000, format="WAV")
    fx.write_parquet(
        tmp_path / "audio.parquet",
        [
            {
                "audio": {"bytes": buffer.getvalue(), "path": "a.wav"},
                "question": "?",
                "choices": ["x", "y"],
                "answer": "y",
            },
            {
                "audio": {"bytes": b"RIFF....WAVEjunk", "path": "b.wav"},
                "question": "?",
                "choices": ["x", "y"],
                "answer": "y",
            },
        ],
    )
    source = MCQBenchmark(str(tmp_path / "audio.parquet"), audio="audio")
    assert len(source) == 1 and source.skip_reasons == {"undecodable audio": 1}
    (audio,) = source[0].media
    assert audio.sampling_rate == 16000 and audio.duration == pytest.approx(0.5)
