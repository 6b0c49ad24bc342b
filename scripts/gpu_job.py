"""Train on a remote GPU machine that has no internet and a small transfer cap: pack, run, unpack.

    # here: one folder of at most 60 MB (corpus slice, starting model in fp16, code, the command)
    python scripts/gpu_job.py pack JOB [--model data/models/elmo-mini] [--hours 0.5] [--corpus-mb auto]
    # copy JOB over; there (torch, numpy, h5py, nltk, tqdm installed; a GPU):
    cd JOB && python gpu_job.py run            # trains for the budget, cools down, exports, splits
    # copy JOB/outbox back (pieces of at most 15 MB); here:
    python scripts/gpu_job.py unpack JOB/outbox --to data/models/my-successor

What travels out (``JOB/``): ``job.json`` (the trainer's arguments, the budget, the checksums of
everything), ``gpu_job.py`` (this script), ``code.tar.xz`` (``elmo_model/``, the tokenizer's
parameters and ``pyproject.toml``), ``corpus/train.txt.xz`` and ``corpus/valid.txt.xz`` (a slice of the data root's
``lm_corpus``: its training shards interleaved line by line, after the words the starting model
has already seen) and ``start/`` (the starting export with its weights and softmax rounded to
fp16 by ``scripts/fp16_model.py``, its options, vocabulary and model card). ``pack`` refuses, in one line, a job
over the cap.

``run`` rebuilds the starting export in fp32 (``work/start``; the card's ``weights_sha256`` names
the fp16-rounded weights), then trains in two phases of ``python -m elmo_model.training.train`` with
``--init-from work/start``: a constant rate for ``1 - cooldown_share`` of the budget, then, from the
steps per second measured in that phase, a linear cool-down sized to end at the budget
(``--max-steps`` / ``--cooldown-steps`` on the resume; ``--max-hours`` stays as a safety net), and
the export (``work/export``). The way back: ``outbox/`` with the export as a ``.tar.xz`` in pieces
of at most ``--piece-mb`` MB and ``manifest.json`` (the sha256 of every piece, of the whole archive
and of every exported file). ``unpack`` checks all of them, loads the model (which checks its
weights against its card) and only then puts it in place.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import lzma
import os
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import fields
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
MB = 1_000_000
# pyproject.toml makes the unpacked code a checkout, which reads its own data/ (elmo_model.plumbing.resources)
CODE_FILES = ("pyproject.toml", "elmo_model/**/*.py", "data/tokenizer/*")


class JobError(Exception):
    """A user's mistake or a failed check: printed as one line, exit code 2."""


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def project_imports(code: Path) -> None:
    """Make ``elmo_model`` importable: from the repository here, from the unpacked code there."""
    if str(code) not in sys.path:
        sys.path.insert(0, str(code))


# ---- pack --------------------------------------------------------------------------------------

def train_arguments(config) -> list[str]:
    """A ``TrainConfig`` -> the ``python -m elmo_model.training.train`` flags that give it back (None: left out)."""
    argv: list[str] = []
    for f in fields(config):
        value = getattr(config, f.name)
        flag = "--" + f.name.replace("_", "-")
        if value is None:
            continue
        if isinstance(value, bool):
            argv.append(flag if value else "--no-" + f.name.replace("_", "-"))
        elif f.name == "filters":
            argv += [flag, json.dumps(value)]
        elif isinstance(value, list):
            if value:
                argv += [flag, *map(str, value)]
        else:
            argv += [flag, str(value)]
    return argv


def compressed_slice(lines, target_bytes: int, out: Path, segment: int = 4 * MB) -> tuple[int, int]:
    """Lines -> ``out``, xz'd, at most ``target_bytes``: independent xz streams of about ``segment``
    bytes of text each (one .xz file, which any xz reader reads whole), so the size is known as it
    grows; the last one is cut to fit. -> (bytes of text, lines) written."""
    segment = max(16_000, min(segment, 4 * target_bytes))
    written = raw = n_lines = 0
    with open(out, "wb") as f:

        def write_what_fits(pending: list[str]) -> int:
            nonlocal written, raw, n_lines
            while pending:
                text = "".join(pending).encode("utf-8")
                block = lzma.compress(text, preset=6)
                if written + len(block) <= target_bytes:
                    f.write(block)
                    written, raw, n_lines = written + len(block), raw + len(text), n_lines + len(pending)
                    return len(pending)
                pending = pending[: len(pending) // 2]
            return 0

        pending: list[str] = []
        size = 0
        for line in lines:
            pending.append(line + "\n")
            size += len(pending[-1])
            if size >= segment:
                if write_what_fits(pending) < len(pending):
                    return raw, n_lines
                pending, size = [], 0
        write_what_fits(pending)
    return raw, n_lines


def extract(archive: Path | io.BytesIO, target: Path) -> None:
    """A .tar.xz into ``target``, refusing members that would land outside it."""
    with tarfile.open(fileobj=archive, mode="r:xz") if isinstance(archive, io.BytesIO) \
            else tarfile.open(archive, "r:xz") as tar:
        for member in tar.getmembers():
            inside = not member.name.startswith("/") and ".." not in Path(member.name).parts
            if not (member.isfile() or member.isdir()) or not inside:
                raise JobError(f"{archive}: member {member.name!r} is not a plain file inside the archive")
        tar.extractall(target)  # noqa: S202 (members checked above)


def lines_after(files, skip_words: int):
    """The files' non-empty lines, interleaved as the trainer reads them, after the first lines
    that hold ``skip_words`` whitespace-separated words (at most that many tokens: the project's
    tokenizer splits words further)."""
    from elmo_model.training.lm_data import interleaved_lines  # after project_imports (see pack)

    seen = 0
    for line in interleaved_lines(files):
        if seen < skip_words:
            seen += len(line.split())
            continue
        yield line


def pack(args: argparse.Namespace) -> int:
    project_imports(PROJECT)
    project_imports(PROJECT / "scripts")
    # the project's modules are imported here, after the path is set (the same script runs there,
    # where the code is unpacked at run time)
    from elmo_model.training.trainer import TrainConfig, load_language_model
    from fp16_model import write_fp16_model  # scripts/fp16_model.py, the packer bench/gpu_check.py uses too

    job = Path(args.job)
    if job.exists():
        raise JobError(f"{job}: already exists; give a new folder for the job")
    model = Path(args.model)
    for name in ("options.json", "weights.hdf5", "vocab.txt", "softmax.npz"):
        if not (model / name).is_file():
            raise JobError(f"--model {model}: no {name} there (an export of python -m elmo_model.training.train)")
    root = Path(args.data_root or os.environ.get("ELMO_WORKBENCH_DATA", "")).expanduser()
    corpus_dir = root / "lm_corpus"
    train_files = sorted(corpus_dir.glob("*-train-*.txt.gz"))
    valid_files = sorted(corpus_dir.glob("*-valid.txt.gz"))
    if not train_files or not valid_files:
        raise JobError(f"--data-root {root}: no lm_corpus/*-train-*.txt.gz and *-valid.txt.gz there "
                       "(python -m probing.data download lm_corpus)")
    cap = int(args.max_mb * MB)
    card_path = model / "model_card.json"
    card = json.loads(card_path.read_text(encoding="utf-8")) if card_path.is_file() else {}

    partial = job.with_name(job.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    (partial / "corpus").mkdir(parents=True)
    try:
        # the starting model: every tensor of the language model (encoder + softmax) in fp16
        _, vocab = load_language_model(model)  # loads as the trainer will: a damaged export stops here
        try:
            write_fp16_model(model / "options.json", model / "weights.hdf5", partial / "start")
        except ValueError as err:
            raise JobError(str(err)) from None
        with tarfile.open(partial / "code.tar.xz", "w:xz") as tar:
            for pattern in CODE_FILES:
                for path in sorted(PROJECT.glob(pattern)):
                    tar.add(path, arcname=str(path.relative_to(PROJECT)))
        shutil.copy(Path(__file__), partial / "gpu_job.py")

        # the corpus: a held-out slice, then as much training text as the cap leaves
        compressed_slice(lines_after(valid_files, 0), int(args.valid_mb * MB), partial / "corpus" / "valid.txt.xz")
        room = cap - folder_bytes(partial) - 20_000  # job.json and the README
        target = int(args.corpus_mb * MB) if args.corpus_mb is not None else room
        if target > room:
            raise JobError(f"the job would be {(folder_bytes(partial) + target) / MB:.1f} MB, over the "
                           f"{args.max_mb:g} MB cap (start model and code {folder_bytes(partial) / MB:.1f} MB, "
                           f"--corpus-mb {args.corpus_mb:g}); lower --corpus-mb or raise --max-mb")
        if target < 10_000:
            raise JobError(f"the start model and code take {folder_bytes(partial) / MB:.1f} MB of the "
                           f"{args.max_mb:g} MB cap: no room left for a corpus; raise --max-mb")
        skip = card.get("tokens_seen", 0) if args.skip_seen else 0
        raw, n_lines = compressed_slice(lines_after(train_files, skip), target, partial / "corpus" / "train.txt.xz")
        if n_lines == 0:
            raise JobError(f"--data-root {root}: no training text left after skipping {skip} words")

        # the command: the starting model's own settings, with this job's data, device and batch
        base = (TrainConfig.from_dict(card["train_config"]) if "train_config" in card
                else TrainConfig(train=[]))
        options = json.loads((model / "options.json").read_text(encoding="utf-8"))
        if "train_config" not in card:  # an export without a card: its dimensions from options.json
            base.lstm_dim, base.projection_dim = options["lstm"]["dim"], options["lstm"]["projection_dim"]
            base.n_layers = options["lstm"]["n_layers"]
            base.filters = [list(f) for f in options["char_cnn"]["filters"]]
            base.char_embedding_dim = options["char_cnn"]["embedding"]["dim"]
            base.n_highway = options["char_cnn"]["n_highway"]
        config = TrainConfig.from_dict({**base.__dict__,
            "train": ["work/corpus/train.txt"], "valid": ["work/corpus/valid.txt"], "test": [],
            "out": "work/run", "device": args.device, "batch_tokens": args.batch_tokens,
            "max_steps": None, "max_tokens": None, "max_hours": None, "cooldown_steps": 0, "epochs": 1000,
            "threads": None, "validate_every_minutes": 1e9, "checkpoint_every_minutes": 5.0,
            "vocab_size": len(vocab), "log_every": args.log_every})
        config.cooldown_final_fraction = base.cooldown_final_fraction or 0.05
        description = {
            "format": "elmo-gpu-job", "version": 1,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "start_model": {"source": str(model), "weights_sha256": card.get("weights_sha256"),
                            "tokens_seen": card.get("tokens_seen", 0)},
            "corpus": {"train_raw_bytes": raw, "train_lines": n_lines, "skipped_words": skip,
                       "sources": [p.name for p in train_files]},
            "train_args": train_arguments(config) + ["--init-warmup-steps", str(args.init_warmup_steps)],
            "hours": args.hours, "cooldown_share": args.cooldown_share, "piece_mb": args.piece_mb,
            "files": {str(p.relative_to(partial)): sha256(p) for p in sorted(partial.rglob("*")) if p.is_file()},
        }
        (partial / "job.json").write_text(json.dumps(description, indent=1) + "\n", encoding="utf-8")
        (partial / "README.txt").write_text(
            "Run on the GPU machine (torch with CUDA, numpy, h5py, nltk, tqdm installed):\n\n"
            "    cd <this folder> && python gpu_job.py run\n\n"
            f"It trains for {args.hours:g} hours (the last {args.cooldown_share:.0%} a cool-down), exports, "
            f"and leaves outbox/ (pieces of at most {args.piece_mb:g} MB) to copy back; there:\n\n"
            "    python scripts/gpu_job.py unpack outbox --to data/models/NAME\n", encoding="utf-8")
        total = folder_bytes(partial)
        if total > cap:
            raise JobError(f"the job is {total / MB:.1f} MB, over the {args.max_mb:g} MB cap; lower --corpus-mb")
        partial.rename(job)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    print(f"packed {job}: {total / MB:.1f} MB (cap {args.max_mb:g} MB); corpus {raw / MB:.1f} MB of text "
          f"({n_lines} lines) after {skip} words; run there: cd {job.name} && python gpu_job.py run")
    return 0


# ---- run (on the GPU machine) ------------------------------------------------------------------

def rebuild_start(job: Path, work: Path) -> Path:
    """``start/`` (fp16 weights: scripts/fp16_model.py) -> ``work/start``, an fp32 export that
    ``--init-from`` reads."""
    import numpy as np  # after project_imports (see run)

    from elmo_model.bilm.weights import file_checksum, save_weights
    from elmo_model.training.language_model import load_language_model

    start, target = job / "start", work / "start"
    target.mkdir(parents=True, exist_ok=True)
    lm, _ = load_language_model(start)  # fp32 tensors holding the rounded values
    save_weights(lm.bilm, target / "weights.hdf5")
    softmax = {k: v.detach().numpy() for k, v in lm.softmax.state_dict().items()}
    np.savez_compressed(target / "softmax.npz", cutoffs=np.array(lm.softmax.cutoffs[:-1]),
                        div_value=np.array(lm.softmax.div_value), **softmax)
    shutil.copy(start / "options.json", target / "options.json")
    shutil.copy(start / "vocab.txt", target / "vocab.txt")
    card = (json.loads((start / "model_card.json").read_text(encoding="utf-8"))
            if (start / "model_card.json").is_file() else {})
    card.pop("train_config", None)  # another run's data: --init-from fine-tunes (counters from zero)
    card["weights_sha256"] = file_checksum(target / "weights.hdf5")
    card["note"] = "rounded to fp16 for the transfer to the GPU machine"
    (target / "model_card.json").write_text(json.dumps(card, indent=1) + "\n", encoding="utf-8")
    return target


def decompress(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    with lzma.open(source, "rb") as f, open(target, "wb") as out:
        shutil.copyfileobj(f, out, 1 << 20)


def trainer(argv: list[str], job: Path, code: Path) -> int:
    """``python -m elmo_model.training.train ARGV`` in the job folder with the unpacked code; its exit code."""
    command = [sys.executable, "-m", "elmo_model.training.train", *argv]
    print("$ " + shlex.join(command), flush=True)
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(code), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(command, cwd=job, env=environment).returncode


def run(args: argparse.Namespace) -> int:
    job = Path(args.job).resolve()
    if not (job / "job.json").is_file():
        raise JobError(f"{job}: no job.json (run this inside a folder made by `gpu_job.py pack`)")
    spec = json.loads((job / "job.json").read_text(encoding="utf-8"))
    for name, digest in spec["files"].items():
        if not (job / name).is_file() or sha256(job / name) != digest:
            raise JobError(f"{job / name}: missing or changed in transit (sha256 differs from job.json); copy it again")
    if (job / "outbox" / "manifest.json").is_file():
        print(f"{job / 'outbox'}: already made by an earlier run; copy it back (delete it and work/ to train again)")
        return 0
    hours = args.hours if args.hours is not None else spec["hours"]
    work = job / "work"
    code = work / "code"
    if not code.is_dir():
        extract(job / "code.tar.xz", code)
    project_imports(code)
    for name in ("train", "valid"):
        if not (work / "corpus" / f"{name}.txt").is_file():
            decompress(job / "corpus" / f"{name}.txt.xz", work / "corpus" / f"{name}.txt")
    if not (work / "start" / "weights.hdf5").is_file():
        rebuild_start(job, work)
    argv = spec["train_args"] + ["--init-from", "work/start"]

    # phase 1: a constant rate (resumes where a previous attempt stopped: the run directory is kept)
    constant_hours = hours * (1.0 - spec["cooldown_share"])
    code_1 = trainer(argv + ["--max-hours", f"{constant_hours:.6f}", "--no-export"], job, code)
    if code_1 != 0:
        print(f"error: the training run stopped with exit code {code_1}", file=sys.stderr)
        return code_1
    import torch  # after project_imports: the checkpoint's counters size the cool-down

    progress = torch.load(work / "run" / "checkpoint.pt", map_location="cpu", weights_only=True)["progress"]
    steps, seconds = progress["step"], max(1e-9, progress["train_seconds"])
    cooldown = max(1, round(steps / seconds * max(0.0, hours * 3600 - seconds)))
    print(f"constant rate: {steps} steps in {seconds:.0f} s; cool-down over the next {cooldown} steps", flush=True)
    # phase 2: the cool-down, then the export; a time limit half as long again as the cool-down's
    # expected time (plus 30 s) is the safety net should the steps get slower
    limit = (seconds + 1.5 * cooldown * seconds / max(1, steps) + 30) / 3600
    code_2 = trainer(argv + ["--max-hours", f"{limit:.6f}", "--max-steps", str(steps + cooldown),
                             "--cooldown-steps", str(cooldown), "--export-to", "work/export"], job, code)
    if code_2 != 0:
        print(f"error: the cool-down stopped with exit code {code_2}", file=sys.stderr)
        return code_2
    split(work / "export", job / "outbox", spec["piece_mb"])
    return 0


# ---- the way back ------------------------------------------------------------------------------

def split(export: Path, outbox: Path, piece_mb: float) -> Path:
    """The export -> ``outbox/export.tar.xz.NNN`` (each at most ``piece_mb`` MB) + ``manifest.json``."""
    if not (export / "weights.hdf5").is_file():
        raise JobError(f"{export}: no weights.hdf5 (not an export)")
    shutil.rmtree(outbox, ignore_errors=True)
    outbox.mkdir(parents=True)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:xz", preset=3) as tar:
        for path in sorted(export.iterdir()):
            if path.is_file():
                tar.add(path, arcname=path.name)
    archive = buffer.getvalue()
    size = int(piece_mb * MB)
    pieces = []
    for index, start in enumerate(range(0, len(archive), size)):
        name = f"export.tar.xz.{index:03d}"
        (outbox / name).write_bytes(archive[start : start + size])
        pieces.append({"name": name, "bytes": len(archive[start : start + size]),
                       "sha256": hashlib.sha256(archive[start : start + size]).hexdigest()})
    manifest = {"format": "elmo-gpu-job-outbox", "version": 1, "archive_sha256": hashlib.sha256(archive).hexdigest(),
                "archive_bytes": len(archive), "piece_bytes_max": size, "pieces": pieces,
                "files": {p.name: sha256(p) for p in sorted(export.iterdir()) if p.is_file()}}
    (outbox / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    print(f"outbox {outbox}: {len(pieces)} pieces of at most {piece_mb:g} MB, {len(archive) / MB:.1f} MB in all; "
          "copy the folder back and run `python scripts/gpu_job.py unpack`")
    return outbox


def unpack(args: argparse.Namespace) -> int:
    project_imports(PROJECT)
    from elmo_model.models.registry import load_bilm  # after project_imports

    outbox, target = Path(args.outbox), Path(args.to)
    manifest_path = outbox / "manifest.json"
    if not manifest_path.is_file():
        raise JobError(f"{outbox}: no manifest.json (copy the whole outbox folder back)")
    if target.exists():
        raise JobError(f"--to {target}: already exists; give a new folder")
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    parts = []
    for piece in manifest["pieces"]:
        path = outbox / piece["name"]
        if not path.is_file():
            raise JobError(f"{path}: missing; copy it back ({len(manifest['pieces'])} pieces in all)")
        data = path.read_bytes()
        if len(data) > manifest["piece_bytes_max"]:
            raise JobError(f"{path}: {len(data)} bytes, over the {manifest['piece_bytes_max']}-byte piece size")
        if hashlib.sha256(data).hexdigest() != piece["sha256"]:
            raise JobError(f"{path}: sha256 differs from manifest.json (damaged in transit); copy it again")
        parts.append(data)
    archive = b"".join(parts)
    if hashlib.sha256(archive).hexdigest() != manifest["archive_sha256"]:
        raise JobError(f"{outbox}: the reassembled archive's sha256 differs from manifest.json")
    staging = Path(tempfile.mkdtemp(prefix=target.name + ".", dir=target.parent if target.parent.is_dir() else None))
    try:
        extract(io.BytesIO(archive), staging)
        for name, digest in manifest["files"].items():
            if not (staging / name).is_file() or sha256(staging / name) != digest:
                raise JobError(f"{outbox}: {name} in the archive differs from manifest.json")
        model = load_bilm(staging)  # checks weights.hdf5 against the card's weights_sha256
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(staging), target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    print(f"unpacked {target}: {len(manifest['files'])} files, every sha256 as sent; the model loads "
          f"({sum(p.numel() for p in model.parameters())} encoder parameters)")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gpu_job.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("pack", help="make the job folder (here)")
    p.add_argument("job", help="the folder to create")
    p.add_argument("--model", default=str(PROJECT / "data" / "models" / "elmo-mini"), help="the starting export")
    p.add_argument("--data-root", help="default: $ELMO_WORKBENCH_DATA")
    p.add_argument("--hours", type=float, default=0.5, help="the training budget there, cool-down included")
    p.add_argument("--cooldown-share", type=float, default=0.2, help="the budget's last share that cools down")
    p.add_argument("--device", default="cuda")
    p.add_argument("--batch-tokens", type=int, default=32_000)
    p.add_argument("--log-every", type=int, default=25)
    p.add_argument("--init-warmup-steps", type=int, default=100)
    p.add_argument("--max-mb", type=float, default=60.0, help="the cap on the job folder")
    p.add_argument("--corpus-mb", type=float, help="xz'd training text (default: what the cap leaves)")
    p.add_argument("--valid-mb", type=float, default=0.3, help="xz'd held-out text")
    p.add_argument("--piece-mb", type=float, default=15.0, help="the cap on each piece coming back")
    p.add_argument("--no-skip-seen", dest="skip_seen", action="store_false",
                   help="take the corpus from its start (default: after the words the start model has seen)")
    r = sub.add_parser("run", help="train, cool down, export and split (there, inside the job folder)")
    r.add_argument("job", nargs="?", default=str(Path(__file__).resolve().parent))
    r.add_argument("--hours", type=float, help="override the budget packed in job.json")
    s = sub.add_parser("split", help="an export -> outbox pieces (run does this itself)")
    s.add_argument("export")
    s.add_argument("outbox")
    s.add_argument("--piece-mb", type=float, default=15.0)
    u = sub.add_parser("unpack", help="check and reassemble the outbox (here)")
    u.add_argument("outbox")
    u.add_argument("--to", required=True, help="the model folder to create")
    args = parser.parse_args(argv)
    try:
        if args.command == "pack":
            if not 0 < args.cooldown_share < 1 or args.hours <= 0:
                raise JobError(f"--hours {args.hours:g} --cooldown-share {args.cooldown_share:g}: "
                               "expected hours > 0 and a share between 0 and 1")
            if args.piece_mb <= 0 or args.max_mb <= 0:
                raise JobError("--piece-mb and --max-mb: expected positive sizes")
            return pack(args)
        if args.command == "run":
            return run(args)
        if args.command == "split":
            split(Path(args.export), Path(args.outbox), args.piece_mb)
            return 0
        return unpack(args)
    except (JobError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
