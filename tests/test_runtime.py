"""The process-level settings of attnmt.runtime."""

import os
import resource
import subprocess
import sys

import pytest
import torch

from attnmt.runtime import amp_dtype, cpu_has_bf16, keep_freed_memory

MB = 1 << 18  # float32 elements per MB


def _page_faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_a_freed_large_block_serves_the_next_tensor_without_new_pages():
    keep_freed_memory()
    torch.ones(64 * MB)  # allocated, filled and freed at once
    before = _page_faults()
    torch.ones(48 * MB)  # over glibc's 32 MB mmap ceiling: fresh pages unless the heap has them
    assert _page_faults() - before < 1_000  # fresh pages would be 12,288 faults of 4 KB


def _cpu_flags() -> set[str]:
    with open("/proc/cpuinfo", encoding="utf-8") as info:
        return next(set(line.split(":")[1].split()) for line in info if line.startswith("flags"))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/cpuinfo")
def test_cpu_mixed_precision_follows_the_cpus_bf16_support():
    native = bool({"avx512_bf16", "amx_bf16"} & _cpu_flags())
    cpu = torch.device("cpu")
    assert cpu_has_bf16() == native
    assert amp_dtype(True, cpu) == (torch.bfloat16 if native else None)
    assert amp_dtype(False, cpu) is None


def test_an_avx2_cap_turns_cpu_bf16_off():
    code = "from attnmt.runtime import cpu_has_bf16; print(cpu_has_bf16())"
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "avx2"}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"
