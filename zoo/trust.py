"""Checkpoints are data, never code: the policy classes a checkpoint may name (zoo's own, plus those
the user's config or command line names) and the hyperparameters of a checkpoint that may reach a
policy (plain data; never ``trust_remote_code``, which only the user's own config or command line
can turn on)."""

from __future__ import annotations

import importlib
import inspect
import logging
from collections.abc import Iterable

import zoo
from zoo.policy import PolicyModule

log = logging.getLogger(__name__)

#: Hyperparameters a checkpoint never sets: remote code is the user's opt-in; LightningCLI's
#: instantiator and the optimizer / scheduler factories are import paths, so they come from the
#: user's config.
NOT_FROM_CHECKPOINTS = ("trust_remote_code", "_instantiator", "optimizer", "scheduler")


def zoo_policies() -> dict[str, type[PolicyModule]]:
    """zoo's own policy classes under every import path that names them (``zoo.QwenVLPolicy`` and
    ``zoo.qwen_vl.QwenVLPolicy``)."""
    found = {}
    stack = [PolicyModule]
    while stack:
        for sub in stack.pop().__subclasses__():
            stack.append(sub)
            if sub.__module__.split(".")[0] == "zoo" and not inspect.isabstract(sub):
                found[f"{sub.__module__}.{sub.__qualname__}"] = sub
    aliases = {f"zoo.{name}": value for name, value in vars(zoo).items() if value in found.values()}
    return found | aliases


def policy_class(class_path: str, allowed: Iterable[str] = ()) -> type[PolicyModule]:
    """The `PolicyModule` subclass a checkpoint names, without importing anything the user did not
    choose.

    Args:
        class_path: The import path the checkpoint holds.
        allowed: Import paths the user's own config or command line names: their modules may be
            imported.

    Raises:
        ValueError: ``class_path`` is neither one of zoo's policies nor in ``allowed``, or is no
            policy class.
    """
    known = zoo_policies()
    if not isinstance(class_path, str) or (class_path not in known and class_path not in set(allowed)):
        raise ValueError(
            f"the checkpoint names {class_path!r}, which is not one of zoo's policies ("
            f"{', '.join(sorted(k for k in known if k.count('.') == 1))}) nor the class your config "
            "names; a checkpoint is data, so zoo does not import what it names (name your own "
            "policy class in the config, or with zoo export --policy)"
        )
    if class_path in known:
        return known[class_path]
    module, _, name = class_path.rpartition(".")
    cls = getattr(importlib.import_module(module), name, None)
    if not (isinstance(cls, type) and issubclass(cls, PolicyModule)):
        raise ValueError(f"{class_path!r} is not a PolicyModule subclass")
    return cls


def plain_hparams(hparams: dict, source: str = "the checkpoint") -> dict:
    """A checkpoint's hyperparameters minus `NOT_FROM_CHECKPOINTS` (at any depth) and minus any
    value that names a class (a ``class_path`` anywhere inside): what may reach a policy's
    ``__init__``."""
    clean = {}
    for key, value in hparams.items():
        if key == "_class_path":
            continue
        if key in NOT_FROM_CHECKPOINTS or _names_a_class(value):
            if key == "trust_remote_code" and value:
                log.warning(
                    "ignored trust_remote_code=%r from %s: only your own config or command line can "
                    "let a model run its Python code",
                    value,
                    source,
                )
            continue
        clean[key] = plain_hparams(value, source) if isinstance(value, dict) else value
    return clean


def _names_a_class(value: object) -> bool:
    if isinstance(value, dict):
        return "class_path" in value or any(_names_a_class(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(_names_a_class(v) for v in value)
    return False


def checkpoint_model(hparams: dict, config_class: str | None, source: str = "the checkpoint") -> dict | None:
    """The ``model`` section a checkpoint's hyperparameters contribute to a config (what
    LightningCLI merges on ``--ckpt_path``), or None when they hold nothing.

    Args:
        hparams: The checkpoint's ``hyper_parameters``.
        config_class: The policy class the user's config names (it may be the checkpoint's class).
        source: Names the checkpoint in the warning about an ignored ``trust_remote_code``.

    Raises:
        ValueError: The checkpoint names a class `policy_class` refuses.
    """
    if not isinstance(hparams, dict):
        raise ValueError(f"{source}: hyper_parameters must be a dict, got {type(hparams).__name__}")
    kwargs = plain_hparams(hparams, source)
    if "_class_path" not in hparams:  # init arguments of the class the config names
        return kwargs or None
    cls = policy_class(hparams["_class_path"], [config_class] if config_class else [])
    return {"class_path": f"{cls.__module__}.{cls.__qualname__}", "dict_kwargs": kwargs}
