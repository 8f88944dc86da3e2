"""README.md and docs/*.md stay true: generated tables are current, and every command, config path,
file path, module or class path and link they give exists (a renamed option, file or heading fails
here)."""

import argparse
import importlib
import importlib.util
import re
import shlex
from pathlib import Path

import pytest

from zoo.cli import COMMANDS, ZooCLI, cli, command, run_typed
from zoo.tools.docs import pages, render

ROOT = Path(__file__).parents[1]
PAGES = [ROOT / "README.md", *pages()]
LIGHTNING_COMMANDS = ("fit", "validate", "test", "predict")
REPO_PATH = re.compile(
    r"(?<![\w/.-])(?:zoo|tasks|datamodules|callbacks|configs|tests|docs|\.ci)/"
    r"[a-z0-9_./*-]*[a-z0-9_/]"
)
CODE_PATH = re.compile(r"^(?:zoo|tasks|datamodules|callbacks)(?:\.\w+)+")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FILE_BLOCK = re.compile(r"```(?:python|yaml)\n# (?P<path>[\w/.]+)\n(?P<body>.*?)```", re.DOTALL)
ids = pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)


class ParseCommand(ZooCLI):
    """``zoo <subcommand> ...`` parsed as the console script would, with nothing built, resolved or
    run."""

    def before_instantiate_classes(self) -> None:
        """``--ckpt_path last`` would look for a checkpoint."""

    def instantiate_classes(self) -> None:
        """Building sources would need the papers' datasets."""

    def _run_subcommand(self, subcommand: str) -> None:
        """Parsing is the test."""


def parse_command(args: list[str]) -> None:
    cli(args, cli_class=ParseCommand)


def text_of(page: Path) -> str:
    return page.read_text()


def example_files() -> dict[str, str]:
    """Files a page defines in a code block (the contributing page's worked examples): not in the
    repo."""
    return {m["path"]: m["body"] for page in PAGES for m in FILE_BLOCK.finditer(text_of(page))}


def example_names() -> set[str]:
    return {name for body in example_files().values() for name in re.findall(r"^class (\w+)", body, re.M)}


def inline_code(text: str) -> list[str]:
    """Inline code spans outside fenced blocks."""
    outside = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
    return re.findall(r"`([^`\n]+)`", outside)


def shell_lines(text: str) -> list[str]:
    """Commands in ```bash blocks (continuations joined, comments and ``&&`` chains split) and
    inline spans."""
    lines = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.DOTALL):
        for line in block.replace("\\\n", " ").splitlines():
            lines += [part.strip() for part in re.sub(r"\s#.*$", "", line).split("&&")]
    lines += [span for span in inline_code(text) if re.match(r"(zoo|python -m|pytest) ", span)]
    return [line for line in lines if line]


def commands(prefix: str) -> list[tuple[str, list[str]]]:
    found = []
    for page in PAGES:
        for line in shell_lines(text_of(page)):
            words = shlex.split(line)
            if words and words[0] == prefix:
                found.append((page.name, words[1:]))
    return found


@ids
def test_generated_blocks_are_current(page):
    assert render(text_of(page)) == text_of(page), "stale generated block: run python -m zoo.tools.docs"


def concrete(args: list[str]) -> bool:
    """No placeholder (``<experiment>``, ``$HEAD``, ``...``), no alternatives (``fit / validate``)
    and no file a page only defines as an example."""
    return not any(re.search(r"[<>$]|\.\.\.", a) or a in ("/", "|") or a in example_files() for a in args)


ZOO = [(page, args) for page, args in commands("zoo")]


@pytest.mark.parametrize("page, args", ZOO, ids=[f"{p}:{' '.join(a)[:60]}" for p, a in ZOO])
def test_zoo_commands_exist_and_lightning_ones_parse(page, args, capsys):
    assert args and args[0] in (*LIGHTNING_COMMANDS, *COMMANDS, "--help"), f"{page}: no zoo command {args[:1]}"
    if args[0] == "repro" and len(args) > 1 and not args[1].startswith("-") and concrete(args[1:2]):
        assert importlib.util.find_spec(f"zoo.tools.repro.{args[1]}"), f"{page}: no claim {args[1]}"
    if len(args) == 1 or not concrete(args):
        return  # a bare mention (`zoo test`) or a placeholder
    try:
        if args[0] in COMMANDS:  # a tool: parsed against its typed signature, not run
            run_typed(f"zoo {args[0]}", command(args[0]), args[1:], run=False)
        else:
            parse_command(args)
    except SystemExit as exit:  # --help and --print_config print and exit 0 (a bad option raises ArgumentError)
        assert exit.code == 0, f"{page}: zoo {' '.join(args)}\n{capsys.readouterr().err[-1500:]}"


def test_python_and_pytest_commands_name_what_exists():
    for page, args in commands("python") + commands("python3") + commands("pytest"):
        if args[:1] == ["-m"] and args[1].split(".")[0] in ("zoo", "tasks", "datamodules", "callbacks"):
            assert importlib.util.find_spec(args[1]), f"{page}: python -m {args[1]}"  # others: other packages
        for arg in args:
            if re.match(r"[\w/]+\.py(::\w+)?$", arg):
                assert (ROOT / arg.split("::")[0]).exists(), f"{page}: {arg}"


@ids
def test_repository_paths_exist(page):
    defined = set(example_files())
    missing = [p for p in REPO_PATH.findall(text_of(page)) if p not in defined and not any(ROOT.glob(p))]
    assert not missing, f"{page.name} names paths that do not exist: {missing}"


def resolves(path: str) -> bool:
    """``zoo.grpo.GRPOStrategy``, ``zoo.tiny``, ``tasks.Task.level_arguments``: a module, then
    attributes."""
    parts = path.split(".")
    for end in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:end]))
        except ImportError:
            continue
        for name in parts[end:]:
            if not hasattr(obj, name):
                return False
            obj = getattr(obj, name)
        return True
    return False


@ids
def test_module_and_class_paths_resolve(page):
    spans = [m[0].rstrip(".") for span in inline_code(text_of(page)) if (m := CODE_PATH.match(span))]
    spans += re.findall(r"class_path: ((?:zoo|tasks|datamodules|callbacks)\.[\w.]+)", text_of(page))
    missing = [s for s in spans if s.split(".")[-1] not in example_names() and not resolves(s)]
    assert not missing, f"{page.name} names code that does not exist: {missing}"


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    outside = re.sub(r"```.*?```", "", text_of(page), flags=re.DOTALL)
    return {slug(h) for h in re.findall(r"^#+ (.+)$", outside, re.M)}


@ids
def test_links_and_anchors_resolve(page):
    broken = []
    for target in LINK.findall(text_of(page)):
        if re.match(r"[a-z]+:", target):
            continue  # http(s), mailto: not checked offline
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists() or (anchor and linked.suffix == ".md" and anchor not in anchors(linked)):
            broken.append(target)
    assert not broken, f"{page.name} has broken links: {broken}"


def test_the_checks_catch_what_they_are_for(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Top\n\nSee [x](page.md#top), [y](page.md#nowhere) and [z](gone.md).\n")
    assert LINK.findall(page.read_text()) == ["page.md#top", "page.md#nowhere", "gone.md"]
    assert "top" in anchors(page) and "nowhere" not in anchors(page)
    assert slug("A policy family") == "a-policy-family" and slug("Metrics (`train/*`)") == "metrics-train"
    assert resolves("zoo.grpo.GRPOStrategy") and resolves("tasks.Task.level_arguments") and not resolves("zoo.NoSuch")
    assert REPO_PATH.findall("run configs/quickstart.yaml, not runs/x") == ["configs/quickstart.yaml"]
    assert shell_lines("```bash\nzoo fit --config a.yaml \\\n    --trainer.max_steps 1  # note\n```\n") == [
        "zoo fit --config a.yaml      --trainer.max_steps 1"
    ]
    with pytest.raises(argparse.ArgumentError):
        parse_command(["fit", "--config", "configs/quickstart.yaml", "--trainer.max_stepz", "1"])


#: A section cited in prose: ``docs/x.md#anchor``, ``README.md#anchor`` or ``README "Heading"``.
CITED_SECTION = re.compile(r"(README(?:\.md)?|docs/[a-z0-9_-]+\.md)(?:#([a-z0-9_-]+)| \"([^\"\n]+)\")")
#: Files whose comments cite paths and sections besides the pages: every config and the CI script.
COMMENTED = [*sorted(ROOT.glob("configs/**/*.yaml")), ROOT / ".ci" / "run"]


def comments(path: Path) -> str:
    """The ``#`` comments of a YAML file or shell script, joined (a citation may wrap lines)."""
    return " ".join(line.split("#", 1)[1] for line in path.read_text().splitlines() if "#" in line)


def broken_citations(text: str) -> list[str]:
    """The repository paths and cited sections of ``text`` that do not exist."""
    broken = [p for p in REPO_PATH.findall(text) if not any(ROOT.glob(p.rstrip(".")))]
    for page, anchor, heading in CITED_SECTION.findall(" ".join(text.split())):
        file = ROOT / ("README.md" if page.startswith("README") else page)
        wanted = anchor or slug(heading)
        if not file.is_file() or wanted not in anchors(file):
            broken.append(f"{page}#{wanted}")
    return broken


@pytest.mark.parametrize("path", COMMENTED, ids=lambda p: str(p.relative_to(ROOT)))
def test_config_comments_cite_what_exists(path):
    assert not broken_citations(comments(path)), f"{path}: {broken_citations(comments(path))}"


@ids
def test_sections_cited_in_prose_exist(page):
    cited = [c for c in broken_citations(text_of(page)) if "#" in c]
    assert not cited, f"{page.name} cites sections that do not exist: {cited}"


def test_citation_check_catches_a_missing_section_and_path():
    text = 'see README "Install" and docs/sft.md#hybrids, configs/nowhere.yaml and configs/quickstart.yaml'
    assert broken_citations(text) == ["configs/nowhere.yaml", "README#install"]
