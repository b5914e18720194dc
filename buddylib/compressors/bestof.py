"""Per entry, the shorter code of several compressors, plus a selector (beyond the paper).

BPC gains little on activations whose ReLU zeros are scattered word by word, where ZVC's
word mask does well, while ZVC cannot exploit smooth nonzero data, where BPC does. Hardware
could run both and keep the shorter code per entry, at the cost of a selector telling the
decoder which one it is. That selector is counted in the code (``ceil(log2(k))`` bits for
``k`` compressors), not as extra metadata, so the layout keeps its 4-bit metadata and the
result is a slight upper bound on the cost; it shows how much of BPC's gap to the paper is
scattered zeros (issue 13).

>>> import numpy as np
>>> best = BestOf(("bpc32", "zvc"))
>>> relu = np.maximum(np.random.default_rng(0).standard_normal(64).astype(np.float32), 0)
>>> best.bits(relu).tolist()  # scattered zeros: ZVC's codes (480, 640 bits; BPC 943, 881), plus the selector
[481, 641]
>>> best.bits(np.arange(64, dtype=np.uint32)).tolist()  # smooth: BPC's codes (15, 23 bits), plus the selector
[16, 24]
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from buddylib.compressors.abc import Compressor


class BestOf(Compressor):
    """The shortest code among ``parts`` (registered compressor names) per entry, plus a selector."""

    def __init__(self, parts: Sequence[str] = ("bpc32", "zvc"), label: str = "bpc32zvc"):
        from buddylib.compressors import registry

        if len(parts) < 2:
            raise ValueError(f"BestOf needs at least two compressors, got {list(parts)}")
        self.parts = [registry.get(p) for p in parts]
        self.name = label  # type: ignore[misc]  (its registry name)
        self.selector_bits = math.ceil(math.log2(len(self.parts)))
        self.max_bits = max(p.max_bits for p in self.parts) + self.selector_bits  # type: ignore[misc]

    def _bits(self, entries: np.ndarray) -> np.ndarray:
        best = np.minimum.reduce([p._bits(entries).astype(np.int32) for p in self.parts])
        return (best + self.selector_bits).astype(np.uint16)

    def __repr__(self) -> str:
        return f"BestOf({[p.name for p in self.parts]})"
