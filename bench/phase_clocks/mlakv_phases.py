"""Per-phase medians (SM cycles) of the wide-tile decode from the PH lines of mlakv_clocks_patch.py."""

import statistics as st, sys
fn = sys.argv[1]
rows = [l.split() for l in open(fn) if l.startswith("PH ")]
by = {}
for r in rows:
    wg, w, t = int(r[1]), int(r[2]), int(r[3]); by.setdefault((wg, w), {})[t] = list(map(int, r[4:18]))
w0 = by[(0, 0)]; n = len(w0)
R = range(2, n - 1)
print(fn, "tiles", n, " WG0 period median", st.median([w0[t+1][0] - w0[t][0] for t in R]))
names = {(0,1): "waitK", (1,2): "QKissue", (2,3): "QKwait", (3,4): "mask", (4,5): "probs_empty", (5,6): "softmax+storeP+arrive", (6,7): "rescale+wait probs_full", (7,13): "PV"}
for (a, b), nm in names.items():
    d = [w0[t][b] - w0[t][a] for t in R]
    print(f"  WG0 {nm:24s} median {st.median(d):7.0f}")
print(f"  WG0 {'PVend->top':24s} median {st.median([w0[t+1][0] - w0[t][13] for t in R]):7.0f}")
w1 = by[(1, 0)]
for (a, b), nm in {(0,1): "decode(t+1)", (1,2): "waitK", (2,3): "wait probs_full", (3,4): "rescale+PV"}.items():
    d = [w1[t][b] - w1[t][a] for t in R]
    print(f"  WG1 {nm:24s} median {st.median(d):7.0f}")
print(f"  WG1 {'PVend->top':24s} median {st.median([w1[t+1][0] - w1[t][4] for t in R]):7.0f}")
for w in range(4):
    w2 = by.get((2, w))
    if not w2: continue
    out = []
    for (a, b), nm in {(8,9): "prefetch+locate", (9,10): "wait empty", (10,11): "rounds", (11,12): "flags+arrive"}.items():
        d = [w2[t][b] - w2[t][a] for t in R]
        out.append(f"{nm} {st.median(d):.0f}")
    out.append(f"tail->top {st.median([w2[t+1][8] - w2[t][12] for t in R]):.0f}")
    print(f"  DEC warp {w}:", ", ".join(out))
print("  WG0 K ready - last decoder arrive (median):", st.median([w0[t][1] - max(by[(2, w)][t][12] for w in range(4)) for t in R]))
base = w0[10][0]
for t in (10, 11):
    print(" t", t, "WG0", [w0[t][k] - base for k in (0,1,2,3,4,5,6,7,13)], "WG1", [w1[t][k] - base for k in range(5)], "DEC0", [by[(2,0)][t][k] - base for k in range(8, 13)])
