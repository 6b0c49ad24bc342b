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
