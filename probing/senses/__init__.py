"""Word senses: the WSD corpora and WordNet, the SemCor sense index, 1-NN WSD, the lexical sample, sense retrieval, per-layer projections, word-sense mixes."""
