"""GRPO on audio: tiny Qwen2-Audio on the audio pretext tasks, tiny Qwen2.5-Omni with audio and an
image in one prompt, and an audio folder with a corrupt file."""

import random
from functools import partial

import pytest
import torch

from datamodules import AudioFolder, PretextDataModule, SyntheticAudio
from tasks import AudioAnomalyGrounding, AudioJigsaw, AudioSpeed
from tests.helpers import LoudOrQuiet, grpo_fit
from zoo import QwenAudioPolicy, QwenOmniPolicy

AUDIO_TASKS = [
    AudioJigsaw(segments=2, answer_format="bare"),
    AudioAnomalyGrounding(min_seconds=0.2, max_seconds=0.4),
    AudioSpeed(speeds=[0.5, 2.0], reverse=False, answer_format="bare"),
]


def fit(policy, data: PretextDataModule, steps: int = 2):
    return grpo_fit(policy, data, steps, entropy_coef=0.01)


def test_grpo_steps_on_every_audio_task_with_qwen2_audio():
    source = SyntheticAudio(size=20, seconds=1.0)
    data = PretextDataModule(source, AUDIO_TASKS, batch_size=3, val_size=3, epoch_size=6)
    policy = QwenAudioPolicy("tiny:qwen2_audio", optimizer=partial(torch.optim.AdamW, lr=1e-3))
    trainer = fit(policy, data)
    logged = trainer.callback_metrics
    assert trainer.global_step == 2 and torch.isfinite(logged["train/grpo/loss"])
    assert {f"val/{task.name}/accuracy" for task in AUDIO_TASKS} & set(logged)


def test_grpo_steps_with_audio_and_an_image_in_one_prompt_on_qwen2_5_omni():
    data = PretextDataModule(
        SyntheticAudio(size=20, seconds=1.0), LoudOrQuiet(answer_format="bare"), batch_size=2, val_size=2, epoch_size=4
    )
    policy = QwenOmniPolicy("tiny:qwen2_5_omni", optimizer=partial(torch.optim.AdamW, lr=1e-3))
    trainer = fit(policy, data)
    assert trainer.global_step == 2 and torch.isfinite(trainer.callback_metrics["train/grpo/loss"])
    assert "train/reward/loud_or_quiet/accuracy" in trainer.callback_metrics
    example = LoudOrQuiet().make_example(SyntheticAudio(size=1)[0], random.Random(0))
    batch = policy.encode([example])  # one prompt holding both media
    assert batch.items == {"image": [1], "video": [0], "audio": [1]}
    assert {"input_features", "pixel_values"} <= set(batch.tensors)


def test_a_corrupt_audio_file_is_skipped_and_training_completes(tmp_path, caplog):
    sf = pytest.importorskip("soundfile")
    for i in range(4):
        sf.write(tmp_path / f"ok{i}.wav", SyntheticAudio(size=4, seconds=1.0)[i].waveform, 16000)
    (tmp_path / "broken.flac").write_bytes(b"fLaC" + bytes(200))
    data = PretextDataModule(AudioFolder(str(tmp_path)), AUDIO_TASKS[2], batch_size=2, val_size=0, epoch_size=10)
    with caplog.at_level("WARNING"):
        trainer = fit(QwenAudioPolicy("tiny:qwen2_audio"), data, steps=3)
    assert trainer.global_step == 3 and data.skipped >= 1
    assert "broken.flac" in caplog.text


def test_omni_times_each_video_at_its_own_frame_rate():
    from tests.zoo.test_policy_contract import video_examples

    policy = QwenOmniPolicy("tiny:qwen2_5_omni")
    policy.configure_model()
    batch = policy.encode(video_examples())  # 4 fps and 1 fps clips; 2 frames per temporal grid step
    torch.testing.assert_close(batch.tensors["video_second_per_grid"], torch.tensor([0.5, 2.0]))


@pytest.mark.parametrize(
    "cls, checkpoint", [(QwenAudioPolicy, "tiny:qwen2_audio"), (QwenOmniPolicy, "tiny:qwen2_5_omni")]
)
def test_audio_placeholders_can_never_be_sampled(cls, checkpoint):
    policy = cls(checkpoint)
    policy.configure_model()
    ids = policy.tokenizer.convert_tokens_to_ids(["<|AUDIO|>", "<|audio_bos|>", "<|audio_eos|>"])
    assert set(ids) <= set(policy.banned_ids) and policy.tokenizer.unk_token_id not in ids
