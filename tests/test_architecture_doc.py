"""docs/ARCHITECTURE.md names what exists, and its "Adding a vendor" section is the list a vendor needs.

* Every path the document names in backquotes (``images/record.py``, ``src/devbin/...``,
  ``tests/...``, ``docs/...``) is a file or folder of the checkout (a bare one is under ``src/devbin``);
  ``<vendor>`` in a path stands for a registered vendor's folder (one at least has the file: link and
  load back ends are optional; what every vendor has is checked per vendor below).
* Every dotted ``devbin.x.y`` name is a module, or a module and attributes of it.
* "Adding a vendor": the vendors are constructed in exactly one registry line; no module outside
  ``devbin.targets`` imports a vendor package (the descriptors and registry are the only door); every
  abstract member of ``Vendor`` and every back-end member is named in the section; and the files the
  section lists outside ``targets/<vendor>/`` are those the Intel descriptor needed
  (``INTEL_TOUCHED``, from ``git log --stat`` of the intel branch, see the section's table).
"""

from __future__ import annotations

import ast
import importlib
import re
import warnings
from pathlib import Path

import pytest

from devbin.targets.registry import VENDORS
from devbin.targets.vendor import Vendor

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
DOC = ROOT / "docs" / "ARCHITECTURE.md"

#: A backquoted path: words with at least one slash, ending in a file name or a folder's slash.
_PATH = re.compile(r"`([A-Za-z0-9_.<>*-]+(?:/[A-Za-z0-9_.<>*-]*)+)`")
#: A dotted name of the package, with or without a call's parentheses.
_DOTTED = re.compile(r"\b(devbin(?:\.[A-Za-z_][A-Za-z0-9_]*)+)")


def _text() -> str:
    return DOC.read_text(encoding="utf-8")


def _section(title: str) -> str:
    text = _text()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end > 0 else len(text)]


def _vendor_folders() -> list[str]:
    return [type(v).__module__.split(".")[2] for v in VENDORS]


def _path_exists(path: str) -> bool:
    """``path`` as the document writes it: under src/devbin first, then the checkout's root; ``<vendor>``
    is every vendor's folder; a ``*`` a glob; a ``:`` or a ``#`` ends the path (a line or an anchor)."""
    path = path.rstrip(".,;:")
    if "<" in path:
        if "<vendor>" not in path:
            return True  # a pattern of another kind (<format>, <command>): its parts are checked by name
        return any(_path_exists(path.replace("<vendor>", v)) for v in _vendor_folders())
    head, _, last = path.rpartition("/")
    if "." in last and not last.endswith("/") and last.split(".")[1] not in {"py", "md", "json", "c", "sh", "cl"}:
        path = f"{head}/{last.split('.')[0]}"  # module.attribute: the module's file
    for base in (SRC / "devbin", SRC, ROOT):
        if "*" in path:
            if any(base.glob(path)):
                return True
        elif (base / path).exists() or (base / f"{path}.py").exists():
            return True
    return False


def doc_paths() -> list[str]:
    return sorted({m.group(1) for m in _PATH.finditer(_text())
                   if not m.group(1).startswith(("../", "http", "torch.", "-"))})


def doc_names() -> list[str]:
    return sorted({m.group(1).rstrip(".") for m in _DOTTED.finditer(_text())} - {"devbin.__main__"})


def _name_exists(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        module = ".".join(parts[:cut])
        try:
            obj: object = importlib.import_module(module)
        except ImportError:
            continue
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def test_doc_names_paths() -> None:
    assert len(doc_paths()) > 90  # the extractor finds the document's paths


def test_every_path_in_the_document_exists() -> None:
    assert [p for p in doc_paths() if not _path_exists(p)] == []


def diagram_paths() -> list[str]:
    """The ``devbin/...`` folders and files the layers diagram (the first fenced block) names."""
    text = _text()
    start = text.index("```\n") + 4
    block = text[start:text.index("```", start)]
    return sorted(set(re.findall(r"\bdevbin/[A-Za-z0-9_/.]*[A-Za-z0-9_/]", block)))


def test_every_path_in_the_layers_diagram_exists() -> None:
    assert len(diagram_paths()) > 15
    assert [p for p in diagram_paths() if not (SRC / p).exists()] == []


def diagram_modules() -> list[tuple[str, str]]:
    """``(folder, module file)`` for each ``name.py`` the diagram gives beside a ``devbin/<folder>/``
    (on the folder's row or the rows below it, up to the next folder)."""
    text = _text()
    start = text.index("```\n") + 4
    folder, out = "devbin/", []
    for line in text[start:text.index("```", start)].splitlines():
        folders = re.findall(r"\bdevbin/[A-Za-z0-9_/]*/", line)
        if folders:
            folder = folders[-1]
        elif re.search(r"\S\s{3,}targets/<vendor>/", line):
            folder = ""
        out += [(folder, m) for m in re.findall(r"(?<![\w/*])(\w+\.py)\b", line) if folder]
    return out


def test_every_module_in_the_layers_diagram_exists() -> None:
    """A module named beside its folder is a file of that folder (or of the package root)."""
    assert len(diagram_modules()) > 40
    assert [f"{d}{m}" for d, m in diagram_modules()
            if not (SRC / d / m).exists() and not (SRC / "devbin" / m).exists()] == []


def test_every_dotted_name_in_the_document_exists() -> None:
    assert [n for n in doc_names() if not _name_exists(n)] == []


def test_every_dotted_name_in_the_other_documents_exists() -> None:
    """docs/*.md, README.md and the packages' docstrings name modules and functions that exist (a section
    ``.devbin.meta``, a schema ``devbin.ar-list/1`` and a key ``devbin.functions[]`` are names of another kind)."""
    paths = [*(ROOT / "docs").glob("*.md"), ROOT / "README.md", *(SRC / "devbin").rglob("__init__.py")]
    texts = {p.relative_to(ROOT).as_posix(): p.read_text() for p in paths}
    stale = {(p, m.group(1).rstrip(".")) for p, t in texts.items() for m in _DOTTED.finditer(t)
             if t[m.start() - 1:m.start()] != "." and t[m.end():m.end() + 1] not in ("/", "-", "[")}
    with warnings.catch_warnings():  # a deprecated name (devbin.open_file) still exists: its warning is not news
        warnings.simplefilter("ignore", DeprecationWarning)
        assert sorted(x for x in stale if x[1] != "devbin.__main__" and not _name_exists(x[1])) == []


def test_checker_finds_a_stale_name() -> None:
    """The checks are not blind: a renamed module, a moved file and a vendor folder missing a file fail."""
    assert not _name_exists("devbin.detect")
    assert not _name_exists("devbin.images.record.NoSuchThing")
    assert _name_exists("devbin.images.record.Image")
    assert not _path_exists("link/output_nvidia.py")
    assert _path_exists("targets/<vendor>/link*.py")
    assert not _path_exists("targets/<vendor>/linker.py")


# --------------------------------------------------------------------------- Adding a vendor

def test_vendors_are_constructed_in_one_registry_line() -> None:
    """The registry imports each descriptor's instance and uses those names in one statement, VENDORS."""
    tree = ast.parse((SRC / "devbin/targets/registry.py").read_text(encoding="utf-8"))
    modules = {type(v).__module__ for v in VENDORS}
    instances = {a.asname or a.name for node in tree.body if isinstance(node, ast.ImportFrom) and node.module in modules
                 for a in node.names}
    assert len(instances) == len(VENDORS)
    users = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.stmt)
             and not isinstance(node, ast.ImportFrom | ast.Import | ast.Module)
             and any(isinstance(n, ast.Name) and n.id in instances for n in ast.walk(node))]
    assert len(users) == 1
    line = (SRC / "devbin/targets/registry.py").read_text(encoding="utf-8").splitlines()[users[0] - 1]
    assert line.startswith("VENDORS"), line


def test_no_module_outside_targets_imports_a_vendor_package() -> None:
    packages = tuple(f"devbin.targets.{v}" for v in _vendor_folders())
    bad = []
    for path in sorted((SRC / "devbin").rglob("*.py")):
        mod = ".".join(path.relative_to(SRC).with_suffix("").parts)
        if mod.startswith("devbin.targets"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            found = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            bad += [f"{mod}: {n}" for n in found if n.startswith(packages)]
    assert bad == []


def _abstract_members() -> list[str]:
    return sorted(getattr(Vendor, "__abstractmethods__", frozenset()))


def _backend_members() -> list[str]:
    from devbin.link.backend import LinkBackend
    from devbin.link.output import OutputBackend
    from devbin.load.backend import LoadBackend
    out: list[str] = []
    for proto in (LinkBackend, OutputBackend, LoadBackend):
        out += [n for n in [*vars(proto), *getattr(proto, "__annotations__", {})] if not n.startswith("_")]
    return sorted(set(out))


def test_adding_a_vendor_names_every_member() -> None:
    section = _section("Adding a vendor")
    declared = [n for n, v in vars(Vendor).items() if not n.startswith("_") and not callable(v)]
    declared += list(Vendor.__annotations__)
    members = set(_abstract_members()) | set(declared) | set(_backend_members())
    assert _abstract_members()  # Vendor still has abstract members to check
    assert sorted(m for m in members if f"`{m}`" not in section) == []


def test_adding_a_vendor_names_the_vendor_folder_modules() -> None:
    """Each module kind the section lists in targets/<vendor>/ is one some vendor has."""
    section = _section("Adding a vendor")
    listed = set(re.findall(r"`targets/<vendor>/([a-z_*]+\.py)`", section))
    assert "vendor.py" in listed and "importer.py" in listed
    for name in listed:
        assert any(list((SRC / "devbin/targets" / v).glob(name)) for v in _vendor_folders()), name


#: Source files outside targets/intel/ and the format readers (formats/) the Intel descriptor's commits
#: touched (git log --no-merges --name-only on the intel branch, merged at 'Merge branch intel'):
#: the registry line, the machine's EM_ constant and the kind's word, and three one-time generalisations
#: of generic code (Vendor.arch_from_elf, the scan asking it, a standard attribute for spill bytes).
INTEL_TOUCHED = {
    "src/devbin/targets/registry.py": "registry",
    "src/devbin/formats/elf/constants.py": "constant",
    "src/devbin/images/record.py": "kind",
    "src/devbin/targets/vendor.py": "once",
    "src/devbin/images/scan.py": "once",
    "src/devbin/model/attributes.py": "once",
}


def test_adding_a_vendor_lists_what_intel_touched() -> None:
    section = _section("Adding a vendor")
    for path, role in INTEL_TOUCHED.items():
        short = path.removeprefix("src/devbin/")
        assert f"`{short}`" in section, path
        assert (ROOT / path).exists()
        if role != "once":
            assert short in section.split("### Before and after")[0], f"{path} is a step of the list"


@pytest.mark.parametrize("vendor", VENDORS, ids=lambda v: v.name)
def test_each_vendor_has_the_listed_files(vendor: Vendor) -> None:
    folder = SRC / "devbin/targets" / type(vendor).__module__.split(".")[2]
    assert (folder / "__init__.py").exists() and (folder / "vendor.py").exists() and (folder / "importer.py").exists()
    for member in ("link_backend", "load_backend", "driver_backend"):
        module = getattr(vendor, member)
        if module:
            assert importlib.util.find_spec(module) is not None, (vendor.name, member, module)
            assert module.startswith(type(vendor).__module__.rpartition(".")[0] + "."), (vendor.name, module)
