"""One PNG per app page, taken once the page has stopped computing, for docs/app.md.

    python scripts/screenshots.py [--model elmo-mini] [--out docs/screenshots] [--max-kb 150] [--cache DIR]
                                  [--pages syntax probes ...]

Starts ``streamlit run app.py`` on a free port (the data root: ``$ELMO_WORKBENCH_DATA`` or the
app's own rule; activation caches and reports in a temporary folder), opens every page of the
browser test's list in headless Chromium (Debian's ``chromium``: ``bash scripts/install_browser.sh``),
clicks the button that starts a page's work where there is one, waits until the page has stopped
computing and every figure is drawn (the browser test's own checks), then saves the page. Each
PNG is scaled down and reduced to a palette until it is at most ``--max-kb`` KB.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import tempfile
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(PROJECT), str(PROJECT / "tests")]  # the project; the browser test's page list, server and checks

import test_browser as bt  # noqa: E402

from elmo_model.plumbing.progress import TerminalProgress  # noqa: E402

#: The height of the page's content (the tallest scrolling container).
SCROLL_HEIGHT = """() => Math.max(document.documentElement.scrollHeight,
  ...Array.from(document.querySelectorAll('[data-testid="stMain"], [data-testid="stAppViewContainer"], section'))
     .map(e => e.scrollHeight))"""


def compress(png: bytes, max_bytes: int, width: int = 1100, max_height: int = 2600) -> bytes:
    """``png`` scaled to ``width`` px (its top ``max_height`` px kept) and reduced to a palette,
    smaller steps until it fits in ``max_bytes``."""
    from PIL import Image  # lazy: Pillow (installed with Streamlit) is needed only to shrink the PNGs

    image = Image.open(io.BytesIO(png)).convert("RGB")
    for scale, colours in [(1.0, 128), (0.85, 96), (0.75, 64), (0.65, 48), (0.55, 32), (0.45, 24)]:
        w = int(width * scale)
        h = int(image.height * w / image.width)
        small = image.resize((w, h), Image.LANCZOS).crop((0, 0, w, min(h, int(max_height * scale))))
        out = io.BytesIO()
        small.quantize(colors=colours, method=Image.Quantize.MEDIANCUT).save(out, "PNG", optimize=True)
        if out.tell() <= max_bytes:
            break
    return out.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="elmo-mini", help="the biLM the server starts with (default: elmo-mini)")
    parser.add_argument("--out", type=Path, default=PROJECT / "docs" / "screenshots", help="folder of the PNGs")
    parser.add_argument("--max-kb", type=int, default=150, help="largest PNG, in KB (default 150)")
    parser.add_argument("--timeout", type=float, default=900,
                        help="seconds a page may compute before it is given up (default 900: a cold probe run)")
    parser.add_argument("--cache", type=Path, default=None,
                        help="activation cache folder to keep between runs (default: a temporary one)")
    parser.add_argument("--pages", nargs="+", default=None, metavar="PAGE", choices=[p[0] for p in bt.PAGES],
                        help=f"only these pages (default: all: {', '.join(p[0] for p in bt.PAGES)})")
    args = parser.parse_args(argv)
    pages = [p for p in bt.PAGES if args.pages is None or p[0] in args.pages]
    # lazy: only taking the pages needs playwright; --help and argument errors work without it
    from playwright.sync_api import sync_playwright

    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="wb-screens-") as tmp:
        env = {"ELMO_WORKBENCH_CACHE": str(args.cache or Path(tmp) / "cache"),
               "ELMO_WORKBENCH_REPORTS": str(Path(tmp) / "reports")}
        work_ms = int(args.timeout * 1000)
        process, url = bt.start_server(args.model, **env)
        bar = TerminalProgress(leave=True)
        try:
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=bt.chromium_path(), headless=True,
                                                     args=bt.CHROMIUM_ARGS)
                for done, (title, path, _, figure_title, button) in enumerate(pages):
                    bar("pages", done, len(pages), "pages")
                    page = browser.new_page(viewport={"width": 1400, "height": 1000})
                    page.goto(url + path)
                    if button is not None:
                        page.get_by_role("button", name=button).click(timeout=work_ms)
                    if figure_title:
                        bt.wait_for_figure_titled(page, figure_title, work_ms)
                    else:
                        page.wait_for_selector(bt.FIGURE, timeout=work_ms)
                    bt.wait_until_idle(page, work_ms)
                    bt.assert_figures_drawn(page, title)
                    # Streamlit scrolls inside its main container, not the document: a full-page
                    # screenshot is the viewport, so the viewport grows to the content (up to 3,300 px)
                    height = page.evaluate(SCROLL_HEIGHT)
                    page.set_viewport_size({"width": 1400, "height": min(max(1000, height + 40), 3300)})
                    bt.wait_until_idle(page, work_ms)
                    bt.assert_figures_drawn(page, title)
                    png = compress(page.screenshot(), args.max_kb * 1024)
                    target = args.out / f"{title}.png"
                    tmp_png = target.with_suffix(".png.tmp")
                    tmp_png.write_bytes(png)
                    os.replace(tmp_png, target)
                    page.close()
                bar("pages", len(pages), len(pages), "pages")
                browser.close()
        finally:
            bar.close()
            bt.stop_server(process)
    for png in sorted(args.out.glob("*.png")):
        print(f"{png}: {png.stat().st_size / 1024:.0f} KB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
