#!/usr/bin/env python3
"""CPU model of slot_k4s / slot_q6s (src/cuda/gemv_slots.cuh): for every lane of a warp and
random weight bytes, the bytes a lane gathers by shuffles must equal what slot_k45<false> /
slot_q6_k load directly. Models the address arithmetic of both fetch() versions and the
shuffle source lanes of decode(); no GPU needed.  python3 dev/cuda/shfl_gather_model.py"""
import os
import random
import struct


def u32(buf, off):
    return struct.unpack_from("<I", buf, off)[0]


def check_q4k(n_rows, k, row, u):
    BYTES = 144
    p = os.urandom(n_rows * (k >> 8) * BYTES)
    old, new = {}, {}
    for lane in range(32):
        sl = lane  # s0 = 0
        t = sl & 7
        ib = row * (k >> 8) + (sl >> 3) + 4 * u
        blk = ib * BYTES
        old[lane] = (p[blk:blk + 16], p[blk + 16 + 16 * t:blk + 32 + 16 * t])
        new[lane] = (u32(p, blk + 4 * (t & 3)), p[blk + 16 + 16 * t:blk + 32 + 16 * t])
    for lane in range(32):
        g = lane & ~7
        hdr = b"".join(struct.pack("<I", new[g + j][0]) for j in range(4))
        assert (hdr, new[lane][1]) == old[lane], ("q4k", lane)


def check_q6k(n_rows, k, row, u):
    nbr = k >> 8
    nb = nbr * n_rows
    p = os.urandom(nb * 210)
    old, new = {}, {}
    for lane in range(32):
        sl = lane
        ib = row * nbr + (sl >> 3) + 4 * u
        t = sl & 7
        h, g, f = t >> 2, (t >> 1) & 1, t & 1
        ql = p[ib * 128 + 16 * t:ib * 128 + 16 * t + 16]
        qh_off = nb * 128 + ib * 64 + 32 * h + 16 * f
        sc = nb * 192 + ib * 16 + 8 * h + 2 * g + f
        d = p[nb * 208 + 2 * ib:nb * 208 + 2 * ib + 2]
        old[lane] = (ql, p[qh_off:qh_off + 16], p[sc], p[sc + 4], d)
        nqh = nb * 128 + ib * 64 + 32 * h + 16 * f + 8 * g
        new[lane] = (ql, p[nqh:nqh + 8], u32(p, nb * 192 + ib * 16 + 4 * (t & 3)), d)
    for lane in range(32):
        t = lane & 7
        h, g, f = t >> 2, (t >> 1) & 1, t & 1
        b0 = lane & ~7
        own, other = new[lane][1], new[lane ^ 2][1]
        qh = other + own if g else own + other
        wl, wh = new[b0 + 2 * h][2], new[b0 + 2 * h + 1][2]
        sh8 = 8 * (2 * g + f)
        got = (new[lane][0], qh, (wl >> sh8) & 0xFF, (wh >> sh8) & 0xFF, new[lane][3])
        assert got == old[lane], ("q6k", lane)


def main():
    rnd = random.Random(1)
    n = 0
    for _ in range(300):
        nblk = rnd.randint(4, 40)
        k = 256 * nblk
        rows = rnd.randint(1, 9)
        row = rnd.randrange(rows)
        u = rnd.randrange(max(1, (nblk - 4) // 4 + 1))  # blocks (sl >> 3) + 4u of lanes 0..31 exist
        if 4 * u + 4 > nblk:
            continue
        check_q4k(rows, k, row, u)
        check_q6k(rows, k, row, u)
        n += 1
    print(f"{n} random cases x 32 lanes: gathered bytes == direct loads (Q4_K, Q6_K)")


if __name__ == "__main__":
    main()
