"""Build and read super-archives: one GNU ar file holding N per-target libraries (docs/FORMAT.md §16).

  devbin ar create -o lib.a --target gfx90a=libgfx90a.a --target gfx1030=libgfx1030.a
  devbin ar create -o lib.a --target gfx90a=k.o l.o --target generic=g.bc --chain gfx90a=gfx90a:generic
  devbin ar create -o lib.a --target pvc=k.pvc.zebin --target acm-g10=k.acm-g10.zebin --target spir64=k.spv
  devbin ar add lib.a --target gfx942=libgfx942.a -o lib2.a
  devbin ar remove lib.a gfx1030 -o lib2.a
  devbin ar list lib.a            (or a host .so that embeds one; --json)
  devbin ar extract lib.a --target gfx90a -o libgfx90a.a
  devbin ar symbols lib.a --target gfx90a [--chain] [--json]
  devbin ar resolve lib.a --target gfx1030 [--object user.o] [-u SYMBOL] [--explain SYMBOL] [--json]
  devbin ar view lib.a --target gfx1030 -o DIR        (one archive per chain level, for ld.lld)
  devbin ar view lib.a --target gfx1030 --single -o view.a
  devbin ar embed lib.a --into libruntime.so -o libruntime.new.so

--target T=PATH [PATH...]: each PATH is a standard archive (its members, in order) or a loose
file (one member, named after the file); repeating --target T appends.  --chain T=a:b:c stores
T's fallback chain (":" splits, except before a target-id feature such as "xnack+", so
gfx90a:xnack+:generic is two entries; "," also splits).  The "/" index lists the first
target's symbols unless --index-target or --no-index say otherwise.  No command overwrites one
of its inputs.

Chains: a target without --chain falls back by the vendors' rules among the archive's targets
(gfx1030 -> gfx10-3-generic -> generic; sm_86 -> sm_80 -> compute_86 -> ... -> generic;
acm-g11 -> acm-g10 -> dg2 -> spir64 -> generic: Intel devices by IP version or ocloc name, then
SPIR-V under the target name spir64).  A target's symbols are its members' defined globals; a
zebin's are its kernels (IGC writes them local, so ar s indexes none), a SPIR-V module's its
entry points.
resolve pulls members as a linker given one archive per chain level in order would: the first
definition in chain order wins and every pulled member's references are looked up from the
top of the chain again (docs/FORMAT.md §16.5).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any, TextIO

from devbin.cli.common import dump, note
from devbin.escape.text import visible, visible_tree

HELP = "build, list, extract and embed multi-target super-archives (one copy of each unique member)"

_FEATURE = re.compile(r"^[A-Za-z0-9_]+[+-]$")


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="ar_command", metavar="ACTION")
    sub.required = True

    def targets_args(q: argparse.ArgumentParser, required: bool) -> None:
        q.add_argument("--target", action="append", nargs="+", required=required, metavar="T=PATH",
                       help="target T from an archive or loose files (T=PATH [PATH...]; repeatable)")
        q.add_argument("--chain", action="append", default=[], metavar="T=a:b:c", help="fallback chain of target T")

    c = sub.add_parser("create", help="build a super-archive from per-target archives or objects")
    targets_args(c, True)
    c.add_argument("-o", "--output", required=True, help="the super-archive to write")
    idx = c.add_mutually_exclusive_group()
    idx.add_argument("--index-target", metavar="T", help="the target the '/' index lists (default: the first)")
    idx.add_argument("--no-index", action="store_true", help="write no '/' index")
    storage_args(c, "plain")

    a = sub.add_parser("add", help="add targets to a super-archive (written to a new file)")
    a.add_argument("archive")
    targets_args(a, True)
    a.add_argument("-o", "--output", required=True)
    storage_args(a, None)

    r = sub.add_parser("remove", help="remove targets from a super-archive (written to a new file)")
    r.add_argument("archive")
    r.add_argument("targets", nargs="+", metavar="TARGET")
    r.add_argument("-o", "--output", required=True)
    storage_args(r, None)

    ls = sub.add_parser("list", help="targets, members, sharing and bytes saved")
    ls.add_argument("archive", help="a super-archive, or a host ELF that embeds one")
    ls.add_argument("--json", action="store_true")

    x = sub.add_parser("extract", help="write one target as a standard archive")
    x.add_argument("archive")
    x.add_argument("--target", required=True)
    x.add_argument("-o", "--output", required=True)

    s = sub.add_parser("symbols", help="one target's symbol table")
    s.add_argument("archive")
    s.add_argument("--target", required=True)
    s.add_argument("--chain", action="store_true",
                   help="every symbol visible through the target's chain, with the level defining it")
    s.add_argument("--json", action="store_true")

    rv = sub.add_parser("resolve", help="pull members for symbols/objects through a target's fallback chain")
    rv.add_argument("archive")
    rv.add_argument("--target", required=True)
    rv.add_argument("-u", "--undefined", dest="symbols", action="append", default=[], metavar="SYMBOL",
                    help="a symbol to resolve, as a linker's -u (repeatable)")
    rv.add_argument("--object", action="append", default=[], metavar="FILE",
                    help="an ELF object whose references are resolved (the user's code; repeatable)")
    rv.add_argument("--explain", action="append", default=[], metavar="SYMBOL",
                    help="show the walk for SYMBOL through the chain, and what its member pulled in (repeatable)")
    rv.add_argument("--json", action="store_true")

    v = sub.add_parser("view", help="a target's chain as standard archives a linker (ld.lld) takes")
    v.add_argument("archive")
    v.add_argument("--target", required=True)
    v.add_argument("-o", "--output", required=True, help="a folder (one archive per level), or a file with --single")
    v.add_argument("--single", action="store_true", help="one archive, members in chain order")
    v.add_argument("--json", action="store_true")

    e = sub.add_parser("embed", help="store a super-archive in a section of a host ELF (e.g. a .so)")
    e.add_argument("archive")
    e.add_argument("--into", required=True, metavar="HOST", help="the host ELF")
    e.add_argument("-o", "--output", required=True)
    e.add_argument("--section", default=None, help="section name (default .devbin.superarchive)")
    e.add_argument("--json", action="store_true")


def storage_args(q: argparse.ArgumentParser, default: str | None) -> None:
    keep = "" if default else " (default: the input archive's)"
    q.add_argument("--storage", choices=("plain", "packed"), default=default,
                   help="plain: members as they are (ar x gives objects); packed: each member one zstd frame "
                        f"against a few sibling targets' members (no '/' index){keep}")
    q.add_argument("--level", type=int, default=19, help="zstd level for --storage packed (1-22, default 19)")
    q.add_argument("--no-delta", action="store_true", help="packed: compress each member on its own (no deltas)")
    q.add_argument("--max-depth", type=int, default=3, metavar="N",
                   help="packed: longest delta chain; reading one member decodes at most N others (default 3)")
    q.add_argument("--layout", choices=("members", "sections"), default="members",
                   help="packed: one frame per member (default), or per-section frames with identical "
                        "sections stored once (layout 1, larger)")


# --------------------------------------------------------------------------- helpers


def _usage(message: str) -> Exception:
    from devbin.errors import UsageError

    return UsageError(message, fmt="ar")


def _split_eq(text: str, what: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise _usage(f"{what} {text!r}: expected T=VALUE")
    return name, value


def parse_chain(value: str) -> tuple[str, ...]:
    """``a:b:c`` (or ``a,b,c``) as entries; a ``:feature+``/``:feature-`` piece stays with the entry before it."""
    if "," in value:
        return tuple(v for v in value.split(",") if v)
    out: list[str] = []
    for piece in value.split(":"):
        if out and _FEATURE.match(piece):
            out[-1] += ":" + piece
        elif piece:
            out.append(piece)
    return tuple(out)


def _load_targets(specs: list[list[str]], chains: list[str], inputs: list[Path]) -> list[Any]:
    from devbin.formats.ar import is_archive
    from devbin.superarchive import InputMember, TargetInput, member_from_object, members_from_archive

    order: list[str] = []
    members: dict[str, list[InputMember]] = {}
    for spec in specs:
        name, first = _split_eq(spec[0], "--target")
        paths = ([first] if first else []) + spec[1:]
        if not paths:
            raise _usage(f"--target {name}: no input files")
        if name not in members:
            order.append(name)
            members[name] = []
        for p in paths:
            path = Path(p)
            data = path.read_bytes()
            inputs.append(path)
            if is_archive(data):
                members[name] += members_from_archive(data, where=str(path))
            else:
                members[name].append(member_from_object(path.name, data))
    chain_of: dict[str, tuple[str, ...]] = {}
    for text in chains:
        name, value = _split_eq(text, "--chain")
        if name not in members:
            raise _usage(f"--chain {name}: no --target {name}")
        chain_of[name] = parse_chain(value)
    return [TargetInput(n, tuple(members[n]), chain_of.get(n, ())) for n in order]


def _write(path: str, data: bytes, inputs: list[Path]) -> None:
    """``data`` to ``path`` whole or not at all, never over one of ``inputs`` (devbin.binary.output)."""
    from devbin.binary.output import write_file

    write_file(path, data, inputs=inputs)


def _check(path: str, inputs: list[Path]) -> None:
    """Refuse an ``-o`` naming an input before the work (the write checks again)."""
    from devbin.binary.output import check_destination

    check_destination(path, inputs)


def _open(path: str) -> Any:
    from devbin.superarchive import open as sa_open

    return sa_open(Path(path).read_bytes(), where=path)


# --------------------------------------------------------------------------- actions


def _create(args: argparse.Namespace, out: TextIO) -> int:
    from devbin.superarchive import create

    inputs: list[Path] = []
    targets = _load_targets(args.target, args.chain, inputs)
    _check(args.output, inputs)
    index: str | bool | None = False if args.no_index else args.index_target
    with _packing(args.storage) as progress:
        data = create(targets, index=index, progress=progress, **_storage(args, args.storage))
    _write(args.output, data, inputs)
    return 0


def _storage(args: argparse.Namespace, kind: str) -> dict[str, Any]:
    if kind != "packed":
        return {"storage": "plain"}
    return {"storage": "packed", "level": args.level, "delta": not args.no_delta, "max_depth": args.max_depth,
            "layout": 2 if args.layout == "members" else 1}


def _packing(kind: str) -> Any:
    """A progress bar on stderr while packing (only on a terminal): packing takes seconds per megabyte."""
    from contextlib import nullcontext

    from devbin.cli.progress import progress_bar

    return progress_bar("packing", bytes=False) if kind == "packed" else nullcontext(None)


def _rewrite(lib: Any, targets: list[Any], args: argparse.Namespace, index: str | bool) -> bytes:
    """``targets`` written with the input's storage kind (packed when every member is), or --storage."""
    from devbin.superarchive import create

    records = lib.records()
    kept = "packed" if records and all(r.storage.kind == "packed" for r in records) else "plain"
    kind = args.storage or kept
    if kind == "packed":
        index = False
    elif kept == "packed" and index is False:
        index = True  # packed -> plain: the usual index of the first target
    with _packing(kind) as progress:
        return bytes(create(targets, index=index, extra=lib.manifest.extra, progress=progress,
                            **_storage(args, kind)))


def _add(args: argparse.Namespace, out: TextIO) -> int:
    lib = _open(args.archive)
    inputs: list[Path] = [Path(args.archive)]
    new = _load_targets(args.target, args.chain, inputs)
    _check(args.output, inputs)
    have = set(lib.targets())
    for t in new:
        if t.name in have:
            raise _usage(f"target {t.name!r} is already in {args.archive}; remove it first")
    targets = lib.to_targets() + new
    index: str | bool = lib.index_target if lib.index_target is not None else False
    _write(args.output, _rewrite(lib, targets, args, index), inputs)
    return 0


def _remove(args: argparse.Namespace, out: TextIO) -> int:
    from dataclasses import replace

    lib = _open(args.archive)
    _check(args.output, [Path(args.archive)])
    for t in args.targets:
        lib.target(t)  # a clear error for an unknown target
    targets = [t for t in lib.to_targets() if t.name not in args.targets]
    for i, t in enumerate(targets):
        dropped = [c for c in t.chain if c in args.targets]
        if dropped:
            kept = tuple(c for c in t.chain if c not in args.targets)
            targets[i] = replace(t, chain=() if kept in ((), (t.name,)) else kept)
            note(f"{', '.join(dropped)} removed from the chain of {t.name}")
    index: str | bool = False
    if lib.index_target is not None:
        index = lib.index_target if lib.index_target not in args.targets else True
    _write(args.output, _rewrite(lib, targets, args, index), [Path(args.archive)])
    return 0


def list_facts(lib: Any) -> dict[str, Any]:
    """The facts `devbin ar list` prints (also its --json): ``size`` is a member's stored bytes,
    ``content_size`` its decoded bytes (the same for plain storage)."""
    from devbin.superarchive.packed import content_size_of

    sharing = lib.sharing()
    saved = lib.input_bytes - lib.stored_bytes
    return {
        "embedded": lib.embedded,
        "index_target": lib.index_target,
        "index": lib.index_status(),
        "targets": [
            {"name": t.name, "chain": list(lib.chain(t.name)), "chain_declared": bool(t.chain),
             "members": len(t.members), "symbols": len(t.symbols)}
            for t in lib.manifest.targets
        ],
        "members": [
            {"ordinal": r.ordinal, "name": r.name, "size": r.size, "content_size": content_size_of(r),
             "sha256": r.sha256.hex(), "storage": r.storage.kind, "targets": list(sharing[r.ordinal])}
            for r in lib.records()
        ],
        "input_bytes": lib.input_bytes,
        "stored_bytes": lib.stored_bytes,
        "saved_bytes": saved,
        "archive_bytes": lib.archive.size,
    }


def _list(args: argparse.Namespace, out: TextIO) -> int:
    facts = list_facts(_open(args.archive))
    if args.json:
        dump("ar-list", facts, out)
        return 0
    facts = visible_tree(facts)  # the text rule on every name read from the archive
    refs = sum(t["members"] for t in facts["targets"])
    where = " (embedded)" if facts["embedded"] else ""
    out.write(f"{args.archive}{where}: super-archive, {len(facts['targets'])} targets, "
              f"{len(facts['members'])} unique members ({refs} uses), index: "
              f"{facts['index_target'] or 'none'} ({facts['index']})\n")
    out.write("targets:\n")
    width = max((len(t["name"]) for t in facts["targets"]), default=6)
    for t in facts["targets"]:
        chain = " -> ".join(t["chain"]) + ("" if t["chain_declared"] else "  (default)")
        out.write(f"  {t['name']:<{width}}  {t['members']:>4} members  {t['symbols']:>5} symbols  chain: {chain}\n")
    out.write("members:\n")
    nwidth = max((len(m["name"]) for m in facts["members"]), default=4)
    packed = any(m["size"] != m["content_size"] or m["storage"] != "plain" for m in facts["members"])
    if packed:
        out.write(f"  {'':<{len(str(len(facts['members']))) + 2}} {'name':<{nwidth}}  "
                  f"{'stored -> decoded':>22}  storage  sha256(stored)  targets\n")
    for m in facts["members"]:
        size = f"{m['size']:>9}" + (f" -> {m['content_size']:>9}" if packed else "")
        out.write(f"  [{m['ordinal']}] {m['name']:<{nwidth}}  {size}  {m['storage']:<{7 if packed else 5}}  "
                  f"{m['sha256'][:12]}  {' '.join(m['targets'])}\n")
    pct = 100.0 * facts["saved_bytes"] / facts["input_bytes"] if facts["input_bytes"] else 0.0
    out.write(f"bytes: {facts['input_bytes']} in the targets' members, {facts['stored_bytes']} stored, "
              f"{facts['saved_bytes']} saved ({pct:.1f}%); archive {facts['archive_bytes']} bytes\n")
    return 0


def _extract(args: argparse.Namespace, out: TextIO) -> int:
    from devbin.superarchive.views import target_archive

    lib = _open(args.archive)
    _write(args.output, target_archive(lib, args.target), [Path(args.archive)])
    return 0


def _symbols(args: argparse.Namespace, out: TextIO) -> int:
    lib = _open(args.archive)
    if args.chain:
        chain = lib.chain(args.target)
        rows: list[dict[str, Any]] = []
        seen: set[str] = set()
        for level in chain:
            for sym in lib.symbols(level):
                if sym.name not in seen:
                    seen.add(sym.name)
                    rows.append({"name": sym.name, "level": level, "ordinal": sym.ordinal, "member": sym.member})
        if args.json:
            dump("ar-symbols", {"target": args.target, "chain": list(chain), "symbols": rows}, out)
            return 0
        out.write(f"chain: {' -> '.join(chain)}\n")
        for r in visible_tree(rows):
            out.write(f"{r['name']} in {r['level']}({r['member']}) [{r['ordinal']}]\n")
        return 0
    syms = lib.symbols(args.target)
    if args.json:
        dump("ar-symbols", {"target": args.target, "chain": [args.target], "symbols": [
            {"name": s.name, "level": args.target, "ordinal": s.ordinal, "member": s.member} for s in syms]}, out)
        return 0
    for s in syms:
        out.write(f"{visible(s.name)} in {visible(s.member)} [{s.ordinal}]\n")
    return 0


def _definition(d: Any) -> dict[str, Any] | None:
    if d is None:
        return None
    return {"level": d.level, "member": d.member, "ordinal": d.ordinal}


def _lookup_json(lk: Any) -> dict[str, Any]:
    return {"symbol": lk.symbol, "needed_by": lk.needed_by, "outcome": lk.outcome,
            "taken": _definition(lk.taken), "defined_by": lk.defined_by,
            "walk": [{"level": level, "definition": _definition(d)} for level, d in lk.walk]}


def resolve_facts(res: Any, explain: list[str]) -> dict[str, Any]:
    """The facts `devbin ar resolve` prints (also its --json)."""
    return {
        "target": res.target,
        "chain": list(res.chain),
        "pulled": [{"level": p.definition.level, "member": p.definition.member, "ordinal": p.definition.ordinal,
                    "symbol": p.symbol, "needed_by": p.needed_by, "references_read": p.references_read}
                   for p in res.pulled],
        "undefined": [{"symbol": s, "referenced_by": list(by)} for s, by in res.undefined],
        "duplicates": [{"symbol": s, "first": a, "second": b} for s, a, b in res.duplicates],
        "explain": {sym: [dict(_lookup_json(lk), depth=depth) for depth, lk in res.explain(sym)] for sym in explain},
    }


def _walk_text(lk: Any) -> str:
    parts: list[str] = []
    for level, d in lk.walk:
        if d is None:
            parts.append(f"{level}: -")
        elif lk.taken is not None and d == lk.taken:
            parts.append(f"{level}: {d.member} [taken]")
        else:
            parts.append(f"{level}: {d.member}")
    return "; ".join(parts)


def _resolve(args: argparse.Namespace, out: TextIO) -> int:
    from devbin.superarchive.resolve import RootObject

    lib = _open(args.archive)
    objects = [RootObject.from_elf(Path(p).name, Path(p).read_bytes()) for p in args.object]
    symbols = list(args.symbols) or ([] if objects else list(args.explain))
    if not symbols and not objects:
        raise _usage("ar resolve: name a -u SYMBOL, an --object or an --explain SYMBOL")
    res = lib.resolve(args.target, symbols, objects)
    facts = resolve_facts(res, list(args.explain))
    if args.json:
        dump("ar-resolve", facts, out)
        return 1 if facts["undefined"] or facts["duplicates"] else 0
    facts = visible_tree(facts)  # the text rule on every name read from the archive
    out.write(f"target {res.target}, chain: {' -> '.join(res.chain)}\n")
    out.write(f"pulled {len(res.pulled)} members:\n")
    for p in facts["pulled"]:
        note = "" if p["references_read"] else "  (not ELF: its references are not read)"
        out.write(f"  {p['level']}({p['member']}) [{p['ordinal']}]  for {p['symbol']} "
                  f"(needed by {p['needed_by']}){note}\n")
    for sym in args.explain:
        rows = res.explain(sym)
        out.write(f"explain {sym}:\n")
        if not rows:
            out.write("  not referenced by anything resolved here\n")
        for depth, lk in rows:
            pad = "  " * (depth + 1)
            if lk.outcome == "pulled" and lk.taken is not None:
                what = f"pulled {lk.taken.label}"
            elif lk.outcome == "defined":
                what = f"already defined by {lk.defined_by}"
            else:
                what = lk.outcome
            out.write(f"{pad}{visible(f'{lk.symbol} (needed by {lk.needed_by}) -> {what}')}\n")
            out.write(f"{pad}  walk: {visible(_walk_text(lk))}\n")
    for u in facts["undefined"]:
        out.write(f"undefined: {u['symbol']} (referenced by {', '.join(u['referenced_by'])})\n")
    for d in facts["duplicates"]:
        out.write(f"duplicate: {d['symbol']} defined by {d['first']} and {d['second']}\n")
    return 1 if facts["undefined"] or facts["duplicates"] else 0


def _view(args: argparse.Namespace, out: TextIO) -> int:
    from devbin.superarchive.views import level_archives, single_archive

    lib = _open(args.archive)
    inputs = [Path(args.archive)]
    if args.single:
        _write(args.output, single_archive(lib, args.target), inputs)
        files = [args.output]
    else:
        folder = Path(args.output)
        folder.mkdir(parents=True, exist_ok=True)
        files = []
        for la in level_archives(lib, args.target):
            path = folder / la.file_name
            _write(str(path), la.data, inputs)
            files.append(str(path))
    facts = {"target": args.target, "chain": list(lib.chain(args.target)), "archives": files,
             "link": "ld.lld-19 ... " + " ".join(files)}
    if args.json:
        dump("ar-view", facts, out)
        return 0
    out.write(f"target {args.target}, chain: {' -> '.join(facts['chain'])}\n")
    for f in files:
        out.write(f"  {f}\n")
    out.write(f"link in this order: {facts['link']}\n")
    return 0


def _embed(args: argparse.Namespace, out: TextIO) -> int:
    from devbin.superarchive import SECTION, embed

    data = Path(args.archive).read_bytes()
    _open(args.archive)  # refuse to embed something that is not a valid super-archive
    section = args.section or SECTION
    result = embed(Path(args.into).read_bytes(), data, section=section, where=args.into)
    _write(args.output, result, [Path(args.archive), Path(args.into)])
    if args.json:
        dump("ar-embed", {"output": args.output, "section": section, "bytes": len(data)}, out)
    return 0


_ACTIONS = {"create": _create, "add": _add, "remove": _remove, "list": _list, "extract": _extract,
            "symbols": _symbols, "resolve": _resolve, "view": _view, "embed": _embed}


def run(args: argparse.Namespace, out: TextIO) -> int:
    return _ACTIONS[args.ar_command](args, out)
