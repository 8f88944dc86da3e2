"""setup.cfg matches the imports: every required distribution is imported by the packages, every
import is declared, and what only optional code imports is an extra imported inside the function
that needs it."""

import ast
import configparser
import functools
import importlib.util
import re
import sys
from pathlib import Path

ROOT = Path(__file__).parents[1]
PACKAGES = ("zoo", "tasks", "datamodules", "callbacks")
#: Distribution -> import name, where they differ.
IMPORT_NAMES = {"pillow": "PIL", "pyyaml": "yaml", "open3d_cpu": "open3d", "mlflow_skinny": "mlflow"}
#: Required distributions zoo never imports itself, each with a module of a dependency that imports
#: it without that dependency requiring it: (module, why).
INDIRECT = {
    "torchvision": (
        "transformers.models.qwen2_vl.image_processing_qwen2_vl",
        "transformers' Qwen-VL image and video processors import it; transformers does not require it",
    )
}
#: Optional imports with a fallback, in no extra: import name -> why.
UNDECLARED = {"cv2": "RGBDFolder reads .exr depth with OpenCV when it is installed (README says so)"}


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def requirements() -> dict[str, set[str]]:
    """``install_requires`` and each extra -> import names of its distributions (``dev`` left
    out)."""
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(ROOT / "setup.cfg")
    sections = {"install_requires": parser["options"]["install_requires"], **parser["options.extras_require"]}
    out = {}
    for name, body in sections.items():
        dists = [_normalise(m[1]) for line in body.splitlines() if (m := re.match(r"\s*([A-Za-z0-9_.\-]+)", line))]
        out[name] = {IMPORT_NAMES.get(d, d) for d in dists}
    del out["dev"]
    return out


class Imports(ast.NodeVisitor):
    """Top-level names imported by a module: ``eager`` at import time, ``lazy`` inside functions
    (also through ``tasks.extras.require("<module>", ...)``)."""

    def __init__(self):
        self.eager, self.lazy, self.depth = set(), set(), 0

    def _add(self, name: str) -> None:
        (self.lazy if self.depth else self.eager).add(name.split(".")[0])

    def visit_FunctionDef(self, node):
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Import(self, node):
        for alias in node.names:
            self._add(alias.name)

    def visit_ImportFrom(self, node):
        if node.module and not node.level:
            self._add(node.module)

    def visit_Call(self, node):
        name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
        if name == "require" and node.args and isinstance(node.args[0], ast.Constant):
            self._add(node.args[0].value)
        self.generic_visit(node)


def imports_of(path: Path) -> Imports:
    visitor = Imports()
    visitor.visit(ast.parse(path.read_text()))
    return visitor


def third_party(names: set[str]) -> set[str]:
    return {n for n in names if n not in sys.stdlib_module_names and n not in PACKAGES}


@functools.cache
def package_imports() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """Import name -> files importing it, eagerly and lazily, over every module of the packages."""
    eager, lazy = {}, {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            visitor = imports_of(path)
            for found, names in ((eager, visitor.eager), (lazy, visitor.lazy)):
                for name in third_party(names):
                    found.setdefault(name, set()).add(str(path.relative_to(ROOT)))
    return eager, lazy


def test_every_required_distribution_is_imported():
    eager, lazy = package_imports()
    unused = requirements()["install_requires"] - set(eager) - set(lazy) - set(INDIRECT)
    assert not unused, f"install_requires lists {sorted(unused)}, which no module of {PACKAGES} imports"


def test_indirect_requirements_are_still_imported_by_their_dependency():
    """An exemption from the test above holds only while the named module really imports the
    distribution."""
    for name, (module, why) in INDIRECT.items():
        assert name in requirements()["install_requires"], f"{name} is exempted but not required"
        top, *rest = module.split(".")  # found without importing it (transformers takes seconds)
        path = Path(importlib.util.find_spec(top).origin).parent.joinpath(*rest[:-1], f"{rest[-1]}.py")
        visitor = imports_of(path)
        assert name in visitor.eager | visitor.lazy, f"{module} no longer imports {name} ({why}): drop it"


def test_every_import_is_declared_and_optional_ones_are_lazy():
    """Import-time imports need a required distribution; an extra's package is imported inside the
    function that needs it (through `tasks.extras.require`, which names the extra), so the packages
    import without it."""
    groups = requirements()
    required = groups.pop("install_requires")
    optional = set().union(*groups.values())
    eager, lazy = package_imports()
    not_required = {name: files for name, files in eager.items() if name not in required}
    assert not not_required, f"imported at import time but not in install_requires: {not_required}"
    undeclared = {name: files for name, files in lazy.items() if name not in required | optional | set(UNDECLARED)}
    assert not undeclared, f"imported but in neither install_requires nor an extra: {undeclared}"
