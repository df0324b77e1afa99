"""A gallery of training setups for ``gradcheck doctor``: three healthy models and one
broken setup per finding kind. Each factory returns the dict ``gradcheck doctor
examples.doctor_gallery:NAME`` reads (model, loss_fn, batch, and optimizer, train_step,
frozen where needed); :data:`EXPECTED` says which kinds each must report.

    gradcheck doctor examples.doctor_gallery:loss_broadcast
"""

from __future__ import annotations

import torch
from torch import nn

N = 8


def _data(seed: int = 0, d_in: int = 4):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(N, d_in, generator=g), torch.randn(N, 1, generator=g)


def _mlp(seed: int = 0) -> nn.Sequential:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 1))


def mse(model, x, y):
    return ((model(x) - y) ** 2).mean()


def _sgd_step(zero: bool):
    def train_step(model, x, y):
        if zero:
            model.opt.zero_grad()
        mse(model, x, y).backward()
        model.opt.step()
    return train_step


# ------------------------------------------------------------------------ healthy

def healthy_mlp():
    model = _mlp()
    model.opt = torch.optim.SGD(model.parameters(), lr=0.1)
    return {"model": model, "loss_fn": mse, "batch": _data(),
            "optimizer": model.opt, "train_step": _sgd_step(zero=True)}


def healthy_cnn():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                          nn.MaxPool2d(2), nn.Flatten(), nn.Linear(4 * 4 * 4, 3))
    x = torch.randn(N, 1, 8, 8)
    labels = torch.randint(0, 3, (N,))
    return {"model": model, "batch": (x, labels),
            "loss_fn": lambda m, x, t: nn.functional.cross_entropy(m(x), t),
            "optimizer": torch.optim.Adam(model.parameters())}


class TinyTransformer(nn.Module):
    def __init__(self, vocab: int = 20, d: int = 16):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.embed.weight.requires_grad_(False)   # pretrained, frozen on purpose
        self.block = nn.TransformerEncoderLayer(d, nhead=2, dim_feedforward=32,
                                                batch_first=True)
        self.head = nn.Linear(d, vocab)

    def forward(self, tokens):
        # a causal mask holds -inf: softmax makes it finite again, no finding
        mask = nn.Transformer.generate_square_subsequent_mask(tokens.shape[1])
        return self.head(self.block(self.embed(tokens), src_mask=mask, is_causal=True))


def healthy_transformer():
    torch.manual_seed(0)
    model = TinyTransformer()
    tokens = torch.randint(0, 20, (2, 5))

    def loss_fn(m, tokens, targets):
        return nn.functional.cross_entropy(m(tokens).flatten(0, 1), targets.flatten())
    opt = torch.optim.Adam(model.parameters())

    def train_step(m, tokens, targets):   # dropout on: the doctor replays its draws
        opt.zero_grad()
        loss_fn(m, tokens, targets).backward()
        opt.step()
    return {"model": model, "loss_fn": loss_fn, "batch": (tokens, tokens.roll(1, 1)),
            "optimizer": opt, "train_step": train_step, "frozen": ["embed"]}


def mse_loss_broadcast():
    """The same mistake through F.mse_loss (which only warns)."""
    x, y = _data()
    return {"model": _mlp(), "batch": (x, y.squeeze(1)),
            "loss_fn": lambda m, x, y: nn.functional.mse_loss(m(x), y)}


# ------------------------------------------------------------------------ broken

def no_graph():
    """The prediction detached: the loss has no grad_fn."""
    return {"model": _mlp(), "batch": _data(),
            "loss_fn": lambda m, x, y: ((m(x).detach() - y) ** 2).mean()}


def _two_stage(first):
    def loss_fn(model, x, y):
        return ((model[2](first(model, x)) - y) ** 2).mean()
    return {"model": _mlp(), "loss_fn": loss_fn, "batch": _data()}


def cut_by_detach():
    return _two_stage(lambda m, x: m[1](m[0](x)).detach())


def cut_by_numpy():
    return _two_stage(lambda m, x: torch.from_numpy(m[1](m[0](x)).detach().numpy()))


def _no_grad_stage(m, x):
    with torch.no_grad():
        return m[1](m[0](x))


def _inference_stage(m, x):
    with torch.inference_mode():
        return m[1](m[0](x))


def cut_by_no_grad():
    return _two_stage(_no_grad_stage)


def cut_by_data():
    return _two_stage(lambda m, x: m[1](x @ m[0].weight.data.T + m[0].bias.data))


class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 1)
        self.scale = nn.Parameter(torch.tensor(2.0))
        self.unused = nn.Linear(4, 1)

    def forward(self, x):
        return self.lin(x) * self.scale.item()   # .item(): a float, cut from the graph


def cut_by_item_and_unused():
    torch.manual_seed(0)
    return {"model": Scaled(), "loss_fn": mse, "batch": _data()}


def param_frozen():
    model = _mlp()
    model[0].weight.requires_grad_(False)   # by mistake
    return {"model": model, "loss_fn": mse, "batch": _data(),
            "optimizer": torch.optim.SGD(model.parameters(), lr=0.1)}


def grad_zero():
    """A dead ReLU: every pre-activation negative."""
    model = _mlp()
    with torch.no_grad():
        model[0].bias.fill_(-100.0)
    return {"model": model, "loss_fn": mse, "batch": _data()}


def grad_accumulates():
    model = _mlp()
    model.opt = torch.optim.SGD(model.parameters(), lr=0.1)
    return {"model": model, "loss_fn": mse, "batch": _data(), "optimizer": model.opt,
            "train_step": _sgd_step(zero=False)}


def loss_broadcast():
    """pred [N, 1] against target [N]: the difference is [N, N]."""
    x, y = _data()
    return {"model": _mlp(), "loss_fn": mse, "batch": (x, y.squeeze(1))}


def non_finite_forward():
    """log of a negative number: NaN in the loss."""
    return {"model": _mlp(), "batch": _data(),
            "loss_fn": lambda m, x, y: (torch.log(m(x) - 100.0) - y).abs().mean()}


def non_finite_gradient():
    """sqrt at 0 is finite; its derivative there is not (and inf * 0 is NaN)."""
    def loss_fn(m, x, y):
        return mse(m, x, y) + torch.sqrt(m(x) * 0.0).sum()
    return {"model": _mlp(), "loss_fn": loss_fn, "batch": _data()}


def target_requires_grad():
    x, y = _data()
    return {"model": _mlp(), "loss_fn": mse, "batch": (x, y.requires_grad_())}


# each factory and the kinds it must report, exactly
EXPECTED = {
    healthy_mlp: set(), healthy_cnn: set(), healthy_transformer: set(),
    no_graph: {"no-graph"},
    cut_by_detach: {"param-no-grad"}, cut_by_numpy: {"param-no-grad"},
    cut_by_no_grad: {"param-no-grad"}, cut_by_data: {"param-no-grad"},
    cut_by_item_and_unused: {"param-no-grad"},
    param_frozen: {"param-frozen"}, grad_zero: {"grad-zero"},
    grad_accumulates: {"grad-accumulates"}, loss_broadcast: {"loss-broadcast"},
    mse_loss_broadcast: {"loss-broadcast"},
    non_finite_forward: {"non-finite"}, non_finite_gradient: {"non-finite"},
    target_requires_grad: {"target-requires-grad"},
}
