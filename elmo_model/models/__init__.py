"""Which models there are: names to folders and loading (registry), the ELMo models AllenNLP published, model cards."""
