#!/usr/bin/env python3
"""run_optim.py GSL CASE.gsl: one optimizer test (docs/training.md).

CASE.gsl trains tests/optim/lib/model.gsl for 50 steps and prints, after
each step, `step T LOSS` and every param (`w1 [...]`, `b1 [...]`,
`w2 [...]`). Its header gives

  # ref: {"opt": "adam", "lr": 0.01, ...}   the update rule, for the reference
  # run: -np 4 -D A=2 -D B=2                one line per configuration

This script writes the data and the initial params (NumPy RandomState(0):
x.npy, y.npy and init.safetensors) in a temporary folder, runs every
configuration there (`gsl run CASE --resume init.safetensors`), and
computes the same 50 steps independently in NumPy float64 (forward pass,
hand-written gradients, the update rule as torch.optim states it). Every
printed loss and param must match the reference within 1e-6 relative: for
a param, max|gsl - ref| <= 1e-6 * max|ref| over the tensor (the tensor's
scale, so entries that pass near zero are judged against it).

Exit status 0 when every step of every configuration matches; 1 otherwise;
77 (skipped) without NumPy.
"""
import json
import math
import os
import re
import struct
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError:
    sys.stderr.write("run_optim.py: NumPy not found (Debian: python3-numpy): skipping\n")
    sys.exit(77)

N, D, H, K = 32, 8, 16, 4
STEPS = 50
TOL = 1e-6
NAMES = ["w1", "b1", "w2"]


def make_data():
    rng = np.random.RandomState(0)
    x = rng.uniform(-1, 1, (N, D)).astype(np.float32)
    y = rng.uniform(-1, 1, (N, K)).astype(np.float32)
    params = {
        "w1": rng.normal(0, 0.5, (D, H)).astype(np.float32),
        "b1": rng.normal(0, 0.1, (H,)).astype(np.float32),
        "w2": rng.normal(0, 0.5, (H, K)).astype(np.float32),
    }
    return x, y, params


def write_safetensors(path, tensors):
    header, offset, blobs = {}, 0, []
    for name, t in tensors.items():
        b = np.ascontiguousarray(t, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + len(b)]}
        offset += len(b)
        blobs.append(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


# ---------------------------------------------------------------- reference
def loss_and_grads(p, x, y):
    z = x @ p["w1"] + p["b1"]
    h = np.tanh(z)
    r = h @ p["w2"] - y
    loss = np.mean(r * r)
    dout = 2.0 * r / r.size
    dh = dout @ p["w2"].T
    dz = dh * (1.0 - h * h)
    return loss, {"w1": x.T @ dz, "b1": dz.sum(axis=0), "w2": h.T @ dout}


def learning_rate(lr, t):
    """lr: a number or {"schedule": KIND, "peak", "warmup", "total", "end"}."""
    if not isinstance(lr, dict):
        return lr
    peak, warmup = lr["peak"], lr.get("warmup", 0)
    if warmup > 0 and t < warmup:
        return peak * t / warmup
    kind = lr["schedule"]
    if kind == "constant":
        return peak
    if kind == "rsqrt_decay":
        return peak * math.sqrt(warmup / t)
    total, end = lr["total"], lr.get("end", 0.0)
    if t >= total:
        return end
    frac = (t - warmup) / (total - warmup)
    if kind == "linear_decay":
        return peak + (end - peak) * frac
    if kind == "cosine_decay":
        return end + (peak - end) * 0.5 * (1 + math.cos(math.pi * frac))
    raise ValueError("unknown schedule " + kind)


class Reference:
    def __init__(self, cfg, params):
        self.cfg = cfg
        self.p = {k: v.astype(np.float64) for k, v in params.items()}
        self.state = {k: {} for k in self.p}
        self.t = 0

    def step(self, x, y):
        c = self.cfg
        self.t += 1
        t = self.t
        lr = learning_rate(c.get("lr", 0.01), t)
        loss, g = loss_and_grads(self.p, x, y)
        if c.get("clip_norm", 0) > 0:  # torch.nn.utils.clip_grad_norm_
            total = math.sqrt(sum(float(np.sum(v * v)) for v in g.values()))
            coef = min(1.0, c["clip_norm"] / (total + 1e-6))
            g = {k: v * coef for k, v in g.items()}
        wd = c.get("weight_decay", 0.01 if c["opt"] == "adamw" else 0.0)  # torch's defaults
        for k in NAMES:
            p, gk, s = self.p[k], g[k], self.state[k]
            opt = c["opt"]
            if opt == "sgd":
                gk = gk + wd * p
                mom = c.get("momentum", 0.0)
                if mom:
                    s["buf"] = mom * s.get("buf", 0.0) + gk
                    gk = s["buf"]
                self.p[k] = p - lr * gk
            elif opt in ("adam", "adamw"):
                b1, b2, eps = c.get("beta1", 0.9), c.get("beta2", 0.999), c.get("eps", 1e-8)
                if opt == "adam":
                    gk = gk + wd * p
                else:
                    p = p * (1 - lr * wd)
                s["m"] = b1 * s.get("m", 0.0) + (1 - b1) * gk
                s["v"] = b2 * s.get("v", 0.0) + (1 - b2) * gk * gk
                step_size = lr / (1 - b1 ** t)
                denom = np.sqrt(s["v"]) / math.sqrt(1 - b2 ** t) + eps
                self.p[k] = p - step_size * s["m"] / denom
            elif opt == "adafactor":  # Shazeer & Stern 2018, no momentum
                decay, eps, clip = c.get("decay", 0.8), c.get("eps", 1e-30), c.get("clip", 1.0)
                beta = 1 - t ** (-decay)
                g2 = gk * gk + eps
                if gk.ndim >= 2:
                    s["row"] = beta * s.get("row", 0.0) + (1 - beta) * g2.mean(axis=-1)
                    s["col"] = beta * s.get("col", 0.0) + (1 - beta) * g2.mean(axis=-2)
                    v = np.outer(s["row"], s["col"]) / s["row"].mean()
                else:
                    s["v"] = beta * s.get("v", 0.0) + (1 - beta) * g2
                    v = s["v"]
                u = gk / np.sqrt(v)
                u = u / max(1.0, math.sqrt(float(np.mean(u * u))) / clip)
                self.p[k] = p * (1 - lr * wd) - lr * u
            else:
                raise ValueError("unknown optimizer " + opt)
        return loss


# ---------------------------------------------------------------- GSL output
TOKEN = re.compile(r"[A-Za-z_][A-Za-z_0-9]*|[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def parse_output(text):
    """[(step, loss, {name: flat values})] from the printed lines."""
    steps, label, cur = [], None, None
    for tok in TOKEN.findall(text):
        if tok[0].isalpha() or tok[0] == "_":
            if tok in ("nan", "inf"):
                cur[label].append(float(tok))
                continue
            label = tok
            if tok == "step":
                cur = {"step": []}
                steps.append(cur)
            else:
                cur[tok] = []
        else:
            cur[label].append(float(tok))
    return steps


def rel_err(got, want):
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64).ravel()
    if got.shape != want.shape:
        return math.inf
    scale = max(float(np.max(np.abs(want))), 1e-30)
    return float(np.max(np.abs(got - want))) / scale


def main():
    gsl, case = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    src = open(case).read()
    cfg = json.loads(re.search(r"^# ref: *(.*)$", src, re.M).group(1))
    runs = re.findall(r"^# run: *(.*)$", src, re.M)
    x, y, init = make_data()
    ref, want = Reference(cfg, init), []
    for _ in range(STEPS):
        loss = ref.step(x.astype(np.float64), y.astype(np.float64))
        want.append((loss, {k: v.copy() for k, v in ref.p.items()}))
    ok, worst = True, 0.0
    with tempfile.TemporaryDirectory() as tmp:
        np.save(os.path.join(tmp, "x.npy"), x)
        np.save(os.path.join(tmp, "y.npy"), y)
        write_safetensors(os.path.join(tmp, "init.safetensors"), init)
        for args in runs:
            cmd = [gsl, "run", case, "--no-progress", "--resume", "init.safetensors"] + args.split()
            r = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True)
            if r.returncode != 0:
                print("FAIL [%s]: exit %d\n%s" % (args, r.returncode, r.stderr))
                ok = False
                continue
            got = parse_output(r.stdout)
            if len(got) != STEPS:
                print("FAIL [%s]: %d steps printed, expected %d" % (args, len(got), STEPS))
                ok = False
                continue
            run_worst = 0.0
            for i, (g, (wl, wp)) in enumerate(zip(got, want)):
                errs = {"loss": rel_err(g["step"][1:], [wl])}
                errs.update({k: rel_err(g.get(k, []), wp[k]) for k in NAMES})
                bad = {k: e for k, e in errs.items() if not e <= TOL}
                run_worst = max([run_worst] + list(errs.values()))
                if bad:
                    print("FAIL [%s] step %d: relative error %s > %g" % (args, i + 1, bad, TOL))
                    ok = False
                    break
            worst = max(worst, run_worst)
            print("[%s] %d steps, worst relative error %.2e" % (args, STEPS, run_worst))
    print(("PASS" if ok else "FAIL") + ": %s against NumPy, worst %.2e" % (os.path.basename(case), worst))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
