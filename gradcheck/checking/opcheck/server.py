"""The op's side of :mod:`gradcheck.checking.opcheck.process`: the process a user's op runs in.

It is forked from the judge before the op's module is imported, made a world of its
own (its own process group; stdin from /dev/null, stdout and stderr into the capture
the judge reads; no CI control variable in its environment; no file descriptor of the
judge's but the channel), then imports the op and answers the judge's calls over the
data-only channel (:mod:`gradcheck.process.wire`): the op's outputs and gradients as plain
arrays, read through the tensors' storage rather than through methods a subclass of
``torch.Tensor`` can override. Whatever the op patches, prints or leaves behind dies
with this process. Every exception here, whoever raised it, is the op's: the reply says
so, and the judge makes it the op's failure.
"""

from __future__ import annotations

import os
import sys
import traceback


from ...process import wire
from ...process.apart import become_apart  # noqa: F401  (the op's process is made apart)
from .calls import backward_method
from .storage import describe, plain

_MESSAGE = 8000   # characters of an exception's text and traceback sent back


def spawned(channel: int, judge: int) -> None:
    """The op's process started as a new interpreter (``python -c``; where the judge may
    not fork: it holds a CUDA context): its stdout and stderr are the capture already,
    and its first message is the case, pickled by the judge (the judge sends it; nothing
    the op's process sends is ever unpickled)."""
    import pickle
    import socket
    import struct

    sock = socket.socket(fileno=channel)
    become_apart(channel, 1, judge)
    try:
        (size,) = struct.unpack("<Q", wire.exactly(sock, 8))
        case, dtype = pickle.loads(wire.exactly(sock, size))
    except wire.WireError:   # the judge is gone
        os._exit(0)
    try:
        main(sock, case, dtype)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


def main(sock, case, dtype: str) -> None:
    """Import the op, then answer calls until the judge closes the channel."""
    try:
        server = Server(case, dtype)
        info = server.info()
    except BaseException as exc:   # the import's failure (or refusal) is the reply
        _send(sock, {"load_error": _error(exc)})
        return
    _send(sock, {"info": info})
    while True:
        try:
            request = wire.recv(sock)
        except wire.WireError:   # the judge is done
            return
        try:
            reply = getattr(server, "call_" + request.pop("call"))(**request)
        except BaseException as exc:   # SystemExit, KeyboardInterrupt: the op's too
            reply = {"error": _error(exc)}
        _send(sock, reply)


def _send(sock, reply: dict) -> None:
    """``reply`` on the channel; the op's error instead where it cannot travel (what
    the op returned is no array of a dtype the channel carries)."""
    try:
        parts = wire.encode(reply)
    except Exception as exc:
        parts = wire.encode({"error": _error(exc)})
    for part in parts:
        sock.sendall(part)


def _error(exc: BaseException) -> dict:
    from .loader import OpImportError, OpRefused
    from ...process.budgets import exhausted, out_of_memory
    from ...base.errors import describe_exception

    kind = ("refused" if isinstance(exc, OpRefused) else
            "import" if isinstance(exc, OpImportError) else
            "memory" if out_of_memory(exc) else "raised")
    text = (describe_exception(exc) if kind == "raised" else
            exhausted(exc) if kind == "memory" else str(exc))
    tb = traceback.format_exc(limit=-3) if kind == "raised" else ""
    return {"kind": kind, "type": type(exc).__name__, "message": text[:_MESSAGE],
            "traceback": tb[-_MESSAGE:]}


class Server:
    """The op, its :class:`~gradcheck.checking.opcheck.loader.Runner`, and the point it is at."""

    def __init__(self, case, dtype: str):
        from .loader import kind_of, load

        self.case, self.dtype = case, dtype
        obj = (load(case.op, case.file, case.allow_op_modules) if isinstance(case.op, str)
               else case.op)
        self.kind = kind_of(obj)
        self._runner = None
        self.leaves: dict = {}
        self.outs: tuple = ()

    def info(self) -> dict:
        from .loader import arguments
        from .calls import argument_count

        positional, keywords = arguments(self.case)
        from .batching import unsupported
        from .loader import is_library_op

        return {"name": str(self.kind.name), "engine": bool(self.kind.engine),
                "function": bool(self.kind.function),
                "library": bool(is_library_op(self.kind.obj)),
                # why vmap cannot be asked of the op (op.vmap's note), or None
                "no_vmap": None if self.kind.engine else unsupported(self.kind),
                "count": argument_count(self.kind.obj, positional, keywords)}

    @property
    def runner(self):
        from .loader import Runner

        if self._runner is None:
            self._runner = Runner(self.case, self.kind, self.dtype, self.case.device)
        return self._runner

    # ------------------------------------------------------------------ the calls

    def call_forward(self, point: dict) -> dict:
        self.leaves = self.runner.leaves(point)
        self.outs = self.runner.forward(self.leaves)
        return {"outputs": [plain(y) for y in self.outs],
                "leaves": {n: describe(t) for n, t in self.leaves.items()}}

    def call_vjp(self, vs: list, path: str = "grad") -> dict:
        return {"grads": self._vjp(vs, path)}

    def call_vjps(self, rows: list) -> dict:
        return {"rows": [self._vjp(vs, "grad") for vs in rows]}

    def _vjp(self, vs: list, path: str) -> dict:
        if path == "backward" and not self.kind.engine:
            grads = backward_method(self.runner, self.leaves, self.outs, vs)
        else:
            grads = self.runner.vjp(self.leaves, self.outs, vs)
        return {n: plain(g) for n, g in grads.items()}

    def call_raw_backward(self, vs: list) -> dict:
        raw = self.runner.raw_backward(self.outs, vs)
        return {"raw": None if raw is None else [describe(g) for g in raw]}

    def call_inplace(self, point: dict, vs: list) -> dict:
        """op.inplace's calls: a fresh forward and backward, the inputs and the
        cotangents read after each, and a second forward's outputs."""
        runner = self.runner
        leaves = runner.leaves(point)
        outs = runner.forward(leaves)
        after_forward = {n: plain(t) for n, t in leaves.items()}
        cotangents = runner.cotangents(vs)
        runner.vjp(leaves, outs, vs, tensors=cotangents)
        return {"after_forward": after_forward,
                "after_backward": {n: plain(t) for n, t in leaves.items()},
                "cotangents": [plain(t) for t in cotangents],
                "again": [plain(y) for y in runner.forward(runner.leaves(point))]}

    def call_layouts(self, point: dict, vs: list) -> dict:
        from .calls import layouts

        return {"layouts": {} if self.kind.engine else layouts(self.runner, point, vs)}

    def call_expanded(self, point: dict, axes: dict, vs: list) -> dict:
        from .calls import expanded

        return expanded(self.runner, point, axes, vs)

    def call_contract(self, point: dict, vs: list, plan: dict) -> dict:
        from .contract_op import contract

        return contract(self.runner, point, vs, plan)

    def call_torch_gradcheck(self, point: dict, settings: dict, order: int,
                             chars: int) -> dict:
        from .calls import torch_gradcheck

        return torch_gradcheck(self.runner, point, settings, order, chars)

    def call_double(self, vs: list, us: dict) -> dict:
        from .calls import second_derivatives

        return {"got": second_derivatives(self.runner, self.leaves, vs, us)}

    def call_jvp(self, point: dict, directions: list) -> dict:
        from .forward_mode import tangents

        return tangents(self.runner, self.kind, point, directions)

    def call_over_reverse(self, point: dict, vs: list, us: dict) -> dict:
        from .forward_mode import over_reverse

        return over_reverse(self.runner, self.kind, point, vs, us)

    def call_vmap(self, points: list, vs: list) -> dict:
        from .batching import vmapped

        return vmapped(self.runner, points, vs)

    def call_compile(self, point: dict, vs: list, plan: dict) -> dict:
        from .compile_op import compiled

        return compiled(self.runner, point, vs, plan)

    def call_registration(self, point: dict) -> dict:
        from .batching import registration

        return registration(self.runner, point)
