"""The typed results of the information probes (JSON round-trip): per task, per layer, the online
codelength of the task and its control labels, what each layer adds beyond layer 0, and what the
removal of the task's directions costs the model against a random removal of as many."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from elmo_model.plumbing.io_safety import atomic_write_text
from probing.engine.envelope import JsonDataclass, check_format, from_plain, read_json_object, to_plain
from probing.information.conditional import ConditionalInformation
from probing.information.erasure_comparison import ErasureLayer
from probing.information.mdl import OnlineCode

FORMAT = "elmo-workbench/information-probes"
VERSION = 1


@dataclass(frozen=True)
class LayerCodes(JsonDataclass):
    """One layer's online codes: ``task`` (the real labels), ``control`` (Hewitt & Liang control
    labels of the same tokens; None when not run)."""

    layer: int
    task: OnlineCode
    control: OnlineCode | None


@dataclass(frozen=True)
class AmnesicLayer(JsonDataclass):
    """The task removed from one layer by INLP, and what that costs.

    ``iterations``, ``rank``: probes removed and directions they took; ``dev_accuracies``: the
    INLP probes' dev accuracy before each removal and after the last; ``majority``: always the
    majority label, on dev; ``reached_majority``. ``task_accuracy``: a fresh probe's test
    accuracy on {"original", "amnesic", "random"} vectors (the random control removes ``rank``
    random directions); ``other_tasks``: {task: the same three accuracies}; ``lm``: the
    language model's cross-entropy in bits per prediction, {"original", "amnesic", "random"} ->
    {"forward", "backward", "mean", "n_predictions"} plus "rank": {"forward", "backward"}, for the
    top layer of a model that carries its softmax; None otherwise (``lm_note`` says why)."""

    layer: int
    iterations: int
    rank: int
    dev_accuracies: tuple[float, ...]
    majority: float
    reached_majority: bool
    task_accuracy: dict
    other_tasks: dict = field(default_factory=dict)
    lm: dict | None = None
    lm_note: str = ""

    def closeness(self) -> str:
        """How near INLP's last probe came to the majority level, in words."""
        last = 100 * self.dev_accuracies[-1] if self.dev_accuracies else float("nan")
        state = "reached" if self.reached_majority else "NOT reached"
        return f"{state}: the last probe {last:.1f} on dev, {last - 100 * self.majority:+.1f} points"


@dataclass(frozen=True)
class TaskInformation(JsonDataclass):
    """The three methods on one task: ``codes`` per layer (MDL), ``conditional`` per layer >= 1,
    ``amnesic`` per layer; ``n_tokens`` per split used; ``seconds`` per method."""

    task: str
    n_sentences: dict
    n_tokens: dict
    codes: tuple[LayerCodes, ...] = ()
    conditional: tuple[ConditionalInformation, ...] = ()
    amnesic: tuple[AmnesicLayer, ...] = ()
    seconds: dict = field(default_factory=dict)
    erasure: tuple[ErasureLayer, ...] = ()


@dataclass(frozen=True)
class InformationResult:
    """One model's information probes: ``tasks``; the run's ``config`` (an ``InformationConfig``
    as a dict, with the layers); ``model_name``, ``model_identity``; ``seconds`` per stage and in
    all; ``created`` (UTC, ISO 8601); ``versions`` of the libraries."""

    model_name: str
    model_identity: str
    tasks: tuple[TaskInformation, ...]
    config: dict
    seconds: dict
    created: str
    versions: dict

    def task(self, name: str) -> TaskInformation:
        """The result of one task; KeyError naming the tasks there are."""
        for task in self.tasks:
            if task.task == name:
                return task
        raise KeyError(f"no task {name!r} in these results (there are: {', '.join(t.task for t in self.tasks)})")

    def table(self) -> str:
        """The per-layer figures as plain text: codelengths in kbits, information in bits per token,
        accuracies x100."""
        lines = [f"{self.model_name} ({self.model_identity[:12]})"]
        for t in self.tasks:
            lines.append(f"{t.task}: {t.n_tokens.get('train', 0)} training tokens, {t.n_tokens.get('test', 0)} test")
            for c in t.codes:
                control = "" if c.control is None else \
                    f"; control {c.control.online_bits / 1000:.1f} kbits ({c.control.compression:.2f}x)"
                lines.append(f"  MDL layer {c.layer}: {c.task.online_bits / 1000:.1f} kbits "
                             f"(uniform {c.task.uniform_bits / 1000:.1f}, {c.task.compression:.2f}x){control}")
            for c in t.conditional:
                ci = c.conditional
                lines.append(f"  layer {c.layer} beyond layer {c.baseline_layer}: {ci.estimate:.3f} bits/token "
                             f"[{ci.low:.3f}, {ci.high:.3f}] (layer alone {c.layer_information:.3f}, "
                             f"layer {c.baseline_layer} alone {c.baseline_information:.3f}, "
                             f"H(Y) {c.label_entropy:.3f})")
            for a in t.amnesic:
                acc = a.task_accuracy
                lines.append(f"  amnesic layer {a.layer}: {a.rank} directions in {a.iterations} iterations "
                             f"(majority {100 * a.majority:.1f} on dev, {a.closeness()}); "
                             f"{t.task} {100 * acc['original']:.1f} -> {100 * acc['amnesic']:.1f} "
                             f"(random {100 * acc['random']:.1f})")
                for other, o in a.other_tasks.items():
                    lines.append(f"    {other}: {100 * o['original']:.1f} -> {100 * o['amnesic']:.1f} "
                                 f"(random {100 * o['random']:.1f})")
                if a.lm is not None:
                    lm = a.lm
                    lines.append(f"    LM cross-entropy, bits/prediction: {lm['original']['mean']:.3f} -> "
                                 f"{lm['amnesic']['mean']:.3f} (random {lm['random']['mean']:.3f}; ranks "
                                 f"{lm['rank']['forward']} forward, {lm['rank']['backward']} backward)")
                elif a.lm_note and a.layer == max(x.layer for x in t.amnesic):
                    lines.append(f"    LM: {a.lm_note}")
            for e in t.erasure:
                lines += e.lines(t.task)
        lines.append(f"{self.seconds.get('total', 0.0):.0f} s in all")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        """A JSON-ready dict, tagged with the format and its version."""
        return {"format": FORMAT, "version": VERSION, **to_plain(self)}

    @classmethod
    def from_dict(cls, data: Mapping) -> "InformationResult":
        """The inverse of ``to_dict``; ValueError for another format or version."""
        check_format(data, FORMAT, VERSION, "information-probes result")
        return from_plain(cls, data)

    def to_json(self, path: str | Path | None = None) -> str:
        """The JSON text; with ``path``, also written there atomically (temp file + rename)."""
        text = json.dumps(self.to_dict(), indent=1, ensure_ascii=False) + "\n"
        if path is not None:
            atomic_write_text(Path(path), text)
        return text

    @classmethod
    def from_json(cls, text_or_path: str | Path) -> "InformationResult":
        """Read what ``to_json`` wrote (a path or the JSON text)."""
        return cls.from_dict(read_json_object(text_or_path, "information-probes result"))


__all__ = ["FORMAT", "VERSION", "AmnesicLayer", "InformationResult", "LayerCodes", "TaskInformation"]
