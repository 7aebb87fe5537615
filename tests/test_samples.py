"""The shipped samples' architectures (devbin.samples.sample_archs): what the tour names, read from the files."""

from __future__ import annotations

import devbin
from devbin.samples import SampleArchs, sample_archs, sample_path


def test_sample_archs_are_the_files() -> None:
    a = sample_archs()
    assert a == SampleArchs(cubin="sm_90", ptx="compute_90", jit_device="sm_120", code_object="gfx90a",
                            layer_top="gfx90a:xnack+")
    with devbin.open(sample_path("sample_sm90.cubin")) as s:
        assert [i.arch for i in s.images] == [a.cubin]
    for name in ("sample_gfx90a.o", "sample_load_user.so", "sample_layer_mid.a"):
        with devbin.open(sample_path(name)) as s:
            assert {i.arch for i in s.images} == {a.code_object}, name
    assert f".target {a.cubin}\n" in sample_path("sample.ptx").read_text()
