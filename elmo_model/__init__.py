"""The biLM: config, character ids, modules, weight I/O, embedder, tokenizer, trainer, registry.

Imports nothing from ``probing`` or ``app_pages``. Typical use::

    from elmo_model import load_bilm, ElmoEmbedder
    from elmo_model import Elmo, batch_to_ids          # as allennlp.modules.elmo
"""

import importlib

#: Where each public name lives. The package imports them on first use, so a light submodule
#: (``elmo_model.progress``, ``elmo_model.io_safety``) can be imported without torch.
_PUBLIC = {
    "CharCnnConfig": ".config", "ElmoConfig": ".config", "LstmConfig": ".config",
    "Elmo": ".elmo", "batch_to_ids": ".elmo",
    "BiLM": ".modules", "BiLMOutput": ".modules", "ScalarMix": ".modules",
    "DEFAULT_MODEL": ".registry", "load_bilm": ".registry", "load_bilm_from_files": ".registry",
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
