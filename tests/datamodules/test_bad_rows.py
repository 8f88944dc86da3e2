"""One bad row never kills a source: every row-reading source (GUI episodes, frame pairs, audio QA
JSONL, the benchmark files in every format) skips and counts a row of any kind of badness (a
too-short tree list, 1e309, 100k-deep nesting, an invalid UTF-8 byte, a ``bytes`` cell of the wrong
type or of ``10**13``) and names its file and line in the one warning it logs; truncated ASCII point
clouds are refused like binary ones."""

import json
import logging

import numpy as np
import pytest
from PIL import Image

from datamodules import AudioQAJsonl, FramePairs, GroundingBenchmark, GUITrajectories, MCQBenchmark, MomentBenchmark
from datamodules.sources.point_cloud_folder import PointCloudFolder, check_complete
from tests.benchmark_fixtures import png

DEEP = "[" * 100_000 + "]" * 100_000  # past the JSON parser's recursion limit
INVALID_UTF8 = b'{"text": "caf\xe9"}'  # latin-1 e-acute: not UTF-8


def write_lines(path, lines) -> str:
    """A JSONL file from JSON-able rows, raw strings and raw bytes, one per line."""
    encoded = [
        line if isinstance(line, bytes) else (line if isinstance(line, str) else json.dumps(line)).encode()
        for line in lines
    ]
    path.write_bytes(b"\n".join(encoded) + b"\n")
    return str(path)


def logged_once(caplog, path, lines):
    """The one warning of a source names each bad line as ``file:line``."""
    (message,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    return [f"{path}:{line}" in message for line in lines]


def test_gui_episodes_skip_a_bad_row_of_any_kind(tmp_path, caplog):
    for i in range(3):
        Image.new("RGB", (40, 30), (10 * i, 0, 0)).save(tmp_path / f"{i}.png")
    good = {
        "episode_id": 0,
        "screenshots": ["0.png", "1.png"],
        "actions": [{"action_type": "wait"}],
        "accessibility_trees": [[{"bounds": [0, 0, 40, 30], "text": "Home"}], []],
    }
    rows = [
        good,
        dict(good, accessibility_trees=[]),  # too short: IndexError
        dict(good, accessibility_trees=[[{"bounds": [0, 0, 1e309, 30]}], []]),  # int(inf): OverflowError
        DEEP,  # RecursionError in the parser
        INVALID_UTF8,  # UnicodeDecodeError
        dict(good, accessibility_trees=[[{"bounds": 7}], []]),
    ]  # TypeError
    path = write_lines(tmp_path / "episodes.jsonl", rows)
    with caplog.at_level(logging.WARNING):
        source = GUITrajectories(path)
    assert len(source) == 1 and source.skipped == 5
    assert logged_once(caplog, path, [2]) == [True]  # the first of each kind, with its file:line


def test_frame_pairs_skip_a_bad_row_of_any_kind(tmp_path, caplog):
    for i in range(2):
        Image.new("RGB", (16, 16), (0, 10 * i, 0)).save(tmp_path / f"{i}.png")
    good = {"frames": ["0.png", "1.png"], "actions": ["left"]}
    rows = [
        good,
        DEEP,
        INVALID_UTF8,
        {"frames": [["0.png"], "1.png"], "actions": [["left"]]},
        {"frames": ["0.png", 3], "actions": ["left"]},
    ]
    path = write_lines(tmp_path / "pairs.jsonl", rows)
    with caplog.at_level(logging.WARNING):
        source = FramePairs(path, actions=["left", "right"])
    assert len(source) == 1 and source.skipped == 4
    assert all(logged_once(caplog, path, [2, 4]))


def test_audio_qa_skips_undecodable_and_deep_lines(tmp_path, caplog):
    import soundfile

    soundfile.write(tmp_path / "a.wav", np.zeros(1600, np.float32), 16000)
    good = {"audio": "a.wav", "question": "What?", "choices": ["a", "b"], "answer": "a"}
    path = write_lines(tmp_path / "qa.jsonl", [good, INVALID_UTF8, DEEP, dict(good, answer=10**13)])
    with caplog.at_level(logging.WARNING):
        source = AudioQAJsonl(path)
    assert len(source) == 1 and source.skipped_rows == 3
    assert all(logged_once(caplog, path, [2, 3, 4]))


def mcq_rows(count: int = 2) -> list[dict]:
    return [
        {
            "question": f"Q{i}?",
            "choices": ["left", "right"],
            "answer": "left",
            "image": {"bytes": None, "path": f"{i}.png"},
        }
        for i in range(count)
    ]


@pytest.mark.parametrize("bad", ["bytes_of_10**13", "bytes_of_a_string", "deep", "invalid_utf8", "inf_index"])
def test_a_benchmark_jsonl_row_of_any_kind_is_skipped(tmp_path, caplog, bad):
    for i in range(2):
        (tmp_path / f"{i}.png").write_bytes(png())
    good = [dict(row, answer=0) for row in mcq_rows(2)]  # answers as 0-based indices
    line = {
        "bytes_of_10**13": dict(good[0], image={"bytes": 10**13}),
        "deep": DEEP,
        "invalid_utf8": INVALID_UTF8,
        "bytes_of_a_string": dict(good[0], image={"bytes": "x"}),
        "inf_index": dict(good[0], answer=1e309),
    }[bad]
    path = write_lines(tmp_path / "bench.jsonl", [good[0], line, good[1]])
    with caplog.at_level(logging.WARNING):
        source = MCQBenchmark(path, image="image", answer_as="index")
    assert len(source) == 2 and source.skipped_rows == 1
    assert all(logged_once(caplog, path, [2]))


def test_a_json_list_with_a_deep_row_and_an_invalid_byte_keeps_its_other_rows(tmp_path, caplog):
    for i in range(3):
        (tmp_path / f"{i}.png").write_bytes(png())
    good = [json.dumps(row) for row in mcq_rows(3)]
    text = (
        b"[" + b",\n".join([good[0].encode(), DEEP.encode(), good[1].encode(), INVALID_UTF8, good[2].encode()]) + b"]"
    )
    (tmp_path / "bench.json").write_bytes(text)
    with caplog.at_level(logging.WARNING):
        source = MCQBenchmark(str(tmp_path / "bench.json"), image="image")
    assert [source[i].question for i in range(len(source))] == ["Q0?", "Q1?", "Q2?"]
    assert source.skipped_rows == 2
    assert all(logged_once(caplog, tmp_path / "bench.json", [2]))  # the first bad row of its kind


def test_tsv_and_charades_txt_lines_with_an_invalid_byte_are_skipped_alone(tmp_path, caplog):
    (tmp_path / "0.png").write_bytes(png())
    tsv = (
        b"question\tA\tB\tanswer\timage\nQ0?\tleft\tright\tA\t0.png\nQ1\xe9?\tleft\tright\tA\t0.png\n"
        b"Q2?\tup\tdown\tB\t0.png\n"
    )
    (tmp_path / "bench.tsv").write_bytes(tsv)
    with caplog.at_level(logging.WARNING):
        source = MCQBenchmark(str(tmp_path / "bench.tsv"), choices=["A", "B"], answer_as="letter", image="image")
    assert len(source) == 2 and source.skipped_rows == 1
    assert f"{tmp_path / 'bench.tsv'}:3" in caplog.text and "not UTF-8" in caplog.text
    pytest.importorskip("decord")
    (tmp_path / "v.mp4").write_bytes(b"")
    (tmp_path / "sta.txt").write_bytes(b"v 0.0 1.0##a person sits\nv 1.0 2.0##caf\xe9 time\nv 2.0 3.0##stands\n")
    moments = MomentBenchmark(str(tmp_path / "sta.txt"), path_format="{}.mp4", duration=None)
    assert len(moments) == 2 and moments.skipped_rows == 1


def test_a_grounding_row_with_an_infinite_box_is_skipped(tmp_path):
    (tmp_path / "0.png").write_bytes(png(size=(40, 30)))
    good = {"image": "0.png", "expression": "the thing", "bbox": [1, 1, 10, 10]}
    path = write_lines(tmp_path / "ref.jsonl", [good, dict(good, bbox=[1e309, 0, 1, 1]), DEEP, good])
    source = GroundingBenchmark(path, box_format="xywh")
    assert len(source) == 2 and source.skipped_rows == 2


@pytest.mark.parametrize("option", ["</answer>", "<answer>left", "up</think>"])
def test_an_option_no_answer_format_can_carry_skips_its_row_at_read(tmp_path, caplog, option):
    """Before: the row was accepted, though an option holding a format tag can never be written
    as an answer (``</answer>`` as the right option could never be rewarded)."""
    import soundfile

    (tmp_path / "0.png").write_bytes(png())
    soundfile.write(tmp_path / "a.wav", np.zeros(1600, np.float32), 16000)
    rows = [{"question": "Q?", "choices": ["left", "right"], "answer": "left", "image": "0.png", "audio": "a.wav"}]
    rows += [
        dict(rows[0], choices=["left", option], answer=option),  # the right option
        dict(rows[0], choices=[option, "right"], answer="right"),
        rows[0],
    ]  # a wrong one
    path = write_lines(tmp_path / "bench.jsonl", rows)
    with caplog.at_level(logging.WARNING):
        source = MCQBenchmark(path, image="image")
    assert len(source) == 2 and source.skip_reasons == {"unwritable option": 2}
    assert all(logged_once(caplog, path, [2])) and option in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        audio = AudioQAJsonl(path)
    assert len(audio) == 2 and audio.skipped_rows == 2 and "unwritable option" in caplog.text


# ---- memory per row: line bytes and image pixels, checked before anything is decoded ----
def test_a_long_line_is_read_past_in_pieces_never_whole():
    """Before: a line was read whole, however long."""
    import io

    from datamodules.sources.limits import bounded_lines

    class Spy(io.BytesIO):
        biggest = 0

        def readline(self, size=-1):
            line = super().readline(size)
            Spy.biggest = max(Spy.biggest, len(line))
            return line

    data = b'{"a": 1}\n' + b"x" * (3 * 2**20) + b'\n{"b": 2}\n' + b"y" * 101
    found = list(bounded_lines(Spy(data), 100))
    assert found == [(1, b'{"a": 1}\n'), (2, None), (3, b'{"b": 2}\n'), (4, None)]
    assert Spy.biggest <= 2**20
    assert list(bounded_lines(io.BytesIO(b"z" * 100 + b"\n" + b"z" * 100), 100)) == [
        (1, b"z" * 100 + b"\n"),
        (2, b"z" * 100),
    ]  # exactly the bound: kept


def test_a_line_over_max_line_bytes_is_skipped_by_every_jsonl_reader(tmp_path, caplog):
    """Before: no reader bounded a line (one could hold gigabytes)."""
    import soundfile

    for i in range(2):
        Image.new("RGB", (16, 16), (0, 10 * i, 0)).save(tmp_path / f"{i}.png")
    soundfile.write(tmp_path / "a.wav", np.zeros(1600, np.float32), 16000)
    rows = {
        GUITrajectories: {"screenshots": ["0.png", "1.png"], "actions": [{"action_type": "wait"}]},
        FramePairs: {"frames": ["0.png", "1.png"], "actions": ["left"]},
        AudioQAJsonl: {"audio": "a.wav", "question": "What?", "choices": ["a", "b"], "answer": "a"},
        MCQBenchmark: {"question": "Q?", "choices": ["left", "right"], "answer": "left", "image": "0.png"},
    }
    for cls, good in rows.items():
        caplog.clear()
        path = write_lines(tmp_path / "rows.jsonl", [good, dict(good, pad="x" * 3000), good])
        extra = {"image": "image"} if cls is MCQBenchmark else {}
        with caplog.at_level(logging.WARNING):
            source = cls(path, max_line_bytes=1000, **extra)
        skipped = getattr(source, "skipped_rows", getattr(source, "skipped", None))
        assert (len(source), skipped) == (2, 1), cls.__name__
        assert all(logged_once(caplog, path, [2])) and "line too long" in caplog.text, cls.__name__
        assert len(cls(path, max_line_bytes=4000, **extra)) == 3


def test_an_image_over_max_image_pixels_in_a_tsv_cell_skips_its_row_unread(tmp_path, caplog, monkeypatch):
    """Before: a 13000 x 13000 PNG in a TSV cell was decoded whole when the file was read (+800 MB),
    under Pillow's own limit."""
    import base64

    from tests.helpers import decoded_sizes

    cells = [base64.b64encode(png(size=size)).decode() for size in [(10, 10), (40, 30), (10, 10)]]
    lines = [f"Q{i}?\tleft\tright\tA\t{cell}\n" for i, cell in enumerate(cells)]
    (tmp_path / "bench.tsv").write_text("question\tA\tB\tanswer\timage\n" + "".join(lines))
    decoded = decoded_sizes(monkeypatch)
    with caplog.at_level(logging.WARNING):
        source = MCQBenchmark(
            str(tmp_path / "bench.tsv"),
            choices=["A", "B"],
            answer_as="letter",
            image="image",
            image_strings="base64",
            max_image_pixels=400,
        )
    assert len(source) == 2 and source.skip_reasons == {"image too large": 1}
    assert f"{tmp_path / 'bench.tsv'}:3" in caplog.text and "1200 pixels" in caplog.text
    assert decoded == [(10, 10), (10, 10)]  # the large one never decoded


def test_images_over_max_image_pixels_skip_their_item_unread_when_used(tmp_path, monkeypatch):
    """Sources that decode when an item is used: screenshots, frames, conversation images, RGB-D."""
    from datamodules import Conversations, RGBDFolder
    from tasks import SkipItem
    from tests.helpers import decoded_sizes

    for i in range(2):
        Image.new("RGB", (20, 20), (0, 10 * i, 0)).save(tmp_path / f"{i}.png")
    (tmp_path / "rgbd" / "rgb").mkdir(parents=True)
    (tmp_path / "rgbd" / "depth").mkdir()
    Image.new("RGB", (20, 20)).save(tmp_path / "rgbd" / "rgb" / "a.png")
    Image.fromarray(np.full((4, 4), 1000, np.uint16)).save(tmp_path / "rgbd" / "depth" / "a.png")
    episode = {"screenshots": ["0.png", "1.png"], "actions": [{"action_type": "wait"}]}
    chat = {
        "image": "0.png",
        "conversations": [{"from": "human", "value": "<image>What?"}, {"from": "gpt", "value": "Green."}],
    }
    decoded = decoded_sizes(monkeypatch)
    pair = {"frames": ["0.png", "1.png"], "actions": ["left"]}
    limit = {"max_image_pixels": 399}
    sources = [
        GUITrajectories(write_lines(tmp_path / "gui.jsonl", [episode]), **limit),
        FramePairs(write_lines(tmp_path / "pairs.jsonl", [pair]), **limit),
        Conversations(write_lines(tmp_path / "chat.jsonl", [chat]), **limit),
        RGBDFolder(str(tmp_path / "rgbd"), **limit),
    ]
    for source in sources:
        with pytest.raises(SkipItem, match="image too large.*400 pixels") as err:
            source[0]
        assert err.value.kind == "too_large", type(source).__name__
    assert decoded == [(4, 4)]  # the depth map only: no 20 x 20 image decoded


# ---- truncated ASCII point clouds ----
def point_cloud_files(folder, points: np.ndarray) -> list:
    """The same cloud as ASCII .ply, ASCII .pcd and .pts."""
    import open3d

    cloud = open3d.geometry.PointCloud(open3d.utility.Vector3dVector(points))
    paths = [folder / f"cloud.{ext}" for ext in ("ply", "pcd", "pts")]
    for path in paths:
        open3d.io.write_point_cloud(str(path), cloud, write_ascii=True)
    return paths


def test_truncated_ascii_point_clouds_are_refused_and_skipped(tmp_path):
    pytest.importorskip("open3d", exc_type=ImportError)
    points = np.random.default_rng(0).random((40, 3))
    for path in point_cloud_files(tmp_path, points):
        check_complete(str(path))  # whole: fine
        data = path.read_bytes()
        path.write_bytes(data[: len(data) * 2 // 3])
        with pytest.raises(ValueError, match="truncated"):
            check_complete(str(path))
    source = PointCloudFolder(str(tmp_path), num_points=16)
    for i in range(len(source)):
        with pytest.raises(Exception, match="truncated"):  # SkipItem naming the file: counted, never trained on
            source[i]
