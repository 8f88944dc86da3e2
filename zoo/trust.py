"""Checkpoints are data, never code: the policy classes a checkpoint may name (zoo's own, plus those
the user's config or command line names) and the hyperparameters of a checkpoint that may reach a
policy (plain data; never ``trust_remote_code``, which only the user's own config or command line
can turn on)."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import logging
import types
import typing
from collections.abc import Iterable

import zoo
from zoo.policy import PolicyModule

log = logging.getLogger(__name__)

#: Plain-typed parameters a checkpoint still never sets: remote code is the user's opt-in.
NOT_FROM_CHECKPOINTS = ("trust_remote_code",)
#: The types a value from a checkpoint may have, and a parameter's annotation may be made of
#: (with ``list``, ``tuple``, ``dict``, ``Literal``, unions and dataclasses of them).
PLAIN = (str, int, float, bool, type(None))


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


def plain_hparams(hparams: dict, cls: type, source: str = "the checkpoint") -> dict:
    """The hyperparameters of a checkpoint that may reach ``cls.__init__`` (or the parser that
    builds it): an allow-list by ``cls``'s signature. A value passes only when it is plain data
    (`PLAIN`, lists and dicts of it) of a parameter whose annotation is plain too, and conforms to
    it; anything else (a string given to a class-typed parameter, which the parser would import, a
    name that is no parameter, `NOT_FROM_CHECKPOINTS`) is dropped."""
    annotations = init_annotations(cls)
    clean = {}
    for key, value in hparams.items():
        if key in NOT_FROM_CHECKPOINTS:
            if value:
                log.warning(
                    "ignored %s=%r from %s: only your own config or command line can let a model run its Python code",
                    key,
                    value,
                    source,
                )
        elif key in annotations and _conforms(value, annotations[key]):
            clean[key] = _without_opt_ins(value)
        elif key != "_class_path":
            log.info("ignored %s from %s: not plain data of a plain-typed parameter of %s", key, source, cls.__name__)
    return clean


def init_annotations(cls: type) -> dict[str, object]:
    """The annotation of every ``__init__`` parameter of ``cls`` and of the bases its ``**kwargs``
    reach (a subclass's own wins); a class whose annotations do not resolve contributes none."""
    found = {}
    for klass in cls.__mro__:
        init = vars(klass).get("__init__")
        if init is None or klass is object:
            continue
        try:
            hints = typing.get_type_hints(init)
        except Exception:  # an annotation that does not resolve: its parameters stay out
            hints = {}
        for name, parameter in inspect.signature(init).parameters.items():
            if parameter.kind in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY) and name in hints:
                found.setdefault(name, hints[name])
        if not any(p.kind == p.VAR_KEYWORD for p in inspect.signature(init).parameters.values()):
            break  # its bases' parameters are not reachable
    return found


def _conforms(value: object, hint: object) -> bool:
    """Whether ``value`` is plain data of the plain type ``hint`` (False for any other type)."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if hint in PLAIN or hint is None:
        return _scalar(value, type(None) if hint is None else hint)
    if origin in (typing.Union, types.UnionType):
        return any(_conforms(value, arg) for arg in args)
    if origin is typing.Literal:
        return any(type(value) is type(arg) and value == arg for arg in args if isinstance(arg, PLAIN))
    if hint in (list, tuple, dict) or origin in (list, tuple, dict):
        return _container(value, origin or hint, args)
    if dataclasses.is_dataclass(hint) and isinstance(hint, type) and isinstance(value, dict):
        try:
            fields = typing.get_type_hints(hint)
        except Exception:
            return False
        names = {f.name for f in dataclasses.fields(hint) if f.init}
        return set(value) <= names and all(_conforms(v, fields[k]) for k, v in value.items())
    return False


def _scalar(value: object, hint: type) -> bool:
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, hint)


def _container(value: object, kind: type, args: tuple) -> bool:
    if kind is dict:
        item = args[1] if len(args) == 2 else None
        return isinstance(value, dict) and all(
            isinstance(k, str) and (_plain(v) if item is None else _conforms(v, item)) for k, v in value.items()
        )
    if not isinstance(value, list | tuple):
        return False
    if kind is tuple and args and args[-1] is not Ellipsis:
        return len(value) == len(args) and all(_conforms(v, a) for v, a in zip(value, args, strict=True))
    item = args[0] if args else None
    return all(_plain(v) if item is None else _conforms(v, item) for v in value)


def _plain(value: object) -> bool:
    """Plain data: `PLAIN` values, lists of them and dicts with string keys, none of them naming a
    class (``class_path``)."""
    if isinstance(value, dict):
        return "class_path" not in value and all(isinstance(k, str) and _plain(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return all(_plain(v) for v in value)
    return isinstance(value, PLAIN)


def _without_opt_ins(value: object) -> object:
    """``value`` without `NOT_FROM_CHECKPOINTS` keys at any depth (``processor_kwargs`` pass
    on to ``from_pretrained``)."""
    if isinstance(value, dict):
        return {k: _without_opt_ins(v) for k, v in value.items() if k not in NOT_FROM_CHECKPOINTS}
    return value


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
    allowed = [config_class] if config_class else []
    if "_class_path" not in hparams:  # init arguments of the class the config names
        cls = policy_class(config_class, allowed) if config_class else PolicyModule
        return plain_hparams(hparams, cls, source) or None
    cls = policy_class(hparams["_class_path"], allowed)
    return {"class_path": f"{cls.__module__}.{cls.__qualname__}", "dict_kwargs": plain_hparams(hparams, cls, source)}
