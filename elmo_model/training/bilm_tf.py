"""bilm-tf's training command, as ELMo tutorials write it, on this project's trainer.

    elmo-train --train_prefix 'data/train/*' --vocab_file vocab.txt --save_dir DIR --options_file options.json

(also ``python -m elmo_model.training.train ...``). The options file is bilm-tf's: ``char_cnn``, ``lstm``,
``dropout``, ``bidirectional``, ``n_epochs``, ``batch_size``, ``unroll_steps``, ``n_train_tokens``,
``n_tokens_vocab``, ``n_negative_samples_batch``, ``all_clip_norm_val``. Each field becomes a
setting of ``TrainConfig`` or is named in one line saying why it is not used (:func:`config_from_options`).
The training text is bilm-tf's too: one tokenised sentence per line, tokens split on white space.
The vocabulary file fixes the softmax's words; its three special words may come in the order
tutorials write (``<S>``, ``</S>``, ``<UNK>``) or in any other, as bilm-tf's reader allowed.

``DIR`` is the run directory (``checkpoint.pt``: rerunning the command resumes). At the end the
model is exported to ``DIR/model/`` as every run is, and its ``options.json`` and ``weights.hdf5``
are copied to ``DIR/`` itself, where tutorials look for them next::

    Elmo("DIR/options.json", "DIR/weights.hdf5", 1, dropout=0.0)
"""

from __future__ import annotations

import argparse
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..bilm.config import options_problems, show_value
from ..plumbing.io_safety import atomic_output
from .config import TrainConfig
from .vocab import SPECIALS, Vocabulary

#: the flags that make a command line bilm-tf's rather than the trainer's own
BILM_TF_FLAGS = ("--train_prefix", "--vocab_file", "--save_dir", "--options_file")
TOP_LEVEL = ("char_cnn", "lstm", "dropout", "bidirectional", "n_epochs", "batch_size", "unroll_steps",
             "n_train_tokens", "n_tokens_vocab", "n_negative_samples_batch", "all_clip_norm_val")
CHAR_CNN = {"embedding": "char_embedding_dim", "filters": "filters", "n_highway": "n_highway"}
LSTM = {"dim": "lstm_dim", "projection_dim": "projection_dim", "n_layers": "n_layers", "cell_clip": "cell_clip",
        "proj_clip": "proj_clip", "use_skip_connections": "use_skip_connections"}


def is_bilm_tf_command(argv: list[str]) -> bool:
    """Whether a command line uses bilm-tf's flags (``--train_prefix``, ``--save_dir``, ...)."""
    return any(arg == flag or arg.startswith(flag + "=") for arg in argv for flag in BILM_TF_FLAGS)


def split_on_white_space(line: str) -> list[list[str]]:
    """bilm-tf's training text: a line is one sentence, already tokenised -> [its tokens]."""
    return [line.split()]


@dataclass
class BilmTfRun:
    """A bilm-tf command line as the trainer runs it: its settings, the lines that say how each
    option was taken, the vocabulary file and where the tutorials' two files go."""

    config: TrainConfig
    notes: list[str]
    vocab_file: Path
    options_file: Path
    tokenize: Callable[[str], list[list[str]]] = field(default=split_on_white_space)

    @property
    def save_dir(self) -> Path:
        """``--save_dir``: the run directory."""
        return Path(self.config.out)

    def prepare(self) -> None:
        """Put the vocabulary file into the run directory as the trainer's ``vocab.txt`` (specials
        first, in the trainer's order); a rerun must give the same words. ValueError, one line."""
        vocab = read_vocabulary(self.vocab_file)
        target = self.save_dir / "vocab.txt"
        if target.is_file():
            if Vocabulary.load(target).words != vocab.words:
                raise ValueError(f"--save_dir {self.save_dir}: its vocab.txt differs from --vocab_file "
                                 f"{self.vocab_file} (a run there used other words); use another --save_dir")
            return
        self.save_dir.mkdir(parents=True, exist_ok=True)
        vocab.save(target)

    def finish(self, export_dir: Path) -> list[Path]:
        """Copy the export's ``options.json`` and ``weights.hdf5`` to the run directory -> their paths."""
        written = []
        for name in ("options.json", "weights.hdf5"):
            target = self.save_dir / name
            with atomic_output(target) as tmp:
                shutil.copyfile(Path(export_dir) / name, tmp)
            written.append(target)
        return written


def _refuse_an_exported_model(save_dir: Path) -> None:
    """A ``--save_dir`` that holds a model (weights, a model card) but no run of this trainer would be
    overwritten by a run from scratch (its options.json and weights.hdf5 at the end): refused, one
    line, before anything is written. A run folder of this command (its checkpoint.pt) resumes."""
    if not save_dir.is_dir() or (save_dir / "checkpoint.pt").exists():
        return
    held = [name for name in ("weights.hdf5", "lm_weights.hdf5", "model_card.json") if (save_dir / name).exists()]
    if held:
        raise ValueError(f"--save_dir {save_dir}: holds a model ({', '.join(held)}) and no run of this trainer; "
                         "training there would start from scratch and overwrite it. Give a new --save_dir, or "
                         f"continue that model with: elmo-train --init-from {save_dir} --out NEW_RUN_DIR ...")


def read_vocabulary(path: Path) -> Vocabulary:
    """A bilm-tf vocabulary file (one word a line, most frequent first, ``<S>``, ``</S>`` and
    ``<UNK>`` among them, usually first) -> the trainer's ``Vocabulary`` (specials first, the other
    words in the file's order). ValueError naming the file for a missing special or a repeated word."""
    try:
        # utf-8-sig: a byte-order mark (an editor's) is not part of the first word ("<S>")
        words = [w.strip() for w in path.read_text(encoding="utf-8-sig").splitlines() if w.strip()]
    except (OSError, UnicodeDecodeError) as err:
        raise ValueError(f"--vocab_file {path}: not a readable UTF-8 text file ({err})") from None
    missing = [s for s in SPECIALS if s not in words]
    if missing:
        raise ValueError(f"--vocab_file {path}: no {', '.join(missing)} line; a bilm-tf vocabulary holds <S>, </S> "
                         "and <UNK> (usually its first three lines), then one word a line, most frequent first")
    seen: set[str] = set()
    repeated = next((w for w in words if w in seen or seen.add(w)), None)
    if repeated is not None:
        raise ValueError(f"--vocab_file {path}: {repeated!r} appears twice; each word once")
    return Vocabulary(list(SPECIALS) + [w for w in words if w not in SPECIALS])


def _load_options(path: Path) -> dict[str, Any]:
    try:
        options = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise ValueError(f"--options_file {path}: not a readable JSON file ({err})") from None
    if not isinstance(options, dict) or not isinstance(options.get("char_cnn"), dict) \
            or not isinstance(options.get("lstm"), dict):
        raise ValueError(f"--options_file {path}: expected bilm-tf's options, a JSON object with 'char_cnn' and "
                         "'lstm' objects")
    problems = _type_problems(options) or options_problems(options)
    if problems:
        raise ValueError(f"--options_file {path}: {'; '.join(problems)}")
    return options


_INT, _NUMBER, _BOOL = "a whole number", "a number", "true or false"
#: each field bilm-tf's options hold, and the JSON type it must have (null is none of them)
_FIELD_TYPES = {
    "dropout": _NUMBER, "bidirectional": _BOOL, "n_epochs": _INT, "batch_size": _INT, "unroll_steps": _INT,
    "n_train_tokens": _INT, "n_tokens_vocab": _INT, "n_negative_samples_batch": _INT, "all_clip_norm_val": _NUMBER,
    "learning_rate": _NUMBER,
    "char_cnn.n_highway": _INT, "char_cnn.n_characters": _INT, "char_cnn.max_characters_per_token": _INT,
    "lstm.dim": _INT, "lstm.projection_dim": _INT, "lstm.n_layers": _INT, "lstm.cell_clip": _NUMBER,
    "lstm.proj_clip": _NUMBER, "lstm.use_skip_connections": _BOOL,
}


def _has_type(value: Any, kind: str) -> bool:
    if kind == _BOOL:
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    return isinstance(value, int) if kind == _INT else isinstance(value, (int, float))


def _type_problems(options: dict[str, Any]) -> list[str]:
    """One phrase per field of the wrong JSON type (a number given as a string, a null, an object
    where a number goes), before any field is used: they raised TypeErrors, or made flags and values
    the user never wrote ("--batch-tokens 128128...")."""
    problems = []
    for field, kind in _FIELD_TYPES.items():
        section, _, key = field.rpartition(".")
        holder = options[section] if section else options
        if key in holder and not _has_type(holder[key], kind):
            problems.append(f"{field} is {show_value(holder[key])}; it must be {kind}")
    embedding = options["char_cnn"].get("embedding")
    if embedding is not None and not (isinstance(embedding, dict) and _has_type(embedding.get("dim"), _INT)):
        problems.append(f"char_cnn.embedding is {show_value(embedding)}; it must be an object with a whole-number "
                        "\"dim\", e.g. {\"dim\": 16}")
    filters = options["char_cnn"].get("filters")
    if filters is not None and not (isinstance(filters, list) and all(
            isinstance(f, list) and len(f) == 2 and all(_has_type(n, _INT) for n in f) for f in filters)):
        problems.append(f"char_cnn.filters is {show_value(filters)}; it must be a list of [width, n_filters] pairs "
                        "of whole numbers")
    if "activation" in options["char_cnn"] and not isinstance(options["char_cnn"]["activation"], str):
        problems.append(f"char_cnn.activation is {show_value(options['char_cnn']['activation'])}; it must be a "
                        "string such as \"relu\"")
    return problems


def _architecture(options: dict[str, Any], settings: dict[str, Any], notes: list[str]) -> None:
    """``char_cnn`` and ``lstm`` -> settings; what the trainer cannot take raises ValueError."""
    char_cnn, lstm = options["char_cnn"], options["lstm"]
    for key, name in CHAR_CNN.items():
        if key in char_cnn:
            value = char_cnn[key]["dim"] if key == "embedding" else char_cnn[key]
            settings[name] = value
            notes.append(f"char_cnn.{key}{'.dim' if key == 'embedding' else ''} {show_value(value)} -> {name}")
    if char_cnn.get("n_characters", 262) not in (261, 262):
        raise ValueError(f"char_cnn.n_characters = {char_cnn['n_characters']}: bilm-tf trains with 261 characters "
                         "and exports 262; give one of those")
    if "n_characters" in char_cnn:
        notes.append(f"char_cnn.n_characters {char_cnn['n_characters']}: not a setting; the character table "
                     "always has 262 rows (bilm-tf's 261 plus the padding character, as its exports have)")
    if char_cnn.get("max_characters_per_token", 50) != 50:
        raise ValueError(f"char_cnn.max_characters_per_token = {char_cnn['max_characters_per_token']}: the trainer "
                         "reads 50 characters per token, as every published ELMo; set 50")
    if char_cnn.get("activation", "relu") != "relu":
        raise ValueError(f"char_cnn.activation = {show_value(char_cnn['activation'])}: the trainer's character CNN "
                         "uses relu, as every published ELMo; set \"relu\"")
    notes.append("char_cnn.max_characters_per_token 50, char_cnn.activation relu: as the trainer's")
    known_char_cnn = set(CHAR_CNN) | {"n_characters", "max_characters_per_token", "activation"}
    for key, value in char_cnn.items():
        if key not in known_char_cnn:
            notes.append(f"char_cnn.{key} {show_value(value)}: not used (not a bilm-tf char_cnn option)")
    for key, name in LSTM.items():
        if key in lstm:
            settings[name] = lstm[key]
            notes.append(f"lstm.{key} {show_value(lstm[key])} -> {name}")
    for key, value in lstm.items():
        if key not in LSTM:
            notes.append(f"lstm.{key} {show_value(value)}: not used (not a bilm-tf lstm option)")


def _training(options: dict[str, Any], settings: dict[str, Any], notes: list[str], vocab_size: int) -> None:
    """The optimisation fields -> settings, and the lines for the ones not used."""
    if options.get("bidirectional", True) is not True:
        raise ValueError(f"bidirectional = {show_value(options['bidirectional'])}: the trainer trains the forward "
                         "and the backward language model together, as ELMo is; set true")
    if "bidirectional" in options:
        notes.append("bidirectional true: both directions, as the trainer always trains")
    if "dropout" in options:
        settings["dropout"] = options["dropout"]
        notes.append(f"dropout {show_value(options['dropout'])} -> dropout")
    if "n_epochs" in options:
        settings["epochs"] = options["n_epochs"]
        notes.append(f"n_epochs {show_value(options['n_epochs'])} -> epochs")
    unroll = options.get("unroll_steps", 20)
    if "unroll_steps" in options:
        settings["max_sentence_tokens"] = unroll
        notes.append(f"unroll_steps {show_value(unroll)} -> max_sentence_tokens (sentences longer than that are "
                     "cut; each piece starts from a zero LSTM state rather than bilm-tf's carried-over one)")
    if "batch_size" in options:
        settings["batch_tokens"] = options["batch_size"] * unroll
        notes.append(f"batch_size {show_value(options['batch_size'])} x unroll_steps {show_value(unroll)} -> "
                     f"batch_tokens {settings['batch_tokens']} (tokens a batch, as bilm-tf's batches held)")
    if "n_train_tokens" in options:
        settings["max_tokens"] = options["n_train_tokens"] * settings.get("epochs", 1)
        notes.append(f"n_train_tokens {show_value(options['n_train_tokens'])} -> max_tokens {settings['max_tokens']} "
                     "(n_epochs x n_train_tokens, bilm-tf's budget; the run stops at that or after n_epochs passes "
                     "over the text, whichever comes first)")
    if "all_clip_norm_val" in options:
        settings["grad_clip"] = options["all_clip_norm_val"]
        notes.append(f"all_clip_norm_val {show_value(options['all_clip_norm_val'])} -> grad_clip")
    if "n_tokens_vocab" in options:
        given = options["n_tokens_vocab"]
        differs = "" if given == vocab_size else f"; it says {show_value(given)}"
        notes.append(f"n_tokens_vocab: not used; the softmax has the vocabulary file's {vocab_size} words{differs}")
    if "n_negative_samples_batch" in options:
        notes.append(f"n_negative_samples_batch {show_value(options['n_negative_samples_batch'])}: not used; the "
                     "trainer's softmax is exact (an adaptive softmax), with no sampled negatives")
    if "learning_rate" in options:
        notes.append(f"learning_rate {show_value(options['learning_rate'])}: not used; it is bilm-tf's Adagrad rate, "
                     f"and the trainer's Adam runs at {TrainConfig(train=[]).learning_rate:g}")
    for key in options:
        if key not in TOP_LEVEL + ("learning_rate",):
            notes.append(f"{key}: not used (not a bilm-tf training option)")


def config_from_options(options: dict[str, Any], train_prefix: list[str], save_dir: str, vocab_size: int,
                        **overrides: Any) -> tuple[TrainConfig, list[str]]:
    """bilm-tf's options (a dict read from options.json) -> (``TrainConfig``, one line per field
    saying which setting it became or why it is not used). ``overrides``: settings that win
    (``epochs``, ``max_steps``, ...). ValueError naming the field the trainer cannot follow."""
    settings: dict[str, Any] = {}
    notes: list[str] = []
    _architecture(options, settings, notes)
    _training(options, settings, notes, vocab_size)
    settings.update({k: v for k, v in overrides.items() if v is not None})
    config = TrainConfig(train=list(train_prefix), out=str(save_dir), vocab_size=vocab_size, vocab_min_count=1,
                         **settings)
    problems = config.problems()
    if problems:
        raise ValueError(f"the options give settings the trainer refuses: {'; '.join(problems)}")
    return config, notes


def parse_command(argv: list[str]) -> BilmTfRun:
    """bilm-tf's command line -> a ``BilmTfRun``. ValueError (one line) for a bad options or vocabulary file."""
    parser = argparse.ArgumentParser(
        prog="python -m elmo_model.training.train",
        description="bilm-tf's training command: train a biLM from bilm-tf's options file and vocabulary on "
                    "tokenised text (one sentence a line); DIR/options.json and DIR/weights.hdf5 are written at the "
                    "end, for Elmo(options_file, weight_file, ...). Rerun the same command to resume.")
    parser.add_argument("--train_prefix", required=True, nargs="+", help="training files: a file, a glob or a folder")
    parser.add_argument("--vocab_file", required=True, type=Path, help="one word a line; <S>, </S>, <UNK> among them")
    parser.add_argument("--save_dir", required=True, help="run directory: checkpoints, model/, options.json, "
                                                          "weights.hdf5")
    parser.add_argument("--options_file", required=True, type=Path, help="bilm-tf's options.json")
    parser.add_argument("--n_epochs", type=int, help="overrides the options' n_epochs (as bilm-tf's restart.py)")
    parser.add_argument("--batch_size", type=int, help="overrides the options' batch_size")
    parser.add_argument("--n_train_tokens", type=int, help="overrides the options' n_train_tokens")
    parser.add_argument("--n_gpus", type=int, default=0,
                        help="bilm-tf's GPU count: one GPU here (--device cuda); several: torchrun")
    parser.add_argument("--max_steps", type=int, help="stop after this many batches (the trainer's own budget)")
    parser.add_argument("--max_hours", type=float, help="stop after this many hours (the trainer's own budget)")
    args = parser.parse_args(argv)
    options_file = args.options_file.expanduser()
    if Path(args.save_dir).expanduser().resolve() / "options.json" == options_file.resolve():
        raise ValueError(f"--options_file {options_file}: the trained model's options.json is written there at the "
                         "end; keep the training options in another file")
    _refuse_an_exported_model(Path(args.save_dir).expanduser())
    if args.n_gpus > 0:
        import torch

        if not torch.cuda.is_available():
            raise ValueError(f"--n_gpus {args.n_gpus}: torch sees no GPU on this machine; give --n_gpus 0 to train on "
                             "the CPU")
    options = _load_options(options_file)
    for key in ("n_epochs", "batch_size", "n_train_tokens"):
        if getattr(args, key) is not None:
            options[key] = getattr(args, key)
    vocab = read_vocabulary(args.vocab_file.expanduser())
    config, notes = config_from_options(options, args.train_prefix, args.save_dir, len(vocab),
                                        max_steps=args.max_steps, max_hours=args.max_hours,
                                        device="cuda" if args.n_gpus > 0 else None)
    if args.n_gpus > 1:
        notes.append(f"--n_gpus {args.n_gpus}: this process trains on one GPU; for {args.n_gpus}, launch the same "
                     f"command with torchrun --nproc_per_node {args.n_gpus}")
    return BilmTfRun(config, notes, args.vocab_file.expanduser(), options_file)
