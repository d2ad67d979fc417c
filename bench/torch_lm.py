"""The PyTorch model of examples/transformer.gsl, shared by the bench
scripts that compare against it (first_step_torch.py, train_step_torch.py).

Pre-norm blocks, causal attention (NH heads of HD), tanh GELU FFN of width
H, untied embeddings with learned positions, glorot-uniform weights created
in the same order as before, so a seeded run draws the same numbers. The
sizes are arguments: LM(B, S, V, D, NH, HD, H, L).
"""
import torch


def glorot(*shape):
    w = torch.empty(*shape)
    fan_out = 1
    for s in shape[1:]:
        fan_out *= s
    bound = (6.0 / (shape[0] + fan_out)) ** 0.5
    return torch.nn.Parameter(w.uniform_(-bound, bound))


class Block(torch.nn.Module):
    def __init__(self, D, NH, HD, H):
        super().__init__()
        self.hd = HD
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
        scores = torch.einsum("bnqh,bnkh->bnqk", q, k) * self.hd ** -0.5
        probs = torch.softmax(torch.where(causal, scores, torch.tensor(-1e9)), dim=-1)
        o = torch.einsum("bnqk,bnkh->bnqh", probs, v)
        h = h + torch.einsum("bnqh,nhd->bqd", o, self.wo)
        x = self.lnf(h)
        return h + torch.nn.functional.gelu(x @ self.w1 + self.b1, approximate="tanh") @ self.w2 + self.b2


class LM(torch.nn.Module):
    def __init__(self, B, S, V, D, NH, HD, H, L):
        super().__init__()
        self.b, self.s, self.d = B, S, D
        self.emb = torch.nn.Parameter(torch.randn(V, D) * 0.1)
        self.pos = torch.nn.Parameter(torch.randn(S, D) * 0.1)
        self.blocks = torch.nn.ModuleList([Block(D, NH, HD, H) for _ in range(L)])
        self.lnf = torch.nn.LayerNorm(D)
        self.unemb = glorot(D, V)

    def forward(self, tokens):
        S = self.s
        causal = torch.ones(S, S, dtype=torch.bool).tril()
        h = self.emb[tokens] + self.pos
        for b in self.blocks:
            h = b(h, causal)
        return self.lnf(h).reshape(self.b * S, self.d) @ self.unemb


def copy_batch(B, S, V):
    """The copy task: a random first half repeated; targets shifted by one."""
    half = torch.randint(0, V, (B, S // 2))
    seq = torch.cat([half, half], dim=1)
    return seq, torch.roll(seq, -1, dims=1)
