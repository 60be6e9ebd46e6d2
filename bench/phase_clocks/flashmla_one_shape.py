# FlashMLA's sparse FP8 decode on one shape (for ncu): fp8_ds_mla records built directly in torch.
import os, sys
import torch
sys.path.insert(0, os.environ.get("FMLA_DIR") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".anchors", "flashmla", "FlashMLA"))
import flash_mla
R, H, K, N, BLOCK = int(sys.argv[1]), int(sys.argv[2]), 2048, 262144, 64
dev = "cuda"
g = torch.Generator(device=dev).manual_seed(1)
nb = N // BLOCK
cache = torch.empty(nb, BLOCK, 656, dtype=torch.uint8, device=dev)
cache[..., :512] = torch.randn(nb, BLOCK, 512, device=dev, generator=g).to(torch.float8_e4m3fn).view(torch.uint8)
cache[..., 512:528] = torch.ones(nb, BLOCK, 4, device=dev).view(torch.uint8)
cache[..., 528:] = torch.randn(nb, BLOCK, 64, device=dev, generator=g).to(torch.bfloat16).view(torch.uint8)
q = torch.randn(R, 1, H, 576, device=dev, generator=g).to(torch.bfloat16)
idx = torch.rand(R, N, device=dev, generator=g).topk(K, dim=1).indices.to(torch.int32).view(R, 1, K).contiguous()
meta, _ = flash_mla.get_mla_metadata()
for _ in range(4):
    out, lse = flash_mla.flash_mla_with_kvcache(q, cache.view(nb, BLOCK, 1, 656), None, None, 512, meta, None,
                                                576 ** -0.5, False, True, idx)
torch.cuda.synchronize()
print("flashmla ok", float(out.float().abs().mean()))
