"""Text rendering of report dicts (the JSON output is the dict itself).

Every string of a report is read from a file: :func:`render_elf` applies the text rule
(:func:`devbin.escape.text.visible_tree`) to the whole dict once, before it formats a line.
"""

from __future__ import annotations

import sys
from typing import Any, TextIO

from devbin.escape.text import visible, visible_tree


def cell(text: str, width: int, out: TextIO) -> str:
    """``text`` in a column of ``width``: cut to fit only on a terminal; whole (the row then runs
    longer) when stdout is a pipe or a file, so that no name or path is ever lost there."""
    if len(text) > width and out.isatty():
        return text[:width]
    return f"{text:{width}}"


def count(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and ``noun`` agreeing with it (``1 image``, ``3 images``, ``1,024 files``): the one place text
    output says how many of something there are."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"


def _flags(names: list[str]) -> str:
    short = {"SHF_WRITE": "W", "SHF_ALLOC": "A", "SHF_EXECINSTR": "X", "SHF_MERGE": "M", "SHF_STRINGS": "S",
             "SHF_INFO_LINK": "I", "SHF_LINK_ORDER": "L", "SHF_GROUP": "G", "SHF_TLS": "T", "SHF_COMPRESSED": "C",
             "SHF_EXCLUDE": "E", "SHF_OS_NONCONFORMING": "O"}
    return "".join(short.get(n, "") for n in names) + "".join(f"+{n}" for n in names if n not in short)


def render_elf(r: dict[str, Any], out: TextIO) -> None:
    r = visible_tree(r)  # names, metadata and messages read from the file: no control, override or raw byte
    h = r["header"]
    w = out.write
    w(f"{r['file'] or '<memory>'}: {h['class']} {h['data']}-endian {h['type_name']}, {h['machine_name']} "
      f"({h['machine']}), {h['osabi_name']} ({h['osabi']:#x}) ABI version {h['abiversion']}, "
      f"flags {h['flags']:#010x}, entry {h['entry']:#x}, {h['size']} bytes\n")
    w(f"\nSections ({len(r['sections'])}):\n")
    w("  [Nr] Name                           Type                     Flags    Address  Offset   Size     "
      "Link Info Align\n")
    for s in r["sections"]:
        w(f"  [{s['index']:2}] {cell(s['name'], 30, out)} {cell(s['type_name'], 24, out)} {_flags(s['flags_names']):8} "
          f"{s['addr']:08x} {s['offset']:08x} {s['size']:08x} {s['link']:4} {s['info']:4} {s['addralign']:5}\n")
    if r["segments"]:
        w(f"\nSegments ({len(r['segments'])}):\n")
        w("  Type             Flg Offset   VirtAddr         FileSiz  MemSiz   Align\n")
        for p in r["segments"]:
            fl = ("R" if p["flags"] & 4 else " ") + ("W" if p["flags"] & 2 else " ") + ("E" if p["flags"] & 1 else " ")
            w(f"  {cell(p['type_name'], 16, out)} {fl} {p['offset']:08x} {p['vaddr']:016x} {p['filesz']:08x} "
              f"{p['memsz']:08x} {p['align']:#x}\n")
    tables: dict[str, list[dict[str, Any]]] = {}
    for sym in r["symbols"]:
        tables.setdefault(sym["table"], []).append(sym)
    for name, syms in tables.items():
        w(f"\nSymbols in {name} ({len(syms)}):\n")
        w("  Num  Value            Size     Type         Bind       Vis           Ndx        Name\n")
        for s in syms:
            w(f"  {s['index']:4} {s['value']:016x} {s['size']:8} {s['type_name'][4:]:12} {s['bind_name'][4:]:10} "
              f"{s['visibility_name'][4:]:13} {s['shndx_name'][4:] if s['shndx'] >= 0xFF00 else s['shndx']:<10} "
              f"{s['name']}\n")
    relocs: dict[str, list[dict[str, Any]]] = {}
    for rel in r["relocations"]:
        relocs.setdefault(rel["section"], []).append(rel)
    for name, rels in relocs.items():
        w(f"\nRelocations in {name} ({len(rels)}):\n")
        for x in rels:
            add = "" if x["addend"] is None else f" {x['addend']:+#x}"
            w(f"  {x['offset']:016x} {x['type_name']:28} {x['symbol_name'] or x['symbol']}{add}\n")
    if r["notes"]:
        w(f"\nNotes ({len(r['notes'])}):\n")
        for n in r["notes"]:
            if "error" in n:
                w(f"  {n['section']}: cannot decode: {n['error']}\n")
            else:
                w(f"  {n['section']:24} {n['owner']:16} {n['type_name']:24} {n['size']} bytes\n")
    from devbin.targets.registry import VENDORS
    for v in VENDORS:
        if v.inspect_key and r.get(v.inspect_key):
            w(v.format_inspect_record(r[v.inspect_key]))  # the vendor's own record (devbin inspect)
    if r.get("devbin_error"):
        w(f"\nDevice model: cannot decode: {r['devbin_error']}\n")
    elif r.get("devbin") is not None:
        render_code_object(r["devbin"], out, r.get("devbin_source") or "devbin sections")
    else:
        w("\nDevbin sections: none\n")
    for msg in r.get("warnings", []):
        print(f"warning: {msg}", file=sys.stderr)  # results on stdout, warnings on stderr


_CALLCONV = {0: "default", 1: "kernel", 2: "internal"}


def _value(a: dict[str, Any]) -> str:
    v = a["value"]
    if a["name"] == "callconv" and isinstance(v, int):
        return _CALLCONV.get(v, str(v))
    if a["form"] == "bytes" and isinstance(v, str):  # hex in JSON; show text when it is text
        try:
            text = bytes.fromhex(v).decode("utf-8")
        except (ValueError, UnicodeDecodeError):
            return v
        return repr(text) if text.isprintable() else v
    if a["form"] == "dim3":
        return "x".join(str(x) for x in v)
    if a["form"] == "flag":
        return "yes"
    if isinstance(v, list):
        return "[" + ", ".join(str(x) for x in v) + "]"
    return str(v)


def _type(t: dict[str, Any]) -> str:
    from devbin.model.prototype import type_text
    return type_text(t["kind_raw"], t["size"])


def _proto(p: dict[str, Any]) -> str:
    from devbin.model.prototype import Prototype
    return str(Prototype.from_dict(p))


def render_code_object(d: dict[str, Any], out: TextIO, source: str = "devbin sections") -> None:
    w = out.write
    t = d.get("target")
    w(f"\nDevice model ({source}):\n")
    if t:
        w(f"  target: {t['target_id']} (vendor {t['vendor'] or '?'})\n")
    if d["metadata"]:
        w("  metadata:\n")
        for item in d["metadata"]:
            w(f"    {item['key']} = {item['value']!r}\n" if not isinstance(item["value"], str)
              else f"    {item['key']} = {item['value']}\n")
    w(f"  functions ({len(d['functions'])}):\n")
    for f in d["functions"]:
        where = f"{f['section']}+{f['offset']:#x}, {f['size']} bytes" if f["section"] else "no symbol"
        w(f"    {f['kind']:15} {f['name']}  [{where}]\n")
        attrs = [f"{a['name'] or hex(a['id'])}={_value(a)}" for a in f["attributes"] if a["name"] != "param_layout"]
        if attrs:
            w(f"      {' '.join(attrs)}\n")
        if "params" in f:
            ps = ", ".join(f"{_type(p)}@{p['offset']}" for p in f["params"])
            w(f"      params: {ps}\n")
    cg = d["callgraph"]
    if any(cg[k] for k in ("direct", "indirect_sites", "address_taken", "external", "unknown_blocks")):
        w("  call graph:\n")
        callees: dict[str, list[str]] = {}
        for e in cg["direct"]:
            callees.setdefault(e["caller"], []).append(e["callee"])
        for caller, cs in callees.items():
            w(f"    {caller} -> {', '.join(cs)}\n")
        for e in cg["indirect_sites"]:
            w(f"    {e['caller']} -> (indirect) {_proto(e['prototype'])}\n")
        for e in cg["address_taken"]:
            w(f"    &{e['function']}: {_proto(e['prototype'])}\n")
        if cg["external"]:
            w(f"    external: {', '.join(cg['external'])}\n")
        for b in cg["unknown_blocks"]:
            w(f"    unknown block tag {b['tag']}: {len(b['data']) // 2} bytes\n")
    if d["prototypes"]:
        w("  prototypes:\n")
        for i, p in enumerate(d["prototypes"]):
            w(f"    #{i} {_proto(p)}\n")



def scan_status(failed: list[str]) -> int:
    """The exit status of a scanning command (list, extract, resources): 1, after one error line per
    file on stderr, when a file named on the command line gave no image and only warnings; else 0."""
    for path in failed:
        print(f"devbin: error: {visible(path)}: no device image could be read (see the warning)", file=sys.stderr)
    return 1 if failed else 0
