"""Tiny benchmark files in the released schemas (CV-Bench parquet, MMBench TSV, MMAU JSON, RefCOCO
parquet, Charades-STA JSONL and .txt), written on the fly, each with good rows and the bad rows a
source must skip."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path

import numpy as np
from PIL import Image

COLOURS = [(200, 30, 30), (30, 200, 30), (30, 30, 200), (200, 200, 30), (30, 200, 200)]


def png(colour=(120, 60, 30), size=(40, 30)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, colour).save(buffer, format="PNG")
    return buffer.getvalue()


def write_parquet(path: Path, rows: list[dict]) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def cv_bench(folder: Path) -> Path:
    """CV-Bench layout: 5 usable rows (answers A, B, A, C, B; the image is an HF ``Image`` struct)
    and 3 bad ones: an answer that is not an option, an undecodable image, a missing question."""
    rows = []
    for i, letter in enumerate("ABACB"):
        choices = ["one", "two", "three"] if i % 2 else ["left", "right", "three"]
        rows.append(
            {
                "idx": i,
                "type": "2D",
                "task": "Count",
                "source": "COCO",
                "image": {"bytes": png(COLOURS[i]), "path": f"img/{i}.png"},
                "question": f"Question {i}?",
                "choices": choices,
                "answer": f"({letter})",
                "prompt": f"Question {i}? Select from the following choices. (A) {choices[0]} ...",
            }
        )
    bad = [
        dict(rows[0], idx=5, answer="(E)"),
        dict(rows[1], idx=6, image={"bytes": b"not a png", "path": None}),
        dict(rows[2], idx=7, question=None),
    ]
    return write_parquet(folder / "test.parquet", rows + bad)


def mmbench(folder: Path) -> Path:
    """MMBench TSV layout (base64 images, options in columns A-D, empty D for a 3-option question, a
    hint): 4 usable rows (answers B, A, C, D) and 2 bad ones (answer D where D is empty; broken
    base64)."""
    header = ["index", "question", "hint", "A", "B", "C", "D", "answer", "category", "image"]
    image = base64.b64encode(png()).decode()
    lines = [
        [0, "What colour?", "", "red", "brown", "blue", "green", "B", "attribute", image],
        [1, "How many?", "Count the squares.", "1", "2", "3", "", "A", "count", image],
        [2, "Where?", "nan", "up", "down", "left", "right", "C", "spatial", image],
        [3, "Which?", "", "w", "x", "y", "z", "D", "other", image],
        [4, "Bad answer?", "", "a", "b", "c", "", "D", "other", image],
        [5, "Bad image?", "", "a", "b", "c", "d", "A", "other", "!!notbase64!!"],
    ]
    text = "\n".join("\t".join(str(v) for v in line) for line in [header, *lines]) + "\n"
    (folder / "mmbench_dev_en.tsv").write_text(text)
    return folder / "mmbench_dev_en.tsv"


def mmau(folder: Path) -> Path:
    """MMAU test-mini layout (a JSON list, ``audio_id`` paths relative to the file): 3 usable rows
    and 3 bad ones (a path leaving the folder, an answer that is not a choice, an undecodable
    file)."""
    import soundfile

    audio = folder / "test-mini-audios"
    audio.mkdir(parents=True)
    t = np.arange(8000) / 8000
    for i in range(3):
        soundfile.write(audio / f"{i}.wav", (0.3 * np.sin(2 * np.pi * 300 * (i + 1) * t)).astype(np.float32), 8000)
    (audio / "broken.wav").write_bytes(b"RIFF\x00\x00garbage")
    rows = [
        {
            "id": f"q{i}",
            "audio_id": f"./test-mini-audios/{i}.wav",
            "question": "Which tone is it?",
            "choices": ["low", "middle", "high"],
            "answer": ["low", "middle", "high"][i],
            "task": "sound",
            "difficulty": "easy",
        }
        for i in range(3)
    ]
    rows += [
        dict(rows[0], id="escape", audio_id="../outside.wav"),
        dict(rows[1], id="bad", answer="loud"),
        dict(rows[2], id="broken", audio_id="./test-mini-audios/broken.wav"),
    ]
    (folder / "mmau-test-mini.json").write_text(json.dumps(rows))
    return folder / "mmau-test-mini.json"


def refcoco(folder: Path) -> Path:
    """RefCOCO layout (HF ``Image`` struct, a list of sentences per object, COCO ``[x, y, w, h]``
    boxes) on 100 x 80 images: 2 usable rows giving 3 expressions, and 2 bad ones (box outside the
    image, an undecodable image)."""
    image = {"bytes": png(size=(100, 80)), "path": "COCO_1.jpg"}
    rows = [
        {"question_id": 0, "image": image, "answer": ["man on the left", "left guy"], "bbox": [0, 0, 50, 80]},
        {"question_id": 1, "image": image, "answer": ["top right"], "bbox": [50.0, 0.0, 50.0, 40.0]},
        {"question_id": 2, "image": image, "answer": ["off the edge"], "bbox": [60, 10, 50, 20]},
        {
            "question_id": 3,
            "image": {"bytes": b"\x89PNG broken", "path": None},
            "answer": ["x"],
            "bbox": [0, 0, 10, 10],
        },
    ]
    return write_parquet(folder / "refcoco_val.parquet", rows)


def charades(folder: Path, video_writer) -> Path:
    """Charades-STA layout as JSONL (video id, query, start, end, duration), videos in ``videos/``
    as ``<id>.mp4`` (4 s at 10 fps, written by ``video_writer(path, seconds)``): 3 usable rows and 3
    bad ones (a missing video, an end before the start, a start after the duration)."""
    video_writer(folder / "videos" / "AO8RW.mp4", 4.0)
    rows = [
        {"video": "AO8RW", "query": "a person opens a door", "start": 0.0, "end": 2.0, "duration": 4.0},
        {"video": "AO8RW", "query": "a person sits down", "start": 1.0, "end": 3.0, "duration": 4.0},
        {"video": "AO8RW", "query": "the person leaves", "start": 2.5, "end": 4.6, "duration": 4.0},
        {"video": "MISSING", "query": "nothing", "start": 0.0, "end": 1.0, "duration": 4.0},
        {"video": "AO8RW", "query": "backwards", "start": 3.0, "end": 1.0, "duration": 4.0},
        {"video": "AO8RW", "query": "too late", "start": 5.0, "end": 6.0, "duration": 4.0},
    ]
    (folder / "charades_sta_test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder / "charades_sta_test.jsonl"
