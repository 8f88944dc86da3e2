"""tasks.adapters: every task round-trips through dataset columns; TRL rows keep each image where
the task put it; verl rows carry text, media and ground truth where verl reads them. The recipes in
docs/ecosystem.md are run as they are (`recipe`)."""

import json
import random
import re
from pathlib import Path

import numpy as np
import pytest

import tasks
from tasks import CropInpaint, Rotation, Task
from tasks.adapters import (
    example_columns,
    trl_prompt,
    trl_reward,
    verl_compute_score,
    verl_fields,
    verl_prompt,
    write_verl_parquet,
)
from tests.helpers import discover, make_item

TASKS = discover(tasks, Task)
DOCS = Path(__file__).parents[2] / "docs" / "ecosystem.md"
QWEN_IMAGE = "<|vision_start|><|image_pad|><|vision_end|>"  # what Qwen2.5-VL's chat template writes per image


def recipe(name: str) -> str:
    """The code block marked ``<!-- recipe: name -->`` in docs/ecosystem.md."""
    found = re.search(rf"<!-- recipe: {name} -->\n```\w+\n(.*?)\n```", DOCS.read_text(), re.S)
    assert found, f"docs/ecosystem.md has no block marked 'recipe: {name}'"
    return found.group(1)


def pixels(image) -> np.ndarray:
    return np.asarray(image.convert("RGB"))


def media_of(example, kind="image") -> list:
    return [part[kind] for message in example.messages for part in message["content"] if part["type"] == kind]


def same_images(got, want) -> bool:
    return len(got) == len(want) and all(np.array_equal(pixels(g), pixels(w)) for g, w in zip(got, want, strict=False))


def completions_for(task, example, other):
    """A perfect completion, another example's answer, and junk."""
    return [task.render_answer(example), task.render_answer(other), "", "<answer></answer>", "A"]


@pytest.mark.parametrize("cls", TASKS, ids=lambda c: c.__name__)
def test_columns_round_trip_for_every_task(cls):
    task = cls()
    example, other = (task.make_example(make_item(cls.modality, seed), random.Random(seed)) for seed in (0, 1))
    row = json.loads(json.dumps(example_columns(example)))  # what a dataset stores
    if task.toolbox is not None:  # multi-turn transcripts only zoo's rollouts make
        refuses_tools(task)
        return
    completions = completions_for(task, example, other)
    expected = [task.verify(example, c).total for c in completions]
    n = len(completions)
    got = trl_reward(task)(prompts=["p"] * n, completions=completions, **{k: [v] * n for k, v in row.items()})
    assert got == expected and got[0] == pytest.approx(task.max_reward)
    verl = json.loads(json.dumps(verl_fields(example)))
    score = verl_compute_score(task)
    scored = [
        score(verl["data_source"], c, verl["reward_model"]["ground_truth"], verl["extra_info"]) for c in completions
    ]
    assert [s["score"] for s in scored] == expected
    assert scored[0] == {"score": task.max_reward, **task.verify(example, completions[0]).parts}


def refuses_tools(task) -> None:
    for make, trainer in ((trl_reward, "TRL's GRPOTrainer"), (verl_compute_score, "verl's single-turn")):
        with pytest.raises(ValueError, match=rf"^'{task.name}' has tools \(.*\): {trainer}.*zoo fit") as caught:
            make(task)
        assert "\n" not in str(caught.value)


def test_a_task_with_tools_is_refused_with_what_to_do_instead():
    from tests.zoo.test_turns import LookRotation

    task = LookRotation(answer_format="bare")
    refuses_tools(task)
    with pytest.raises(ValueError, match="'rotation' has tools \\(look\\)"):
        verl_compute_score(Rotation(), task)  # one tool task among others
    assert trl_reward(Rotation())([""], ["90"], ["90"], ["{}"]) is not None  # the same task without tools


def test_conversational_completions_and_rows_of_other_tasks():
    rotation = Rotation()
    example = rotation.make_example(make_item("image"), random.Random(0))
    row = example_columns(example)
    other = dict(row, zoo_task="jigsaw")
    reward = trl_reward(rotation)
    completion = [{"role": "assistant", "content": rotation.render_answer(example)}]
    parts = [{"role": "assistant", "content": [{"type": "text", "text": rotation.render_answer(example)}]}]
    got = reward(
        prompts=[[], [], []],
        completions=[completion, parts, completion],
        **{k: [row[k], row[k], other[k]] for k in row},
    )
    assert got == [1.0, 1.0, None] and reward.__name__ == "zoo_rotation"


def test_bad_columns_are_a_clear_error():
    with pytest.raises(ValueError, match="not the JSON"):
        trl_reward(Rotation())(prompts=["p"], completions=["A"], zoo_answer=["A"], zoo_meta=["{}"])


def majority_rotation() -> Rotation:
    return Rotation(labels="letters", answer_format="bare", format_weight=0.1, self_reward=tasks.MajorityVote())


def grouped_columns(examples: list, size: int) -> dict[str, list]:
    """TRL's reward columns for ``examples``, each repeated ``size`` times in a row (TRL's group
    layout)."""
    rows = [example_columns(example) for example in examples for _ in range(size)]
    return {
        "prompts": [example.prompt_text for example in examples for _ in range(size)],
        **{key: [row[key] for row in rows] for key in rows[0]},
    }


def test_trl_self_reward_scores_each_run_of_generations_as_one_group():
    task = majority_rotation()
    examples = [task.make_example(make_item("image", seed), random.Random(seed)) for seed in (0, 1, 2)]
    columns = grouped_columns(examples, 4)
    columns["zoo_task"][8:] = ["jigsaw"] * 4  # a third prompt of another task
    completions = ["A", "A", "B", "zzz", "C", "D", "", "", "A", "A", "A", "A"]
    got = trl_reward(task, num_generations=4)(completions=completions, **columns)
    # group 1: "A" wins 2 of 3 votes; group 2: C and D tie, so it abstains (format reward only)
    assert got[:8] == pytest.approx([1.1, 1.1, 0.1, 0.0, 0.1, 0.1, 0.0, 0.0]) and got[8:] == [None] * 4
    two = [[r.total for r in group] for group in task.verify_group(examples[:2], [completions[:4], completions[4:8]])]
    assert got[:8] == two[0] + two[1]


def test_trl_self_reward_refuses_what_it_cannot_group():
    task = majority_rotation()
    examples = [task.make_example(make_item("image", seed), random.Random(seed)) for seed in (0, 1)]
    reward = trl_reward(task, num_generations=4)
    with pytest.raises(ValueError, match="do not split into groups of num_generations=4"):
        reward(completions=["A"] * 6, **{k: v[:6] for k, v in grouped_columns(examples, 3).items()})
    with pytest.raises(ValueError, match="rows 0-3 are not one prompt's 4 generations"):
        reward(completions=["A"] * 8, **grouped_columns(examples * 2, 2))
    with pytest.raises(ValueError, match="needs TRL's num_generations"):
        trl_reward(task)
    coreward = Rotation(self_reward=tasks.CoReward())
    with pytest.raises(ValueError, match="CoReward pairs each question with a rewrite"):
        trl_reward(coreward, num_generations=4)
    with pytest.raises(ValueError, match=r"self_reward of \['rotation'\] cannot compare"):
        verl_compute_score(task)


def test_trl_prompt_keeps_each_image_between_its_texts():
    example = CropInpaint().make_example(make_item("image"), random.Random(0))
    (message,), images = trl_prompt(example)
    assert [p["type"] for p in message["content"]] == [p["type"] for p in example.messages[0]["content"]]
    text = "".join(p["text"] if p["type"] == "text" else "<image>" for p in message["content"])
    assert text == example.prompt_text and text.count("<image>") == 5 and same_images(images, media_of(example))
    assert all(set(p) == {"type"} for p in message["content"] if p["type"] == "image")  # TRL fills placeholders
    video = tasks.TemporalJigsaw().make_example(make_item("video"), random.Random(0))
    with pytest.raises(ValueError, match="'video' part, which a TRL dataset row cannot carry"):
        trl_prompt(video)


def letters_only_grpo(model: str, out):
    """A two-step CPU `GRPOConfig` (8 rows: 2 prompts x 4 completions) whose one new token is a
    letter A-D, so some rewards are 1 and some 0."""
    from transformers import AutoConfig, AutoTokenizer
    from trl import GRPOConfig

    vocab = AutoConfig.from_pretrained(model).get_text_config().vocab_size
    letters = AutoTokenizer.from_pretrained(model).convert_tokens_to_ids(list("ABCD"))
    return GRPOConfig(
        output_dir=str(out),
        max_steps=2,
        per_device_train_batch_size=8,
        num_generations=4,
        max_completion_length=1,
        generation_kwargs={"suppress_tokens": sorted(set(range(vocab)) - set(letters))},
        learning_rate=1e-3,
        logging_steps=1,
        report_to="none",
        use_cpu=True,
        bf16=False,
        save_strategy="no",
        seed=0,
        dataloader_num_workers=0,
    )


def test_the_trl_recipe_shows_the_processor_each_image_where_the_task_put_it(tmp_path, monkeypatch):
    """docs/ecosystem.md's TRL block, run as it is: two GRPOTrainer steps of a tiny Qwen2.5-VL on
    CropInpaint (5 images a prompt). Every text the processor gets has each image right after its
    label, with the images of one example in order; the rewards TRL logs are ``task.verify``. One
    letter A-D a completion, so some rewards are 1 and some 0."""
    from transformers import AutoProcessor

    from tasks.adapters import completion_text
    from zoo import tiny

    model = tiny.resolve("tiny:qwen2_5_vl")
    processor = AutoProcessor.from_pretrained(model)
    seen = []  # (texts, images per text) of every processor call with images: generation and forward passes
    call = type(processor).__call__

    def spy(self, *args, **kwargs):
        if kwargs.get("images"):
            seen.append((kwargs["text"], kwargs["images"]))
        return call(self, *args, **kwargs)

    monkeypatch.setattr(type(processor), "__call__", spy)
    args = letters_only_grpo(model, tmp_path)
    images = [make_item("image", i) for i in range(4)]
    scope = {"model": model, "images": images, "args": args}
    exec(recipe("trl"), scope)
    task, trainer = scope["task"], scope["trainer"]
    examples = [task.make_example(image, random.Random(i)) for i, image in enumerate(images)]

    def example_showing(shown):
        (example,) = [e for e in examples if same_images(shown, media_of(e))]
        return example

    texts = [
        (text, shown)
        for batch_texts, batch_images in seen
        for text, shown in zip(batch_texts, batch_images, strict=True)
    ]
    assert len(texts) == 2 * 2 * 8  # 2 steps x (generation + forward) x 8 rows (2 prompts x 4 completions)
    for text, shown in texts:
        assert example_showing(shown).prompt_text.replace("<image>", QWEN_IMAGE) in text
    logged = trainer._logs
    rewards = list(logged["rewards"][f"zoo_{task.name}"])
    expected = [
        task.verify(example_showing(shown), completion_text(c)).total
        for shown, c in zip(logged["images"], logged["completion"], strict=True)
    ]
    assert rewards == expected and 0 < sum(rewards) < len(rewards), (list(logged["completion"]), rewards)
    assert trainer.state.global_step == 2


def test_trl_trains_with_a_majority_vote_self_reward(tmp_path):
    """Two GRPOTrainer steps of a tiny Qwen2.5-VL on a majority-vote rotation (one letter A-D):
    every reward TRL logs is the self-reward of its prompt's group of 4 (`Task.verify_group`), not
    the labelled reward."""
    from datasets import Dataset
    from trl import GRPOTrainer

    from tasks.adapters import completion_text, trl_row
    from zoo import tiny

    model = tiny.resolve("tiny:qwen2_5_vl")
    args = letters_only_grpo(model, tmp_path)
    task = majority_rotation()
    examples = [task.make_example(make_item("image", i), random.Random(i)) for i in range(4)]
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=trl_reward(task, num_generations=4),
        args=args,
        train_dataset=Dataset.from_list([trl_row(example) for example in examples]),
    )
    trainer.train()
    logged = trainer._logs
    texts = [completion_text(c) for c in logged["completion"]]
    shown = [next(e for e in examples if same_images(images, media_of(e))) for images in logged["images"]]
    expected = []
    for start in range(0, len(texts), 4):
        assert all(example is shown[start] for example in shown[start : start + 4])
        (group,) = task.verify_group([shown[start]], [texts[start : start + 4]])
        expected += [reward.total for reward in group]
    labelled = [task.verify(example, text).total for example, text in zip(shown, texts, strict=True)]
    assert list(logged["rewards"][f"zoo_{task.name}"]) == pytest.approx(expected) and len(expected) >= 8
    assert expected != labelled, (texts, expected)  # the run shows a self-reward, not the labels


def decode_uri(uri: str):
    import base64
    import io

    from PIL import Image

    return Image.open(io.BytesIO(base64.b64decode(uri.split("base64,", 1)[1])))


def test_the_verl_recipe_rows_hold_what_verl_reads(tmp_path, monkeypatch):
    """docs/ecosystem.md's verl data and reward blocks, run as they are; the parquet read back as
    verl's RLHFDataset reads it (``datasets.load_dataset("parquet")``), against verl's row format:
    chat ``prompt`` with ``<image>`` markers in order, ``images`` as ``{"bytes"}``, ``data_source``,
    ``reward_model``, ``extra_info``."""
    import io

    from datasets import load_dataset
    from PIL import Image

    monkeypatch.chdir(tmp_path)
    images = [make_item("image", i) for i in range(3)]
    data, reward = {"images": images}, {}
    exec(recipe("verl-data"), data)
    exec(recipe("verl-reward"), reward)
    task, compute_score = data["task"], reward["compute_score"]
    examples = [task.make_example(image, random.Random(i)) for i, image in enumerate(images)]
    rows = load_dataset("parquet", data_files=str(tmp_path / "train.parquet"))["train"]
    assert set(rows.column_names) == {"prompt", "images", "data_source", "reward_model", "extra_info"}
    for index, (row, example) in enumerate(zip(rows, examples, strict=True)):
        assert row["prompt"] == [{"role": "user", "content": example.prompt_text}]  # "Option A:<image>..."
        assert same_images([Image.open(io.BytesIO(image["bytes"])) for image in row["images"]], media_of(example))
        assert row["data_source"] == task.name and row["extra_info"] == {**example_columns(example), "index": index}
        assert row["reward_model"] == {"style": "rule", "ground_truth": json.dumps(example.answer)}
        for completion in (task.render_answer(example), "Z", ""):
            got = compute_score(row["data_source"], completion, row["reward_model"]["ground_truth"], row["extra_info"])
            want = task.verify(example, completion)
            assert got == {"score": want.total, **want.parts}
        assert (
            compute_score(
                row["data_source"], task.render_answer(example), row["reward_model"]["ground_truth"], row["extra_info"]
            )["score"]
            == task.max_reward
        )


def test_verl_videos_are_frame_lists_and_audio_is_refused(tmp_path):
    import pyarrow.parquet as pq

    video = tasks.TemporalJigsaw().make_example(make_item("video"), random.Random(0))
    (row,) = pq.read_table(write_verl_parquet([video], tmp_path / "v.parquet")).to_pylist()
    assert row["prompt"][0]["content"] == video.prompt_text and "images" not in row
    parts = [p for p in video.messages[0]["content"] if p["type"] == "video"]
    assert len(row["videos"]) == len(parts) == 3
    for got, part in zip(row["videos"], parts, strict=True):
        assert got["sample_fps"] == part["fps"]
        np.testing.assert_array_equal(np.stack([pixels(decode_uri(f)) for f in got["video"]]), part["video"])
    audio = tasks.AudioJigsaw().make_example(make_item("audio"), random.Random(0))
    with pytest.raises(ValueError, match="'audio' part, which a verl dataset row cannot carry"):
        verl_prompt(audio)
    marker = tasks.Example(messages=[{"role": "user", "content": "see <image> here"}], answer="A", task="t")
    with pytest.raises(ValueError, match="verl would replace by media"):
        verl_prompt(marker)
    with pytest.raises(ValueError, match="no examples"):
        write_verl_parquet([], tmp_path / "empty.parquet")


def test_verl_compute_score_picks_the_task_by_data_source():
    rotation, crop = Rotation(), CropInpaint()
    score = verl_compute_score(rotation, crop)
    for task in (rotation, crop):
        example = task.make_example(make_item("image"), random.Random(0))
        fields = verl_fields(example)
        got = score(
            fields["data_source"],
            task.render_answer(example),
            fields["reward_model"]["ground_truth"],
            fields["extra_info"],
        )
        assert got["score"] == task.max_reward
    with pytest.raises(ValueError, match="no task named 'jigsaw'"):
        score("jigsaw", "1,2", "[1, 2]", {})
    with pytest.raises(ValueError, match="at least one task"):
        verl_compute_score()


def test_verl_reads_the_recipe_through_its_own_dataset_and_reward_manager(tmp_path, monkeypatch):
    """Where verl (0.9.1) is importable: every key of the documented command is in verl's trainer
    config; verl's RLHFDataset with a tiny Qwen2.5-VL processor gives back the task's text and
    images in order; verl's naive reward manager, loading zoo_reward.py from the command's keys,
    scores a perfect answer at the top."""
    pytest.importorskip("verl", reason="verl is not a zoo dependency (see docs/ecosystem.md, verl)")
    import torch
    import verl
    from omegaconf import OmegaConf
    from transformers import AutoProcessor
    from verl import DataProto
    from verl.experimental.reward_loop.reward_manager import get_reward_manager_cls
    from verl.trainer.ppo.reward import get_custom_reward_fn
    from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn

    from zoo import tiny

    monkeypatch.chdir(tmp_path)
    images = [make_item("image", i) for i in range(2)]
    data = {"images": images}
    exec(recipe("verl-data"), data)
    Path("zoo_reward.py").write_text(recipe("verl-reward") + "\n")
    command = recipe("verl-command").replace("\\\n", " ").split()
    assert command[:3] == ["python", "-m", "verl.trainer.main_ppo"]
    config = OmegaConf.load(Path(verl.__file__).parent / "trainer" / "config" / "_generated_ppo_trainer.yaml")
    missing = object()
    assert [o for o in command[3:] if OmegaConf.select(config, o.split("=")[0], default=missing) is missing] == []
    config = OmegaConf.merge(config, OmegaConf.from_dotlist(command[3:]))
    processor = AutoProcessor.from_pretrained(tiny.resolve("tiny:qwen2_5_vl"))
    dataset = RLHFDataset(config.data.train_files, processor.tokenizer, config.data, processor)
    task = data["task"]
    examples = [task.make_example(image, random.Random(i)) for i, image in enumerate(images)]
    assert len(dataset) == len(examples)
    for i, example in enumerate(examples):
        (message,) = dataset[i]["raw_prompt"]
        assert (
            "".join(p["text"] if p["type"] == "text" else f"<{p['type']}>" for p in message["content"])
            == example.prompt_text
        )
        assert same_images([p["image"] for p in message["content"] if p["type"] == "image"], media_of(example))
    manager = get_reward_manager_cls(config.reward.reward_manager.name)(
        config, processor.tokenizer, get_custom_reward_fn(config)
    )
    for completion, want in ((task.render_answer(examples[0]), task.max_reward), ("Z", 0.0)):
        batch = collate_fn([dataset[0]])
        batch["responses"] = processor.tokenizer(completion, return_tensors="pt")["input_ids"]  # [1, L]
        batch["attention_mask"] = torch.ones_like(batch["responses"])
        result = manager.loop.run_until_complete(manager.run_single(DataProto.from_single_dict(batch)))
        assert result["reward_score"] == want and result["reward_extra_info"]["accuracy"] == want
