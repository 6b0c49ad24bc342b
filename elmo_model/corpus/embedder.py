"""Embed a file of sentences into hdf5, as ``allennlp elmo`` does: the command line.

    python -m elmo_model.corpus.embedder sentences.txt out.hdf5 --all
    python -m elmo_model.corpus.embedder sentences.txt out.hdf5 --all --ray      # shards on Ray

One sentence per line, whitespace-tokenised unless ``--tokenize``. The work is
``ElmoEmbedder.embed_file`` (``elmo_model.embedding``), or ``embed_file_with_ray``
(``elmo_model.corpus.ray_embed``) with ``--ray``. ``ElmoEmbedder`` and the file-layout helpers are
importable from here too, as they always were.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..bilm import fused_step
from ..bilm.devices import check_device, cuda_device_to_device
from ..plumbing.flags import (
    EXIT_CODES,
    add_device_argument,
    add_models_dir_argument,
    add_precision_argument,
    add_quiet_argument,
)
from ..bilm.precision import precision_line
from ..embedding import (
    OUTPUT_FORMATS,
    ElmoEmbedder,
    escape_key,
    read_sentence_file,
    reduce_layers,
    sentence_keys,
)
from ..models.names import model_files
from ..models.published import MODEL_HELP
from ..models.registry import DEFAULT_MODEL, load_bilm
from ..plumbing.extras import missing_message
from ..plumbing.io_safety import (
    check_input_file,
    check_output_dir,
    check_output_path,
    data_root_argument,
    positive_int,
    raise_if_interrupted,
)
from ..plumbing.commands import run_command
from ..plumbing.progress import TerminalProgress, log_through_bars
from ..plumbing.resources import command_name
from .projector import projector_from_hdf5

__all__ = ["OUTPUT_FORMATS", "ElmoEmbedder", "escape_key", "main", "read_sentence_file", "reduce_layers",
           "sentence_keys"]

# from how many sentences the command compiles the fused LSTM step (elmo_model.bilm.fused_step): a
# shorter file is done before the compiler would be (tens of seconds the first time on a machine)
FUSED_STEP_MIN_SENTENCES = 2000


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=command_name("elmo-embed", "python -m elmo_model.corpus.embedder"),
        epilog=EXIT_CODES,
        description="Embed a file of sentences (one per line) with a biLM into hdf5, in the layout "
                    "of AllenNLP's `allennlp elmo` command: one dataset per line index plus a "
                    "`sentence_to_index` JSON dataset. Interrupted runs resume.")
    parser.add_argument("input", type=Path, help="text file, one sentence per line (whitespace-tokenised unless --tokenize)")
    parser.add_argument("output", type=Path, help="hdf5 file to write")
    parser.add_argument("--model", default=DEFAULT_MODEL,
                        help=MODEL_HELP + " (default: %(default)s)")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--all", dest="output_format", action="store_const", const="all",
                       help="store every layer, shape (L+1, T, 2P) (default)")
    group.add_argument("--top", dest="output_format", action="store_const", const="top",
                       help="store the top layer only, shape (T, 2P)")
    group.add_argument("--average", dest="output_format", action="store_const", const="average",
                       help="store the average of the layers, shape (T, 2P)")
    parser.add_argument("--data-root", type=data_root_argument, default=None, metavar="DIR",
                        help="a data root whose models/NAME is looked in first for a published model's name")
    add_models_dir_argument(parser)
    parser.add_argument("--options-file", type=Path, help="AllenNLP-style pair of files instead of --model: options.json ...")
    parser.add_argument("--weight-file", type=Path, help="... and its hdf5 weight file")
    add_device_argument(parser, default="cpu", note="as `allennlp elmo`")
    parser.add_argument("--cuda-device", type=int, default=None, metavar="N",
                        help="AllenNLP's spelling of --device: N >= 0 the GPU cuda:N, -1 the CPU")
    parser.add_argument("--batch-size", type=positive_int, default=64, help="sentences per batch (default: %(default)s)")
    parser.add_argument("--use-sentence-keys", action="store_true",
                        help="name datasets by the sentence instead of the line index; in a name '%%' is written "
                             "'%%25', '/' '%%2F', and a sentence of only dots has each dot as '%%2E' "
                             "(urllib.parse.unquote reads a name back)")
    parser.add_argument("--forget-sentences", action="store_true",
                        help="leave out the sentence_to_index dataset, as `allennlp elmo --forget-sentences` does")
    parser.add_argument("--projector", type=Path, metavar="DIR",
                        help="also write the vectors for the Embedding Projector (projector.tensorflow.org, "
                             "TensorBoard): one tensors.tsv a layer, metadata.tsv (token, sentence), "
                             "projector_config.pbtxt")
    add_quiet_argument(parser)
    parser.add_argument("--tokenize", action="store_true", help="tokenise each line with the project's tokenizer")
    parser.add_argument("--stateful", action="store_true", help="carry the LSTM state across batches (AllenNLP's default)")
    add_precision_argument(parser, default="fp32", note="AllenNLP's numbers, as `allennlp elmo` gives them; auto "
                           "is about 2.5-3x faster on the full-size model where the CPU or GPU has bf16 units, and "
                           "moves the vectors by up to 7.5e-3 on bilm-tf's own replay (fp32: 8.3e-7); see "
                           "docs/migrating-from-allennlp.md")
    cluster = parser.add_argument_group(
        "Ray (large inputs)", "Split the input into shards, each embedded by a Ray actor that loads the model once; "
        "shards are written to OUTPUT.shards/ and assembled into the same OUTPUT layout (identical vectors). "
        "A rerun skips finished shards. Needs Ray: `pip install ray` (the [cluster] extra).")
    cluster.add_argument("--ray", nargs="?", const="local", metavar="ADDRESS",
                         help="run on Ray: alone, start Ray on this machine (or join $RAY_ADDRESS); with ADDRESS "
                              "('auto', 'ray://head:10001') join a cluster started with `ray start`")
    cluster.add_argument("--workers", type=positive_int, help="Ray actors (default: every CPU Ray sees / --cpus-per-worker)")
    cluster.add_argument("--cpus-per-worker", type=positive_int, default=1, help="CPUs (torch threads) per actor (default: %(default)s)")
    cluster.add_argument("--shard-size", type=positive_int,
                         help="sentences per shard, rounded up to a multiple of 32 x --batch-size (default: 8 such windows)")
    cluster.add_argument("--link-shards", action="store_true",
                         help="OUTPUT holds hdf5 external links to the shards instead of copies (keep OUTPUT.shards/ beside it)")
    cluster.add_argument("--keep-shards", action="store_true", help="keep OUTPUT.shards/ after copying them into OUTPUT")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line; return the exit status (0 done, 2 bad input, 130 interrupted)."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.ray is None and (args.workers or args.shard_size or args.link_shards or args.keep_shards):
        parser.error("--workers, --shard-size, --link-shards and --keep-shards need --ray")
    if (args.options_file is None) != (args.weight_file is None):
        parser.error("--options-file and --weight-file go together")
    if args.options_file is not None and (args.ray is not None or args.model != DEFAULT_MODEL):
        parser.error("--options-file/--weight-file replace --model and do not work with --ray; for --ray, put the "
                     "two files in a directory as options.json and weights.hdf5 and pass --model DIRECTORY")
    if args.ray is not None and args.forget_sentences:
        parser.error("--forget-sentences works without --ray only")
    if args.ray is not None and args.stateful:
        parser.error("--stateful carries the LSTM state from batch to batch, so it cannot be split into shards; drop --ray")
    if args.cuda_device is not None and args.cuda_device < -1:
        parser.error(f"--cuda-device {args.cuda_device}: expected -1 (the CPU) or a GPU number")
    if args.cuda_device is not None and args.device != "cpu":
        parser.error("--cuda-device N is AllenNLP's spelling of --device cuda:N; give one of them")
    device_flag, device_given = ("--cuda-device", args.cuda_device) if args.cuda_device is not None else \
        ("--device", args.device)
    args.device = cuda_device_to_device(args.cuda_device) if args.cuda_device is not None else args.device
    args.device_flag, args.device_given = device_flag, device_given
    if args.ray is not None and args.device != "cpu":
        parser.error(f"--ray runs its workers on CPUs; drop {device_flag} (or --ray)")
    log_through_bars(args.quiet)
    tokenize = None
    if args.tokenize:
        # the tokenizer needs nltk, which embedding whitespace-split lines does not (GPU images often lack it)
        from ..text.tokenizer import tokenize_words

        tokenize = tokenize_words
    bar = TerminalProgress("embedding", single=True, unit="sentence", quiet=args.quiet)
    done = {"kept": 0, "total": None}

    def counts(n: int, total: int) -> None:  # called at every resumable mark: what is on disk
        done["kept"], done["total"] = n, total
        bar.counts(n, total)
        raise_if_interrupted()  # a safe point: the mark is on disk

    def kept() -> str:
        partial = args.output.with_name(args.output.name + ".partial")
        if args.ray is not None:
            return f"finished shards kept in {args.output}.shards; rerun the same command to resume"
        if done["total"] is None or not partial.exists():
            return "nothing written yet; rerun the same command to start again"
        return (f"{done['kept']} of {done['total']} sentences kept in {partial}; "
                "rerun the same command to resume")

    def wrote(_: None) -> None:
        print(f"wrote {args.output}" + (f" and the Projector's files in {args.projector}" if args.projector else ""))

    return run_command(lambda: _embed(args, tokenize, counts), wrote, bar=bar, kept=kept,
                       errors=(ValueError, FileNotFoundError))


def _embed(args: argparse.Namespace, tokenize, counts) -> None:
    # everything cheap before the model is loaded: Ray for --ray, the device, the input, the output
    if args.ray is not None and (absent := missing_message("cluster", "--ray")):
        raise ValueError(absent)
    device = check_device(args.device, args.device_flag, args.device_given)
    check_input_file(args.input, "input file (one sentence per line)")
    n_sentences = len(read_sentence_file(args.input, tokenize))  # every line checked before the model loads
    model_inputs = ([args.options_file, args.weight_file, *model_files(Path(args.weight_file).resolve().parent)]
                    if args.options_file else model_files(args.model, args.data_root, args.models_dir))
    check_output_path(args.output, [args.input, *model_inputs])
    if args.projector is not None:
        check_output_dir(args.projector, [args.input, args.output, *model_inputs], flag="--projector",
                         what="folder for the Projector's files")
    if args.ray is not None:
        # Ray is optional: imported only for --ray, checked above
        from .ray_embed import embed_file_with_ray
        model = load_bilm(args.model, args.precision, data_root=args.data_root, cache_dir=args.models_dir)
        print(precision_line(model, args.precision), flush=True)
        embed_file_with_ray(args.input, args.output, model, args.output_format or "all", args.batch_size,
                            args.use_sentence_keys, tokenize, args.ray, args.workers, args.cpus_per_worker,
                            args.shard_size, args.link_shards, args.keep_shards, progress=counts)
    else:
        model = args.options_file if args.options_file is not None else args.model
        embedder = ElmoEmbedder(model, args.weight_file, batch_size=args.batch_size, stateful=args.stateful,
                                device=str(device), precision=args.precision, data_root=args.data_root,
                                cache_dir=args.models_dir)
        if n_sentences >= FUSED_STEP_MIN_SENTENCES:  # a long run: the compiled LSTM step pays
            fused_step.enable(wait=True)  # every sentence through the same cell: the same vectors every run
        print(precision_line(embedder.model, args.precision), flush=True)
        embedder.embed_file(args.input, args.output, args.output_format or "all", args.batch_size,
                            forget_sentences=args.forget_sentences, use_sentence_keys=args.use_sentence_keys,
                            tokenize=tokenize, progress=counts)
    if args.projector is not None:
        sentences = read_sentence_file(args.input, tokenize)
        projector_from_hdf5(args.output, sentences, sentence_keys(sentences, args.use_sentence_keys),
                            args.projector, [args.input])


if __name__ == "__main__":
    sys.exit(main())
