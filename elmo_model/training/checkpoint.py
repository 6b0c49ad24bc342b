"""The run's ``checkpoint.pt``: written atomically; a failed write, or a damaged file, as one line.

``write_checkpoint`` saves through a temporary file beside it (``io_safety.atomic_output``): a
write that fails (a full disk, a file-size limit, an I/O error: torch's zip writer says
"unexpected pos 704 vs 598") leaves the previous checkpoint as it was, and the error names the
folder and that checkpoint. ``damaged_checkpoint`` is the line for one that cannot be read back.
"""

from __future__ import annotations

from pathlib import Path

import torch

from ..plumbing.io_safety import DISK_FULL_ERRNOS, atomic_output, disk_full


def write_checkpoint(payload: dict, path: Path, kept_step: int | None) -> None:
    """``torch.save(payload)`` into ``path`` atomically. ``kept_step``: the step of the checkpoint
    already there (None: none yet), for the message. A failed write raises ``ValueError`` (one
    line: ``io_safety.DiskFull`` for a full disk), and the file already there is untouched."""
    try:
        with atomic_output(path) as tmp, open(tmp, "wb") as handle:  # torch writes through our file:
            torch.save(payload, handle)  # the OSError under its RuntimeError stays visible
    except (OSError, RuntimeError) as err:
        kept = (f"the previous checkpoint {path} (step {kept_step}) is kept" if kept_step is not None
                and path.is_file() else f"no checkpoint was written into {path.parent} before this one")
        cause = err if isinstance(err, OSError) else err.__context__
        if isinstance(cause, OSError) and cause.errno in DISK_FULL_ERRNOS:
            raise disk_full(path.parent, cause, kept) from None
        detail = str(cause if isinstance(cause, OSError) else err).strip().splitlines()
        raise ValueError(f"{path.parent}: the checkpoint could not be written ({type(err).__name__}: "
                         f"{detail[0][:200] if detail else 'no detail'}; a full disk or a failing one); {kept}; "
                         "free some space or check the disk, then rerun the same command to go on") from None


def damaged_checkpoint(path: Path, err: BaseException) -> ValueError:
    """The one line for a checkpoint ``path`` that cannot be resumed from (``err``: what torch or
    the model raised reading it), with the way on: ``--init-from`` the run's last export when there
    is one, else starting over."""
    export = path.parent / "model"
    recover = (f"rerun with --init-from {export} to continue from the last export"
               if (export / "weights.hdf5").is_file() else "rerun to start over")
    return ValueError(f"{path}: damaged, cannot resume from it ({type(err).__name__}: "
                      f"{str(err).splitlines()[0][:200] if str(err) else 'no detail'}); move it away, then {recover}")
