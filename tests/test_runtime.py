"""The process-level settings of attnmt.runtime."""

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from attnmt import runtime
from attnmt.errors import ConfigError
from attnmt.runtime import (
    amp_dtype,
    check_dtype,
    cpu_has_bf16,
    keep_freed_memory,
    limit_onednn_cache,
)

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


def test_the_decoding_dtype_takes_bf16_only_where_it_is_native(monkeypatch):
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert check_dtype("float32", "int8", cpu) == torch.float32
    assert check_dtype("bfloat16", None, cuda) == torch.bfloat16  # CUDA: always allowed
    with pytest.raises(ConfigError, match=r"^dtype='half': valid values are float32, bfloat16"):
        check_dtype("half", None, cpu)
    with pytest.raises(ConfigError, match=r"^dtype=bfloat16 with quantize=int8"):
        check_dtype("bfloat16", "int8", cpu)
    monkeypatch.setattr("attnmt.runtime.cpu_has_bf16", lambda: True)
    assert check_dtype("bfloat16", None, cpu) == torch.bfloat16
    monkeypatch.setattr("attnmt.runtime.cpu_has_bf16", lambda: False)
    with pytest.raises(ConfigError, match=r"^dtype=bfloat16: this CPU has no native bf16"):
        check_dtype("bfloat16", None, cpu)


def test_an_avx2_cap_turns_cpu_bf16_off():
    code = "from attnmt.runtime import cpu_has_bf16; print(cpu_has_bf16())"
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "avx2"}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


_CACHE_PROBE = """
import os, sys
import torch
from attnmt.runtime import limit_onednn_cache
if sys.argv[1] == "limit":
    limit_onednn_cache(1)
matrix = torch.ones(80, 64, dtype=torch.bfloat16)  # bf16 products run on oneDNN where native
for rows in (64, 80, 64):  # the first shape again after another: kept only by a cache of 2+
    torch.mm(matrix[:rows], matrix.t())
"""


@pytest.mark.parametrize("limit", [False, True])
def test_the_onednn_cache_limit_reaches_onednn(limit: bool) -> None:
    env = {**os.environ, "ONEDNN_VERBOSE": "all"}
    env.pop("ONEDNN_PRIMITIVE_CACHE_CAPACITY", None)
    argv = [sys.executable, "-c", _CACHE_PROBE, "limit" if limit else "default"]
    result = subprocess.run(argv, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    creations = [
        line.split(",")[3]
        for line in result.stdout.splitlines()
        if ",matmul," in line and ",create:" in line
    ]
    if not creations:
        pytest.skip("bf16 products do not run on oneDNN on this CPU")
    assert creations[-1] == ("create:cache_miss" if limit else "create:cache_hit")


_IDEEP_PROBE = """
import sys
from pathlib import Path
import torch
from attnmt.runtime import limit_onednn_cache
if sys.argv[1] == "limit":
    limit_onednn_cache()
def rss_mb():
    return int(open("/proc/self/status").read().split("VmRSS:")[1].split()[0]) // 1024
inputs = torch.ones(420, 256, dtype=torch.bfloat16)
weight = torch.ones(768, 256, dtype=torch.bfloat16)
for rows in range(100, 120):  # the allocator and the first kernels settle
    torch.mm(inputs[:rows], weight.t())
before = rss_mb()
for rows in range(120, 420):  # 300 new shapes
    torch.mm(inputs[:rows], weight.t())
print(rss_mb() - before)
"""


def test_the_ideep_cache_limit_bounds_memory_per_shape() -> None:
    """ideep keeps working buffers per product shape: without the limit 300 shapes hold over a
    hundred MB, with it a few (oneDNN's own cache is held small in both runs)."""
    if not runtime.cpu_has_bf16() or not Path("/proc/self/status").exists():
        pytest.skip("bf16 products do not run on oneDNN on this CPU, or no /proc")
    env = {**os.environ, "ONEDNN_PRIMITIVE_CACHE_CAPACITY": "16"}
    env.pop("LRU_CACHE_CAPACITY", None)
    growth = {}
    for mode in ("default", "limit"):
        argv = [sys.executable, "-c", _IDEEP_PROBE, mode]
        result = subprocess.run(argv, env=env, capture_output=True, text=True)
        assert result.returncode == 0, result.stderr
        growth[mode] = int(result.stdout.strip())
    if growth["default"] < 40:
        pytest.skip(f"this torch's ideep keeps little per shape ({growth['default']} MB)")
    assert growth["limit"] < growth["default"] / 4, growth


def test_a_cache_limit_set_by_the_user_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "7")
    monkeypatch.setenv("LRU_CACHE_CAPACITY", "9")
    limit_onednn_cache()
    assert os.environ["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] == "7"
    assert os.environ["LRU_CACHE_CAPACITY"] == "9"


def test_unset_threads_are_shared_among_a_machines_ranks(monkeypatch: pytest.MonkeyPatch) -> None:
    before = torch.get_num_threads()
    monkeypatch.setattr(runtime, "cpu_count", lambda: 4)
    try:
        monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
        runtime.set_threads(None)
        assert torch.get_num_threads() == 2
        runtime.set_threads(3)  # a number given is taken as it is
        assert torch.get_num_threads() == 3
        monkeypatch.setenv("LOCAL_WORLD_SIZE", "8")
        runtime.set_threads(None)
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


def test_denormals_flush_to_zero_and_normal_floats_stay():
    """What `flush_denormals` promises, in a process of its own (the setting is the thread's):
    a denormal product is zero after it, the smallest normal float survives
    (tests/train/test_trainer.py: building a trainer applies it)."""
    script = """
import torch
from attnmt.runtime import flush_denormals
tiny, normal = torch.tensor([1e-39]), torch.tensor([torch.finfo(torch.float32).tiny])
assert (tiny * 1.5).item() > 0  # denormals are kept by default
flush_denormals()
assert (tiny * 1.5).item() == 0 and (normal * 1.5).item() > 0
"""
    subprocess.run([sys.executable, "-c", script], check=True)
