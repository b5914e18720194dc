"""A time-stepping proxy's schedule: whole cycles up to marks on one grid of fractions of its upstream end."""

from __future__ import annotations

import math

import pytest

from buddylib.workloads.hpc._schedule import INTERVALS, Scheduled


class Toy(Scheduled):
    def __init__(self, dt: float) -> None:
        self.time, self.cycles, self.dt = 0.0, 0, dt

    def advance(self) -> None:
        self.time += self.dt
        self.cycles += 1


def test_steps_stop_at_the_first_cycle_past_each_mark() -> None:
    w = Toy(dt=0.013)
    w.begin(end_time=1.0, end_cycles=math.inf, reach=0.25)
    assert w.n_steps == INTERVALS // 4
    for k in range(1, w.n_steps + 1):
        w.step()
        assert k / INTERVALS <= w.progress() < k / INTERVALS + w.dt + 1e-12
    done = w.schedule()
    assert done["reach"] == 0.25 and done["end_time"] == 1.0 and done["end_cycles"] is None
    assert done["cycles"] == w.cycles and 0.25 <= done["progress"] < 0.25 + w.dt + 1e-12


def test_the_cycle_count_ends_a_run_where_it_comes_first() -> None:
    w = Toy(dt=1e-6)  # a fine grid: upstream's end_step comes long before its end time
    w.begin(end_time=15.5, end_cycles=2955, reach=1.0)
    for _ in range(w.n_steps):
        w.step()
    assert w.cycles == 2955 and w.schedule()["progress"] == 1.0


def test_a_reach_off_the_grid_is_refused() -> None:
    with pytest.raises(ValueError, match=r"reach 0\.3"):
        Toy(0.1).begin(1.0, math.inf, 0.3)
