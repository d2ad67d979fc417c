"""PyTorch CPU eager (one thread) training step of examples/transformer.gsl's
model at a chosen width, for bench/train_step_torch.sh.

The model of bench/torch_lm.py, as bench/first_step_torch.py trains it
(pre-norm blocks, causal attention, tanh GELU, learned positions,
Adam(lr=0.003), the copy task), with B, S, V, D, NH, HD, H and L from the
command line, and the loop of the example's
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

from torch_lm import LM, copy_batch

torch.set_num_threads(1)
torch.manual_seed(0)
B, S, V, D, NH, HD, H, L, N1, N2 = (int(a) for a in sys.argv[1:11])

model = LM(B, S, V, D, NH, HD, H, L)
opt = torch.optim.Adam(model.parameters(), lr=0.003)


def run(steps):
    t0 = time.process_time()
    for step in range(steps):
        x, y = copy_batch(B, S, V)
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
