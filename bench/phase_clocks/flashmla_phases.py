"""Per-phase medians (SM cycles) of FlashMLA's sparse decode from the FM lines its clock stamps print (README.md)."""

import statistics as st
import sys

rows = [line.split() for line in open(sys.argv[1]) if line.startswith("FM ")]
by = {}
for r in rows:
    by.setdefault(int(r[1]), {})[int(r[2])] = list(map(int, r[3:12]))
w0 = by[0]
tiles = range(2, len(w0) - 1)
print("warpgroup 0 period", st.median([w0[t + 1][0] - w0[t][0] for t in tiles]))
names = ["wait K", "QK issue", "QK wait", "wait sS free", "softmax", "store P + fence", "PV issue + arrive", "PV wait"]
for k, name in enumerate(names):
    print(f"  warpgroup 0 {name:18s} {st.median([w0[t][k + 1] - w0[t][k] for t in tiles]):7.0f}")
w2 = by[2]
for k, name in enumerate(["wait K free", "decode", "arrive"]):
    print(f"  producer {name:21s} {st.median([w2[t][k + 1] - w2[t][k] for t in tiles]):7.0f}")
print(f"  producer {'arrive -> next wait':21s} {st.median([w2[t + 1][0] - w2[t][3] for t in tiles]):7.0f}")
