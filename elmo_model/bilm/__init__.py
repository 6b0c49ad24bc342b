"""The biLM itself: its config, character ids, modules (character CNN, LSTMs, scalar mix), weight files, and where and how it computes (devices, precision, identity)."""
