"""The code's shape: no import cycles, small modules, a trainer that knows no model."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "attnmt"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imported(path: Path) -> set[str]:
    """The attnmt modules a file imports, anywhere in it (functions and TYPE_CHECKING too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("attnmt")}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("attnmt"):
            for alias in node.names:
                child = f"{node.module}.{alias.name}"
                found.add(child if child in MODULES else node.module)
    return found & set(MODULES)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles of `graph` (Tarjan's strongly connected components of 2 or more)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in graph[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    return found


def test_no_import_cycles():
    graph = {name: imported(path) - {name} for name, path in MODULES.items()}
    graph["attnmt"] = set()  # the package's lazy `Translator` is not an import at load time
    assert cycles(graph) == []


def test_the_cycle_finder_finds_one():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_module_over_300_lines():
    sizes = {name: len(p.read_text(encoding="utf-8").splitlines()) for name, p in MODULES.items()}
    assert {name: n for name, n in sizes.items() if n > 300} == {}


def test_the_trainer_imports_nothing_from_the_model():
    assert not any(m.startswith("attnmt.model") for m in imported(MODULES["attnmt.train.trainer"]))
    assert not any(m.startswith("attnmt.train") for m in imported(MODULES["attnmt.translate"]))


def test_every_path_in_the_architecture_doc_is_real():
    import re

    doc = (PACKAGE.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    paths = set(re.findall(r"(?:attnmt|configs|tests|scripts)/[\w/]+\.(?:py|yaml)", doc))
    paths -= {"configs/attention/cosine.yaml"}  # the doc's own example of adding a scorer
    assert paths and [p for p in paths if not (PACKAGE.parent / p).exists()] == []
