#!/usr/bin/python3
"""Independent reference of the Mamba-2 model of docs/MODEL.md, in numpy (float64), for tests/core.

Forward: docs/MODEL.md §2 literally, with the SSD as the sequential recurrence of §2 step 4 (no chunks).
Backward: hand-written reverse mode of that forward (no autograd library), checked here against central
finite differences before anything is written.

Writes model_reference.h5 (next to this script) holding a tiny model's parameters in the flat layout of
src/base/layout.h, an input window, targets (with a burn-in and NaN targets), and the reference outputs:
predictions, sum of squared errors, its count, the gradient of the sum of squared errors w.r.t. every
parameter (same flat layout) and w.r.t. the input. Inputs are stored in float32 (so the fp32 model reads
exactly the values used here); outputs are float32 too (relative precision 6e-8, enough for the tests'
tolerances, and it keeps the file small).

Regenerate (only needed if docs/MODEL.md changes):  /usr/bin/python3 tests/core/reference/mamba2_reference.py
The test tests/core/test_model_reference.c reads the file."""

import os
import sys

import h5py
import numpy as np

EPS = 1e-5
SOFTPLUS_THRESHOLD = 20.0

# The tiny model: G = 2 groups, T = 11 not a multiple of Q = 4 (Q only matters to the chunked model).
DIMS = dict(F=3, O=2, D=8, L=2, E=2, P=4, N=4, G=2, K=4, Q=4)
B, T, BURN_IN = 2, 11, 2
SEED = 20240611


def derived(d):
    d = dict(d)
    d["Di"] = d["E"] * d["D"]
    d["H"] = d["Di"] // d["P"]
    d["GN"] = d["G"] * d["N"]
    d["Cc"] = d["Di"] + 2 * d["GN"]
    d["Win"] = 2 * d["Di"] + 2 * d["GN"] + d["H"]
    return d


def layout(d):
    """(name, shape) in flat-buffer order, as documented in src/base/layout.h."""
    t = [("embed.weight", (d["D"], d["F"])), ("embed.bias", (d["D"],))]
    for i in range(d["L"]):
        p = "layers.%d." % i
        t += [(p + "norm.weight", (d["D"],)),
              (p + "mixer.W_in", (d["Win"], d["D"])),  # in_proj, x_proj, dt_proj rows, contiguous
              (p + "mixer.dt_bias", (d["H"],)),
              (p + "mixer.conv1d.weight", (d["Cc"], d["K"])),
              (p + "mixer.conv1d.bias", (d["Cc"],)),
              (p + "mixer.A_log", (d["H"],)),
              (p + "mixer.D", (d["H"],)),
              (p + "mixer.norm.weight", (d["Di"],)),
              (p + "mixer.out_proj.weight", (d["D"], d["Di"]))]
    t += [("norm_f.weight", (d["D"],)), ("head.weight", (d["O"], d["D"])), ("head.bias", (d["O"],))]
    return t


def unflatten(flat, d):
    out, off = {}, 0
    for name, shape in layout(d):
        n = int(np.prod(shape))
        out[name] = flat[off:off + n].reshape(shape)
        off += n
    assert off == flat.size
    return out


def flatten(tensors, d):
    return np.concatenate([tensors[name].reshape(-1) for name, _ in layout(d)])


def make_params(d, rng):
    """Random values of sensible scale for every tensor (none at a special value such as 0 or 1)."""
    u = lambda shape, lo, hi: rng.uniform(lo, hi, size=shape)
    p = {}
    for name, shape in layout(d):
        if name.endswith("embed.weight"):
            p[name] = u(shape, -1, 1) / np.sqrt(d["F"])
        elif name.endswith("W_in") or name.endswith("head.weight"):
            p[name] = u(shape, -1, 1) / np.sqrt(d["D"])
        elif name.endswith("out_proj.weight"):
            p[name] = u(shape, -1, 1) / np.sqrt(d["Di"])
        elif name.endswith("conv1d.weight") or name.endswith("conv1d.bias"):
            p[name] = u(shape, -1, 1) / np.sqrt(d["K"])
        elif name.endswith("dt_bias"):
            p[name] = u(shape, -1.5, 0.0)  # dt in about [0.2, 0.7]
        elif name.endswith("A_log"):
            p[name] = np.log(u(shape, 1, 16))
        elif name.endswith(".D") or "norm" in name:
            p[name] = u(shape, 0.7, 1.3)
        else:  # embed.bias, head.bias
            p[name] = u(shape, -0.2, 0.2)
    # float32-representable, so the fp32 model sees exactly these values
    return {k: v.astype(np.float32).astype(np.float64) for k, v in p.items()}


# ---------------------------------------------------------------------------------------------- pieces
def sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


def silu(v):
    return v * sigmoid(v)


def dsilu(v):
    s = sigmoid(v)
    return s * (1.0 + v * (1.0 - s))


def rms_fwd(x, w):
    r = 1.0 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + EPS)
    return x * r * w


def rms_bwd(dy, x, w):
    """d/dx and d/dw of y = x * rsqrt(mean(x^2) + eps) * w over the last axis (w may carry a group axis)."""
    n = x.shape[-1]
    r = 1.0 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + EPS)
    s = np.sum(w * dy * x, axis=-1, keepdims=True)
    dx = r * w * dy - x * r ** 3 * s / n
    dw = np.sum(dy * x * r, axis=tuple(range(x.ndim - w.ndim)))  # over the batch axes, not w's
    return dx, dw


def conv_pre(xbc, w, b):
    """Causal depthwise conv: pre[b,t,c] = b[c] + sum_k w[c,k] xbc[b, t-K+1+k, c] (zero before t = 0)."""
    Bn, Tn, C = xbc.shape
    K = w.shape[1]
    pre = np.broadcast_to(b, xbc.shape).copy()
    for k in range(K):
        shift = K - 1 - k
        if shift < Tn:
            pre[:, shift:, :] += w[:, k] * xbc[:, :Tn - shift, :]
    return pre


def conv_bwd(dpre, xbc, w):
    Bn, Tn, C = xbc.shape
    K = w.shape[1]
    dx = np.zeros_like(xbc)
    dw = np.zeros_like(w)
    for k in range(K):
        shift = K - 1 - k
        if shift < Tn:
            dx[:, :Tn - shift, :] += w[:, k] * dpre[:, shift:, :]
            dw[:, k] = np.sum(dpre[:, shift:, :] * xbc[:, :Tn - shift, :], axis=(0, 1))
    return dx, dw, np.sum(dpre, axis=(0, 1))


def softplus(v):
    return np.where(v > SOFTPLUS_THRESHOLD, v, np.log1p(np.exp(np.minimum(v, SOFTPLUS_THRESHOLD))))


def ssd_fwd(x, dt, A, Bm, Cm, Dsk, d):
    """Sequential recurrence (docs/MODEL.md §2 step 5). x [B,T,H,P], dt [B,T,H], Bm/Cm [B,T,G,N].
    Returns y [B,T,H,P] and the states S_t [B,H,T+1,P,N] (S_{-1} = 0 first)."""
    Bn, Tn, H, P = x.shape
    hpg = H // d["G"]
    y = np.zeros_like(x)
    S = np.zeros((Bn, H, Tn + 1, P, d["N"]))
    for b in range(Bn):
        for h in range(H):
            g = h // hpg
            for t in range(Tn):
                a = np.exp(dt[b, t, h] * A[h])
                S[b, h, t + 1] = a * S[b, h, t] + dt[b, t, h] * np.outer(x[b, t, h], Bm[b, t, g])
                y[b, t, h] = S[b, h, t + 1] @ Cm[b, t, g] + Dsk[h] * x[b, t, h]
    return y, S


def ssd_bwd(dy, x, dt, A, Bm, Cm, Dsk, S, d):
    Bn, Tn, H, P = x.shape
    hpg = H // d["G"]
    dx, ddt = np.zeros_like(x), np.zeros_like(dt)
    dB, dC = np.zeros_like(Bm), np.zeros_like(Cm)
    dA, dD = np.zeros(H), np.zeros(H)
    for b in range(Bn):
        for h in range(H):
            g = h // hpg
            dS = np.zeros((P, d["N"]))  # d(loss)/d(S_t) from the future
            for t in reversed(range(Tn)):
                a = np.exp(dt[b, t, h] * A[h])
                Sprev, St = S[b, h, t], S[b, h, t + 1]
                # y_t = S_t C_t + D x_t
                dS = dS + np.outer(dy[b, t, h], Cm[b, t, g])
                dC[b, t, g] += St.T @ dy[b, t, h]
                dD[h] += dy[b, t, h] @ x[b, t, h]
                dx[b, t, h] += Dsk[h] * dy[b, t, h]
                # S_t = a S_{t-1} + dt x_t B_t^T, a = exp(dt A)
                da = np.sum(dS * Sprev)
                ddt[b, t, h] += np.sum(dS * np.outer(x[b, t, h], Bm[b, t, g])) + da * a * A[h]
                dA[h] += da * a * dt[b, t, h]
                dx[b, t, h] += dt[b, t, h] * (dS @ Bm[b, t, g])
                dB[b, t, g] += dt[b, t, h] * (dS.T @ x[b, t, h])
                dS = a * dS
    return dx, ddt, dA, dB, dC, dD


def gnorm_fwd(y, z, w, G):
    """v = y silu(z); per group of Di/G channels: v rsqrt(mean(v^2) + eps) w."""
    v = y * silu(z)
    sh = v.shape[:-1] + (G, v.shape[-1] // G)
    return rms_fwd(v.reshape(sh), w.reshape(G, -1)).reshape(v.shape)


def gnorm_bwd(do, y, z, w, G):
    v = y * silu(z)
    sh = v.shape[:-1] + (G, v.shape[-1] // G)
    dv, dw = rms_bwd(do.reshape(sh), v.reshape(sh), w.reshape(G, -1))
    dv = dv.reshape(v.shape)
    return dv * silu(z), dv * y * dsilu(z), dw.reshape(-1)


# ---------------------------------------------------------------------------------------------- model
def layer_fwd(h, p, pre, d):
    Di, GN, Cc, H, P, G, N = d["Di"], d["GN"], d["Cc"], d["H"], d["P"], d["G"], d["N"]
    Bn, Tn, _ = h.shape
    c = {"h": h}
    c["u"] = rms_fwd(h, p[pre + "norm.weight"])
    zx = c["u"] @ p[pre + "mixer.W_in"].T
    c["z"], c["xbc"], c["dtr"] = zx[..., :Di], zx[..., Di:Di + Cc], zx[..., Di + Cc:]
    c["pre"] = conv_pre(c["xbc"], p[pre + "mixer.conv1d.weight"], p[pre + "mixer.conv1d.bias"])
    xc = silu(c["pre"])
    c["x"] = xc[..., :Di].reshape(Bn, Tn, H, P)
    c["Bm"] = xc[..., Di:Di + GN].reshape(Bn, Tn, G, N)
    c["Cm"] = xc[..., Di + GN:].reshape(Bn, Tn, G, N)
    c["v"] = c["dtr"] + p[pre + "mixer.dt_bias"]
    c["dt"] = softplus(c["v"])
    c["A"] = -np.exp(p[pre + "mixer.A_log"])
    y, c["S"] = ssd_fwd(c["x"], c["dt"], c["A"], c["Bm"], c["Cm"], p[pre + "mixer.D"], d)
    c["y"] = y.reshape(Bn, Tn, Di)
    c["o"] = gnorm_fwd(c["y"], c["z"], p[pre + "mixer.norm.weight"], G)
    return h + c["o"] @ p[pre + "mixer.out_proj.weight"].T, c


def layer_bwd(dh, c, p, g, pre, d):
    Di, G = d["Di"], d["G"]
    Bn, Tn, _ = dh.shape
    Wout = p[pre + "mixer.out_proj.weight"]
    g[pre + "mixer.out_proj.weight"] = np.einsum("btd,bti->di", dh, c["o"])
    do = dh @ Wout
    dy, dz, g[pre + "mixer.norm.weight"] = gnorm_bwd(do, c["y"], c["z"], p[pre + "mixer.norm.weight"], G)
    dx, ddt, dA, dB, dC, dD = ssd_bwd(dy.reshape(c["x"].shape), c["x"], c["dt"], c["A"], c["Bm"], c["Cm"],
                                      p[pre + "mixer.D"], c["S"], d)
    g[pre + "mixer.D"] = dD
    g[pre + "mixer.A_log"] = dA * c["A"]
    dv = ddt * np.where(c["v"] > SOFTPLUS_THRESHOLD, 1.0, sigmoid(c["v"]))
    g[pre + "mixer.dt_bias"] = np.sum(dv, axis=(0, 1))
    dxc = np.concatenate([dx.reshape(Bn, Tn, Di), dB.reshape(Bn, Tn, -1), dC.reshape(Bn, Tn, -1)], axis=-1)
    dxbc, g[pre + "mixer.conv1d.weight"], g[pre + "mixer.conv1d.bias"] = conv_bwd(
        dxc * dsilu(c["pre"]), c["xbc"], p[pre + "mixer.conv1d.weight"])
    dzx = np.concatenate([dz, dxbc, dv], axis=-1)
    g[pre + "mixer.W_in"] = np.einsum("btw,btd->wd", dzx, c["u"])
    du = dzx @ p[pre + "mixer.W_in"]
    dhn, g[pre + "norm.weight"] = rms_bwd(du, c["h"], p[pre + "norm.weight"])
    return dh + dhn


def model(flat, X, Y, d, burn_in, want_grads=True):
    """Returns pred, sse, count and (optionally) the flat gradient of sse and d(sse)/dX."""
    p = unflatten(flat, d)
    h = X @ p["embed.weight"].T + p["embed.bias"]
    caches = []
    for i in range(d["L"]):
        h, c = layer_fwd(h, p, "layers.%d." % i, d)
        caches.append(c)
    hf = rms_fwd(h, p["norm_f.weight"])
    pred = hf @ p["head.weight"].T + p["head.bias"]
    t = np.arange(X.shape[1])[None, :, None]
    mask = (t >= burn_in) & np.isfinite(Y)
    err = np.where(mask, pred - np.where(mask, Y, 0.0), 0.0)
    sse, count = float(np.sum(err * err)), int(np.sum(mask))
    if not want_grads:
        return pred, sse, count
    g = {}
    dpred = 2.0 * err
    g["head.weight"] = np.einsum("bto,btd->od", dpred, hf)
    g["head.bias"] = np.sum(dpred, axis=(0, 1))
    dh, g["norm_f.weight"] = rms_bwd(dpred @ p["head.weight"], h, p["norm_f.weight"])
    for i in reversed(range(d["L"])):
        dh = layer_bwd(dh, caches[i], p, g, "layers.%d." % i, d)
    g["embed.weight"] = np.einsum("btd,btf->df", dh, X)
    g["embed.bias"] = np.sum(dh, axis=(0, 1))
    dX = dh @ p["embed.weight"]
    return pred, sse, count, flatten(g, d), dX


def finite_difference_check(flat, X, Y, d, grads, dX):
    """The hand-written backward against central differences, every parameter and input (the reference checks
    itself). Returns the worst |grad - fd| / (1e-7 + 1e-6 |fd|): above 1 is a failure (the bound of
    tests/core/test_model_grad.c, which explains it)."""
    step = 2e-6
    loss = lambda f, x: model(f, x, Y, d, BURN_IN, want_grads=False)[1]
    worst = 0.0

    def check(fd, g):
        return max(worst, abs(fd - g) / (1e-7 + 1e-6 * abs(fd)))

    for i in range(flat.size):
        fp, fm = flat.copy(), flat.copy()
        fp[i] += step
        fm[i] -= step
        worst = check((loss(fp, X) - loss(fm, X)) / (2 * step), grads[i])
    for i in range(X.size):
        xp, xm = X.copy().reshape(-1), X.copy().reshape(-1)
        xp[i] += step
        xm[i] -= step
        worst = check((loss(flat, xp.reshape(X.shape)) - loss(flat, xm.reshape(X.shape))) / (2 * step),
                      dX.reshape(-1)[i])
    return worst


def main():
    d = derived(DIMS)
    rng = np.random.default_rng(SEED)
    flat = flatten(make_params(d, rng), d)
    X = rng.uniform(-1, 1, size=(B, T, d["F"])).astype(np.float32).astype(np.float64)
    Y = rng.uniform(-1, 1, size=(B, T, d["O"])).astype(np.float32).astype(np.float64)
    Y[0, 1, 0] = np.nan  # before burn-in: masked twice
    Y[1, 6, 1] = np.nan  # after burn-in: a horizon across a session end
    pred, sse, count, grads, dX = model(flat, X, Y, d, BURN_IN)
    worst = finite_difference_check(flat, X, Y, d, grads, dX)
    print("reference: sse %.10g over %d terms, %d parameters; backward vs finite differences: worst error "
          "%.2f of the tolerance" % (sse, count, flat.size, worst))
    if worst > 1.0:
        sys.exit("reference backward disagrees with finite differences")

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "model_reference.h5")
    with h5py.File(path, "w") as f:
        for k, v in DIMS.items():
            f.attrs[k] = np.int32(v)
        f.attrs["B"], f.attrs["T"], f.attrs["burn_in"] = np.int32(B), np.int32(T), np.int32(BURN_IN)
        f.attrs["sse"] = np.float64(sse)
        f.attrs["count"] = np.int64(count)
        f.attrs["note"] = "written by tests/core/reference/mamba2_reference.py; see its docstring"
        for name, v in (("params", flat), ("X", X), ("Y", Y), ("pred", pred), ("grads", grads), ("dX", dX)):
            f.create_dataset(name, data=v.astype(np.float32))
    print("wrote", path, os.path.getsize(path), "bytes")


if __name__ == "__main__":
    main()
