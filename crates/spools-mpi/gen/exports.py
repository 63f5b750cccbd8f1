#!/usr/bin/env python3
"""Writes src/exports.rs: every function of the MPI standard ABI that src/ does not
implement, as a stub that reports MPI_ERR_UNSUPPORTED_OPERATION naming it, and the PMPI_
(profiling) name of every function, implemented or not.

The list of functions and their C prototypes comes from an `mpi_abi.h` (the standard's
prototypes; scripts/test-mpi.sh passes the one of PyPI's mpich wheel):

    python3 crates/spools-mpi/gen/exports.py PATH/mpi_abi.h          # rewrite
    python3 crates/spools-mpi/gen/exports.py PATH/mpi_abi.h --check  # fail if stale

An implemented function is one that a file of src/ (or of a directory in it) defines as
`pub unsafe extern "C" fn MPI_Name(...)` with the parameter types this script derives
(see RUST_TYPES); the PMPI_ name forwards to it.
"""
import pathlib
import re
import sys

HERE = pathlib.Path(__file__).resolve().parent.parent
OUT = HERE / "src" / "exports.rs"

HANDLES = {
    "MPI_Comm", "MPI_Datatype", "MPI_Op", "MPI_Group", "MPI_Win", "MPI_File", "MPI_Session",
    "MPI_Message", "MPI_Info", "MPI_Errhandler", "MPI_Request", "MPI_T_enum",
    "MPI_T_cvar_handle", "MPI_T_pvar_handle", "MPI_T_pvar_session",
    "MPI_T_event_registration", "MPI_T_event_instance",
}
SCALARS = {
    "int": "c_int", "double": "f64", "char": "c_char", "void": "c_void",
    "MPI_Aint": "MPI_Aint", "MPI_Count": "MPI_Count", "MPI_Offset": "MPI_Offset",
    "MPI_Fint": "MPI_Fint", "MPI_Status": "MPI_Status",
    "MPI_T_cb_safety": "c_int", "MPI_T_source_order": "c_int",
}
# Exported beyond the standard ABI (functions MPICH and Open MPI export that programs
# declare themselves, and MPI-1 calls MPI 3.0 removed); src/ writes their profiling
# names by hand.
BEYOND_ABI = {
    "MPIX_Comm_agree", "MPIX_Comm_iagree",
    # MPI-1 calls removed in MPI 3.0 (src/removed.rs).
    "MPI_Type_extent", "MPI_Type_lb", "MPI_Type_ub", "MPI_Address", "MPI_Type_hvector", "MPI_Type_hindexed", "MPI_Type_struct", "MPI_Errhandler_create", "MPI_Errhandler_set", "MPI_Errhandler_get",
}
KEYWORDS = {"type", "in", "ref", "fn", "use", "loop", "match", "move", "mod", "self", "where"}
PROTO = re.compile(r"^([A-Za-z_][A-Za-z0-9_ ]*?\**)\s*\b((?:MPI|MPIX)_[A-Za-z0-9_]+)\((.*)\);")


def rust_type(ctype: str) -> str:
    """The Rust type of a C parameter type (without its name)."""
    const = ctype.startswith("const ")
    base = ctype.removeprefix("const ").strip()
    stars = base.count("*")
    base = base.replace("*", "").strip()
    if base.endswith("_function") or base.endswith("_function_c") or base.endswith("_function_x"):
        return "*const c_void"
    if base in HANDLES:
        rust = base
    elif base in SCALARS:
        rust = SCALARS[base]
    else:
        raise SystemExit(f"exports.py: no Rust type for C type {ctype!r}")
    for i in range(stars):
        rust = ("*const " if const and i == 0 else "*mut ") + rust
    return rust


def parse_param(p: str, i: int):
    p = p.strip()
    if p in ("void", ""):
        return None
    if p == "...":
        return None
    m = re.match(r"^(.*?)([A-Za-z_][A-Za-z0-9_]*)((?:\[[^\]]*\])*)$", p)
    if not m:
        raise SystemExit(f"exports.py: cannot read parameter {p!r}")
    ctype, name, arrays = m.group(1).strip(), m.group(2), m.group(3)
    if not ctype:  # a bare type (no name)
        ctype, name = name, f"arg{i}"
    # `int ranges[][3]` is a pointer to int[3]: an opaque pointer here.
    ctype = ctype + "*" * min(arrays.count("["), 1)
    if name in KEYWORDS:
        name += "_"
    return name, rust_type(ctype), ctype


def functions(header: str):
    out = []
    for line in pathlib.Path(header).read_text().splitlines():
        m = PROTO.match(line)
        if not m:
            continue
        ret, name, params = m.group(1).strip(), m.group(2), m.group(3)
        ps = [parse_param(p, i) for i, p in enumerate(params.split(","))]
        out.append((name, rust_type(ret), [p for p in ps if p]))
    return out


def implemented():
    found = {}
    for f in sorted((HERE / "src").rglob("*.rs")):
        if f.name == "exports.rs":
            continue
        # The module path: src/win/rma.rs is `win::rma`, src/win/mod.rs is `win`.
        parts = list(f.relative_to(HERE / "src").with_suffix("").parts)
        if parts[-1] == "mod":
            parts.pop()
        module = "::".join(parts)
        for m in re.finditer(r'pub unsafe extern "C" fn ((?:MPI|MPIX)_[A-Za-z0-9_]+)\(', f.read_text()):
            found[m.group(1)] = module
        # Functions a macro defines: `name!(MPI_A, MPI_B, ...` at the start of a line.
        for m in re.finditer(r"^[a-z_]+!\(\s*((?:(?:MPI|MPIX)_\w+|-)(?:\s*,\s*(?:(?:MPI|MPIX)_\w+|-))*)\s*[,);]", f.read_text(), re.M):
            for name in re.findall(r"(?:MPI|MPIX)_[A-Za-z0-9_]+", m.group(1)):
                found[name] = module
        # convert!{ MPI_X_toint, MPI_X_fromint, TYPE; ... } (convert.rs)
        for m in re.finditer(r"^\s+(MPI_\w+_toint), (MPI_\w+_fromint), \w+;", f.read_text(), re.M):
            found[m.group(1)] = found[m.group(2)] = module
    return found


def scope(params):
    """What an unsupported call reports its error on."""
    for name, rust, ctype in params:
        if ctype.strip() == "MPI_Comm":
            return f"Scope::Comm({name})"
    return "Scope::Self_"


def main():
    header = sys.argv[1]
    check = "--check" in sys.argv[2:]
    impl = implemented()
    lines = [
        "//! Generated by `gen/exports.py` from the standard ABI's prototypes: do not edit.",
        "//! Every function the ABI declares that Spools does not implement, as a stub that",
        "//! reports `MPI_ERR_UNSUPPORTED_OPERATION` naming it (`env::errhandler::unsupported`), and the",
        "//! `PMPI_` name of every function.",
        "#![allow(clippy::too_many_arguments, non_snake_case, unused_variables)]",
        "",
        "use std::ffi::{c_char, c_int, c_void};",
        "",
        "use crate::abi::*;",
        "use crate::env::errhandler::{unsupported, Scope};",
        "",
    ]
    names = set()
    for name, ret, params in functions(header):
        names.add(name)
        plist = ", ".join(f"{n}: {t}" for n, t, _ in params)
        args = ", ".join(n for n, _, _ in params)
        rret = "" if ret == "c_void" else f" -> {ret}"
        pname = "P" + name
        if name in impl:
            lines += [
                f"/// The profiling name of `{name}`.",
                "#[no_mangle]",
                f"pub unsafe extern \"C\" fn {pname}({plist}){rret} {{",
                f"    // SAFETY: the caller's contract is `{name}`'s.",
                f"    unsafe {{ crate::{impl[name]}::{name}({args}) }}",
                "}",
                "",
            ]
            continue
        if ret != "c_int":
            raise SystemExit(f"exports.py: {name} returns {ret}: implement it by hand")
        body = (
            "MPI_T_ERR_NOT_SUPPORTED"
            if name.startswith("MPI_T_")
            else f"unsupported(\"{name}\", {scope(params)})"
        )
        for n in (name, pname):
            lines += [
                f"/// Not supported by Spools: fails with `MPI_ERR_UNSUPPORTED_OPERATION` naming `{name}`.",
                "#[no_mangle]",
                f"pub unsafe extern \"C\" fn {n}({plist}){rret} {{",
                f"    {body}",
                "}",
                "",
            ]
    stray = sorted(set(impl) - names - BEYOND_ABI)
    if stray:
        raise SystemExit(f"exports.py: not in the ABI: {stray}")
    text = "\n".join(lines)
    import subprocess
    text = subprocess.run(
        ["rustfmt", "--edition", "2021", "--emit", "stdout"],
        input=text, capture_output=True, text=True, check=True,
    ).stdout
    if check:
        if OUT.read_text() != text:
            raise SystemExit("exports.py: src/exports.rs is stale: run gen/exports.py HEADER")
        return
    OUT.write_text(text)
    print(f"exports.py: {len(names)} functions, {len(impl)} implemented")


main()
