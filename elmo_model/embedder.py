"""The embedding API AllenNLP users know (``ElmoEmbedder``) and the ``allennlp elmo`` command.

    >>> from elmo_model.embedder import ElmoEmbedder
    >>> embedder = ElmoEmbedder()                       # the shipped elmo-mini
    >>> vectors = embedder.embed_sentence(["The", "bank", "was", "closed", "."])
    >>> vectors.shape                                   # (L+1, T, 2P): layers, tokens, [fw; bw]
    (3, 5, 512)

CLI (one sentence per line, whitespace-tokenised unless ``--tokenize``)::

    python -m elmo_model.embedder sentences.txt out.hdf5 --all
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence

import h5py
import numpy as np
import torch

from .char_ids import batch_to_char_ids
from .modules import BiLM
from .precision import PRECISION_CHOICES, resolve_precision
from .registry import DEFAULT_MODEL, load_bilm

log = logging.getLogger(__name__)

OUTPUT_FORMATS = ("all", "top", "average")
ProgressCallback = Callable[[int, int], None]  # (done, total)


def read_sentence_file(input_file: str | Path, tokenize: Callable[[str], list[str]] | None = None
                       ) -> list[list[str]]:
    """One sentence per line -> token lists (whitespace-split unless ``tokenize``). Raises
    ``ValueError`` naming the file and line number of an empty line or of bytes that are not
    UTF-8, before any work starts."""
    input_file = Path(input_file)
    split = tokenize or str.split
    sentences: list[list[str]] = []
    try:
        with open(input_file, encoding="utf-8") as f:
            for number, line in enumerate(f, start=1):
                tokens = split(line.strip())
                if not tokens:
                    raise ValueError(f"{input_file}:{number}: empty line; every line must hold a sentence")
                sentences.append(tokens)
    except UnicodeDecodeError as err:
        # the text layer decodes in blocks, so find the line again from the raw bytes
        with open(input_file, "rb") as f:
            for number, raw in enumerate(f, start=1):
                try:
                    raw.decode("utf-8")
                except UnicodeDecodeError as line_err:
                    raise ValueError(f"{input_file}:{number}: not valid UTF-8 ({line_err.reason} at byte "
                                     f"{line_err.start} of the line); re-encode the file as UTF-8") from None
        raise ValueError(f"{input_file}: not valid UTF-8 ({err.reason})") from None
    return sentences


def reduce_layers(array: np.ndarray, output_format: str) -> np.ndarray:
    """(L+1, T, 2P) -> what ``output_format`` stores: all layers, the top one, or their mean (float32)."""
    if output_format == "top":
        array = array[-1]
    elif output_format == "average":
        array = array.mean(axis=0)
    return array.astype(np.float32)


def sentence_keys(sentences: Sequence[Sequence[str]], use_sentence_keys: bool) -> list[str]:
    """Dataset names: the line index ("0", "1", ...) or the sentence itself."""
    return [" ".join(s) if use_sentence_keys else str(i) for i, s in enumerate(sentences)]


class ElmoEmbedder:
    """Embeds tokenised sentences with a biLM; numpy in, numpy out.

    ``model``: a shipped name, a directory with options.json + weights.hdf5, or a ``BiLM``.
    AllenNLP's calls work too: ``ElmoEmbedder(options_file, weight_file, cuda_device=-1)``, by
    position or by keyword (``cuda_device`` >= 0 runs on that GPU).
    Stateless by default (every sentence from a zero state, so vectors do not depend on the
    batch); ``stateful=True`` carries the LSTM state across batches as AllenNLP does.
    ``precision``: "auto" (bf16 matrix products where this machine's bf16 units pay, else fp32),
    "fp32" or "bf16" (see ``elmo_model.precision``); None keeps a given ``BiLM``'s own
    precision and means "auto" for a name or directory.
    """

    def __init__(self, model: str | Path | BiLM = DEFAULT_MODEL, weight_file: str | Path | None = None,
                 cuda_device: int = -1, *, options_file: str | Path | None = None, batch_size: int = 64,
                 stateful: bool = False, device: str = "cpu", precision: str | None = None) -> None:
        from .elmo import embedder_bilm

        self.model = embedder_bilm(model, weight_file, options_file, precision)
        device = f"cuda:{cuda_device}" if cuda_device >= 0 else device
        self.model.to(device).eval()
        self.model.stateful = stateful
        self.device = device
        self.batch_size = batch_size
        self.n_layers = self.model.config.n_output_layers
        self.dim = self.model.config.output_dim

    def batch_to_embeddings(self, batch: Sequence[Sequence[str]]) -> tuple[torch.Tensor, torch.Tensor]:
        """Sentences -> (activations (B, L+1, T, 2P), mask (B, T))."""
        with torch.inference_mode():
            out = self.model(batch_to_char_ids(batch).to(self.device))
        return torch.stack(out.layers, dim=1), out.mask

    def embed_batch(self, batch: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """Sentences -> one array (L+1, T_i, 2P) per sentence, in order."""
        if len(batch) == 0:
            return []
        activations, _ = self.batch_to_embeddings(batch)
        return [activations[i, :, : len(s)].cpu().numpy() for i, s in enumerate(batch)]

    def embed_sentence(self, sentence: Sequence[str]) -> np.ndarray:
        """One tokenised sentence -> (L+1, T, 2P). An empty sentence gives (L+1, 0, 2P)."""
        if isinstance(sentence, str):
            raise TypeError("embed_sentence takes a list of tokens, not a string; use elmo_model.tokenizer.tokenize")
        return self.embed_batch([list(sentence)])[0]

    def embed_sentences(self, sentences: Iterable[Sequence[str]], batch_size: int | None = None
                        ) -> Iterator[np.ndarray]:
        """A generator of (L+1, T_i, 2P) arrays, one per sentence, in input order. Stateless mode
        sorts each chunk of sentences by length so batches carry little padding; stateful mode
        keeps the order (the state follows it)."""
        batch_size = batch_size or self.batch_size
        chunk_size = batch_size if self.model.stateful else batch_size * 32
        chunk: list[list[str]] = []
        for sentence in sentences:
            chunk.append(list(sentence))
            if len(chunk) == chunk_size:
                yield from self._embed_chunk(chunk, batch_size)
                chunk = []
        if chunk:
            yield from self._embed_chunk(chunk, batch_size)

    def _embed_chunk(self, chunk: list[list[str]], batch_size: int) -> Iterator[np.ndarray]:
        order = list(range(len(chunk))) if self.model.stateful else sorted(range(len(chunk)), key=lambda i: len(chunk[i]))
        results: list[np.ndarray | None] = [None] * len(chunk)
        for start in range(0, len(order), batch_size):
            index = order[start : start + batch_size]
            for i, array in zip(index, self.embed_batch([chunk[i] for i in index])):
                results[i] = array
        yield from results  # type: ignore[misc]

    def embed_file(self, input_file: str | Path, output_file_path: str | Path, output_format: str = "all",
                   batch_size: int | None = None, use_sentence_keys: bool = False,
                   tokenize: Callable[[str], list[str]] | None = None,
                   progress: ProgressCallback | None = None) -> Path:
        """Embed every line of ``input_file`` into an hdf5 file laid out like ``allennlp elmo``'s:
        one dataset per line index ("0", "1", ...; or the sentence itself with
        ``use_sentence_keys``) of shape (L+1, T, 2P) ("all") or (T, 2P) ("top", "average"), and a
        ``sentence_to_index`` dataset holding a JSON object. Written to ``<output>.partial`` and
        renamed at the end; an interrupted run resumes from the datasets already written."""
        if output_format not in OUTPUT_FORMATS:
            raise ValueError(f"output_format must be one of {OUTPUT_FORMATS}, got {output_format!r}")
        input_file, output = Path(input_file), Path(output_file_path)
        sentences = read_sentence_file(input_file, tokenize)
        keys = sentence_keys(sentences, use_sentence_keys)
        partial = output.with_name(output.name + ".partial")
        batch_size = batch_size or self.batch_size
        try:
            out = h5py.File(partial, "a")
        except OSError:  # a run killed mid-write can leave an unreadable file: start over
            log.warning("%s is damaged; starting over", partial)
            partial.unlink()
            out = h5py.File(partial, "a")
        with out:
            todo = [i for i, key in enumerate(keys) if key not in out]
            done = len(keys) - len(todo)
            if done:
                log.info("resuming %s: %d of %d sentences already embedded", output, done, len(keys))
            if progress:
                progress(done, len(keys))
            todo_sentences = (sentences[i] for i in todo)
            for i, array in zip(todo, self.embed_sentences(todo_sentences, batch_size)):
                if keys[i] in out:  # a repeated sentence with use_sentence_keys
                    continue
                out.create_dataset(keys[i], data=reduce_layers(array, output_format))
                done += 1
                if progress and (done % batch_size == 0 or done == len(keys)):
                    out.flush()
                    progress(done, len(keys))
            if "sentence_to_index" in out:
                del out["sentence_to_index"]
            index = {" ".join(s): keys[i] for i, s in enumerate(sentences)}
            out.create_dataset("sentence_to_index", data=json.dumps(index))
        os.replace(partial, output)
        return output


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m elmo_model.embedder",
        description="Embed a file of sentences (one per line) with a biLM into hdf5, in the layout "
                    "of AllenNLP's `allennlp elmo` command: one dataset per line index plus a "
                    "`sentence_to_index` JSON dataset. Interrupted runs resume.")
    parser.add_argument("input", type=Path, help="text file, one sentence per line (whitespace-tokenised unless --tokenize)")
    parser.add_argument("output", type=Path, help="hdf5 file to write")
    parser.add_argument("--model", default=DEFAULT_MODEL,
                        help="shipped model name or a directory with options.json + weights.hdf5 (default: %(default)s)")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--all", dest="output_format", action="store_const", const="all",
                       help="store every layer, shape (L+1, T, 2P) (default)")
    group.add_argument("--top", dest="output_format", action="store_const", const="top",
                       help="store the top layer only, shape (T, 2P)")
    group.add_argument("--average", dest="output_format", action="store_const", const="average",
                       help="store the average of the layers, shape (T, 2P)")
    parser.add_argument("--options-file", type=Path, help="AllenNLP-style pair of files instead of --model: options.json ...")
    parser.add_argument("--weight-file", type=Path, help="... and its hdf5 weight file")
    parser.add_argument("--cuda-device", type=int, default=-1, help="GPU to run on; -1: the CPU (default: %(default)s)")
    parser.add_argument("--batch-size", type=int, default=64, help="sentences per batch (default: %(default)s)")
    parser.add_argument("--use-sentence-keys", action="store_true", help="name datasets by sentence instead of line index")
    parser.add_argument("--tokenize", action="store_true", help="tokenise each line with the project's tokenizer")
    parser.add_argument("--stateful", action="store_true", help="carry the LSTM state across batches (AllenNLP's default)")
    parser.add_argument("--precision", choices=PRECISION_CHOICES, default="auto",
                        help="matrix products in fp32 or bf16; auto: bf16 where this CPU's bf16 units make it faster, "
                             "else fp32 (default: %(default)s; see docs/performance.md for what bf16 costs in fidelity)")
    cluster = parser.add_argument_group(
        "Ray (large inputs)", "Split the input into shards, each embedded by a Ray actor that loads the model once; "
        "shards are written to OUTPUT.shards/ and assembled into the same OUTPUT layout (identical vectors). "
        "A rerun skips finished shards. Needs `pip install -r requirements-cluster.txt`.")
    cluster.add_argument("--ray", nargs="?", const="local", metavar="ADDRESS",
                         help="run on Ray: alone, start Ray on this machine (or join $RAY_ADDRESS); with ADDRESS "
                              "('auto', 'ray://head:10001') join a cluster started with `ray start`")
    cluster.add_argument("--workers", type=int, help="Ray actors (default: every CPU Ray sees / --cpus-per-worker)")
    cluster.add_argument("--cpus-per-worker", type=int, default=1, help="CPUs (torch threads) per actor (default: %(default)s)")
    cluster.add_argument("--shard-size", type=int,
                         help="sentences per shard, rounded up to a multiple of 32 x --batch-size (default: 8 such windows)")
    cluster.add_argument("--link-shards", action="store_true",
                         help="OUTPUT holds hdf5 external links to the shards instead of copies (keep OUTPUT.shards/ beside it)")
    cluster.add_argument("--keep-shards", action="store_true", help="keep OUTPUT.shards/ after copying them into OUTPUT")
    args = parser.parse_args(argv)
    if args.ray is None and (args.workers or args.shard_size or args.link_shards or args.keep_shards):
        parser.error("--workers, --shard-size, --link-shards and --keep-shards need --ray")
    if (args.options_file is None) != (args.weight_file is None):
        parser.error("--options-file and --weight-file go together")
    if args.options_file is not None and (args.ray is not None or args.model != DEFAULT_MODEL):
        parser.error("--options-file/--weight-file replace --model and do not work with --ray; for --ray, put the "
                     "two files in a directory as options.json and weights.hdf5 and pass --model DIRECTORY")
    if args.ray is not None and args.stateful:
        parser.error("--stateful carries the LSTM state from batch to batch, so it cannot be split into shards; drop --ray")
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    from tqdm import tqdm

    tokenize = None
    if args.tokenize:
        from .tokenizer import tokenize_words as tokenize
    try:
        bar = tqdm(unit="sentence", desc="embedding")

        def progress(done: int, total: int) -> None:
            bar.total = total
            bar.n = done
            bar.refresh()

        if args.ray is not None:
            try:
                from .ray_embed import embed_file_with_ray
            except ImportError as err:
                raise ValueError(f"--ray needs Ray ({err}): pip install -r requirements-cluster.txt") from None
            embed_file_with_ray(args.input, args.output, load_bilm(args.model, args.precision),
                                args.output_format or "all", args.batch_size,
                                args.use_sentence_keys, tokenize, args.ray, args.workers, args.cpus_per_worker,
                                args.shard_size, args.link_shards, args.keep_shards, progress=progress)
        else:
            model = args.options_file if args.options_file is not None else args.model
            embedder = ElmoEmbedder(model, args.weight_file, args.cuda_device, batch_size=args.batch_size,
                                    stateful=args.stateful, precision=args.precision)
            embedder.embed_file(args.input, args.output, args.output_format or "all", args.batch_size,
                                args.use_sentence_keys, tokenize, progress)
        bar.close()
    except (ValueError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
