"""kill -9 at random instants, resume, compare with an uninterrupted run.

    python bench/kill_resume.py --instants 20                 # each job, 20 random instants
    python bench/kill_resume.py --instants 3 --jobs embed     # a quick look at one job
    python bench/kill_resume.py --instants 1 --jobs activations --sentences 40   # a quick check

Three jobs, each run as a user runs it, in a child process, on bilm-tf's fixture model
(``<data root>/fixtures/bilm_tf``) and the tiny trainer settings of the tests:

- ``embed``: ``python -m elmo_model.corpus.embedder`` on 400 UD English-EWT dev sentences (``--sentences``), batch 4,
  stateless and ``--stateful`` on alternate instants;
- ``activations``: ``probing.engine.activations.extract_activations`` of the same sentences, batch 2,
  stateless and stateful on alternate instants;
- ``train``: ``python -m elmo_model.training.train`` on 240 paragraphs of the LM corpus for 60 steps (``--steps``) with
  a checkpoint after every step.

For each job: one uninterrupted run gives the reference and T, the seconds it works with its
unfinished file on disk (the embedder's ``.partial``, the cache's ``.partial``, the trainer's
``checkpoint.pt``: start-up before that leaves nothing to resume). Then, for every instant, a fresh
run is started, and once its unfinished file exists it is killed with SIGKILL after a delay drawn
uniformly from (0, T); the same command is run again to the end, and its result must equal the reference bit for bit (every
embedding dataset and ``sentence_to_index``; every cached activation; the final weights and
the logged loss curve). Prints one line per instant (delay, whether the kill hit unfinished work,
equal or not) and a summary per job; exits 1 if any result differs. ``--seed`` fixes the instants.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import h5py
import numpy as np
import torch

PROJECT = Path(__file__).resolve().parents[1]
if str(PROJECT) not in sys.path:
    sys.path.insert(0, str(PROJECT))

from elmo_model import load_bilm  # noqa: E402
from probing.engine.activations import extract_activations, open_cache  # noqa: E402

N_SENTENCES = 400
TRAIN_STEPS = 60


def data_root() -> Path:
    env = os.environ.get("ELMO_WORKBENCH_DATA", "").strip()
    return Path(env) if env else PROJECT.parent / "shared"


def ud_sentences(n: int) -> list[list[str]]:
    sentences, tokens = [], []
    with open(data_root() / "ud_english_ewt" / "en_ewt-ud-dev.conllu", encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                if tokens:
                    sentences.append(tokens[:40])
                    tokens = []
                    if len(sentences) >= n:
                        break
            elif not line.startswith("#") and line.split("\t")[0].isdigit():
                tokens.append(line.split("\t")[1])
    return sentences


# --------------------------------------------------------------------------------------------
# Jobs: (command for a work directory, result reader, "unfinished work present?")
# --------------------------------------------------------------------------------------------


class Job:
    name = ""

    def __init__(self, work: Path, variant: int) -> None:
        self.work, self.variant = work, variant

    def command(self) -> list[str]:
        raise NotImplementedError

    def result(self) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def unfinished(self) -> bool:
        raise NotImplementedError


class EmbedJob(Job):
    name = "embed"

    def command(self) -> list[str]:
        text = self.work / "in.txt"
        if not text.exists():
            text.write_text("".join(" ".join(s) + "\n" for s in ud_sentences(N_SENTENCES)), encoding="utf-8")
        return [sys.executable, "-m", "elmo_model.corpus.embedder", str(text), str(self.work / "out.hdf5"), "--model",
                str(data_root() / "fixtures" / "bilm_tf"), "--batch-size", "4"] + (["--stateful"] if self.variant else [])

    def result(self) -> dict[str, np.ndarray]:
        with h5py.File(self.work / "out.hdf5", "r") as f:
            return {k: (np.array(json.loads(f[k][()])) if k == "sentence_to_index" else f[k][()]) for k in f}

    def unfinished(self) -> bool:
        return (self.work / "out.hdf5.partial").exists()


class ActivationsJob(Job):
    name = "activations"

    def command(self) -> list[str]:
        return [sys.executable, str(Path(__file__).resolve()), "_extract", str(self.work / "cache"), str(self.variant),
                str(N_SENTENCES)]

    def _cache_file(self, suffix: str = "") -> list[Path]:
        return sorted((self.work / "cache").glob(f"*/*.h5{suffix}"))

    def result(self) -> dict[str, np.ndarray]:
        (path,) = self._cache_file()
        with open_cache(path) as cache:
            return {"activations": np.stack([cache.layer(j) for j in range(cache.n_layers)]),
                    "offsets": np.asarray(cache.offsets)}

    def unfinished(self) -> bool:
        return bool(self._cache_file(".partial"))


class TrainJob(Job):
    name = "train"

    def command(self) -> list[str]:
        corpus = self.work / "text.txt"
        if not corpus.exists():
            with gzip.open(data_root() / "lm_corpus" / "wiki-valid.txt.gz", "rt", encoding="utf-8") as f:
                corpus.write_text("".join(next(f) for _ in range(240)), encoding="utf-8")
        return [sys.executable, "-m", "elmo_model.training.train", "--train", str(corpus),
                "--out", str(self.work / "run"),
                "--vocab-size", "500", "--vocab-min-count", "1", "--char-embedding-dim", "4",
                "--filters", "[[1, 8], [2, 8]]", "--n-highway", "1", "--lstm-dim", "16", "--projection-dim", "8",
                "--softmax-cutoffs", "100", "--batch-tokens", "200", "--max-sentence-tokens", "20",
                "--log-every", "7", "--threads", "1", "--max-steps", str(TRAIN_STEPS),
                "--checkpoint-every-minutes", "0", "--validate-every-minutes", "1e9", "--no-export"]

    def result(self) -> dict[str, np.ndarray]:
        saved = torch.load(self.work / "run" / "checkpoint.pt", map_location="cpu", weights_only=True)
        out = {f"model/{k}": v.numpy() for k, v in saved["model"].items()}
        out["loss_curve"] = np.array([(p["step"], p["loss"]) for p in saved["progress"]["loss_curve"]])
        out["step"] = np.array(saved["progress"]["step"])
        return out

    def unfinished(self) -> bool:
        return (self.work / "run" / "checkpoint.pt").exists()


JOBS = {job.name: job for job in (EmbedJob, ActivationsJob, TrainJob)}


def _extract(cache_dir: str, stateful: str, n_sentences: str) -> None:
    """The activation job's child: one extraction into ``cache_dir``."""
    model = load_bilm(data_root() / "fixtures" / "bilm_tf")
    extract_activations(model, ud_sentences(int(n_sentences)), "ud_english_ewt", "dev", cache_dir=cache_dir,
                        stateful=bool(int(stateful)), batch_size=2)


# --------------------------------------------------------------------------------------------
# Runs
# --------------------------------------------------------------------------------------------


def _env() -> dict[str, str]:
    env = dict(os.environ, OMP_NUM_THREADS="1", ELMO_WORKBENCH_DATA=str(data_root()))
    env["PYTHONPATH"] = str(PROJECT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def _start(job: Job) -> subprocess.Popen:
    return subprocess.Popen(job.command(), cwd=PROJECT, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)


def _wait_for_work(job: Job, process: subprocess.Popen) -> float:
    """Poll until the job's unfinished file appears (or the process ends); seconds waited."""
    start = time.perf_counter()
    while process.poll() is None and not job.unfinished():
        time.sleep(0.01)
    return time.perf_counter() - start


def _finish(job: Job, process: subprocess.Popen) -> None:
    _, err = process.communicate()
    if process.returncode != 0:
        raise RuntimeError(f"{job.name} failed ({process.returncode}): {err[-2000:]}")


def run_reference(job: Job) -> tuple[float, float]:
    """An uninterrupted run: (seconds until its unfinished file appeared, seconds of work after that)."""
    start = time.perf_counter()
    process = _start(job)
    before = _wait_for_work(job, process)
    _finish(job, process)
    return before, time.perf_counter() - start - before


def run_to_end(job: Job) -> None:
    _finish(job, _start(job))


def run_and_kill(job: Job, delay: float) -> bool:
    """Start the job, wait until its work is under way (its unfinished file exists), SIGKILL it
    ``delay`` s later if it is still running; whether it was killed."""
    process = _start(job)
    _wait_for_work(job, process)
    try:
        process.wait(timeout=delay)
        return False
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGKILL)
        process.wait()
        return True


def same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    return sorted(a) == sorted(b) and all(np.array_equal(a[k], b[k]) for k in a)


def kill_and_resume(name: str, instants: int, seed: int, work: Path, log=print, variants: tuple[int, ...] | None = None,
                    latest: float = 1.0) -> dict:
    """The figure for one job: ``instants`` kills at random delays, each resumed and compared.
    ``variants``: 0 stateless, 1 stateful (embed, activations); default both, in turn.
    ``latest``: delays are drawn from (0, latest x T)."""
    job_class = JOBS[name]
    rng = random.Random(f"{seed}:{name}")
    references, durations = {}, {}
    for variant in variants or ((0, 1) if name != "train" else (0,)):
        reference = job_class(work / f"{name}-reference-{variant}", variant)
        reference.work.mkdir(parents=True)
        before, durations[variant] = run_reference(reference)
        references[variant] = reference.result()
        log(f"{name} (variant {variant}): uninterrupted run: start-up {before:.1f} s, then {durations[variant]:.1f} s "
            "of work with its unfinished file on disk")
    rows = []
    for i in range(instants):
        variant = list(references)[i % len(references)]
        job = job_class(work / f"{name}-{i}", variant)
        job.work.mkdir(parents=True)
        delay = rng.uniform(0.0, latest * durations[variant])
        killed = run_and_kill(job, delay)
        mid_work = killed and job.unfinished()
        run_to_end(job)
        equal = same(job.result(), references[variant])
        rows.append({"delay": delay, "killed": killed, "mid_work": mid_work, "equal": equal})
        log(f"{name} #{i + 1:2d} variant {variant}: kill {delay:5.2f} s into {durations[variant]:.1f} s of work: "
            f"{'killed' if killed else 'had finished'}{', unfinished work left' if mid_work else ''}; "
            f"resumed result {'EQUAL' if equal else 'DIFFERS'}")
        shutil.rmtree(job.work, ignore_errors=True)
    return {"job": name, "instants": instants, "killed": sum(r["killed"] for r in rows),
            "mid_work": sum(r["mid_work"] for r in rows), "equal": sum(r["equal"] for r in rows), "rows": rows}


def main(argv: list[str] | None = None) -> int:
    global N_SENTENCES, TRAIN_STEPS  # --sentences and --steps: what the jobs' commands read
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["_extract"]:
        _extract(*argv[1:])
        return 0
    parser = argparse.ArgumentParser(prog="python bench/kill_resume.py", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--instants", type=int, default=20, help="random kill instants per job (default: %(default)s)")
    parser.add_argument("--jobs", nargs="+", choices=sorted(JOBS), default=["embed", "activations", "train"])
    parser.add_argument("--seed", type=int, default=0, help="seed of the kill instants (default: %(default)s)")
    parser.add_argument("--sentences", type=int, default=N_SENTENCES,
                        help="EWT dev sentences of the embed and activations jobs (default: %(default)s)")
    parser.add_argument("--steps", type=int, default=TRAIN_STEPS, help="steps of the train job (default: %(default)s)")
    parser.add_argument("--latest", type=float, default=1.0,
                        help="draw the kill delays from (0, LATEST x T): below 1 when the uninterrupted run was "
                             "slowed by other load, so that the kills still find work (default: %(default)s)")
    args = parser.parse_args(argv)
    if args.instants < 1 or args.sentences < 1 or args.steps < 1:
        parser.error("--instants, --sentences and --steps must be at least 1")
    N_SENTENCES, TRAIN_STEPS = args.sentences, args.steps

    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, "
          f"{time.strftime('%Y-%m-%d')}", flush=True)
    failed = False
    with tempfile.TemporaryDirectory(prefix="kill-resume-") as tmp:
        for name in args.jobs:
            summary = kill_and_resume(name, args.instants, args.seed, Path(tmp), lambda line: print(line, flush=True),
                                      latest=args.latest)
            print(f"== {name}: {summary['instants']} instants, {summary['killed']} killed "
                  f"({summary['mid_work']} with unfinished work on disk), {summary['equal']} resumed results equal "
                  "the uninterrupted run", flush=True)
            failed |= summary["equal"] != summary["instants"]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
