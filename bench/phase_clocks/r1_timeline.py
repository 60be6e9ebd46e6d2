"""Summary of the TL lines of r1_timeline_patch.py (one call): when the decode's and the merge's blocks ran, in us
from the first decode block's start."""
import statistics as st
import sys

decode, merge, inner = [], [], {}
for line in open(sys.argv[1]):
    if line.startswith("TI "):
        block, *t = line.split()[1:]
        inner[int(block)] = [int(x) for x in t]
    if line.startswith("TL "):
        kind, block, *t = line.split()[1:]
        (decode if kind == "0" else merge).append([int(x) for x in t])
        if kind == "0":
            decode[-1].append(int(block))
t0 = min(b[0] for b in decode)


def us(x):
    return (x - t0) / 1000.0


def span(name, xs):
    print(f"  {name:38s} min {min(xs):7.2f}  median {st.median(xs):7.2f}  max {max(xs):7.2f}")


print(f"{sys.argv[1]}: {len(decode)} decode blocks, {len(merge)} merge blocks (us from the first decode block's start)")
span("decode block start", [us(b[0]) for b in decode])
span("decode: first tile decoded (after start)", [(b[1] - b[0]) / 1000 for b in decode if b[1]])
span("decode: tiles done (after first tile)", [(b[2] - b[1]) / 1000 for b in decode if b[1] and b[2]])
span("decode: output stored (after tiles)", [(b[3] - b[2]) / 1000 for b in decode if b[2] and b[3]])
span("decode block end", [us(b[3]) for b in decode if b[3]])
if inner:
    with_inner = [(b, inner[b[4]]) for b in decode if b[4] in inner and b[2] and b[3]]
    span("epilogue: totals in to stores' start", [(i[0] - b[2]) / 1000 for b, i in with_inner])
    span("epilogue: first head group's stores", [(i[1] - i[0]) / 1000 for b, i in with_inner])
    span("epilogue: second head group's to end", [(b[3] - i[1]) / 1000 for b, i in with_inner])
if merge:
    span("merge block start", [us(b[0]) for b in merge])
    span("merge: wait released", [us(b[1]) for b in merge])
    span("merge block end", [us(b[3]) for b in merge if b[3]])
