"""The package's layering rules, checked over every module of src/devbin (issue 13, item 5).

(a) nothing outside ``devbin.cli`` imports ``devbin.cli``, at module level or inside a function;
(b) no import cycles among modules, counting every import: module level, inside functions, and
    under ``if TYPE_CHECKING:`` (a cycle hidden in a function or behind TYPE_CHECKING is still a
    cycle of the design);
(c) a module imports only its own layer or those below it (:data:`LAYERS`).

Imports are read with :mod:`ast` (nothing is imported): ``from a.b import c`` depends on the module
``a.b.c`` when there is one, else on ``a.b``; importing ``a.b.c`` also runs ``a`` and ``a.b``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from devbin.analysis.propagation import sccs

SRC = Path(__file__).resolve().parent.parent / "src"

#: Layer of each package or module (the longest matching prefix decides); a module may import its
#: own layer or any layer below.  docs/ARCHITECTURE.md, "Layers and who may import whom".
LAYERS: dict[str, int] = {
    # 0: no devbin imports but each other
    "devbin._version": 0, "devbin._lazy": 0, "devbin.errors": 0, "devbin.binary": 0, "devbin.escape": 0,
    # 1: formats (the devbin-section codec builds the unified model: the model is below it)
    "devbin.model": 1,
    "devbin.formats": 2,
    # 3: vendor targets (read formats into the model)
    "devbin.targets": 3,
    # 4: containers and analysis
    "devbin.images": 4, "devbin.analysis": 4,
    "devbin.importers": 4, "devbin.entry": 4, "devbin.samples": 4,
    "devbin.tools": 4,
    # 5: capabilities
    "devbin.packaging": 5, "devbin.superarchive": 5, "devbin.link": 5, "devbin.load": 5, "devbin.size": 5,
    "devbin.htmlreport": 5,  # the size report page renders devbin.size.shapes.SizeReport
    "devbin.reports": 5,  # the reports the CLI prints, as library functions (resources, inspect, callgraph)
    "devbin": 5,  # the package root re-exports the capabilities (lazily)
    # 6: the command line
    "devbin.cli": 6, "devbin.__main__": 6,
}


def _modules() -> dict[str, tuple[Path, bool]]:
    out: dict[str, tuple[Path, bool]] = {}
    for p in sorted((SRC / "devbin").rglob("*.py")):
        parts = list(p.relative_to(SRC).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        if is_pkg:
            parts = parts[:-1]
        out[".".join(parts)] = (p, is_pkg)
    return out


MODULES = _modules()


def _owner(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _targets(module: str, is_pkg: bool, node: ast.Import | ast.ImportFrom) -> list[str]:
    names: list[str] = []
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        if node.level:
            base = module.split(".") if is_pkg else module.split(".")[:-1]
            base = base[:len(base) - (node.level - 1)]
            pkg = ".".join(base + ([node.module] if node.module else []))
        else:
            pkg = node.module or ""
        names = [f"{pkg}.{a.name}" if f"{pkg}.{a.name}" in MODULES else pkg for a in node.names]
    out = []
    for n in names:
        if n.split(".")[0] != "devbin":
            continue
        owner = _owner(n)
        if owner is None:
            continue
        parts = owner.split(".")
        for i in range(2, len(parts) + 1):  # importing a.b.c runs a.b first
            anc = ".".join(parts[:i])
            if anc in MODULES and anc != module and not module.startswith(anc + "."):
                out.append(anc)
    return out


def _imports() -> dict[str, list[tuple[str, int, bool]]]:
    """module -> (imported module, line, inside a function or TYPE_CHECKING block)."""
    out: dict[str, list[tuple[str, int, bool]]] = {}
    for mod, (path, is_pkg) in MODULES.items():
        found: list[tuple[str, int, bool]] = []

        def visit(node: ast.AST, nested: bool) -> None:
            for child in ast.iter_child_nodes(node):
                inner = nested or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) or (
                    isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test))
                if isinstance(child, ast.Import | ast.ImportFrom):
                    found.extend((t, child.lineno, nested) for t in _targets(mod, is_pkg, child))  # noqa: B023
                visit(child, inner)

        visit(ast.parse(path.read_text(encoding="utf-8")), False)
        out[mod] = found
    return out


IMPORTS = _imports()


#: A vendor's link and load back ends live in its folder (``targets/<vendor>/link*.py``, ``load*.py``: the
#: modules its descriptor's ``link_backend``/``load_backend`` name, and theirs): they are capability code,
#: the layer of devbin.link/devbin.load, which import them on use; nothing in the targets layer imports them.
VENDOR_BACKEND = re.compile(r"devbin\.targets\.\w+\.(link|load)(_\w+)?")


def _layer(module: str) -> int:
    if VENDOR_BACKEND.fullmatch(module):
        return LAYERS["devbin.link"]
    name = module
    while name not in LAYERS:
        name = name.rpartition(".")[0]
        assert name, f"{module} is in no layer of LAYERS: add its package"
    return LAYERS[name]


def test_every_module_has_a_layer() -> None:
    for mod in MODULES:
        _layer(mod)


def test_nothing_outside_the_cli_imports_the_cli() -> None:
    bad = [f"{mod}:{line} imports {t}" for mod, found in IMPORTS.items() if _layer(mod) < LAYERS["devbin.cli"]
           for t, line, _ in found if t == "devbin.cli" or t.startswith("devbin.cli.")]
    assert bad == []


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (the package's own Tarjan walk)."""
    comps = sccs(sorted(graph), {mod: sorted(targets) for mod, targets in graph.items()})
    return sorted(sorted(c) for c in comps if len(c) > 1)


def test_no_import_cycles() -> None:
    """Every import counts: module level, in functions and under TYPE_CHECKING."""
    graph = {mod: {t for t, _, _ in found} for mod, found in IMPORTS.items()}
    assert _cycles(graph) == []


def test_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def _upward() -> list[str]:
    return [f"{mod}:{line} ({_layer(mod)}) imports {t} ({_layer(t)})" for mod, found in IMPORTS.items()
            for t, line, _ in found if _layer(t) > _layer(mod)]


#: Imports against the layer order in modules other engineers own (issue 13), reported to the
#: lead; each goes when its module is fixed.  Anything else upward fails the test.
KNOWN_UPWARD: frozenset[str] = frozenset()


def test_layers_point_down() -> None:
    bad = [u for u in _upward() if u.split(":")[0] not in KNOWN_UPWARD]
    assert bad == []


def test_known_upward_imports_still_exist() -> None:
    """A module listed in KNOWN_UPWARD that no longer imports upward must leave the list."""
    upward = {u.split(":")[0] for u in _upward()}
    assert sorted(KNOWN_UPWARD - upward) == []


# --------------------------------------------------------------------------- vendors (issue 25, item 1)
#
# Outside devbin.targets, generic code asks the vendor registry (devbin.targets.registry) and names no
# vendor.  "Naming a vendor" is, in code (docstrings and comments are prose and may name them):
#
# * a string constant that is a vendor word (a vendor's name, title, attribute prefix or triple prefix,
#   and the runtime/toolchain words below), or a word (no blank: prose and help texts giving examples
#   are not code) that starts with a vendor's architecture prefix (``sm_``, ``compute_``, ``lto_``, ``gfx``;
#   an f-string's constant parts count, so ``f"sm_{n}"`` does).  An image kind (``cubin``, ``amdgpu``) is
#   the kind vocabulary of devbin.images.record, not a vendor name, and is not counted;
# * a name or attribute that is the ``EM_*`` constant of a vendor's machine (``EM_CUDA``, ``EM_AMDGPU``);
# * a vendor's ``e_machine`` number compared with something or used as a dict key;
# * an import of a vendor package (``devbin.targets.nvidia``, ``devbin.targets.amdgpu``, ...).
#
# The format readers (devbin.formats, layer 2, below the vendors) define the magics and the e_machine
# constants and are not checked.  No other module is excused (issue 25: the last ones, the inspect report
# and its text rendering, now ask the descriptor too).

#: Words that name a vendor's runtime or toolchain besides what the descriptors declare.
VENDOR_RUNTIME_WORDS = frozenset({"cuda", "hip", "hipv4", "hcc", "rocm", "nvcc", "nvptx64", "openmp-cuda"})


def _vendor_vocabulary() -> tuple[frozenset[str], tuple[str, ...], frozenset[str], frozenset[int], tuple[str, ...]]:
    from devbin.formats.elf.constants import EM_NAMES
    from devbin.targets.registry import VENDORS
    words = set(VENDOR_RUNTIME_WORDS)
    for v in VENDORS:
        words |= {v.name, v.title, v.attribute_prefix.rstrip("."), *v.triple_prefixes}
    words -= {k for v in VENDORS for k in v.image_kinds}
    prefixes = tuple(p for v in VENDORS for p in v.arch_prefixes)
    machines = frozenset(m for v in VENDORS for m in v.e_machines)
    em_names = frozenset(EM_NAMES[m] for m in machines)
    packages = tuple(type(v).__module__.rpartition(".")[0] for v in VENDORS)
    return frozenset(words), prefixes, em_names, machines, packages


def _docstrings(tree: ast.AST) -> set[int]:
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):  # attribute docstrings
            out.add(id(node.value))
    return out


def vendor_mentions(path: Path) -> list[str]:
    """Where the module at ``path`` names a vendor (the rules above): ``line: what``."""
    words, prefixes, em_names, machines, packages = _vendor_vocabulary()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    prose = _docstrings(tree)
    found: list[str] = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose:
            text = node.value
            if text in words or (text.startswith(prefixes) and not any(c.isspace() for c in text)):
                found.append(f"{line}: {node.value!r}")
        elif isinstance(node, ast.Name | ast.Attribute):
            name = node.id if isinstance(node, ast.Name) else node.attr
            if name in em_names:
                found.append(f"{line}: {name}")
        elif isinstance(node, ast.Compare | ast.Dict):
            values = [*node.comparators, node.left] if isinstance(node, ast.Compare) else node.keys
            for v in values:
                for c in ast.walk(v) if v is not None else ():
                    if isinstance(c, ast.Constant) and type(c.value) is int and c.value in machines:
                        found.append(f"{line}: e_machine {c.value}")
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names = [a.name for a in node.names]
            if isinstance(node, ast.ImportFrom):
                names = [f"{node.module}.{n}" for n in names] if node.module and not node.level else []
            for n in names:
                if any(n == p or n.startswith(p + ".") for p in packages):
                    found.append(f"{line}: imports {n}")
                    break
    return sorted(set(found), key=lambda s: int(s.split(":")[0]))


def _vendor_checked(mod: str) -> bool:
    return not (mod == "devbin.targets" or mod.startswith(("devbin.targets.", "devbin.formats")))


def test_generic_code_names_no_vendor() -> None:
    bad = {mod: vendor_mentions(path) for mod, (path, _) in MODULES.items()
           if _vendor_checked(mod)}
    assert {m: f for m, f in bad.items() if f} == {}


def test_vendor_detector_finds_each_rule(tmp_path: Path) -> None:
    """The detector is not blind: each rule fires on a line that breaks it, and prose does not."""
    src = tmp_path / "m.py"
    src.write_text('"""NVIDIA and amd in a docstring are prose."""\n'
                   'from devbin.targets.nvidia.archs import SM_ARCHS\n'
                   'import devbin.formats.elf.constants as C\n'
                   'a = "nvidia"\nb = f"sm_{a}"\nc = C.EM_CUDA\nd = {224: 1}\ne = a == 190\n'
                   'f = "hip"\ng = "gfx90a"\nhelp = "gfx90a or sm_90"\nh = 190 + 1\ni = "AMD"\n', encoding="utf-8")
    lines = [int(s.split(":")[0]) for s in vendor_mentions(src)]
    assert lines == [2, 4, 5, 6, 7, 8, 9, 10, 13]
