"""The embedding API AllenNLP users know: ``ElmoEmbedder``, and the hdf5 file it writes.

    >>> from elmo_model.corpus.embedder import ElmoEmbedder     # or elmo_model.embedding
    >>> embedder = ElmoEmbedder()                       # the shipped elmo-mini
    >>> vectors = embedder.embed_sentence(["The", "bank", "was", "closed", "."])
    >>> vectors.shape                                   # (L+1, T, 2P): layers, tokens, [fw; bw]
    (3, 5, 512)

``ElmoEmbedder.embed_file`` writes the layout of ``allennlp elmo`` (one dataset per line, plus
``sentence_to_index``); ``read_sentence_file``, ``sentence_keys`` and ``reduce_layers`` are the
pieces of that layout that the Ray path (``elmo_model.corpus.ray_embed``) shares. The command line is
``python -m elmo_model.corpus.embedder`` (``elmo_model/corpus/embedder.py``).
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import IO, Callable, Iterable, Iterator, Sequence

import h5py
import numpy as np
import torch

from .bilm.char_ids import model_token_ids
from .bilm.devices import check_device, cuda_device_to_device
from .bilm.identity import LEGACY_NOTE, model_identity
from .bilm.modules import BiLM
from .elmo import bilm_from_arguments
from .models.names import model_files
from .models.registry import DEFAULT_MODEL
from .plumbing.io_safety import (
    check_input_file,
    check_output_path,
    digest_tokens,
    ensure_room,
    flush_to_disk,
    manifest_differences,
    manifest_json,
    output_lock,
)
from .plumbing.progress import CountCallback
from .text.reader import read_text_lines

log = logging.getLogger(__name__)

OUTPUT_FORMATS = ("all", "top", "average")


def read_sentence_file(input_file: str | Path, tokenize: Callable[[str], list[str]] | None = None) -> list[list[str]]:
    """One sentence per line -> token lists (whitespace-split unless ``tokenize``). Raises
    ``ValueError`` naming the file and line number of an empty line or of bytes that are not
    UTF-8 (``elmo_model.text.reader``), before any work starts."""
    input_file = check_input_file(input_file, "input file (one sentence per line)")
    split = tokenize or str.split
    sentences: list[list[str]] = []
    for number, line in enumerate(read_text_lines(input_file), start=1):  # strict UTF-8 (.gz gunzipped)
        tokens = split(line.strip())
        if not tokens:
            raise ValueError(f"{input_file}:{number}: empty line; every line must hold a sentence")
        sentences.append(tokens)
    return sentences


def loaded_model_inputs(model: BiLM) -> list[Path]:
    """The files and folders a loaded model came from, which no output may replace: its weight
    file and options file (``.source``, ``.options_source``, set by the loader) and, by the one
    rule (``models.names.model_files``), each one's folder and everything in it. Empty for a
    model built in memory."""
    inputs: list[Path] = []
    for attribute in ("source", "options_source"):
        source = getattr(model, attribute, None)
        if source:
            inputs += [Path(source), *model_files(Path(source).resolve().parent)]
    return inputs


def reduce_layers(array: np.ndarray, output_format: str) -> np.ndarray:
    """(L+1, T, 2P) -> what ``output_format`` stores: all layers, the top one, or their mean (float32)."""
    if output_format == "top":
        array = array[-1]
    elif output_format == "average":
        array = array.mean(axis=0)
    return array.astype(np.float32)


def escape_key(sentence: str) -> str:
    """A sentence as an hdf5 dataset name that reads back as itself: ``%`` -> ``%25``, ``/`` ->
    ``%2F`` (hdf5 would make groups of it), and a key made only of dots (``.``, ``..``: hdf5's own
    names) has each dot written ``%2E``. ``urllib.parse.unquote`` turns a key back into the sentence."""
    key = sentence.replace("%", "%25").replace("/", "%2F")
    if key and set(key) == {"."}:
        key = "%2E" * len(key)
    elif key == "sentence_to_index":  # the index dataset's own name
        key = "sentence%5Fto%5Findex"
    return key


def sentence_keys(sentences: Sequence[Sequence[str]], use_sentence_keys: bool) -> list[str]:
    """Dataset names: the line index ("0", "1", ...) or the sentence itself, escaped by
    :func:`escape_key` so that every sentence is one dataset at the root of the file."""
    return [escape_key(" ".join(s)) if use_sentence_keys else str(i) for i, s in enumerate(sentences)]


def _sentence_index(sentences: Sequence[Sequence[str]], keys: Sequence[str]) -> str:
    """``sentence_to_index``: each sentence (its tokens joined by spaces) -> its dataset's name, as JSON."""
    return json.dumps({" ".join(s): keys[i] for i, s in enumerate(sentences)})


def _input_sentences(input_file: str | Path | IO, output: str | Path, tokenize: Callable[[str], list[str]] | None
                     ) -> tuple[list[list[str]], Path | None]:
    """``embed_file``'s input -> (token lists, the path read, for the output checks): a path, read
    by :func:`read_sentence_file` once the output is known not to replace it, or an open file."""
    if hasattr(input_file, "read"):  # AllenNLP's habit: an open file
        return _sentences_of_open_file(input_file, tokenize)
    path = check_input_file(input_file, "input file (one sentence per line)")
    check_output_path(output, [path])  # before reading: a bad output is refused at once
    return read_sentence_file(path, tokenize), path


def _sentences_of_open_file(handle: IO, tokenize: Callable[[str], list[str]] | None
                            ) -> tuple[list[list[str]], Path | None]:
    """An open file (text, or bytes read as strict UTF-8) -> (token lists, its path when it has
    one on disk, for the output checks). An empty line or bytes that are not UTF-8 raise one
    ``ValueError`` naming the line, as :func:`read_sentence_file` does for a path."""
    name = getattr(handle, "name", None)
    path = Path(name) if isinstance(name, (str, os.PathLike)) and Path(name).is_file() else None
    shown = str(path or name or "the input file")
    split = tokenize or str.split
    sentences = []
    for number, line in enumerate(handle, start=1):
        if isinstance(line, bytes):
            try:
                line = line.decode("utf-8")
            except UnicodeDecodeError as err:
                raise ValueError(f"{shown}:{number}: not UTF-8 ({err.reason} at byte {err.start})") from None
        tokens = split(line.strip())
        if not tokens:
            raise ValueError(f"{shown}:{number}: empty line; every line must hold a sentence")
        sentences.append(tokens)
    return sentences, path


_STRING_NOT_TOKENS = ("{what} takes {given} as lists of tokens, not strings; split them first "
                      "(elmo_model.text.tokenizer.tokenize, or str.split)")


class ElmoEmbedder:
    """Embeds tokenised sentences with a biLM; numpy in, numpy out.

    ``model``: a shipped name, a directory with options.json + weights.hdf5, or a ``BiLM``.
    AllenNLP's calls work too: ``ElmoEmbedder(options_file, weight_file, cuda_device=-1)``, by
    position or by keyword (``cuda_device`` >= 0 runs on that GPU; ``device="cuda:1"`` says the
    same in PyTorch's words, and ``cuda_device`` wins when both are given). Neither given: the
    CPU, or a given ``BiLM``'s own device. A GPU this machine does not have is a ``ValueError``
    before the model loads.
    Stateless by default (every sentence from a zero state, so vectors do not depend on the
    batch); ``stateful=True`` carries the LSTM state across batches as AllenNLP does.
    ``precision``: None (the default) keeps a given ``BiLM``'s own precision and means "fp32"
    for anything loaded, so the numbers are AllenNLP's (bilm-tf's stateful replay: 8.3e-7 in the
    top layer); "auto" (bf16 matrix products where the device's bf16 units pay, else fp32) is
    about 2.5-3x faster on the full-size model on such a CPU and differs by up to 7.5e-3 on the
    same replay; "bf16" asks for it outright (resolved for the device: ``elmo_model.bilm.precision``).
    ``data_root``, ``cache_dir``: where a model's name is looked up (``data_root``'s ``models/``
    first, then the models home: ``cache_dir``, else ``$ELMO_WORKBENCH_MODELS``, else the user
    cache). AllenNLP's URLs of a published model mean that model, by its name here.
    """

    def __init__(self, model: str | Path | BiLM = DEFAULT_MODEL, weight_file: str | Path | None = None,
                 cuda_device: int = -1, *, options_file: str | Path | None = None, batch_size: int = 64,
                 stateful: bool = False, device: str | None = None, precision: str | None = None,
                 data_root: str | Path | None = None, cache_dir: str | Path | None = None) -> None:
        if not isinstance(stateful, bool):
            raise TypeError(f"stateful must be True or False, got {stateful!r}")
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        if not (cuda_device is None or (isinstance(cuda_device, int) and cuda_device < 0)):
            target = check_device(cuda_device_to_device(cuda_device), "cuda_device", cuda_device)
        elif device is not None:
            target = check_device(device, "device")
        else:  # AllenNLP's default, the CPU; a loaded BiLM stays where it is
            target = model.device if isinstance(model, BiLM) else torch.device("cpu")
        if options_file is not None:
            if weight_file is None:
                raise ValueError("ElmoEmbedder: options_file needs weight_file too")
            if isinstance(model, BiLM) or str(model) != DEFAULT_MODEL:
                raise ValueError("ElmoEmbedder: give either a model or options_file + weight_file, not both")
            model = options_file
        self.model = bilm_from_arguments(model, weight_file, precision, target, data_root, cache_dir, "ElmoEmbedder")
        self.model.eval()
        self.model.stateful = stateful
        self.device = target
        self.batch_size = batch_size
        self.n_layers = self.model.config.n_output_layers
        self.dim = self.model.config.output_dim

    def batch_to_embeddings(self, batch: Sequence[Sequence[str]]) -> tuple[torch.Tensor, torch.Tensor]:
        """Sentences -> (activations (B, L+1, T, 2P), mask (B, T))."""
        with torch.inference_mode():
            out = self.model(model_token_ids(self.model, batch).to(self.device))
        return torch.stack(out.layers, dim=1), out.mask

    def embed_batch(self, batch: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """Sentences (lists of tokens) -> one array (L+1, T_i, 2P) per sentence, in order. A
        string where a sentence should be is a ``TypeError`` (it would embed each character as a word)."""
        if batch is None:
            raise TypeError("embed_batch takes a list of sentences (lists of tokens), got None")
        if isinstance(batch, str) or any(isinstance(sentence, str) for sentence in batch):
            raise TypeError(_STRING_NOT_TOKENS.format(what="embed_batch", given="sentences"))
        if len(batch) == 0:
            return []
        activations, _ = self.batch_to_embeddings(batch)
        return [activations[i, :, : len(s)].cpu().numpy() for i, s in enumerate(batch)]

    def embed_sentence(self, sentence: Sequence[str]) -> np.ndarray:
        """One tokenised sentence -> (L+1, T, 2P). An empty sentence gives (L+1, 0, 2P)."""
        if isinstance(sentence, str):
            raise TypeError("embed_sentence takes a list of tokens, not a string; use elmo_model.text.tokenizer.tokenize")
        if sentence is None:
            raise TypeError("embed_sentence takes a list of tokens, got None")
        return self.embed_batch([list(sentence)])[0]

    def embed_sentences(self, sentences: Iterable[Sequence[str]], batch_size: int | None = None
                        ) -> Iterator[np.ndarray]:
        """A generator of (L+1, T_i, 2P) arrays, one per sentence, in input order. Stateless mode
        sorts each chunk of sentences by length so batches carry little padding; stateful mode
        keeps the order (the state follows it). A string among the sentences is a ``TypeError``."""
        if isinstance(sentences, str):
            raise TypeError(_STRING_NOT_TOKENS.format(what="embed_sentences", given="sentences"))
        batch_size = batch_size or self.batch_size
        chunk_size = batch_size if self.model.stateful else batch_size * 32
        chunk: list[list[str]] = []
        for sentence in sentences:
            if isinstance(sentence, str):
                raise TypeError(_STRING_NOT_TOKENS.format(what="embed_sentences", given="sentences"))
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

    def embed_file(self, input_file: str | Path | IO, output_file_path: str | Path, output_format: str = "all",
                   batch_size: int | None = None, forget_sentences: bool = False, use_sentence_keys: bool = False,
                   tokenize: Callable[[str], list[str]] | None = None, progress: CountCallback | None = None) -> Path:
        """Embed every line of ``input_file`` into an hdf5 file laid out like ``allennlp elmo``'s:
        one dataset per line index ("0", "1", ...; or the sentence itself with
        ``use_sentence_keys``, escaped by :func:`escape_key`) of shape (L+1, T, 2P) ("all") or
        (T, 2P) ("top", "average"), and ``sentence_to_index``, a JSON object (not with
        ``forget_sentences``). AllenNLP's argument order; ``input_file``: a path or an open file.

        Written to ``<output>.partial`` and renamed at the end, under a lock (``<output>.lock``):
        a second run on the same output stops with ``OutputBusy``. The unfinished file records
        its job (input digest, output format, keys, model identity, stateful or not); a rerun of
        the same job resumes after the last finished window (``32 * batch_size`` sentences, or one
        batch with the LSTM state saved beside it when stateful), so the result equals an
        uninterrupted run bit for bit; any other job discards it, saying why. Paths, the batch
        size and every input line are checked before the model runs."""
        if output_format not in OUTPUT_FORMATS:
            raise ValueError(f"output_format must be one of {OUTPUT_FORMATS}, got {output_format!r}")
        batch_size = batch_size or self.batch_size
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch size must be a positive integer, got {batch_size!r}")
        sentences, read_from = _input_sentences(input_file, output_file_path, tokenize)
        output = check_output_path(output_file_path, [*([read_from] if read_from is not None else []),
                                                      *loaded_model_inputs(self.model)])
        if not sentences:
            raise ValueError(f"{read_from or 'the input file'}: holds no sentences; write one sentence per line")
        keys = sentence_keys(sentences, use_sentence_keys)
        stateful = bool(self.model.stateful)
        # what the file is for: a resume continues only this very job
        manifest = {"input_digest": digest_tokens(sentences), "n_sentences": len(sentences),
                    "output_format": output_format, "use_sentence_keys": bool(use_sentence_keys),
                    "model_identity": model_identity(self.model), "stateful": stateful,
                    "precision": str(getattr(self.model, "precision", None) or "fp32"),
                    "batch_size": batch_size if stateful else None}
        window = batch_size if stateful else batch_size * 32  # embed_sentences' chunk: the unit of resume
        partial = output.with_name(output.name + ".partial")
        with output_lock(output, what="output file"):
            out = _open_partial(partial, manifest)
            with out:
                first_line: dict[str, int] = {}
                for i, key in enumerate(keys):
                    first_line.setdefault(key, i)
                out, start = self._resume_point(out, partial, manifest, keys, first_line, window)
                if start:
                    log.info("resuming %s: %d of %d sentences already embedded", output, start, len(keys))
                if progress:
                    progress(start, len(keys))
                todo = range(start, len(keys))
                arrays = self.embed_sentences((sentences[i] for i in todo), batch_size)
                for i, array in zip(todo, arrays):
                    key = keys[i]
                    if first_line[key] == i:  # a repeated sentence (use_sentence_keys) is written once
                        if key in out:  # written by an interrupted run after its last mark
                            del out[key]
                        data = reduce_layers(array, output_format)
                        # the data, and the metadata of this window's datasets that the mark's flush writes
                        ensure_room(partial, data.nbytes + 1024 * (i % window + 1),
                                    f"{int(out.attrs['lines_done'])} of {len(keys)} sentences kept in {partial}")
                        out.create_dataset(key, data=data)
                    if (i + 1) % window == 0 or i + 1 == len(keys):
                        # data (and the carried state) first, then the mark that says it is there
                        if stateful:
                            self._save_state(out, i + 1)
                        flush_to_disk(out)
                        out.attrs["lines_done"] = i + 1
                        flush_to_disk(out)
                        if stateful:  # the previous state only after the new mark is on disk
                            _drop_states(out, keep=i + 1)
                        if progress:
                            progress(i + 1, len(keys))
                _drop_states(out)
                if "sentence_to_index" in out:
                    del out["sentence_to_index"]
                if not forget_sentences:
                    out.create_dataset("sentence_to_index", data=_sentence_index(sentences, keys))
                flush_to_disk(out)
            os.replace(partial, output)
        return output

    def _resume_point(self, out: h5py.File, partial: Path, manifest: dict, keys: list[str],
                      first_line: dict[str, int], window: int) -> tuple[h5py.File, int]:
        """The unfinished file to go on with and the sentence to go on from: after its last
        verified mark, with what was written past the mark removed (and the LSTM state of the
        mark restored when stateful); an empty new file from 0 when that cannot be done."""
        stateful = bool(manifest["stateful"])
        start = _verified_mark(out, partial, keys, first_line, window, stateful)
        try:  # what an interrupted run wrote after its last mark goes first
            for key in {keys[i] for i in range(start, len(keys)) if first_line[keys[i]] == i}:
                if key in out:
                    del out[key]
        except (KeyError, OSError) as err:  # a kill -9 mid-write can leave that part unreadable
            log.warning("%s: damaged after its last mark (%s); starting over", partial, err)
            out.close()
            partial.unlink()
            out = _open_partial(partial, manifest)
            start = 0
        # a file is one job: it starts from a zero state, or from the one saved with the mark
        if stateful and not self._restore_state(out, start):
            log.warning("%s: no LSTM state saved for its %d finished sentences; starting over", partial, start)
            out.close()
            partial.unlink()
            out = _open_partial(partial, manifest)
            start = 0
        return out, start

    def _save_state(self, out: h5py.File, lines_done: int) -> None:
        """Keep the LSTM state carried past the first ``lines_done`` sentences (stateful mode) in
        the unfinished file, beside the state of the previous mark (dropped once the new mark is
        on disk, so a crash between the two never pairs a mark with another mark's state)."""
        name = _state_name(lines_done)
        if name in out:
            del out[name]
        group = out.create_group(name)
        for direction, per_layer in (self.model._states or {}).items():
            for k, (h, c) in enumerate(per_layer):
                group.create_dataset(f"{direction}/{k}/h", data=h.cpu().numpy())
                group.create_dataset(f"{direction}/{k}/c", data=c.cpu().numpy())

    def _restore_state(self, out: h5py.File, lines_done: int) -> bool:
        """Restore the state saved with the mark ``lines_done`` (a zero state for 0); False when
        the file holds none for it."""
        self.model.reset_states()
        if lines_done == 0:
            return True
        group = out.get(_state_name(lines_done))
        if group is None:
            return False
        if len(group):
            self.model._states = {
                direction: [(torch.from_numpy(group[f"{direction}/{k}/h"][...]).to(self.device),
                             torch.from_numpy(group[f"{direction}/{k}/c"][...]).to(self.device))
                            for k in range(len(group[direction]))]
                for direction in group}
        return True


# The carried LSTM state of an unfinished stateful run, one group per mark ("%resume_state@128").
# No dataset key can take such a name: line indices are digits and escape_key writes every "%" of
# a sentence as "%25".
_STATE_GROUP = "%resume_state"


def _state_name(lines_done: int) -> str:
    return f"{_STATE_GROUP}@{lines_done}"


def _verified_mark(out: h5py.File, partial: Path, keys: Sequence[str], first_line: dict[str, int], window: int,
                   stateful: bool) -> int:
    """The unfinished file's ``lines_done`` mark, checked against the data it vouches for: a mark
    beyond the sentences, or one that vouches for a sentence whose dataset is not there (an
    edited or damaged file), goes back to the last window that is whole (stateless) or to 0
    (stateful: the carried state of an earlier mark is not kept); logged. So a resume never
    skips a sentence."""
    try:
        mark = int(out.attrs.get("lines_done", 0))
    except (TypeError, ValueError):
        mark = -1
    missing = next((i for i in range(min(max(mark, 0), len(keys))) if first_line[keys[i]] == i and keys[i] not in out),
                   None)
    if 0 <= mark <= len(keys) and missing is None:
        return mark
    start = 0 if stateful or missing is None else (missing // window) * window
    log.warning("%s: its progress mark (%s of %d sentences) does not match the data in it%s; going on from "
                "sentence %d", partial, out.attrs.get("lines_done"), len(keys),
                f" (sentence {missing} is missing)" if missing is not None else "", start)
    out.attrs["lines_done"] = start
    return start


def _drop_states(out: h5py.File, keep: int | None = None) -> None:
    """Delete the saved states, but the one of mark ``keep``."""
    for name in [n for n in out if n.startswith(_STATE_GROUP) and (keep is None or n != _state_name(keep))]:
        del out[name]


def _open_partial(partial: Path, manifest: dict) -> h5py.File:
    """The unfinished file of this job, reopened; or a new one when there is none, when it is
    damaged, or when it was written for another job (logged with the reason)."""
    if partial.exists():
        try:
            out = h5py.File(partial, "a")
        except OSError as err:  # a run killed mid-write can leave an unreadable file
            log.warning("%s is damaged (%s); starting over", partial, err)
        else:
            differences = manifest_differences(out.attrs.get("job"), manifest)
            if not differences:
                return out
            out.close()
            if "model_checksum" in differences:  # the key before the identity covered the options
                log.warning("%s was %s; starting over", partial, LEGACY_NOTE)
            else:
                log.warning("%s was written for another job (%s differ); starting over", partial,
                            ", ".join(differences))
        partial.unlink()
    out = h5py.File(partial, "w")
    out.attrs["job"] = manifest_json(manifest)
    out.attrs["lines_done"] = 0
    flush_to_disk(out)
    return out
