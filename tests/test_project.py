"""The project as a newcomer meets it: the README's commands are what CI runs."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    head = text.split("## Layout")[0]
    return re.findall(r"```bash\n(.+?)\n```", head)


def test_readme_starts_with_the_two_commands():
    app, tests = readme_commands()[:2]
    assert "pip install -r requirements.txt" in app and app.endswith("streamlit run app.py")
    assert "requirements-cluster" not in app  # the app's set-up stays fast: no Ray
    assert "pip install -r requirements.txt -r requirements-cluster.txt" in tests and "pytest" in tests


def test_ci_runs_exactly_the_readme_test_command():
    test_command = readme_commands()[1]
    ci_lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert test_command in ci_lines


def test_torch_stays_pinned_to_the_cpu_build():
    requirements = (ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines()
    assert "torch==2.13.0" in requirements
    assert all("==" in line for line in requirements if line and not line.startswith("#"))


def test_cluster_requirements_are_pinned_and_separate():
    cluster = (ROOT / "requirements-cluster.txt").read_text(encoding="utf-8").splitlines()
    pinned = [line for line in cluster if line and not line.startswith("#")]
    assert pinned and all("==" in line for line in pinned)
    assert any(line.startswith("ray==") for line in pinned)
    assert not any(line.startswith("ray") for line in (ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines())


def _markdown_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _links(text: str) -> list[str]:
    """Targets of markdown links and images, outside fenced code blocks."""
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    return re.findall(r"!?\[[^\]]*\]\(([^)\s]+)\)", prose)


def _anchors(path: Path) -> set[str]:
    """GitHub's heading anchors of a markdown file: lower case, punctuation dropped, spaces -> '-'."""
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    headings = re.findall(r"^#+\s+(.+?)\s*$", text, flags=re.M)
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings}


def test_every_relative_link_in_the_docs_resolves():
    checked, broken = 0, []
    for source in _markdown_files():
        for target in _links(source.read_text(encoding="utf-8")):
            if re.match(r"[a-z]+:", target):  # http(s):, mailto: ...
                continue
            file_part, _, anchor = target.partition("#")
            resolved = (source.parent / file_part).resolve() if file_part else source
            checked += 1
            if not resolved.is_file() or ROOT not in resolved.parents:
                broken.append(f"{source.relative_to(ROOT)}: {target} (no such file in the repository)")
            elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
                broken.append(f"{source.relative_to(ROOT)}: {target} (no heading #{anchor})")
    assert checked > 10  # the README and docs/ do link to each other
    assert not broken, "\n".join(broken)
