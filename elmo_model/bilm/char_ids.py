"""Character ids exactly as AllenNLP's ``ELMoCharacterMapper`` (and bilm-tf's ``Batcher``) make them.

A token becomes ``max_characters_per_token`` (50) ids: begin-of-word, its UTF-8 bytes, end-of-word,
then padding; every id is shifted by +1 so that 0 can mean "no token here" (batch padding). Tokens
longer than 48 bytes are truncated so that the end-of-word marker always survives. The sentence
boundary "words" ``<S>`` / ``</S>`` are begin-of-word, a special character, end-of-word.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

MAX_CHARACTERS_PER_TOKEN = 50
BEGINNING_OF_SENTENCE_CHARACTER = 256
END_OF_SENTENCE_CHARACTER = 257
BEGINNING_OF_WORD_CHARACTER = 258
END_OF_WORD_CHARACTER = 259
PADDING_CHARACTER = 260
BOS_TOKEN = "<S>"
EOS_TOKEN = "</S>"


def _boundary_ids(character: int, length: int) -> np.ndarray:
    ids = np.full(length, PADDING_CHARACTER, dtype=np.int64)
    ids[:3] = (BEGINNING_OF_WORD_CHARACTER, character, END_OF_WORD_CHARACTER)
    return ids + 1


def bos_char_ids(length: int = MAX_CHARACTERS_PER_TOKEN) -> np.ndarray:
    """Ids of the ``<S>`` boundary word, shape (length,)."""
    return _boundary_ids(BEGINNING_OF_SENTENCE_CHARACTER, length)


def eos_char_ids(length: int = MAX_CHARACTERS_PER_TOKEN) -> np.ndarray:
    """Ids of the ``</S>`` boundary word, shape (length,)."""
    return _boundary_ids(END_OF_SENTENCE_CHARACTER, length)


def word_to_char_ids(word: str, length: int = MAX_CHARACTERS_PER_TOKEN) -> np.ndarray:
    """One token -> its character ids, shape (length,), values in 1..261.

    The literal strings ``<S>`` and ``</S>`` map to the sentence boundary words, as in AllenNLP.
    Bytes that are not valid UTF-8 cannot occur (``str`` is always encodable); lone surrogates
    are dropped, as AllenNLP's ``encode("utf-8", "ignore")`` does.
    """
    if word == BOS_TOKEN:
        return bos_char_ids(length)
    if word == EOS_TOKEN:
        return eos_char_ids(length)
    encoded = word.encode("utf-8", "ignore")[: length - 2]
    ids = np.full(length, PADDING_CHARACTER, dtype=np.int64)
    ids[0] = BEGINNING_OF_WORD_CHARACTER
    ids[1 : len(encoded) + 1] = np.frombuffer(encoded, dtype=np.uint8)
    ids[len(encoded) + 1] = END_OF_WORD_CHARACTER
    return ids + 1


def batch_to_char_ids(sentences: Sequence[Sequence[str]], length: int = MAX_CHARACTERS_PER_TOKEN) -> torch.Tensor:
    """Sentences of tokens -> LongTensor (batch, max_tokens, length); padded tokens are all 0.

    Boundary words are *not* added here: the biLM adds them itself from the mask.
    An empty batch gives shape (0, 0, length); a batch of empty sentences (n, 0, length).
    """
    if (sentences is None or isinstance(sentences, (str, bytes)) or not hasattr(sentences, "__len__")
            or any(isinstance(s, (str, bytes)) for s in sentences)):
        raise TypeError("batch_to_char_ids takes sentences as lists of tokens (str), e.g. [['The', 'bank']], "
                        f"not {'strings' if sentences is not None else 'None'}")
    for i, sentence in enumerate(sentences):
        if sentence is None or not hasattr(sentence, "__len__") or not hasattr(sentence, "__iter__"):
            raise TypeError(f"sentence {i} is a {type(sentence).__name__}, not a list of tokens (str)")
    max_tokens = max((len(s) for s in sentences), default=0)
    out = np.zeros((len(sentences), max_tokens, length), dtype=np.int64)
    cache: dict[str, np.ndarray] = {}
    for i, sentence in enumerate(sentences):
        for j, token in enumerate(sentence):
            if not isinstance(token, str):  # before the lookup: a list as a token is unhashable
                raise TypeError(f"sentence {i}, token {j}: {token!r} is a {type(token).__name__}, not a str; "
                                "tokens are strings")
            ids = cache.get(token)
            if ids is None:
                ids = cache[token] = word_to_char_ids(token, length)
            out[i, j] = ids
    return torch.from_numpy(out)


def model_token_ids(model: object, sentences: Sequence[Sequence[str]]) -> torch.Tensor:
    """The ids ``model`` takes for ``sentences`` (B, T, ...), on the CPU: the model's own
    ``token_ids`` where it has one (a biLM of another vocabulary, such as an ELMoForManyLangs
    model), else ``batch_to_char_ids`` (bilm-tf's byte ids, which every AllenNLP-layout biLM reads)."""
    own = getattr(model, "token_ids", None)
    return own(sentences) if callable(own) else batch_to_char_ids(sentences)
