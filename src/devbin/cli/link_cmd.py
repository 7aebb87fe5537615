"""Link relocatable device code for one target: resolution, dead-code elimination, resources.

  devbin link a.cubin b.cubin libdev.a --arch sm_90 [--kernels k1,k2] [--root SYM]
  devbin link k.o lib.o --arch gfx90a --map link.map --time-trace
  devbin link user.o libs.a --arch gfx90a:xnack+      (a super-archive: its chain for the target)
  devbin link k.o lib.o -o app.so      (ld.lld / nvlink on what was kept, resources written back)

Inputs, in command-line order (then each --image ADDRESS: one image of a container, as
`devbin list --all` names it): device relocatable objects (nvcc -rdc cubins, ptxas -c,
clang -c AMDGPU objects; devbin-annotated or not), host objects carrying device code
(nvcc -rdc -c), ar archives (nvcc -lib, llvm-ar) and super-archives.  Archive members are
pulled only when they define a needed symbol; every archive acts as one group (a later
member's reference can pull from an earlier archive).  Strong beats weak and common;
two strong definitions and undefined references are errors (exit 1) naming every
definer and every referring function.

Roots: all kernels, or --kernels (like nvlink -kernels-used), plus --root.  A function
stays if called from a kept one, or if its address is taken and a reachable indirect
call site has a matching prototype (--keep-address-taken: every address-taken function,
as nvlink keeps them).  Resources per kernel: registers = max over what it
reaches; stack = own frame + deepest call path; recursion marks the stack dynamic
(--stack-budget adds a budget for it); --json gives each kernel's "own" and
"total" resources in the shape every command prints them (docs/JSON.md).  --map writes which member came from where and
why; --time-trace prints each pass's time.  -o and --map are written whole or not at all, and
never over an input (nor --map over -o).

Results on stdout; notes, warnings and link errors on stderr (each as
"error: ..."; --json carries them in "notes", "warnings" and "errors").  Exit
status: 0 linked, 1 link errors, 2 bad arguments, 3 no input holds device code.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, TextIO

from devbin.cli.common import add_image_inputs
from devbin.escape.text import visible, visible_tree

HELP = "link device objects and archives for one target: resolution, dead-code elimination, resource usage"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("inputs", nargs="*", metavar="FILE", help="device objects, host objects, archives, super-archives")
    add_image_inputs(p)
    p.add_argument("--arch", "--target", dest="target", metavar="ARCH",
                   help="sm_90, gfx90a, or a super-archive target such as gfx90a:xnack+ (default: the first object's "
                        "architecture; --target is the old name)")
    p.add_argument("--kernels", metavar="K1,K2", help="the kernels to keep (default: every kernel)")
    p.add_argument("--root", "--keep", dest="keep", action="append", default=[], metavar="SYMBOL",
                   help="also keep this function or variable (a root of the dead-code walk; repeatable).  "
                        "--keep is its old name: elsewhere --keep names architectures (prune)")
    p.add_argument("--keep-address-taken", action="store_true",
                   help="keep every address-taken function (nvlink's rule) instead of only those a reachable "
                        "indirect call site of a matching prototype can reach")
    p.add_argument("--stack-budget", type=int, metavar="BYTES",
                   help="stack bytes to assume for recursion (added to the finite part)")
    p.add_argument("-o", "--output", metavar="FILE",
                   help="also link with the vendor linker (nvlink, ld.lld) into FILE, dead functions removed and "
                        "propagated resources written back")
    p.add_argument("--map", metavar="FILE", help="write the link map here")
    p.add_argument("--time-trace", action="store_true", help="print the time of each pass")
    p.add_argument("--json", action="store_true", help="print the result as JSON")


def _regs(r: dict[str, Any]) -> str:
    parts = [f"{k} {v}" for k, v in r.items() if v is not None]
    return ", ".join(parts) or "?"


def run(args: argparse.Namespace, out: TextIO) -> int:
    import sys

    from devbin.binary.output import Inputs, check_destination, write_file
    from devbin.cli.common import BadArguments, dump, holds_device_code, image_inputs, no_device_code, note, warn
    from devbin.errors import OutputError
    from devbin.link.core import link
    images = image_inputs(args.image)
    if not images and not args.inputs:
        raise BadArguments("give FILEs to link (or --image ADDRESS)")
    if not images and not holds_device_code(args.inputs):
        return no_device_code(args.inputs)

    kernels = [k for k in args.kernels.split(",") if k] if args.kernels else None
    on_disk = [*args.inputs, *(image.address.path for image, _ in images)]
    if args.map:  # before the link: a --map naming an input (or -o) fails at once
        check_destination(args.map, on_disk)
        if args.output and Inputs([args.output]).match(args.map):
            raise OutputError("--map and -o name the same file; give the map another name", where=args.map)
    sources: list[str | Path | tuple[str, bytes]] = [Path(p) for p in args.inputs]
    sources += [(str(image.address), data) for image, data in images]
    result = link(sources, target=args.target, kernels=kernels, keep=args.keep,
                  stack_budget=args.stack_budget, output=args.output, keep_address_taken=args.keep_address_taken)
    if args.map:
        write_file(args.map, result.link_map().encode(), inputs=on_disk)
    facts = result.to_dict()
    if args.json:
        dump("link", facts, out)
        return 1 if facts["errors"] else 0
    facts = visible_tree(facts)  # the text rule on every name read from the objects
    w = out.write
    res = result.resolution
    named = sum(1 for u in res.units if u.archive is None)
    w(f"link for {facts['arch']}: {len(res.units)} units ({named} named, {len(res.pulls)} pulled from archives)\n")
    for n in facts["notes"]:
        note(n)
    for e in facts["errors"]:
        print(f"error: {e}", file=sys.stderr)  # e: already through the text rule (facts)
    for message in facts["warnings"]:
        warn(message)
    w(f"roots: {', '.join(facts['roots']) or 'none'}\n")
    removed = facts["removed"]
    w(f"dead code: {len(removed)} removed, {facts['removed_bytes']} bytes\n")
    for r in removed:
        w(f"  - {r['kind']:8} {r['name']}  [{r['unit']}]  {r['bytes']} bytes\n")
    w("resources (own -> through the call graph):\n")
    for u in result.usage:
        stack = f"{u.stack}" + (" + dynamic" if u.dynamic else "")
        if u.budget_used is not None:
            stack += f" (incl. budget {u.budget_used})"
        w(f"  {visible(u.kernel)}: registers {_regs(u.own_registers)} -> {_regs(u.registers)}; "
          f"stack {u.own_stack if u.own_stack is not None else '?'} -> {stack}; "
          f"reaches {len(u.reaches)} functions\n")
        for reason in u.reasons:
            w(f"      dynamic: {visible(reason)}\n")
        if u.unknown:
            w(f"      no resource facts for: {visible(', '.join(u.unknown))} (compile with devbin cc, or clang 20+)\n")
    o = facts["output"]
    if o is not None:
        w(f"output: {o['path']} ({o['size']} bytes, linked by {o['linker']}); {len(o['removed'])} functions "
          "removed from the objects\n")
        for k in o["kept_in_output"]:
            w(f"  left in: {k['name']} ({k['why']})\n")
        for k, t in o["patched"].items():
            w(f"  {k}: written back: " + ", ".join(f"{a} {v}" for a, v in t.items() if a != "reasons") + "\n")
    if args.time_trace:
        w("passes:\n")
        for p in facts["passes"]:
            w(f"  {p['name']:10} {p['seconds'] * 1000:9.3f} ms\n")
    if args.map:
        w(f"map: {args.map}\n")
    return 1 if facts["errors"] else 0
