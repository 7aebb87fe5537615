"""The public command-line surface (issue 14): every command's text and JSON on the project's own inputs
(goldens), every JSON output against its shipped schema, ``--image`` round trips, ``--arch`` against
``cuobjdump -arch``, exit statuses and streams.

Goldens live in tests/golden/surface/; ``DEVBIN_UPDATE_GOLDEN=1 python3 -m pytest tests/test_cli_surface.py``
rewrites them (tests/golden/README.md).  The inputs are the shipped samples (src/devbin/samples/) and
what ``devbin tour`` builds from them, copied into one folder and named relative to it, so that the
outputs do not depend on where the test runs.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import require_tool
from devbin.cli import schema_cmd
from devbin.cli.main import COMMANDS
from devbin.formats.ar.writer import ArMember, write_archive
from devbin.formats.bundle import write_bundle
from devbin.formats.fatbin import FatbinImage, write_fatbin
from devbin.formats.fatbin import constants as FC
from devbin.formats.offload import OffloadImage, write_offload_binary
from devbin.formats.offload import constants as OC
from devbin.images import find_image, scan
from devbin.targets.registry import arch_option_matches

from tests.runners import ROOT, cli, cli_err, run_tool

SAMPLES = Path(__file__).parents[1] / "src" / "devbin" / "samples"
GOLDEN = Path(__file__).parent / "golden" / "surface"
UPDATE = bool(os.environ.get("DEVBIN_UPDATE_GOLDEN"))


#: Keys whose values are wall-clock times: set to 0 in the goldens.
_TIMES = re.compile(r'("(?:seconds|\w+_s)": )[0-9.e+-]+')
_TIME_TEXT = re.compile(r"\d+\.\d+ ms")
#: A ``--time-trace`` line (``  {name:10} {ms:9.3f} ms``): rewritten whole, so a pass of 10 ms or more
#: (one more digit, one less blank) reads as the golden's.
_TIME_TRACE = re.compile(r"(?m)^  (\S+) +\d+\.\d{3} ms$")


def _stable(text: str) -> str:
    """``text`` without what changes from run to run or release to release: times, devbin's version."""
    from devbin import __version__
    text = text.replace(f"devbin {__version__}", "devbin VERSION")
    text = _TIME_TRACE.sub(lambda m: f"  {m[1]:10} {0:9.3f} ms", text)
    return _TIME_TEXT.sub("0.000 ms", _TIMES.sub(r"\g<1>0", text))


def _golden(name: str, text: str) -> None:
    path = GOLDEN / name
    text = _stable(text)
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"missing golden {path}; run with DEVBIN_UPDATE_GOLDEN=1"
    assert text == path.read_text(), f"output differs from {path} (DEVBIN_UPDATE_GOLDEN=1 regenerates)"


def _validate(command: str, text: str) -> dict[str, Any]:
    """``text`` is one JSON object that its own schema (named by its "schema" key, at the major version the
    shipped schema states) accepts."""
    doc = json.loads(text)
    schema = json.loads(schema_cmd.text(command))
    assert isinstance(doc, dict) and doc["schema"] == schema["properties"]["schema"]["const"]
    jsonschema.Draft202012Validator(schema).validate(doc)
    return doc


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A folder holding the shipped samples and what `devbin tour` writes (in ./tour), as the cwd."""
    root = tmp_path_factory.mktemp("surface")
    for p in SAMPLES.iterdir():
        if p.is_file() and not p.name.endswith(".py"):
            shutil.copy(p, root / p.name)
    old = Path.cwd()
    os.chdir(root)
    try:
        assert cli("tour", "-o", "tour")[0] == 0
        assert cli("pack", "--format", "fatbin", "-o", "sample.fatbin", "--image", "file=sample_sm90.cubin",
                   "--image", "file=sample.ptx")[0] == 0
        yield root
    finally:
        os.chdir(old)


#: name -> (command line, its schema).  Every command (and every `ar` action) that prints JSON is here once.
CASES: dict[str, tuple[list[str], str]] = {
    "list": (["list", "--all", "sample_sm90.cubin", "sample_gfx90a.o", "sample.fatbin", "tour/app.offload",
              "tour/sample_sm90.wrapped", "sample_layer_base.a"], "list"),
    "extract": (["extract", "sample.fatbin", "-o", "out-extract"], "extract"),
    "resources": (["resources", "sample_sm90.cubin", "sample_sm90_rdc.cubin", "sample_gfx90a.o", "sample.fatbin"],
                  "resources"),
    "size": (["size", "sample.fatbin", "tour/app.offload", "sample_gfx90a.o", "sample_layer_base.a", "--keep", "sm_90"],
             "size"),
    "size-diff": (["size", "--diff", "sample.fatbin", "tour/app.offload"], "size-diff"),
    "inspect-cubin": (["inspect", "sample_sm90_rdc.cubin"], "inspect"),
    "inspect-amdgpu": (["inspect", "sample_gfx90a.o"], "inspect"),
    "inspect-fatbin": (["inspect", "sample.fatbin"], "inspect"),
    "callgraph-cubin": (["callgraph", "sample_sm90_rdc.cubin"], "callgraph"),
    "callgraph-offload": (["callgraph", "tour/app.offload"], "callgraph"),
    "select": (["select", "tour/app.offload", "--device", "sm_90", "--explain"], "select"),
    "prune": (["prune", "sample.fatbin", "--keep", "sm_90", "--dry-run"], "prune"),
    "pack": (["pack", "--check-only", "--image", "file=sample_sm90.cubin", "--image", "file=sample.ptx",
              "--image", "file=sample_gfx90a.o"], "pack"),
    "link": (["link", "sample_link_kern.o", "sample_link_lib.o", "--time-trace"], "link"),
    "load": (["load", "sample_load_user.so", "sample_load_lib.so"], "load"),
    "annotate": (["annotate", "sample_gfx90a.o", "-o", "out-annotate.o"], "annotate"),
    "ar-list": (["ar", "list", "tour/device-libs.a"], "ar-list"),
    "ar-symbols": (["ar", "symbols", "tour/device-libs.a", "--target", "gfx90a:xnack+", "--chain"], "ar-symbols"),
    "ar-symbols-one": (["ar", "symbols", "tour/device-libs.a", "--target", "gfx90a"], "ar-symbols"),
    "ar-resolve": (["ar", "resolve", "tour/device-libs.a", "--target", "gfx90a:xnack+", "-u", "cos16"], "ar-resolve"),
    "ar-view": (["ar", "view", "tour/device-libs.a", "--target", "gfx90a:xnack+", "-o", "out-view"], "ar-view"),
    "ar-embed": (["ar", "embed", "tour/device-libs.a", "--into", "sample_load_lib.so", "-o", "out-embed.so"],
                 "ar-embed"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden_text_and_json(name: str, work: Path) -> None:
    argv, schema = CASES[name]
    for fmt in ("txt", "json"):
        for p in work.glob("out-*"):  # writers refuse nothing here, but start each run from a clean folder
            shutil.rmtree(p) if p.is_dir() else p.unlink()
        code, text = cli(*argv, *(["--json"] if fmt == "json" else []))
        assert code == 0, text
        if fmt == "json":
            _validate(schema, text)
        _golden(f"{name}.{fmt}", text)


@pytest.mark.parametrize("name", ["callgraph-cubin", "callgraph-offload"])
def test_golden_callgraph_svg(name: str, work: Path) -> None:
    """``callgraph --svg OUT``: the picture (golden) and, printed, the same text and JSON as without it."""
    argv, _ = CASES[name]
    for fmt in ("txt", "json"):
        out = work / "out-graph.svg"
        if out.exists():
            out.unlink()
        code, text = cli(*argv, "--svg", out.name, *(["--json"] if fmt == "json" else []))
        assert code == 0, text
        _golden(f"{name}.{fmt}", text)
        _golden(f"{name}.svg", out.read_text())


def test_tour_json_follows_its_schema(tmp_path: Path) -> None:
    code, text = cli("tour", "-o", str(tmp_path / "t"), "--json")
    assert code == 0
    _validate("tour", text)
    code, again = cli("tour", "--out", str(tmp_path / "t2"), "--json")  # the old name still works
    assert code == 0 and json.loads(again).keys() == json.loads(text).keys()


def test_every_json_command_has_a_schema_and_a_case() -> None:
    names = schema_cmd.names()
    for name in names:
        jsonschema.Draft202012Validator.check_schema(json.loads(schema_cmd.text(name)))
    covered = {schema for _, schema in CASES.values()} | {"tour", "cc", "load-cuda"}  # tour, cc, load-cuda: below
    assert set(names) == covered
    src = Path(__file__).parents[1] / "src" / "devbin" / "cli"
    dumped = set(re.findall(r'dump\("([a-z-]+)"', "".join(p.read_text() for p in src.rglob("*.py"))))
    # devbin load --backend <driver>: dump(f"load-{vendor.offload_kind}") for each vendor with a driver back end
    from devbin.targets.registry import VENDORS
    dumped |= {f"load-{v.offload_kind}" for v in VENDORS if v.driver_backend}
    assert dumped == set(names)  # every --json goes through cli.common.dump with a schema that ships
    for command in COMMANDS:
        if command in ("schema", "ar"):
            continue
        parser_help = cli_err(command, "--help")[1]
        if "--json" in parser_help:
            assert command in names or f"{command}-" in " ".join(names), command


def test_schema_command_lists_and_prints(capsys: pytest.CaptureFixture[str]) -> None:
    code, text = cli("schema")
    assert code == 0
    _golden("schema.txt", text)
    code, text = cli("schema", "list")
    assert code == 0 and json.loads(text)["properties"]["schema"]["const"] == "devbin.list/1"
    code, text = cli("schema", "no-such")
    assert code == 2 and text == "" and "no schema named" in capsys.readouterr().err


def test_schema_files_state_the_major_version_commands_write() -> None:
    """Each shipped schema's ``schema`` const and ``$id`` carry the major version its command writes
    (devbin.cli.common.SCHEMA_MAJOR; docs/JSON.md's table and changelog): select is at 3, load at 2."""
    from devbin.cli.common import schema_name
    for name in schema_cmd.names():
        schema = json.loads(schema_cmd.text(name))
        major = schema_name(name).rsplit("/", 1)[1]
        assert schema["properties"]["schema"]["const"] == schema_name(name), name
        assert schema["$id"] == f"urn:devbin:schema:{name}:{major}", name
        assert f"`{schema_name(name)}`" in (ROOT / "docs" / "JSON.md").read_text(), name
    assert (schema_name("select"), schema_name("load"), schema_name("list")) == (
        "devbin.select/3", "devbin.load/2", "devbin.list/1")


def test_cc_json_follows_its_schema(tmp_path: Path) -> None:
    clang = require_tool("clang-19")
    src = tmp_path / "k.cl"
    src.write_text("__kernel void k(__global float *x) { x[get_global_id(0)] *= 2.0f; }\n")
    code, text = cli("cc", "--json", "--", clang, "-target", "amdgcn-amd-amdhsa", "-mcpu=gfx90a", "-nogpulib",
                     "-c", "-o", str(tmp_path / "k.o"), str(src))
    assert code == 0
    _validate("cc", text)


def test_load_cuda_schema_accepts_the_drivers_report_shape() -> None:
    """--backend cuda needs a GPU; its report's shape (devbin.targets.nvidia.load_cuda.driver_report) is checked
    here."""
    doc = {"schema": "devbin.load-cuda/1", "lazy_env": "LAZY", "differences": [],
           "kernels": [{"name": "k", "registers": 8, "local": 0, "shared": 0}]}
    _validate("load-cuda", json.dumps(doc))


# --------------------------------------------------------------------------- one key per fact


IMAGE_KEYS = ["address", "vendor", "kind", "arch", "size", "stored_size", "compression"]


def test_an_image_has_the_same_keys_in_every_command(work: Path) -> None:
    listed = {i["address"]: i for i in json.loads(cli("list", "--json", "--all", ".")[1])["images"]}
    docs = {
        "resources": json.loads(cli("resources", "--json", "sample.fatbin", "sample_gfx90a.o")[1])["images"],
        "inspect": json.loads(cli("inspect", "--json", "sample.fatbin")[1])["images"],
        "callgraph": json.loads(cli("callgraph", "--json", "sample_gfx90a.o")[1])["images"],
        "select": json.loads(cli("select", "--json", "sample.fatbin", "--device", "sm_90")[1])["candidates"],
        "prune": json.loads(cli("prune", "--json", "sample.fatbin", "--keep", "sm_90", "--dry-run")[1])["images"],
    }
    for command, images in docs.items():
        assert images, command
        for image in images:
            assert list(image)[:7] == IMAGE_KEYS, command
            address = image["address"].removeprefix("./")
            mine = listed.get(f"./{address}") or listed[address]
            assert {k: image[k] for k in IMAGE_KEYS if k != "address"} == \
                {k: mine[k] for k in IMAGE_KEYS if k != "address"}, (command, address)


def test_callgraph_json_has_one_shape_for_every_input(work: Path) -> None:
    shapes = set()
    for path in ("sample_sm90_rdc.cubin", "sample_gfx90a.o", "tour/app.offload", "sample.fatbin"):
        doc = json.loads(cli("callgraph", "--json", path)[1])
        shapes.add(tuple(doc))
        for image in doc["images"]:
            assert list(image) == [*IMAGE_KEYS, "target_id", "nodes"]
    assert shapes == {("schema", "file", "images", "skipped", "warnings")}


#: ``Resources.to_dict()``'s keys, in order: a function's resources in every command (docs/JSON.md).
RESOURCE_KEYS = ["registers", "sgprs", "vgprs", "agprs", "stack", "frame", "dynamic_stack", "shared", "local",
                 "constant_banks", "params", "spill_instructions", "sgpr_spills", "vgpr_spills", "max_threads",
                 "max_registers"]


def _function_resources(work: Path) -> dict[str, dict[tuple[str, str], dict[str, Any]]]:
    """Every function's ``resources`` object that each command prints, by (file, function)."""
    out: dict[str, dict[tuple[str, str], dict[str, Any]]] = {}
    objects = ("sample_sm90.cubin", "sample_gfx90a.o", "sample_link_kern.o", "sample_link_lib.o",
               "sample_load_user.so", "sample_load_lib.so")
    for command in ("resources", "callgraph", "inspect"):
        got = out.setdefault(command, {})
        for path in objects:
            for image in json.loads(cli(command, "--json", path)[1])["images"]:
                functions = image["functions"] if command == "resources" else image["nodes"] \
                    if command == "callgraph" else image["devbin"]["functions"]
                got.update({(path, f["name"]): f["resources"] for f in functions if f["resources"] is not None})
    link = json.loads(cli("link", "--json", "sample_link_kern.o", "sample_link_lib.o")[1])
    out["link"] = {("sample_link_kern.o", u["kernel"]): u["own"] for u in link["resources"]}
    out["link total"] = {("sample_link_kern.o", u["kernel"]): u["total"] for u in link["resources"]}
    load = json.loads(cli("load", "--json", "sample_load_user.so", "sample_load_lib.so")[1])
    out["load"] = {(Path(s["code_object"]).name, s["name"]): s["resources"] for s in load["symbols"]
                   if s["resources"] is not None}
    return out


def test_a_function_has_the_same_resource_keys_in_every_command(work: Path) -> None:
    from devbin.model.resources import Resources
    assert list(Resources().to_dict()) == RESOURCE_KEYS
    docs = _function_resources(work)
    assert set(docs) == {"resources", "callgraph", "inspect", "link", "link total", "load"}
    for command, functions in docs.items():
        assert functions, command
        for where, res in functions.items():
            assert list(res) == RESOURCE_KEYS, (command, where)
    # and the same values: every command reads Function.resources
    for command in ("resources", "callgraph", "link", "load"):
        for where, res in docs[command].items():
            if where in docs["inspect"]:
                assert res == docs["inspect"][where], (command, where)
    assert docs["resources"].keys() == docs["inspect"].keys()
    assert docs["link"].keys() & docs["inspect"].keys() and docs["load"].keys() & docs["inspect"].keys()
    sm90 = docs["resources"][("sample_sm90.cubin", "saxpy")]
    assert sm90["registers"] == 10 and sm90["sgprs"] is None and sm90["stack"] == 0
    gfx = docs["resources"][("sample_gfx90a.o", "saxpy")]
    assert gfx["registers"] == gfx["vgprs"] and gfx["sgprs"] is not None and gfx["stack"] is None


# --------------------------------------------------------------------------- --image round trips


@pytest.fixture()
def nested(tmp_path: Path) -> Path:
    """A wheel holding an archive (a fatbin, a bundle, an OffloadBinary, a code object) and a bare cubin."""
    cubin = (SAMPLES / "sample_sm90.cubin").read_bytes()
    amd = (SAMPLES / "sample_gfx90a.o").read_bytes()
    ptx = (SAMPLES / "sample.ptx").read_bytes()
    fatbin = write_fatbin([FatbinImage(FC.KIND_ELF, 90, cubin), FatbinImage(FC.KIND_PTX, 90, ptx),
                           FatbinImage(FC.KIND_ELF, 90, cubin, compression="zstd")])
    bundle = write_bundle([("hipv4-amdgcn-amd-amdhsa--gfx90a", amd), ("host-x86_64-unknown-linux-gnu", b"")])
    offload = write_offload_binary([OffloadImage.of(amd, offload_kind=OC.OFK_HIP,
                                                    strings={"triple": "amdgcn-amd-amdhsa", "arch": "gfx90a"})])
    lib = write_archive([ArMember("k.fatbin", fatbin), ArMember("k.hipfb", bundle), ArMember("k.offload", offload),
                         ArMember("k.o", amd, symbols=())])
    whl = tmp_path / "pkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(whl, "w") as z:
        z.writestr("pkg/libk.a", lib)
        z.writestr("pkg/k.cubin", cubin)
    return whl


def test_extract_image_writes_exactly_the_image(nested: Path, tmp_path: Path) -> None:
    code, text = cli("list", "--all", "--json", str(nested))
    assert code == 0
    addresses = [i["address"] for i in json.loads(text)["images"]]
    assert len(addresses) >= 7
    images = list(scan([nested], all=True))
    for n, address in enumerate(addresses):
        folder = tmp_path / f"x{n}"
        code, text = cli("extract", "--image", address, "-o", str(folder), "--json")
        assert code == 0, address
        written = json.loads(text)["written"]
        assert [w["address"] for w in written] == [address]
        assert Path(written[0]["file"]).read_bytes() == bytes(find_image(images, address).data())
        code, listed = cli("list", "--image", address, "--json")  # no PATH: the address's file is read
        assert code == 0 and [i["address"] for i in json.loads(listed)["images"]] == [address]


def test_image_option_on_every_reading_command(nested: Path, work: Path) -> None:
    cubin = f"{nested}!pkg/k.cubin"
    amd = f"{nested}!pkg/libk.a!k.o"
    assert [i["address"] for i in json.loads(cli("resources", "--json", "--image", cubin)[1])["images"]] == [cubin]
    for command in ("inspect", "callgraph"):
        doc = json.loads(cli(command, str(nested), "--image", amd, "--json")[1])
        assert [i["address"] for i in doc["images"]] == [amd] and doc["skipped"] == []
    doc = json.loads(cli("select", str(nested), "--device", "gfx90a", "--image", amd, "--json")[1])
    assert [c["address"] for c in doc["candidates"]] == [amd] and doc["chosen"]["address"] == amd


@pytest.mark.parametrize("argv", [["list"], ["resources"], ["extract", "-o", "x"], ["inspect"], ["callgraph"],
                                  ["select", "--device", "sm_90"]])
def test_unknown_image_address_is_a_usage_error(argv: list[str], nested: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    code, text = cli(*argv, str(nested), "--image", f"{nested}!pkg/nope.cubin")
    err = capsys.readouterr().err
    assert code == 2 and text == "" and err.startswith("devbin: error: --image: no device image at")
    code, text = cli(*argv, str(nested), "--image", "!bad")
    assert code == 2 and text == "" and "bad image address" in capsys.readouterr().err


def test_arch_option(nested: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = json.loads(cli("list", "--json", "--arch", "sm_90", str(nested))[1])
    assert {i["arch"] for i in doc["images"]} == {"sm_90", "compute_90"}
    doc = json.loads(cli("list", "--json", "--arch", "compute_90", "--arch", "gfx90a", str(nested))[1])
    assert {i["arch"] for i in doc["images"]} == {"compute_90", "gfx90a"}
    code, text = cli("list", "--arch", "sm_9x", str(nested))
    assert code == 2 and text == "" and "--arch sm_9x" in capsys.readouterr().err
    takes = arch_option_matches
    assert takes("sm_90a", "sm_90") and takes("sm_90", "sm_90a") and takes("compute_90", "sm_90")
    assert not takes("sm_90", "compute_90") and not takes("sm_100", "sm_10")
    assert takes("gfx90a:xnack+", "gfx90a") and not takes("gfx90a:xnack+", "gfx90a:xnack-")


def test_resources_arch_equals_cuobjdump_arch(tmp_path: Path) -> None:
    nvcc = require_tool("nvcc")
    cuobjdump = require_tool("cuobjdump")
    src = tmp_path / "k.cu"
    src.write_text("__global__ void k(float *x) { x[threadIdx.x] *= 2.0f; }\n"
                   "__device__ int g;\n__global__ void k2(int *x) { x[0] = g; }\n")
    gencode = ["-gencode", "arch=compute_80,code=[sm_80,compute_80]", "-gencode", "arch=compute_90,code=sm_90",
               "-gencode", "arch=compute_90a,code=sm_90a"]
    fatbin, obj = tmp_path / "k.fatbin", tmp_path / "k.o"
    run_tool([nvcc, "-fatbin", *gencode, "-o", str(fatbin), str(src)])
    run_tool([nvcc, "-c", *gencode, "-o", str(obj), str(src)])
    for path in (fatbin, obj):
        for arch in ("sm_80", "sm_90", "sm_90a", "sm_75"):
            theirs = run_tool([cuobjdump, "-arch", arch, "-res-usage", str(path)]).stdout
            code, ours = cli("resources", "--format", "cuobjdump", "--arch", arch, str(path))
            assert code == 0 and ours == theirs, (path.name, arch)
            if arch == "sm_75":  # cuobjdump prints no function and exits 0; devbin too, with a note on stderr
                assert "Function" not in theirs
                continue
            assert "Function _Z1kPf" in ours


# --------------------------------------------------------------------------- exit statuses and streams


#: Every command that reads device code, as run on one FILE (argv with FILE where the path goes).
READERS: dict[str, list[str]] = {
    "list": ["list", "FILE"],
    "extract": ["extract", "FILE", "-o", "OUT"],
    "resources": ["resources", "FILE"],
    "resources-cuobjdump": ["resources", "--format", "cuobjdump", "FILE"],
    "inspect": ["inspect", "FILE"],
    "callgraph": ["callgraph", "FILE"],
    "select": ["select", "FILE", "--device", "sm_90"],
    "prune": ["prune", "FILE", "--keep", "sm_90", "--dry-run"],
    "pack": ["pack", "-o", "OUT/p.offload", "--image", "file=FILE"],
    "link": ["link", "FILE"],
    "load": ["load", "FILE", "--device", "gfx90a"],
    "annotate": ["annotate", "FILE", "-o", "OUT/a.o"],
}


#: Commands that read a file of their own format (a super-archive): no device code there is an error (1).
OTHERS: dict[str, list[str]] = {
    "ar-list": ["ar", "list", "FILE"],
    "ar-symbols": ["ar", "symbols", "FILE", "--target", "gfx90a"],
    "ar-resolve": ["ar", "resolve", "FILE", "--target", "gfx90a", "-u", "f"],
    "ar-extract": ["ar", "extract", "FILE", "--target", "gfx90a", "-o", "OUT/x.a"],
}


def _argv(name: str, path: Path, out: Path, json_: bool) -> list[str]:
    out.mkdir(exist_ok=True)  # these tests are about the input: an output in a missing folder is refused first
    argv = [a.replace("FILE", str(path)).replace("OUT", str(out)) for a in {**READERS, **OTHERS}[name]]
    return [*argv, "--json"] if json_ else argv


@pytest.mark.parametrize("json_", [False, True], ids=["text", "json"])
@pytest.mark.parametrize("name", sorted(READERS))
def test_no_device_code_exits_3_with_one_line(name: str, json_: bool, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    text_file = tmp_path / "notes.txt"
    text_file.write_text("no device code here\n")
    empty_ar = tmp_path / "empty.a"
    empty_ar.write_bytes(b"!<arch>\n")
    for path in (text_file, empty_ar):
        code, out = cli(*_argv(name, path, tmp_path / "out", json_))
        err = capsys.readouterr().err
        assert code == 3, (name, err)
        assert out == "" and err == f"devbin: {path}: does not contain device code\n", name


@pytest.mark.parametrize("name", sorted({**READERS, **OTHERS}))
def test_missing_file_exits_1_with_one_line(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "missing.o"
    code, out = cli(*_argv(name, path, tmp_path / "out", False))
    err = capsys.readouterr().err
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and err.startswith("devbin: error: ") and "missing.o" in err, err


@pytest.mark.parametrize("name", sorted({**READERS, **OTHERS}))
def test_malformed_file_exits_1_with_errors_on_stderr(name: str, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "cut.cubin"
    path.write_bytes((SAMPLES / "sample_sm90.cubin").read_bytes()[:200])
    code, out = cli(*_argv(name, path, tmp_path / "out", False))
    err = capsys.readouterr().err
    assert code == 1, (name, out, err)
    assert "devbin: error: " in err and "cut.cubin" in err
    assert "warning" not in out and "error" not in out  # stdout carries results only


def test_warnings_go_to_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    amd = (SAMPLES / "sample_gfx90a.o").read_bytes()
    lib = tmp_path / "lib.a"
    lib.write_bytes(write_archive([ArMember("good.o", amd), ArMember("bad.o", amd[:len(amd) // 2], symbols=())]))
    for argv in (["list"], ["resources"], ["extract", "-o", str(tmp_path / "x")], ["inspect"], ["callgraph"]):
        code, out = cli(*argv, str(lib))
        err = capsys.readouterr().err
        assert code == 0 and "warning: " not in out and "warning: " in err and "bad.o" in err, argv


def test_link_errors_go_to_stderr(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = cli("link", "sample_link_kern.o")  # the library's functions are missing
    err = capsys.readouterr().err
    assert code == 1 and "error:" not in out and "error: " in err


def test_paths_are_never_cut_in_a_pipe(tmp_path: Path) -> None:
    long_name = "k" * 90 + ".o"
    deep = tmp_path / ("d" * 70)
    deep.mkdir()
    (deep / long_name).write_bytes((SAMPLES / "sample_gfx90a.o").read_bytes())
    code, text = cli("list", str(deep))
    assert code == 0 and str(deep / long_name) in text
    code, text = cli("resources", str(deep))
    assert code == 0 and str(deep / long_name) in text

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    from devbin.cli.render import cell
    name = ".nv.info." + "f" * 40  # a section or function name longer than its column
    assert cell(name, 30, io.StringIO()) == name and cell(name, 30, Tty()) == name[:30]
    assert cell("short", 8, io.StringIO()) == "short   "


def test_version_and_help_are_current() -> None:
    from devbin import __version__
    code, out, _ = cli_err("--version")
    assert code == 0 and out.strip() == f"devbin {__version__}"
    code, top, _ = cli_err("--help")
    assert code == 0
    assert "(later)" not in top and "pack" in top and "link" in top and "load" in top and "Exit status" in top
    for command in COMMANDS:
        text = cli_err(command, "--help")[1]
        assert text.startswith("usage: devbin"), command
    for command in ("list", "extract", "resources", "inspect", "callgraph", "select"):
        text = cli_err(command, "--help")[1]
        assert "--image ADDRESS" in text and "--arch ARCH" in text, command
    assert "-o DIR, --output DIR" in cli_err("tour", "--help")[1] and "--out " not in cli_err("tour", "--help")[1]
    assert "--arch ARCH" in cli_err("link", "--help")[1] and "--device DEVICE" in cli_err("load", "--help")[1]


def test_link_and_load_take_image_addresses(work: Path) -> None:
    """An image inside a package is an input as its own file would be (named by its address)."""
    assert cli("pack", "-o", "inputs.offload", "--image", "file=sample_link_kern.o", "--image",
               "file=sample_link_lib.o", "--image", "file=sample_load_user.so", "--image",
               "file=sample_load_lib.so")[0] == 0
    names = {"sample_link_kern.o": "inputs.offload#0.0", "sample_link_lib.o": "inputs.offload#1.0",
             "sample_load_user.so": "inputs.offload#2.0", "sample_load_lib.so": "inputs.offload#3.0"}

    def renamed(text: str) -> str:
        for file, address in names.items():
            text = text.replace(file, address)
        return _stable(text)

    for files, command in ((["sample_link_kern.o", "sample_link_lib.o"], "link"),
                           (["sample_load_user.so", "sample_load_lib.so"], "load")):
        code, by_file = cli(command, *files, "--json")
        assert code == 0
        images = [a for f in files for a in ("--image", names[f])]
        code, by_address = cli(command, *images, "--json")
        assert code == 0 and _stable(by_address) == renamed(by_file), command
        _validate(command, by_address)
    code, text = cli("pack", "--check-only", "--json", "--image", "file=inputs.offload#1.0,Team=x")
    doc = _validate("pack", text)
    assert code == 0 and [(i["kind"], i["size"]) for i in doc["images"]] == [
        ("amdgpu", (work / "sample_link_lib.o").stat().st_size)]
    assert doc["images"][0]["metadata"]["Team"] == "x"


def test_prune_image_applies_the_selection_to_those_images_only(work: Path) -> None:
    assert cli("pack", "--format", "fatbin", "-o", "three.fatbin", "--image", "file=sample_sm90.cubin",
               "--image", "file=sample_sm90_rdc.cubin", "--image", "file=sample.ptx")[0] == 0
    code, text = cli("prune", "three.fatbin", "--drop", "sm_90", "--image", "three.fatbin#0.1", "-o", "pruned.fatbin",
                     "--json")
    doc = _validate("prune", text)
    assert code == 0 and [(i["address"], i["kept"]) for i in doc["images"]] == [
        ("three.fatbin#0.0", True), ("three.fatbin#0.1", False), ("three.fatbin#0.2", True)]
    left = list(scan([work / "pruned.fatbin"], all=True))
    assert [bytes(i.data()) for i in left] == [bytes(i.data()) for i in scan([work / "three.fatbin"], all=True)
                                               if not str(i.address).endswith("#0.1")]


@settings(max_examples=200, deadline=None)
@given(doc=st.recursive(st.text() | st.integers() | st.booleans() | st.none(),
                        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
                        max_leaves=20),
       indent=st.sampled_from([None, 2]),
       extra=st.sampled_from([[], ["plain"], ["\\u00e9"], ["é"], ["\x01"], ["\u2028"], ["C:\\users"]]))
def test_json_output_writes_non_ascii_as_itself(doc: object, indent: int | None, extra: list[str]) -> None:
    """dump takes the C encoder's ASCII path and falls back when it escaped anything: the same text as
    ensure_ascii=False whatever the strings hold (non-ASCII, control characters, a backslash before u),
    except when the text would hold a character of the text rule (a C1 control, U+2028, a bidi override,
    a lone surrogate): then all escaped, as ensure_ascii=True writes it (devbin.escape.jsontext)."""
    import io
    import json

    from devbin.cli.common import dump, schema_name
    from devbin.escape.text import needs_escape

    out = io.StringIO()
    dump("list", {"doc": doc, "extra": extra}, out, indent=indent)
    obj = {"schema": schema_name("list"), "doc": doc, "extra": extra}
    want = json.dumps(obj, indent=indent, ensure_ascii=False)
    if needs_escape(want, keep="\n"):
        want = json.dumps(obj, indent=indent)
    assert out.getvalue() == want + "\n"
    assert json.loads(out.getvalue()) == obj
