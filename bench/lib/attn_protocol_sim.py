#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Discrete simulation of attention_tma's barrier protocol (templates/gpu/attention_tma.hip):
the producer warp and WGS consumer warpgroups as generators that follow the kernel's order of
mbarrier waits/arrivals, TMA copies (landing at once) and named-barrier syncs/arrivals (one unit
per warpgroup), run under random interleavings for every consumer count, ring depth, schedule
(simple / lagged, ping-pong), key-tile size and a few causal, tail and cross shapes. Checks: no
deadlock, every read sees the ring use it expects, no slot overwritten while a consumer reads
it, no named barrier arrived twice by one warpgroup within a phase, none left half-arrived.
A model, run by hand (python3 bench/lib/attn_protocol_sim.py, under a second): keep it in step with
the kernel when the kernel's protocol changes (docs/DESIGN.md, attention_tma)."""
import random
import sys

class MBar:
    def __init__(s, count): s.count, s.pending, s.phase = count, count, 0
    def arrive(s):
        s.pending -= 1
        assert s.pending >= 0
        if s.pending == 0: s.phase += 1; s.pending = s.count
    def passed(s, parity):  # try_wait.parity: the phase of this parity has completed
        # completed phases: 0..phase-1; the wait for parity P passes if the current phase's parity != P
        return (s.phase & 1) != parity

class Named:
    def __init__(s, count): s.count, s.arrived, s.gen, s.who = count, 0, 0, set()
    def arrive(s, w=None):
        assert w not in s.who, "warpgroup %s arrives twice in one phase" % w
        s.who.add(w)
        s.arrived += 1
        if s.arrived == s.count: s.who = set()
        if s.arrived == s.count: s.arrived = 0; s.gen += 1

def run(WGS, ST, PP, LAG, tiles, seed, QB=1):
    rnd = random.Random(seed)
    qfull, qempty, aux = [MBar(1) for _ in range(QB)], [MBar(4 * WGS) for _ in range(QB)], MBar(1)
    kfull = [MBar(1) for _ in range(ST)]; kempty = [MBar(4 * WGS) for _ in range(ST)]
    vfull = [MBar(1) for _ in range(ST)]; vempty = [MBar(4 * WGS) for _ in range(ST)]
    named = [Named(2) for _ in range(WGS)]  # one unit per warpgroup (256 threads)
    kslot = [None] * ST; vslot = [None] * ST; qslot = [None] * QB
    reading = {}  # (kind, slot) -> set of (wg, use)

    def wait(bar, parity):
        while not bar.passed(parity): yield
    def nsync(c):
        b = named[c]; b.arrive(('sync', c)); g = b.gen if b.arrived == 0 else b.gen + 1
        # bar.sync: arrive and wait for the phase to complete
        target = b.gen + (0 if b.arrived == 0 else 1)
        while b.gen < target: yield
    def write(kind, slot, arr, use):
        for (w, u) in reading.get((kind, slot), set()):
            raise AssertionError("%s slot %d overwritten with use %d while wg %d reads use %d" % (kind, slot, use, w, u))
        arr[slot] = use
    def start_read(kind, slot, arr, use, w):
        assert arr[slot] == use, "%s slot %d holds %s, wg %d expects %d" % (kind, slot, arr[slot], w, use)
        reading.setdefault((kind, slot), set()).add((w, use))
    def end_read(kind, slot, use, w):
        reading[(kind, slot)].discard((w, use))

    def producer():
        u = 0; aux_uses = 0
        for lt, (n, nacts, tail_j) in enumerate(tiles):
            for j in range(n):
                s, ph = u % ST, (u // ST) & 1
                yield from wait(kempty[s], ph ^ 1)
                write('k', s, kslot, u); kfull[s].arrive()  # expect_tx + copy landing, merged
                if j == 0:
                    qb, qph = lt % QB, (lt // QB) & 1
                    yield from wait(qempty[qb], qph ^ 1)
                    write('q', qb, qslot, lt); qfull[qb].arrive()
                yield from wait(vempty[s], ph ^ 1)
                if j == tail_j:
                    write('v', s, vslot, u); aux.arrive()
                    yield from wait(aux, aux_uses & 1); aux_uses += 1
                    vfull[s].arrive()
                else:
                    write('v', s, vslot, u); vfull[s].arrive()
                u += 1

    def consumer(c):
        u = 0
        def rel(bar, times=4):
            for _ in range(times): bar.arrive()
        if PP and c == WGS - 1: named[0].arrive(('arr', c))
        for lt, (n, nacts, tail_j) in enumerate(tiles):
            n_act = nacts[c]
            qb, qph = lt % QB, (lt // QB) & 1
            yield from wait(qfull[qb], qph)
            start_read('q', qb, qslot, lt, c)
            if not LAG:
                for j in range(n):
                    s, ph = u % ST, (u // ST) & 1
                    yield from wait(kfull[s], ph)
                    act = j < n_act
                    if act: start_read('k', s, kslot, u, c); yield; end_read('k', s, u, c)
                    rel(kempty[s])
                    if j == n_act - 1: end_read('q', qb, lt, c); rel(qempty[qb])
                    yield from wait(vfull[s], ph)
                    if act: start_read('v', s, vslot, u, c); yield; end_read('v', s, u, c)
                    rel(vempty[s]); u += 1
            else:
                u0 = u
                S = lambda j: (u0 + j) % ST; P = lambda j: ((u0 + j) // ST) & 1
                yield from wait(kfull[S(0)], P(0))
                if PP: yield from nsync(c)
                start_read('k', S(0), kslot, u0, c)
                if PP: named[(c + 1) % WGS].arrive(('arr', c))
                yield
                end_read('k', S(0), u0, c); rel(kempty[S(0)])
                if n_act == 1: end_read('q', qb, lt, c); rel(qempty[qb])
                for j in range(1, n_act):
                    yield from wait(kfull[S(j)], P(j))
                    if PP: yield from nsync(c)
                    start_read('k', S(j), kslot, u0 + j, c)
                    yield from wait(vfull[S(j - 1)], P(j - 1))
                    start_read('v', S(j - 1), vslot, u0 + j - 1, c)
                    if PP: named[(c + 1) % WGS].arrive(('arr', c))
                    yield
                    end_read('k', S(j), u0 + j, c); rel(kempty[S(j)])
                    if j == n_act - 1: end_read('q', qb, lt, c); rel(qempty[qb])
                    yield
                    end_read('v', S(j - 1), u0 + j - 1, c); rel(vempty[S(j - 1)])
                yield from wait(vfull[S(n_act - 1)], P(n_act - 1))
                start_read('v', S(n_act - 1), vslot, u0 + n_act - 1, c); yield
                end_read('v', S(n_act - 1), u0 + n_act - 1, c); rel(vempty[S(n_act - 1)])
                for j in range(n_act, n):
                    yield from wait(kfull[S(j)], P(j))
                    if PP: yield from nsync(c); named[(c + 1) % WGS].arrive(('arr', c))
                    yield from wait(vfull[S(j)], P(j))
                    rel(kempty[S(j)]); rel(vempty[S(j)])
                u = u0 + n
        if PP and c == 0: yield from nsync(0)

    agents = [producer()] + [consumer(c) for c in range(WGS)]
    alive = list(range(len(agents)))
    stuck = 0
    while alive:
        i = rnd.choice(alive)
        try:
            next(agents[i]); stuck += 1
        except StopIteration:
            alive.remove(i); stuck = 0
        if stuck > 200000: raise AssertionError("deadlock: agents %s alive" % alive)
    for b in named: assert b.arrived == 0, "named barrier left with arrivals"

def tiles_for(WGS, BKV, seq_q, seq_kv, causal, batch, sched):
    BQ = 64 * WGS
    out = []
    for (b, qt) in sched:
        i0 = qt * BQ
        n_keys = min(seq_kv, i0 + BQ) if causal else seq_kv
        n = (n_keys + BKV - 1) // BKV
        nacts = [min(n, (i0 + 64 * c + 63) // BKV + 1) if causal else n for c in range(WGS)]
        tail = seq_kv // BKV if (b + 1 < batch and seq_kv % BKV) else -1
        out.append((n, nacts, tail))
    return out

count = 0
for WGS in (1, 2, 3):
    for ST in (2, 3, 4):
        for PP in ((0, 1) if WGS > 1 else (0,)):
            for LAG in (0, 1):
                if PP and not LAG: continue
                for BKV in (64, 128, 192):
                    for (sq, skv, causal) in ((77, 77, 1), (300, 300, 1), (1000, 1000, 0), (128, 128, 0), (513, 200, 1), (1, 1000, 0)):
                        BQ = 64 * WGS; qt = (sq + BQ - 1) // BQ
                        work = [(b, (qt - 1 - q) if causal else q) for b in range(2) for q in range(qt)]
                        sched = work[0::3]  # one block's share of a persistent grid
                        tiles = tiles_for(WGS, BKV, sq, skv, causal, 2, sched)
                        for seed in range(3):
                          for QB in (1, 2):
                            try:
                                run(WGS, ST, PP, LAG, tiles, seed, QB); count += 1
                            except AssertionError as e:
                                print("FAIL", WGS, ST, PP, LAG, QB, BKV, sq, skv, causal, tiles, e); sys.exit(1)
print("ok:", count, "simulations")
