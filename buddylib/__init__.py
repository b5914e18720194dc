"""buddylib: a reproduction and extension of Buddy Compression (Choukse et al., ISCA 2020).

Data flows bytes → entries → sizes (compressors) → placement (layout/policy) → traffic →
time (timing) → datasets (analysis) → figures (notebooks), one module per arrow.
"""

from buddylib import compressors
from buddylib.entries import ENTRY_BYTES, SECTOR_BYTES, as_entries

__version__ = "0.1.0"
__all__ = ["ENTRY_BYTES", "SECTOR_BYTES", "as_entries", "capture", "compressors"]


def __getattr__(name: str) -> object:
    """``buddylib.capture``, the recorder of your own PyTorch model (:mod:`buddylib.userdata.capture`), imported on
    first use: it needs torch, which ``import buddylib`` does not."""
    if name == "capture":
        from buddylib.userdata import capture

        return capture
    raise AttributeError(f"module 'buddylib' has no attribute {name!r}")
