"""Packages find their own files: a new module's classes get short import paths with no edit
elsewhere."""

import importlib
import sys
import textwrap

import pytest

import callbacks
import datamodules
import tasks
import zoo
from datamodules.sources.base import Source
from tasks import Task
from tasks.discovery import concrete_subclasses
from tests.helpers import discover
from zoo.policy import PolicyModule

INIT = "from tasks.discovery import export_submodules\n__all__ = export_submodules(__name__, __path__, globals())\n"


@pytest.fixture
def package(tmp_path, monkeypatch):
    """A fresh package ``newpkg`` on sys.path whose ``__init__`` discovers its modules; write files
    into it."""
    root = tmp_path / "newpkg"
    root.mkdir()
    (root / "__init__.py").write_text(INIT)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield root
    for name in [n for n in sys.modules if n == "newpkg" or n.startswith("newpkg.")]:
        del sys.modules[name]


def test_a_new_file_is_exported_by_its_package(package):
    (package / "shapes.py").write_text(
        "from json import JSONDecoder\n\nclass Circle:\n    pass\n\nclass _Hidden:\n    pass\n"
    )
    (package / "sub").mkdir()
    (package / "sub" / "__init__.py").write_text(INIT)
    (package / "sub" / "lines.py").write_text("class Line:\n    pass\n")
    module = importlib.import_module("newpkg")
    assert module.__all__ == ["Circle", "Line"]  # not the private class, not what a module imports
    assert module.Circle.__module__ == "newpkg.shapes" and module.Line.__module__ == "newpkg.sub.lines"


def test_a_module_all_chooses_what_it_exports(package):
    (package / "tools.py").write_text(
        "__all__ = ['helper']\n\ndef helper():\n    return 1\n\nclass Internal:\n    pass\n"
    )
    module = importlib.import_module("newpkg")
    assert module.__all__ == ["helper"] and module.helper() == 1 and not hasattr(module, "Internal")


def test_two_files_exporting_one_name_fail_at_import(package):
    (package / "a.py").write_text("class Same:\n    pass\n")
    (package / "b.py").write_text("class Same:\n    pass\n")
    with pytest.raises(ImportError, match=r"newpkg.Same is defined twice, in newpkg.a and newpkg.b"):
        importlib.import_module("newpkg")


def test_skipped_modules_are_not_imported(package):
    (package / "__init__.py").write_text(INIT.replace("globals())", "globals(), skip=['entry'])"))
    (package / "entry.py").write_text("raise SystemExit('imported')\n")
    (package / "kept.py").write_text("class Kept:\n    pass\n")
    assert importlib.import_module("newpkg").__all__ == ["Kept"] and "newpkg.entry" not in sys.modules


@pytest.mark.parametrize(
    "package_, base", [(tasks, Task), (datamodules, Source), (zoo, PolicyModule)], ids=["tasks", "sources", "policies"]
)
def test_every_extension_class_has_a_short_name(package_, base):
    for cls in discover(package_, base):
        assert getattr(package_, cls.__name__, None) is cls, f"{package_.__name__}.{cls.__name__}"


def test_callbacks_are_exported():
    assert callbacks.GRPOMetrics.__module__ == "callbacks.metrics" and "Curriculum" in callbacks.__all__


def test_concrete_subclasses_leave_out_abstract_ones_and_other_packages():
    namespace = {}
    exec(
        textwrap.dedent("""
        from abc import ABC, abstractmethod
        class Base(ABC):
            @abstractmethod
            def f(self): ...
        class Middle(Base):
            pass
        class Leaf(Middle):
            def f(self): ...
    """),
        namespace,
    )
    base, leaf = namespace["Base"], namespace["Leaf"]
    assert concrete_subclasses(base) == [leaf]
    assert concrete_subclasses(base, "tasks") == []
