"""Measured peak memory of GRPO runs on this CPU, for `zoo plan`'s estimates to be checked
against.

Each setting runs ``zoo fit`` on the quickstart config for 2 steps in a fresh process and records
its peak RSS (``resource.getrusage``) minus that of an idle process that imported the same
libraries. The mid-width model is a Qwen2.5-VL with 1 language layer, the real vocabulary (151,936
rows) and a wide hidden size, built offline from the tiny tokenizer and vision tower
(`wide_qwen`).

    python -m tests.zoo.plan_measure [--out tests/zoo/data/plan_peaks.json] [--only NAME ...]

One setting: ``python -m tests.zoo.plan_measure --only tiny-g8``; `test_plan` reads the file.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]
OUT = ROOT / "tests/zoo/data/plan_peaks.json"
QUICKSTART = ROOT / "configs/quickstart.yaml"
IMPORTS = (
    "import zoo.cli, zoo, datamodules, tasks, callbacks, lightning.pytorch, transformers;"
    "import transformers.models.qwen2_5_vl.modeling_qwen2_5_vl"
)

#: name: (model width (None: tiny:qwen2_5_vl), overrides of the quickstart config)
SETTINGS = {
    "tiny-g8": (None, dict(num_generations=8, max_new_tokens=16, batch_size=8)),
    "tiny-g16-long": (None, dict(num_generations=16, max_new_tokens=64, batch_size=8)),
    "wide1024-g4": (1024, dict(num_generations=4, max_new_tokens=8, batch_size=2)),
    "wide1024-g8-mb4": (1024, dict(num_generations=8, max_new_tokens=16, batch_size=2, micro_batch_size=4)),
    "wide1024-sgd": (1024, dict(num_generations=8, max_new_tokens=16, batch_size=1, optimizer="torch.optim.SGD")),
    "wide1536-g4": (1536, dict(num_generations=4, max_new_tokens=16, batch_size=1)),
    "wide1536-g8-32": (1536, dict(num_generations=8, max_new_tokens=32, batch_size=1, micro_batch_size=4)),
}


def wide_config(hidden: int) -> tuple:
    """``(config, processor)`` of a Qwen2.5-VL of ``hidden`` width, 1 language layer, 151,936
    vocabulary rows (tied), the tiny vision tower and tokenizer."""
    from transformers import Qwen2_5_VLConfig

    from zoo.qwen_vl import ROPE, _qwen2_5_vl
    from zoo.tiny import text_config, token_ids

    config, processor = _qwen2_5_vl()
    text = dict(
        text_config(processor.tokenizer),
        hidden_size=hidden,
        intermediate_size=hidden * 11 // 4,
        num_hidden_layers=1,
        num_attention_heads=hidden // 128,
        num_key_value_heads=2,
        vocab_size=151936,
        rope_parameters=dict(ROPE, mrope_section=[16, 24, 24]),
        tie_word_embeddings=True,
    )
    vision = config.vision_config.to_dict() | {"out_hidden_size": hidden}
    tokens = token_ids(processor.tokenizer)
    return Qwen2_5_VLConfig(text_config=text, vision_config=vision, tie_word_embeddings=True, **tokens), processor


def wide_qwen(hidden: int, out: Path) -> Path:
    """`wide_config`'s model with random float32 weights, saved to ``out`` (once)."""
    if (out / "config.json").exists():
        return out
    import torch
    from transformers import AutoModelForMultimodalLM

    config, processor = wide_config(hidden)
    torch.manual_seed(0)
    model = AutoModelForMultimodalLM.from_config(config, dtype=torch.float32)
    model.generation_config.eos_token_id = processor.tokenizer.eos_token_id
    model.save_pretrained(out)
    processor.save_pretrained(out)
    return out


def fit_args(pretrained: str, settings: dict, root: Path) -> list[str]:
    """``zoo fit`` arguments of one setting: the quickstart with its model, batch and GRPO settings,
    2 steps, no validation, no checkpoint, no logger."""
    strategy = {k: v for k, v in settings.items() if k not in ("batch_size", "optimizer")}
    args = ["--config", str(QUICKSTART), "--model.init_args.pretrained", pretrained]
    args += ["--data.init_args.batch_size", str(settings["batch_size"])]
    if "optimizer" in settings:
        args += [
            "--model.init_args.optimizer",
            json.dumps({"class_path": settings["optimizer"], "init_args": {"lr": 1e-3}}),
        ]
    for key, value in strategy.items():
        args += [f"--trainer.strategy.init_args.{key}", str(value)]
    args += ["--trainer.max_steps", "2", "--trainer.limit_val_batches", "0", "--trainer.num_sanity_val_steps", "0"]
    args += ["--trainer.enable_checkpointing", "false", "--trainer.logger", "false"]
    return args + ["--trainer.default_root_dir", str(root)]


def peak_mib(code: str) -> float:
    """Peak RSS in MiB of a fresh single-threaded interpreter running ``code``."""
    env = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT))
    tail = "; import resource; print('PEAK', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"
    done = subprocess.run([sys.executable, "-c", code + tail], env=env, capture_output=True, text=True, cwd=ROOT)
    lines = [line for line in done.stdout.splitlines() if line.startswith("PEAK")]
    if done.returncode or not lines:
        raise RuntimeError(f"measurement failed:\n{done.stderr[-3000:]}")
    return int(lines[-1].split()[1]) / 1024  # ru_maxrss is in KiB on Linux


def measure(name: str, cache: Path) -> dict:
    """The peak above the idle baseline of one setting, with the ``zoo fit`` arguments that ran."""
    width, settings = SETTINGS[name]
    pretrained = "tiny:qwen2_5_vl" if width is None else str(wide_qwen(width, cache / f"wide{width}"))
    args = fit_args(pretrained, settings, cache / "runs")
    run = f"{IMPORTS}; from zoo.cli import main; main(['fit', *{args!r}])"
    baseline = peak_mib(IMPORTS)
    return dict(args=args, width=width, baseline_mib=baseline, peak_mib=peak_mib(run) - baseline)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(OUT))
    parser.add_argument("--only", nargs="*", default=list(SETTINGS))
    parser.add_argument("--cache", default=str(Path.home() / ".cache/zoo/plan-measure"))
    args = parser.parse_args(argv)
    out = Path(args.out)
    results = json.loads(out.read_text()) if out.exists() else {}
    for name in args.only:
        results[name] = measure(name, Path(args.cache))
        print(f"{name}: {results[name]['peak_mib']:.0f} MiB above the idle baseline", flush=True)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
