"""Cases whose formula is PyTorch code: ``expr_function``, ``reference_function`` (with
``reference_call``/``expr_call``), traced in a child process (gradcheck.tracing.apart);
the library's callables; ``gradcheck trace`` and ``gradcheck functions --aten``."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import gradcheck  # noqa: E402
from gradcheck.base.errors import CaseFileError  # noqa: E402
from gradcheck.cases import load_cases  # noqa: E402
from gradcheck.cli.main import main  # noqa: E402

REFS = '''
import torch

def mlp(x, w):
    return torch.tanh(x @ w).sum(-1)

def attention(q, k, v, scale=1.0):
    return torch.softmax(q @ k.transpose(-1, -2) * scale, -1) @ v

def noisy(x, w):
    print("SECRET-PRINTED-TEXT")
    return torch.tanh(x @ w).sum(-1)

def raising(x, w):
    raise ValueError("boom from the reference")

def unmapped(x, w):
    return torch.special.i0(x).sum()

def shared(x, w):
    h = torch.tanh(x @ w)
    return (h * h).sum(-1) + h.sum(-1)

def gelu(x, approximate="none"):
    return torch.nn.functional.gelu(x, approximate=approximate)

def picked(x, i):
    return torch.index_select(x, 0, i).sum(0)

def quantized(w, step=0.25):
    return torch.round(w / step) * step

def identity(w, step=0.25):
    return w
'''

OPS = '''
import torch

def right(q, k, v):
    return torch.softmax(q @ k.transpose(-1, -2) * 0.5, -1) @ v

def wrong(q, k, v):
    return torch.softmax(q @ k.transpose(-1, -2) * 0.5, -1) @ v * 1.01

class RoundThrough(torch.autograd.Function):
    @staticmethod
    def forward(ctx, w, step):
        return torch.round(w / step) * step

    @staticmethod
    def backward(ctx, g):
        return g, None

class RoundZero(RoundThrough):
    @staticmethod
    def backward(ctx, g):
        return torch.zeros_like(g), None

def straight_through(w, step=0.25):
    return RoundThrough.apply(w, step)

def zero_through(w, step=0.25):
    return RoundZero.apply(w, step)
'''

ATTENTION = '''
inputs.q = [3, 4]
inputs.k = [5, 4]
inputs.v = [5, 2]
reference_function = "refs:attention"
reference_call = "ref(q, k, v, scale=0.5)"
points = 2
'''


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "refs.py").write_text(REFS)
    (tmp_path / "ops.py").write_text(OPS)
    return tmp_path


def write(folder: Path, text: str, name: str = "cases.toml") -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text))
    return path


def by_name(result) -> dict:
    return {c.name: c for c in result.cases}


def test_a_formula_case_from_expr_function_passes_every_witness(folder):
    path = write(folder, '''
        [[case]]
        name = "mlp"
        expr_function = "refs:mlp"
        inputs.x = [4, 8]
        inputs.w = [8, 3]
        points = 2
    ''')
    case, twin = load_cases(path)
    assert case.expr == "sum(tanh(x @ w), axis=1)" and case.op is None
    # its twin runs the code as written, in the op's process, against the trace
    assert (twin.name, twin.op, twin.expr) == ("mlp/as-written", "refs:mlp", case.expr)
    runs = by_name(gradcheck.run([path]))
    assert runs["mlp"].status == "passed", runs["mlp"].message
    assert {w.witness for w in runs["mlp"].witnesses} >= {"engine", "torch", "numeric"}
    assert runs["mlp/as-written"].status == "passed", runs["mlp/as-written"].message
    assert runs["mlp/as-written"].mode == "op"


def test_the_as_written_twin_catches_a_wrong_backward_the_trace_cannot_see(folder):
    """make_fx traces a custom Function's forward only: the formula case from the trace
    passes, and the twin, which runs the code, fails on the Function's backward."""
    (folder / "model.py").write_text(textwrap.dedent('''
        import torch

        class Square(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * x

            @staticmethod
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                return g * x          # wrong: 2 x

        def block(x, w):
            return Square.apply(x @ w).sum(-1)
    '''))
    path = write(folder, '''
        [[case]]
        name = "block"
        expr_function = "model:block"
        inputs.x = [3, 4]
        inputs.w = [4, 2]
        points = 2
    ''')
    runs = by_name(gradcheck.run([path]))
    assert runs["block"].status == "passed", runs["block"].message
    assert runs["block/as-written"].status == "failed"
    assert "backward" in runs["block/as-written"].message


def test_an_op_case_with_reference_function_passes_right_and_fails_wrong(folder):
    path = write(folder, f'''
        [[case]]
        name = "right"
        op = "ops:right"
        {ATTENTION}
        [[case]]
        name = "wrong"
        op = "ops:wrong"
        {ATTENTION}
    ''')
    runs = by_name(gradcheck.run([path]))
    assert runs["right"].status == "passed", runs["right"].message
    assert runs["wrong"].status == "failed"


def test_what_a_reference_function_prints_stays_out_of_the_run(folder, capfd):
    path = write(folder, '''
        [[case]]
        name = "noisy"
        expr_function = "refs:noisy"
        inputs.x = [4, 8]
        inputs.w = [8, 3]
        points = 1
    ''')
    code = main(["run", str(path)])
    out, err = capfd.readouterr()
    assert code == 0, out + err
    assert "SECRET-PRINTED-TEXT" not in out + err


def test_a_function_that_raises_is_an_error_naming_file_case_and_exception(folder):
    path = write(folder, '''
        [[case]]
        name = "raises"
        expr_function = "refs:raising"
        inputs.x = [4, 8]
        inputs.w = [8, 3]
    ''')
    (run,) = gradcheck.run([path]).cases
    assert run.status == "error"
    assert run.name == "raises" and run.file.endswith("cases.toml")
    assert "ValueError: boom from the reference" in run.message
    assert "expr_function 'refs:raising'" in run.message


def test_an_unmapped_aten_op_is_named_with_the_users_line(folder):
    path = write(folder, '''
        [[case]]
        name = "i0"
        expr_function = "refs:unmapped"
        inputs.x = [4, 8]
        inputs.w = [8, 3]
    ''')
    with pytest.raises(CaseFileError) as info:
        load_cases(path)
    text = str(info.value)
    assert "aten.i0" in text and "cases.toml" in text and "'i0'" in text
    assert "refs.py" in text   # the line of the user's function that called it


def test_a_value_used_twice_becomes_a_let_renamed_past_the_cases_own(folder):
    path = write(folder, '''
        [[case]]
        name = "shared"
        expr_function = "refs:shared"
        inputs.x = [3, 4]
        inputs.w = [4, 2]
        let.t1 = "x * 2"
        points = 1
    ''')
    case = load_cases(path)[0]
    names = [n for n, _ in case.lets]
    assert names[0] == "t1" and "t1_" in names
    assert "t1_" in case.expr
    runs = by_name(gradcheck.run([path]))
    assert runs[case.name].status == "passed", runs[case.name].message


def test_expr_call_keywords_and_integer_inputs(folder):
    path = write(folder, '''
        [[case]]
        name = "gelu"
        expr_function = "refs:gelu"
        expr_call = "f(x, approximate='tanh')"
        inputs.x = [5]
        gradient = "random"
        points = 1

        [[case]]
        name = "picked"
        expr_function = "refs:picked"
        inputs.x = [4, 3]
        inputs.i = { shape = [2], dtype = "int64", domain = [0, 4] }
        gradient = "random"
        points = 1
    ''')
    runs = by_name(gradcheck.run([path]))
    assert "tanh" in load_cases(path)[0].expr
    for name in ("gelu", "picked"):
        assert runs[name].status == "passed", runs[name].message


@pytest.mark.parametrize("keys, message", [
    ('expr = "sum(x)"\nexpr_function = "refs:mlp"', "not both"),
    ('expr = "sum(x)"\nexpr_call = "f(x)"', "needs expr_function"),
    ('expr_function = "refs:mlp"\nexpr_call = "g(x, w)"', "must be f applied"),
    ('expr_function = "os:system"', "refused"),
])
def test_the_keys_are_validated_with_file_case_and_line(folder, keys, message):
    path = write(folder, "[[case]]\nname = \"bad\"\ninputs.x = [4, 8]\ninputs.w = [8, 3]\n"
                 + keys + "\n")
    with pytest.raises(CaseFileError) as info:
        load_cases(path)
    assert message in str(info.value)
    assert info.value.line is not None and info.value.case == "bad"


def test_a_trace_is_kept_within_the_process(folder, monkeypatch):
    from gradcheck.tracing import apart
    from gradcheck.tracing.trace import Argument

    calls = []
    real = apart._in_child if apart.FORKS else apart._here

    def counting(*args):
        calls.append(args)
        return real(*args)

    monkeypatch.setattr(apart, "_in_child" if apart.FORKS else "_here", counting)
    arguments = [Argument("x", (2, 7)), Argument("w", (7, 3))]
    first = apart.translate_named("refs:mlp", str(folder / "c.toml"), arguments)
    again = apart.translate_named("refs:mlp", str(folder / "c.toml"), arguments)
    assert first == again and len(calls) == 1


def test_the_library_takes_callables():
    def mlp(x, w):
        return torch.tanh(x @ w).sum(-1)

    assert gradcheck.check(mlp, {"x": [3, 4], "w": [4, 2]}, gradient="random",
                           points=1).status == "passed"

    class Sin(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.sin()

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * x.cos()

    assert gradcheck.check_op(Sin, lambda x: torch.sin(x), {"x": [3]}).status == "passed"
    assert gradcheck.check_op(Sin, lambda x: torch.cos(x), {"x": [3]}).status == "failed"
    gradcheck.assert_op(Sin, torch.sin, {"x": [3]})
    with pytest.raises(CaseFileError, match="aten.i0"):
        gradcheck.check(lambda x: torch.special.i0(x).sum(), {"x": [3]})


def test_functions_aten_lists_the_mapped_ops(capsys):
    from gradcheck.tracing.aten import ATEN

    assert main(["functions", "--aten"]) == 0
    out = capsys.readouterr().out
    assert "aten.mm" in out and "aten._softmax" in out
    assert f"{len(ATEN)} ops mapped" in out


def test_trace_prints_the_graph_and_the_formula(folder, capfd, monkeypatch):
    monkeypatch.chdir(folder)
    code = main(["trace", "refs:noisy", "--input", "x=4,8", "--input", "w=8,3", "-v"])
    out, err = capfd.readouterr()
    assert code == 0, err
    assert "mm = aten.mm(" in out                       # the graph
    assert "output [4]: sum(tanh(x @ w), axis=1)" in out  # the formula
    assert "SECRET-PRINTED-TEXT" not in out + err
    assert main(["trace", "refs:unmapped", "--input", "x=4", "--input", "w=4"]) == 2
    assert "aten.i0" in capfd.readouterr().err


def test_a_surrogate_from_forward_function_and_reference_function(folder):
    """forward_function is what the op's outputs must equal (a quantizer), and
    reference_function the function whose derivative its backward must be (the
    identity); reference_call applies to both."""
    body = '''
        forward_function = "refs:quantized"
        reference_function = "refs:identity"
        reference_call = "ref(w, step=0.25)"
        call = "op(w, step=0.25)"
        inputs.w = [16]
    '''
    path = write(folder, f'''
        [[case]]
        name = "right"
        op = "ops:straight_through"
        {textwrap.dedent(body)}
        [[case]]
        name = "zero"
        op = "ops:zero_through"
        {textwrap.dedent(body)}
    ''')
    right = load_cases(path)[0]
    assert right.surrogate and "round" in right.forward_expr and right.expr == "w"
    runs = by_name(gradcheck.run([path]))
    assert runs["right"].status == "passed", runs["right"].message
    assert runs["zero"].status == "failed"


def test_listing_traces_in_the_tracer_and_leaves_the_judge_without_torch(folder):
    """gradcheck list reads traced cases with torch imported only in the tracer (the
    process every trace is forked from), its failures relayed as case errors."""
    import json
    import subprocess
    import sys

    path = write(folder, '''
        [[case]]
        name = "mlp"
        expr_function = "refs:mlp"
        inputs.x = [4, 8]
        inputs.w = [8, 3]

        [[case]]
        name = "raising"
        expr_function = "refs:raising"
        inputs.x = [4, 8]
        inputs.w = [8, 3]
    ''')
    script = textwrap.dedent(f"""
        import contextlib, io, json, sys
        from gradcheck.cli.main import main
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["list", {str(path)!r}])
        print(json.dumps({{"code": code, "out": out.getvalue(), "err": err.getvalue(),
                          "torch": "torch" in sys.modules}}))
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300, cwd=folder)
    seen = json.loads(proc.stdout.splitlines()[-1])
    assert not seen["torch"]
    assert "sum(tanh(x @ w), axis=1)" in seen["out"]
    assert "mlp/as-written" in seen["out"]
    assert "raising" in seen["err"] and "boom from the reference" in seen["err"]
