"""The biLM: config, character ids, modules, weight I/O, embedder, tokenizer, trainer, registry.

Imports nothing from ``probing`` or ``app_pages``. Typical use::

    from elmo_model import load_bilm, ElmoEmbedder
    from elmo_model import Elmo, batch_to_ids          # as allennlp.modules.elmo
"""

from .config import CharCnnConfig, ElmoConfig, LstmConfig
from .elmo import Elmo, batch_to_ids
from .modules import BiLM, BiLMOutput, ScalarMix
from .registry import DEFAULT_MODEL, load_bilm, load_bilm_from_files


def __getattr__(name: str):  # the embedder pulls in h5py/tqdm: import it lazily
    if name == "ElmoEmbedder":
        from .embedder import ElmoEmbedder

        return ElmoEmbedder
    raise AttributeError(name)


__all__ = ["BiLM", "BiLMOutput", "CharCnnConfig", "DEFAULT_MODEL", "Elmo", "ElmoConfig", "ElmoEmbedder",
           "LstmConfig", "ScalarMix", "batch_to_ids", "load_bilm", "load_bilm_from_files"]
