"""The biLM and its public API; the rest of the package by concern.

- ``bilm/``      the network: config, character ids, modules, weight files, devices, precision, identity
- ``models/``    which models there are: names to folders (``load_bilm``), the published ELMo, model cards
- ``training/``  the trainer and ``python -m elmo_model.training.train``, LM data, vocabulary, Kneser-Ney
- ``corpus/``    embedding a corpus to files: ``python -m elmo_model.corpus.embedder`` and its Ray workers
- ``text/``      the tokenizer and the strict UTF-8 line reader
- ``plumbing/``  safe output files, progress, extras, shipped data, moved module names
- ``elmo.py``, ``embedding.py``: AllenNLP's ``Elmo``/``batch_to_ids`` and ``ElmoEmbedder``
- ``hub.py``: TF Hub's ELMo module (``from elmo_model import hub``; ``hub.Module``, ``hub.load``)

Imports nothing from ``probing`` or ``app_pages``. Typical use::

    from elmo_model import load_bilm, ElmoEmbedder
    from elmo_model import Elmo, batch_to_ids          # as allennlp.modules.elmo
"""

import importlib

from .plumbing import moved

#: Modules that moved into the rooms above, by their earlier names: those names (and their
#: ``python -m`` commands) keep working.
MOVED = {
    "char_ids": "bilm.char_ids", "config": "bilm.config", "devices": "bilm.devices",
    "identity": "bilm.identity", "modules": "bilm.modules", "precision": "bilm.precision",
    "weights": "bilm.weights", "embedder": "corpus.embedder", "ray_embed": "corpus.ray_embed",
    "model_card": "models.model_card", "published": "models.published", "registry": "models.registry",
    "extras": "plumbing.extras", "io_safety": "plumbing.io_safety", "progress": "plumbing.progress",
    "resources": "plumbing.resources", "build_punkt": "text.build_punkt", "text_input": "text.reader",
    "tokenizer": "text.tokenizer", "distributed": "training.distributed", "kneser_ney": "training.kneser_ney",
    "lm_data": "training.lm_data", "train": "training.train", "trainer": "training.trainer",
    "vocab": "training.vocab",
}
moved.install(__name__, MOVED)

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
