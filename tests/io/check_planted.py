"""Planted-signal check for a mamba2_ticks synth file (usage: /usr/bin/python3 check_planted.py FILE.h5; about
  15 s per million rows, not part of ctest): IC (Pearson, test split) of
  ridge on the current row's features, the simulator's latent, and a ridge on a bank of causal exponential
  filters of the features (what a linear-recurrent sequence model can represent), with the full session history
  and with only the last 256 rows (a seq_len-256 window)."""
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
X = f["/features/X"][:].astype(np.float64); y = f["/targets/y"][:].astype(np.float64)
lat = f["/synth/latent"][:]; sess = f["/index/sessions"][:]
tr = f["/index/train"][:]; te = f["/index/test"][:]
H = f["/targets/y"].attrs["horizons"]
taus = [3, 10, 30, 100, 300, 1000]
def bank(window=None):
    J = X.shape[1] - 2                      # not the time-of-day pair
    lam = np.exp(-1.0 / np.array(taus, dtype=float))
    lamv = np.tile(lam, J); src = np.repeat(np.arange(J), len(taus))
    full = np.zeros((len(X), J * len(taus)))
    starts = set(sess[:-1].tolist())
    acc = np.zeros(J * len(taus))
    for t in range(len(X)):
        if t in starts: acc[:] = 0
        acc = lamv * acc + X[t, src]
        full[t] = acc
    if window:
        out = full.copy(); sid = np.searchsorted(sess, np.arange(len(X)), side="right") - 1
        t = np.arange(len(X)); ok = (t - window) >= sess[sid]
        out[ok] -= (lamv ** window) * full[t[ok] - window]
        full = out
    return np.hstack([X, full, np.ones((len(X), 1))])
def ic(a, b):
    m = np.isfinite(a) & np.isfinite(b); return np.corrcoef(a[m], b[m])[0, 1]
def ridge_ic(A, k):
    t = slice(*tr); s = slice(*te); m = np.isfinite(y[t, k])
    At = A[t][m]; w = np.linalg.solve(At.T @ At + 1e-3 * len(At) * np.eye(A.shape[1]) * 1e-3, At.T @ y[t, k][m])
    return ic(A[s] @ w, y[s, k])
A0 = np.c_[X, np.ones(len(X))]; Af = bank(); Aw = bank(256)
print(f"{sys.argv[1]}: {len(X)} rows, test {te[1]-te[0]} rows")
for k, h in enumerate(H):
    print(f"  h={h:4d}: ridge(current) {ridge_ic(A0, k):+.3f}   latent {ic(lat[te[0]:te[1]], y[te[0]:te[1], k]):+.3f}"
          f"   filter-bank ridge: full history {ridge_ic(Af, k):+.3f}, last 256 rows {ridge_ic(Aw, k):+.3f}")
