"""The fused C++ kernels of `fused.py`'s fp32 loops: built once, loaded at first use. A speed seam.

In fp32 on the CPU, a training step of the default model spends about a third of its time on
element-wise work: each step of the decoder and of each encoder direction runs the GRU's gates
and the additive scorer's tanh(W h + U q) as a dozen small torch operations, each reading and
writing whole tensors. `csrc/fused.cpp` computes each of these in one pass over memory, forward
and backward (its header lists them); the matrix products stay in torch. `fused.py` calls it
where its compute type is fp32 (bf16 keeps its torch code) and runs the same formulas in torch
operations where `kernels()` is None. docs/benchmarks.md has what it saves.

The library is built with torch.utils.cpp_extension (a C++ compiler and ninja) into torch's
extensions directory (TORCH_EXTENSIONS_DIR, else ~/.cache/torch_extensions), under a name that
carries a hash of the source, the compiler flags, the Python and torch versions and the CPU
capability torch runs at, so a library built for another of these is never loaded. `make
install` builds it (`python -m attnmt.model.native build`); otherwise the first use does, once.
The first use logs one line: "fused C++ GRU: on", or "fused C++ GRU: off: <reason>" (no compiler,
a failed build, or ATTNMT_NATIVE=0, which forces the torch code).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import logging
import os
import shutil
import sys
import time
from pathlib import Path
from types import ModuleType

import torch

log = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("csrc") / "fused.cpp"
# ATTNMT_NATIVE=0: fused.py runs its torch code even where the library loads.
SWITCH = "ATTNMT_NATIVE"
# Beyond torch's flags: optimise fully and vectorise the `omp simd` loops (no OpenMP runtime);
# exp's rounding and selects vectorise only without trapping math (no code here reads the
# floating-point exception flags).
FLAGS = ["-O3", "-fopenmp-simd", "-fno-trapping-math"]
# The vector instructions of each CPU capability torch reports; others build for the baseline.
CAPABILITY_FLAGS = {
    "AVX2": ["-mavx2", "-mfma"],
    "AVX512": ["-mavx2", "-mfma", "-mavx512f", "-mavx512vl", "-mavx512bw", "-mavx512dq"],
}
# A build's lock file older than this is left from a build that was killed.
STALE_LOCK_SECONDS = 600


class NativeUnavailable(Exception):
    """The library cannot be loaded here; the message says why."""


def flags() -> list[str]:
    """The compiler flags of this machine's build."""
    return FLAGS + CAPABILITY_FLAGS.get(torch.backends.cpu.get_cpu_capability(), [])


def library_name() -> str:
    """The library's name: its version (source, flags, Python, torch, CPU capability) hashed."""
    stamp = hashlib.sha256(SOURCE.read_bytes())
    for part in (*flags(), sys.version, torch.__version__):
        stamp.update(part.encode())
    capability = torch.backends.cpu.get_cpu_capability().lower()
    return f"attnmt_fused_{capability}_{stamp.hexdigest()[:12]}"


def build_directory(name: str) -> Path:
    """Where the library `name` is built: under TORCH_EXTENSIONS_DIR, else torch's default."""
    from torch.utils import cpp_extension

    root = os.environ.get("TORCH_EXTENSIONS_DIR") or cpp_extension.get_default_build_root()
    return Path(root) / name


def load(verbose: bool = False) -> ModuleType:
    """The compiled kernels, built first where they are not yet (`verbose`: the build's
    commands and output). Raises NativeUnavailable, or OSError from the file system, saying
    why, where they cannot be built or loaded."""
    if not SOURCE.is_file():
        raise NativeUnavailable(f"{SOURCE} is missing from this install")
    name = library_name()
    directory = build_directory(name)
    library = directory / (name + (".pyd" if os.name == "nt" else ".so"))
    _wait_for_other_build(directory / "lock")
    if not library.is_file():
        return _build(name, directory, verbose)
    spec = importlib.util.spec_from_file_location(name, library)
    if spec is None or spec.loader is None:
        raise NativeUnavailable(f"{library} is not a Python extension module")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except ImportError as error:
        raise NativeUnavailable(f"{library} does not load: {error}") from None
    return module


def _wait_for_other_build(lock: Path) -> None:
    """Return once no other process is building into `lock`'s directory; raise where its lock
    is older than STALE_LOCK_SECONDS (torch would wait for it forever)."""
    while True:
        try:
            age = time.time() - lock.stat().st_mtime
        except FileNotFoundError:
            return
        if age > STALE_LOCK_SECONDS:
            raise NativeUnavailable(f"{lock} is left from an interrupted build: delete it")
        time.sleep(1)


def _build(name: str, directory: Path, verbose: bool) -> ModuleType:
    """Compile SOURCE into `directory` as the library `name`, and load it."""
    from torch.utils import cpp_extension

    compiler = os.environ.get("CXX", "c++")
    if shutil.which(compiler) is None:
        raise NativeUnavailable(f"no C++ compiler ({compiler!r}: install one, or set CXX)")
    if not cpp_extension.is_ninja_available():
        raise NativeUnavailable("torch.utils.cpp_extension needs ninja: pip install ninja")
    log.info("fused C++ GRU: building %s once (about a minute)", directory)
    directory.mkdir(parents=True, exist_ok=True)
    try:
        return cpp_extension.load(
            name,
            [str(SOURCE)],
            extra_cflags=flags(),
            build_directory=str(directory),
            with_cuda=False,
            verbose=verbose,
        )
    except Exception as error:  # the compiler's, ninja's or the loader's: all mean "off"
        lines = str(error).strip().splitlines() or [repr(error)]
        said = next((line for line in lines if "error:" in line), lines[0])
        raise NativeUnavailable(f"the build failed: {said.strip()}") from None


@functools.cache
def kernels() -> ModuleType | None:
    """The compiled kernels (built at the first call where need be), or None where they are
    switched off or cannot be had; logs which, once per process."""
    if os.environ.get(SWITCH, "1") == "0":
        log.info("fused C++ GRU: off: %s=0", SWITCH)
        return None
    try:
        module = load()
    except (NativeUnavailable, OSError) as why:
        log.info("fused C++ GRU: off: %s", why)
        return None
    log.info("fused C++ GRU: on")
    return module


def main(argv: list[str]) -> int:
    """`python -m attnmt.model.native build`: build the library now (make install runs it)."""
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if argv != ["build"]:
        log.error("usage: python -m attnmt.model.native build")
        return 2
    try:
        module = load(verbose=True)
    except (NativeUnavailable, OSError) as why:
        log.warning("fused C++ GRU: off: %s", why)
        return 1
    log.info("fused C++ GRU: on (%s)", module.__file__)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
