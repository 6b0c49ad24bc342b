"""Context: the playground, contextuality measures, attribution of a vector to its context words, static baselines."""
