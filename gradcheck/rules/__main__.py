"""``python -m gradcheck.rules``: the expression language, one line per row of the table
(the documentation of the functions, generated from the rows themselves)."""

from __future__ import annotations

from .table import RULES


def signature(rule) -> str:
    """How a formula spells the row: ``a + b``, ``-x``, ``sum(x, axis=None, ...)``."""
    names = ["x"] if rule.arity == 1 else ["a", "b", "c"][: rule.arity]
    if rule.symbol is not None:
        return f"{rule.symbol}x" if rule.arity == 1 else f" {rule.symbol} ".join(names)
    params = [f"{p.name}={p.default!r}" for p in rule.params]
    return f"{rule.name}({', '.join(names + params)})"


def main() -> None:
    rows = [(signature(r), r.doc, r.engine.grad_fn) for r in RULES.values()]
    width = max(len(s) for s, _, _ in rows)
    for sig, doc, grad_fn in rows:
        node = grad_fn if isinstance(grad_fn, str) else "(by operands)" if grad_fn else "-"
        print(f"{sig:<{width}}  {node:<20}  {doc}".rstrip())


if __name__ == "__main__":
    main()
