"""The pictures of the HTML report, drawn with matplotlib from a witness's
:class:`~gradcheck.base.result.ErrorMap` s, as PNG images inline (``data:`` URLs): nothing to
fetch, nothing a page could load from elsewhere.

- :func:`heat_map`: the signed (obtained - expected) / tolerance over a quantity's 2-D
  view (or a Jacobian), a diverging colour map centred at 0 whose scale is linear within
  the tolerance (|ratio| <= 1, pale) and logarithmic beyond it, up to the largest ratio
  (at least 10); red where the witness gives too much, blue too little, grey no element.
- :func:`histogram`: how many elements err by how many tolerances, with the tolerance
  (1) marked: a healthy witness has every bar left of the line.

matplotlib is imported here only, inside the functions (the CLI starts without it),
through its object API with the Agg canvas: no display, no pyplot state. Titles come from
case files (quantity names): set as plain text (no mathtext), on one line."""

from __future__ import annotations

import base64
import io
import math

from ..base.result import HIST_EXPONENTS
from .scrub import one_line

DPI = 80
_LARGEST = 1e6      # the colour scale's end at most (beyond: the end colour)


def _figure(width: float, height: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _png(fig) -> str:
    """The figure as a ``data:image/png;base64,...`` URL."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def scale(grid) -> float:
    """The colour scale's end: the largest |ratio| of ``grid`` (at least 10, at most
    1e6; infinite ones count as the end; None, no element, none)."""
    cells = [x for row in grid for x in row if x is not None and x == x]
    finite = [abs(x) for x in cells if not math.isinf(x)]
    beyond = any(math.isinf(x) for x in cells)
    largest = max(finite, default=0.0)
    return _LARGEST if beyond else min(_LARGEST, max(10.0, largest))


def colour_ticks(end: float, most: int) -> list[float]:
    """0, ±1 and ±powers of ten up to ``end`` (the largest included), about ``most``
    on each side."""
    top = max(0, math.floor(math.log10(end) + 1e-9))
    step = max(1, math.ceil(top / most))
    positive = [10.0 ** k for k in range(0, top + 1, step)]
    if top % step:
        positive.append(10.0 ** top)
    return [-t for t in reversed(positive)] + [0.0] + positive


def _tick_label(t: float) -> str:
    if t == 0:
        return "0"
    k = round(math.log10(abs(t)))
    return ("-" if t < 0 else "") + ("1" if k == 0 else f"1e{k}")


def heat_map(m) -> str:
    """The map of ``m`` (an :class:`~gradcheck.base.result.ErrorMap`) as a PNG data URL."""
    import numpy as np
    from matplotlib import colormaps
    from matplotlib.colors import SymLogNorm

    grid = np.array([[np.nan if x is None else x for x in row] for row in m.grid],
                    dtype=float)
    end = scale(m.grid)
    grid = np.clip(grid, -end, end)              # inf to the end colour, NaN stays
    rows, cols = m.view
    strip = grid.shape[0] == 1 and rows == 1
    fig = _figure(6.4, 2.4 if strip else 4.4)
    ax = fig.add_subplot()
    cmap = colormaps["RdBu_r"].with_extremes(bad="#bbbbbb")
    # a cell of one element is labelled by its index at its centre; a cell of many
    # spans its elements' indices, edge to edge
    one = tuple(m.cell) == (1, 1)
    extent = (-0.5, cols - 0.5, rows - 0.5, -0.5) if one else (0, cols, rows, 0)
    image = ax.imshow(np.ma.masked_invalid(grid), cmap=cmap, aspect="auto",
                      interpolation="nearest", extent=extent,
                      norm=SymLogNorm(linthresh=1.0, linscale=1.0, vmin=-end, vmax=end))
    bar = fig.colorbar(image, ax=ax, extend="both" if end >= _LARGEST else "neither")
    ticks = colour_ticks(end, 2 if strip else 4)
    bar.set_ticks(ticks, labels=[_tick_label(t) for t in ticks])
    bar.set_label("(obtained - expected) / tolerance", parse_math=False,
                  fontsize=8 if strip else 10)
    shape = "×".join(map(str, m.shape)) or "scalar"
    cells = f"; a cell is {m.cell[0]}×{m.cell[1]} elements" if m.cell != (1, 1) else ""
    ax.set_title(one_line(f"{m.quantity} [{shape}]: {m.mismatched} of {m.total} outside"
                          f"{cells}")[:110], parse_math=False, fontsize=10)
    if m.kind == "jacobian":
        ax.set_xlabel("input element (flattened)", parse_math=False)
        ax.set_ylabel("output element", parse_math=False)
    else:
        ax.set_xlabel("last index" if len(m.shape) >= 1 else "", parse_math=False)
        ax.set_ylabel("leading indices (folded)" if len(m.shape) >= 2 else "",
                      parse_math=False)
    from matplotlib.ticker import MaxNLocator

    for axis in (ax.xaxis, ax.yaxis):   # indices: whole numbers (a 4×4 map has no 0.5)
        axis.set_major_locator(MaxNLocator(integer=True))
    if strip:
        ax.set_yticks([])
    return _png(fig)


def histogram(m) -> str:
    """The histogram of ``m``'s |obtained - expected| / tolerance as a PNG data URL."""
    import numpy as np

    edges = np.array(HIST_EXPONENTS)
    step = edges[1] - edges[0]
    # the end bins (at or below the first edge, above the last) drawn a bin wide
    lefts = np.concatenate([[edges[0] - step], edges])
    fig = _figure(6.4, 3.0)
    ax = fig.add_subplot()
    counts = np.array(m.counts, dtype=float)
    colours = ["#c0392b" if left >= 0 else "#2c7fb8" for left in lefts]
    ax.bar(lefts, counts, width=step, align="edge", color=colours, edgecolor="white")
    ax.axvline(0.0, color="black", linestyle="--", linewidth=1.2)
    ax.text(0.05, 0.97, "tolerance", transform=ax.get_xaxis_transform(), va="top",
            fontsize=9, parse_math=False)
    ax.set_yscale("symlog", linthresh=1.0)
    ax.set_ylim(bottom=0)
    ticks = np.arange(edges[0], edges[-1] + 1, 2)
    ax.set_xticks(ticks, [f"1e{int(t)}" if t else "1" for t in ticks])
    ax.set_xlim(lefts[0], edges[-1] + step)
    ax.set_xlabel("|obtained - expected| / tolerance (log; the end bars: at or below "
                  "1e-6, above 1e6)", parse_math=False, fontsize=9)
    ax.set_ylabel("elements", parse_math=False)
    share = m.mismatched / m.total if m.total else 0.0
    ax.set_title(one_line(f"{m.quantity}: {share:.1%} of {m.total} elements above the "
                          "tolerance")[:110], parse_math=False, fontsize=10)
    return _png(fig)
