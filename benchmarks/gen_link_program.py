"""Generate a synthetic multi-object AMDGPU program for ``devbin link`` (``bench_link.py``).

``python3 benchmarks/gen_link_program.py --objects 1000 --functions 100000 --edges 1000000``

Each object is a relocatable AMDGPU ELF (``EM_AMDGPU``, gfx90a with xnack/sramecc "any",
code object v5: ``e_flags`` 0x53f, OS/ABI 64, ABI version 3, as clang-19 writes them), built
structurally with devbin's own ELF writer and carrying devbin's device sections: one ``.text``
holding its functions (zero bytes of the declared sizes: the code is not real), a kernel
descriptor ``<k>.kd`` per kernel in ``.rodata``, global symbols for its functions,
undefined symbols for the callees it calls in other objects, and the unified model
(registers, frame and stack sizes, prototypes, the call graph).

The program (deterministic for a seed):

* ``functions / objects`` functions per object, the first 2 % of each (at least one) kernels
  (``k<object>_<i>``), the rest device functions (``f<object>_<i>``);
* ``edges`` distinct direct call edges, all *forward* (callee after caller in the global
  order), 75 % inside the object and 25 % into a later object (an undefined symbol there);
  5 % of the device functions are never called (dead code for the DCE pass);
* 1 % of the functions make indirect calls, 2 % are address-taken (leaves: callback
  tables), each with one of 8 prototypes; 0.2 % have a dynamic stack;
* 0.5 % of the device functions are mutually recursive pairs ``(f, next f)`` (a back edge:
  with every other edge forward and the address-taken functions leaves, exactly these
  pairs are the cycles: about ``functions / 400`` two-function SCCs).

Written programs are cached under ``benchmarks/.cache/link-v2-<objects>-<functions>-<edges>-<seed>/``
(``o0000.o`` ...), with a ``done`` marker written last.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from devbin.formats.devsec.elf import with_devbin_sections  # noqa: E402
from devbin.formats.elf import constants as C  # noqa: E402
from devbin.formats.elf.model import ElfModel, SectionSpec, SymbolSpec  # noqa: E402
from devbin.formats.elf.writer import write  # noqa: E402
from devbin.model import (  # noqa: E402
    Attribute,
    CallConv,
    CallGraph,
    CodeObject,
    Function,
    FunctionKind,
    ParamType,
    Prototype,
    StdAttr,
    Target,
    TypeKind,
)

CACHE = Path(__file__).resolve().parent / ".cache"

EF_GFX90A = 0x3F | 0x100 | 0x400  # EF_AMDGPU_MACH_AMDGCN_GFX90A | XNACK_ANY_V4 | SRAMECC_ANY_V4
ELFOSABI_AMDGPU_HSA = 64
ABI_V5 = 3

_TYPES = [ParamType(TypeKind.INT, 4, 4), ParamType(TypeKind.FLOAT, 4, 4), ParamType(TypeKind.POINTER, 8, 8),
          ParamType(TypeKind.INT, 8, 8)]
PROTOTYPES = tuple(Prototype(_TYPES[i % 4], tuple(_TYPES[(i + j) % 4] for j in range(1 + i // 4)), CallConv.DEFAULT)
                   for i in range(8))


def cache_dir(objects: int, functions: int, edges: int, seed: int) -> Path:
    return CACHE / f"link-v2-{objects}-{functions}-{edges}-{seed}"


class Program:
    """The program's facts, by global function index (object = index // per_object)."""

    def __init__(self, objects: int, functions: int, edges: int, seed: int) -> None:
        if functions % objects:
            raise SystemExit("functions must be a multiple of objects")
        self.objects, self.functions, self.per = objects, functions, functions // objects
        self.kernels_per = max(1, self.per // 50)
        per, nk = self.per, self.kernels_per
        if per - nk < 4:
            raise SystemExit("need at least 4 device functions per object")
        rng = random.Random(seed)
        devices = [g for g in range(functions) if g % per >= nk]
        self.dead = set(rng.sample(devices, len(devices) // 20))
        # address-taken functions are leaves (callback tables): indirect edges then never close a cycle
        self.taken = {g: rng.randrange(8) for g in rng.sample(devices, functions // 50)}
        # recursive pairs (g, g + 1), both device functions of one object, disjoint
        self.pairs: list[int] = []
        taken_pair: set[int] = set()
        for g in rng.sample(devices, len(devices) // 400):
            if ((g + 1) % per and g + 1 not in self.dead and not taken_pair & {g - 1, g, g + 1, g + 2}
                    and g not in self.taken and g + 1 not in self.taken):
                self.pairs.append(g)
                taken_pair.update((g, g + 1))
        self.pairs.sort()
        edge_set: set[tuple[int, int]] = set()
        for g in self.pairs:
            edge_set.update(((g, g + 1), (g + 1, g)))
        local_target = edges * 3 // 4
        while len(edge_set) < edges:
            if len(edge_set) < local_target:  # inside one object: a < b
                o = rng.randrange(objects)
                i = rng.randrange(per - 1)
                j = rng.randrange(max(i + 1, nk), per)
                a, b = o * per + i, o * per + j
            else:  # into a later object
                o1 = rng.randrange(objects - 1)
                o2 = rng.randrange(o1 + 1, objects)
                a, b = o1 * per + rng.randrange(per), o2 * per + rng.randrange(nk, per)
            if b in self.dead or a in self.taken:
                continue
            edge_set.add((a, b))
        self.edges = sorted(edge_set)
        callers = [g for g in range(functions) if g not in self.taken]
        self.sites = {g: rng.randrange(8) for g in rng.sample(callers, functions // 100)}
        self.dynamic = set(rng.sample(devices, functions // 500))
        self.regs = [rng.randrange(8, 128) for _ in range(functions)]
        self.sregs = [rng.randrange(16, 96) for _ in range(functions)]
        self.frames = [rng.choice((0, 0, 0, 16, 32, 64, 128)) for _ in range(functions)]
        self.sizes = [rng.randrange(4, 64) * 4 for _ in range(functions)]

    def name(self, g: int) -> str:
        o, i = divmod(g, self.per)
        return f"{'k' if i < self.kernels_per else 'f'}{o:04d}_{i:03d}"

    def object_bytes(self, o: int, by_caller: dict[int, list[int]]) -> bytes:
        per, nk = self.per, self.kernels_per
        first = o * per
        names = [self.name(g) for g in range(first, first + per)]
        m = ElfModel(e_type=C.ET_REL, machine=C.EM_AMDGPU, flags=EF_GFX90A, osabi=ELFOSABI_AMDGPU_HSA,
                     abiversion=ABI_V5)
        m.sections.append(SectionSpec(".text", C.SHT_PROGBITS, C.SHF_ALLOC | C.SHF_EXECINSTR,
                                      bytes(sum(self.sizes[first:first + per])), align=256))
        m.sections.append(SectionSpec(".rodata", C.SHT_PROGBITS, C.SHF_ALLOC, bytes(64 * nk), align=64))
        funcs: list[Function] = []
        direct: list[tuple[str, str]] = []
        external: set[str] = set()
        offset = 0
        for i, name in enumerate(names):
            g = first + i
            kernel = i < nk
            frame = self.frames[g]
            attrs = [Attribute(StdAttr.REGS_GENERAL, self.regs[g]), Attribute(StdAttr.REGS_SCALAR, self.sregs[g]),
                     Attribute(StdAttr.FRAME_SIZE, frame), Attribute(StdAttr.STACK_SIZE, frame)]
            if g in self.taken:
                attrs.append(Attribute(StdAttr.PROTOTYPE, self.taken[g]))
            if g in self.dynamic:
                attrs.append(Attribute(StdAttr.DYNAMIC_STACK, True))
            kind = FunctionKind.KERNEL if kernel else (FunctionKind.INDIRECT_TARGET if g in self.taken
                                                        else FunctionKind.DEVICE)
            funcs.append(Function(name, kind, tuple(attrs), section=".text", offset=offset, size=self.sizes[g]))
            m.symbols.append(SymbolSpec(name, offset, self.sizes[g], C.STB_GLOBAL, C.STT_FUNC, section=".text"))
            if kernel:
                m.symbols.append(SymbolSpec(f"{name}.kd", 64 * i, 64, C.STB_GLOBAL, C.STT_OBJECT, section=".rodata"))
            offset += self.sizes[g]
            for callee in by_caller.get(g, ()):
                cname = self.name(callee)
                direct.append((name, cname))
                if not first <= callee < first + per:
                    external.add(cname)
        for cname in sorted(external):
            m.symbols.append(SymbolSpec(cname))
        cg = CallGraph(direct=tuple(direct),
                       indirect_sites=tuple((self.name(g), PROTOTYPES[p]) for g, p in self.sites.items()
                                            if first <= g < first + per),
                       address_taken=tuple((self.name(g), PROTOTYPES[p]) for g, p in self.taken.items()
                                           if first <= g < first + per),
                       external=tuple(sorted(external)))
        obj = CodeObject(Target("amdgpu", "gfx90a"), tuple(funcs), cg, prototypes=PROTOTYPES)
        return write(with_devbin_sections(m, obj))


def generate(objects: int, functions: int, edges: int, seed: int = 1, *, quiet: bool = False) -> list[Path]:
    """The program's object files (written on first use, then read from the cache)."""
    out = cache_dir(objects, functions, edges, seed)
    paths = [out / f"o{o:04d}.o" for o in range(objects)]
    if (out / "done").exists():
        return paths
    t0 = time.perf_counter()
    prog = Program(objects, functions, edges, seed)
    by_caller: dict[int, list[int]] = {}
    for a, b in prog.edges:
        by_caller.setdefault(a, []).append(b)
    out.mkdir(parents=True, exist_ok=True)
    for o, path in enumerate(paths):
        path.write_bytes(prog.object_bytes(o, by_caller))
    (out / "done").write_text(f"{objects} objects, {functions} functions, {len(prog.edges)} edges, "
                              f"{len(prog.pairs)} recursive pairs, seed {seed}\n")
    if not quiet:
        print(f"generated {out} in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return paths


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--objects", type=int, default=1000)
    ap.add_argument("--functions", type=int, default=100_000)
    ap.add_argument("--edges", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    paths = generate(a.objects, a.functions, a.edges, a.seed)
    print(paths[0].parent)


if __name__ == "__main__":
    main()
