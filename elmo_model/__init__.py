"""The biLM and its public API; the rest of the package by concern.

- ``bilm/``      the network: config, character ids, modules, weight files, devices, precision, identity
- ``models/``    which models there are: names to folders (``load_bilm``), the published ELMo, model cards
- ``training/``  the trainer and ``python -m elmo_model.training.train``, LM data, vocabulary, Kneser-Ney
- ``corpus/``    embedding a corpus to files: ``python -m elmo_model.corpus.embedder`` and its Ray workers
- ``text/``      the tokenizer and the strict UTF-8 line reader
- ``plumbing/``  safe output files, progress, extras, shipped data
- ``elmo.py``, ``embedding.py``: AllenNLP's ``Elmo``/``batch_to_ids`` and ``ElmoEmbedder``
- ``hub.py``: TF Hub's ELMo module (``from elmo_model import hub``; ``hub.Module``, ``hub.load``)

Imports nothing from ``probing`` or ``app_pages``. Typical use::

    from elmo_model import load_bilm, ElmoEmbedder
    from elmo_model import Elmo, batch_to_ids          # as allennlp.modules.elmo
"""

import importlib

#: Where each public name lives. The package imports them on first use, so a light submodule
#: (``elmo_model.plumbing.progress``, ``elmo_model.plumbing.io_safety``) can be imported without torch.
_PUBLIC = {
    "CharCnnConfig": ".bilm.config", "ElmoConfig": ".bilm.config",
    "LstmConfig": ".bilm.config",
    "Elmo": ".elmo", "batch_to_ids": ".elmo",
    "BiLM": ".bilm.modules", "BiLMOutput": ".bilm.modules", "ScalarMix": ".bilm.modules",
    "DEFAULT_MODEL": ".models.registry", "load_bilm": ".models.registry",
    "load_bilm_from_files": ".models.registry",
    "ElmoEmbedder": ".embedding",
}


def __getattr__(name: str):
    if name not in _PUBLIC:
        raise AttributeError(f"module 'elmo_model' has no attribute {name!r}")
    value = getattr(importlib.import_module(_PUBLIC[name], __name__), name)
    globals()[name] = value
    return value


__all__ = ["BiLM", "BiLMOutput", "CharCnnConfig", "DEFAULT_MODEL", "Elmo", "ElmoConfig", "ElmoEmbedder",
           "LstmConfig", "ScalarMix", "batch_to_ids", "load_bilm", "load_bilm_from_files"]
