"""Where computation runs: the device, the CPU thread count, and how freed memory is kept."""

from __future__ import annotations

import ctypes
import os

import torch

from attnmt.errors import ConfigError


def pick_device(name: str, key: str) -> torch.device:
    """auto takes CUDA when present; `key` is the config key that set `name`."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"{key}={name}: CUDA is not available on this machine")
    try:
        return torch.device(name)
    except RuntimeError:
        raise ConfigError(f"{key}={name!r}: use auto, cpu, cuda or cuda:N") from None


def cpu_has_bf16() -> bool:
    """Whether torch multiplies bf16 natively on this CPU (AVX-512 BF16 or AMX tiles). On
    other CPUs bf16 is emulated and slower than fp32; ATEN_CPU_CAPABILITY=avx2 turns it off."""
    if torch.backends.cpu.get_cpu_capability() != "AVX512":
        return False
    return torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported()


def amp_dtype(amp: bool, device: torch.device) -> torch.dtype | None:
    """The autocast type of mixed precision on `device` (None: fp32): on CUDA bf16 where
    supported, else fp16; on a CPU bf16 where it has native bf16 (see `cpu_has_bf16`)."""
    if not amp:
        return None
    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return torch.bfloat16 if device.type == "cpu" and cpu_has_bf16() else None


def cpu_count() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def cpu_info() -> dict[str, str]:
    """The first CPU's fields in /proc/cpuinfo ("model name", "flags", ...); {} without it."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            text = info.read()
    except OSError:
        return {}
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, colon, value = line.partition(":")
        if colon:
            fields.setdefault(key.strip(), value.strip())
    return fields


def set_threads(threads: int | None) -> None:
    """Use `threads` CPU threads (None: all cores, shared out among the processes torchrun
    started on this machine)."""
    local_processes = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    torch.set_num_threads(threads or max(1, cpu_count() // local_processes))


def flush_denormals() -> None:
    """Let the CPU treat denormal floats (below 1.2e-38 in fp32) as zero, on this thread.

    Attention that has gone hard puts weights of e^-90 and less beside the one that takes it
    all, and every product and gradient that reads them then runs on the CPU's slow path for
    denormals (docs/benchmarks.md has what that costs a trained dot-attention model). Zero for
    them changes no value above 1e-38. The setting is a thread's: the autograd engine runs a
    CPU backward on the calling thread, and threads started afterwards (torch's intra-op
    threads start at its first parallel operation) inherit it on Linux."""
    torch.set_flush_denormal(True)


# Entries kept by oneDNN's primitive cache (its default 1,024) and by ideep's, the layer between
# torch and oneDNN (LRU_CACHE_CAPACITY, default 1,024); see `limit_onednn_cache`.
ONEDNN_CACHE_ENTRIES = 256
IDEEP_CACHE_ENTRIES = 16


def limit_onednn_cache(
    entries: int = ONEDNN_CACHE_ENTRIES, ideep: int = IDEEP_CACHE_ENTRIES
) -> None:
    """Bound the memory the kernels of bf16 matrix products keep on a CPU, one set per shape.

    Those products run on oneDNN, through ideep: oneDNN caches each shape's compiled primitive
    (up to `entries`), and ideep keeps its own cache of each shape's primitive with its working
    buffers (up to `ideep`; about 0.4 MB an entry for this model's products). Training runs
    its products in rows of a few fixed sizes (`attnmt.model.blocks`): about 200 shapes in
    all, which oneDNN's cache keeps so that each is compiled once per run, while ideep's
    default of 1,024 entries held 0.4-0.6 GB more memory and ran no faster
    (docs/benchmarks.md). Both read
    their limit when first used, so this must come before the first bf16 product; a limit
    already set in the environment (ONEDNN_PRIMITIVE_CACHE_CAPACITY, LRU_CACHE_CAPACITY) is
    kept. ideep needs at least 1."""
    os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", str(entries))
    os.environ.setdefault("LRU_CACHE_CAPACITY", str(max(1, ideep)))


# glibc's mallopt parameters (malloc.h), and the size up to which freed blocks are kept.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
KEEP_FREED_BYTES = 1 << 30


def keep_freed_memory() -> None:
    """Let the C allocator reuse freed tensor memory instead of handing it back to the OS.

    glibc serves each large block (a decoding step's logits, rows x vocabulary floats, or a
    training batch's) with its own mmap and unmaps it when freed, so the next step's tensor of
    the same size faults every page in again. Raising the mmap and trim thresholds keeps such
    blocks in the heap, for more peak memory (heap fragmentation); docs/benchmarks.md has the
    figures. Where the C library has no mallopt nothing changes.
    """
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (AttributeError, OSError, TypeError):
        return
    mallopt(_M_MMAP_THRESHOLD, KEEP_FREED_BYTES)
    mallopt(_M_TRIM_THRESHOLD, KEEP_FREED_BYTES)


QUANTIZE = ("int8",)
# The `dtype` a model decodes in: the type its weights are cast to after loading.
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def check_quantize(kind: str | None) -> None:
    """Refuse a `quantize` value other than None and those of QUANTIZE, naming the key."""
    if kind not in (None, *QUANTIZE):
        raise ConfigError(f"quantize={kind!r}: valid values are null, {', '.join(QUANTIZE)}")


def quantize(model: torch.nn.Module, kind: str | None, device: torch.device) -> torch.nn.Module:
    """`model` for decoding with `kind` weights: None leaves it as it is; int8 quantizes the
    linear and RNN layers dynamically (weights int8, activations quantized per batch), which
    torch runs on CPUs only. Embeddings and the attention's matrix products stay fp32."""
    check_quantize(kind)
    if kind is None:
        return model
    if device.type != "cpu":
        raise ConfigError(f"quantize={kind}: int8 decoding runs on the CPU only (device=cpu)")
    import copy
    import warnings

    from torch.ao.quantization import quantize_dynamic

    layers = {torch.nn.Linear, torch.nn.GRU, torch.nn.LSTM, torch.nn.RNN}
    model = copy.deepcopy(model)  # the caller's model keeps its own layers
    for module in model.modules():
        # quantize_dynamic swaps exact types: a fast twin (`attnmt.model.fast`) of one of these
        # layers, which says so in `twin_of`, is quantized as the layer it equals
        if getattr(type(module), "twin_of", None) in layers:
            module.__class__ = type(module).twin_of
    with warnings.catch_warnings():  # torch.ao.quantization's deprecation notice
        warnings.simplefilter("ignore")
        return quantize_dynamic(model, layers, dtype=torch.qint8, inplace=True)


def check_dtype(dtype: str, kind: str | None, device: torch.device) -> torch.dtype:
    """The torch type of `dtype` (a key of DTYPES), refusing, with the key named, bfloat16
    with `quantize` (int8 weights are not bf16) and bfloat16 on a CPU without native bf16
    (see `cpu_has_bf16`), where it would decode slower than float32. CUDA takes bf16."""
    if dtype not in DTYPES:
        raise ConfigError(f"dtype={dtype!r}: valid values are {', '.join(DTYPES)}")
    if dtype == "float32":
        return torch.float32
    if kind is not None:
        raise ConfigError(f"dtype={dtype} with quantize={kind}: choose one of the two")
    if device.type == "cpu" and not cpu_has_bf16():
        raise ConfigError(
            f"dtype={dtype}: this CPU has no native bf16 (avx512_bf16 or amx_bf16 in its flags), "
            "where bf16 decodes slower than float32; use dtype=float32"
        )
    if device.type not in ("cpu", "cuda"):
        raise ConfigError(f"dtype={dtype}: bf16 decoding runs on a CPU or CUDA (device={device})")
    return DTYPES[dtype]
