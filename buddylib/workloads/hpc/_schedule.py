"""How far a proxy runs: its upstream input's end (a simulated end time, a cycle or iteration count, or
whichever comes first), and the share of it a run at one size goes to. Codes with a fixed iteration count
(NPB's classes, SPEC's ref steps) use it too, with no end time, so that their snapshots fall on the same
fractions of their end as every other proxy's.

A code with an adaptive time step (LULESH, CloverLeaf) takes more cycles to the same simulated time on a
finer grid, so a fixed cycle count stops a big grid earlier in the physics than a small one. Here one
``step`` of the workload is one interval of 1/:data:`INTERVALS` of the upstream end: it runs whole cycles
until the run's progress (simulated time over the end time, or cycles over the end cycle count, whichever
is further) reaches the interval's mark. A run to ``reach`` < 1 (where the whole run would not fit the
time we give one size) has ``reach`` x :data:`INTERVALS` steps, so every snapshot of every size falls on
the same grid of fractions of the end, and sizes compare at equal simulated time; the workload's docstring
states the reach at each size and :meth:`Scheduled.schedule` records it in every summary.
"""

from __future__ import annotations

import math
from typing import Any

#: Intervals of a whole run: snapshots (8 by default) at every fourth one; a run to 1/7, 1/4 or 1/2 of the
#: end shares the mark at 1/7 with all the others
INTERVALS = 28
#: The reaches a size may run to: a whole number of intervals, each sharing the 1/7 mark
REACHES = (1 / 7, 1 / 4, 1 / 2, 1.0)


def reach(table: tuple[tuple[float, float], ...], footprint: int) -> float:
    """The share of its upstream end a run of ``footprint`` bytes goes to: that of the first ``(limit, reach)`` of
    a workload's ``REACH`` table whose limit the footprint does not pass."""
    return next(r for limit, r in table if footprint <= limit)


class Scheduled:
    """Mixin for a workload advanced one cycle by ``advance()``, counting ``cycles`` and simulated ``time``:
    ``begin`` in set-up, then the base class's loop calls ``step`` once per interval."""

    end_time: float = math.inf  # upstream's simulated end time
    end_cycles: float = math.inf  # upstream's cycle count (end_step)
    reach: float = 1.0
    interval: int = 0
    n_steps: int

    def begin(self, end_time: float, end_cycles: float, reach: float) -> None:
        if not any(math.isclose(reach, r) for r in REACHES):
            raise ValueError(f"reach {reach}: one of {', '.join(f'{r:.3g}' for r in REACHES)}")
        self.end_time, self.end_cycles, self.reach = end_time, end_cycles, reach
        self.n_steps = round(reach * INTERVALS)
        self.interval = 0

    def progress(self) -> float:
        """Share of the upstream run done: simulated time or cycles, whichever is further."""
        return max(self.time / self.end_time, self.cycles / self.end_cycles)  # type: ignore[attr-defined]

    def step(self) -> None:
        """Whole cycles up to the next mark (the first cycle at or past it: the time step is not cut)."""
        self.interval += 1
        mark = self.interval / INTERVALS
        while self.progress() < mark * (1 - 1e-12):
            self.advance()  # type: ignore[attr-defined]

    def schedule(self) -> dict[str, Any]:
        """What this run did against its upstream end: recorded in every summary."""
        return {"cycles": int(self.cycles), "simulated_time": float(self.time),  # type: ignore[attr-defined]
                "end_time": None if math.isinf(self.end_time) else self.end_time,
                "end_cycles": None if math.isinf(self.end_cycles) else int(self.end_cycles),
                "reach": self.reach, "progress": self.progress()}
