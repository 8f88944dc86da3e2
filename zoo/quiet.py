"""Quiet by default: third-party warnings and tips that are known and harmless in zoo are filtered
at the ``zoo`` command's entry, so its ``[zoo]`` lines are what a user reads. ``--verbose`` or
``ZOO_DEBUG=1`` shows them all. Anything not matched here (a real problem) still shows."""

from __future__ import annotations

import logging
import warnings

from lightning.fabric.utilities.rank_zero import LightningDeprecationWarning

#: ``(message regex, category, module regex)`` of each filtered warning, with why it is harmless.
HARMLESS = (
    # zoo's metrics are synced by torchmetrics (callbacks.GRPOMetrics), not by self.log
    (r"It is recommended to use `self\.log\(.*sync_dist=True\)`", Warning, ""),
    # zoo's policies move their own batches (media tensors Lightning does not know)
    (r"You have overridden `transfer_batch_to_device` in `LightningModule`", Warning, ""),
    # Lightning's own deprecations, and torch's pytree deprecation raised inside Lightning
    ("", LightningDeprecationWarning, ""),
    (r"`isinstance\(treespec, LeafSpec\)` is deprecated", Warning, ""),
    # announced API changes inside transformers and torch's FSDP2 (nothing a user can act on)
    ("", FutureWarning, r"transformers(\.|$)"),
    ("", FutureWarning, r"torch\.distributed(\.|$)"),
)
#: Lightning's info lines that advertise other products.
ADVERTS = ("💡 Tip:",)
#: The loggers Lightning's ``rank_zero_info`` writes to.
LIGHTNING_LOGGERS = (
    "lightning.pytorch.utilities.rank_zero",
    "lightning.fabric.utilities.rank_zero",
    "lightning_utilities.core.rank_zero",
)


class _Adverts(logging.Filter):
    """Drops Lightning's adverts while zoo is quiet."""

    quiet = False

    def filter(self, record: logging.LogRecord) -> bool:
        return not (self.quiet and str(record.msg).startswith(ADVERTS))


_ADVERTS = _Adverts()


def quiet(verbose: bool = False) -> None:
    """Filter the `HARMLESS` warnings and Lightning's adverts, unless ``verbose``."""
    _ADVERTS.quiet = not verbose
    for name in LIGHTNING_LOGGERS:
        logger = logging.getLogger(name)
        if _ADVERTS not in logger.filters:
            logger.addFilter(_ADVERTS)
    if verbose:
        return
    for message, category, module in HARMLESS:
        warnings.filterwarnings("ignore", message=message, category=category, module=module)
