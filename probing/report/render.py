"""Rendering a report's blocks: one self-contained HTML page (:func:`render_html`), Markdown
(:func:`render_markdown`) and PNG figures through kaleido and Chromium (:func:`export_pngs`).
plotly and kaleido (the ``[report]`` extra) are imported by the functions that draw."""

from __future__ import annotations

import html
import importlib.metadata as metadata
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Mapping, Sequence

from elmo_model.plumbing import io_safety
from elmo_model.plumbing.extras import install_hint
from probing.report.elements import ReportFigure, _Code, _Heading, _Notes, _Table, _Text
from probing.report.config import PNG_WIDTH

_CSS = """
:root { color-scheme: light dark; --fg: #1f2328; --bg: #ffffff; --muted: #59636e; --border: #d1d9e0;
        --stripe: #f6f8fa; --accent: #0969da; }
@media (prefers-color-scheme: dark) {
  :root { --fg: #e6edf3; --bg: #0d1117; --muted: #9198a1; --border: #3d444d; --stripe: #151b23; --accent: #4493f8; }
}
html { background: var(--bg); color: var(--fg); }
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
       max-width: 1200px; margin: 0 auto; padding: 24px 28px 64px; }
h1 { font-size: 1.7em; margin-bottom: 0.2em; } h2 { border-bottom: 1px solid var(--border); padding-bottom: 0.2em;
     margin-top: 2em; } h3 { margin-top: 1.5em; }
pre { overflow-x: auto; background: var(--stripe); padding: 8px; }
a { color: var(--accent); } .muted, caption, figcaption { color: var(--muted); }
nav ul { columns: 2; padding-left: 1.2em; }
table { border-collapse: collapse; margin: 0.8em 0 1.2em; font-size: 0.88em; display: block; overflow-x: auto; }
th, td { border: 1px solid var(--border); padding: 4px 8px; vertical-align: top; }
th { background: var(--stripe); text-align: left; } td.num { text-align: right; font-variant-numeric: tabular-nums;
     white-space: nowrap; }
tbody tr:nth-child(even) { background: var(--stripe); }
caption { caption-side: bottom; text-align: left; padding-top: 4px; font-size: 0.95em; }
figure { margin: 1em 0 1.6em; } figcaption { font-size: 0.92em; margin-top: 4px; }
.plot { width: 100%; }
"""

_THEME_SCRIPT = """
(function () {
  var query = window.matchMedia ? window.matchMedia('(prefers-color-scheme: dark)') : null;
  function apply() {
    var dark = query && query.matches;
    var update = {'font.color': dark ? '%(dark)s' : '%(light)s',
                  'modebar.color': dark ? 'rgba(230, 237, 243, 0.5)' : 'rgba(31, 35, 40, 0.4)',
                  'modebar.activecolor': dark ? '#e6edf3' : '#1f2328'};
    document.querySelectorAll('.js-plotly-plot').forEach(function (div) { Plotly.relayout(div, update); });
  }
  apply();
  window.addEventListener('load', apply);
  if (query && query.addEventListener) { query.addEventListener('change', apply); }
})();
"""


def _html_inline(text: str) -> str:
    return re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", html.escape(text))


def render_html(blocks: Sequence, title: str, subtitle: str = "") -> str:
    """A self-contained HTML page: plotly.js inlined once, every figure as a div + script."""
    import plotly.io as pio  # plotly: the [report] extra, imported when a page is drawn
    from plotly.offline import get_plotlyjs

    from probing.figures import THEMES

    headings = [b for b in blocks if isinstance(b, _Heading) and b.level == 2]
    body: list[str] = [f"<h1>{html.escape(title)}</h1>"]
    if subtitle:
        body.append(f'<p class="muted">{html.escape(subtitle)}</p>')
    if headings:
        body.append("<nav><ul>" + "".join(f'<li><a href="#{h.anchor}">{html.escape(h.text)}</a></li>'
                                            for h in headings) + "</ul></nav>")
    seen: set[str] = set()
    for block in blocks:
        if isinstance(block, _Heading):
            body.append(f'<h{block.level} id="{block.anchor}">{html.escape(block.text)}</h{block.level}>')
        elif isinstance(block, _Text):
            body.append(f"<p>{_html_inline(block.text)}</p>")
        elif isinstance(block, _Code):
            body.append(f"<pre><code>{html.escape(block.code)}</code></pre>")
        elif isinstance(block, _Notes):
            body.append("<ul>" + "".join(f"<li>{_html_inline(n)}</li>" for n in block.items) + "</ul>")
        elif isinstance(block, _Table):
            numeric = block.numeric or [False] * len(block.headers)
            head = ("<thead><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in block.headers) + "</tr></thead>"
                    if any(block.headers) else "")
            rows = "".join("<tr>" + "".join(
                f'<td{" class=num" if k < len(numeric) and numeric[k] else ""}>{_html_inline(c)}</td>'
                for k, c in enumerate(row)) + "</tr>" for row in block.rows)
            caption = f"<caption>{_html_inline(block.caption)}</caption>" if block.caption else ""
            body.append(f"<table>{caption}{head}<tbody>{rows}</tbody></table>")
        elif isinstance(block, ReportFigure):
            div_id = f"fig-{block.name}"
            if div_id in seen:
                raise ValueError(f"two figures named {block.name!r}")
            seen.add(div_id)
            snippet = pio.to_html(block.figure, full_html=False, include_plotlyjs=False, div_id=div_id,
                                  config={"displaylogo": False, "responsive": True,
                                          "toImageButtonOptions": {"format": "png", "filename": block.name,
                                                                   "scale": 2}})
            caption = f"<figcaption>{_html_inline(block.caption)}</figcaption>" if block.caption else ""
            body.append(f'<figure class="plot">{snippet}{caption}</figure>')
    script = _THEME_SCRIPT % {"dark": THEMES["dark"]["font"], "light": THEMES["light"]["font"]}
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            "<meta name=\"color-scheme\" content=\"light dark\">\n"
            f"<title>{html.escape(title)}</title>\n<style>{_CSS}</style>\n"
            "<script type=\"text/javascript\">/* plotly.js, inlined so that this page works offline */\n"
            f"{get_plotlyjs()}\n</script>\n</head>\n<body>\n" + "\n".join(body)
            + f"\n<script type=\"text/javascript\">{script}</script>\n</body>\n</html>\n")


_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|])")


def _md_text(text: str) -> str:
    """``text`` with Markdown's special characters escaped, except the ``**bold**`` markup
    (SemCor sentences hold ``` `` ``` quotes, which Markdown would read as code)."""
    return "**".join(_MD_SPECIAL.sub(r"\\\1", part) for part in str(text).split("**"))


def _md_cell(text: str) -> str:
    return _md_text(text).replace("\n", " ")


def render_markdown(blocks: Sequence, title: str, subtitle: str = "",
                    figure_paths: Mapping[str, str] | None = None) -> str:
    """The report as Markdown: tables, and each figure as an image link to its PNG (relative
    path from ``figure_paths``) or, without one, a pointer to report.html."""
    lines = [f"# {_md_text(title)}", ""]
    if subtitle:
        lines += [_md_text(subtitle), ""]
    for block in blocks:
        if isinstance(block, _Heading):
            lines += ["#" * block.level + " " + _md_text(block.text), ""]
        elif isinstance(block, _Text):
            lines += [_md_text(block.text), ""]
        elif isinstance(block, _Code):
            fence = "`" * max(3, 1 + max((len(run) for run in re.findall(r"`+", block.code)), default=0))
            lines += [f"{fence}sh", block.code, fence, ""]
        elif isinstance(block, _Notes):
            lines += [f"- {_md_text(n)}" for n in block.items] + [""]
        elif isinstance(block, _Table):
            numeric = block.numeric or [False] * len(block.headers)
            headers = [_md_cell(h) or " " for h in block.headers]
            lines.append("| " + " | ".join(headers) + " |")
            lines.append("|" + "|".join("---:" if k < len(numeric) and numeric[k] else "---"
                                        for k in range(len(headers))) + "|")
            lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in block.rows]
            if block.caption:
                lines += ["", f"*{_md_cell(block.caption)}*"]
            lines.append("")
        elif isinstance(block, ReportFigure):
            path = (figure_paths or {}).get(block.name)
            if path:
                lines += [f"![{_md_text(block.title)}]({path})", ""]
            else:
                lines += [f"*Figure “{_md_text(block.title)}”: interactive in report.html.*", ""]
            if block.caption:
                lines += [f"*{_md_text(block.caption)}*", ""]
    return "\n".join(lines).rstrip() + "\n"


# --------------------------------------------------------------------------------------------
# PNG export
# --------------------------------------------------------------------------------------------


def chromium_path() -> str | None:
    """The Chromium kaleido drives: ``$BROWSER_PATH``, else ``chromium`` / ``google-chrome`` on PATH."""
    env = os.environ.get("BROWSER_PATH")
    if env:
        return env
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


def require_png_renderer() -> tuple[str, str]:
    """(kaleido version, Chromium path) for the PNG figures; RuntimeError naming the fix when
    either is missing. ``build_report`` asks before its long work, not after it."""
    try:
        import kaleido  # noqa: F401  (optional: only the PNG figures need it; its absence is reported)
        version = metadata.version("kaleido")
    except ImportError as err:
        raise RuntimeError(f"PNG figures need kaleido ({err}): {install_hint('report', ['kaleido'])}; "
                           "or pass --no-png") from None
    browser = chromium_path()
    if browser is None:
        raise RuntimeError("PNG figures need Chromium: run `bash scripts/install_browser.sh` (Debian's chromium), "
                           "or set $BROWSER_PATH to a Chrome/Chromium binary, or pass --no-png")
    return version, browser


def export_pngs(figures: Sequence[ReportFigure], folder: str | os.PathLike,
                width: int = PNG_WIDTH) -> tuple[dict[str, Path], str]:
    """Write each figure as ``<folder>/<name>.png`` on a white background (``themed(fig,
    "light")``) in one headless-Chromium session through kaleido, MathJax off (no network).
    Files appear only complete (rendered into a temporary folder, then renamed). Returns
    ({name: path}, a description of the renderer). RuntimeError naming the fix when kaleido
    or Chromium is missing or rendering fails."""
    folder = Path(folder)
    if not figures:
        return {}, "none"
    version, browser = require_png_renderer()
    import kaleido  # optional, checked just above: only the PNG figures need it

    from probing.figures import themed
    folder.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".png-", dir=folder))
    try:
        specs = []
        for f in figures:
            fig = themed(f.figure, "light")
            height = int(fig.layout.height or 450)
            specs.append({"fig": fig.to_dict(), "path": staging / f"{f.name}.png",
                          "opts": {"format": "png", "width": width, "height": height, "scale": 1}})
        try:
            kaleido.write_fig_from_object_sync(specs, kopts={"mathjax": False, "path": browser},
                                               cancel_on_error=True)
        except Exception as err:  # kaleido raises its own and choreographer's errors
            raise RuntimeError(f"rendering PNG figures with kaleido {version} and {browser} failed: {err!r}; "
                               "pass --no-png to write the report without them") from err
        out = {}
        for f in figures:
            made = staging / f"{f.name}.png"
            if not made.is_file() or made.stat().st_size == 0:
                raise RuntimeError(f"kaleido wrote no PNG for figure {f.name!r}")
            target = folder / f"{f.name}.png"
            io_safety.atomic_write_bytes(target, made.read_bytes())
            out[f.name] = target
        return out, f"kaleido {version} + {browser}"
    finally:
        shutil.rmtree(staging, ignore_errors=True)
