#!/usr/bin/env python3
"""run_routing.py GSL CASE: one routing of stdlib/moe.gsl against NumPy.

Runs tests/moe/routing.gsl (one MoE layer: moe_layer, moe_layer_switch,
moe_layer_expert_choice or a no-drop eval variant) with the -D consts of
CASE (the table below) at -np 1 (JIT and interpreter) and with the
experts and the groups split over 2 and 4 ranks, in a temporary folder
where this script has written the inputs (NumPy RandomState(0): x, wg,
wi, wo and the loss weights wt, as .npy). It computes the same layer
independently in NumPy float64: the routing by explicit loops over the
tokens (GShard's Algorithm 1 for top-2, Switch top-1, expert choice's
per-expert top-C by sorting), the experts' FFNs, and the gradients of
loss = sum(y * wt) + aux_weight * aux with respect to x, wg, wi and wo by
a hand-written backward pass.

Every saved result must match: y, usage and the four gradients within
1e-5 of the tensor's largest reference entry (max|gsl - ref| <= 1e-5
max|ref|), the loss, the aux loss and the dropped fraction within 1e-5
relative (1e-7 absolute where the reference is 0); the capacity GSL
printed must equal the reference's. Top-2's random policy uses the
uniform numbers GSL drew (u.npy, the same under every -np).

The routing decisions are made from float64 numbers; a decision closer
than 1e-5 to a tie (which float32 could decide the other way) fails the
test as bad data instead of passing or failing by chance. The one
exception are tokens that are copies of each other (the inputs' last
group), whose scores are equal in both and whose ties are broken by
token order. Cases that should drop tokens must drop some in the
reference (else they test nothing), and the no-drop cases must drop
none, exactly, in GSL's output.

Exit status 0 when every run matches; 1 otherwise; 77 (skipped) without
NumPy.
"""
import math
import os
import re
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError:
    sys.stderr.write("run_routing.py: NumPy not found (Debian: python3-numpy): skipping\n")
    sys.exit(77)

G, S, M, E, H = 4, 16, 8, 4, 6  # as tests/moe/routing.gsl
TOP2, SWITCH, EXPERT_CHOICE = 0, 1, 2  # routing.gsl's ROUTING
TOP1, ALL, RANDOM = 0, 1, 2  # MOE_TOP1, MOE_ALL, MOE_RANDOM
TOL = 1e-5
MARGIN = 1e-5
RUNS = ["-np 1", "-np 1 --engine interp", "-np 2 -D EP=2", "-np 4 -D EP=4"]

# name: (-D consts, drops): drops "some": the reference must drop tokens
# (else the case tests no dropping), "none": GSL and the reference must
# drop none, exactly; None: either. Defaults are routing.gsl's: ROUTING=0
# POLICY=1 THRESHOLD=0.2 AUX_WEIGHT=0.5 TRAIN=1 EVAL=0 CF=2.0.
CASES = {
    "top2": ({"ROUTING": TOP2, "POLICY": ALL, "CF": 2.0}, "some"),
    "top2_random": ({"ROUTING": TOP2, "POLICY": RANDOM, "CF": 1.0}, "some"),
    "top2_cf1_25": ({"ROUTING": TOP2, "POLICY": ALL, "CF": 1.25}, "some"),
    "switch": ({"ROUTING": SWITCH, "CF": 1.0}, "some"),
    "switch_cf1_5": ({"ROUTING": SWITCH, "CF": 1.5}, "some"),
    "expert_choice": ({"ROUTING": EXPERT_CHOICE, "CF": 2.0}, None),
    "expert_choice_cf1": ({"ROUTING": EXPERT_CHOICE, "CF": 1.0}, "some"),
    "eval_top2": ({"ROUTING": TOP2, "POLICY": RANDOM, "EVAL": 1, "CF": 1.0}, "none"),
    "eval_switch": ({"ROUTING": SWITCH, "EVAL": 1, "CF": 1.0}, "none"),
    "expert_choice_cs": ({"ROUTING": EXPERT_CHOICE, "EVAL": 1, "CF": 1.0}, "none"),
}
DEFAULTS = {"ROUTING": TOP2, "POLICY": ALL, "THRESHOLD": 0.2, "AUX_WEIGHT": 0.5, "TRAIN": 1, "EVAL": 0, "CF": 2.0}


def make_inputs():
    """The last group's tokens are all the same token: exact ties, which
    every routing must break by token order (first come, first served;
    expert choice: the lower index first)."""
    rng = np.random.RandomState(0)
    x = rng.normal(0, 1, (G, S, M)).astype(np.float32)
    x[G - 1] = x[G - 1, 0]
    return {
        "x": x,
        "wg": rng.normal(0, 1, (M, E)).astype(np.float32),
        "wi": rng.normal(0, 0.5, (E, M, H)).astype(np.float32),
        "wo": rng.normal(0, 0.5, (E, H, M)).astype(np.float32),
        "wt": rng.normal(0, 1, (G, S, M)).astype(np.float32),
    }


class TieError(Exception):
    pass


def check_gap(a, b, what):
    if abs(a - b) < MARGIN:
        raise TieError("%s: %.9g and %.9g are closer than %g" % (what, a, b, MARGIN))


def softmax(z):
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def assign_slots(want, C, counts):
    """want[s, e] 0/1 in token order; counts[e] slots already taken.
    Returns D[s, e, c]: each wanted (s, e) takes the next free slot of e,
    or nothing when e has C already."""
    D = np.zeros((want.shape[0], want.shape[1], C))
    for s in range(want.shape[0]):
        for e in range(want.shape[1]):
            if want[s, e]:
                if counts[e] < C:
                    D[s, e, counts[e]] = 1.0
                counts[e] += 1
    return D


def route(x, gates, u, cfg, C, train):
    """Combine weights, dispatch, aux, dropped and the backward function
    dgates(dcombine) of the routing cfg["ROUTING"]."""
    routing = cfg["ROUTING"]
    if routing == EXPERT_CHOICE:
        D = np.zeros((G, S, E, C))
        for g in range(G):
            for e in range(E):
                order = sorted(range(S), key=lambda s: (-gates[g, s, e], s))
                if C < S and not np.array_equal(x[g, order[C - 1]], x[g, order[C]]):
                    check_gap(gates[g, order[C - 1], e], gates[g, order[C], e],
                              "expert choice, group %d expert %d, scores of ranks C-1 and C" % (g, e))
                for r, s in enumerate(order[:C]):
                    D[g, s, e, r] = 1.0
        combine = gates[..., None] * D
        dropped = float(np.mean(D.sum(axis=(2, 3)) == 0))
        return combine, D, 0.0, dropped, lambda dc: (dc * D).sum(axis=3)

    top = np.argsort(-gates, axis=-1, kind="stable")
    for g in range(G):
        for s in range(S):
            srt = gates[g, s, top[g, s]]
            check_gap(srt[0], srt[1], "first and second gate of token (%d, %d)" % (g, s))
            if routing == TOP2:
                check_gap(srt[1], srt[2], "second and third gate of token (%d, %d)" % (g, s))
    mask1 = np.eye(E)[top[..., 0]]
    g1 = (gates * mask1).sum(-1)
    aux = float(E * E * np.mean(mask1.mean(axis=1) * gates.mean(axis=1)))
    daux = cfg["AUX_WEIGHT"] * E * E / (G * E) * mask1.mean(axis=1)[:, None, :] / S  # d aux_w * aux / d gates

    if routing == SWITCH:
        D = np.stack([assign_slots(mask1[g], C, [0] * E) for g in range(G)])
        combine = g1[..., None, None] * D
        dropped = 1.0 - D.sum() / (G * S)

        def back(dc):
            return (dc * D).sum(axis=(2, 3))[..., None] * mask1 + daux
        return combine, D, aux, dropped, back

    mask2 = np.eye(E)[top[..., 1]]
    g2 = (gates * mask2).sum(-1)
    denom = g1 + g2 + 1e-9
    gate1, gate2 = g1 / denom, g2 / denom
    policy, thr = cfg["POLICY"], cfg["THRESHOLD"]
    if policy == ALL:
        use2 = np.ones((G, S))
    elif policy == TOP1:
        use2 = np.zeros((G, S))
    elif train:
        for g in range(G):
            for s in range(S):
                check_gap(u[g, s], gate2[g, s] / thr, "u and gate2 / threshold of token (%d, %d)" % (g, s))
        use2 = (u < gate2 / thr).astype(np.float64)
    else:
        for g in range(G):
            for s in range(S):
                check_gap(gate2[g, s], thr, "gate2 and the threshold of token (%d, %d)" % (g, s))
        use2 = (gate2 > thr).astype(np.float64)
    want2 = mask2 * use2[..., None]
    D1, D2 = np.zeros((G, S, E, C)), np.zeros((G, S, E, C))
    for g in range(G):
        counts = [0] * E
        D1[g] = assign_slots(mask1[g], C, counts)
        counts = [min(c, C) for c in counts]  # the second choices queue behind the kept first ones
        D2[g] = assign_slots(want2[g], C, counts)
    D = D1 + D2
    combine = gate1[..., None, None] * D1 + gate2[..., None, None] * D2
    dropped = 1.0 - D.sum() / (mask1.sum() + want2.sum())

    def back(dc):
        dgate1, dgate2 = (dc * D1).sum(axis=(2, 3)), (dc * D2).sum(axis=(2, 3))
        dg1 = dgate1 * (1 / denom - g1 / denom**2) - dgate2 * g2 / denom**2
        dg2 = -dgate1 * g1 / denom**2 + dgate2 * (1 / denom - g2 / denom**2)
        return dg1[..., None] * mask1 + dg2[..., None] * mask2 + daux
    return combine, D, aux, dropped, back


def reference(inp, u, cfg):
    x, wg, wi, wo, wt = (inp[k].astype(np.float64) for k in ("x", "wg", "wi", "wo", "wt"))
    ev = cfg["EVAL"] == 1
    C = S if ev else int(math.ceil(cfg["CF"] * S / E))
    train = cfg["TRAIN"] == 1 and not ev
    gates = softmax(np.einsum("gsm,me->gse", x, wg))
    combine, D, aux, dropped, back = route(x, gates, u, cfg, C, train)
    xe = np.einsum("gsec,gsm->egcm", D, x)
    hp = np.einsum("egcm,emh->egch", xe, wi)
    h = np.maximum(hp, 0)
    ye = np.einsum("egch,ehm->egcm", h, wo)
    y = np.einsum("gsec,egcm->gsm", combine, ye)
    aw = cfg["AUX_WEIGHT"]
    out = {"capacity": C, "y": y, "aux": aw * aux, "dropped": dropped,
           "usage": D.sum(axis=(0, 1, 3)) / (D.sum() + 1e-9), "loss": float((y * wt).sum() + aw * aux)}
    # backward of loss = sum(y * wt) + aw * aux
    dcombine = np.einsum("gsm,egcm->gsec", wt, ye)
    dye = np.einsum("gsec,gsm->egcm", combine, wt)
    out["gwo"] = np.einsum("egch,egcm->ehm", h, dye)
    dhp = np.einsum("egcm,ehm->egch", dye, wo) * (hp > 0)
    out["gwi"] = np.einsum("egcm,egch->emh", xe, dhp)
    dxe = np.einsum("egch,emh->egcm", dhp, wi)
    dgates = back(dcombine)
    dlogits = gates * (dgates - (dgates * gates).sum(axis=-1, keepdims=True))
    out["gwg"] = np.einsum("gsm,gse->me", x, dlogits)
    out["gx"] = np.einsum("gsec,egcm->gsm", D, dxe) + np.einsum("gse,me->gsm", dlogits, wg)
    return out


def error(got, want):
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    if got.shape != want.shape:
        return math.inf, "shape %s, expected %s" % (got.shape, want.shape)
    diff = float(np.max(np.abs(got - want))) if got.size else 0.0
    scale = float(np.max(np.abs(want))) if want.size else 0.0
    if scale == 0.0:
        return (0.0 if diff <= 1e-7 else math.inf), "max|diff| %.3g (reference 0)" % diff
    return diff / scale, "max|diff| %.3g, scale %.3g" % (diff, scale)


def main():
    gsl, name = os.path.abspath(sys.argv[1]), sys.argv[2]
    program = os.path.join(os.path.dirname(os.path.abspath(__file__)), "routing.gsl")
    if name not in CASES:
        print("FAIL: unknown case %s (cases: %s)" % (name, ", ".join(CASES)))
        return 1
    consts, drops = CASES[name]
    cfg = dict(DEFAULTS, **consts)
    defs = []
    for k, v in consts.items():
        defs += ["-D", "%s=%s" % (k, v)]
    inp = make_inputs()
    ok, worst, want = True, 0.0, None
    with tempfile.TemporaryDirectory() as tmp:
        for k, v in inp.items():
            np.save(os.path.join(tmp, k + ".npy"), v)
        for args in RUNS:
            for f in os.listdir(tmp):
                if f[:-4] not in inp:
                    os.remove(os.path.join(tmp, f))
            cmd = [gsl, "run", program, "--no-progress"] + args.split() + defs
            r = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True)
            if r.returncode != 0:
                print("FAIL [%s]: exit %d\n%s" % (args, r.returncode, r.stderr))
                ok = False
                continue
            got = {k: np.load(os.path.join(tmp, k + ".npy"))
                   for k in ("y", "aux", "dropped", "usage", "loss", "gx", "gwg", "gwi", "gwo", "u")}
            cap = re.search(r"^capacity (\d+)", r.stdout, re.M)
            got["capacity"] = int(cap.group(1)) if cap else -1
            if want is None:
                try:
                    want = reference(inp, got["u"].astype(np.float64), cfg)
                except TieError as e:
                    print("FAIL: the test data has a near tie, so float32 may route differently: %s" % e)
                    return 1
                print("reference: capacity %d, dropped %.6g, aux %.6g, loss %.8g"
                      % (want["capacity"], want["dropped"], want["aux"], want["loss"]))
                if drops == "some" and not want["dropped"] > 0:
                    print("FAIL: case %s should drop tokens, but the reference drops none" % name)
                    ok = False
                if drops == "none" and want["dropped"] != 0:
                    print("FAIL: case %s should drop nothing, but the reference drops %g" % (name, want["dropped"]))
                    ok = False
            if got["capacity"] != want["capacity"]:
                print("FAIL [%s]: capacity %d, expected %d" % (args, got["capacity"], want["capacity"]))
                ok = False
            if drops == "none" and float(got["dropped"]) != 0.0:
                print("FAIL [%s]: dropped %r where nothing may be dropped" % (args, float(got["dropped"])))
                ok = False
            run_worst = 0.0
            for k in ("y", "aux", "dropped", "usage", "loss", "gx", "gwg", "gwi", "gwo"):
                e, how = error(got[k], want[k])
                run_worst = max(run_worst, e)
                if not e <= TOL:
                    print("FAIL [%s] %s: relative error %.3g > %g (%s)" % (args, k, e, TOL, how))
                    ok = False
            worst = max(worst, run_worst)
            print("[%s] worst relative error %.2e" % (args, run_worst))
    print(("PASS" if ok else "FAIL") + ": MoE routing %s against NumPy, worst %.2e" % (name, worst))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
