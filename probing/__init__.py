"""The science of the ELMo Workbench: data readers, activation cache, probes, baselines,
control tasks, scalar mix, WSD, retrieval, projections, contextuality and reports.

Nothing here imports streamlit. Import submodules directly (``from probing import data``);
this package file stays empty so that ``import probing`` costs nothing.
"""
