"""README's first section is what users copy: keep it true."""

import re
from pathlib import Path

ROOT = Path(__file__).parents[1]


def quickstart_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    first_section = readme.split("\n## ")[1]
    return re.findall(r"```bash\n(.+?)\n```", first_section)


def test_first_section_gives_exactly_two_commands():
    commands = quickstart_commands()
    assert len(commands) == 2
    assert commands[0].endswith("zoo fit --config configs/quickstart.yaml")
    assert commands[1].endswith("pytest -q")


def test_ci_runs_the_readme_test_command():
    ci_lines = (ROOT / ".ci" / "run").read_text().splitlines()
    assert quickstart_commands()[1] in ci_lines


def test_every_config_is_in_the_readme():
    readme = (ROOT / "README.md").read_text()
    for path in (ROOT / "configs").glob("*/*.yaml"):
        if path.parent.name == "papers":
            assert f"configs/papers/{path.name}" in readme, path.name
