"""Quiet by default (`zoo.quiet`): the known harmless third-party warnings and Lightning's advert
are gone from a ``zoo`` command's output, back with ``--verbose`` or ``ZOO_DEBUG=1``; any other
warning still shows."""

import logging
import warnings

import pytest
from lightning.fabric.utilities.rank_zero import LightningDeprecationWarning
from lightning.pytorch.utilities.rank_zero import rank_zero_info

import zoo.cli
from zoo.cli import main

SYNC = "It is recommended to use `self.log('val/accuracy', ..., sync_dist=True)` when logging on epoch level"
REAL = "the reward of task rotation is always 0: check its answer format"
TIP = "💡 Tip: For seamless cloud logging, try installing [litlogger]"


def _emit(argv, args):
    """A command that warns as Lightning, transformers and a real problem do."""
    warnings.warn(SYNC, UserWarning, stacklevel=1)
    warnings.warn("`Trainer.foo` is deprecated", LightningDeprecationWarning, stacklevel=1)
    warnings.warn_explicit("`x` is deprecated", FutureWarning, "modeling_utils.py", 1, module="transformers.x")
    warnings.warn(REAL, UserWarning, stacklevel=1)
    rank_zero_info(TIP)


@pytest.fixture
def shown(monkeypatch, caplog):
    """The warning messages and log lines of ``zoo list`` (its body replaced by `_emit`)."""
    monkeypatch.setattr(zoo.cli, "_dispatch", _emit)
    monkeypatch.delenv("ZOO_DEBUG", raising=False)
    monkeypatch.delenv("ZOO_VERBOSE", raising=False)

    def run(argv):
        caplog.clear()
        with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.INFO):
            warnings.simplefilter("always")
            main(argv)
        return [str(w.message) for w in caught], caplog.text

    return run


def test_harmless_warnings_are_filtered_and_real_ones_shown(shown):
    messages, log = shown(["list"])
    assert messages == [REAL]
    assert "litlogger" not in log


@pytest.mark.parametrize("how", ["--verbose", "ZOO_DEBUG", "ZOO_VERBOSE"])
def test_verbose_or_debug_shows_them_all(shown, monkeypatch, how):
    if how.startswith("ZOO_"):
        monkeypatch.setenv(how, "1")
    messages, log = shown(["list", "--verbose"] if how == "--verbose" else ["list"])
    assert len(messages) == 4 and SYNC in messages and REAL in messages
    assert "litlogger" in log
