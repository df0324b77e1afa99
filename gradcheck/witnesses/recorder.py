"""What a witness's run records of its deciding rows (the rows a tie can flip: sort,
topk, max, comparisons...), for :mod:`gradcheck.checking.decisions` to judge the branches
it took: each such row's arguments as the witness computed them."""

from __future__ import annotations

import numpy as np

#: rows whose arguments of more elements than this are not recorded (a layer's size:
#: recording keeps the witness's arrays alive past its backward)
RECORDED = 1 << 20

def deciding(node) -> bool:
    return node.rule.hazard is not None and node.size <= RECORDED


class Recorder:
    """Keeps, for a witness's run, each deciding row's arguments as the witness computed
    them (detached: no graph is kept alive); :meth:`arrays` gives them in float64 and
    :meth:`perms` the permutation the witness's library chose for each sort and topk
    (``order(node, tensor)``), both made only when a point is judged."""

    def __init__(self, to_numpy, order):
        self.to_numpy, self.order = to_numpy, order
        self.args: dict[int, tuple] = {}

    def wrap(self, apply):
        def recorded(node, args):
            if deciding(node):
                self.args[id(node)] = (node, [a.detach() if hasattr(a, "detach") else a
                                              for a in args])
            return apply(node, args)

        return recorded

    def arrays(self) -> dict[int, list]:
        return {key: [self._array(a) for a in args]
                for key, (_node, args) in self.args.items()}

    def perms(self) -> dict[int, np.ndarray]:
        return {key: np.asarray(self.order(node, args[0]))
                for key, (node, args) in self.args.items() if node.op in ("sort", "topk")}

    def _array(self, a):
        if isinstance(a, (int, float, bool)) or a is None:
            return a
        out = self.to_numpy(a)
        return out if out is None else np.asarray(out)
