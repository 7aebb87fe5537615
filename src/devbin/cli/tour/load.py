"""The loader step of ``devbin tour``.

13. Loads the two shipped AMDGPU code objects (``sample_load_user.so``: kernel ``user_kern``,
    which calls ``lib_scale`` through its GOT and holds pointers to library functions;
    ``sample_load_lib.so``: the device-function library; both ``ld.lld-19 -shared
    --emit-relocs`` from tests/sources/load) into one executable, **lazily**: ``freeze()``
    resolves the references between them and places both (the addresses eager loading gives)
    but maps nothing; looking up ``user_kern`` maps exactly its call-graph closure.  Prints the
    resolved symbols of the closure (kinds, addresses, registers), the GOT slot that now holds
    the library function's address, and the lazy-loading statistics (no timings: the tour's
    output is the same every run).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["load_tour"]


def load_tour(folder: Path, step: int = 13) -> tuple[dict[str, Any], list[str], bool]:
    """``(JSON facts, text lines, everything as expected)``."""
    import importlib.resources as resources

    from devbin.cli.load_cmd import stats_text
    from devbin.cli.tour import write
    from devbin.load import Executable
    from devbin.samples import sample_archs

    samples = resources.files("devbin.samples")
    exe = Executable(sample_archs().code_object, lazy=True)
    for n in ("sample_load_user.so", "sample_load_lib.so"):
        data = samples.joinpath(n).read_bytes()
        write(folder / n, data)
        exe.load_code_object(data, name=n)
    exe.freeze()
    before = exe.stats()
    kernel = exe.symbol("user_kern")
    stats = exe.stats()
    for k in ("index_s", "freeze_s", "lazy_load_s"):
        stats.pop(k)  # timings differ run to run; the tour's output does not
    loaded = [(o, sorted(o.loaded_functions) + sorted(o.loaded_data)) for o in exe.code_objects]
    resolved = [exe.symbol(n, code_object=o.name) for o, names in loaded for n in names]
    got = next(r for o in exe.code_objects for r in o.relocations
               if r.symbol == "lib_scale" and r.site.startswith(".got") and o.name == "sample_load_user.so")
    facts = {
        "before_lookup": {"bytes_mapped": before["bytes_mapped"], "functions_loaded": before["functions_loaded"]},
        "kernel": kernel.to_dict(),
        "closure": [s.to_dict() for s in resolved],
        "got_slot": {"address": got.address, "value": got.value, "symbol": got.symbol,
                     "target_object": got.target_object},
        "stats": stats,
    }
    ok = (before["bytes_mapped"] == 0 and got.value == exe.symbol("lib_scale").address
          and stats["functions_loaded"] == 4 and stats["bytes_mapped"] < stats["bytes_total"])
    lines = [f"{step}. loaded the sample user object and device-function library lazily "
             "(devbin load sample_load_user.so sample_load_lib.so --lazy --kernel user_kern):",
             f"   freeze: resolved and placed both, {before['bytes_mapped']} bytes mapped; "
             "looking up user_kern mapped its call-graph closure:"]
    for s in resolved:
        regs = (f"{s.size} bytes" if not s.is_function else
                "registers " + (" ".join(f"{k} {v}" for k, v in s.registers.items()) or "unknown (LLVM 19)"))
        addr = f"{s.address:#x}" + (f" (entry {s.code_address:#x})" if s.descriptor and s.code_address else "")
        lines.append(f"     {s.kind.word:<17} {s.name:<12} {addr:<38} {s.code_object}: {regs}")
    lines.append(f"   user_kern's GOT slot for lib_scale at {got.address:#x} holds {got.value:#x} "
                 f"(lib_scale in {got.target_object})")
    lines.append("   " + stats_text(stats, timings=False))
    return facts, lines, ok
