"""What ``gradcheck init`` writes for an op (:func:`case_text`, :func:`test_text`,
:data:`WORKFLOW`): text from data, nothing written or printed here (``cli/init.py``
does that). The op's forward signature comes from its source (``project/opsource.py``).
"""

from __future__ import annotations

import re

from ..project.opsource import OpSource

#: The GitHub Actions workflow: docs/ci.md's recipe, the same text
#: (tests/test_init.py keeps the two equal; edit both or neither).
WORKFLOW = """\
# .github/workflows/gradcheck.yml
name: gradcheck
on: [push, pull_request]
jobs:
  gradcheck:
    runs-on: ubuntu-latest
    permissions:
      contents: read
      checks: write                  # for the published test report
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-python@v5
        with:
          python-version: "3.11"
      - run: pip install torch --index-url https://download.pytorch.org/whl/cpu --retries 2 --timeout 30
      - run: pip install "gradcheck @ git+https://github.com/OWNER/gradcheck"
      - run: >-
          gradcheck run cases/
          --report junit:reports/gradcheck.xml
          --report markdown:reports/gradcheck.md
          --report json:reports/gradcheck.json
          --report html:reports/gradcheck.html
      - uses: actions/upload-artifact@v4
        if: always()                 # keep the reports when cases fail
        with:
          name: gradcheck-reports
          path: reports/
      - uses: mikepenz/action-junit-report@v4
        if: always()
        with:
          report_paths: reports/gradcheck.xml
"""

#: the shape a starter case gives each tensor input, to be replaced by the user's
PLACEHOLDER_SHAPE = [4]
#: the reference line to fill in (tests/test_init.py replaces it)
PLACEHOLDER_REFERENCE = '# reference = "..."'


def case_name(op_name: str) -> str:
    """``RMSNorm`` -> ``rms-norm``, ``MyOp`` -> ``my-op``, ``my_op`` -> ``my-op``."""
    last = op_name.rsplit(".", 1)[-1]
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "-", last)
    return spaced.replace("_", "-").lower()


def case_text(op: OpSource, name: str, shown_file: str, run_command: str) -> str:
    """The starter case file of ``op``: its inputs from forward's signature, the
    reference left to fill in."""
    tensors = [a for a in op.arguments if a.tensor and not a.keyword_only]
    lines = [
        f"# A starter case for the op {op.name} of {shown_file}, written by `gradcheck",
        "# init`: fill in what is marked TODO, then run",
        f"#     {run_command}",
        "# Every key is in gradcheck's docs/ops.md; `gradcheck functions` lists the",
        "# functions a formula may use.",
        "",
        "[[case]]",
        f'name = "{name}"',
        f'op = "{op.spec}"',
        "# TODO: the formula forward computes, in the inputs' names (a list of formulas",
        "# for several outputs), e.g. \"x * sigmoid(x)\":",
        PLACEHOLDER_REFERENCE,
        "# or, instead of reference, a plain PyTorch function that computes the same, traced:",
        f'# reference_function = "refs:{name.replace("-", "_")}"',
    ]
    if not tensors:
        lines.append("# TODO: forward's tensor arguments, in order (none was read from "
                     "its signature)")
    for a in tensors or [None]:
        lines.append(f"inputs.{a.name if a else 'x'} = {{ shape = {PLACEHOLDER_SHAPE} }}"
                     "   # TODO: a shape forward takes")
    lines += _plain_lines(op, tensors)
    lines.append('dtype = ["float64", "float32"]')
    return "\n".join(lines) + "\n"


def _plain_lines(op: OpSource, tensors: list) -> list[str]:
    """The lines on forward's other arguments: plain values (``args``) and keywords
    (``call``), commented where forward has a default for each."""
    others = [a for a in op.arguments if a not in tensors]
    if not others and not op.variadic and not op.notes:
        return []
    shown = [f"{a.name} = {a.default}" if a.default is not None else
             f"{a.name} (TODO: no default)" for a in others]
    lines = ["# forward's other arguments: " + ", ".join(
        shown + ([f"*{op.variadic}"] if op.variadic else []))]
    required = any(a.default is None for a in others)
    prefix = "" if required else "# "
    if not required:
        lines.append("# (their defaults are used unless one of these lines passes others)")
    positional = [a for a in others if not a.keyword_only]
    if positional and not any(a.keyword_only and a.default is None for a in others):
        values = ", ".join(a.default if a.default is not None else "TODO"
                           for a in positional)
        lines.append(f"{prefix}args = [{values}]   # after the inputs, in order")
        prefix = "# "   # call is the alternative to args, never both
    keywords = [f"{a.name}={a.default if a.default is not None else 'TODO'}"
                for a in others]
    call = ", ".join([a.name for a in tensors] + keywords)
    lines.append(f'{prefix}call = "op({call})"   # or exactly what the op receives')
    return lines + [f"# {note}" for note in op.notes]


def test_text(op: OpSource, name: str, case_path: str) -> str:
    """A pytest test that checks every case of the starter case file through the
    plugin's marker (``case_path``: relative to the test file's folder)."""
    function = re.sub(r"\W", "_", name)
    return f'''\
"""The op {op.name}'s gradients, checked by gradcheck's pytest plugin (written by
`gradcheck init`): each case and dtype of {case_path} is a test of its own."""

import pytest


@pytest.mark.gradcheck_cases("{case_path}")
def test_{function}_gradients(gradcheck_case):
    # a failing case fails the test with gradcheck's report (worst elements, diagnosis)
    gradcheck_case.assert_passed()
'''
