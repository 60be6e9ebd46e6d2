"""Measurement build only: a timeline (globaltimer, ns) of one call's decode blocks and merge blocks (see README.md).

Each wide-tile block stamps its start, warpgroup 0's first decoded tile, the end of its tiles and its end; each
merge block its start, the end of its griddepcontrol.wait and its end; the 4th call's stamps are printed by a
one-thread kernel after the merge, for each (TL lines: kind, block, stamps).

Its text anchors are the tree of the commit that last changed this file (bench/results/r1-timeline/ used an earlier
version of it, on a36051b's tree). Per-block stamps, thread 0: 0 start, 1 warpgroup 0's first decoded tile, 2 its
tiles done and the heads' totals in, 3 the block's end (after its epilogue and cluster barriers)."""
from source_patch import SourcePatch

hdr = '''
__device__ unsigned long long g_tl[1024][4];
__device__ unsigned g_tl_launch;
__device__ __forceinline__ unsigned long long tl_now() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
  return t;
}
__global__ void tl_dump_kernel(int kind) {
  const unsigned n = g_tl_launch;
  if (n == 4) {
    for (int b = 0; b < 1024; ++b) {
      if (g_tl[b][0] != 0) printf("TL %d %d %llu %llu %llu %llu\\n", kind, b, g_tl[b][0], g_tl[b][1], g_tl[b][2], g_tl[b][3]);
    }
  }
  g_tl_launch = n + 1;
}
#define TL(k_) do { if (tl_on && (k_) >= 0) g_tl[tl_block][(k_)] = tl_now(); } while (0)
'''
w = SourcePatch("src/cuda/sparse_mla_decode_wide_tiles.cuh")
w.rep("namespace mlakv::cuda::wide_tiles {\n", "namespace mlakv::cuda::wide_tiles {\n" + hdr)
w.rep("  const BlockRange block = block_range<kBlockHeads>(p, units_per_split);\n",
      "  const BlockRange block = block_range<kBlockHeads>(p, units_per_split);\n"
      "  const int tl_block = static_cast<int>(blockIdx.x + gridDim.x * blockIdx.y) % 1024;\n"
      "  const bool tl_on = *(volatile unsigned*)&g_tl_launch == 4 && tid == 0;\n"
      "  TL(0);\n")
# warpgroup 0's first decoded tile (transposed products and 64-head blocks)
w.rep("        wait_keys_full(buffer, static_cast<std::uint32_t>(t / kKeyBuffers) & 1u);\n        tp::issue_scores",
      "        wait_keys_full(buffer, static_cast<std::uint32_t>(t / kKeyBuffers) & 1u);\n        if (t == 0) TL(1);\n        tp::issue_scores")
w.rep("        wait_keys_full(buffer, static_cast<std::uint32_t>(t / kKeyBuffers) & 1u);\n        issue_scores(",
      "        wait_keys_full(buffer, static_cast<std::uint32_t>(t / kKeyBuffers) & 1u);\n        if (t == 0) TL(1);\n        issue_scores(")
w.rep("    wait_totals();\n", "    wait_totals();\n    TL(2);\n", 2)
# the block's end (thread 0 is warpgroup 0's): after its epilogue and cluster barriers
w.rep("    return;\n  } else {\n    const int r0", "    TL(3);\n    return;\n  } else {\n    const int r0")
w.rep("      if constexpr (kCrossover) cluster::sync();  // no block leaves while its peer may still arrive on its barriers\n    }\n  }\n",
      "      if constexpr (kCrossover) cluster::sync();  // no block leaves while its peer may still arrive on its barriers\n    }\n    TL(3);\n  }\n")
w.write()
# The decode's stamps are printed after the merge (a kernel between the two would hold back the merge's early launch).
g = SourcePatch("src/cuda/sparse_mla_decode_wide_tiles.cu")
g.rep("namespace mlakv::cuda::wide_tiles {\nnamespace {\n",
      "namespace mlakv::cuda::wide_tiles {\nvoid tl_dump_decode(cudaStream_t stream) { tl_dump_kernel<<<1, 1, 0, stream>>>(0); }\nnamespace {\n")
g.write()
m = SourcePatch("src/cuda/sparse_mla_decode.cu")
m.rep("template <int kCombineBatch>\n__global__", hdr + "template <int kCombineBatch>\n__global__")
m.rep('  asm volatile("griddepcontrol.wait;" ::: "memory");  // the decode grid is complete\n',
      '  const int tl_block = static_cast<int>(blockIdx.x) % 1024;\n'
      '  const bool tl_on = *(volatile unsigned*)&g_tl_launch == 4 && threadIdx.x == 0;\n  TL(0);\n'
      '  asm volatile("griddepcontrol.wait;" ::: "memory");  // the decode grid is complete\n  TL(1);\n')
m.rep("  merged.store(p, row, head, d, m);\n}\n", "  merged.store(p, row, head, d, m);\n  TL(3);\n}\n")
m.rep("  return splits > kShortCombineBatch ? cudaLaunchKernelEx(&config, merge_splits_kernel<kLongCombineBatch>, p, splits)\n"
      "                                     : cudaLaunchKernelEx(&config, merge_splits_kernel<kShortCombineBatch>, p, splits);\n",
      "  const cudaError_t e = splits > kShortCombineBatch\n"
      "             ? cudaLaunchKernelEx(&config, merge_splits_kernel<kLongCombineBatch>, p, splits)\n"
      "             : cudaLaunchKernelEx(&config, merge_splits_kernel<kShortCombineBatch>, p, splits);\n"
      "  tl_dump_kernel<<<1, 1, 0, stream>>>(1);\n  wide_tiles::tl_dump_decode(stream);\n  return e;\n")
m.rep("namespace mlakv::cuda {\n", "namespace mlakv::cuda {\nnamespace wide_tiles {\nvoid tl_dump_decode(cudaStream_t stream);\n}\n", 1)
m.write()
