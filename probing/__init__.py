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

Import submodules directly (``from probing.senses import wsd``); this file imports nothing, so that
``import probing`` costs nothing.
"""
