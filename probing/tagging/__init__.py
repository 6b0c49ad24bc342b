"""Sequence labelling: the tasks (POS, chunks), linear probes, baselines and control tasks, the probing suite and its results, the scalar mix explorer."""
