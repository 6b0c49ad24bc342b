"""A class at once: N visitors open every page of one app server together, in headless Chromium.

    python bench/class_load.py                                   # elmo-mini, 8 visitors, every page
    python bench/class_load.py --visitors 4 --model ../shared/fixtures/bilm_tf
    python bench/class_load.py --visitors 2 --pages              # the playground only

Starts ``streamlit run app.py`` as ``bench/app_timing.py`` does (a free port on 127.0.0.1, ``--model``
as the default biLM, temporary caches and reports, so every page is cold for the first visitor),
then N browser contexts (N sessions: N visitors) in one Chromium, all at once. Each visitor opens
the playground, then every page of ``--pages`` by deep link, one after another, as a student
clicking through the sidebar would; a page counts as visited when its first figure is drawn (the
probes and reports pages start their work on a button: their first paint). The whole tour is the
same for every visitor, so the later ones meet what the first ones' pages computed, as a class
does.

Prints, per visitor: the seconds from the start until its last page was visited, its slowest
page, and the pages that failed (an error box, or no figure within ``--timeout``); then all
visitors' pages and errors together, and the server's peak resident memory (the Streamlit process
and its children, sampled every 0.25 s from /proc). Also the machine (CPU, cores, load average):
absolute times only mean something beside it. Exit code 1 when any page failed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from app_timing import (  # noqa: E402 (the one server and browser set-up of the app benches)
    CHROMIUM_ARGS,
    OTHER_PAGES,
    PAGE_WATCH,
    VIEWPORT,
    BenchError,
    Server,
    chromium_path,
    cpu_model,
    default_data_root,
)


def process_tree_rss(pid: int) -> int:
    """Resident bytes of process ``pid`` and all its descendants (from /proc; 0 once it is gone)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parent = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry))
    total, todo = 0, [pid]
    while todo:
        current = todo.pop()
        try:
            with open(f"/proc/{current}/status") as f:
                total += next((int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:")), 0)
        except OSError:
            pass
        todo.extend(children.get(current, []))
    return total


class MemorySampler(threading.Thread):
    """The peak of :func:`process_tree_rss` of ``pid``, sampled every ``every`` seconds until :meth:`stop`."""

    def __init__(self, pid: int, every: float = 0.25):
        super().__init__(daemon=True)
        self.pid, self.every, self.peak = pid, every, 0
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            self.peak = max(self.peak, process_tree_rss(self.pid))
            self._halt.wait(self.every)

    def stop(self) -> int:
        self._halt.set()
        self.join()
        return self.peak


async def visit_page(context, url: str, want_figure: bool, timeout_s: float) -> tuple[float, str | None]:
    """One deep-link visit in ``context``: (seconds until its first figure, or first paint when
    ``want_figure`` is False; an error text or None)."""
    page = await context.new_page()
    started = time.perf_counter()
    try:
        await page.goto(url, wait_until="commit")
        names = ["sidebar", "title", "figure"] if want_figure else ["sidebar", "title"]
        try:
            await page.wait_for_function(
                "(names) => window.__wb && (window.__wb.error !== null || "
                "names.every(n => n in window.__wb.marks))", arg=names, timeout=timeout_s * 1000)
        except Exception as err:  # playwright's TimeoutError
            if "Timeout" not in type(err).__name__:
                raise
            return time.perf_counter() - started, f"no {'figure' if want_figure else 'page'} within {timeout_s:.0f} s"
        state = await page.evaluate("() => window.__wb")
        return time.perf_counter() - started, state.get("error")
    finally:
        await page.close()


async def visitor(browser, url: str, pages: list[tuple[str, str, bool]], timeout_s: float, start: float) -> dict:
    """One visitor's tour (a browser context of its own: a session of its own)."""
    context = await browser.new_context(viewport=VIEWPORT)
    await context.add_init_script(PAGE_WATCH)
    times, errors = {}, {}
    try:
        for name, path, want_figure in pages:
            seconds, error = await visit_page(context, url + path, want_figure, timeout_s)
            times[name] = seconds
            if error:
                errors[name] = error
    finally:
        await context.close()
    return {"done": time.perf_counter() - start, "times": times, "errors": errors}


async def tour(executable: str, url: str, visitors: int, pages: list, timeout_s: float) -> list[dict]:
    try:
        from playwright.async_api import async_playwright  # lazy: one clear error when it is missing
    except ImportError:
        raise BenchError("the playwright package is missing: pip install -r requirements.txt") from None
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=executable, headless=True, args=CHROMIUM_ARGS)
        try:
            start = time.perf_counter()
            return await asyncio.gather(*(visitor(browser, url, pages, timeout_s, start) for _ in range(visitors)))
        finally:
            await browser.close()


def print_report(results: list[dict], peak: int, args: argparse.Namespace) -> None:
    print(f"\n{'visitor':>7}  {'all pages (s)':>13}  {'slowest page':>22}  errors")
    for i, r in enumerate(results, start=1):
        name, seconds = max(r["times"].items(), key=lambda kv: kv[1])
        slowest = f"{name} {seconds:.1f} s"
        print(f"{i:>7}  {r['done']:>13.1f}  {slowest:>22}  {len(r['errors'])}")
    pages = sum(len(r["times"]) for r in results)
    errors = [f"visitor {i}: {page}: {text}" for i, r in enumerate(results, start=1) for page, text in r["errors"].items()]
    print(f"\n{len(results)} visitors, {pages} page visits, {len(errors)} errors; every visitor done after "
          f"{max(r['done'] for r in results):.1f} s; server peak memory {peak / 2**30:.2f} GiB "
          f"(Streamlit and its children)")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for line in errors:
        print(f"PROBLEM: {line}")


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--visitors", type=int, default=8, help="visitors at once (default: 8, a small class)")
    parser.add_argument("--model", default="elmo-mini", help="the app's default biLM (a name or a folder)")
    parser.add_argument("--data-root", default=default_data_root(), help="the datasets (ELMO_WORKBENCH_DATA)")
    parser.add_argument("--pages", nargs="*", default=[p[0] for p in OTHER_PAGES], choices=[p[0] for p in OTHER_PAGES],
                        help="pages after the playground, in this order (default: all; --pages alone: none)")
    parser.add_argument("--chromium", default=None, help="Chromium binary (default: $CHROMIUM, else chromium on PATH)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds a page may take (default: 600)")
    parser.add_argument("--server-timeout", type=float, default=120.0, help="seconds to wait for the server")
    args = parser.parse_args(argv)
    if args.visitors < 1:
        parser.error(f"--visitors must be at least 1, got {args.visitors}")
    return args


def run(args: argparse.Namespace) -> int:
    executable = chromium_path(args.chromium)
    if not Path(args.data_root).is_dir():
        raise BenchError(f"data root {args.data_root} not found (--data-root or $ELMO_WORKBENCH_DATA)")
    pages = [("playground", "/", True)] + [p for p in OTHER_PAGES if p[0] in args.pages]
    print(f"# bench/class_load.py: {args.visitors} visitors, pages {', '.join(p[0] for p in pages)}, model "
          f"{args.model}\n# machine: {cpu_model()}, {os.cpu_count()} cores, load average before "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    with tempfile.TemporaryDirectory(prefix="class-load-") as tmp:
        tmp = Path(tmp)
        env = dict(os.environ, ELMO_WORKBENCH_MODEL=args.model, ELMO_WORKBENCH_DATA=args.data_root,
                   ELMO_WORKBENCH_CACHE=str(tmp / "cache"), ELMO_WORKBENCH_REPORTS=str(tmp / "reports"))
        env.setdefault("STREAMLIT_BROWSER_GATHER_USAGE_STATS", "false")
        server = Server(env, tmp, args.server_timeout)
        sampler = MemorySampler(server.process.pid)
        sampler.start()
        try:
            results = asyncio.run(tour(executable, server.url, args.visitors, pages, args.timeout))
            if any(r["errors"] for r in results):
                print("\nserver log (end):\n" + server.tail(), flush=True)
        finally:
            peak = sampler.stop()
            server.stop()
    print_report(results, peak, args)
    return 1 if any(r["errors"] for r in results) else 0


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        return run(args)
    except BenchError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
