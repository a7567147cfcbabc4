#!/usr/bin/env python3
"""CPU model of GEMV v5 (src/cuda/gemv_mma.cu): does its lane-level fragment mapping compute
the Q4_K and Q6_K dot products?

Emulates one warp on one tile of 16 rows: every lane builds its A/B registers from the bytes the
kernel loads (code bytes qs[32c + 8t, +8), activations in the K45 order at 32c + 8t and
128 + 32c + 8t, B column n_j = 2(j & 3) + (j >> 2) for sub-block j), the mma is emulated from
the PTX ISA fragment layout of m16n8k32 (8-bit), and each lane applies its four scales as
v5_scale does. The result is compared with a plain dequantize-and-sum of the same blocks.

  python3 dev/cuda/mma_gemv_model.py [TRIALS]
"""
import random
import struct
import sys


def f16(bits):
    return struct.unpack("<e", struct.pack("<H", bits))[0]


def scale_min_k4(sc, j):
    """quant_k4_scale_min_get: the 6-bit scale and min of sub-block j from the 12 packed bytes"""
    if j < 4:
        return sc[j] & 63, sc[j + 4] & 63
    return (sc[j + 4] & 0xF) | ((sc[j - 4] >> 6) << 4), (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4)


def k45_pos(n):
    """cuda_xq_pos_k45 within a super-block"""
    r = (n >> 4) & 15
    rr = r & 3
    at = 2 * (r >> 2) + rr if rr < 2 else 8 + 2 * (r >> 2) + rr - 2
    return 16 * at + (n & 15)


def word(b, off):
    return b[off] | b[off + 1] << 8 | b[off + 2] << 16 | b[off + 3] << 24


def bytes_of(w, signed):
    out = [(w >> (8 * i)) & 0xFF for i in range(4)]
    return [v - 256 if signed and v > 127 else v for v in out]


def mma(lanes_a, lanes_b, lanes_c, a_signed=False):
    """m16n8k32, A u8 (or s8) row-major, B s8 col-major, C s32; fragments per the PTX ISA"""
    A = [[0] * 32 for _ in range(16)]
    B = [[0] * 8 for _ in range(32)]
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        a = lanes_a[lane]
        for r, (row, k0) in enumerate([(g, 4 * t), (g + 8, 4 * t), (g, 16 + 4 * t), (g + 8, 16 + 4 * t)]):
            for i, v in enumerate(bytes_of(a[r], a_signed)):
                A[row][k0 + i] = v
        b = lanes_b[lane]
        for r, k0 in enumerate([4 * t, 16 + 4 * t]):
            for i, v in enumerate(bytes_of(b[r], True)):
                B[k0 + i][g] = v
    out = []
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        c = list(lanes_c[lane])
        for r, (row, col) in enumerate([(g, 2 * t), (g, 2 * t + 1), (g + 8, 2 * t), (g + 8, 2 * t + 1)]):
            c[r] += sum(A[row][k] * B[k][col] for k in range(32))
            assert -2**31 <= c[r] < 2**31
        out.append(c)
    return out


def trial(rng, n_sb):
    rows = [[bytes(rng.getrandbits(8) for _ in range(144)) for _ in range(n_sb)] for _ in range(16)]
    # d, dmin: positive finite halves of a sane size
    rows = [[struct.pack("<ee", rng.uniform(1e-3, 2e-2), rng.uniform(1e-3, 2e-2)) + b[4:] for b in r] for r in rows]
    x = [[rng.randint(-127, 127) for _ in range(256)] for _ in range(n_sb)]
    xdd = [[rng.uniform(1e-3, 1e-1) for _ in range(8)] for _ in range(n_sb)]
    xd = [[(xdd[s][j], xdd[s][j] * sum(x[s][32 * j:32 * j + 32])) for j in range(8)] for s in range(n_sb)]
    xq = [[0] * 256 for _ in range(n_sb)]
    for s in range(n_sb):
        for n in range(256):
            xq[s][k45_pos(n)] = x[s][n] & 0xFF

    ref = []
    for r in range(16):
        acc = 0.0
        for s in range(n_sb):
            b = rows[r][s]
            d, dmin = f16(b[0] | b[1] << 8), f16(b[2] | b[3] << 8)
            sc, qs = b[4:16], b[16:144]
            for j in range(8):
                scj, mj = scale_min_k4(sc, j)
                c, hs = j >> 1, j & 1
                for i in range(32):
                    q = (qs[32 * c + i] >> (4 * hs)) & 15
                    acc += (d * scj * q - dmin * mj) * xd[s][j][0] * x[s][32 * j + i]
        ref.append(acc)

    acc = [[0.0, 0.0] for _ in range(32)]   # per lane: rows g, g+8
    for s in range(n_sb):
        c4 = [[0, 0, 0, 0] for _ in range(32)]
        for c in range(4):
            for hs in range(2):
                j = 2 * c + hs
                nj = 2 * (j & 3) + (j >> 2)
                m = 0xF0F0F0F0 if hs else 0x0F0F0F0F
                la, lb = [], []
                for lane in range(32):
                    g, t = lane >> 2, lane & 3
                    q0 = rows[g][s][16 + 32 * c + 8 * t:16 + 32 * c + 8 * t + 8]
                    q1 = rows[g + 8][s][16 + 32 * c + 8 * t:16 + 32 * c + 8 * t + 8]
                    la.append([word(q0, 0) & m, word(q1, 0) & m, word(q0, 4) & m, word(q1, 4) & m])
                    js = (g >> 1) + 4 * (g & 1)   # the kernel: the one sub-block lane g gives x for
                    assert (g == nj) == (js == j)
                    xs = xq[s][128 * (js & 1) + 32 * (js >> 1) + 8 * t:][:8]
                    lb.append([word(xs, 0), word(xs, 4)] if js == j else [0, 0])
                c4 = mma(la, lb, c4)
        for lane in range(32):
            g, t = lane >> 2, lane & 3
            sh = 4 * (t & 1)
            xa, xb = xd[s][t], xd[s][t + 4]
            for ri, (row, dlo, dhi) in enumerate([(g, c4[lane][0] >> sh, c4[lane][1] >> sh),
                                                  (g + 8, c4[lane][2] >> sh, c4[lane][3] >> sh)]):
                b = rows[row][s]
                assert (c4[lane][2 * ri] & ((1 << sh) - 1)) == 0 and (c4[lane][2 * ri + 1] & ((1 << sh) - 1)) == 0
                d, dmin = f16(b[0] | b[1] << 8), f16(b[2] | b[3] << 8)
                hy, hz, hw = word(b, 4), word(b, 8), word(b, 12)
                b0, b4, b8 = (hy >> 8 * t) & 255, (hz >> 8 * t) & 255, (hw >> 8 * t) & 255
                sc_lo, m_lo = b0 & 63, b4 & 63
                sc_hi, m_hi = (b8 & 15) | ((b0 >> 6) << 4), (b8 >> 4) | ((b4 >> 6) << 4)
                assert (sc_lo, m_lo) == scale_min_k4(b[4:16], t) and (sc_hi, m_hi) == scale_min_k4(b[4:16], t + 4)
                assert abs(sc_lo * dlo) < 2**22 and abs(sc_hi * dhi) < 2**22   # the i2f trick's range
                acc[lane][ri] += d * (xa[0] * sc_lo * dlo + xb[0] * sc_hi * dhi) - dmin * (m_lo * xa[1] + m_hi * xb[1])
    worst = 0.0
    for g in range(8):
        for ri, row in enumerate([g, g + 8]):
            got = sum(acc[4 * g + t][ri] for t in range(4))
            scale = max(1e-9, sum(abs(v) for v in ref) / 16)
            worst = max(worst, abs(got - ref[row]) / scale)
    return worst


def trial_q6(rng, n_sb):
    """Q6_K (gemv_mma.cu v5q6_*): lane t feeds weights 8t..8t+7 of a 32-weight unit (half h,
    quarter q), which hold scale group t >> 1; unit q's groups go to B columns 2q + (t >> 1), the
    4 units of a half share one C, so lane t ends with groups 2t, 2t+1 of unit q = t"""
    blk = [[bytes(rng.getrandbits(8) for _ in range(208)) + struct.pack("<e", rng.uniform(1e-3, 2e-2))
            for _ in range(n_sb)] for _ in range(16)]
    x = [[rng.randint(-127, 127) for _ in range(256)] for _ in range(n_sb)]
    dx = [[rng.uniform(1e-3, 1e-1) for _ in range(8)] for _ in range(n_sb)]
    xq = [[0] * 256 for _ in range(n_sb)]
    for sb in range(n_sb):
        for n in range(256):
            xq[sb][k45_pos(n)] = x[sb][n] & 0xFF

    def sc8(b, i):
        v = b[192 + i]
        return v - 256 if v > 127 else v

    ref = []
    for r in range(16):
        acc = 0.0
        for sb in range(n_sb):
            b = blk[r][sb]
            ql, qh, d = b[0:128], b[128:192], f16(b[208] | b[209] << 8)
            for w in range(256):
                h, l = w // 128, w % 128
                q, i = l // 32, l % 32
                lo = ql[64 * h + 32 * (q & 1) + i]
                q6 = ((lo >> 4) if q >= 2 else (lo & 15)) | (((qh[32 * h + i] >> (2 * q)) & 3) << 4)
                acc += d * sc8(b, 8 * h + 2 * q + i // 16) * (q6 - 32) * dx[sb][w // 32] * x[sb][w]
        ref.append(acc)

    acc = [[0.0, 0.0] for _ in range(32)]
    for sb in range(n_sb):
        for h in range(2):
            c4 = [[0, 0, 0, 0] for _ in range(32)]
            for q in range(4):
                la, lb = [], []
                for lane in range(32):
                    g, t = lane >> 2, lane & 3
                    regs = []
                    for row in (g, g + 8):
                        b = blk[row][sb]
                        lw = [word(b, 64 * h + 32 * (q & 1) + 8 * t + 4 * e) for e in range(2)]
                        hw = [word(b, 128 + 32 * h + 8 * t + 4 * e) for e in range(2)]
                        v = []
                        for e in range(2):
                            nib = (lw[e] >> (4 * (q >> 1))) & 0x0F0F0F0F
                            q6 = nib | (((hw[e] >> (2 * q)) & 0x03030303) << 4)
                            v.append((((q6 | 0x80808080) - 0x20202020) ^ 0x80808080) & 0xFFFFFFFF)
                        regs.append(v)
                    la.append([regs[0][0], regs[1][0], regs[0][1], regs[1][1]])
                    gq = g - (t >> 1)   # the kernel: the one unit per half lane (g, t) gives x for
                    qs = gq >> 1 if gq >= 0 and not gq & 1 else -1
                    qa = max(qs, 0)
                    assert (g == 2 * q + (t >> 1)) == (qs == q)
                    xs = xq[sb][128 * (qa & 1) + 32 * (qa >> 1) + 8 * t + 64 * h:][:8]
                    lb.append([word(xs, 0), word(xs, 4)] if qs == q else [0, 0])
                c4 = mma(la, lb, c4, a_signed=True)
            for lane in range(32):
                g, t = lane >> 2, lane & 3
                for ri, row in enumerate((g, g + 8)):
                    b = blk[row][sb]
                    d = f16(b[208] | b[209] << 8)
                    s0, s1 = sc8(b, 8 * h + 2 * t), sc8(b, 8 * h + 2 * t + 1)
                    isum = s0 * c4[lane][2 * ri] + s1 * c4[lane][2 * ri + 1]
                    assert -2**31 <= isum < 2**31
                    acc[lane][ri] += d * dx[sb][4 * h + t] * float(isum)
    worst = 0.0
    scale = max(1e-9, sum(abs(v) for v in ref) / 16)
    for g in range(8):
        for ri, row in enumerate((g, g + 8)):
            got = sum(acc[4 * g + t][ri] for t in range(4))
            worst = max(worst, abs(got - ref[row]) / scale)
    return worst


def main():
    trials = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    rng = random.Random(5)
    worst = max(trial(rng, rng.randint(1, 3)) for _ in range(trials))
    print(f"Q4_K: {trials} tiles: worst |v5 - reference| / mean |reference| = {worst:.2e}")
    worst6 = max(trial_q6(rng, rng.randint(1, 2)) for _ in range(max(1, trials // 2)))
    print(f"Q6_K: {max(1, trials // 2)} tiles: worst |v5 - reference| / mean |reference| = {worst6:.2e}")
    sys.exit(0 if worst < 1e-9 and worst6 < 1e-9 else 1)


if __name__ == "__main__":
    main()
