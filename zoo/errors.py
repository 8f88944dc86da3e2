"""One line for a user's mistake: which errors count as a bad configuration or input, and how
`zoo.cli.main` words them (jsonargparse's nested reports and wrapped exceptions reduced to the key
and the reason)."""

from __future__ import annotations

import argparse
import errno
import os
import re
import shutil
import signal
import traceback
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from pathlib import Path

from lightning.fabric.utilities.exceptions import MisconfigurationException

from zoo.data import MissingDataMethod

#: Exit status of a command a signal stopped (128 + its number, what a shell reports for a process
#: the signal ended): ``zoo fit`` saved the step in progress first, ``--ckpt_path last`` resumes it.
STOPPED = {signal.SIGTERM: 143, signal.SIGINT: 130}

#: Exceptions that mean a bad configuration, file or option (a bug raises other kinds, or inside a
#: step).
USER_ERRORS = (ValueError, OSError, ImportError, MisconfigurationException, argparse.ArgumentError, MissingDataMethod)
#: Functions whose failures happen while training or evaluating, not while setting up: their
#: traceback is kept.
STEP_FUNCTIONS = frozenset(
    {"training_step", "validation_step", "test_step", "predict_step", "backward", "optimizer_step"}
)
#: How jsonargparse begins the reports it wraps around the error of a class it could not build.
_WRAPPERS = ("Does not validate against any of", "Problem with given class_path")
#: Lines of jsonargparse's nested reports that describe the search, not the problem.
_SCAFFOLD = (
    "Does not validate",
    "Subtypes:",
    "Errors:",
    "Given value",
    "Subclass types expect",
    "- a class path",
    "- a dict",
    "Not a valid subclass",
    "Expected a path but",
)
#: The errno values of a write that found no room (a full device, or a disk quota reached).
_NO_SPACE = (errno.ENOSPC, errno.EDQUOT)
_KEY = re.compile(r'Parser key "([^"]+)"')
_CLASS = re.compile(r"Problem with given class_path '([^']+)'")


def user_error(err: BaseException) -> str | None:
    """The one line to print for ``err`` when it is a configuration or input mistake; None when a
    traceback should show instead (other exception types, or anything raised inside a training or
    evaluation step)."""
    if (tag := refused_tag(err)) is not None:
        return tag
    if not isinstance(err, USER_ERRORS) or _inside_a_step(err):
        return None
    if isinstance(err, OSError) and err.errno in _NO_SPACE and not isinstance(err, DiskFull):
        return f"no space left on device while writing {err.filename or 'a file'}: free some space and run again"
    cause = err
    while cause.__cause__ is not None and str(cause).startswith(_WRAPPERS):
        cause = cause.__cause__
    text = str(cause)
    if isinstance(cause, argparse.ArgumentError) or text.startswith(("Parser key", *_WRAPPERS)):
        return condense(text)
    return " ".join(text.split()) or type(cause).__name__


def condense(report: str) -> str:
    """jsonargparse's report of a bad value, indented by nesting, as ``<keys> (<class>): <deepest
    reason>``."""
    lines = [line for line in report.splitlines() if line.strip()]
    if len(lines) == 1:
        return _KEY.sub(r"\1", lines[0].strip(), count=1)
    candidates = [i for i, line in enumerate(lines) if not _heading(line) and not _scaffold(line)]
    if not candidates:
        return " ".join(report.split())
    at = max(candidates, key=lambda i: (_indent(lines[i]), -i))  # the deepest, first among equals
    keys = []
    classes = []
    depth = _indent(lines[at])
    for line in reversed(lines[:at]):
        if _indent(line) < depth:
            depth = _indent(line)
            keys += _KEY.findall(line)
            classes += _CLASS.findall(line)
    where = ".".join(reversed(keys)) + (f" ({classes[0]})" if classes else "")
    reason = lines[at].strip().removeprefix("- ")
    return f"{where}: {reason}" if where else reason


def _chain(err: BaseException, implicit: bool = False) -> Iterator[BaseException]:
    """``err`` and the exceptions it was raised from (``raise ... from``; with ``implicit`` also
    those it was raised while handling), each once."""
    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        yield err
        err = err.__cause__ or (err.__context__ if implicit else None)


def raised_in(err: BaseException, functions: Collection[str]) -> bool:
    """Whether ``err`` was raised inside a function named one of ``functions`` (any frame of its
    traceback)."""
    return any(frame.f_code.co_name in functions for frame, _ in traceback.walk_tb(err.__traceback__))


def _inside_a_step(err: BaseException) -> bool:
    return any(raised_in(cause, STEP_FUNCTIONS) for cause in _chain(err))


def _heading(line: str) -> bool:
    return bool(_KEY.search(line) or _CLASS.search(line))


def _scaffold(line: str) -> bool:
    return line.strip().removeprefix("- ").startswith(_SCAFFOLD) or line.strip().startswith(_SCAFFOLD)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


class DiskFull(OSError):
    """A write that found no room, as one line: which file, on which file system, how much is
    free."""

    def __init__(self, path: str | Path, code: int = errno.ENOSPC):
        mount, free = _free_space(Path(path))
        super().__init__(
            code,
            f"no space left on {mount} ({free / 2**20:.0f} MiB free) while writing {path}: free some space,"
            " or write elsewhere (trainer.default_root_dir, ZOO_CACHE)",
        )
        self.filename = str(path)

    def __str__(self) -> str:
        return self.strerror


@contextmanager
def writing(path: str | Path) -> Iterator[None]:
    """Inside it, a write that runs out of space (``ENOSPC``, or a quota: ``EDQUOT``) raises
    `DiskFull` naming ``path``, which `zoo.cli.main` prints as one line, not a traceback."""
    try:
        yield
    except DiskFull as err:  # an inner write's name (a temporary file): name what the user asked for
        raise DiskFull(path, err.errno) from err.__cause__
    except OSError as err:
        if err.errno not in _NO_SPACE:
            raise
        raise DiskFull(path, err.errno) from err


def _free_space(path: Path) -> tuple[str, int]:
    """The mount point holding ``path`` (or its nearest existing parent) and its free bytes."""
    path = path.absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    mount = path
    while not os.path.ismount(mount) and mount != mount.parent:
        mount = mount.parent
    return str(mount), shutil.disk_usage(path).free


def refused_tag(err: BaseException) -> str | None:
    """The line for a YAML file or value that asked for a Python object (``!!python/...``, or any
    tag without a safe constructor): configs are data, so zoo builds nothing from a tag."""
    import yaml  # jsonargparse's own dependency

    for cause in _chain(err, implicit=True):
        if isinstance(cause, yaml.constructor.ConstructorError) and cause.problem_mark is not None:
            tag = (cause.problem or "").rpartition("tag ")[2].strip("'").replace("tag:yaml.org,2002:", "!!")
            mark = cause.problem_mark
            where = "a --config file or value" if mark.name.startswith("<") else mark.name
            return (
                f"{where}, line {mark.line + 1}, column {mark.column + 1}: YAML tag {tag} refused: a config is"
                " data, zoo builds no Python object from a tag (name classes with class_path / init_args)"
            )
    return None
