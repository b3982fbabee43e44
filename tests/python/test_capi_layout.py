# SPDX-License-Identifier: MIT
"""The ctypes mirror of rove.h checked against the header itself: a C program compiled
against include/rove.h prints sizeof/offsetof of every mirrored struct field, enum sizes
and constants; every bound function's prototype is compared with its declaration."""
import ctypes
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import rove
from rove import _lib as L

ROOT = Path(__file__).resolve().parents[2]
HEADER = ROOT / "include" / "rove.h"

CONSTANTS = {
    "ROVE_OK": L.OK, "ROVE_ERR_INVALID_ARGUMENT": L.ERR_INVALID_ARGUMENT,
    "ROVE_ERR_UNSUPPORTED": L.ERR_UNSUPPORTED, "ROVE_ERR_OUT_OF_MEMORY": L.ERR_OUT_OF_MEMORY,
    "ROVE_ERR_SIZE_OVERFLOW": L.ERR_SIZE_OVERFLOW, "ROVE_ERR_INTERNAL": L.ERR_INTERNAL,
    "ROVE_ERR_POOL_EXHAUSTED": L.ERR_POOL_EXHAUSTED,
    "ROVE_ISA_AUTO": L.ISA_AUTO, "ROVE_ISA_SCALAR": L.ISA_SCALAR,
    "ROVE_ISA_COUNT": L.ISA_COUNT,  # the binding's ISA table is read from the registry
    "ROVE_PAIRING_HALF": L.PAIRING_HALF, "ROVE_PAIRING_INTERLEAVED": L.PAIRING_INTERLEAVED,
    "ROVE_SCALING_NONE": L.SCALING_BY_NAME["none"],
    "ROVE_SCALING_LINEAR": L.SCALING_BY_NAME["linear"],
    "ROVE_SCALING_NTK": L.SCALING_BY_NAME["ntk"], "ROVE_SCALING_YARN": L.SCALING_BY_NAME["yarn"],
    "ROVE_SCALING_LLAMA3": L.SCALING_BY_NAME["llama3"],
    "ROVE_SCALING_LONGROPE": L.SCALING_BY_NAME["longrope"],
    "ROVE_ROTARY_FIRST": L.ROTARY_FIRST, "ROVE_ROTARY_LAST": L.ROTARY_LAST,
    "ROVE_ROTATE_Q": rove.ROTATE_Q, "ROVE_ROTATE_K": rove.ROTATE_K,
    "ROVE_ROTATE_V": rove.ROTATE_V, "ROVE_ROTATE_O": rove.ROTATE_O,
    "ROVE_ROTATE_ROPE": rove.ROTATE_ROPE, "ROVE_ROTATE_ROVE": rove.ROTATE_ROVE,
    "ROVE_MAX_HEAD_DIM": L.MAX_HEAD_DIM,
    "ROVE_DTYPE_F32": L.DTYPE_F32, "ROVE_DTYPE_BF16": L.DTYPE_BF16,
    "ROVE_DTYPE_F16": L.DTYPE_F16, "ROVE_DTYPE_Q8": L.DTYPE_Q8,
    "ROVE_DTYPE_COUNT": L.DTYPE_COUNT,  # the binding's table is read from rove_dtype_name
    "ROVE_Q8_BLOCK": L.Q8_BLOCK,
    "ROVE_PAGED_HEAD_MAJOR": L.PAGED_HEAD_MAJOR,
    "ROVE_PAGED_TOKEN_MAJOR": L.PAGED_TOKEN_MAJOR,
}
CONSTANTS.update({f"ROVE_CPU_{n.upper()}": b for b, n in L.CPU_FEATURES.items()})
ENUMS = ["rove_status", "rove_isa", "rove_pairing", "rove_scaling", "rove_rotary_placement",
         "rove_dtype", "rove_paged_layout"]


@pytest.fixture(scope="module")
def c_layout(tmp_path_factory):
    """{name: number} printed by a C program built against rove.h."""
    cc = shutil.which("cc") or shutil.which("gcc")
    assert cc, "a C compiler (cc) is needed to check the struct layouts"
    src = ["#include <stddef.h>", "#include <stdio.h>", '#include "rove.h"', "int main(void) {"]
    for cname, S in L.STRUCTS.items():
        src.append(f'printf("{cname} %zu\\n", sizeof({cname}));')
        src.append(f'printf("{cname}.align %zu\\n", _Alignof({cname}));')
        for f, _ in S._fields_:
            src.append(f'printf("{cname}.{f}.offset %zu\\n", offsetof({cname}, {f}));')
            src.append(f'printf("{cname}.{f}.size %zu\\n", sizeof((({cname} *)0)->{f}));')
    for e in ENUMS:
        src.append(f'printf("{e} %zu\\n", sizeof({e}));')
    for name in CONSTANTS:
        src.append(f'printf("{name} %lld\\n", (long long)({name}));')
    for name in ("ROVE_VERSION_MAJOR", "ROVE_VERSION_MINOR", "ROVE_VERSION_PATCH"):
        src.append(f'printf("{name} %lld\\n", (long long)({name}));')
    src += ["return 0;", "}"]
    d = tmp_path_factory.mktemp("layout")
    (d / "layout.c").write_text("\n".join(src) + "\n")
    subprocess.run([cc, "-std=c11", "-Wall", "-Werror", "-I", str(HEADER.parent),
                    str(d / "layout.c"), "-o", str(d / "layout")], check=True)
    out = subprocess.run([str(d / "layout")], check=True, capture_output=True, text=True).stdout
    return {k: int(v) for k, v in (line.split() for line in out.splitlines())}


def test_cpu_features_complete():
    """Every ROVE_CPU_* flag of rove.h has a name in the binding (rove.info() lists them)."""
    flags = set(re.findall(r"\b(ROVE_CPU_[A-Z0-9_]+)\s*=", HEADER.read_text()))
    assert flags and flags == {f"ROVE_CPU_{n.upper()}" for n in L.CPU_FEATURES.values()}


@pytest.mark.parametrize("cname", sorted(L.STRUCTS))
def test_struct_layout(c_layout, cname):
    S = L.STRUCTS[cname]
    assert ctypes.sizeof(S) == c_layout[cname]
    assert ctypes.alignment(S) == c_layout[cname + ".align"]
    for f, _ in S._fields_:
        assert getattr(S, f).offset == c_layout[f"{cname}.{f}.offset"], f
        assert getattr(S, f).size == c_layout[f"{cname}.{f}.size"], f


def test_enums_and_constants(c_layout):
    for e in ENUMS:
        assert c_layout[e] == ctypes.sizeof(L.c_enum), e
    for name, value in CONSTANTS.items():
        assert c_layout[name] == value, name


def test_every_struct_of_the_header_with_a_python_use_is_mirrored():
    """Structs of rove.h that the bindings do not mirror must be deliberate."""
    declared = set(re.findall(r"typedef struct (rove_\w+) \{", HEADER.read_text()))
    assert set(L.STRUCTS) <= declared
    assert declared - set(L.STRUCTS) == set(), declared - set(L.STRUCTS)


def test_version_matches(c_layout):
    v = f"{c_layout['ROVE_VERSION_MAJOR']}.{c_layout['ROVE_VERSION_MINOR']}." \
        f"{c_layout['ROVE_VERSION_PATCH']}"
    assert rove.__version__ == L.lib.rove_version_string().decode() == v
    assert importlib.metadata.version("rove") == v
    assert rove.info()["version"] == v
    # the bindings' struct mirrors are of this minor (checked before anything is bound)
    assert L.LIBRARY_VERSION == (c_layout["ROVE_VERSION_MAJOR"], c_layout["ROVE_VERSION_MINOR"])


@pytest.mark.parametrize("version", ["0.6.0", "0.8.0", "1.7.0", "garbage"])
def test_another_minor_is_refused_before_any_symbol_is_bound(tmp_path, version):
    """ROVE_LIBRARY at a build of another minor (0.x minors may change public structs):
    a clear ImportError naming both versions, not a missing-symbol AttributeError (a fake
    library that has rove_version_string only) and not silently misread structs."""
    cc = shutil.which("cc") or shutil.which("gcc")
    assert cc, "a C compiler (cc) is needed to build the fake library"
    (tmp_path / "fake.c").write_text(
        f'const char *rove_version_string(void) {{ return "{version}"; }}\n')
    so = tmp_path / "librove.so"
    subprocess.run([cc, "-shared", "-fPIC", str(tmp_path / "fake.c"), "-o", str(so)], check=True)
    env = dict(os.environ, ROVE_LIBRARY=str(so))
    r = subprocess.run([sys.executable, "-c", "import rove"], env=env, capture_output=True,
                       text=True, cwd=str(tmp_path))
    assert r.returncode != 0
    assert f"ImportError: the loaded librove is {version}" in r.stderr, r.stderr
    assert "needs 0.7.x" in r.stderr


@pytest.mark.parametrize("what", ["missing", "folder", "not a library"])
def test_a_bad_rove_library_is_an_import_error(tmp_path, what):
    """ROVE_LIBRARY naming something ctypes cannot load is an ImportError naming
    ROVE_LIBRARY (it was ctypes' OSError, past an `except ImportError` fallback)."""
    path = {"missing": tmp_path / "nope.so", "folder": tmp_path,
            "not a library": tmp_path / "text.so"}[what]
    (tmp_path / "text.so").write_text("not an ELF file\n")
    code = ("try:\n    import rove\nexcept ImportError as e:\n    print('ImportError:', e)\n"
            "else:\n    print('imported')\n")
    r = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, ROVE_LIBRARY=str(path)),
                       capture_output=True, text=True, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    want = f"ImportError: cannot load librove from {path} (ROVE_LIBRARY)"
    assert r.stdout.startswith(want), r.stdout


def test_the_packaged_library_has_no_runpath():
    """The wheel's librove.so carries no RUNPATH: the build tree's (OpenBLAS's folder and
    an empty entry, CMake's room for an install-time rewrite) made the loader search the
    current directory for OpenBLAS (found by review; cmake/RovePython.cmake removes it).
    Only the installed package's file can be checked: ROVE_LIBRARY points elsewhere."""
    if os.environ.get("ROVE_LIBRARY"):
        pytest.skip("ROVE_LIBRARY is set: the library under test is not the package's")
    readelf = shutil.which("readelf")
    assert readelf, "readelf (binutils) is needed to read the library's dynamic section"
    r = subprocess.run([readelf, "-d", L.LIBRARY_PATH], capture_output=True, text=True, check=True)
    assert "NEEDED" in r.stdout
    assert "RUNPATH" not in r.stdout and "RPATH" not in r.stdout, r.stdout


def test_library_found_in_any_folder_of_the_package(tmp_path, monkeypatch):
    """An editable install: this file in the source tree, librove.so in site-packages/rove
    (another folder of rove.__path__)."""
    monkeypatch.delenv("ROVE_LIBRARY", raising=False)
    src, site = tmp_path / "src", tmp_path / "site"
    src.mkdir(), site.mkdir()
    (site / "librove.so").write_bytes(b"")
    assert L._find_library([str(src), str(site)]) == str(site / "librove.so")
    with pytest.raises(ImportError, match=r"librove.so not found in \S*src: .*pip install -e"):
        L._find_library([str(src)])


def test_library_of_this_version_preferred(tmp_path, monkeypatch):
    """Without a plain librove.so, a file of this package's version is taken before others
    (sorted by name, librove.so.0.6.0 came first, and the import failed on its version)."""
    monkeypatch.delenv("ROVE_LIBRARY", raising=False)
    mine = "librove.so.%d.%d" % L.LIBRARY_VERSION
    for name in ("librove.so.0.6.0", mine + ".0", "librove.so.9.0.0"):
        (tmp_path / name).write_bytes(b"")
    assert L._find_library([str(tmp_path)]) == str(tmp_path / (mine + ".0"))
    (tmp_path / mine).write_bytes(b"")  # the SONAME link, as CMake installs it
    assert L._find_library([str(tmp_path)]) == str(tmp_path / mine)
    (tmp_path / "librove.so").write_bytes(b"")
    assert L._find_library([str(tmp_path)]) == str(tmp_path / "librove.so")


# ---- prototypes --------------------------------------------------------------------------
_SCALARS = {"int32_t": ctypes.c_int32, "int64_t": ctypes.c_int64, "uint32_t": ctypes.c_uint32,
            "int": ctypes.c_int, "double": ctypes.c_double, "float": ctypes.c_float,
            "rove_status": L.c_enum, "rove_isa": L.c_enum, "rove_pairing": L.c_enum,
            "rove_scaling": L.c_enum, "rove_dtype": L.c_enum}


def _declarations():
    text = re.sub(r"/\*.*?\*/", " ", HEADER.read_text(), flags=re.S)
    decls = {}
    for ret, name, params in re.findall(r"ROVE_API\s+([\w\s\*]+?)\s*\b(rove_\w+)\s*\(([^)]*)\)",
                                        text):
        params = " ".join(params.split())
        decls[name] = (ret.strip(), [] if params in ("void", "") else
                       [p.strip() for p in params.split(",")])
    return decls


def _matches(ctype, decl):
    decl = decl.replace("const ", "").strip()
    if "*" in decl:
        if decl.startswith("char"):
            return ctype is ctypes.c_char_p
        return ctype is ctypes.c_void_p or (isinstance(ctype, type) and
                                            issubclass(ctype, ctypes._Pointer))
    base = decl.split()[0]
    return _SCALARS.get(base) is ctype


def test_prototypes():
    decls = _declarations()
    assert len(decls) > 30
    for name, (res, args) in L._PROTOTYPES.items():
        assert name in decls, f"{name} is bound but not declared in rove.h"
        cret, cparams = decls[name]
        assert len(args) == len(cparams), name
        for a, p in zip(args, cparams):
            assert _matches(a, p), f"{name}: {a} vs {p}"
        if cret == "void":
            assert res is None, name
        else:
            assert res is not None and _matches(res, cret), f"{name} returns {cret}"
    # What is not bound (the attention layer) is a known, listed gap.
    unbound = {n for n in decls if n not in L._PROTOTYPES}
    assert all(n.startswith("rove_layer_") or n == "rove_isa_parse" for n in unbound), unbound


def test_isa_table_comes_from_the_registry():
    """The binding's ISA names are librove's: each parses back to its value, and the table
    ends at ROVE_ISA_COUNT (checked against the header above)."""
    assert L.ISA_BY_NAME["auto"] == L.ISA_AUTO and L.ISA_BY_NAME["scalar"] == L.ISA_SCALAR
    for name, value in L.ISA_BY_NAME.items():
        out = L.c_enum(-1)
        assert L.lib.rove_isa_parse(name.encode(), ctypes.byref(out)) == L.OK
        assert out.value == value
    assert L.lib.rove_isa_parse(b"no-such-isa", ctypes.byref(L.c_enum(0))) == L.ERR_INVALID_ARGUMENT
    assert L.isa_name(L.ISA_COUNT) == "unknown"


def test_every_status_has_its_exception():
    """Each rove_status of the header is bound (CONSTANTS above), has a text in librove and
    maps to its own RoveError subclass (a new status needs its exception)."""
    body = re.search(r"typedef enum rove_status \{(.*?)\} rove_status;",
                     re.sub(r"/\*.*?\*/", " ", HEADER.read_text(), flags=re.S), flags=re.S)
    names = re.findall(r"\b(ROVE_(?:OK|ERR_\w+))\b", body.group(1))
    assert names[0] == "ROVE_OK" and "ROVE_ERR_POOL_EXHAUSTED" in names
    assert set(names) <= set(CONSTANTS), set(names) - set(CONSTANTS)
    classes = set()
    for name in names[1:]:
        value = CONSTANTS[name]
        assert L.status_string(value) != "unknown rove_status", name
        cls = L._ERRORS[value]
        assert issubclass(cls, rove.RoveError) and cls not in classes, name
        classes.add(cls)
    assert L._ERRORS[L.ERR_POOL_EXHAUSTED] is rove.RovePoolExhausted
    assert not issubclass(rove.RovePoolExhausted, MemoryError)  # back-pressure, not an OOM
