"""PyTorch's start of examples/transformer.gsl's model, for bench/first_step.sh.

The same model (bench/torch_lm.py at B=16, S=16, V=16, D=32, 4 heads of 8,
FFN 64, two pre-norm blocks: causal attention, tanh GELU, untied embeddings
with learned positions), the same copy task batch and Adam(lr=0.003), CPU eager, one
thread. After the first training step (forward, backward, update) it
appends one line to LOG and exits: the bench measures the time from the
process's start to that line, as it does for `gsl run --log`.

usage: python3 first_step_torch.py LOG
"""
import sys

import torch

from torch_lm import LM, copy_batch

torch.set_num_threads(1)
torch.manual_seed(0)
B, S, V, D, NH, HD, H = 16, 16, 16, 32, 4, 8, 64


model = LM(B, S, V, D, NH, HD, H, 2)
opt = torch.optim.Adam(model.parameters(), lr=0.003)
x, y = copy_batch(B, S, V)
loss = torch.nn.functional.cross_entropy(model(x), y.reshape(B * S))
opt.zero_grad()
loss.backward()
opt.step()
with open(sys.argv[1], "a") as f:
    f.write('{"step": 0, "loss": %.6f}\n' % loss.item())
