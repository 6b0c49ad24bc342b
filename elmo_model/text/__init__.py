"""Raw text in: the tokenizer, its Punkt parameters' builder, the strict UTF-8 line reader."""
