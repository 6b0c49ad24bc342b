"""Embedding a corpus to files: the ``elmo-embed`` command (AllenNLP's ``allennlp elmo``) and its Ray workers."""
