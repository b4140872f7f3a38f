"""The code's shape: imports follow the layer table, no import cycles, a trainer that knows no
model."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "attnmt"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def absolute(node: ast.ImportFrom, path: Path) -> str:
    """The module a `from ... import` names, relative ones (`from .fast import x`) resolved."""
    if not node.level:
        return node.module or ""
    package = module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    base = package[: len(package) - node.level + 1]
    return ".".join([*base, *([node.module] if node.module else [])])


def imported(path: Path) -> set[str]:
    """The attnmt modules a file imports, anywhere in it (functions and TYPE_CHECKING too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("attnmt")}
        elif isinstance(node, ast.ImportFrom) and absolute(node, path).startswith("attnmt"):
            module = absolute(node, path)
            for alias in node.names:
                child = f"{module}.{alias.name}"
                found.add(child if child in MODULES else module)
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


# The layer table of docs/architecture.md: each layer and the layers it may import, lowest
# first. "base" is the package's shared foundation (errors, config, vocab, pieces, runtime,
# options, files).
LAYERS = {
    "base": set(),
    "data": {"base"},
    "model": {"base"},
    "plot": {"base"},
    "infer": {"base", "data", "model", "plot"},
    "train": {"base", "data", "model", "plot", "infer"},
    "serve": {"base", "data", "model", "infer"},
    "cli": {"base", "data", "model", "plot", "infer", "train", "serve"},
    "entry": {"infer"},  # attnmt/__init__.py: the lazy `Translator`
}
BASE = {"errors", "config", "vocab", "pieces", "runtime", "options", "files"}


def layer(module: str) -> str:
    """The layer of an attnmt module: its subpackage, or base for the shared modules."""
    parts = module.split(".")
    if len(parts) == 1:
        return "entry"
    return "base" if parts[1] in BASE else parts[1]


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    """'a -> b' for each import of `graph` that the layer table does not allow."""
    return sorted(
        f"{name} -> {other}"
        for name, others in graph.items()
        for other in others
        if layer(other) != layer(name) and layer(other) not in LAYERS[layer(name)]
    )


def test_every_module_sits_in_a_layer():
    assert {name: layer(name) for name in MODULES if layer(name) not in LAYERS} == {}


def test_imports_follow_the_layer_table():
    graph = {name: imported(path) - {name} for name, path in MODULES.items()}
    assert layer_violations(graph) == []


def test_the_layer_check_finds_an_upward_import():
    graph = {"attnmt.model.decoder": {"attnmt.train.loss"}, "attnmt.infer.search": set()}
    assert layer_violations(graph) == ["attnmt.model.decoder -> attnmt.train.loss"]


def test_only_entry_points_import_the_cli():
    importers = {
        name
        for name, path in MODULES.items()
        if layer(name) != "cli" and any(layer(m) == "cli" for m in imported(path))
    }
    assert importers == set()


def test_the_trainer_imports_nothing_from_the_model():
    assert not any(m.startswith("attnmt.model") for m in imported(MODULES["attnmt.train.trainer"]))


def test_every_path_in_the_architecture_doc_is_real():
    import re

    doc = (PACKAGE.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    paths = set(re.findall(r"(?:attnmt|configs|tests|scripts)/[\w/]+\.(?:py|yaml)", doc))
    paths -= {"configs/attention/cosine.yaml"}  # the doc's own example of adding a scorer
    assert paths and [p for p in paths if not (PACKAGE.parent / p).exists()] == []


# The model as the lesson writes it (docs/architecture.md), and the speed modules it must never
# reach, directly or through another module: the fast twins come in at build time instead.
PLAIN_MODEL = {
    f"attnmt.model.{name}" for name in ("attention", "decoder", "encoder", "state", "seq2seq")
}
SPEED_MODULES = {
    f"attnmt.model.{name}" for name in ("fast", "fused", "native", "blocks", "accelerate", "build")
}


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    """The modules `start` imports, directly or through others."""
    found, todo = set(), [start]
    while todo:
        for other in graph[todo.pop()] - found:
            found.add(other)
            todo.append(other)
    return found


def test_the_plain_model_imports_nothing_fast():
    graph = {name: imported(path) - {name} for name, path in MODULES.items()}
    assert {name: reachable(graph, name) & SPEED_MODULES for name in PLAIN_MODEL} == {
        name: set() for name in PLAIN_MODEL
    }


def test_relative_imports_count_too():
    package = PACKAGE / "model" / "decoder.py"
    tree = ast.parse(
        "from .fast import Dropout\nfrom . import blocks\nfrom ..vocab import PAD_ID\n"
    )
    nodes = [n for n in tree.body if isinstance(n, ast.ImportFrom)]
    assert [absolute(n, package) for n in nodes] == [
        "attnmt.model.fast",
        "attnmt.model",
        "attnmt.vocab",
    ]


def test_the_speed_check_finds_an_indirect_import():
    graph = {"a": {"b"}, "b": {"attnmt.model.fused"}, "attnmt.model.fused": set()}
    assert reachable(graph, "a") & SPEED_MODULES == {"attnmt.model.fused"}
