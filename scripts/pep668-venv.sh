# Sourced by scripts/test.sh and scripts/setup-test-env.sh (bash; needs $root, the checkout).
#
# PEP 668 (https://peps.python.org/pep-0668/): a python3 outside a virtual environment whose stdlib
# holds the EXTERNALLY-MANAGED marker (Debian 12's system Python) refuses `pip install`
# ("externally-managed-environment").  For such a python3 this makes $root/.venv, the folder the
# README's command 1 installs into, and puts its bin/ first on PATH, so every later `python3` is the
# venv's.  The venv is made --without-pip and given pip by the system pip (`pip --python`, pip 22.3
# and later): Debian's `python3 -m venv` puts pip into a venv only with the python3-venv package,
# which a fresh machine lacks.  Any other python3 (pyenv's in CI, a venv already active) is left as
# it is.
if python3 -c 'import os, sys, sysconfig
marker = os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")
sys.exit(0 if sys.prefix == sys.base_prefix and os.path.isfile(marker) else 1)'; then
    if ! "$root/.venv/bin/python3" -m pip --version >/dev/null 2>&1; then
        printf 'pep668-venv: %s is externally managed (PEP 668): making %s\n' "$(command -v python3)" "$root/.venv"
        python3 -m venv --without-pip "$root/.venv" \
            && python3 -m pip --python "$root/.venv/bin/python3" install -q --disable-pip-version-check pip \
            || { printf 'pep668-venv: error: could not make %s\n' "$root/.venv" >&2; exit 1; }
    fi
    export PATH="$root/.venv/bin:$PATH"
    printf 'pep668-venv: python3 is now %s\n' "$(command -v python3)"
fi
