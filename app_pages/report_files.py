"""The reports folder on the server: which reports there are, their files for a download, a new
folder for each build or comparison, reading an uploaded result, and the disk budget every visitor
shares.

Not a page. Imports nothing heavy.

- **No symbolic links followed**: a folder or file that is a link (it could point anywhere on the
  server) is neither listed nor zipped.
- **One folder a run**: :func:`new_folder` claims the folder with ``mkdir``, so two builds in the
  same second, or two comparisons of uploads with the same names, never write into one folder.
- **Uploads** (:func:`load_upload`): an uploaded results.json is read as a job of the server's
  queue, once per content (the page reads it again at every rerun: those are lookups, never queued).
- **Comparisons**: drawn (:func:`comparison_blocks`, once per pair of contents) and written
  (:func:`write_comparison`) as jobs of the same queue.
- **The disk budget** (``$ELMO_WORKBENCH_REPORTS_BUDGET_MB``, default 2048; 0: none): after each
  build or comparison the oldest folders that are not pinned are removed until the reports and
  comparisons fit (:func:`enforce_budget`); a pin is a ``.pinned`` file in the folder.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import shutil
import tempfile
import zipfile
from pathlib import Path

from app_pages.data_setup import reports_dir
from app_pages.running import cached_result, one_step, run_with_progress

log = logging.getLogger(__name__)

BUDGET_ENV_VAR = "ELMO_WORKBENCH_REPORTS_BUDGET_MB"
DEFAULT_BUDGET_MB = 2048
PIN_FILE = ".pinned"
COMPARISONS = "comparisons"


def real_dir(path: Path) -> bool:
    """A folder that is no symbolic link (a link could point anywhere on the server)."""
    return not path.is_symlink() and path.is_dir()


def real_file(path: Path) -> bool:
    """A file that is no symbolic link."""
    return not path.is_symlink() and path.is_file()


def saved_reports() -> list[Path]:
    """Folders of the reports directory holding a results.json, newest first (links left out)."""
    root = reports_dir()
    if not real_dir(root):
        return []
    found = [p for p in root.iterdir() if real_dir(p) and real_file(p / "results.json")]
    return sorted(found, key=lambda p: ((p / "results.json").stat().st_mtime_ns, p.name), reverse=True)


def folder_files(folder: Path) -> list[Path]:
    """The files under ``folder`` a download may hold: no hidden file, and no symbolic link
    followed (a link to a file or folder elsewhere on the server is left out)."""
    out = []
    for top, dirs, files in os.walk(folder, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and not (Path(top) / d).is_symlink())
        out += [Path(top) / f for f in sorted(files) if not f.startswith(".") and real_file(Path(top) / f)]
    return out


def zip_folder(folder: Path) -> bytes:
    """``folder``'s files (:func:`folder_files`) as a zip archive, under the folder's name."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in folder_files(folder):
            archive.write(path, Path(folder.name) / path.relative_to(folder))
    return buffer.getvalue()


def new_folder(parent: Path, stem: str) -> Path:
    """A new, empty folder ``parent/stem`` (else ``stem-2``, ...), made here: ``mkdir`` claims it, so
    two builds started in the same second never share one."""
    parent.mkdir(parents=True, exist_ok=True)
    for k in range(1, 10_000):
        candidate = parent / (stem if k == 1 else f"{stem}-{k}")
        try:
            candidate.mkdir()
        except FileExistsError:
            continue
        return candidate
    raise ValueError(f"{parent}: 10,000 folders named {stem}; remove old ones")


def load_upload(upload):
    """An uploaded results.json (a report's or a probe suite's): parsed and checked as a job of the
    server's queue (up to 16 MB of JSON, which a class could upload at once), once per content,
    then read from the store: the same file uploaded again, by anyone, is not read twice."""
    data = upload.getvalue()
    return cached_result("upload", upload_digest(upload), f"Reading the uploaded {upload.name}",
                         lambda progress: one_step(progress, "Reading results.json", lambda: _read_results(data)))


def upload_digest(upload) -> str:
    """The sha256 of an uploaded file's content: what names it in the stores (the page reruns often;
    Streamlit keeps the upload's bytes, so the digest is of those)."""
    return hashlib.sha256(upload.getvalue()).hexdigest()


def comparison_blocks(a, b, labels, request: str) -> list:
    """The side-by-side blocks of two results, computed as a job of the server's queue once per
    ``request`` (the two results' contents and the labels), then read from the store."""

    def compare(progress):
        # lazy: probing.report imports torch; only when two results are compared (first paint)
        from probing.report import compare_blocks

        return one_step(progress, "Comparing", lambda: compare_blocks(a, b, labels))

    return cached_result("compare", request, "Comparing the two results", compare)


def write_comparison(a, b, labels, stem: str):
    """The comparison's files (HTML, Markdown, JSON) written into a new folder ``comparisons/stem``
    of the reports folder, as a job of the server's queue: a click while the server is busy waits
    its turn, or is refused in one line. Returns (folder, files); a failure, or a tab closed
    while it writes, leaves no half-written folder."""

    def write(progress):
        # lazy: probing.report imports torch; only when the comparison is written
        from probing.report import compare_reports

        out = new_folder(reports_dir() / "comparisons", stem)
        try:
            return out, one_step(progress, "Writing HTML, Markdown and JSON",
                                 lambda: compare_reports(a, b, out, labels=labels, png=False))
        except BaseException:
            shutil.rmtree(out, ignore_errors=True)
            raise

    return run_with_progress("Writing the comparison", write, kind="compare-write")


def _read_results(data: bytes):
    """``data`` read as a results.json through a temporary file."""
    # lazy: probing.report imports torch; only when a file is uploaded (first paint)
    from probing.report import load_results

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "results.json"
        path.write_bytes(data)
        try:
            return load_results(path)
        except ValueError as err:  # the message names the temporary copy: the visitor knows their upload
            raise ValueError(str(err).removeprefix(f"{path}: ")) from None


# --------------------------------------------------------------------------------------------
# The disk budget
# --------------------------------------------------------------------------------------------


def budget_bytes() -> int | None:
    """The reports' disk budget in bytes (``$ELMO_WORKBENCH_REPORTS_BUDGET_MB``; None: no budget).
    ValueError naming the variable for a value that is no whole number of MB."""
    text = os.environ.get(BUDGET_ENV_VAR, "").strip()
    try:
        mb = int(text) if text else DEFAULT_BUDGET_MB
    except ValueError:
        raise ValueError(f"{BUDGET_ENV_VAR}={text!r}: give a whole number of MB (0: no budget)") from None
    if mb < 0:
        raise ValueError(f"{BUDGET_ENV_VAR}={text!r}: give a whole number of MB (0: no budget)")
    return None if mb == 0 else mb * 1024 * 1024


def folder_size(folder: Path) -> int:
    """Bytes of the files under ``folder`` (links not followed, not counted)."""
    total = 0
    for top, dirs, files in os.walk(folder, followlinks=False):
        for name in files:
            path = Path(top) / name
            try:
                total += 0 if path.is_symlink() else path.stat().st_size
            except OSError:  # removed meanwhile
                pass
    return total


def budgeted_folders(reports: Path | None = None) -> list[Path]:
    """The folders the budget counts: each report folder and each comparison folder (links left
    out), oldest first (by the folder's last change)."""
    reports = reports_dir() if reports is None else reports
    if not real_dir(reports):
        return []
    found = [p for p in reports.iterdir() if real_dir(p) and p.name != COMPARISONS]
    if real_dir(reports / COMPARISONS):
        found += [p for p in (reports / COMPARISONS).iterdir() if real_dir(p)]
    return sorted((p for p in found if is_report_folder(p)), key=lambda p: (p.stat().st_mtime_ns, p.name))


#: What a report or comparison folder holds (``probing.report.write``): nothing else is ever removed
REPORT_FILES = frozenset({"report.html", "report.md", "results.json", "comparison.json", "figures", PIN_FILE})


def is_report_folder(folder: Path) -> bool:
    """Whether ``folder`` holds a report or a comparison and nothing else: a page (``report.html``),
    a results or comparison file, their figures (PNG files only). A folder of the user's own (a
    corpus, notes, a folder a report is being written into) is never counted nor removed."""
    try:
        names = {p.name for p in folder.iterdir()}
        figures = folder / "figures"
        if "figures" in names and not (real_dir(figures) and all(
                f.is_file() and not f.is_symlink() and f.suffix == ".png" for f in figures.iterdir())):
            return False
    except OSError:
        return False
    return names <= REPORT_FILES and "report.html" in names and bool(names & {"results.json", "comparison.json"})


def is_pinned(folder: Path) -> bool:
    """Whether ``folder`` is kept whatever the budget (a ``.pinned`` file in it)."""
    return (folder / PIN_FILE).is_file()


def set_pinned(folder: Path, pinned: bool) -> None:
    """Pin ``folder`` (kept whatever the budget) or unpin it."""
    marker = folder / PIN_FILE
    if pinned:
        marker.touch()
    else:
        marker.unlink(missing_ok=True)


def usage(reports: Path | None = None) -> int:
    """Bytes the reports and comparisons use now."""
    return sum(folder_size(p) for p in budgeted_folders(reports))


def enforce_budget(reports: Path | None = None, budget: int | None = None, keep: tuple[Path, ...] = ()) -> list[str]:
    """Remove the oldest folders that are not pinned (nor in ``keep``: the one just written) until
    the reports and comparisons under ``reports`` use at most ``budget`` bytes (None: the setting's,
    :func:`budget_bytes`). Returns the removed folders' names (relative to ``reports``)."""
    reports = reports_dir() if reports is None else reports
    budget = budget_bytes() if budget is None else budget
    if budget is None:
        return []
    folders = budgeted_folders(reports)
    sizes = {p: folder_size(p) for p in folders}
    total = sum(sizes.values())
    kept = {Path(k).resolve() for k in keep}
    removed = []
    for folder in folders:
        if total <= budget:
            break
        if is_pinned(folder) or folder.resolve() in kept:
            continue
        shutil.rmtree(folder, ignore_errors=True)
        total -= sizes[folder]
        removed.append(str(folder.relative_to(reports)))
        log.info("reports over their disk budget: removed %s (%d bytes)", folder, sizes[folder])
    return removed
