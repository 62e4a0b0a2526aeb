# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""A real PyTorch workload for tools/gpu_check/gpu_check.py: libcudart and libcuda
mapped but no CUDA call made, "loaded PID", a line read, then CUDA initialised, matmuls
and elementwise kernels under torch.profiler (CUPTI), then "ready" and one JSON line of
what PyTorch itself says: kernel names and launch counts from CUPTI, bytes its caching
allocator reserved with cudaMalloc. A line read, the tensors freed, the cache emptied,
"done"; exits at EOF."""
import collections
import ctypes
import json
import os
import sys

import torch
from torch.profiler import ProfilerActivity, profile

# The driver mapped, no CUDA call made yet: once bpftel's probes (and the checker's
# census) are on both libraries, every call of the process is seen from its first.
ctypes.CDLL("libcuda.so.1", mode=ctypes.RTLD_GLOBAL)
print("loaded", os.getpid(), flush=True)
sys.stdin.readline()

with profile(activities=[ProfilerActivity.CUDA]) as prof:
    a = torch.randn(4096, 4096, device="cuda")
    b = torch.randn(4096, 4096, device="cuda")
    for _ in range(10):
        c = torch.relu(a @ b)
    s = c.sum()
    torch.cuda.synchronize()

kernels = collections.Counter()
for ev in prof.events():
    if ev.device_type == torch.autograd.DeviceType.CUDA and ev.name and \
            not ev.name.startswith("Memcpy") and not ev.name.startswith("Memset"):
        kernels[ev.name] += 1
print("ready", flush=True)
print(json.dumps({"kernels": kernels.most_common(),
                  "reserved_bytes": torch.cuda.memory_reserved(),
                  "allocated_bytes": torch.cuda.memory_allocated(),
                  "sum": float(s)}), flush=True)
sys.stdin.readline()
del a, b, c, s
torch.cuda.empty_cache()
torch.cuda.synchronize()
print("done", json.dumps({"reserved_bytes": torch.cuda.memory_reserved()}), flush=True)
sys.stdin.readline()
