"""Explore one workload's (or one file's) Buddy layout and slowdown live (notebook 00): a model of the state and
its caches (:mod:`.model`), a view that draws it and drives it with widgets (:mod:`.view`, also ``buddy analyze
--plot``'s picture), and a screenshot of it in JupyterLab (:mod:`.lab`)."""

from buddylib.explore.lab import screenshot_lab
from buddylib.explore.model import (
    DEFAULTS,
    Model,
    Replay,
    SlowdownView,
    Source,
    View,
    builtin_names,
    layout_view,
    load_source,
    replay,
    slowdowns,
)
from buddylib.explore.view import ACCOUNTING, COLORS, TOP_ALLOCATIONS, Explorer, draw, png, svg, top_allocations

__all__ = ["ACCOUNTING", "COLORS", "DEFAULTS", "TOP_ALLOCATIONS", "Explorer", "Model", "Replay", "SlowdownView",
           "Source", "View", "builtin_names", "draw", "layout_view", "load_source", "png", "replay",
           "screenshot_lab", "slowdowns", "svg", "top_allocations"]
