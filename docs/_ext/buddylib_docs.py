"""What the site computes while it builds: the headline from the committed summaries (``{buddy-headline}``).

No number on a page is typed in: the landing page's table is :func:`buddylib.studies.fidelity.scale_headline` of
the summaries committed in ``data/summaries`` (their histograms and accesses), as the report index computes it.
"""

from __future__ import annotations

import types

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective


def headline_rows() -> list[str]:
    """The headline at each committed summary's scale, as the report index tables it."""
    import pandas as pd

    from buddylib.report import index_page
    from buddylib.studies import fidelity, granularity_measure

    rows = [r for suite, scales in granularity_measure.SUMMARY_SCALES.items()
            for r in (fidelity.scale_headline(suite, s) for s in scales) if r]
    return index_page.scale_table(pd.DataFrame(rows))


class Headline(SphinxDirective):
    """``{buddy-headline}``: the headline table, computed from the committed summaries while the site builds."""

    def run(self) -> list[nodes.Node]:
        container = nodes.container()
        text = StringList(headline_rows(), source="buddy-headline")
        self.state.nested_parse(text, self.content_offset, container)
        return container.children


def _skip_aliases(app, what, name, obj, skip, options):
    """A type alias (``Item = tuple[str, str, str]``) is told by its comment where it is used, not documented as a
    class: autodoc cannot format its signature."""
    return True if isinstance(obj, types.GenericAlias) else None


def setup(app):
    app.add_directive("buddy-headline", Headline)
    app.connect("autodoc-skip-member", _skip_aliases)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
