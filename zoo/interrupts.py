"""How a signal stops a ``zoo`` command: the first Ctrl+C during a Lightning run stops after the
step in progress (saved), and the command exits with the status of `zoo.errors.STOPPED`."""

from __future__ import annotations

import signal
import sys
import threading

from lightning.pytorch.utilities import rank_zero_info

from zoo.errors import STOPPED


def stopped(prefix: str, received: signal.Signals, fit: bool) -> None:
    """The line and exit status of a command a signal stopped."""
    resume = "; --ckpt_path last resumes from the newest checkpoint" if fit else ""
    print(f"{prefix}: stopped by {received.name} (exit status {STOPPED[received]}){resume}", file=sys.stderr)
    raise SystemExit(STOPPED[received]) from None


class Interrupts:
    """While a command runs: the first Ctrl+C (SIGINT) during a Lightning run is handled as the
    SIGTERM that Lightning stops at the end of the step for (the step is saved); a second one, or
    one outside a run, interrupts at once (KeyboardInterrupt). ``received`` is the first of them."""

    def __init__(self):
        self.received: signal.Signals | None = None
        self._previous = None

    def __enter__(self) -> Interrupts:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._on_sigint)
        return self

    def __exit__(self, *exc) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)

    def _on_sigint(self, signum, frame) -> None:
        first = self.received is None
        self.received = self.received or signal.SIGINT
        during_a_run = signal.getsignal(signal.SIGTERM)  # Lightning's handler while it runs
        if not (first and callable(during_a_run)):
            raise KeyboardInterrupt
        rank_zero_info("[zoo] Ctrl+C: stopping after this step, which is saved (Ctrl+C again stops at once)")
        during_a_run(signal.SIGTERM, frame)


def sigterm_without_collectives(trainer) -> None:
    """Make ``trainer``'s SIGTERM handler only note the signal (and pass it to the processes its
    launcher started), as Lightning's did before 2.6: 2.6's handler also broadcasts from rank 0 from
    inside the handler, a collective that can pair with whatever collective the other ranks are in
    at that moment and hang them all. Lightning's broadcast of rank 0's flag at the start of every
    training step, where all ranks are, already stops them together."""
    connector = trainer._signal_connector

    def note(signum, frame) -> None:
        launcher = trainer.strategy.launcher
        if not connector.received_sigterm and launcher is not None:
            launcher.kill(signum)
        connector.received_sigterm = True

    connector._sigterm_notifier_fn = note  # looked up when fit registers its handlers
