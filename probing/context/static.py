"""Static (type-level) word embeddings: the baselines a contextual biLM is compared with.

Two kinds, one class (:class:`StaticEmbedding`: a word list and one vector per word):

- **The biLM's layer 0**: the character CNN's token vector, which sees no context, so it is a
  static embedding of any spelling (:func:`layer0_embedding`, over a word list such as the
  model's ``vocab.txt``).
- **word2vec** (Mikolov et al. 2013, gensim's implementation) trained on the biLM's own LM
  corpus (``<data root>/lm_corpus``, train shards, wiki and gutenberg interleaved), tokenised
  with the project tokenizer (:func:`train_word2vec`, or the command below). Lower-cased by
  default, so "Bank" and "bank" share a vector.

Both answer "which word types are nearest to this one" (:meth:`StaticEmbedding.nearest`, cosine)
and give features for probes (:meth:`StaticEmbedding.embed_tokens`).

The file format is :mod:`probing.context.static_embedding`'s.

Command line::

    python -m probing.context.static train-word2vec [--data-root DIR] [--out FILE] [--max-tokens N]
    python -m probing.context.static nearest WORD [--embedding FILE | --model NAME_OR_DIR] [-k 10]

Determinism: gensim is run with one worker thread and a fixed, process-independent hash for
its per-word initial vectors (its default uses Python's salted ``hash``), so the same config
and corpus give the same vectors.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import time
import zlib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np
import torch

from elmo_model import load_bilm
from elmo_model.bilm.char_ids import model_token_ids
from elmo_model.bilm.devices import check_device
from elmo_model.plumbing.flags import (
    EXIT_CODES,
    add_device_argument,
    add_models_dir_argument,
    add_precision_argument,
    add_quiet_argument,
)
from elmo_model.bilm.precision import precision_line
from elmo_model.plumbing.extras import missing_message
from elmo_model.plumbing.io_safety import data_root_argument, output_lock
from elmo_model.plumbing.progress import (
    ProgressCallback,
    TerminalProgress,
    log_through_bars,
)
from elmo_model.plumbing.resources import shipped_data
from elmo_model.text.tokenizer import tokenize
from elmo_model.training.lm_data import interleaved_lines
from probing.context.static_embedding import TRAIN_COMMAND, StaticEmbedding
from probing.data import find_file, require
from probing.engine.renamed_keywords import renamed_keywords

log = logging.getLogger(__name__)

STATIC_DIR = shipped_data("static")
"""Where a shipped static embedding lives (``data/static/`` at the repository root)."""

DEFAULT_WORD2VEC = STATIC_DIR / "word2vec-lm-corpus.npz"
"""The word2vec file ``train-word2vec`` writes by default and :func:`load_word2vec` reads."""

LM_TRAIN_FILES = tuple(
    [f"lm_corpus/wiki-train-{k:02d}.txt.gz" for k in range(5)]
    + [f"lm_corpus/gutenberg-train-{k:02d}.txt.gz" for k in range(3)])


# --------------------------------------------------------------------------------------------
# The biLM's layer 0
# --------------------------------------------------------------------------------------------


def model_vocabulary(model, max_words: int | None = None) -> list[str]:
    """The words of the model's ``vocab.txt`` (or bilm-tf's ``vocab_test.txt``) beside its
    weight file, specials (``<S>``, ``</S>``, ``<UNK>``) left out, in file order (most
    frequent first for the workbench's trainer). ValueError if the model has none."""
    source = getattr(model, "source", None)
    folder = Path(source).parent if source else None
    for name in ("vocab.txt", "vocab_test.txt"):
        if folder is not None and (folder / name).is_file():
            words = [w for w in (folder / name).read_text(encoding="utf-8").split("\n")
                     if w and w not in ("<S>", "</S>", "<UNK>")]
            return words[:max_words] if max_words else words
    raise ValueError(f"the model ({source or 'built in memory'}) has no vocab.txt beside its "
                     "weights: pass the words to embed explicitly")


def layer0_embedding(model, words: Sequence[str] | None = None, *, max_words: int | None = 50_000,
                     batch_size: int = 1024, progress: ProgressCallback | None = None) -> StaticEmbedding:
    """The biLM's layer 0 as a static embedding: the character CNN's vector (P dims; the
    layer's [x; x] halves are equal, so cosines are the same) of each of ``words`` (default:
    :func:`model_vocabulary`, at most ``max_words``). Case-sensitive, like the biLM.

    Cost: the char CNN only (no LSTM); 50,000 words take a few seconds.
    """
    if words is None:
        words = model_vocabulary(model, max_words)
    words = list(dict.fromkeys(str(w) for w in words if str(w)))
    if not words:
        raise ValueError("no words to embed")
    chunks = []
    with torch.inference_mode():
        for start in range(0, len(words), batch_size):
            batch = words[start:start + batch_size]
            ids = model_token_ids(model, [[w] for w in batch]).to(model.device)  # (B, 1, C), where the model is
            chunks.append(model.token_embedder(ids)[:, 0].float().cpu().numpy())
            if progress is not None:
                progress("layer-0 type vectors", min(start + batch_size, len(words)), len(words), "words")
    name = f"{getattr(model, 'name', None) or 'biLM'} layer 0"
    return StaticEmbedding(words, np.concatenate(chunks), name=name, lowercase=False,
                           meta={"kind": "bilm_layer0", "n_words": len(words)})


# --------------------------------------------------------------------------------------------
# word2vec on the LM corpus
# --------------------------------------------------------------------------------------------


@dataclass
class Word2VecConfig:
    """gensim ``Word2Vec`` hyperparameters and how much of the LM corpus to read.

    ``max_tokens``: stop reading after this many tokens (None: the whole train split, ~32M);
    ``max_vocab``: keep the most frequent words only (gensim's ``max_final_vocab``).
    """

    vector_size: int = 100
    window: int = 5
    min_count: int = 5
    max_vocab: int | None = 40_000
    sg: int = 1
    negative: int = 5
    sample: float = 1e-3
    epochs: int = 5
    max_tokens: int | None = 8_000_000
    lowercase: bool = True
    seed: int = 0
    workers: int = 1

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> "Word2VecConfig":
        return cls(**json.loads(text))


def _stable_hash(text: str) -> int:
    """A process-independent string hash for gensim's per-word initial vectors."""
    return zlib.crc32(text.encode("utf-8"))


@renamed_keywords(root="data_root")
def lm_corpus_files(data_root: str | os.PathLike | None = None) -> list[Path]:
    """The LM corpus train shards in the data root (DatasetMissing naming them if absent)."""
    require("lm_corpus", data_root)
    files = [find_file(rel, data_root) for rel in LM_TRAIN_FILES]
    return [f for f in files if f is not None]


@renamed_keywords(root="data_root")
def tokenized_lm_corpus(data_root: str | os.PathLike | None = None, *, max_tokens: int | None = None,
                        lowercase: bool = True, progress: ProgressCallback | None = None) -> Iterator[list[str]]:
    """Sentences of the LM corpus train split (paragraphs round-robin across the shards,
    split and tokenised by ``elmo_model.text.tokenizer.tokenize``), up to ``max_tokens`` tokens."""
    seen = 0
    last = 0
    for line in interleaved_lines(lm_corpus_files(data_root)):
        for sentence in tokenize(line):
            if lowercase:
                sentence = [t.lower() for t in sentence]
            yield sentence
            seen += len(sentence)
            if max_tokens is not None and seen >= max_tokens:
                if progress is not None:
                    progress("tokenising the LM corpus", seen, max_tokens, "tokens")
                return
        if progress is not None and seen - last >= 100_000:
            last = seen
            progress("tokenising the LM corpus", seen, max_tokens, "tokens")


@renamed_keywords(root="data_root")
def train_word2vec(data_root: str | os.PathLike | None = None, config: Word2VecConfig | None = None, *,
                   out: str | os.PathLike | None = DEFAULT_WORD2VEC,
                   progress: ProgressCallback | None = None) -> StaticEmbedding:
    """Train word2vec on the LM corpus; write it to ``out`` (float16 ``.npz``; None: do not
    write) and return it.

    The tokenised corpus goes to a temporary file (one sentence a line) that gensim streams
    for its vocabulary pass and each epoch. ``out`` is checked before any work (not a
    directory) and held by one run at a time: a second run on the same ``out`` stops at once
    (``io_safety.OutputBusy``). See ``--help`` of the command for the defaults' cost.
    """
    config = config or Word2VecConfig()
    _check_config(config)
    if out is None:
        return _train_word2vec(data_root, config, progress)
    out = Path(out)
    if out.is_dir():
        raise ValueError(f"{out}: is a directory; give the path of the .npz file to write")
    out.parent.mkdir(parents=True, exist_ok=True)
    with output_lock(out, what="word2vec file"):
        embedding = _train_word2vec(data_root, config, progress)
        embedding.save(out)
    log.info("wrote %s (%d words x %d)", out, len(embedding), embedding.dim)
    return embedding


def _check_config(config: Word2VecConfig) -> None:
    """ValueError naming the first setting out of range (before any work)."""
    for name in ("vector_size", "window", "epochs", "workers", "negative"):
        if int(getattr(config, name)) < (0 if name == "negative" else 1):
            raise ValueError(f"word2vec {name} {getattr(config, name)}: expected a positive integer")
    if config.min_count < 1:
        raise ValueError(f"word2vec min_count {config.min_count}: expected a positive integer")
    for name in ("max_vocab", "max_tokens"):
        value = getattr(config, name)
        if value is not None and value < 1:
            raise ValueError(f"word2vec {name} {value}: expected a positive integer or None (no limit)")
    if config.sg not in (0, 1):
        raise ValueError(f"word2vec sg {config.sg}: expected 1 (skip-gram) or 0 (CBOW)")


def _train_word2vec(data_root, config: Word2VecConfig, progress: ProgressCallback | None) -> StaticEmbedding:
    # imported here: gensim takes seconds to import and only training needs it
    from gensim.models import Word2Vec
    from gensim.models.callbacks import CallbackAny2Vec

    files = lm_corpus_files(data_root)
    started = time.time()
    n_tokens = n_sentences = 0
    with tempfile.TemporaryDirectory(prefix="word2vec-") as tmp:
        corpus = Path(tmp) / "corpus.txt"
        with open(corpus, "w", encoding="utf-8") as f:
            for sentence in tokenized_lm_corpus(data_root, max_tokens=config.max_tokens,
                                                lowercase=config.lowercase, progress=progress):
                f.write(" ".join(sentence))
                f.write("\n")
                n_tokens += len(sentence)
                n_sentences += 1
        log.info("word2vec corpus: %d sentences, %d tokens (%.0f s)", n_sentences, n_tokens,
                    time.time() - started)

        class _Epochs(CallbackAny2Vec):
            def __init__(self) -> None:
                self.epoch = 0

            def on_epoch_end(self, model) -> None:
                self.epoch += 1
                if progress is not None:
                    progress("training word2vec", self.epoch, config.epochs, "epochs")

        model = Word2Vec(
            corpus_file=str(corpus), vector_size=config.vector_size, window=config.window,
            min_count=config.min_count, max_final_vocab=config.max_vocab, sg=config.sg,
            negative=config.negative, sample=config.sample, epochs=config.epochs,
            seed=config.seed, workers=config.workers, hashfxn=_stable_hash, callbacks=[_Epochs()])
    wv = model.wv
    meta = {"kind": "word2vec", "config": asdict(config), "n_sentences": n_sentences,
            "n_tokens": n_tokens, "gensim": _gensim_version(),
            "corpus": "lm_corpus train shards (wiki + gutenberg, round-robin), project tokenizer",
            "corpus_files": [{"file": f.name, "bytes": f.stat().st_size} for f in files],
            "seconds": round(time.time() - started, 1)}
    return StaticEmbedding(list(wv.index_to_key), wv.vectors, name="word2vec (LM corpus)",
                           lowercase=config.lowercase, meta=meta)


def _gensim_version() -> str:
    import gensim  # imported here: gensim takes seconds to import and only training needs it

    return gensim.__version__


def load_word2vec(path: str | os.PathLike | None = None) -> StaticEmbedding:
    """The word2vec embedding at ``path`` (default: the shipped ``data/static`` file).
    FileNotFoundError naming the command that trains one if it is not there."""
    path = Path(path) if path is not None else DEFAULT_WORD2VEC
    if not path.is_file():
        raise FileNotFoundError(f"no word2vec embedding at {path}: train one with `{TRAIN_COMMAND}` "
                                "(needs the lm_corpus in the data root)")
    return StaticEmbedding.load(path)


def static_baselines(model=None, word2vec: str | os.PathLike | None = None) -> list[StaticEmbedding]:
    """The static embeddings available offline, for retrieval's "nearest word types": the
    biLM's layer 0 over its vocabulary (when ``model`` is given and has a ``vocab.txt``) and
    the word2vec file (default: the shipped one). Missing ones are logged and left out."""
    out: list[StaticEmbedding] = []
    if model is not None:
        try:
            out.append(layer0_embedding(model))
        except ValueError as err:
            log.info("no layer-0 type embedding: %s", err)
    try:
        out.append(load_word2vec(word2vec))
    except FileNotFoundError as err:
        log.info("no word2vec embedding: %s", err)
    except ValueError as err:  # a damaged file: say so, louder than an absent one
        log.warning("no word2vec embedding: %s", err)
    return out


# --------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------


def _count(minimum: int):
    """An argparse type: an integer of at least ``minimum``."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {value}")
        return value
    return parse


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m probing.context.static",
        description="Static word embeddings for contrast with the biLM: word2vec trained on the "
                    "biLM's LM corpus, and the biLM's own context-free layer 0.", epilog=EXIT_CODES)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    defaults = Word2VecConfig()
    train = commands.add_parser(
        "train-word2vec", help="train word2vec on <data root>/lm_corpus",
        description="Train word2vec (gensim, skip-gram, one worker: deterministic) on the LM "
                    "corpus train shards, tokenised with the project tokenizer and lower-cased, "
                    f"and save it as a float16 .npz (default {DEFAULT_WORD2VEC}). With the "
                    "defaults (8M tokens, 5 epochs, 100 dims, 40k words) it takes a few minutes "
                    "on 2 cores and writes about 7 MB.")
    train.add_argument("--data-root", type=data_root_argument, default=None, help="the data root (default: $ELMO_WORKBENCH_DATA or the user cache)")
    train.add_argument("--out", type=Path, default=DEFAULT_WORD2VEC, help="output .npz (default: %(default)s)")
    train.add_argument("--max-tokens", type=_count(0), default=defaults.max_tokens,
                       help="tokens of the corpus to read; 0 for all (default: %(default)s)")
    train.add_argument("--epochs", type=_count(1), default=defaults.epochs, help="default: %(default)s")
    train.add_argument("--dim", type=_count(1), default=defaults.vector_size, help="vector size (default: %(default)s)")
    train.add_argument("--min-count", type=_count(1), default=defaults.min_count, help="default: %(default)s")
    train.add_argument("--max-vocab", type=_count(1), default=defaults.max_vocab, help="default: %(default)s")
    train.add_argument("--cbow", action="store_true", help="CBOW instead of skip-gram (faster)")
    train.add_argument("--cased", action="store_true", help="keep case (default: lower-case)")
    train.add_argument("--seed", type=int, default=0, help="default: %(default)s")
    train.add_argument("--workers", type=_count(1), default=1,
                       help="gensim worker threads; more than 1 is faster but not reproducible (default: 1)")
    add_quiet_argument(train)
    near = commands.add_parser("nearest", help="nearest word types to a word",
                               description="List the word types nearest to WORD (cosine) under a static embedding.")
    near.add_argument("word")
    near.add_argument("-k", type=_count(1), default=10, help="how many (default: %(default)s)")
    source = near.add_mutually_exclusive_group()
    source.add_argument("--embedding", type=Path, default=None, help=f"a .npz embedding (default: {DEFAULT_WORD2VEC})")
    source.add_argument("--model", default=None, help="use this biLM's layer 0 over its vocab.txt instead")
    add_models_dir_argument(near)
    add_precision_argument(near, note="with --model")
    add_device_argument(near, note="with --model")
    add_quiet_argument(near)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m probing.context.static``: train word2vec on the LM corpus, or list nearest words."""
    args = _parser().parse_args(argv)
    log_through_bars(args.quiet)

    if args.command == "train-word2vec":
        absent = missing_message("word2vec", "train-word2vec")  # gensim is optional: only training needs it
        if absent:
            print(f"error: {absent}", file=sys.stderr)
            return 2
        config = Word2VecConfig(
            vector_size=args.dim, min_count=args.min_count, max_vocab=args.max_vocab,
            sg=0 if args.cbow else 1, epochs=args.epochs,
            max_tokens=args.max_tokens or None, lowercase=not args.cased, seed=args.seed,
            workers=args.workers)
        try:
            embedding = train_word2vec(args.data_root, config, out=args.out,
                                       progress=None if args.quiet else TerminalProgress())
        except (FileNotFoundError, ValueError) as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        size = args.out.stat().st_size / 1e6
        print(f"\nwrote {args.out}: {len(embedding):,} words x {embedding.dim}, {size:.1f} MB, "
              f"{embedding.meta['n_tokens']:,} tokens, {embedding.meta['seconds']:.0f} s")
        for word in ("bank", "play", "river"):
            if word in embedding:
                print(f"  {word}: " + ", ".join(w for w, _ in embedding.nearest(word, 8)))
        return 0

    try:
        if args.model:
            model = load_bilm(args.model, args.precision, device=str(check_device(args.device, "--device")),
                              cache_dir=args.models_dir)
            print(precision_line(model, args.precision), flush=True)
            embedding = layer0_embedding(model)
            vector = None
            if args.word not in embedding:
                vector = layer0_embedding(model, [args.word]).vectors[0]
        else:
            embedding = load_word2vec(args.embedding)
            vector = None
    except (FileNotFoundError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    pairs = embedding.nearest(args.word, args.k, vector=vector)
    if not pairs:
        print(f"{args.word!r} is not in the {embedding.name} vocabulary")
        return 1
    print(f"nearest to {args.word!r} under {embedding.name}:")
    for word, sim in pairs:
        print(f"  {sim:6.3f}  {word}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
