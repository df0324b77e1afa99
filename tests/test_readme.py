"""The README's examples run as written."""

from __future__ import annotations

import re
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

README = (Path(__file__).parent.parent / "README.md").read_text()


def test_python_examples_run():
    blocks = re.findall(r"```python\n(.*?)```", README, re.S)
    assert blocks
    for i, block in enumerate(blocks):
        # (a name that is no file: inspect, which Hypothesis asks for a test's source,
        # would read README.md's own lines at the block's line numbers)
        exec(compile(block, f"<README.md python block {i}>", "exec"), {})


def test_toml_example_is_a_valid_case_file(tmp_path):
    from gradcheck.cases import read_file

    blocks = re.findall(r"```toml\n(.*?)```", README, re.S)
    for other in blocks:
        tomllib.loads(other)
    block = blocks[0]
    path = tmp_path / "example.toml"
    path.write_text(block)
    cases, errors = read_file(path)
    assert not errors and [c.name for c in cases] == ["softplus", "two-layer"]


def test_quickstart_commands_match_ci():
    ci = (Path(__file__).parent.parent / ".ci" / "run").read_text()
    commands = re.findall(r"```sh\n(.*?)\n```", README, re.S)
    assert len(commands) == 2
    assert "gradcheck run cases/" in commands[0]
    assert commands[1] in ci
