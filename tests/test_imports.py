"""The import graph: no cycle between modules, and no arrow running upward (lazy imports included)."""

import ast
import pathlib

import halucheck

ROOT = pathlib.Path(halucheck.__file__).parent
MODULES = {".".join(p.relative_to(ROOT.parent).with_suffix("").parts).removesuffix(".__init__"): p
           for p in ROOT.rglob("*.py")}

# what the rest is built on may not import what is built on it: the entry points, the pipeline and the eval
TOP = ("halucheck.cli", "halucheck.pipeline", "halucheck.evaluation")
# ... and configuration is data: it imports no engine, retrieval or debate code at all
DATA_ONLY = {"halucheck.config": ("halucheck.engines", "halucheck.retrieval", "halucheck.verifiers.debate")}


def imports(path: pathlib.Path, module_level_only: bool) -> set[str]:
    """halucheck modules that ``path`` imports (``from a import b`` -> a.b when that is a module, else a);
    TYPE_CHECKING blocks left out."""
    tree = ast.parse(path.read_text())
    out: set[str] = set()
    nodes = tree.body if module_level_only else list(ast.walk(tree))
    skip = {id(n) for top in tree.body if isinstance(top, ast.If) for n in ast.walk(top)}
    for node in nodes:
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name in MODULES}
        elif isinstance(node, ast.ImportFrom) and node.module in MODULES:
            subs = {f"{node.module}.{a.name}" for a in node.names} & MODULES.keys()
            out |= subs or {node.module}
    return out


def test_no_import_cycle_between_modules():
    graph = {m: imports(p, module_level_only=True) - {m} for m, p in MODULES.items()}
    state: dict[str, int] = {}
    cycles = []

    def visit(m, stack):
        state[m] = 1
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                cycles.append(stack[stack.index(n):] + [n])
            elif n not in state:
                visit(n, stack + [n])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    assert cycles == []


def test_no_arrow_runs_upward():
    upward = []
    for m, p in MODULES.items():
        targets = imports(p, module_level_only=False)
        if not m.startswith(TOP):
            upward += [f"{m} -> {t}" for t in targets if t.startswith(TOP)]
        upward += [f"{m} -> {t}" for t in targets if t.startswith(DATA_ONLY.get(m, ("-",)))]
    assert upward == []
