"""A user's function traced where its code may run: never in the judge's process.

A case file's ``reference_function``/``forward_function``/``expr_function`` names
``module:function``; tracing it imports and runs the user's code. The judge forks a
child (:func:`gradcheck.process.apart.become_apart`: its own process group, stdout and
stderr into a capture that is thrown away, no descriptor of the judge's but the
channel), which imports the function as an op is imported
(:func:`gradcheck.project.imports.load`: a file of the project, or an allowed module),
traces it (:func:`.trace.trace`) and sends back only :meth:`.trace.Translation.as_dict`:
strings, over the data-only channel (:mod:`gradcheck.process.wire`). The judge checks
their form here and parses the text with its safe formula parser, as it would a
formula the user wrote. Where the judge has not imported torch (reading case files for
``gradcheck list``), the children are forked from the tracer instead: a process forked
once from the judge that imports torch and runs no user code itself, so the judge stays
light (:func:`_via_tracer`). Off Linux (where a process that imported torch may not fork)
the function is traced in the judge's own process, as an op is served there.

A library caller's callable is their own code in their own process already: it is
traced here directly (:func:`translate_callable`), and comes back in the same form.

Traces are kept per process, by (case file's folder, spec, call, input names, shapes
and kinds): a case's several dtypes, or a file read twice, trace once.
"""

from __future__ import annotations

import gc
import os
import select
import socket
import sys
import threading
import time
import traceback
import warnings
from typing import Any, Callable, Sequence

from ..base.errors import describe_exception
from ..process import wire
from ..process.children import Capture, how_ended
from .trace import Argument
from .values import TraceError

FORKS = sys.platform.startswith("linux") and hasattr(os, "memfd_create")
TIME_LIMIT = 120.0          # seconds a trace may take, import included
_LIMIT = 1 << 24            # bytes of a reply (text only: no arrays)
_MESSAGE = 4000             # characters of an error's text sent back

_CACHE: dict[tuple, dict | "TraceFailed"] = {}
_LOCK = threading.Lock()


class TraceFailed(Exception):
    """The function could not be traced: it could not be imported (or was refused), it
    raised, its child died, or an ATen op it uses has no mapping. The message says
    which, in words a case error can quote."""


def kind_of_dtype(dtype: str | None) -> str:
    """A case input's dtype as an :class:`~.trace.Argument` kind."""
    if dtype is None:
        return "float"
    return "bool" if dtype == "bool" else "int"


def translate_named(spec: str, case_file: str, arguments: Sequence[Argument],
                    call=None, allowed: tuple[str, ...] = ()) -> dict:
    """The translation (:meth:`Translation.as_dict`) of the function ``spec``
    (``module:function``, found from ``case_file``'s folder) called with tensors of
    ``arguments`` (positionally, or as ``call``, a parsed call: see :func:`bound`).

    Raises:
        TraceFailed: it could not be traced (the message says why).
    """
    folder = os.path.dirname(os.path.abspath(case_file)) if case_file else os.getcwd()
    key = (folder, spec, repr(call), tuple((a.name, tuple(a.shape), a.kind)
                                           for a in arguments), tuple(allowed))
    with _LOCK:
        known = _CACHE.get(key)
    if known is None:
        try:
            known = (_in_child if FORKS else _here)(spec, case_file, arguments, call,
                                                    allowed)
        except TraceFailed as exc:
            known = exc
        with _LOCK:
            _CACHE[key] = known
    if isinstance(known, TraceFailed):
        raise TraceFailed(str(known))
    return known


def translate_callable(fn: Callable, arguments: Sequence[Argument], call=None) -> dict:
    """A library caller's own function traced in their process, as :func:`translate_named`
    gives it."""
    return checked(_serve(lambda: fn, arguments, call))


def bound(fn: Callable, arguments: Sequence[Argument], call=None) -> Callable:
    """``fn`` as a function of the inputs' tensors in ``arguments``' order: called with
    them all positionally (``call`` None), or as ``call`` says: (positional, keywords)
    of :class:`~gradcheck.cases.model.OpArgument`-like items (``.input``: an input's
    name, else ``.value``)."""
    if call is None:
        return fn
    names = [a.name for a in arguments]
    positional, keywords = call

    def called(*tensors):
        given = dict(zip(names, tensors))

        def value(a):
            return given[a.input] if a.input is not None else a.value

        return fn(*[value(a) for a in positional], **{k: value(a) for k, a in keywords})

    called.__name__ = getattr(fn, "__name__", "function")
    return called


def _serve(find: Callable[[], Callable], arguments: Sequence[Argument], call) -> dict:
    """Find the function, trace it: the reply (``translation`` or ``error``)."""
    from ..project.imports import OpImportError
    from .trace import trace

    try:
        fn = find()
    except OpImportError as exc:
        return {"error": {"kind": "import", "message": str(exc)[:_MESSAGE]}}
    except BaseException as exc:   # a module's own failure while it is imported
        return {"error": {"kind": "raised", "message": describe_exception(exc)[:_MESSAGE]}}
    try:
        return {"translation": trace(bound(fn, arguments, call), arguments).as_dict()}
    except TraceError as exc:
        return {"error": {"kind": "trace", "message": str(exc)[:_MESSAGE]}}
    except BaseException as exc:   # the function raised (SystemExit too: it is the user's)
        return {"error": {"kind": "raised", "message": (describe_exception(exc)
                                                        + _user_line(exc))[:_MESSAGE]}}


def _user_line(exc: BaseException) -> str:
    """`` (at file:line: code)``: the last frame of the traceback outside gradcheck and
    torch, where the user's function raised."""
    import torch

    skip = (os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
            os.path.dirname(torch.__file__))
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if not os.path.abspath(frame.filename).startswith(skip):
            return f" (at {frame.filename}:{frame.lineno}: {(frame.line or '').strip()})"
    return ""


def _here(spec, case_file, arguments, call, allowed) -> dict:
    from ..project.imports import load

    return checked(_serve(lambda: load(spec, case_file, allowed, what="function"),
                          arguments, call))


def _in_child(spec, case_file, arguments, call, allowed) -> dict:
    """Trace in a forked child, made apart: forked from the judge where it has imported
    torch already (a run), else from the tracer (:func:`_via_tracer`), so that reading
    case files (``gradcheck list``) leaves the judge without torch."""
    if "torch" in sys.modules:
        return _forked(spec, case_file, arguments, call, allowed)
    return _via_tracer(spec, case_file, arguments, call, allowed)


# long: one fork, the child's side and the judge's, and the ending in every case
def _forked(spec, case_file, arguments, call, allowed) -> dict:
    """Trace in a child forked from this process, made apart; the reply read with a
    time limit."""
    from ..process.apart import become_apart
    from ..project.imports import load

    capture = Capture("gradcheck-trace-output")
    ours, theirs = socket.socketpair()
    judge = os.getpid()
    sys.stdout.flush()
    sys.stderr.flush()
    gc.freeze()   # (as the op's process: no copy of the judge's heap page by page)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
    except BaseException:
        gc.unfreeze()
        ours.close()
        theirs.close()
        capture.close()
        raise
    if pid == 0:   # the child: never returns into the judge's code
        try:
            ours.close()
            become_apart(theirs.fileno(), capture.fd, judge)
            reply = _serve(lambda: load(spec, case_file, allowed, what="function"),
                           arguments, call)
            try:
                wire.send(theirs, reply)
            except Exception as exc:   # (text that JSON cannot carry)
                wire.send(theirs, {"error": {"kind": "raised",
                                             "message": describe_exception(exc)}})
        finally:
            os._exit(0)
    gc.unfreeze()
    theirs.close()
    try:
        return checked(_reply(ours, pid))
    finally:
        ours.close()
        try:
            os.killpg(pid, 9)
        except OSError:
            pass
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
        capture.close()   # what the function printed: never the run's output


def _reply(sock: socket.socket, pid: int) -> Any:
    """The child's one message, or TraceFailed when it dies or takes too long."""
    deadline = time.monotonic() + TIME_LIMIT
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TraceFailed(f"tracing took longer than {TIME_LIMIT:g} seconds")
        ready, _, _ = select.select([sock], [], [], min(left, 1.0))
        if ready:
            break
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            raise TraceFailed("its process died while tracing "
                              f"({how_ended(os.waitstatus_to_exitcode(status))})")
    sock.settimeout(max(deadline - time.monotonic(), 1.0))
    try:
        return wire.recv(sock, _LIMIT)
    except (wire.WireError, OSError) as exc:
        time.sleep(0.05)
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            raise TraceFailed("its process died while tracing "
                              f"({how_ended(os.waitstatus_to_exitcode(status))})") from None
        raise TraceFailed(f"its process sent no valid reply: {exc}") from None


def checked(reply: Any) -> dict:
    """The translation of a reply, its form checked (strings where strings are due);
    TraceFailed with the reply's error."""
    if not isinstance(reply, dict):
        raise TraceFailed("the tracing process sent no valid reply")
    if "error" in reply:
        error = reply["error"]
        message = str(error.get("message", "")) if isinstance(error, dict) else ""
        kind = error.get("kind") if isinstance(error, dict) else ""
        raise TraceFailed(message if kind in ("import", "trace")
                          else f"raised {message}" if kind == "raised"
                          else message or "tracing failed")
    t = reply.get("translation")
    ok = (isinstance(t, dict) and _strings(t.get("outputs")) and _strings(t.get("ops"))
          and isinstance(t.get("graph"), str) and isinstance(t.get("lets"), list)
          and all(isinstance(p, list) and len(p) == 2 and _strings(p) for p in t["lets"]))
    if not ok or not t["outputs"]:
        raise TraceFailed("the tracing process sent a malformed translation")
    return {"outputs": list(t["outputs"]), "lets": [tuple(p) for p in t["lets"]],
            "graph": t["graph"], "ops": list(t["ops"])}


def _strings(value) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


# --------------------------------------------------------------------------- the tracer

_TRACER: list = []           # [pid, socket] of this judge's tracer, once started


def _via_tracer(spec, case_file, arguments, call, allowed) -> dict:
    """The trace, asked of the tracer: a process forked once from the judge that
    imports torch (once, not in every child) and forks a child, made apart, for each
    trace (:func:`_forked`): no user code runs in the tracer itself, and each
    function is traced in a process of its own."""
    request = {"spec": spec, "case_file": case_file, "allowed": list(allowed),
               "arguments": [[a.name, list(a.shape), a.kind] for a in arguments],
               "call": _call_data(call)}
    with _LOCK:
        if not _TRACER:
            _start_tracer()
        pid, sock = _TRACER
        try:
            wire.send(sock, request)
            return checked(_reply(sock, pid))
        except (TraceFailed, OSError, wire.WireError):
            _stop_tracer()   # a tracer that failed to answer is not asked again
            raise


def _start_tracer() -> None:
    ours, theirs = socket.socketpair()
    judge = os.getpid()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        try:
            ours.close()
            _tracer_main(theirs, judge)
        finally:
            os._exit(0)
    theirs.close()
    _TRACER[:] = [pid, ours]


def _tracer_main(sock: socket.socket, judge: int) -> None:
    """The tracer's loop: a request in, :func:`_forked`'s translation (or its failure)
    out, until the judge closes the channel."""
    import signal

    from ..process.children import die_with

    die_with(judge)
    null = os.open(os.devnull, os.O_RDWR)   # nothing of the tracer's reaches the run's
    for fd in (0, 1, 2):                     # output (its children capture their own)
        os.dup2(null, fd)
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # (the judge's interrupt, not its)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        import torch  # noqa: F401  (once: every child forked from here has it)
    except ImportError:
        pass
    while True:
        try:
            request = wire.recv(sock, _LIMIT)
        except (wire.WireError, OSError):
            return
        try:
            arguments = [Argument(n, tuple(shape), kind)
                         for n, shape, kind in request["arguments"]]
            reply = {"translation": _forked(
                request["spec"], request["case_file"], arguments,
                _call_from(request["call"]), tuple(request["allowed"]))}
        except TraceFailed as exc:
            reply = {"error": {"kind": "trace", "message": str(exc)[:_MESSAGE]}}
        except Exception as exc:
            reply = {"error": {"kind": "raised", "message": describe_exception(exc)}}
        wire.send(sock, reply)


def _stop_tracer() -> None:
    if _TRACER:
        pid, sock = _TRACER
        _TRACER.clear()
        sock.close()
        try:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        except OSError:
            pass


def _call_data(call):
    """A parsed call as plain data: [[input, value]...] positional, [[key, input,
    value]...] keywords (None: no call)."""
    if call is None:
        return None
    positional, keywords = call
    return {"positional": [[a.input, a.value] for a in positional],
            "keywords": [[k, a.input, a.value] for k, a in keywords]}


def _call_from(data):
    from types import SimpleNamespace as Given

    if data is None:
        return None
    return (tuple(Given(input=i, value=v) for i, v in data["positional"]),
            tuple((k, Given(input=i, value=v)) for k, i, v in data["keywords"]))
