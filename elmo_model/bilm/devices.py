"""Where a biLM runs: ``"cpu"``, ``"cuda"`` or ``"cuda:N"``, checked before any work starts.

The command lines that run a biLM take ``--device`` (``probing.tagging.suite``, ``probing.report``,
``elmo_model.training.train``; the flag itself: ``elmo_model.plumbing.flags``; the embedder keeps AllenNLP's
``--cuda-device N``) and default to the GPU when torch sees one, else the CPU
(:func:`default_device`; the trainer: the CPU). :func:`check_device` turns a request this machine
cannot serve into one ``ValueError`` line (a CLI prints it and exits 2), never a CUDA assertion
deep inside torch. :func:`model_device` is where a loaded model's parameters are.
"""

from __future__ import annotations

import torch


def default_device() -> str:
    """"cuda" when torch sees a GPU, else "cpu"."""
    return "cuda" if torch.cuda.is_available() else "cpu"


def check_device(device: str | torch.device | None, flag: str = "--device", given: object = None) -> torch.device:
    """``device`` (None: :func:`default_device`) as a ``torch.device`` this machine has.
    Raises ``ValueError`` with one line naming ``flag`` and the value as the user gave it
    (``given``, default ``device``) when it asks for a GPU torch does not see (no CUDA, a
    CPU-only build, an index past the last GPU)."""
    if device is None:
        device = default_device()
    label = f"{flag} {device if given is None else given}"
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise ValueError(f"{label}: not a device ({err}); use cpu, cuda or cuda:N") from None
    if resolved.type == "cpu":
        return resolved
    if resolved.type != "cuda":
        raise ValueError(f"{label}: the biLM runs on cpu or cuda")
    if not torch.cuda.is_available():
        instead = f"{flag} -1" if "cuda" in flag else "cpu"
        raise ValueError(f"{label}: torch sees no GPU here (torch.cuda.is_available() is False; "
                         f"torch {torch.__version__}); use {instead}")
    count = torch.cuda.device_count()
    if resolved.index is not None and resolved.index >= count:
        raise ValueError(f"{label}: torch sees {count} GPU{'s' if count != 1 else ''} "
                         f"(cuda:0{f' to cuda:{count - 1}' if count > 1 else ''})")
    return resolved


def cuda_device_to_device(cuda_device: int | str | torch.device | None) -> str:
    """AllenNLP's ``cuda_device`` (-1: the CPU, N >= 0: that GPU) as a device string; a device
    string or ``torch.device`` passes through."""
    if cuda_device is None:
        return "cpu"
    if isinstance(cuda_device, (str, torch.device)):
        return str(cuda_device)
    index = int(cuda_device)
    return "cpu" if index < 0 else f"cuda:{index}"


def model_device(model: torch.nn.Module) -> torch.device:
    """The device of a model's parameters (the CPU for a model without any)."""
    return next((p.device for p in model.parameters()), torch.device("cpu"))
