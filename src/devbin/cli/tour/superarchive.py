"""The super-archive step of ``devbin tour``.

11. Builds one super-archive from per-GPU sample libraries (``devbin ar create``): the sm_90
    cubin with its PTX, the PTX alone as ``compute_90`` (one copy stored for both), and a
    three-level AMDGPU library (``gfx90a:xnack+`` over ``gfx90a`` over ``base``, from
    tests/sources/layers); prints the bytes saved (plain, then packed), the chains (``sm_90`` falls back to
    ``compute_90`` by NVIDIA's rules, the AMD chain is declared), resolves the sample user
    object's ``cos16`` through the ``gfx90a:xnack+`` chain with ``--explain``, and writes the
    per-level view a linker takes (``devbin ar view``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["expected_pulls", "superarchive_tour"]



def expected_pulls() -> set[tuple[str, str, str]]:
    """(level, member, symbol) the resolution must pull (tests/sources/layers/README.md); the levels are
    the layer samples' targets (:func:`devbin.samples.sample_archs`) and ``base``."""
    from devbin.samples import sample_archs
    a = sample_archs()
    return {("base", "cos16.o", "cos16"), (a.code_object, "cos8.o", "cos8"), (a.layer_top, "cos1.o", "cos1"),
            ("base", "pack.o", "vadd"), ("base", "poly.o", "poly")}


def superarchive_tour(folder: Path, step: int = 11) -> tuple[dict[str, Any], list[str], bool]:
    """``(JSON facts, text lines, everything as expected)``."""
    import importlib.resources as resources

    import devbin.superarchive as sa
    from devbin.cli.tour import write
    from devbin.samples import sample_archs
    from devbin.superarchive.resolve import RootObject
    from devbin.superarchive.views import level_archives

    samples = resources.files("devbin.samples")
    a = sample_archs()

    def lib(name: str) -> tuple[sa.InputMember, ...]:
        return sa.members_from_archive(samples.joinpath(name).read_bytes(), where=name)

    def obj(name: str) -> sa.InputMember:
        return sa.member_from_object(name, samples.joinpath(name).read_bytes())

    targets = [
        sa.TargetInput(a.cubin, (obj("sample_sm90_rdc.cubin"), obj("sample.ptx"))),
        sa.TargetInput(a.ptx, (obj("sample.ptx"),)),
        sa.TargetInput(a.layer_top, lib("sample_layer_top.a"), (a.code_object, "base")),
        sa.TargetInput(a.code_object, lib("sample_layer_mid.a"), ("base",)),
        sa.TargetInput("base", lib("sample_layer_base.a")),
    ]
    data = sa.create(targets, index=a.layer_top)
    path = folder / "device-libs.a"
    write(path, data)
    archive = sa.open(path.read_bytes(), where=str(path))
    packed = sa.create(targets, storage="packed")
    packed_path = folder / "device-libs.packed.a"
    write(packed_path, packed)
    packed_archive = sa.open(packed_path.read_bytes(), where=str(packed_path))
    packed_same = all(bytes(packed_archive.member_data(r.ordinal)) == bytes(archive.member_data(r.ordinal))
                      for r in archive.records())
    user = RootObject.from_elf("sample_layer_user.o", samples.joinpath("sample_layer_user.o").read_bytes())
    res = archive.resolve(a.layer_top, objects=[user])
    view_dir = folder / f"device-libs.{a.layer_top.replace(':', '_')}"
    view_dir.mkdir(exist_ok=True)
    views = []
    for la in level_archives(archive, a.layer_top):
        write(view_dir / la.file_name, la.data)
        views.append(str(view_dir / la.file_name))

    pulled = {(p.definition.level, p.definition.member, p.symbol) for p in res.pulled}
    ok = pulled == expected_pulls() and not res.undefined and not res.duplicates \
        and archive.chain(a.cubin) == (a.cubin, a.ptx) and packed_same
    saved = archive.input_bytes - archive.stored_bytes
    facts: dict[str, Any] = {
        "file": str(path),
        "archive_bytes": len(data),
        "input_bytes": archive.input_bytes,
        "stored_bytes": archive.stored_bytes,
        "saved_bytes": saved,
        "packed": {"file": str(packed_path), "archive_bytes": len(packed), "stored_bytes": packed_archive.stored_bytes,
                   "members_equal": packed_same},
        "targets": {t: {"chain": list(archive.chain(t)), "members": len(archive.members(t))}
                    for t in archive.targets()},
        "resolve": {
            "target": res.target,
            "pulled": [{"level": p.definition.level, "member": p.definition.member, "symbol": p.symbol,
                        "needed_by": p.needed_by} for p in res.pulled],
            "explain_cos16": [{"depth": d, "symbol": lk.symbol, "needed_by": lk.needed_by,
                               "taken": lk.taken.label if lk.taken else None,
                               "walk": [[level, d2.member if d2 else None] for level, d2 in lk.walk]}
                              for d, lk in res.explain("cos16")],
        },
        "view": views,
    }
    lines = [f"{step}. built a super-archive of {len(targets)} per-GPU sample libraries: {path} "
             f"({len(data)} bytes, a valid GNU ar; devbin ar create)"]
    for t in archive.targets():
        n = len(archive.members(t))
        lines.append(f"   {t:14} {n} member{'s' if n != 1 else ''}, chain {' -> '.join(archive.chain(t))}"
                     + ("" if archive.declared_chain(t) else "  (default)"))
    lines.append(f"   {archive.input_bytes} bytes in the libraries' members, {archive.stored_bytes} stored: "
                 f"{saved} bytes saved (sample.ptx is stored once for {a.cubin} and {a.ptx})")
    lines.append("   packed storage (--storage packed: zstd, each member a delta against other builds of the same "
                 f"object): {len(packed)} bytes, "
                 f"every member {'reads back identical' if packed_same else 'DIFFERS'} -> {packed_path}")
    lines.append(f"   resolving the sample user object through {a.layer_top} (devbin ar resolve --explain cos16):")
    for d, lk in res.explain("cos16"):
        pad = "     " + "  " * d
        walk = "; ".join(f"{level}: {d2.member if d2 else '-'}" for level, d2 in lk.walk)
        lines.append(f"{pad}{lk.symbol} (needed by {lk.needed_by}) -> {lk.taken.label if lk.taken else lk.outcome}"
                     f"   [{walk}]")
    others = [p for p in res.pulled if p.symbol != "cos16" and p.symbol not in ("cos8", "cos1")]
    lines.append("     also pulled: " + ", ".join(f"{p.definition.label} for {p.symbol}" for p in others))
    lines.append(f"   per-level view for ld.lld (devbin ar view): {' '.join(Path(v).name for v in views)}")
    lines.append(f"   -> {view_dir}")
    return facts, lines, ok
