"""Thread counts of numba and torch, changed for one block and always restored.

Both libraries keep a global (per calling thread) count, so a function that sets one and
returns, or raises, without restoring it changes every later caller's speed — and, for
torch's float reductions, its bytes. Every change of a count in buddylib goes through here.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numba


@contextlib.contextmanager
def numba_threads(n: int | None) -> Iterator[None]:
    """numba's thread count ``n`` inside the block, the previous count after it, even after an exception.

    ``None`` leaves the count as it is but still restores it: for a block that sets it itself.
    """
    before = numba.get_num_threads()
    if n is not None:
        numba.set_num_threads(n)
    try:
        yield
    finally:
        numba.set_num_threads(before)


@contextlib.contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """torch's intra-op thread count ``n`` inside the block, the previous count after it."""
    import torch  # only the DL workloads need torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)
