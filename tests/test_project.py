"""The project as a newcomer meets it: the README's commands are what CI runs."""

import ast
import functools
import inspect
import re
from pathlib import Path

import pytest

from probing.data import find_file
from probing.tagging.tasks import load_task

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


# ---- the import graph ----------------------------------------------------------------------------

LAYERS = ("elmo_model", "probing", "app_pages")  # each may import only the ones before it


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _project_modules() -> dict[str, Path]:
    return {_module_name(p): p for layer in LAYERS for p in sorted((ROOT / layer).rglob("*.py"))}


def _lazy_names(tree: ast.Module) -> dict[str, str]:
    """A package's ``_PUBLIC = {"Name": ".module"}`` table (names its ``__getattr__`` imports on use)."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "_PUBLIC" for t in node.targets):
            return {k: v for k, v in ast.literal_eval(node.value).items()}
    return {}


@functools.cache
def _import_graph() -> dict[str, dict[str, str]]:
    """module -> {imported project module: "file:line" of the first such import}, from the source
    alone (nothing is imported). Every import counts: at the top, inside functions, under
    ``if TYPE_CHECKING``; ``from package import Name`` goes to the module that defines Name when
    the package imports its names lazily. Parsed once for the three tests that read it (none changes it)."""
    modules = _project_modules()
    trees = {name: ast.parse(path.read_text(encoding="utf-8"), str(path)) for name, path in modules.items()}
    lazy = {name: _lazy_names(tree) for name, tree in trees.items() if modules[name].name == "__init__.py"}
    graph: dict[str, dict[str, str]] = {}
    for name, tree in trees.items():
        package = name if modules[name].name == "__init__.py" else name.rpartition(".")[0]
        edges: dict[str, str] = {}

        def add(target: str, line: int) -> None:
            while target and target not in modules:  # `import probing.report.sections` -> deepest module we have
                target = target.rpartition(".")[0]
            if target and target != name:
                edges.setdefault(target, f"{modules[name].relative_to(ROOT)}:{line}")

        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    add(alias.name, node.lineno)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                for alias in node.names:
                    submodule = f"{source}.{alias.name}"
                    if submodule in modules:
                        add(submodule, node.lineno)
                    elif alias.name in lazy.get(source, {}):
                        add(source + lazy[source][alias.name], node.lineno)
                    else:
                        add(source, node.lineno)
        graph[name] = edges
    return graph


def _cycles(graph: dict[str, dict[str, str]]) -> list[list[str]]:
    """One cycle (a list of modules, first == last) through each group of modules that import each
    other (Tarjan's strongly connected components of more than one module)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    cycles = []
    for group in groups:  # a shortest way round from the group's first module back to itself
        start, members = group[0], set(group)
        paths = {start: [start]}
        queue = [start]
        while queue:
            v = queue.pop(0)
            for w in sorted(graph[v]):
                if w == start:
                    cycles.append(paths[v] + [start])
                    queue = []
                    break
                if w in members and w not in paths:
                    paths[w] = paths[v] + [w]
                    queue.append(w)
    return cycles


def test_no_import_cycles_among_project_modules():
    graph = _import_graph()
    assert len(graph) > 40 and sum(map(len, graph.values())) > 100  # the parser did find the modules and imports
    found = []
    for cycle in _cycles(graph):
        steps = [f"    {a} -> {b}  ({graph[a][b]})" for a, b in zip(cycle, cycle[1:])]
        found.append(" -> ".join(cycle) + "\n" + "\n".join(steps))
    assert not found, f"{len(found)} import cycle(s); break each (move the shared piece down, or invert the " \
                      "dependency):\n" + "\n".join(found)


def test_the_layers_import_only_downwards():
    """elmo_model imports nothing from probing or app_pages; probing nothing from app_pages."""
    wrong = []
    for module, edges in _import_graph().items():
        layer = LAYERS.index(module.split(".")[0])
        for target, where in edges.items():
            if LAYERS.index(target.split(".")[0]) > layer:
                wrong.append(f"{where}: {module} imports {target}")
    assert not wrong, "\n".join(wrong)


def _room(path: Path) -> str:
    """The room the module at ``path`` lives in, as the design map's table names it: ``elmo_model/bilm/``,
    ``elmo_model/hub.py``, ``app_pages/``."""
    parts = path.relative_to(ROOT).parts
    if parts[0] == "app_pages" or parts[1:] == ("__init__.py",):
        return parts[0] + "/"
    return f"{parts[0]}/{parts[1]}" + ("" if parts[1].endswith(".py") else "/")


def _room_importers() -> dict[str, set[str]]:
    """room -> the other rooms that import it (every import, as ``_import_graph`` counts them)."""
    room = {module: _room(path) for module, path in _project_modules().items()}  # the files listed once
    importers: dict[str, set[str]] = {r: set() for r in room.values()}
    for module, edges in _import_graph().items():
        for target in edges:
            if room[target] != room[module]:
                importers[room[target]].add(room[module])
    return importers


def test_each_room_is_imported_by_exactly_the_rooms_the_design_map_allows():
    """docs/design.md's table "Who may import each room" is the import graph, room by room: a new
    import between rooms is a decision written there first, and a row that no import needs any
    more is struck."""
    design = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    table = design[design.index("| room | may be imported by |"):].split("\n\n")[0]
    allowed = {}
    for row in table.splitlines()[2:]:
        room, who = (cell.strip() for cell in row.strip("|").split("|"))
        allowed[room.strip("`")] = set(re.findall(r"`([^`]+)`", who))
    actual = _room_importers()
    assert set(allowed) == set(actual), f"rooms on disk but not in the table: {sorted(set(actual) - set(allowed))}; " \
                                        f"in the table but not on disk: {sorted(set(allowed) - set(actual))}"
    wrong = [f"{room}: imported by {sorted(actual[room] - allowed[room])} (not allowed), "
             f"allowed {sorted(allowed[room] - actual[room])} (no such import)"
             for room in sorted(actual) if actual[room] != allowed[room]]
    assert not wrong, "\n".join(wrong)


def _public_functions(tree: ast.Module):
    """(qualified name, node) of the module's public functions and its public classes' public methods."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("_"):
            yield node.name, node
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                        (not item.name.startswith("_") or item.name == "__init__"):
                    yield f"{node.name}.{item.name}", item


def test_the_data_root_parameter_has_one_name_and_the_old_one_still_works(data_root):
    """A data-root parameter is spelled data_root everywhere (not root); callers that still pass
    root= get the same answer through probing.engine.renamed_keywords."""
    found = []
    for package in LAYERS:
        for path in sorted((ROOT / package).rglob("*.py")):
            for name, node in _public_functions(ast.parse(path.read_text(encoding="utf-8"))):
                a = node.args
                if "root" in [p.arg for p in a.posonlyargs + a.args + a.kwonlyargs]:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} {name}(root=...)")
    assert not found, "call the data-root parameter data_root (renamed_keywords keeps root= working):\n" + \
        "\n".join(found)

    assert "data_root" in inspect.signature(find_file).parameters
    assert "root" not in inspect.signature(find_file).parameters
    relpath = "ud_english_ewt/en_ewt-ud-dev.conllu"
    assert find_file(relpath, root=data_root) == find_file(relpath, data_root=data_root) == data_root / relpath
    assert load_task("pos", "dev", root=data_root, limit=3) == load_task("pos", "dev", data_root=data_root, limit=3)


# ---- the house: the map in docs/design.md is the tree -----------------------------------------------

PACKAGES = ("app_pages", "probing", "elmo_model")


def _mapped_modules() -> set[str]:
    """The module paths the fenced tree under "## The map" of docs/design.md lists (indentation
    nests a line under the folder above it)."""
    text = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    block = text.split("## The map", 1)[1].split("```", 2)[1]
    stack: list[tuple[int, str]] = []
    listed = set()
    for line in block.splitlines():
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip(" "))
        name = line.split()[0]
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = "/".join([folder for _, folder in stack] + [name.rstrip("/")])
        if name.endswith("/"):
            stack.append((indent, name.rstrip("/")))
        elif name.endswith(".py"):
            listed.add(path)
    return listed


def test_the_design_map_lists_every_module_on_disk():
    on_disk = {p.relative_to(ROOT).as_posix() for package in PACKAGES for p in (ROOT / package).rglob("*.py")}
    listed = {path for path in _mapped_modules() if path.split("/")[0] in PACKAGES}
    assert not on_disk - listed, f"modules missing from docs/design.md's map: {sorted(on_disk - listed)}"
    assert not listed - on_disk, f"docs/design.md's map lists modules that are not there: {sorted(listed - on_disk)}"


@pytest.mark.parametrize("package, most", [("probing", 10), ("elmo_model", 12)])
def test_a_package_top_reads_as_its_rooms(package, most):
    entries = sorted(p.name for p in (ROOT / package).iterdir() if p.name != "__pycache__")
    assert len(entries) <= most, f"{package}/ holds {len(entries)} entries (at most {most}): {entries}"


def test_no_module_is_over_600_lines():
    long = {p.relative_to(ROOT).as_posix(): n for package in PACKAGES for p in (ROOT / package).rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > 600}
    assert not long, f"split these by concern: {long}"


def test_no_function_is_over_80_lines():
    long = set()
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno + 1 > 80:
                    long.add(f"{path.relative_to(ROOT).as_posix()}:{node.name}")
    assert not long, f"functions over 80 lines: {sorted(long)}"


def test_the_readme_stays_a_front_door():
    """The README is what a newcomer reads first: under 200 lines; the rest belongs in docs/."""
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) < 200, f"README.md has {len(lines)} lines: move detail into docs/"



def test_the_readme_lists_the_apps_pages_and_the_shipped_data_folders():
    """The README's page list is app.py's pages, in order, with the right count; its layout names
    every folder under data/."""
    root = ROOT
    readme = (root / "README.md").read_text(encoding="utf-8")
    titles = re.findall(r'st\.Page\("app_pages/\w+\.py", title="([^"]+)"', (root / "app.py").read_text(encoding="utf-8"))
    section = readme[readme.index("## The app"):readme.index("## Layout")]
    listed = re.findall(r"^- \*\*([^*]+)\*\*:", section, flags=re.MULTILINE)
    assert sorted(listed) == sorted(titles), (listed, titles)
    words = {6: "Six", 7: "Seven", 8: "Eight", 9: "Nine", 10: "Ten"}
    assert f"{words[len(titles)]}\npages:" in section or f"{words[len(titles)]} pages" in section
    layout = readme[readme.index("## Layout"):]
    data_line = next(line for line in layout.splitlines() if line.startswith("data/"))
    for folder in sorted(p.name for p in (root / "data").iterdir() if p.is_dir()):
        assert f"{folder}/" in data_line, folder
