#!/usr/bin/env python3
"""Independent NumPy references for kvscope's GGUF kernels (tests/test_gguf_kernels.cpp).

  numpy_quant_ref.py suite --out DIR    writes the cases and DIR/suite.json

matmul cases: for every quantized type, a (rows, cols) matrix of random block
bytes (numpy_gguf.random_blocks: every bit pattern of quants and packed
scales), inputs X (n, cols) for several n and a bias b; the reference is
numpy_gguf's float64 dequantizer, then a float64 matmul: y = X W^T (without
b) and yabs = |X| |W|^T (the scale of the terms, for the error bound).

quantize cases: f32 rows (random, all-zero, constant, an outlier, tiny and
huge blocks) and the blocks llama.cpp's reference quantizers
(quantize_row_*_ref in ggml-quants.c, whose rules are restated below)
write for them. Those rules are f32 arithmetic in a fixed order, so each
step here is rounded to float32 as it is there (F() around every
operation; sums accumulate one term at a time, as np.add.accumulate does).
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy_gguf as ng  # noqa: E402  (the dequantizers and block tables)

F = np.float32
QUANT = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q4_K", "Q5_K", "Q6_K"]


def acc(terms):
    """Sequential float32 sum (0 + t0 + t1 + ...), as a C loop does."""
    return F(np.add.accumulate(np.asarray(terms, dtype=F))[-1])


def half(v):
    """f32 -> f16 (nearest even) -> its 2 little-endian bytes and its value."""
    h = np.array([v], dtype=F).astype(np.float16)
    return h.view(np.uint8).tobytes(), F(h[0])


def rint(v):
    return np.rint(np.asarray(v, dtype=F)).astype(np.int64)


def signed_max(x):
    """The first value of largest magnitude (+0 when all are zero), and that magnitude."""
    i = int(np.argmax(np.abs(x)))
    amax = F(abs(x[i]))
    return (F(x[i]) if amax > 0 else F(0.0)), amax


def q8_0(x):
    amax = F(np.max(np.abs(x)))
    d = F(amax / F(127))
    idd = F(F(1) / d) if d != 0 else F(0)
    v = (x * idd).astype(F).astype(np.float64)
    q = np.sign(v) * np.floor(np.abs(v) + 0.5)  # roundf: halves away from zero
    return half(d)[0] + q.astype(np.int8).tobytes()


def pack_legacy(q, bits):
    qs = ((q[:16] & 15) | ((q[16:] & 15) << 4)).astype(np.uint8).tobytes()
    if bits == 4:
        return qs
    qh = int(sum(((int(q[j]) >> 4) & 1) << j for j in range(32)))
    return qh.to_bytes(4, "little") + qs


def q_sym(x, bits):
    mx, _ = signed_max(x)
    hv = F(1 << (bits - 1))
    d = F(mx / -hv)
    idd = F(F(1) / d) if d != 0 else F(0)
    t = ((x * idd).astype(F) + F(hv + F(0.5))).astype(F)
    q = np.minimum((1 << bits) - 1, np.trunc(t).astype(np.int64))
    return half(d)[0] + pack_legacy(q, bits)


def q_min(x, bits):
    mn, mx = F(np.min(x)), F(np.max(x))
    d = F(F(mx - mn) / F((1 << bits) - 1))
    idd = F(F(1) / d) if d != 0 else F(0)
    t = (((x - mn).astype(F) * idd).astype(F) + F(0.5)).astype(F)
    q = np.trunc(t).astype(np.int64)
    if bits == 4:
        q = np.minimum(15, q)
    return half(d)[0] + half(mn)[0] + pack_legacy(q, bits)


def weighted_err(x, w, q, scale, mn):
    diff = (((F(scale) * q.astype(F)).astype(F) + F(mn)).astype(F) - x).astype(F)
    return acc((w * (diff * diff).astype(F)).astype(F))


def fit_scale_min(x, w, nmax, rmin, rdelta, nstep):
    """make_qkx2_quants: returns (scale, -min, quants)."""
    mn, mx = F(min(F(np.min(x)), F(0))), F(np.max(x))
    sum_w, sum_x = acc(w), acc((w * x).astype(F))
    if mx == mn:
        return F(0), F(-mn), np.zeros(32, np.int64)
    iscale = F(F(nmax) / F(mx - mn))
    scale = F(F(1) / iscale)
    quant = lambda isc, m: np.clip(rint((isc * (x - m).astype(F)).astype(F)), 0, nmax)  # noqa: E731
    q = quant(iscale, mn)
    best = weighted_err(x, w, q, scale, mn)
    for i in range(nstep + 1):
        # (mn is the best candidate's min so far, as in llama.cpp's loop)
        iscale = F(F(F(F(rmin) + F(F(rdelta) * F(i))) + F(nmax)) / F(mx - mn))
        c = quant(iscale, mn)
        lf = c.astype(F)
        wl = (w * lf).astype(F)
        sum_l, sum_l2, sum_xl = acc(wl), acc((wl * lf).astype(F)), acc((wl * x).astype(F))
        det = F(F(sum_w * sum_l2) - F(sum_l * sum_l))
        if not det > 0:
            continue
        this_scale = F(F(F(sum_w * sum_xl) - F(sum_x * sum_l)) / det)
        this_min = F(F(F(sum_l2 * sum_x) - F(sum_l * sum_xl)) / det)
        if this_min > 0:
            this_min, this_scale = F(0), F(sum_xl / sum_l2)
        err = weighted_err(x, w, c, this_scale, this_min)
        if err < best:
            q, best, scale, mn = c, err, this_scale, this_min
    return scale, F(-mn), q


def q_k45(x, bits):
    nmax = (1 << bits) - 1
    L = np.zeros(256, np.int64)
    scales, mins = np.zeros(8, F), np.zeros(8, F)
    for j in range(8):
        xs = x[32 * j:32 * j + 32]
        av_x = np.sqrt(F(acc((xs * xs).astype(F)) / F(32)))
        w = (av_x + np.abs(xs)).astype(F)
        args = (-1.0, 0.1, 20) if bits == 4 else (-0.5, 0.1, 15)
        scales[j], mins[j], L[32 * j:32 * j + 32] = fit_scale_min(xs, w, nmax, *args)
    max_scale, max_min = F(max(F(0), np.max(scales))), F(max(F(0), np.max(mins)))
    inv_s = F(F(63) / max_scale) if max_scale > 0 else F(0)
    inv_m = F(F(63) / max_min) if max_min > 0 else F(0)
    ls = np.minimum(63, rint((inv_s * scales).astype(F)) & 255)
    lm = np.minimum(63, rint((inv_m * mins).astype(F)) & 255)
    sc = np.zeros(12, np.int64)
    sc[0:4] = ls[0:4] | ((ls[4:8] >> 4) << 6)
    sc[4:8] = lm[0:4] | ((lm[4:8] >> 4) << 6)
    sc[8:12] = (ls[4:8] & 15) | ((lm[4:8] & 15) << 4)
    dbytes, dv = half(F(max_scale / F(63)))
    mbytes, mv = half(F(max_min / F(63)))
    for j in range(8):
        dd = F(dv * F(ls[j]))
        if dd == 0:
            continue
        dm = F(mv * F(lm[j]))
        xs = x[32 * j:32 * j + 32]
        L[32 * j:32 * j + 32] = np.clip(rint(((xs + dm).astype(F) / dd).astype(F)), 0, nmax)
    pairs = L.reshape(4, 2, 32)  # pair p: sub-blocks 2p (low nibble), 2p + 1 (high)
    qs = ((pairs[:, 0] & 15) | ((pairs[:, 1] & 15) << 4)).astype(np.uint8).tobytes()
    out = dbytes + mbytes + sc.astype(np.uint8).tobytes()
    if bits == 5:
        qh = sum(((L.reshape(8, 32)[k] >> 4) & 1) << k for k in range(8))
        out += qh.astype(np.uint8).tobytes()
    return out + qs


def fit_signed_scale(x, nmax=32):
    """make_qx_quants with weights x^2: returns (scale, quants + nmax)."""
    mx, amax = signed_max(x)
    if amax < F(1e-15):
        return F(0), np.zeros(16, np.int64)
    w = (x * x).astype(F)

    def sums(isc):
        lf = np.clip(rint((isc * x).astype(F)), -nmax, nmax - 1).astype(F)
        return acc((((w * x).astype(F)) * lf).astype(F)), acc((((w * lf).astype(F)) * lf).astype(F)), lf

    iscale = F(F(-nmax) / mx)
    sumlx, suml2, lf = sums(iscale)
    L = lf.astype(np.int64) + nmax
    scale = F(sumlx / suml2) if suml2 != 0 else F(0)
    best = F(scale * sumlx)
    for i in range(-9, 10):
        if i == 0:
            continue
        iscale = F(-F(F(nmax) + F(F(0.1) * F(i))) / mx)
        sumlx, suml2, lf = sums(iscale)
        if suml2 > 0 and F(sumlx * sumlx) > F(best * suml2):
            L = lf.astype(np.int64) + nmax
            scale = F(sumlx / suml2)
            best = F(scale * sumlx)
    return scale, L


def q6_k(x):
    L = np.zeros(256, np.int64)
    scales = np.zeros(16, F)
    max_scale, max_abs = F(0), F(0)
    for ib in range(16):
        scales[ib], L[16 * ib:16 * ib + 16] = fit_signed_scale(x[16 * ib:16 * ib + 16])
        if abs(scales[ib]) > max_abs:
            max_abs, max_scale = F(abs(scales[ib])), scales[ib]
    if max_abs < F(1e-15):
        return bytes(210)
    iscale = F(F(-128) / max_scale)
    dbytes, dv = half(F(F(1) / iscale))
    sc = np.minimum(127, rint((iscale * scales).astype(F)))
    for j in range(16):
        dd = F(dv * F(sc[j]))
        if dd == 0:
            continue
        xs = x[16 * j:16 * j + 16]
        L[16 * j:16 * j + 16] = np.clip(rint((xs / dd).astype(F)), -32, 31) + 32
    q = L.reshape(2, 4, 32)  # half h, group g, l
    ql = np.concatenate([(q[:, 0] & 15) | ((q[:, 2] & 15) << 4), (q[:, 1] & 15) | ((q[:, 3] & 15) << 4)], axis=1)
    qh = sum((q[:, g] >> 4) << (2 * g) for g in range(4))
    return ql.astype(np.uint8).tobytes() + qh.astype(np.uint8).tobytes() + sc.astype(np.int8).tobytes() + dbytes


def quantize_row(tname, x):
    _, bs, nbytes = ng.TYPES[tname]
    fn = {"Q8_0": q8_0, "Q4_0": lambda b: q_sym(b, 4), "Q5_0": lambda b: q_sym(b, 5),
          "Q4_1": lambda b: q_min(b, 4), "Q5_1": lambda b: q_min(b, 5), "Q4_K": lambda b: q_k45(b, 4),
          "Q5_K": lambda b: q_k45(b, 5), "Q6_K": q6_k}[tname]
    out = b"".join(fn(x[i:i + bs].astype(F)) for i in range(0, len(x), bs))
    assert len(out) == len(x) // bs * nbytes, tname
    return out


def quantize_inputs(bs, rng):
    """Rows of blocks: random normal, zeros, a constant, an outlier, tiny, huge, all positive."""
    blocks = [rng.standard_normal(bs), np.zeros(bs), np.full(bs, -0.75), rng.standard_normal(bs) * 0.01,
              rng.standard_normal(bs) * 1e-20, rng.standard_normal(bs) * 1e4, rng.uniform(0.5, 2.0, bs)]
    blocks[3][bs // 3] = 5.0
    blocks.append(rng.standard_normal(bs) * np.repeat(2.0 ** rng.integers(-6, 4, bs // 16), 16))
    return np.concatenate(blocks).astype(F)


def suite(out):
    rng = np.random.default_rng(20261202)
    record = {"matmul": [], "quantize": []}
    save = lambda name, arr: arr.tofile(os.path.join(out, name)) or name  # noqa: E731
    for tname in QUANT:
        _, bs, nbytes = ng.TYPES[tname]
        rows, cols = 69, (2 if bs == 256 else 5) * bs
        raw = ng.random_blocks(tname, rows * cols // bs, rng)
        w = ng.dequantize(tname, raw, rows * cols).reshape(rows, cols)
        with open(os.path.join(out, tname + ".blocks"), "wb") as f:
            f.write(raw)
        b = rng.standard_normal(rows).astype(F)
        save(tname + ".b.f32", b)
        for n in (1, 3, 8, 33):
            x = rng.standard_normal((n, cols)).astype(F)
            stem = f"{tname}.n{n}"
            save(stem + ".x.f32", x)
            save(stem + ".y.f64", x.astype(np.float64) @ w.T)
            save(stem + ".yabs.f64", np.abs(x.astype(np.float64)) @ np.abs(w).T)
            record["matmul"].append({"type": tname, "rows": rows, "cols": cols, "n": n, "blocks": tname + ".blocks",
                                     "b": tname + ".b.f32", "x": stem + ".x.f32", "y": stem + ".y.f64",
                                     "yabs": stem + ".yabs.f64"})
        x = quantize_inputs(bs, rng)
        save(tname + ".qx.f32", x)
        with open(os.path.join(out, tname + ".qblocks"), "wb") as f:
            f.write(quantize_row(tname, x))
        record["quantize"].append({"type": tname, "n": len(x), "x": tname + ".qx.f32", "blocks": tname + ".qblocks"})
    with open(os.path.join(out, "suite.json"), "w") as f:
        json.dump(record, f, indent=1)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("suite")
    s.add_argument("--out", required=True)
    a = p.parse_args()
    suite(a.out)


if __name__ == "__main__":
    sys.exit(main())
