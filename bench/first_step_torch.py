"""PyTorch's start of examples/transformer.gsl's model, for bench/first_step.sh.

The same model (B=16, S=16, V=16, D=32, 4 heads of 8, FFN 64, two pre-norm
blocks, causal attention, tanh GELU, untied embeddings with learned
positions), the same copy task batch and Adam(lr=0.003), CPU eager, one
thread. After the first training step (forward, backward, update) it
appends one line to LOG and exits: the bench measures the time from the
process's start to that line, as it does for `gsl run --log`.

usage: python3 first_step_torch.py LOG
"""
import sys

import torch

torch.set_num_threads(1)
torch.manual_seed(0)
B, S, V, D, NH, HD, H = 16, 16, 16, 32, 4, 8, 64


def glorot(*shape):
    w = torch.empty(*shape)
    fan_in = shape[0]
    fan_out = 1
    for s in shape[1:]:
        fan_out *= s
    bound = (6.0 / (fan_in + fan_out)) ** 0.5
    return torch.nn.Parameter(w.uniform_(-bound, bound))


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lna = torch.nn.LayerNorm(D)
        self.wq, self.wk, self.wv = glorot(D, NH, HD), glorot(D, NH, HD), glorot(D, NH, HD)
        self.wo = glorot(NH, HD, D)
        self.lnf = torch.nn.LayerNorm(D)
        self.w1, self.b1 = glorot(D, H), torch.nn.Parameter(torch.zeros(H))
        self.w2, self.b2 = glorot(H, D), torch.nn.Parameter(torch.zeros(D))

    def forward(self, h, causal):
        x = self.lna(h)
        q = torch.einsum("bsd,dnh->bnsh", x, self.wq)
        k = torch.einsum("bsd,dnh->bnsh", x, self.wk)
        v = torch.einsum("bsd,dnh->bnsh", x, self.wv)
        scores = torch.einsum("bnqh,bnkh->bnqk", q, k) * HD ** -0.5
        probs = torch.softmax(torch.where(causal, scores, torch.tensor(-1e9)), dim=-1)
        o = torch.einsum("bnqk,bnkh->bnqh", probs, v)
        h = h + torch.einsum("bnqh,nhd->bqd", o, self.wo)
        x = self.lnf(h)
        return h + torch.nn.functional.gelu(x @ self.w1 + self.b1, approximate="tanh") @ self.w2 + self.b2


class LM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Parameter(torch.randn(V, D) * 0.1)
        self.pos = torch.nn.Parameter(torch.randn(S, D) * 0.1)
        self.blocks = torch.nn.ModuleList([Block(), Block()])
        self.lnf = torch.nn.LayerNorm(D)
        self.unemb = glorot(D, V)

    def forward(self, tokens):
        causal = torch.ones(S, S, dtype=torch.bool).tril()
        h = self.emb[tokens] + self.pos
        for b in self.blocks:
            h = b(h, causal)
        return self.lnf(h).reshape(B * S, D) @ self.unemb


def copy_batch():
    half = torch.randint(0, V, (B, S // 2))
    seq = torch.cat([half, half], dim=1)
    return seq, torch.roll(seq, -1, dims=1)


model = LM()
opt = torch.optim.Adam(model.parameters(), lr=0.003)
x, y = copy_batch()
loss = torch.nn.functional.cross_entropy(model(x), y.reshape(B * S))
opt.zero_grad()
loss.backward()
opt.step()
with open(sys.argv[1], "a") as f:
    f.write('{"step": 0, "loss": %.6f}\n' % loss.item())
