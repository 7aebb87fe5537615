"""One escaping rule per output format (issue 24, defect 6, build item 3): the rules of
:mod:`devbin.escape` one by one (property tests where a rule has an invariant), then every command
that renders names, IDs, metadata or paths read from a file, on inputs crafted at test time: a cubin
whose kernel name holds ESC sequences, a newline, backticks, pipes, U+202E, U+0001, HTML and a
formula; a clang offload bundle whose target ID holds a newline; a pack whose metadata value holds a
newline; a file named ``k\\xff.cubin`` (not UTF-8).
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import unicodedata
import zipfile
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path
from xml.etree import ElementTree

import cmarkgfm
import pytest
from cmarkgfm.cmark import Options
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import require_tool
from devbin.escape.csvcell import FORMULA_STARTS
from devbin.escape.csvcell import cell as csv_cell
from devbin.escape.jsontext import Stream, dumps, write
from devbin.escape.markdown import code_cell
from devbin.escape.markup import text as markup
from devbin.escape.text import VisibleWriter, visible, visible_tree
from devbin.formats.bundle import BundleImage, write_bundle

from tests.runners import cli, run_tool

SAMPLES = Path(__file__).parents[1] / "src" / "devbin" / "samples"

#: What the text rule escapes: no character of these categories, and no noncharacter, is ever written.
ESCAPED = {"Cc", "Cf", "Cs", "Zl", "Zp"}

#: A kernel name an attacker might give: terminal escapes (retitle the window, erase and rewrite the
#: line), a newline then a markdown heading and a remote image, backticks and pipes, a right-to-left
#: override, U+0001 (not XML), HTML that would run script, rich markup, and a spreadsheet formula.
HOSTILE = ("=HYPERLINK(1)\x1b]0;pwned\x07\x1b[2K\rX\n# Heading\n![i](http://e.x/i.png)`|x|`\u202eevil\u200b"
           "\u0001</script><img src=x onerror=alert(1)><svg onload=alert(2)>[bold]b[/bold]")


#: Any string, lone surrogates included (what ``os.fsdecode`` gives for bytes that are not UTF-8).
ANY_TEXT = st.text(st.characters(exclude_categories=[]))


def _bad(text: str, keep: str = "") -> list[str]:
    return [c for c in text if c not in keep and (unicodedata.category(c) in ESCAPED or (ord(c) & 0xFFFE) == 0xFFFE)]


# --------------------------------------------------------------------------- the rules


def test_text_rule_examples() -> None:
    assert visible("saxpy") == "saxpy"
    assert visible("a\x1b]0;t\x07\n\tb\r") == "a\\x1b]0;t\\x07\\n\\tb\\r"
    assert visible("x\u202ey\u2066\u200b\ufeff\u2028\x85") == "x\\u202ey\\u2066\\u200b\\ufeff\\u2028\\x85"
    assert visible(os.fsdecode(b"k\xff.cubin")) == "k\\xff.cubin"  # an undecodable byte, as the byte
    assert visible("\ud800\uffff\U000e0001") == "\\ud800\\uffff\\U000e0001"
    assert visible("gr\u00fc\u00dfe \u4e2d \U0001f600") == "gr\u00fc\u00dfe \u4e2d \U0001f600"  # other scripts as is


@settings(max_examples=300, deadline=None)
@given(ANY_TEXT)
def test_text_rule_leaves_no_control_override_or_surrogate(s: str) -> None:
    t = visible(s)
    assert _bad(t) == []
    assert visible(t) == t  # what it writes needs no second pass
    t.encode("utf-8")  # never a UnicodeEncodeError
    if s.isprintable():
        assert t == s


def test_error_messages_use_the_text_rule() -> None:
    from devbin.errors import FormatError, short
    assert short("k\u202eevil\x1b[2J") == "k\\u202eevil\\x1b[2J"
    e = FormatError("bad", fmt="elf", where=os.fsdecode(b"k\xff.o") + ": sec\n[1]")
    assert str(e) == "elf: k\\xff.o: sec\\n[1]: bad"


def test_visible_tree_escapes_every_string_keys_included() -> None:
    doc = {"a\n": [{"name": "k\x1b[2J", "n": 3, "copies": ("x\u202e", None)}], "ok": "saxpy"}
    assert visible_tree(doc) == {"a\\n": [{"name": "k\\x1b[2J", "n": 3, "copies": ["x\\u202e", None]}], "ok": "saxpy"}


_TREES = st.recursive(ANY_TEXT | st.integers() | st.none(),
                      lambda inner: st.lists(inner, max_size=4) | st.dictionaries(ANY_TEXT, inner, max_size=4),
                      max_leaves=20)


def _strings(tree: object) -> list[str]:
    if isinstance(tree, str):
        return [tree]
    if isinstance(tree, dict):
        return [s for k, v in tree.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(tree, list):
        return [s for v in tree for s in _strings(v)]
    return []


@settings(max_examples=300, deadline=None)
@given(_TREES)
def test_visible_tree_fast_path_misses_nothing(tree: object) -> None:
    """The JSON-encoder check that skips the walk never skips a tree with something to escape."""
    shown = visible_tree(tree)
    assert all(_bad(s) == [] for s in _strings(shown))
    assert _strings(shown) == [visible(s) for s in _strings(tree)]


def test_visible_writer_keeps_the_output_structure() -> None:
    out = io.StringIO()
    w = VisibleWriter(out)
    w.write("a\tb\n\x1b[31mred\u202e\n")
    w.write('{"k": "\\u001b"}\n')
    assert out.getvalue() == 'a\tb\n\\x1b[31mred\\u202e\n{"k": "\\u001b"}\n'


def _gfm(md: str) -> str:
    html: str = cmarkgfm.github_flavored_markdown_to_html(md, options=Options.CMARK_OPT_UNSAFE)
    return html


@settings(max_examples=300, deadline=None)
@given(st.text(st.characters(exclude_categories=[]), min_size=1)
       | st.text(st.sampled_from("`|\\ \n<>!*_[]()#"), min_size=1))
def test_markdown_cell_is_one_code_span_in_one_row(s: str) -> None:
    """Rendered by cmark-gfm: the table keeps one body row of two cells, the first one code span showing
    the text rule's form of ``s``, and nothing else (no link, image, heading, HTML) renders."""
    html = _gfm(f"| name | n |\n|---|---|\n| {code_cell(s)} | 1 |\n")
    rows = re.findall(r"<tr>(.*?)</tr>", html, re.S)
    assert len(rows) == 2, html
    cells = re.findall(r"<td>(.*?)</td>", rows[1], re.S)
    assert len(cells) == 2 and cells[1] == "1", html
    m = re.fullmatch(r"<code>(.*)</code>", cells[0], re.S)
    assert m is not None, html
    import html as html_mod
    shown = visible(s) if visible(s).strip(" ") else visible(s).replace(" ", "\\x20")
    assert html_mod.unescape(m.group(1)) == shown, html
    assert not re.search(r"<(a|img|h\d|script|svg)\b", html), html


@settings(max_examples=300, deadline=None)
@given(ANY_TEXT)
def test_csv_cell_never_starts_a_formula(s: str) -> None:
    c = csv_cell(s)
    assert isinstance(c, str) and not c.startswith(FORMULA_STARTS) and _bad(c) == []
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow([c, 1])
    assert list(csv.reader(io.StringIO(buf.getvalue()))) == [[c, "1"]]  # one row, the cell intact
    assert c in (visible(s), "'" + visible(s))


def test_csv_cell_examples() -> None:
    assert [csv_cell(v) for v in ("=1+2", "+x", "-x", "@SUM(A1)", "\tx", "\rx", "saxpy", 7)] == \
        ["'=1+2", "'+x", "'-x", "'@SUM(A1)", "\\tx", "\\rx", "saxpy", 7]


@settings(max_examples=300, deadline=None)
@given(ANY_TEXT)
def test_markup_is_well_formed_xml_in_text_and_attributes(s: str) -> None:
    doc = f'<svg xmlns="http://www.w3.org/2000/svg"><g data-a="{markup(s)}" data-b=\'{markup(s)}\'>' \
          f"<title>{markup(s)}</title></g></svg>"
    root = ElementTree.fromstring(doc.encode("utf-8"))
    g = root[0]
    assert g.get("data-a") == g.get("data-b") == visible(s)
    assert g[0].text == (visible(s) or None)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(ANY_TEXT, ANY_TEXT))
def test_json_rule_keeps_the_true_strings_and_always_encodes(d: dict[str, str]) -> None:
    for indent in (None, 2):
        text = dumps(d, indent=indent)
        text.encode("utf-8")
        assert _bad(text, keep="\n") == []
        assert json.loads(text) == d


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.dictionaries(ANY_TEXT, ANY_TEXT | st.integers()), max_size=150), max_size=4),
       st.sampled_from(["", "é", "\u202e", "\x01", "\udcff"]))
def test_a_streamed_document_is_written_as_dumps_writes_it(files: list[list[dict[str, object]]], late: str) -> None:
    """write() of a document whose arrays are Streams (size --json: files, each file's images) gives the bytes
    dumps() gives of the whole, whatever text comes first or last (spooled, escaped or not)."""
    files = [*files, [{"name": "f" + late}]]
    plain = {"schema": "x", "files": [{"path": str(k), "images": images} for k, images in enumerate(files)],
             "warnings": [late]}
    streamed = {**plain, "files": Stream(lambda: ({"path": str(k), "images": Stream(lambda i=images: iter(i))}
                                                  for k, images in enumerate(files)))}
    out = io.StringIO()
    write(streamed, out)
    assert out.getvalue() == dumps(plain, indent=None)


def test_json_of_a_non_utf8_path_gives_the_byte_back() -> None:
    name = os.fsdecode(b"k\xff.cubin")
    text = dumps({"file": name})
    assert "\\udcff" in text and os.fsencode(json.loads(text)["file"]) == b"k\xff.cubin"


# --------------------------------------------------------------------------- inputs built at test time


@pytest.fixture(scope="module")
def hostile_cubin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cubin built by nvcc whose kernel's name is then overwritten, in place and at the same length
    (symbol and section names alike), with :data:`HOSTILE`."""
    nvcc = require_tool("nvcc")
    tmp = tmp_path_factory.mktemp("hostile")
    placeholder = "k" + "A" * 200
    (tmp / "k.cu").write_text(f'extern "C" __global__ void {placeholder}(float *p) {{ p[0] = 1.0f; }}\n')
    run_tool([nvcc, "-cubin", "-arch=sm_90", "-o", str(tmp / "k.cubin"), str(tmp / "k.cu")])
    data = (tmp / "k.cubin").read_bytes()
    new = HOSTILE.encode()
    assert data.count(placeholder.encode()) >= 2
    data = data.replace(placeholder.encode(), new + b"A" * (len(placeholder) - len(new)))
    (tmp / "h.cubin").write_bytes(data)
    return tmp / "h.cubin"


NAME = HOSTILE + "A" * (201 - len(HOSTILE.encode()))


def _no_raw(text: str, shown: int = len(visible(NAME))) -> None:
    """Nothing of the text rule in ``text`` but its own newlines, and the name shown in its escaped form
    (its first ``shown`` characters, where the command cuts names)."""
    assert _bad(text, keep="\n") == [], [c for c in _bad(text, keep="\n")]
    assert "# Heading" not in text.splitlines()  # the newline in the name did not start a line
    assert visible(NAME)[:shown] in text


def test_callgraph_text_escapes_the_name(hostile_cubin: Path) -> None:
    code, text = cli("callgraph", str(hostile_cubin))
    assert code == 0
    _no_raw(text)
    assert f"1: ^{visible(NAME)} [" in text


def test_callgraph_dot_escapes_the_name(hostile_cubin: Path) -> None:
    code, text = cli("callgraph", str(hostile_cubin), "--dot")
    assert code == 0 and _bad(text, keep="\n") == []
    assert len(text.splitlines()) == 4  # digraph, node defaults, the kernel, the closing brace


def test_callgraph_svg_is_well_formed_xml(hostile_cubin: Path, tmp_path: Path) -> None:
    svg = tmp_path / "g.svg"
    code, _ = cli("callgraph", str(hostile_cubin), "--svg", str(svg))
    assert code == 0
    root = ElementTree.parse(svg).getroot()  # U+0001 written as is made this fail
    names = [g.get("data-name") for g in root.iter("{http://www.w3.org/2000/svg}g") if g.get("data-name")]
    assert names == [visible(NAME)]
    assert not list(root.iter("{http://www.w3.org/2000/svg}script"))
    assert not list(root.iter("{http://www.w3.org/2000/svg}img")) and not list(root.iter("img"))


def test_resources_text_escapes_the_name(hostile_cubin: Path) -> None:
    for fmt in ([], ["--format", "cuobjdump"]):
        code, text = cli("resources", str(hostile_cubin), *fmt)
        assert code == 0
        _no_raw(text)


def test_inspect_text_escapes_the_name(hostile_cubin: Path) -> None:
    code, text = cli("inspect", str(hostile_cubin))
    assert code == 0
    _no_raw(text)


def test_size_text_escapes_the_name(hostile_cubin: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    code, text = cli("size", str(hostile_cubin))
    assert code == 0
    _no_raw(text, shown=80 - 29 - 3)  # not a terminal: the function column ends at column 80
    code, text = cli("size", str(hostile_cubin), "--wide")
    assert code == 0
    _no_raw(text)


def test_size_csv_neutralises_formulas(hostile_cubin: Path) -> None:
    code, text = cli("size", str(hostile_cubin), "--csv")
    assert code == 0 and _bad(text, keep="\n") == []
    rows = list(csv.DictReader(io.StringIO(text)))
    assert len(rows) == 1
    assert rows[0]["function"] == rows[0]["demangled"] == "'" + visible(NAME)
    for row in rows:
        assert not any(v.startswith(FORMULA_STARTS) for v in row.values())


def test_size_json_keeps_the_true_name(hostile_cubin: Path) -> None:
    code, text = cli("size", str(hostile_cubin), "--json")
    assert code == 0 and _bad(text, keep="\n") == []
    names = [fn["name"] for f in json.loads(text)["files"] for i in f["images"] for fn in i["functions"]]
    assert names == [NAME]


def _bundle(path: Path, target_id: str) -> Path:
    obj = (SAMPLES / "sample_gfx90a.o").read_bytes()
    path.write_bytes(write_bundle([BundleImage(target_id, obj)]))
    return path


#: A bundle target ID with a newline that writes a whole `devbin list` row, markdown and an ESC sequence.
FORGED_ID = ("hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+\nforged.bin amd amdgpu gfx1 1 1 none `x`|y "
             "![i](http://e.x/i.png)\x1b[31m")


def test_list_bundle_target_id_forges_no_row(tmp_path: Path) -> None:
    b = _bundle(tmp_path / "b.hipfb", FORGED_ID)
    code, text = cli("list", str(b))
    assert code == 0 and _bad(text, keep="\n") == []
    lines = text.splitlines()
    assert len(lines) == 3 and lines[-1] == "1 image"
    assert not any(line.startswith("forged") for line in lines)
    assert visible(FORGED_ID) in lines[1]


def test_size_diff_markdown_renders_no_link_image_or_heading(tmp_path: Path, hostile_cubin: Path) -> None:
    """cmark-gfm renders the comment: each table keeps its rows; the names and the architecture (a bundle
    target ID read from the file) are code spans; no image, link or heading comes from them."""
    old, new = tmp_path / "old", tmp_path / "new"
    old.mkdir()
    new.mkdir()
    _bundle(old / "b.hipfb", "hipv4-amdgcn-amd-amdhsa--gfx90a")
    _bundle(new / "b.hipfb", FORGED_ID)
    (new / "h.cubin").write_bytes(hostile_cubin.read_bytes())
    # old has the cubin before its name was overwritten: sm_90 is in both builds, so its functions are rows
    # of the function table (an architecture added or removed whole is one row of the architecture table)
    (old / "h.cubin").write_bytes((hostile_cubin.parent / "k.cubin").read_bytes())
    code, md = cli("size", "--diff", str(old), str(new))
    assert code == 0 and _bad(md, keep="\n") == []
    html = _gfm(md)
    assert not re.search(r"<(a|img|script|svg)\b", html), html
    assert re.findall(r"<h(\d)>", html) == ["3", "4", "4", "4"]  # the report's own headings only
    tables = re.findall(r"<table>(.*?)</table>", html, re.S)
    # head + totals; head + gfx90a removed and the forged target added (sm_90 the same); head + the two names
    assert [len(re.findall("<tr>", t)) for t in tables] == [5, 3, 3]
    import html as html_mod
    codes = [html_mod.unescape(c) for c in re.findall(r"<code>(.*?)</code>", html, re.S)]
    assert visible(FORGED_ID.split("--", 1)[1]) in codes
    assert visible(NAME) in codes


def test_inspect_pack_metadata_newline_forges_no_line(tmp_path: Path) -> None:
    pkg = tmp_path / "p.offload"
    value = "kernels\nProducer: forged\x1b[2J"
    code, _ = cli("pack", "-o", str(pkg), "--image", f"file={SAMPLES / 'sample_gfx90a.o'},Team={value}")
    assert code == 0
    code, text = cli("inspect", str(pkg))
    assert code == 0 and _bad(text, keep="\n") == []
    assert f"  Team: {visible(value)}" in text.splitlines()
    assert not any(line.strip() == "Producer: forged" or line.startswith("Producer: forged")
                   for line in text.splitlines())


# --------------------------------------------------------------------------- a file name that is not UTF-8


@pytest.fixture
def non_utf8_file(tmp_path: Path) -> Path:
    folder = tmp_path / "dir"
    folder.mkdir()
    raw = os.path.join(os.fsencode(folder), b"k\xff.cubin")
    with open(raw, "wb") as f:
        f.write((SAMPLES / "sample_sm90_rdc.cubin").read_bytes())
    return Path(os.fsdecode(raw))


@pytest.mark.parametrize("where", ["file", "folder"])
def test_size_html_of_a_non_utf8_file_name(where: str, non_utf8_file: Path, tmp_path: Path) -> None:
    page = tmp_path / "r.html"
    target = non_utf8_file if where == "file" else non_utf8_file.parent
    code, _ = cli("size", str(target), "--html", str(page))
    assert code == 0
    text = page.read_text(encoding="utf-8")
    assert "k\\xff.cubin" in text


def test_callgraph_svg_and_json_of_a_non_utf8_file_name(non_utf8_file: Path, tmp_path: Path) -> None:
    svg = tmp_path / "g.svg"
    code, text = cli("callgraph", str(non_utf8_file), "--svg", str(svg))
    assert code == 0 and text.startswith("callgraph for sm_90:")
    root = ElementTree.parse(svg).getroot()
    assert any("k\\xff.cubin" in (t.text or "") for t in root.iter("{http://www.w3.org/2000/svg}text"))
    code, text = cli("callgraph", str(non_utf8_file), "--json")
    assert code == 0
    text.encode("utf-8")
    assert os.fsencode(json.loads(text)["file"]).endswith(b"k\xff.cubin")


def test_cli_non_utf8_file_name_in_a_subprocess(non_utf8_file: Path, tmp_path: Path) -> None:
    """The real console: stdout encoded as UTF-8 strictly; no traceback, the byte shown as ``\\xff``."""
    src = Path(__file__).parents[1] / "src"
    env = {**os.environ, "PYTHONPATH": str(src), "PYTHONIOENCODING": "utf-8:strict"}
    for argv in (["size", str(non_utf8_file)], ["list", str(non_utf8_file)], ["size", str(non_utf8_file), "--json"],
                 ["size", str(non_utf8_file.parent), "--html", str(tmp_path / "r.html")]):
        res = subprocess.run(["python3", "-m", "devbin", *argv], capture_output=True, env=env, check=False)
        assert res.returncode == 0 and b"Traceback" not in res.stderr, (argv, res.stderr[-2000:])
        if argv[0] == "list" or "--json" in argv:  # the path is printed: the byte shown, not written raw
            assert b"\\xff" in res.stdout or b"\\udcff" in res.stdout, (argv, res.stdout)


# --------------------------------------------------------------------------- in a browser


class _Elements(HTMLParser):
    """The elements of a page as a browser left it: how many of each tag, and any event-handler attribute."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: Counter[str] = Counter()
        self.handlers: list[tuple[str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags[tag] += 1
        self.handlers += [(tag, k) for k, _ in attrs if k.startswith("on")]


def test_size_html_in_headless_chromium_runs_no_injected_script(hostile_cubin: Path, tmp_path: Path) -> None:
    """The page of ``size --html`` on a folder holding the hostile cubin (a function name with
    ``</script>``, ``<img onerror>`` and ``<svg onload>``), a bundle whose target ID holds the same and a
    wheel with such a member name, opened in headless Chromium: the page's own script ran (the breadcrumb
    is filled in), no element came from a name, and the names are shown as text."""
    exe = require_tool("chromium", versions=())
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "h.cubin").write_bytes(hostile_cubin.read_bytes())
    bundle_id = "hipv4-amdgcn-amd-amdhsa--gfx90a:</script><svg onload=alert(4)>\x01"
    _bundle(folder / "b.hipfb", bundle_id)
    member = "pkg/lib/</script><img src=x onerror=alert(3)>\u202e.cubin"
    with zipfile.ZipFile(folder / "pkg-1.0-py3-none-any.whl", "w") as z:
        z.writestr(member, (SAMPLES / "sample_sm90.cubin").read_bytes())
    page = tmp_path / "r.html"
    code, _ = cli("size", str(folder), "--html", str(page))
    assert code == 0
    argv = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
            f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", page.as_uri()]
    dom = run_tool(argv, check=False).stdout
    assert '<nav id="crumbs"><a data-i="0">all device code</a></nav>' in dom, dom[:2000]
    elements = _Elements()
    elements.feed(dom)
    assert elements.tags["script"] == 1 and elements.tags["img"] == 0  # the page's own script, no image
    assert elements.handlers == []  # no onerror, onload or other handler attribute on any element
    import html as html_mod
    text = html_mod.unescape(dom)
    assert visible(NAME) in text
    assert visible(bundle_id.split("--", 1)[1]) in text
    assert visible(member) in text
