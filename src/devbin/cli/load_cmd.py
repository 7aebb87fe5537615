"""Load code objects into one executable on the simulated device, resolve them, print its symbols.

Each FILE (then each --image ADDRESS, one image of a container as `devbin list
--all` names it) is a bare code object (an AMDGPU .so from ld.lld -shared, a cubin) or a package
(fatbin, offload bundle, OffloadBinary, host binary), from which the image devbin select
picks for --device is loaded.  Without --device, the first bare code object names it
(gfx90a:xnack+ from its e_flags, sm_90 from its SASS).

The executable is frozen: every undefined reference must be defined by one of the FILEs
(an error lists each missing symbol and who needs it), AMDGPU dynamic relocations are
applied as ROCr applies them, with symbols resolved across code objects.  The table lists
every symbol: kind (kernel, device-function, indirect-function, variable), device address,
size, code object, and what the unified model knows (registers, stack, calling convention).
For an AMDGPU kernel the address is its descriptor's (what a dispatch packet holds) and
"entry" the code it leads to.  --kernel NAME prints one kernel in full.

--lazy freezes without mapping anything (every address is still the eager one); --kernel
NAME then maps exactly the kernel's call-graph closure, and the statistics say how many
functions, variables and bytes that took.  --backend cuda loads the images with the CUDA
driver instead (cuda-bindings: pip install devbin[cuda]; a GPU).

--json: schema devbin.load/2 (devbin.load-cuda/1 with --backend cuda); each
symbol's "resources" in the shape every command prints them (docs/JSON.md).  Exit
status: 0 loaded, 1 error (an unresolved symbol ...; with --backend cuda,
resources that differ from devbin's model), 2 bad arguments, 3 no input holds
device code.
"""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from devbin.cli.common import add_image_inputs
from devbin.escape.text import visible_tree

HELP = "load code objects into one executable (simulated device), resolve them, print the symbols"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="*", metavar="FILE", help="code objects or packages to load, in order")
    add_image_inputs(p)
    p.add_argument("--device", "--target", dest="target", metavar="DEVICE",
                   help="the device: gfx90a, gfx90a:xnack+, sm_90 ... (--target is the old name; default: the "
                                                 "first code object's)")
    p.add_argument("--kernel", metavar="NAME", help="print only this kernel, with every attribute")
    p.add_argument("--lazy", action="store_true", help="freeze without mapping; --kernel maps only its closure")
    from devbin.targets.registry import VENDORS

    drivers = [v.offload_kind for v in VENDORS if v.driver_backend]
    p.add_argument("--backend", choices=("simulated", *drivers), default="simulated",
                   help="the device: devbin's simulated address space (default) or "
                        + " or ".join(f"the {v.offload_kind.upper()} driver" for v in VENDORS if v.driver_backend))
    p.add_argument("--json", action="store_true", help="print the executable as JSON")


def _regs(r: dict[str, Any] | None) -> str:
    """A symbol's register counts from its ``resources``: r (general: VGPR / R), s (SGPR), a (AGPR)."""
    if r is None:
        return "-"
    counts = (("r", r["registers"]), ("s", r["sgprs"]), ("a", r["agprs"]))
    return " ".join(f"{letter}{v}" for letter, v in counts if v is not None) or "-"


def _text(d: dict[str, Any], symbols: list[dict[str, Any]], stacks: list[int | None], out: TextIO) -> None:
    """The executable as text; ``stacks``: each symbol's per-thread stack (``LoadedSymbol.stack_bytes``)."""
    d, symbols = visible_tree(d), visible_tree(symbols)  # the text rule on every name read from a file
    t = d["target"]
    out.write(f"executable for {t['name']} ({t['vendor']}), {d['backend']} device, frozen\n\ncode objects:\n")
    for o in d["code_objects"]:
        nrel = len(o["relocations"]) + len(o["driver_relocations"])
        out.write(f"  {o['base']:#x}  {o['size']:>8}  {o['arch']:<16} {o['name']}  ({nrel} relocations"
                  f"{' for the driver' if o['driver_relocations'] else ''})\n")
    out.write("\n")
    rows = [("KIND", "ADDRESS", "SIZE", "NAME", "CODE OBJECT", "REGS", "STACK", "CALLCONV", "LINKAGE")]
    for s, own in zip(symbols, stacks, strict=True):
        stack = "-" if own is None else str(own)
        rows.append((s["kind"], f"{s['address']:#x}", str(s["size"]), s["name"], s["code_object"],
                     _regs(s["resources"]), stack, s["callconv"] or "-", s["linkage"]))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        out.write("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() + "\n")


def stats_text(st: dict[str, Any], timings: bool = True) -> str:
    """One line of lazy-loading statistics (``timings=False``: no seconds, for deterministic output)."""
    if not st.get("lazy"):
        return (f"eager: {st['bytes_mapped']} bytes mapped, {st['relocations_applied']} relocations applied"
                + (f", freeze {st['freeze_s'] * 1e3:.2f} ms" if timings else ""))
    return (f"lazy: {st['functions_loaded']} of {st['functions_total']} functions, {st['data_loaded']} of "
            f"{st['data_total']} variables, {st['bytes_mapped']} of {st['bytes_total']} bytes mapped, "
            f"{st['relocations_applied']} relocations applied, {st['lazy_loads']} lazy load"
            f"{'s' if st['lazy_loads'] != 1 else ''}" + (f", {st['lazy_load_s'] * 1e3:.2f} ms" if timings else ""))


def _kernel_text(s: dict[str, Any], stack: int | None, out: TextIO) -> None:
    s = visible_tree(s)
    out.write(f"kernel {s['name']} ({s['code_object']})\n")
    out.write(f"  address      {s['address']:#x}" + (f"  (descriptor {s['descriptor']})" if s["descriptor"] else "")
              + "\n")
    out.write(f"  entry        {s['code_address']:#x}\n  size         {s['size']}\n")
    out.write(f"  registers    {_regs(s['resources'])}\n  stack        {stack}\n")
    out.write(f"  callconv     {s['callconv']}\n")
    for k, v in s["attributes"].items():
        out.write(f"  {k:<12} {v}\n")


def _run_driver(args: argparse.Namespace, target: str, out: TextIO) -> int:
    """``--backend cuda`` (a vendor's driver: its descriptor's ``driver_backend``): link and load the files
    with the driver, print kernels and resources."""
    import importlib

    from devbin.cli.common import dump
    from devbin.targets.registry import VENDORS

    vendor = next(v for v in VENDORS if v.driver_backend and v.offload_kind == args.backend)
    d = importlib.import_module(vendor.driver_backend).driver_report(args.files, target, args.kernel, args.lazy)
    if args.json:
        dump(f"load-{vendor.offload_kind}", d, out)
    else:
        out.write(f"{vendor.offload_kind.upper()} driver ({d['lazy_env']} module loading), {target}\n")
        for r in d["kernels"]:
            out.write(f"  kernel {r['name']}: registers {r['registers']}, local {r['local']}, shared {r['shared']}\n")
        diffs: list[str] = d["differences"]
        out.write("resources equal devbin's model\n" if not diffs else "\n".join(diffs) + "\n")
    return 0 if not d["differences"] else 1


def run(args: argparse.Namespace, out: TextIO) -> int:
    from devbin.cli.common import BadArguments, dump, holds_device_code, image_inputs, no_device_code
    from devbin.errors import UsageError
    from devbin.load import Executable, SymbolKind, code_object_target

    images = image_inputs(args.image)
    if not images and not args.files:
        raise BadArguments("give FILEs to load (or --image ADDRESS)")
    if not images and not holds_device_code(args.files):
        return no_device_code(args.files)
    target = args.target or (code_object_target(args.files[0]) if args.files else images[0][0].arch)
    if args.backend != "simulated":
        if images:
            raise BadArguments(f"--backend {args.backend} loads FILEs only; extract the image first "
                               "(devbin extract --image)")
        return _run_driver(args, target, out)
    exe = Executable(target, lazy=args.lazy)
    for f in args.files:
        exe.load(f)
    for image, data in images:
        exe.load(data, name=str(image.address))
    exe.freeze()
    k = exe.symbol(args.kernel) if args.kernel else None
    if k is not None and k.kind != SymbolKind.KERNEL:
        raise UsageError(f"{args.kernel!r} is a {k.kind.word}, not a kernel")
    d = exe.to_dict()
    symbols = d["symbols"]
    if k is not None:
        symbols = [k.to_dict()]
        d["symbols"] = symbols
        d["closure"] = {o.name: {"functions": sorted(o.loaded_functions), "data": sorted(o.loaded_data)}
                        for o in exe.code_objects if o.loaded_functions or o.loaded_data}
    if args.json:
        dump("load", d, out)
    elif k is not None:
        _kernel_text(symbols[0], k.stack_bytes, out)
        if args.lazy:
            out.write("  loaded       " + "; ".join(f"{n}: {', '.join(c['functions'] + c['data'])}"
                                                   for n, c in d["closure"].items()) + "\n")
        out.write(stats_text(d["stats"]) + "\n")
    else:
        _text(d, symbols, [s.stack_bytes for s in exe.symbols()], out)
        out.write("\n" + stats_text(d["stats"]) + "\n")
    return 0
