"""The tools of multi-turn rollouts: strict call parsing, CropZoom's clamping, coordinate mapping
and pixel budget, FrameSeek's windows and bounds, and `replay` of a two-turn transcript."""

import numpy as np
import pytest
from PIL import Image

from tasks import Example, Video
from tasks.tools.base import TURN_BREAK, Call, Toolbox, ToolError, read_turn, replay, run_call, turns_of
from tasks.tools.crop_zoom import FULL_IMAGE, SHOWN_SIZE, CropZoom, fit, full_box, shown_box
from tasks.tools.frame_seek import FULL_VIDEO, FrameSeek
from tests.helpers import sample_transition

TOOLS = (CropZoom(), FrameSeek())


def image_example(full: Image.Image, shown_size: list[int]) -> Example:
    shown = full.resize(tuple(shown_size))
    messages = [{"role": "user", "content": [{"type": "image", "image": shown}, {"type": "text", "text": "?"}]}]
    return Example(messages, "A", "t", {SHOWN_SIZE: shown_size}, tool_media={FULL_IMAGE: full})


def noise(width: int, height: int) -> Image.Image:
    return Image.fromarray(np.random.default_rng(0).integers(0, 256, (height, width, 3), dtype=np.uint8))


@pytest.mark.parametrize(
    "text, args",
    [
        ("<crop>10, 20, 50, 60</crop>", (10, 20, 50, 60)),
        ("<crop> 10,20 ,50,  60 </crop>\n", (10, 20, 50, 60)),
        ("<think>the marker is low</think>\n<crop>-5, 0, 300, 9</crop>", (-5, 0, 300, 9)),  # clamped at run
    ],
)
def test_a_well_formed_crop_is_a_call(text, args):
    assert read_turn(text, TOOLS) == read_turn(text, TOOLS[:1])
    action = read_turn(text, TOOLS)
    assert action.kind == "call" and action.call == Call("crop", args)


@pytest.mark.parametrize(
    "text",
    [
        "<crop>10, 20, 50</crop>",  # three numbers
        "<crop>10, 20, 50, 60, 70</crop>",
        "<crop>10.5, 20, 50, 60</crop>",  # integers only
        "<crop>[10, 20, 50, 60]</crop>",
        "<crop>a, b, c, d</crop>",
        "<crop>50, 20, 10, 60</crop>",  # x2 <= x1
        "<crop>10, 60, 50, 60</crop>",  # y2 <= y1
        "<crop>10, 20, 50, 60</crop><crop>1, 2, 3, 4</crop>",  # two calls
        "Let me zoom. <crop>10, 20, 50, 60</crop>",  # stray text before
        "<crop>10, 20, 50, 60</crop> then B",  # stray text after
        "<crop>10, 20, 50, 60",  # unclosed
        "<crop>10, 20, 50, 60</crop><seek>1</seek>",  # two tools
        "<answer>A</answer>" + TURN_BREAK.strip(),  # writes the result marker
    ],
)
def test_a_malformed_call_is_invalid(text):
    assert read_turn(text, TOOLS).kind == "invalid"


def test_a_turn_without_a_tool_tag_is_the_answer():
    assert read_turn("<think>wide</think><answer>B</answer>", TOOLS).kind == "answer"


def test_the_box_is_clamped_to_the_shown_image():
    assert shown_box((-5, -7, 300, 40), [224, 168]) == (0, 0, 224, 40)
    assert shown_box((10, 20, 50, 60), [224, 168]) == (10, 20, 50, 60)


@pytest.mark.parametrize(
    "box, why",
    [
        ((230, 0, 300, 50), "outside"),  # right of the image
        ((-50, 10, 0, 40), "outside"),  # zero width once clamped
        ((0, 168, 10, 200), "outside"),  # below the bottom
        ((0, 0, 100, 4), "longer than wide"),  # 25 times wider than tall
    ],
)
def test_a_box_with_no_area_left_or_a_sliver_is_refused(box, why):
    with pytest.raises(ToolError, match=why):
        shown_box(box, [224, 168])


def test_shown_coordinates_map_onto_the_full_image_by_hand():
    # 4x: every coordinate times 4
    assert full_box((10, 20, 50, 60), [224, 168], (896, 672)) == (40, 80, 200, 240)
    # 3.33x: 10 -> 33.3 floored, 20 -> 66.6 ceiled (the box widens to whole pixels, never shrinks)
    assert full_box((10, 10, 20, 20), [100, 100], (333, 333)) == (33, 33, 67, 67)


def test_the_crop_is_the_full_resolution_region():
    full = noise(896, 672)
    example = image_example(full, [224, 168])
    image, text = CropZoom(max_pixels=160 * 160).run(Call("crop", (10, 20, 50, 60)), example)
    # the 160x160 region of the full image, resized to 160x160 pixels: itself
    assert image["image"].size == (160, 160)
    assert image["image"].tobytes() == full.crop((40, 80, 200, 240)).tobytes()
    assert "10, 20, 50, 60" in text["text"]


@pytest.mark.parametrize(
    "size, budget, fitted",
    [((40, 20), 800, (40, 20)), ((40, 20), 3200, (80, 40)), ((400, 100), 1600, (80, 20)), ((3, 1), 1, (1, 1))],
)
def test_the_crop_is_scaled_to_its_pixel_budget_keeping_its_aspect(size, budget, fitted):
    assert fit(noise(*size), budget).size == fitted


def test_crop_zoom_reads_a_gui_screenshot():
    screenshot = sample_transition().before.convert("RGB")
    node = next(n for n in sample_transition().nodes if n.text == "Send")
    half = [screenshot.width // 2, screenshot.height // 2]
    example = image_example(screenshot, half)
    box = tuple(v // 2 for v in node.bounds)  # the button in the half-size view (even bounds)
    assert all(v % 2 == 0 for v in node.bounds)
    area = (node.bounds[2] - node.bounds[0]) * (node.bounds[3] - node.bounds[1])
    image, _ = CropZoom(max_pixels=area).run(Call("crop", box), example)
    assert image["image"].tobytes() == screenshot.crop(node.bounds).tobytes()


def test_a_tool_bug_ends_the_row_as_a_tool_error():
    example = image_example(noise(8, 8), [4, 4])
    example.tool_media.clear()  # as read back from a file
    with pytest.raises(ToolError, match="crop failed: KeyError"):
        run_call(Call("crop", (0, 0, 2, 2)), TOOLS, example)


def test_replay_shows_the_crop_after_the_call_turn():
    full = noise(896, 672)
    example = image_example(full, [224, 168])
    turns = turns_of("<crop>10, 20, 50, 60</crop>" + TURN_BREAK + "<answer>A</answer>")
    messages = replay(example.messages, turns, (CropZoom(max_pixels=160 * 160),), example)
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant"]
    assert messages[1]["content"][0]["text"] == turns[0] and messages[3]["content"][0]["text"] == turns[1]
    assert messages[2]["content"][0]["image"].tobytes() == full.crop((40, 80, 200, 240)).tobytes()


def test_replay_stops_at_an_invalid_turn():
    example = image_example(noise(8, 8), [4, 4])
    messages = replay(example.messages, ["<crop>1, 2</crop>", "<answer>A</answer>"], TOOLS, example)
    assert [m["role"] for m in messages] == ["user", "assistant"]


@pytest.mark.parametrize("text, seconds", [("1.5", 1.5), (" 2 ", 2.0), ("0", 0.0), ("3.25", 3.25)])
def test_a_seek_is_a_time_in_seconds(text, seconds):
    assert read_turn(f"<seek>{text}</seek>", TOOLS).call == Call("seek", (seconds,))


@pytest.mark.parametrize("text", ["-1", "1.5s", "t=1", "1, 2", "", "1e3"])
def test_a_malformed_seek_is_invalid(text):
    assert read_turn(f"<seek>{text}</seek>", TOOLS).kind == "invalid"


@pytest.mark.parametrize(
    "tool, seconds, frames",
    [
        (FrameSeek(), 1.0, [2, 3, 4, 5]),  # frame 4 and two before it
        (FrameSeek(), 0.0, [0, 1, 2, 3]),  # shifted inside at the start
        (FrameSeek(), 4.0, [12, 13, 14, 15]),  # the end itself, shifted inside
        (FrameSeek(fps=2.0), 2.0, [4, 6, 8, 10]),  # every second frame
        (FrameSeek(frames=2, fps=100.0), 1.1, [3, 4]),  # capped at the video's rate; 4.4 -> frame 4, one before
        (FrameSeek(frames=20), 2.0, list(range(16))),  # as many as there are
    ],
)
def test_seek_windows_by_hand(tool, seconds, frames):
    # 16 frames at 4 fps: 4 seconds
    assert tool.window(seconds, 16, 4.0).tolist() == frames


@pytest.mark.parametrize("seconds", [4.01, 100.0])
def test_a_seek_past_the_end_is_refused(seconds):
    with pytest.raises(ToolError, match="outside the video"):
        FrameSeek().window(seconds, 16, 4.0)


def test_a_seek_returns_the_frames_as_a_video_part():
    frames = np.random.default_rng(0).integers(0, 256, (16, 6, 8, 3), dtype=np.uint8)
    example = Example([], "A", "t", tool_media={FULL_VIDEO: Video(frames, 4.0)})
    video, text = FrameSeek(fps=2.0).run(Call("seek", (2.0,)), example)
    assert video["type"] == "video" and video["fps"] == 2.0
    assert np.array_equal(video["video"], frames[[4, 6, 8, 10]])
    assert text["text"] == "Frames from 1.00 s to 2.50 s at 2 fps."
    with pytest.raises(ToolError, match="too few"):
        FrameSeek().window(0.0, 1, 4.0)


def test_tool_options_are_checked():
    for bad in (lambda: FrameSeek(frames=3), lambda: FrameSeek(fps=0.0), lambda: CropZoom(max_pixels=0)):
        with pytest.raises(ValueError):
            bad()
    with pytest.raises(ValueError, match="distinct names"):
        Toolbox((CropZoom(), CropZoom(max_pixels=4)))
