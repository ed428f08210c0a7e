"""The import graph shows the architecture: no cycle between modules (imports inside functions and under
TYPE_CHECKING included), no arrow running from a lower layer to a higher one (except under TYPE_CHECKING), no
private name taken from another module, no SQL about a run outside the store, and no module over 600 lines."""

import ast
import pathlib
import re

import halucheck

ROOT = pathlib.Path(halucheck.__file__).parent
MODULES = {".".join(p.relative_to(ROOT.parent).with_suffix("").parts).removesuffix(".__init__"): p
           for p in ROOT.rglob("*.py")}

# Layers, lowest first (docs/architecture.md): a module may import its own layer and those below it.
LAYERS = [
    ("halucheck", "halucheck.errors", "halucheck.records", "halucheck.text", "halucheck.registry", "halucheck.config",
     "halucheck.arithmetic", "halucheck.heap"),
    ("halucheck.prompts", "halucheck.engines", "halucheck.store", "halucheck.weights", "halucheck.inputs",
     "halucheck.ingest", "halucheck.kinds"),
    ("halucheck.retrieval",),
    ("halucheck.verifiers",),
    ("halucheck.claims", "halucheck.coverage", "halucheck.evidence"),
    ("halucheck.reports",),
    ("halucheck.pipeline", "halucheck.progress", "halucheck.cluster", "halucheck.evaluation", "halucheck.checker"),
    ("halucheck.cli",),
]
# The one arrow allowed upward: the package itself hands out its public API (``from halucheck import Checker``),
# imported on first use so that `import halucheck` loads nothing more (test_the_api_is_imported_on_first_use).
PUBLIC_API = {"halucheck": {"halucheck.checker"}}
MAX_LINES = 600


def layer(module: str) -> int:
    """The layer of ``module``: that of the longest prefix listed."""
    best, found = -1, None
    for k, names in enumerate(LAYERS):
        for name in names:
            if (module == name or module.startswith(name + ".")) and len(name) > best:
                best, found = len(name), k
    assert found is not None, f"{module} is in no layer: add it to LAYERS and docs/architecture.md"
    return found


def imports(path: pathlib.Path, module_level_only: bool, type_checking: bool = False) -> set[str]:
    """halucheck modules that ``path`` imports (``from a import b`` -> a.b when that is a module, else a);
    TYPE_CHECKING blocks left out unless ``type_checking``."""
    tree = ast.parse(path.read_text())
    out: set[str] = set()
    nodes = tree.body if module_level_only else list(ast.walk(tree))
    skip = set() if type_checking else {
        id(n) for top in tree.body if isinstance(top, ast.If) and "TYPE_CHECKING" in ast.unparse(top.test)
        for n in ast.walk(top)}
    for node in nodes:
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name in MODULES}
        elif isinstance(node, ast.ImportFrom) and node.module in MODULES:
            subs = {f"{node.module}.{a.name}" for a in node.names} & MODULES.keys()
            out |= subs or {node.module}
    return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    state: dict[str, int] = {}
    found = []

    def visit(m, stack):
        state[m] = 1
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                found.append(stack[stack.index(n):] + [n])
            elif n not in state:
                visit(n, stack + [n])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    return found


def test_no_import_cycle_between_modules_lazy_and_type_checking_imports_included():
    """A cycle closed by a TYPE_CHECKING import is still a cycle: the two modules are one concept split in two."""
    graph = {m: imports(p, module_level_only=False, type_checking=True) - {m} for m, p in MODULES.items()}
    # a package's __init__ re-exporting its modules is not a cycle with a module importing its siblings
    graph = {m: {t for t in ts if not (MODULES[t].name == "__init__.py" and m.startswith(t + "."))}
             for m, ts in graph.items()}
    assert cycles(graph) == []


def test_the_cycle_finder_finds_a_lazy_cycle():
    assert cycles({"a": {"b"}, "b": {"a"}}) == [["a", "b", "a"]]


def test_type_checking_imports_are_counted(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from halucheck.claims import units\n")
    assert imports(module, module_level_only=False) == set()
    assert imports(module, module_level_only=False, type_checking=True) == {"halucheck.claims"}


def test_no_arrow_runs_upward():
    upward = [f"{m} -> {t}" for m, p in MODULES.items() for t in imports(p, module_level_only=False)
              if layer(t) > layer(m) and t not in PUBLIC_API.get(m, ())]
    assert upward == []


def test_the_api_is_imported_on_first_use():
    import subprocess
    import sys

    code = ("import sys, halucheck; before = 'halucheck.checker' in sys.modules; from halucheck import Checker; "
            "print(before, Checker.__module__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "halucheck.checker"]


def private_imports(path: pathlib.Path) -> list[str]:
    """Private names (``_x``, not dunders) that ``path`` takes from other halucheck modules: ``from m import
    _x`` anywhere in it (TYPE_CHECKING blocks included), and ``m._x`` on a module it imported."""
    tree = ast.parse(path.read_text())
    private = re.compile(r"^_(?!_)")
    found, modules = [], set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "halucheck":
            for a in node.names:
                if f"{node.module}.{a.name}" in MODULES:
                    modules.add(a.asname or a.name)
                elif private.match(a.name):
                    found.append(f"{node.module}.{a.name}")
        elif isinstance(node, ast.ImportFrom) and node.level:
            found += [f"{'.' * node.level}{node.module or ''}.{a.name}" for a in node.names if private.match(a.name)]
        elif isinstance(node, ast.Import):
            modules |= {a.asname or a.name.split(".")[0] for a in node.names if a.name.split(".")[0] == "halucheck"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and private.match(node.attr):
            base = ast.unparse(node.value)
            if base.split(".")[0] in modules:
                found.append(f"{base}.{node.attr}")
    return found


def test_no_module_imports_a_private_name_from_another():
    """A name another module needs is public: a private one shared across modules means a split made by
    line count, not by concept."""
    taken = {m: names for m, p in MODULES.items() if (names := private_imports(p))}
    assert taken == {}


def test_the_private_import_finder_finds_them(tmp_path):
    one = tmp_path / "one.py"
    one.write_text("from halucheck.records import _hidden\nfrom halucheck import text\n\n\n"
                   "def f():\n    from halucheck.text import _split, sentences\n    return text._cut, text.sentences\n")
    assert private_imports(one) == ["halucheck.records._hidden", "halucheck.text._split", "text._cut"]


def test_configuration_is_data():
    """config.py imports nothing but errors (engines only under TYPE_CHECKING)."""
    assert imports(MODULES["halucheck.config"], module_level_only=False) <= {"halucheck.errors"}


def test_only_the_store_speaks_sql_about_a_run():
    """Every statement about a run is a RunStore method (retrieval keeps the corpus index, a database of its own)."""
    sql = re.compile(r"\b(SELECT|INSERT INTO|UPDATE|DELETE FROM|CREATE TABLE)\b")
    outside = [m for m, p in MODULES.items() if not m.startswith(("halucheck.store", "halucheck.retrieval"))
               and sql.search(p.read_text())]
    assert outside == []


def test_no_module_over_600_lines():
    long = {m: n for m, p in MODULES.items() if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}


def test_the_pipeline_orders_stages_only():
    """pipeline.py keeps the order of the stages; their bookkeeping lives in the modules of each concern."""
    assert len(MODULES["halucheck.pipeline"].read_text().splitlines()) <= 250


def test_the_run_store_speaks_in_records():
    """No public RunStore method takes or returns bare tuples (store/rows.py holds its records); ``query`` is the
    raw escape hatch its own reads and the tests use."""
    import inspect

    from halucheck.store.runstore import RunStore

    tupled = [name for name, fn in inspect.getmembers(RunStore, inspect.isfunction)
              if not name.startswith("_") and name != "query" and "tuple" in str(inspect.signature(fn))]
    assert tupled == []
