"""Training a biLM: the trainer and its command line, the LM corpus and vocabulary, multi-process training, the Kneser-Ney baseline."""
