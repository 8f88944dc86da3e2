"""Runs ``zoo fit --config DIR/<name>/config.yaml`` for every ``<name>`` under DIR, in that folder,
one after the other in this process; a run that fails writes its traceback to
``DIR/<name>/error.txt`` and the next one still runs. Used by `tests/test_paper_configs.py`:
``python -m tests.paper_configs DIR``."""

from __future__ import annotations

import os
import sys
import time
import traceback
from pathlib import Path

from zoo.cli import cli


def main(root: Path) -> None:
    for folder in sorted(p for p in root.iterdir() if (p / "config.yaml").exists()):
        os.chdir(folder)
        start, cpu = time.perf_counter(), time.process_time()
        try:
            cli(["fit", "--config", "config.yaml"])
        except BaseException:  # noqa: BLE001  (a parse error exits; record it and go on)
            (folder / "error.txt").write_text(traceback.format_exc())
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
        print(f"[paper_configs] {folder.name}: {wall:.1f} s, {cpu:.1f} s CPU", flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]).resolve())
