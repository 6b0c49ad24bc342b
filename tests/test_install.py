"""The distribution as a user installs it: the wheel, a fresh environment that already has torch,
the extras, the commands, the app started from outside the checkout; and ``pip install -e .``.

The wheel installs only the project's own names (``elmo_model``, ``probing``, ``elmo_workbench``)
and declares ranges, with the app, the report, Ray and the test tools as extras. The fresh
environment is made once for the module: ``python3 -m venv``, the lock's torch from pip's local
wheel (``--no-index``: this test never downloads a torch, whose Linux build on the index is the
multi-GB CUDA one), then the wheel with its dependencies from the index (pip's cache makes a
second run fast). The checks run from temporary folders with ``python -I``: nothing on
``sys.path`` but the standard library and the environment's site-packages.

Time (``python -m pytest -q tests/test_install.py --durations=12``, 2-core Intel Xeon with AMX,
load average 6 from other work, pip's cache warm): 2.3 minutes for the module, 3.1 when every
install byte-compiled all it unpacked (2026-12-08, back to back; CPU 89 s against 116 s). The
installs skip that (``--no-compile``): Python compiles a module when it is first imported, and
no check reads a .pyc. pip downloads a package only once (its cache).
The wheel's dependencies are installed under the lock as a constraint (``-c requirements.txt``):
the versions the rest of the suite runs with, which the ranges' lower bounds are, so a new
upstream release cannot turn this test red on a commit that changed nothing.
The editable-install test needs no index (``--no-deps --no-index``: the new venv sees this one's packages).
"""

import os
import re
import shutil
import site
import subprocess
import sys
import time
import tomllib
import urllib.request
import zipfile
from pathlib import Path

import pytest
from test_browser import (
    CHROMIUM_ARGS,
    FIGURE,
    assert_figures_drawn,
    assert_no_error,
    chromium_path,
    free_port,
    server_log,
    stop_server,
    wait_until_idle,
)

from elmo_model.plumbing.extras import NEEDED

ROOT = Path(__file__).resolve().parents[1]
NOT_SOURCES = shutil.ignore_patterns(".git", ".venv", "runs", "reports", "cache", "build", "*.egg-info",
                                     "dist", "__pycache__", ".pytest_cache", "*.partial", "*.tmp")
PROJECT_NAMES = {"elmo_model", "probing", "elmo_workbench"}  # all that the wheel puts at the top of site-packages
TEST_TOOLS = {"pytest", "playwright", "kaleido", "pytorch-crf"}
APP_PACKAGES = {"streamlit", "plotly", "umap-learn"}
SERVER_START_TIMEOUT = 120  # s: the first start imports streamlit, and compiles nothing else
FIGURE_TIMEOUT = 120_000  # ms: the playground's first figure waits for torch and elmo-mini to load
#: pip install without byte-compiling every module it unpacks (torch's, sympy's, plotly's thousands)
INSTALL = ("install", "-q", "--no-compile")

# each command's --help names what it does: a phrase from its own description
COMMANDS = {
    "elmo-embed": "sentence_to_index",
    "elmo-train": "--train",
    "elmo-probe-suite": "--tasks",
    "elmo-probe-report": "--tasks",
    "elmo-data": "download",
    "elmo-workbench": "streamlit run",
}
#: Lower bounds that are not the lock's pin: measured (docs/design.md, "The torch floor": the core's tests on
#: each torch in a throw-away venv; 2.4.0 and 2.4.1 passed, 2.3.1 did not).
MEASURED_FLOORS = {"torch": "2.4.0"}
#: What a run of a command without its extra says instead of a traceback (exit code 2); --help needs none.
NEEDS_EXTRA = {"elmo-probe-report": "pip install plotly umap-learn (the [report] extra"}


def _lock() -> dict[str, str]:
    """requirements.txt and requirements-cluster.txt: distribution (lower case) -> pinned version."""
    pins = {}
    for name in ("requirements.txt", "requirements-cluster.txt"):
        for line in (ROOT / name).read_text(encoding="utf-8").splitlines():
            if line.strip() and not line.startswith("#"):
                dist, _, version = line.strip().partition("==")
                pins[dist.lower().replace("_", "-")] = version
    return pins


def _run(args: list, cwd: Path, timeout: float = 600, **env_vars: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "ELMO_WORKBENCH_MODEL")}
    env.update(env_vars)
    return subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def _ok(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 0, f"{' '.join(map(str, done.args))}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def _pip(python: Path, *args, cwd: Path) -> str:
    return _ok(_run([python, "-m", "pip", *args, "--disable-pip-version-check", "--no-input"], cwd))


def _installed(python: Path, cwd: Path) -> dict[str, str]:
    """distribution (lower case) -> version, of everything in the environment."""
    out = _ok(_run([python, "-I", "-c", "import importlib.metadata as m\n"
                                        "for d in m.distributions(): print(d.metadata['Name'], d.version)"], cwd))
    return {name.lower().replace("_", "-"): version for name, version in (line.split() for line in out.splitlines())}


def _torch(python: Path, cwd: Path) -> tuple[str, str, int]:
    """(version, file, mtime_ns of its __init__.py) of the environment's torch, read without importing it."""
    out = _ok(_run([python, "-I", "-c", "import importlib.metadata as m, importlib.util as u, os\n"
                                        "f = u.find_spec('torch').origin\n"
                                        "print(m.version('torch'), f, os.stat(f).st_mtime_ns)"], cwd))
    version, path, mtime = out.split()
    return version, path, int(mtime)


def _site_packages(python: Path) -> Path:
    return Path(_ok(_run([python, "-I", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         python.parent)).strip())


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel of a copy of the project (the build's own files stay out of the checkout), built
    as a user builds it: `pip wheel` in an isolated build environment."""
    source = tmp_path_factory.mktemp("project") / "elmo-workbench"
    shutil.copytree(ROOT, source, ignore=NOT_SOURCES)
    out = tmp_path_factory.mktemp("wheel")
    _pip(Path(sys.executable), "wheel", "-q", "--no-deps", "-w", out, source, cwd=out)
    return next(out.glob("elmo_workbench-*.whl"))


@pytest.fixture(scope="module")
def environment(tmp_path_factory) -> Path:
    """A fresh venv with the lock's torch (pip's local CPU wheel only) and nothing of the project: its python."""
    venv = tmp_path_factory.mktemp("user-env") / "venv"
    _ok(_run([sys.executable, "-m", "venv", venv], venv.parent))
    python = venv / "bin" / "python"
    torch = f"torch=={_lock()['torch']}"
    done = _run([python, "-m", "pip", *INSTALL, "--no-index", "--no-deps", torch], venv.parent)
    if done.returncode != 0:
        pytest.fail(f"no local wheel of {torch} in pip's --find-links (pip.conf or $PIP_FIND_LINKS): this test "
                    f"installs no torch from an index, whose Linux build is the multi-GB CUDA one\n{done.stderr}",
                    pytrace=False)
    _pip(python, *INSTALL, torch, cwd=venv.parent)  # torch is there: only its own dependencies come
    return python


@pytest.fixture(scope="module")
def installed(environment, wheel, tmp_path_factory) -> dict:
    """The wheel installed (no extra) into the environment: what was there before and after."""
    cwd = tmp_path_factory.mktemp("elsewhere")
    before, torch_before = _installed(environment, cwd), _torch(environment, cwd)
    _pip(environment, *INSTALL, "-c", ROOT / "requirements.txt", wheel, cwd=cwd)
    return {"before": before, "after": _installed(environment, cwd), "torch_before": torch_before,
            "torch_after": _torch(environment, cwd)}


# ---- the wheel --------------------------------------------------------------------------------


def test_the_declared_commands_are_the_main_ones():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert set(scripts) == set(COMMANDS)


def test_the_wheel_holds_only_the_projects_own_names_and_the_shipped_data(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    top = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert top == PROJECT_NAMES  # no top-level app.py, app_pages/ or data/
    assert "elmo_workbench/app.py" in names
    pages = {Path(n).name for n in names if n.startswith("elmo_workbench/app_pages/")}
    assert pages == {p.name for p in (ROOT / "app_pages").glob("*.py")}
    shipped = {n.removeprefix("elmo_workbench/") for n in names if n.startswith("elmo_workbench/data/")}
    tracked = subprocess.run(["git", "ls-files", "data"], cwd=ROOT, capture_output=True, text=True)
    in_checkout = (set(tracked.stdout.split()) if tracked.returncode == 0 and tracked.stdout.strip() else
                   {p.relative_to(ROOT).as_posix() for p in (ROOT / "data").rglob("*") if p.is_file()})
    assert shipped == in_checkout and "data/models/elmo-mini/weights.hdf5" in shipped


def test_the_wheel_declares_ranges_from_the_lock_and_extras(wheel):
    archive = zipfile.ZipFile(wheel)
    metadata = archive.read(next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA")))
    requires = re.findall(r"^Requires-Dist: (.+)$", metadata.decode(), flags=re.M)
    lock = _lock()
    core, extras = [], {}
    for requirement in requires:
        spec, _, marker = requirement.partition(";")
        name = re.match(r"[A-Za-z0-9._-]+", spec).group().lower().replace("_", "-")
        extra = re.search(r"extra == \"(\w+)\"", marker)
        (extras.setdefault(extra.group(1), []) if extra else core).append(name)
        assert "==" not in spec, requirement  # ranges, not the lock's pins
        lower = re.search(r">=([\w.]+)", spec)
        floor = MEASURED_FLOORS.get(name, lock[name])
        assert lower and lower.group(1) == floor, f"{requirement}: lower bound is not {floor} (the lock's or measured)"
    assert {"torch", "numpy", "h5py"} <= set(core)
    assert not (set(core) & (TEST_TOOLS | APP_PACKAGES | {"ray", "gensim"}))
    assert set(extras["app"]) == APP_PACKAGES and set(extras["test"]) == {"pytest", "playwright", "pytorch-crf"}
    assert "kaleido" in extras["report"] and extras["cluster"] == ["ray"]
    for extra, needed in NEEDED.items():  # what the commands check for is what the extra brings
        assert set(needed.values()) <= set(extras[extra]), extra


@pytest.mark.parametrize("layout", ["installed", "checkout"])
def test_the_shipped_data_is_the_one_that_came_with_the_code(layout, tmp_path):
    """Installed: elmo_workbench/data, even beside another project's top-level ``data/`` and a stray
    ``pyproject.toml`` in site-packages. A checkout: its own data/, even with a wheel installed.
    Fails on copies of elmo_model/plumbing/resources.py that take data/ beside elmo_model/ (the rule before
    the wheel had elmo_workbench/: "installed" fails) or that ask importlib.resources first
    ("checkout" fails)."""
    packages, elsewhere = tmp_path / "site-packages", tmp_path / "other-site-packages"
    shutil.copytree(ROOT / "elmo_model", packages / "elmo_model", ignore=shutil.ignore_patterns("__pycache__"))
    (packages / "data" / "models" / "someone-elses").mkdir(parents=True)  # the collision a top-level data/ invites
    (elsewhere / "elmo_workbench" / "data" / "models" / "elmo-mini").mkdir(parents=True)
    if layout == "installed":
        (packages / "pyproject.toml").write_text('[project]\nname = "another-project"\n')
        (packages / "elmo_workbench" / "data" / "models" / "elmo-mini").mkdir(parents=True)
        expected = packages / "elmo_workbench" / "data"
    else:  # packages/ plays the checkout, and elsewhere/ an installed wheel of the same project
        shutil.copy(ROOT / "pyproject.toml", packages / "pyproject.toml")
        expected = packages / "data"
    check = (f"import sys; sys.path[:0] = [{str(packages)!r}, {str(elsewhere)!r}]\n"
             "from elmo_model.plumbing.resources import shipped_data\n"
             "print(shipped_data('models')); print(sys.modules.get('torch'))")
    done = _run([sys.executable, "-I", "-c", check], tmp_path)
    assert done.stdout.split("\n")[:2] == [str(expected / "models"), "None"], done.stderr  # and no torch imported


# ---- a user's environment -----------------------------------------------------------------------


def test_installing_the_wheel_leaves_the_users_torch_and_adds_no_test_tool(installed):
    assert installed["torch_after"] == installed["torch_before"]  # same version, same file, not rewritten
    assert installed["before"]["torch"] == installed["after"]["torch"] == installed["torch_before"][0]
    added = set(installed["after"]) - set(installed["before"])
    assert "elmo-workbench" in added and {"numpy", "h5py", "nltk"} <= added
    assert not added & (TEST_TOOLS | APP_PACKAGES | {"ray"}), sorted(added)


def test_the_library_and_the_commands_work_without_the_extras(installed, environment, tmp_path):
    check = ("import importlib.util, sys\n"
             "import elmo_model\n"
             "from elmo_model import ElmoEmbedder\n"
             "from elmo_model.models.registry import resolve_model\n"
             "from elmo_model.text.tokenizer import tokenize_words\n"
             "vectors = ElmoEmbedder('elmo-mini', precision='fp32').embed_sentence(['The', 'bank', '.'])\n"
             "print(elmo_model.__file__); print(resolve_model('elmo-mini').weights); print(vectors.shape)\n"
             "print(tokenize_words('Dr. Smith went home.'))\n"
             "print([m for m in ('streamlit', 'plotly', 'app', 'data', 'app_pages')\n"
             "       if m in sys.modules or importlib.util.find_spec(m) is not None])\n")
    lines = _ok(_run([environment, "-I", "-c", check], tmp_path)).splitlines()
    packages = _site_packages(environment)
    assert Path(lines[0]).is_relative_to(packages) and Path(lines[1]).is_relative_to(packages)
    assert Path(lines[1]).read_bytes() == (ROOT / "data" / "models" / "elmo-mini" / "weights.hdf5").read_bytes()
    assert lines[2] == "(3, 3, 512)"  # elmo-mini from the installed data: (layers, tokens, 2 x projection)
    assert lines[3] == str(["Dr.", "Smith", "went", "home", "."])  # the shipped Punkt parameters
    assert lines[4] == "[]"  # no Streamlit, no Plotly, and no top-level app, data or app_pages to collide
    for command, phrase in COMMANDS.items():
        done = _run([environment.parent / command, "--help"], tmp_path)
        assert done.returncode == 0 and "usage:" in done.stdout and phrase in done.stdout, \
            f"{command} --help:\n{done.stdout}{done.stderr}"
    for command, hint in NEEDS_EXTRA.items():
        done = _run([environment.parent / command, "--out", tmp_path / "out"], tmp_path)
        assert done.returncode == 2 and hint in done.stderr and "Traceback" not in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    app = Path(_ok(_run([environment.parent / "elmo-workbench", "--print-app"], tmp_path)).strip())
    assert app == packages / "elmo_workbench" / "app.py"
    done = _run([environment.parent / "elmo-workbench"], tmp_path)  # no [app]: one line, not Streamlit's traceback
    assert done.returncode == 2 and "pip install streamlit" in done.stderr and "Traceback" not in done.stderr


def test_the_installed_package_passes_the_allennlp_compatibility_tests(installed, environment, data_root, tmp_path):
    """The test file and the fixtures it needs (conftest.py, less the line that puts the checkout
    on sys.path) run in a temporary folder with the lock's pytest added to the environment."""
    _pip(environment, *INSTALL, f"pytest=={_lock()['pytest']}", cwd=tmp_path)
    tests = tmp_path / "tests"
    tests.mkdir()
    shutil.copy(ROOT / "tests" / "test_allennlp_compat.py", tests)
    conftest = (ROOT / "tests" / "conftest.py").read_text(encoding="utf-8")
    adds_checkout = "    sys.path.insert(0, str(PROJECT))"
    assert adds_checkout in conftest
    (tests / "conftest.py").write_text(conftest.replace(adds_checkout, "    pass"), encoding="utf-8")
    (tests / "test_where_the_code_comes_from.py").write_text(
        "import site, sys, sysconfig\n"
        "from pathlib import Path\n"
        "import elmo_model.embedding\n\n\n"
        "def test_the_project_comes_from_site_packages_alone():\n"
        "    packages = Path(sysconfig.get_paths()['purelib'])\n"
        "    assert Path(elmo_model.embedding.__file__).is_relative_to(packages)\n"
        "    stdlib = Path(sysconfig.get_paths()['stdlib']).parent\n"
        "    assert all(Path(p).is_relative_to(stdlib) or Path(p) == packages for p in sys.path if p), sys.path\n",
        encoding="utf-8")
    done = _run([environment, "-I", "-m", "pytest", "-q", "-p", "no:cacheprovider", "--import-mode=importlib",
                 tests], tmp_path, ELMO_WORKBENCH_DATA=str(data_root))
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    passed = int(re.search(r"(\d+) passed", done.stdout).group(1))
    defined = len(re.findall(r"^def test_", (ROOT / "tests" / "test_allennlp_compat.py").read_text(), flags=re.M))
    assert passed >= defined + 1 and not re.search(r"skipped|xfail|deselected", done.stdout), done.stdout


def test_the_app_extra_starts_the_app_from_outside_the_checkout(installed, environment, wheel, data_root,
                                                                tmp_path):
    _pip(environment, *INSTALL, "-c", ROOT / "requirements.txt", f"{wheel}[app]", cwd=tmp_path)
    now = _installed(environment, tmp_path)
    assert APP_PACKAGES <= set(now) and not (TEST_TOOLS - {"pytest"}) & set(now)  # pytest: the test above
    assert _torch(environment, tmp_path) == installed["torch_before"]
    port = free_port()
    log = open(tmp_path / "server.log", "w+b")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "ELMO_WORKBENCH_MODEL")}
    env.update(ELMO_WORKBENCH_DATA=str(data_root), ELMO_WORKBENCH_CACHE=str(tmp_path / "cache"))
    process = subprocess.Popen([environment.parent / "elmo-workbench", "--server.headless", "true",
                                "--server.port", str(port), "--server.address", "127.0.0.1"],
                               cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT)
    process.log = log
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + SERVER_START_TIMEOUT
        while process.poll() is None and time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                time.sleep(0.3)
        else:
            pytest.fail(f"the installed app did not start on {url}:\n{server_log(process)}", pytrace=False)
        with urllib.request.urlopen(url, timeout=10) as response:
            assert response.status == 200 and b"<title>" in response.read()
        from playwright.sync_api import sync_playwright

        with sync_playwright() as playwright:  # the app's script runs for a browser's session: run it
            browser = playwright.chromium.launch(executable_path=chromium_path(), headless=True, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1400, "height": 2000})
            page.goto(url)
            page.wait_for_selector(FIGURE, timeout=FIGURE_TIMEOUT)  # the playground, on elmo-mini as installed
            wait_until_idle(page, FIGURE_TIMEOUT)
            assert_figures_drawn(page, "installed playground")
            assert_no_error(page, process)
            assert "biLM" in page.locator('[data-testid="stSidebar"]').inner_text()
            browser.close()
        assert "Traceback" not in server_log(process)
    finally:
        stop_server(process)


# ---- a working copy ---------------------------------------------------------------------------


def _fresh_venv_seeing_this_one(path: Path) -> Path:
    """A venv that sees this environment's packages through a .pth file: offline and fast."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    python = path / "bin" / "python"
    packages = subprocess.run([str(python), "-c", "import site; print(site.getsitepackages()[0])"],
                              check=True, capture_output=True, text=True).stdout.strip()
    (Path(packages) / "zz_this_environment.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    return python


def test_editable_install_runs_the_working_copy(tmp_path_factory, tmp_path):
    source = tmp_path_factory.mktemp("project") / "elmo-workbench"
    shutil.copytree(ROOT, source, ignore=NOT_SOURCES)
    python = _fresh_venv_seeing_this_one(tmp_path / "venv")
    _ok(_run([python, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-index", "-e", source],
             tmp_path))
    done = _run([python.parent / "elmo-workbench", "--print-app"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()) == source / "app.py"
    done = _run([python, "-m", "elmo_model.corpus.embedder", "--help"], tmp_path)  # `python -m` still works
    assert done.returncode == 0 and "sentence_to_index" in done.stdout
    done = _run([python, "-c", "import elmo_model; from elmo_model.models.registry import MODELS_DIR\n"
                               "print(elmo_model.__file__); print(MODELS_DIR)"], tmp_path)
    assert done.stdout.split() == [str(source / "elmo_model" / "__init__.py"), str(source / "data" / "models")]


def test_the_app_command_passes_the_project_streamlit_settings():
    from app_pages.launch import SETTINGS

    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    flattened = {f"{section}.{key}": str(value).lower() if isinstance(value, bool) else str(value)
                 for section, values in config.items() for key, value in values.items()}
    assert SETTINGS == flattened
