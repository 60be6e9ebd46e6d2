"""Measurement build only: a timeline (globaltimer, ns) of one call's decode blocks and merge blocks (see README.md).

Each wide-tile block stamps its start, warpgroup 0's first decoded tile, the end of its tiles and its end; each
merge block its start, the end of its griddepcontrol.wait and its end; the 4th call's stamps are printed by a
one-thread kernel after the merge, for each (TL lines: kind, block, stamps).

Its text anchors are a36051b's tree (bench/results/r1-timeline/); later trees moved some of them (the epilogue's
signature, the merge kernel's batch), so it needs them updated before it applies again."""
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
w.rep("    tp::store_output<Codec, kPartial, kN>(p, o, sh.row_sum, sh.row_max, row, head0, split, warpgroup, warp, lane);\n",
      "    tp::store_output<Codec, kPartial, kN>(p, o, sh.row_sum, sh.row_max, row, head0, split, warpgroup, warp, lane);\n    TL(3);\n")
w.write()
# The decode's stamps are printed after the merge (a kernel between the two would hold back the merge's early launch).
g = SourcePatch("src/cuda/sparse_mla_decode_wide_tiles.cu")
g.rep("namespace mlakv::cuda::wide_tiles {\nnamespace {\n",
      "namespace mlakv::cuda::wide_tiles {\nvoid tl_dump_decode(cudaStream_t stream) { tl_dump_kernel<<<1, 1, 0, stream>>>(0); }\nnamespace {\n")
g.write()
m = SourcePatch("src/cuda/sparse_mla_decode.cu")
m.rep("constexpr int kCombineBatch = 16;\n", "constexpr int kCombineBatch = 16;\n" + hdr)
m.rep('  asm volatile("griddepcontrol.wait;" ::: "memory");  // the decode grid is complete\n',
      '  const int tl_block = static_cast<int>(blockIdx.x) % 1024;\n'
      '  const bool tl_on = *(volatile unsigned*)&g_tl_launch == 4 && threadIdx.x == 0;\n  TL(0);\n'
      '  asm volatile("griddepcontrol.wait;" ::: "memory");  // the decode grid is complete\n  TL(1);\n')
m.rep("    p.lse[row * p.lse_stride_row_elems + head * p.lse_stride_head_elems] = total > 0.0f ? m + logf(total) : -INFINITY;\n  }\n}\n",
      "    p.lse[row * p.lse_stride_row_elems + head * p.lse_stride_head_elems] = total > 0.0f ? m + logf(total) : -INFINITY;\n  }\n  TL(3);\n}\n")
m.rep("  return cudaLaunchKernelEx(&config, merge_splits_kernel, p, splits);\n",
      "  const cudaError_t e = cudaLaunchKernelEx(&config, merge_splits_kernel, p, splits);\n"
      "  tl_dump_kernel<<<1, 1, 0, stream>>>(1);\n  wide_tiles::tl_dump_decode(stream);\n  return e;\n")
m.rep("namespace mlakv::cuda {\n", "namespace mlakv::cuda {\nnamespace wide_tiles {\nvoid tl_dump_decode(cudaStream_t stream);\n}\n", 1)
m.write()

# Inside the transposed products' epilogue (thread 0 of each block, every call; the dump after the 4th call's merge
# prints the 4th's): its start, each head group's stores issued (j = 0, 1), its end. TI lines: block, stamps.
t = SourcePatch("src/cuda/transposed_products.cuh")
t.rep("template <class Codec, bool kPartial, int kN>\n__device__ __forceinline__ void store_output(",
      "__device__ unsigned long long g_in[1024][4];\n"
      "__device__ __forceinline__ void in_stamp(int k) {\n"
      "  if (threadIdx.x != 0 || k > 3) return;\n"
      "  unsigned long long t;\n  asm volatile(\"mov.u64 %0, %globaltimer;\" : \"=l\"(t) :: \"memory\");\n"
      "  g_in[(blockIdx.x + gridDim.x * blockIdx.y) % 1024][k] = t;\n}\n"
      "template <class Codec, bool kPartial, int kN>\n__device__ __forceinline__ void store_output(")
t.rep("  const int dim = kFragmentDecode<Codec> ? g / 2 + 4 * (g % 2) : g;\n#pragma unroll\n  for (int j = 0; j < kN / 8; ++j) {\n",
      "  const int dim = kFragmentDecode<Codec> ? g / 2 + 4 * (g % 2) : g;\n  in_stamp(0);\n#pragma unroll\n  for (int j = 0; j < kN / 8; ++j) {\n    if (j > 0) in_stamp(j);\n")
t.write()
w2 = SourcePatch("src/cuda/sparse_mla_decode_wide_tiles.cuh")
w2.rep("      if (g_tl[b][0] != 0) printf(", "      if (g_tl[b][0] != 0 && transposed_products::g_in[b][0] != 0) printf(\"TI %d %llu %llu %llu\\n\", b, transposed_products::g_in[b][0], transposed_products::g_in[b][1], transposed_products::g_in[b][2]);\n      if (g_tl[b][0] != 0) printf(")
w2.write()
