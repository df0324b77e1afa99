"""op.vmap and op.registration: the op under torch.func.vmap (its outputs, autograd
through them, torch.func.vjp inside the vmap) with the batch axis first, in the middle
and last, and torch.library.opcheck on a torch.library op. Each bug is a real op run
through gradcheck, beside its right version, in float64 and float32: the bundled
cases/ops/paths.toml and ops written here."""

from __future__ import annotations

import itertools
import textwrap
from pathlib import Path

import pytest

from gradcheck.cases import load_cases
from gradcheck.checking.case import run_case
from gradcheck.session.runner import run

PATHS = Path(__file__).resolve().parent.parent / "cases" / "ops" / "paths.toml"
CASES = {c.name: c for c in load_cases(PATHS)}
DTYPES = ("float64", "float32")
#: the bundled cases run in bfloat16 too (the op runs in it on a CPU)
BUNDLED = DTYPES + ("bfloat16",)


@pytest.fixture(scope="module")
def bundled():
    """Every case of cases/ops/paths.toml in its dtypes and bfloat16, run once."""
    cache: dict = {}
    return {(n, d): run_case(CASES[n], d, cache=cache, timeout=None)
            for n in CASES for d in BUNDLED}


def _others_pass(result, *checks: str) -> None:
    """Every check but ``checks`` passes (or is skipped): the bug is on their paths only."""
    for w in result.witnesses:
        if w.witness not in checks:
            assert w.status in ("passed", "skipped"), (w.witness, w.message)


@pytest.mark.parametrize("dtype", BUNDLED)
def test_a_vmap_rule_that_moves_the_batch_axis_first_passes(bundled, dtype):
    result = bundled["softmax-vmap-rule", dtype]
    assert result.status == "passed", result.message
    vmap = result.witness("op.vmap")
    # three placements of a [4, 5] input (axis 0, 1, 2) by three paths, a batch of 3:
    # each element against the exact values and against the op's own call
    assert vmap.status == "passed" and vmap.checked == 3 * 3 * 3 * 20 * 2
    assert not vmap.notes


@pytest.mark.parametrize("dtype", BUNDLED)
def test_a_vmap_rule_that_normalises_over_the_batch_is_caught(bundled, dtype):
    result = bundled["softmax-vmap-batch-last-wrong", dtype]
    assert result.status == "passed" and result.message.startswith("caught as expected")
    vmap = result.witness("op.vmap")
    assert vmap.status == "failed"
    # the message names the path, then lists the others that fail
    assert vmap.message.startswith("under torch.func.vmap with the batch axis at 0: ")
    assert "worst out0 (vmap, batch axis first)" in vmap.message
    assert ("the same on 8 more paths: grad of vmap with the batch axis first, vmap of "
            "vjp with the batch axis first, vmap with the batch axis middle") in vmap.message
    _others_pass(result, "op.vmap")


@pytest.mark.parametrize("dtype", BUNDLED)
def test_a_custom_op_with_a_right_fake_passes_torch_library_opcheck(bundled, dtype):
    result = bundled["custom-op-swish", dtype]
    assert result.status == "passed", result.message
    registration = result.witness("op.registration")
    assert registration.status == "passed" and registration.checked == 4
    # torch.func.vjp inside vmap is torch's to refuse for a custom op's autograd: a
    # note; vmap itself and autograd through it ran (vmap's loop over the op)
    vmap = result.witness("op.vmap")
    assert vmap.status == "passed" and vmap.checked > 0
    assert any(n.startswith("vmap not supported: under torch.func.vmap of "
                            "torch.func.vjp") for n in vmap.notes)


@pytest.mark.parametrize("dtype", BUNDLED)
def test_a_custom_op_whose_fake_drops_an_axis_is_caught(bundled, dtype):
    result = bundled["custom-op-fake-shape-wrong", dtype]
    assert result.status == "passed" and result.message.startswith("caught as expected")
    registration = result.witness("op.registration")
    assert registration.status == "failed"
    assert ("torch.library.opcheck's test_faketensor failed: MetadataMismatchError: "
            in registration.message)
    assert "Shapes torch.Size([4, 6]) and torch.Size([4]) are not equal" in (
        registration.message)
    # a fake is what torch.compile plans with: the compiled op raises
    assert result.witness("op.compile").message.startswith(
        "under torch.compile (backend aot_eager), the op raised BackendCompilerFailed")
    _others_pass(result, "op.registration", "op.compile")


# --------------------------------------------------------------------------- ops written here

_counter = itertools.count()


def run_ops(tmp_path: Path, source: str, cases: str) -> dict:
    """Write ``source`` as a fresh module and ``cases`` (``{mod}`` for its name) beside
    it; run them: ``{(name, dtype): CaseResult}``."""
    module = f"vmap_ops_{next(_counter)}_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{module}.py").write_text("import torch\n\n" + textwrap.dedent(source))
    path = tmp_path / "cases.toml"
    path.write_text('[defaults]\ndtype = ["float64", "float32"]\n'
                    + textwrap.dedent(cases).replace("{mod}", module))
    return {(c.name, c.dtype): c for c in run([path], timeout=None).cases}


SQUARES = """
class Square(torch.autograd.Function):
    '''Old style: forward takes ctx. Without setup_context torch.func refuses it.'''
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 2

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g


class SquareClaimsVmap(Square):
    '''Wrong: generate_vmap_rule = True, but torch.func cannot run an old-style Function.'''
    generate_vmap_rule = True


class SquareGenerated(torch.autograd.Function):
    '''Right: setup_context, and the vmap rule generated.'''
    generate_vmap_rule = True

    @staticmethod
    def forward(x):
        return x ** 2

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g


def square_if_small(x):
    '''A plain function with data-dependent control flow: vmap cannot run it.'''
    return x ** 2 if bool(x.abs().max() < 1e6) else x


def square(x):
    return x ** 2
"""


def test_vmap_support_unsupported_claimed_and_broken(tmp_path):
    results = run_ops(tmp_path, SQUARES, "".join(f"""
        [[case]]
        name = "{name}"
        op = "{{mod}}:{op}"
        reference = "x ** 2"
        inputs.x = {{ shape = [3, 4] }}
        """ for name, op in [("old", "Square"), ("claims", "SquareClaimsVmap"),
                             ("generated", "SquareGenerated"),
                             ("control-flow", "square_if_small"), ("plain", "square")]))
    for dtype in DTYPES:
        # a Function with neither a vmap staticmethod nor generate_vmap_rule: a skip
        # that says why, never a failure
        old = results["old", dtype]
        assert old.status == "passed"
        vmap = old.witness("op.vmap")
        assert vmap.status == "skipped" and vmap.message == (
            "vmap not supported: Square is a torch.autograd.Function with neither a "
            "vmap staticmethod nor generate_vmap_rule = True")
        # one that claims support and raises under vmap: a failure naming the path
        claims = results["claims", dtype]
        assert claims.status == "failed"
        vmap = claims.witness("op.vmap")
        assert vmap.status == "failed"
        assert vmap.message.startswith("under torch.func.vmap with the batch axis at 0, "
                                       "the op raised RuntimeError: In order to use an "
                                       "autograd.Function with functorch transforms")
        _others_pass(claims, "op.vmap")
        # its right version passes on every path
        generated = results["generated", dtype]
        assert generated.status == "passed", generated.message
        assert generated.witness("op.vmap").checked == 3 * 3 * 3 * 12 * 2
        # torch refusing a plain function (data-dependent control flow): a skip
        flow = results["control-flow", dtype]
        assert flow.status == "passed"
        vmap = flow.witness("op.vmap")
        assert vmap.status == "skipped" and vmap.message.startswith(
            "vmap not supported: under torch.func.vmap with the batch axis at 0: "
            "RuntimeError: vmap: It looks like you're attempting to use a Tensor in some "
            "data-dependent control flow")
        # a plain function of torch ops runs by torch's batching rules; no torch.library
        # op, no op.registration
        plain = results["plain", dtype]
        assert plain.witness("op.vmap").status == "passed"
        assert all(w.witness != "op.registration" for w in plain.witnesses)


def test_vmap_batches_several_inputs_along_axes_of_their_own(tmp_path):
    """x of [2, 3] and w of [3]: 'in the middle' puts x's batch axis at 1, w's at 1."""
    results = run_ops(tmp_path, """
        def scaled(x, w):
            return x * w
    """, """
        [[case]]
        name = "scaled"
        op = "{mod}:scaled"
        reference = "x * w"
        inputs.x = { shape = [2, 3] }
        inputs.w = { shape = [3] }
    """)
    for dtype in DTYPES:
        vmap = results["scaled", dtype].witness("op.vmap")
        assert vmap.status == "passed"
        # first (0, 0), middle (1, 1), last (2, 1): three placements, each a batch of
        # 3 outputs (6 elements) and two paths' gradients (6 + 3), twice compared
        assert vmap.checked == 3 * 3 * (6 + 9 + 9) * 2


@pytest.mark.parametrize("dtype", DTYPES)
def test_skip_checks_turns_either_check_off(dtype):
    """``skip_checks = ["op.vmap"]`` (the case key, read where the case has it): the
    wrong twins then pass, neither check reported."""
    import dataclasses

    # (a wrong fake is what torch.compile plans with: op.compile catches it too)
    for name, checks in [("softmax-vmap-batch-last-wrong", ("op.vmap",)),
                         ("custom-op-fake-shape-wrong", ("op.registration", "op.compile"))]:
        case = dataclasses.replace(CASES[name], expect="pass")
        assert run_case(case, dtype, timeout=None).status == "failed"
        object.__setattr__(case, "skip_checks", checks)   # (a key of its own branch)
        result = run_case(case, dtype, timeout=None)
        assert result.status == "passed", result.message
        assert all(w.witness not in checks for w in result.witnesses)


def test_a_custom_op_without_a_fake_has_those_sub_tests_noted_not_failed(tmp_path):
    """No register_fake: the op does not support the fake-tensor paths (torch.compile);
    test_faketensor and test_aot_dispatch_dynamic are notes, the other two pass. An
    overloaded torch.ops.ns.name is checked by its default overload."""
    results = run_ops(tmp_path, """
        @torch.library.custom_op("gradcheck_vmap_tests::cube", mutates_args=())
        def cube(x: torch.Tensor) -> torch.Tensor:
            return x * x * x


        def _setup(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])


        def _backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 3 * x * x * g


        cube.register_autograd(_backward, setup_context=_setup)
        sin = torch.ops.aten.sin
    """, """
        [[case]]
        name = "cube"
        op = "{mod}:cube"
        reference = "x ** 3"
        inputs.x = { shape = [3] }

        [[case]]
        name = "aten-sin"
        op = "{mod}:sin"
        reference = "sin(x)"
        inputs.x = { shape = [3] }
    """)
    for dtype in DTYPES:
        cube = results["cube", dtype]
        assert cube.status == "passed", cube.message
        registration = cube.witness("op.registration")
        assert registration.status == "passed" and registration.checked == 2
        assert [n.split(" not run")[0] for n in registration.notes] == [
            "torch.library.opcheck's test_faketensor",
            "torch.library.opcheck's test_aot_dispatch_dynamic"]
        assert "no fake impl registered" in registration.notes[0]
        # torch.compile plans with the fake: op.compile is skipped, saying why
        compiled = cube.witness("op.compile")
        assert compiled.status == "skipped" and compiled.message.startswith(
            "torch.compile not supported: the op has no fake impl (register_fake): ")
        sin = results["aten-sin", dtype]
        assert sin.status == "passed", sin.message
        assert sin.witness("op.registration").checked == 4
