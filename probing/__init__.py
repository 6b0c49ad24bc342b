"""The science of the ELMo Workbench, by concern. Nothing here imports streamlit.

- ``engine/``   what every science uses: activations and their cache, metrics, result envelopes
- ``data/``     the data root, the dataset registry, downloads (``python -m probing.data``)
- ``tagging/``  POS and chunk tasks, linear probes, baselines, control tasks, the suite, scalar mix
- ``senses/``   WSD corpora, the SemCor index, 1-NN WSD, lexical sample, retrieval, projections
- ``syntax/``   trees, the structural probe, edge probes, the report's syntax sections
- ``context/``  the playground, contextuality, attribution, static baselines
- ``information/``  beyond accuracy: MDL, conditional and amnesic probing (``python -m probing.information``)
- ``figures/``  the plotly figures of every science, in one style
- ``report/``   the probe report (``python -m probing.report``)

Import submodules directly (``from probing.senses import wsd``); this file only keeps the modules'
earlier names working, so that ``import probing`` costs nothing.
"""

from elmo_model.plumbing import moved

#: Modules that moved into the rooms above, by their earlier names: those names (and their
#: ``python -m`` commands: ``probing.tagging.suite``, ``probing.senses.wsd``, ``probing.context.static``) keep working.
MOVED = {
    "attribution": "context.attribution", "contextuality": "context.contextuality",
    "playground": "context.playground", "static": "context.static", "downloads": "data.downloads",
    "activations": "engine.activations", "commands": "engine.commands", "envelope": "engine.envelope",
    "metrics": "engine.metrics", "renamed_keywords": "engine.renamed_keywords", "app_figures": "figures.app",
    "wsd_corpora": "senses.corpora", "lexical_sample": "senses.lexical_sample",
    "projections": "senses.projections", "retrieval": "senses.retrieval",
    "semcor_index": "senses.semcor_index", "word_senses": "senses.word_senses", "wsd": "senses.wsd",
    "edges": "syntax.edges", "syntax_report": "syntax.sections",
    "trees": "syntax.trees", "baselines": "tagging.baselines", "probes": "tagging.probes",
    "suite_results": "tagging.results", "mix_explorer": "tagging.scalar_mix", "suite": "tagging.suite",
    "tagging_tasks": "tagging.tasks",
}
moved.install(__name__, MOVED)
