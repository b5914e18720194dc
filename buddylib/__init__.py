"""buddylib: a reproduction and extension of Buddy Compression (Choukse et al., ISCA 2020).

Data flows bytes → entries → sizes (compressors) → placement (layout/policy) → traffic →
time (timing) → datasets (analysis) → figures (notebooks), one module per arrow.
"""

from buddylib import compressors
from buddylib.entries import ENTRY_BYTES, SECTOR_BYTES, as_entries

__version__ = "0.1.0"
__all__ = ["ENTRY_BYTES", "SECTOR_BYTES", "as_entries", "compressors"]
