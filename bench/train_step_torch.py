"""PyTorch CPU eager (one thread) training step of examples/transformer.gsl's
model at a chosen width, for bench/train_step_torch.sh.

The model of bench/first_step_torch.py (pre-norm blocks, causal attention,
tanh GELU, learned positions, Adam(lr=0.003), the copy task) with B, S, V,
D, NH, HD, H and L from the command line, and the loop of the example's
main(): a step is batch, forward, backward, update; the accuracy forward
runs at the same steps (step % 25 == 0 and the last). It times N1 steps
and then N2 steps in this process and prints the seconds per step of the
difference (N2 - N1 steps) in process CPU time, as the gsl side does with
two runs, so start, first-call and printing costs cancel and time other
processes hold the cores is not counted.

usage: python3 train_step_torch.py B S V D NH HD H L N1 N2
"""
import sys
import time

import torch

torch.set_num_threads(1)
torch.manual_seed(0)
B, S, V, D, NH, HD, H, L, N1, N2 = (int(a) for a in sys.argv[1:11])


def glorot(*shape):
    w = torch.empty(*shape)
    fan_out = 1
    for s in shape[1:]:
        fan_out *= s
    bound = (6.0 / (shape[0] + fan_out)) ** 0.5
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
        self.blocks = torch.nn.ModuleList([Block() for _ in range(L)])
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


def run(steps):
    t0 = time.process_time()
    for step in range(steps):
        x, y = copy_batch()
        loss = torch.nn.functional.cross_entropy(model(x), y.reshape(B * S))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 25 == 0 or step == steps - 1:
            with torch.no_grad():
                guess = model(x).argmax(-1).reshape(B, S)
                acc = (guess == y).float()[:, S // 2 - 1:S - 2].mean()
            print("step", step, "loss", loss.item(), "copy accuracy", acc.item(), file=sys.stderr)
    return time.process_time() - t0


run(2)  # warm-up
t1 = run(N1)
t2 = run(N2)
print("torch %.4f ms/step (process CPU time)" % ((t2 - t1) / (N2 - N1) * 1e3))
