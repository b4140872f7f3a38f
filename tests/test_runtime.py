"""The process-level settings of attnmt.runtime."""

import resource
import sys

import pytest
import torch

from attnmt.runtime import keep_freed_memory

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
