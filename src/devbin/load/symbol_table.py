"""Symbol queries of an executable: the symbol table (built whole, or per code object and per
looked-up name in a lazy executable), symbol kinds (a device function whose address some loaded
data holds is an indirect function) and lookups by name."""

from __future__ import annotations

from devbin.errors import FormatError, UsageError
from devbin.load.backend import load_backend
from devbin.load.loaded import LoadedCodeObject, make_symbol
from devbin.load.state import ExecutableState
from devbin.load.symbols import LoadedSymbol, SymbolKind
from devbin.model import FunctionKind

__all__ = ["SymbolQueries"]


class SymbolQueries(ExecutableState):
    """The symbol side of :class:`devbin.load.Executable`."""

    def _taken_addresses(self) -> set[int]:
        """Addresses stored in data by any code object: functions there are address-taken.

        GOT slots are left out: a call to a preemptible function also goes through the GOT.
        A lazy executable computes the relocations it has not applied yet (the same values).
        """
        if self._taken is not None:
            return self._taken
        out: set[int] = set()
        for obj in self._objects:  # (a code object has relocations of one of the two kinds)
            relocs = self._planned_relocs(obj) if self.lazy else obj.relocations
            for r in relocs:
                if r.width == 8 and not r.site.startswith(".got"):
                    out.add(r.value)
            nv = self._resolve_nv(obj) if self.lazy else obj.nv_relocations
            for n in nv:
                if n.address is not None and not n.section.startswith(".text"):
                    out.add(n.address + n.addend)
        self._taken = out
        return out


    def _build_symbols(self) -> tuple[LoadedSymbol, ...]:
        out: list[LoadedSymbol] = []
        for obj in self._objects:
            out += self._object_symbols(obj)
        return tuple(out)

    def _object_symbols(self, obj: LoadedCodeObject, names: frozenset[str] | None = None) -> list[LoadedSymbol]:
        """The symbols of ``obj`` (only those named ``names``: their model records alone are imported)."""
        idx = obj.index
        wanted = [d for d in idx.definitions if names is None or d.name in names]
        if names is None:
            funcs = {f.name: f for f in idx.model.functions}
        else:
            funcs = idx.functions_of(frozenset(d.name for d in wanted if d.is_function))
        backend = load_backend(idx.descriptor)
        descriptors = backend.descriptors(idx)  # kernel -> its descriptor's definition (None: kernels have none)
        if descriptors is not None:
            kernels = {d.name for d in wanted if d.is_function and d.name in descriptors}
            folded = {kd.name for kd in descriptors.values()}
        else:
            kernels = {f.name for f in funcs.values() if f.kind == FunctionKind.KERNEL}
            folded = set()
        model_taken = {f.name for f in funcs.values() if f.kind == FunctionKind.INDIRECT_TARGET}
        out = []
        for d in wanted:
            if d.name in folded:
                continue  # folded into its kernel
            addr = obj.address(d.offset)
            if not d.is_function:
                out.append(make_symbol(obj, d, SymbolKind.VARIABLE, addr))
                continue
            fn = funcs.get(d.name)
            if d.name in kernels:
                kd_name, kd_addr, entry = "", addr, addr
                if descriptors is not None:
                    kd = descriptors[d.name]
                    kd_name, kd_addr = kd.name, obj.address(kd.offset)
                    entry = backend.kernel_entry(idx, kd, kd_addr)
                    if entry != addr:
                        idx.warnings.append(FormatError(
                            f"kernel {d.name!r}: descriptor entry {entry:#x} is not the kernel symbol {addr:#x}",
                            fmt=obj.vendor, where=obj.name))
                out.append(make_symbol(obj, d, SymbolKind.KERNEL, kd_addr, code_address=entry, descriptor=kd_name,
                                   function=fn))
                continue
            # (every code object's relocations are planned for ``taken``: only a device function needs it)
            kind = SymbolKind.INDIRECT_FUNCTION if (d.name in model_taken or addr in self._taken_addresses()) \
                else SymbolKind.DEVICE_FUNCTION
            out.append(make_symbol(obj, d, kind, addr, code_address=addr, function=fn))
        return out

    def symbols(self, kind: SymbolKind | None = None) -> tuple[LoadedSymbol, ...]:
        """Every symbol (HSA's ``hsa_executable_iterate_agent_symbols``), in load then symbol-table order.

        A lazy executable lists every symbol with its address without loading anything."""
        self._check_frozen()
        with self._lock:
            if not self._all_symbols:
                out: list[LoadedSymbol] = []
                for obj in self._objects:
                    out += self._symbols_of(obj)
                self._symbols = tuple(out)
                self._all_symbols = True
        return self._symbols if kind is None else tuple(s for s in self._symbols if s.kind == kind)

    def _symbols_of(self, obj: LoadedCodeObject) -> list[LoadedSymbol]:
        have = self._obj_symbols.get(id(obj))
        if have is None:
            have = self._obj_symbols[id(obj)] = self._object_symbols(obj)
        return have

    def _definers(self) -> dict[str, list[LoadedCodeObject]]:
        """Lazy: every defined name -> the code objects defining it (reads every code object's .symtab)."""
        if self._defined_in is None:
            defined_in: dict[str, list[LoadedCodeObject]] = {}
            for obj in self._objects:
                for d in obj.index.definitions:
                    have = defined_in.setdefault(d.name, [])
                    if obj not in have:
                        have.append(obj)
            self._defined_in = defined_in
        return self._defined_in

    def _named_symbols(self, obj: LoadedCodeObject, names: frozenset[str]) -> list[LoadedSymbol]:
        """Lazy: the symbols of ``obj`` named ``names``, built (and their model records imported) alone."""
        have = self._obj_symbols.get(id(obj))
        if have is not None:
            return [s for s in have if s.name in names]
        key = (id(obj), names)
        out = self._some_symbols.get(key)
        if out is None:
            out = self._some_symbols[key] = self._object_symbols(obj, names)
        return out

    def _lookup(self, name: str, code_object: str | None) -> LoadedSymbol:
        if self._all_symbols:
            pool: tuple[LoadedSymbol, ...] | list[LoadedSymbol] = self._symbols
        else:
            names = frozenset({name, name[:-3]} if name.endswith(".kd") else {name})
            # Only a code object exporting ``name`` (or the kernel of descriptor ``name``) can hold a
            # "program" symbol of that name; when exactly one such symbol is there, it is the answer
            # whatever other code objects define locally, and their .symtab need not be read.
            objs = {id(o) for n in names for o in self._exporters.get(n, ())}
            pool = [s for o in self._objects if id(o) in objs for s in self._named_symbols(o, names)]
            program = [s for s in pool if (s.name == name or (s.descriptor and s.descriptor == name))
                       and (code_object is None or s.code_object == code_object) and s.linkage == "program"]
            if len(program) != 1:
                defined_in = self._definers()
                objs = {id(o) for n in names for o in defined_in.get(n, ())}
                pool = [s for o in self._objects if id(o) in objs for s in self._named_symbols(o, names)]
        hits = [s for s in pool if (s.name == name or (s.descriptor and s.descriptor == name))
                and (code_object is None or s.code_object == code_object)]
        if not hits:
            raise UsageError(f"no symbol {name!r} in the executable"
                             + (f" from {code_object}" if code_object else ""), fmt="load")
        program = [s for s in hits if s.linkage == "program"]
        if len(program) == 1:
            return program[0]
        if len(hits) == 1:
            return hits[0]
        raise UsageError(f"{name!r} is local to several code objects ({', '.join(s.code_object for s in hits)}); "
                         "pass code_object=", fmt="load")

