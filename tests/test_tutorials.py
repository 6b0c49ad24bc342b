"""docs/tutorials.md: every example on the page runs, in order, in one empty folder (python and bash blocks)."""

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "tutorials.md"


def examples() -> list[tuple[str, str]]:
    """(language, code) of every ```python and ```bash block on the page, in order."""
    return re.findall(r"^```(python|bash)\n(.*?)^```$", PAGE.read_text(encoding="utf-8"), flags=re.S | re.M)


def test_the_page_has_an_example_for_each_library():
    text = PAGE.read_text(encoding="utf-8")
    sections = re.split(r"^## ", text, flags=re.M)[1:]
    assert [s.splitlines()[0] for s in sections] == ["TensorFlow Hub's ELMo module", "bilm-tf's training command",
                                                     "AllenNLP"]
    for section in sections:
        assert "| --- | --- |" in section and "```python" in section, section.splitlines()[0]
    assert "from elmo_model import hub" in sections[0] and "--train_prefix" in sections[1]
    assert "from torchcrf import CRF" in sections[2]


def test_the_readme_links_the_page():
    assert "(docs/tutorials.md)" in (ROOT / "README.md").read_text(encoding="utf-8")


def test_every_example_runs(tmp_path, data_root, monkeypatch, capsys):
    """Python blocks run in this process (one torch import for all), each in a fresh namespace;
    bash blocks in a shell, with this interpreter first on the PATH and the checkout importable."""
    blocks = examples()
    assert [language for language, _ in blocks] == ["python", "bash", "python", "python"]
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ELMO_WORKBENCH_DATA", str(data_root))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    for number, (language, code) in enumerate(blocks, start=1):
        if language == "python":
            exec(compile(code, f"docs/tutorials.md, example {number}", "exec"), {"__name__": "__main__"})
            assert capsys.readouterr().out.strip(), f"example {number} printed nothing"
            continue
        done = subprocess.run(["bash", "-e", "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, f"example {number} ({language}):\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
        # the training command: the text is tiny, and the two files tutorials load next are there
        assert "the training text is tiny" in done.stderr
        assert (tmp_path / "my-elmo" / "options.json").is_file() and (tmp_path / "my-elmo" / "weights.hdf5").is_file()
