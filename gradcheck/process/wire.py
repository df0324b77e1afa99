"""The data-only channel between the judge and an op's process (:mod:`gradcheck.checking.opcheck.process`).

A message is a JSON header and the raw bytes of the arrays it refers to; nothing on it
is ever unpickled or executed, so what an op's process sends can be wrong data but never
code. One frame::

    8 bytes   header length h, unsigned little-endian
    h bytes   the header: JSON of {"body": <value>, "arrays": [[dtype, shape], ...]}
    ...       each array's bytes in C order, in the order the header lists them

where a value is JSON (objects, lists, text, numbers, true/false/null) in which
``{"$array": k}`` stands for the k-th array. The receiver bounds what it reads before
reading it: the header's length (:data:`MAX_HEADER`), every array's dtype (one of
:data:`DTYPES`, by name) and the bytes of all arrays together (``limit``), so a reply
cannot make the judge allocate more than the call expects. Anything else is
:class:`WireError`.
"""

from __future__ import annotations

import json
import socket
import struct

import numpy as np

from ..base.errors import GradcheckError

MAX_HEADER = 1 << 20      # bytes of a header: names, shapes, messages; never the data
DEFAULT_LIMIT = 1 << 32   # bytes of arrays in one message unless the call says less
_LENGTH = struct.Struct("<Q")
_ARRAY = "$array"


class WireError(GradcheckError):
    """A message that breaks the channel's format or bounds, or a closed channel."""


#: the dtypes an array may have on the channel, by name
DTYPES = ("float16", "float32", "float64", "complex64", "complex128", "bool", "int8",
          "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bfloat16")


def _dtype(name) -> np.dtype:
    if name not in DTYPES:
        raise WireError(f"an array of dtype {name!r}, which the channel does not carry")
    if name == "bfloat16":   # (ml_dtypes imported only for a run that has one)
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def _flatten(value, arrays: list):
    """``value`` with every array replaced by its placeholder (appended to ``arrays``)."""
    if isinstance(value, np.ndarray):
        arrays.append(value)
        return {_ARRAY: len(arrays) - 1}
    if isinstance(value, dict):
        return {str(k): _flatten(v, arrays) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_flatten(v, arrays) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def encode(body) -> list[bytes]:
    """The frame of ``body`` as a list of byte strings (sent in order)."""
    arrays: list[np.ndarray] = []
    flat = _flatten(body, arrays)
    kinds = []
    for a in arrays:
        kinds.append([_dtype(a.dtype.name).name, list(a.shape)])
    header = json.dumps({"body": flat, "arrays": kinds}, allow_nan=True).encode()
    if len(header) > MAX_HEADER:
        raise WireError(f"a header of {len(header)} bytes is over {MAX_HEADER}")
    return [_LENGTH.pack(len(header)), header,
            *(np.ascontiguousarray(a).tobytes() for a in arrays)]


def send(sock: socket.socket, body) -> None:
    for part in encode(body):
        sock.sendall(part)


def exactly(sock: socket.socket, n: int, buf=None):
    """``n`` bytes from ``sock``, read into ``buf`` (a new bytearray when None)."""
    buf = bytearray(n) if buf is None else buf
    view, got = memoryview(buf).cast("B"), 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise WireError("the channel closed mid-message" if got else "the channel closed")
        got += k
    return buf


def recv(sock: socket.socket, limit: int = DEFAULT_LIMIT):
    """The next message's body, its arrays in place; ``limit``: the most bytes of arrays
    accepted (checked from the header, before any array is read)."""
    (size,) = _LENGTH.unpack(exactly(sock, _LENGTH.size))
    if size > MAX_HEADER:
        raise WireError(f"a header of {size} bytes is over {MAX_HEADER}")
    try:
        header = json.loads(exactly(sock, size))
        kinds = [(_dtype(name), tuple(int(n) for n in shape))
                 for name, shape in header["arrays"]]
        body = header["body"]
    except WireError:
        raise
    except (ValueError, KeyError, TypeError, RecursionError) as exc:   # (the JSON's)
        raise WireError(f"a malformed header ({type(exc).__name__})") from None
    total = 0
    for dtype, shape in kinds:
        if any(n < 0 for n in shape):
            raise WireError(f"a negative shape {list(shape)}")
        total += dtype.itemsize * int(np.prod(shape, dtype=object))
    if total > limit:
        raise WireError(f"{total} bytes of arrays, over the {limit} this reply may hold")
    arrays = []
    for dtype, shape in kinds:   # read straight into the arrays: no copy
        a = np.empty(shape, dtype)
        if a.nbytes:
            exactly(sock, a.nbytes, a.reshape(-1).view(np.uint8))
        arrays.append(a)
    try:
        return _unflatten(body, arrays)
    except RecursionError:
        raise WireError("a header nested too deep") from None


def _unflatten(value, arrays: list):
    if isinstance(value, dict):
        if set(value) == {_ARRAY}:
            k = value[_ARRAY]
            if not isinstance(k, int) or not 0 <= k < len(arrays):
                raise WireError(f"a reference to array {k!r} of {len(arrays)}")
            return arrays[k]
        return {k: _unflatten(v, arrays) for k, v in value.items()}
    if isinstance(value, list):
        return [_unflatten(v, arrays) for v in value]
    return value
