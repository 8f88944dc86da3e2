"""Audio sources: real wav/flac/ogg decoding, the band-limited resampler, skips, AudioQAJsonl,
SyntheticAudio."""

import json
import logging
import random

import numpy as np
import pytest

from datamodules import AudioFolder, AudioQAJsonl, PretextDataModule, SyntheticAudio
from tasks import AudioMCQ, AudioSpeed, SkipItem
from tasks.audio.common import resample

sf = pytest.importorskip("soundfile")


def sine(freq, seconds, rate, channels=1):
    t = np.arange(int(seconds * rate)) / rate
    wave = 0.5 * np.sin(2 * np.pi * freq * t)
    return np.stack([wave] * channels, axis=1) if channels > 1 else wave


def peak_hz(wave, rate):
    """Frequency of the largest FFT bin, edges excluded (Hann window)."""
    body = wave[len(wave) // 10 : -len(wave) // 10]
    spectrum = np.abs(np.fft.rfft(body * np.hanning(len(body))))
    return np.fft.rfftfreq(len(body), 1 / rate)[spectrum.argmax()]


@pytest.mark.parametrize("freq", [440.0, 3000.0, 7000.0])
def test_resampler_keeps_a_sine_at_its_frequency(freq):
    out = resample(sine(freq, 1.0, 44100), 44100, 16000)
    assert len(out) == 16000 and out.dtype == np.float32
    assert abs(peak_hz(out, 16000) - freq) <= 2.0
    if freq < 7000:  # in the pass band: the amplitude is kept
        assert np.sqrt(np.mean(out[2000:-2000] ** 2)) == pytest.approx(0.5 / np.sqrt(2), rel=0.01)


@pytest.mark.parametrize("freq", [9000.0, 12000.0, 20000.0])
def test_resampler_removes_what_would_alias(freq):
    # above the new Nyquist (8 kHz): np.interp would fold these back into the band at full strength
    out = resample(sine(freq, 1.0, 44100), 44100, 16000)
    assert np.sqrt(np.mean(out[2000:-2000] ** 2)) < 1e-3  # < -50 dB below the input's 0.35 RMS


def test_resampler_upsamples_and_keeps_a_constant():
    out = resample(np.ones(800, np.float32), 8000, 16000)
    assert len(out) == 1600 and np.allclose(out[200:-200], 1.0, atol=1e-3)
    assert abs(peak_hz(resample(sine(1000, 1.0, 8000), 8000, 22050), 22050) - 1000) <= 2.0


def test_decodes_wav_flac_ogg_to_mono_at_the_target_rate(tmp_path):
    sf.write(tmp_path / "a.wav", sine(440, 1.0, 44100, channels=2), 44100)
    sf.write(tmp_path / "b.flac", sine(1000, 0.5, 16000), 16000)
    (tmp_path / "sub").mkdir()
    sf.write(tmp_path / "sub" / "c.ogg", sine(500, 1.0, 22050), 22050)
    (tmp_path / "notes.txt").write_text("x")
    source = AudioFolder(str(tmp_path), clip_seconds=None)
    assert [p.rsplit("/", 1)[1] for p in source.paths] == ["a.wav", "b.flac", "c.ogg"]
    for index, (freq, seconds) in enumerate([(440, 1.0), (1000, 0.5), (500, 1.0)]):
        item = source[index]
        assert item.sampling_rate == 16000 and item.waveform.ndim == 1 and item.waveform.dtype == np.float32
        assert len(item.waveform) == pytest.approx(seconds * 16000, abs=2)
        assert abs(peak_hz(item.waveform, 16000) - freq) <= 3.0


def test_stereo_is_mixed_down_and_long_files_cropped_in_the_middle(tmp_path):
    rate = 16000
    left, right = np.linspace(0, 0.8, 4 * rate), np.zeros(4 * rate)
    sf.write(tmp_path / "ramp.wav", np.stack([left, right], 1), rate, subtype="FLOAT")
    item = AudioFolder(str(tmp_path), clip_seconds=1.0)[0]
    assert len(item.waveform) == rate
    middle = left[int(1.5 * rate) : int(2.5 * rate)] / 2
    np.testing.assert_allclose(item.waveform, middle, atol=1e-4)


def test_corrupt_empty_and_mislabelled_files_are_skipped_and_counted(tmp_path, caplog):
    for i in range(6):
        sf.write(tmp_path / f"ok{i}.wav", sine(300 + 100 * i, 1.0, 16000), 16000)
    (tmp_path / "garbage.wav").write_bytes(b"RIFF not really a wave file" * 20)
    (tmp_path / "empty.flac").write_bytes(b"")
    (tmp_path / "photo.ogg").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(300))
    source = AudioFolder(str(tmp_path))
    bad = [i for i, p in enumerate(source.paths) if not p.rsplit("/", 1)[1].startswith("ok")]
    for index in bad:
        with pytest.raises(SkipItem, match=source.describe(index)):
            source[index]
    dm = PretextDataModule(source, AudioSpeed(answer_format="bare"), batch_size=3, val_size=0, epoch_size=9)
    with caplog.at_level(logging.WARNING, logger="datamodules"):
        batches = [list(dm.train_dataloader()) for _ in range(2)]
    assert all(len(b) == 3 for epoch in batches for b in epoch)
    assert dm.skipped >= 3
    for name in ("garbage.wav", "empty.flac", "photo.ogg"):
        assert sum(name in r.getMessage() for r in caplog.records) == 1


def write_jsonl(path, rows):
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows))


def test_audio_qa_jsonl_reads_the_mmau_layout_and_skips_bad_rows(tmp_path, caplog):
    (tmp_path / "clips").mkdir()
    sf.write(tmp_path / "clips" / "dog.wav", sine(600, 1.0, 22050), 22050)
    outside = tmp_path.parent / f"{tmp_path.name}-outside.wav"
    sf.write(outside, sine(600, 1.0, 16000), 16000)
    good = {"audio_id": "clips/dog.wav", "question": "What animal?", "choices": ["dog", "cat"], "answer": "dog"}
    rows = [
        good,
        dict(good, answer=1),
        "{not json",
        dict(good, choices="dog"),
        dict(good, answer="cow"),
        dict(good, audio_id="clips/missing.wav"),
        {"question": "q", "choices": ["a", "b"], "answer": "a"},
        dict(good, audio_id="../" + outside.name),
        dict(good, audio_id=str(outside)),
    ]
    write_jsonl(tmp_path / "data.jsonl", rows)
    with caplog.at_level(logging.WARNING):
        source = AudioQAJsonl(str(tmp_path / "data.jsonl"))
    assert len(source) == 2 and source.skipped_rows == 7
    assert "skipped 7 of 9 rows" in caplog.text
    first, second = source[0], source[1]
    assert first.answer == "dog" and second.answer == "cat" and first.choices == ["dog", "cat"]
    assert first.audio.sampling_rate == 16000 and len(first.audio.waveform) == pytest.approx(16000, abs=2)
    example = AudioMCQ(labels="text", shuffle_choices=False).make_example(first, random.Random(0))
    assert "['dog', 'cat']" in example.messages[0]["content"][-1]["text"]


def test_audio_qa_jsonl_refuses_every_escape(tmp_path):
    sf.write(tmp_path / "x.wav", sine(600, 0.5, 16000), 16000)
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "link.wav").symlink_to(tmp_path / "x.wav")  # a link out of the root is an escape too
    row = {"question": "q", "choices": ["a", "b"], "answer": "a"}
    write_jsonl(
        tmp_path / "root" / "d.jsonl", [dict(row, audio=p) for p in ("../x.wav", "link.wav", str(tmp_path / "x.wav"))]
    )
    with pytest.raises(ValueError, match="no usable rows"):
        AudioQAJsonl(str(tmp_path / "root" / "d.jsonl"))


def test_synthetic_audio_is_deterministic_and_varied():
    source = SyntheticAudio(size=30, seconds=1.0, seed=3)
    again = SyntheticAudio(size=30, seconds=1.0, seed=3)
    for i in (0, 7):
        np.testing.assert_array_equal(source[i].waveform, again[i].waveform)
    items = [source[i].waveform for i in range(30)]
    assert all(len(w) == 16000 and w.dtype == np.float32 and 0.3 < np.abs(w).max() <= 1.0 for w in items)
    assert len({round(float(np.abs(np.fft.rfft(w)).argmax()), -1) for w in items}) > 10  # many spectra
    other = SyntheticAudio(size=30, seconds=1.0, seed=4)[0].waveform
    assert not np.array_equal(other, items[0])
    for kind in ("tones", "chirp", "noise_bursts", "rhythm", "vowel"):
        wave = SyntheticAudio(size=2, seconds=1.0, kinds=[kind])[1].waveform
        halves = np.abs(np.fft.rfft(wave[:8000])), np.abs(np.fft.rfft(wave[8000:]))
        assert not np.allclose(*halves, rtol=0.05), kind  # the sound changes over time
