"""Plotly figures of probe results: the report writer and the app draw exactly these.

Every builder takes typed result objects (``probing.tagging.results``, ``probing.senses.wsd``,
``probing.senses.projections``, ``probing.senses.word_senses``, ``probing.context.contextuality``,
``probing.information.results``) and returns a
``plotly.graph_objects.Figure`` with a title, axis titles with units, hover text and a legend.
Nothing here computes a number that is not already in the result.

Light and dark themes: the figures use :data:`TEMPLATE`: transparent backgrounds, grid lines
and baselines in a mid grey, trace colours of middle lightness (:data:`PALETTE`) that read on
white and on near-black, and no font colour, so the host decides it (Streamlit's theme in the
app; the report's page script in ``report.html``, which follows ``prefers-color-scheme``).
:func:`themed` gives a copy with explicit colours for a static export (PNG on white).

Scores are plotted in percent (results hold fractions in [0, 1]); cosine-based figures stay
unitless in -1..1; s_j are softmax weights summing to 1.

    >>> from probing.figures import task_layers_figure, themed
    >>> fig = task_layers_figure(suite.task("pos"))     # an interactive figure
    >>> themed(fig, "light").write_image("pos.png")     # on white, for a PNG (needs kaleido)
"""

# The builders live by science; every one is importable from here, as the report and the pages do.
from probing.figures.compare import *  # noqa: F401,F403
from probing.figures.context import *  # noqa: F401,F403
from probing.figures.information import *  # noqa: F401,F403
from probing.figures.senses import *  # noqa: F401,F403
from probing.figures.style import *  # noqa: F401,F403
from probing.figures.tasks import *  # noqa: F401,F403
