"""Measurement build only: clock64 at phase points of one wide-tile block (see README.md)."""
import sys

from source_patch import SourcePatch
f = "src/cuda/sparse_mla_decode_wide_tiles.cuh"
patch = SourcePatch(f)
hdr = '''
__device__ long long g_phase_clocks[3][4][64][16];
__device__ unsigned g_phase_launch;
#define PHASE(t_, k_) do { if (profiled && lane == 0 && (t_) < 64) g_phase_clocks[warpgroup][warp][(t_)][(k_)] = clock64(); } while (0)
'''
patch.rep("namespace mlakv::cuda::wide_tiles {\n", "namespace mlakv::cuda::wide_tiles {\n" + hdr)
patch.rep("  const BlockRange block = block_range<kBlockHeads>(p, units_per_split);\n",
    "  const BlockRange block = block_range<kBlockHeads>(p, units_per_split);\n"
    "  const unsigned launch_no = *(volatile unsigned*)&g_phase_launch;\n"
    "  const bool profiled = blockIdx.x == 2 && blockIdx.y == 0 && launch_no < 1000;\n"
    "  const auto dump = [&] { if (blockIdx.x == 2 && blockIdx.y == 0 && tid == 0) atomicAdd(&g_phase_launch, 1u); };\n")
# the dump kernel (printf outside the decode kernel: a call there would serialize its wgmma)
patch.rep("template <class Codec, bool kPartial, bool kCrossover, int kBlockHeads>\n__global__ void __launch_bounds__",
    """__global__ void phase_dump_kernel() {
  printf("PHDUMP %u\\n", g_phase_launch);
  if (g_phase_launch != 4) return;
  for (int wg = 0; wg < 3; ++wg) for (int w = 0; w < 4; ++w) for (int t = 0; t < 64; ++t) {
    long long* c = g_phase_clocks[wg][w][t];
    if (c[0] == 0 && c[8] == 0 && c[1] == 0) continue;
    printf("PH %d %d %d %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld\\n", wg, w, t, c[0],c[1],c[2],c[3],c[4],c[5],c[6],c[7],c[8],c[9],c[10],c[11],c[12],c[13]);
  }
  g_phase_launch = 1000;
}
template <class Codec, bool kPartial, bool kCrossover, int kBlockHeads>\n__global__ void __launch_bounds__""")
g = "src/cuda/sparse_mla_decode_wide_tiles.cu"
t = open(g).read()
old = "      grid, kThreads, kSharedBytes<kBlockHeads>, kCrossover ? 2 : 1, p, units_per_split, device, stream);\n"
assert t.count(old) == 1
t = t.replace("  return launch_decode_kernel<", "  cudaError_t e = launch_decode_kernel<").replace(old, old + "  phase_dump_kernel<<<1, 1, 0, stream>>>();\n  return e;\n")
open(g, "w").write(t)
# decoder phases 8..12
patch.rep("    if (t + 1 < tiles) ask_l2(d, t, t + 1);\n    const int first_lane",
    "    PHASE(t, 8);\n    if (t + 1 < tiles) ask_l2(d, t, t + 1);\n    const int first_lane")
patch.rep("    bulk_barrier_wait(&sh.keys_empty[buffer], empty_parity);\n#pragma unroll\n    for (int r = 0; r < kRounds; ++r) round(r, at[r]);\n",
    "    PHASE(t, 9);\n    bulk_barrier_wait(&sh.keys_empty[buffer], empty_parity);\n    PHASE(t, 10);\n#pragma unroll\n    for (int r = 0; r < kRounds; ++r) round(r, at[r]);\n    PHASE(t, 11);\n")
patch.rep("        barrier_arrive(&sh.keys_full[buffer]);\n      }\n    }\n  };\n",
    "        barrier_arrive(&sh.keys_full[buffer]);\n      }\n    }\n    PHASE(t, 12);\n  };\n")
patch.rep("    if constexpr (kCrossover) cluster::sync();  // the math warpgroups' last remote arrivals\n    return;",
    "    dump();\n    if constexpr (kCrossover) cluster::sync();  // the math warpgroups' last remote arrivals\n    return;")
# value warpgroup 0..5
patch.rep("""      if constexpr (kValueTokens > 0) {
        if (t + 1 < tiles) decode.template operator()<kValueTokens / kRoundTokens>(d, t + 1);
      }
      const int buffer = t % kKeyBuffers;
      wait_keys_full(buffer, static_cast<std::uint32_t>(t / kKeyBuffers) & 1u);
      bulk_barrier_wait(&sh.probs_full, static_cast<std::uint32_t>(t) & 1u);
      add_values(buffer);
""", """      PHASE(t, 0);
      if constexpr (kValueTokens > 0) {
        if (t + 1 < tiles) decode.template operator()<kValueTokens / kRoundTokens>(d, t + 1);
      }
      PHASE(t, 1);
      const int buffer = t % kKeyBuffers;
      wait_keys_full(buffer, static_cast<std::uint32_t>(t / kKeyBuffers) & 1u);
      PHASE(t, 2);
      bulk_barrier_wait(&sh.probs_full, static_cast<std::uint32_t>(t) & 1u);
      PHASE(t, 3);
      add_values(buffer);
      PHASE(t, 4);
""")
# wg0 non-transposed
patch.rep("""        float s[32];
        wait_keys_full(buffer, static_cast<std::uint32_t>(t / kKeyBuffers) & 1u);
        issue_scores(s, sh.q, sh.keys[buffer]);
        const std::uint32_t valid = warpgroup_math::valid_key_bits<kChunks>(sh.valid[buffer], c);
        wgmma::wait<0>();
        wgmma::fence_operands(s);
""", """        float s[32];
        PHASE(t, 0);
        wait_keys_full(buffer, static_cast<std::uint32_t>(t / kKeyBuffers) & 1u);
        PHASE(t, 1);
        issue_scores(s, sh.q, sh.keys[buffer]);
        const std::uint32_t valid = warpgroup_math::valid_key_bits<kChunks>(sh.valid[buffer], c);
        PHASE(t, 2);
        wgmma::wait<0>();
        wgmma::fence_operands(s);
        PHASE(t, 3);
""")
patch.rep("""        bulk_barrier_wait(&sh.probs_empty, phase ^ 1u);
        float alpha[2];""", """        PHASE(t, 4);
        bulk_barrier_wait(&sh.probs_empty, phase ^ 1u);
        PHASE(t, 5);
        float alpha[2];""")
patch.rep("""        if (arrives) barrier_arrive(&sh.probs_full);
        if (__any_sync(0xFFFFFFFFu, alpha[0] != 1.0f || alpha[1] != 1.0f)) rescale(o, alpha[0], alpha[1]);
        bulk_barrier_wait(&sh.probs_full, phase);  // every warp's probabilities are in
        warpgroup_math::add_probs_times_values<kTileTokens, kKeyBlockBytes>(o, sh.probs, sh.keys[buffer], 0);
""", """        if (arrives) barrier_arrive(&sh.probs_full);
        PHASE(t, 6);
        if (__any_sync(0xFFFFFFFFu, alpha[0] != 1.0f || alpha[1] != 1.0f)) rescale(o, alpha[0], alpha[1]);
        bulk_barrier_wait(&sh.probs_full, phase);  // every warp's probabilities are in
        PHASE(t, 7);
        warpgroup_math::add_probs_times_values<kTileTokens, kKeyBlockBytes>(o, sh.probs, sh.keys[buffer], 0);
        PHASE(t, 13);
""")
patch.rep("""    wait_totals();
    warpgroup_io::store_output<Codec, kPartial>(""", """    wait_totals();
    dump();
    warpgroup_io::store_output<Codec, kPartial>(""")
patch.write()
