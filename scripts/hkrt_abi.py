#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""libhkrt's binary interface, from its public header (docs/ABI.md, "Checking the ABI").

  hkrt_abi.py dump HEADER [--cc CC]          the ABI of HEADER (hk/hkrt.h), as text, on stdout
  hkrt_abi.py check HEADER REF.txt... [--cc CC]
      compares HEADER with the reference dumps (tests/abi/hkrt-<version>.txt): a reference of
      the header's SONAME (HKRT_SOVERSION) must still hold -- every function with its
      prototype, every struct layout (options structs, which start with struct_size, may grow
      at their end only), every enum value and integer macro; additions are fine. References
      of an older SONAME are only reported (the bump covers them). Exit 1 on a break or when
      no reference is of the header's SONAME; 77 when none was written on this platform.
  hkrt_abi.py soname HEADER LIBRARY          LIBRARY (the built libhkrt.so.X.Y.Z): its SONAME is
      libhkrt.so.HKRT_SOVERSION, its file name carries the header's version, and it exports
      exactly the header's functions (readelf, nm). Exit 1 otherwise.
  hkrt_abi.py selftest HEADER [--cc CC]      check finds breaks planted in copies of HEADER
      (a moved field, a changed enum value, prototype or macro, a removed function, growth of
      a struct that is not an options struct) and accepts additions.

What the dump holds, one item a line (the layouts measured by a C program generated from the
header and compiled with CC, so they are the compiler's, not a guess):
  version / soversion / platform        HKRT_VERSION_*, HKRT_SOVERSION, ARCH-SYSTEM of `CC -dumpmachine`
  function NAME TYPE                    the prototype without parameter names
  struct NAME size S align A            (struct_size first: an options struct, which may grow)
  field STRUCT.NAME OFFSET SIZE TYPE
  enum NAME size S / enumerator ENUM.NAME VALUE   (NAME_COUNT_ sentinels may change)
  opaque NAME TAG / typedef NAME TYPE
  const NAME VALUE                      object-like integer macros (not the version's)

The parser knows the header's own style (one declarator per declaration, no unions or
bit-fields); anything else is refused with the declaration it could not read, so that a new
kind of declaration is added here rather than silently left out.
Needs python3, a C compiler, and for `soname` readelf and nm (binutils).
"""
import os, re, shutil, subprocess, sys, tempfile

KEYWORDS = {"const", "volatile", "restrict", "struct", "union", "enum", "unsigned", "signed", "char", "short",
            "int", "long", "float", "double", "void", "_Bool", "static", "extern", "inline", "typedef"}
QUALIFIERS = {"const", "volatile", "restrict", "*"}
TOKEN = re.compile(r"\s*(?:([A-Za-z_]\w*)|(0[xX][0-9a-fA-F]+\w*|\d+\w*)|(\.\.\.|\"(?:[^\"\\]|\\.)*\"|\S))")


class AbiError(Exception):
    pass


def tokenize(text):
    out, pos = [], 0
    while pos < len(text):
        m = TOKEN.match(text, pos)
        if not m:
            break
        if m.group(0).strip():
            out.append(m.group(m.lastindex))
        pos = m.end()
    return out


def is_ident(t):
    return re.match(r"[A-Za-z_]\w*$", t) is not None


def type_text(tokens):
    s = " ".join(tokens)
    s = re.sub(r" ?([()\[\]]) ?", r"\1", s)
    s = re.sub(r" ?, ?", ", ", s)
    return s.replace("* *", "**").replace("*const", "* const")


def strip_param_names(tokens):
    """A type's tokens with the parameter names of its function types dropped (a parameter
    list: a parenthesis right after `)`, as in `void (*)(void *ctx)`)."""
    out, i = [], 0
    while i < len(tokens):
        if tokens[i] == "(" and i > 0 and tokens[i - 1] == ")":
            close = matching(tokens, i)
            params = [param_type(p) for p in split_top(tokens[i + 1:close], ",")]
            out += ["("] + tokenize(", ".join(params)) + [")"]
            i = close + 1
            continue
        out.append(tokens[i])
        i += 1
    return out


def split_top(tokens, sep):
    """Splits at `sep` outside (), [] and {}."""
    parts, cur, depth = [], [], 0
    for t in tokens:
        if t in "([{":
            depth += 1
        elif t in ")]}":
            depth -= 1
        if t == sep and depth == 0:
            parts.append(cur)
            cur = []
        else:
            cur.append(t)
    if cur:
        parts.append(cur)
    return parts


def declarator_name(tokens, what):
    """(name, tokens without it) of one declaration: `T name`, `T name[N]`, `T (*name)(...)`."""
    for i in range(len(tokens) - 3):
        if tokens[i] == "(" and tokens[i + 1] == "*" and is_ident(tokens[i + 2]) and tokens[i + 3] == ")":
            return tokens[i + 2], tokens[:i + 2] + tokens[i + 3:]
    j = len(tokens)
    while j > 0 and tokens[j - 1] == "]":
        while j > 0 and tokens[j - 1] != "[":
            j -= 1
        j -= 1
    if j <= 0 or not is_ident(tokens[j - 1]):
        raise AbiError(f"cannot read the declarator of {what}: {' '.join(tokens)}")
    return tokens[j - 1], tokens[:j - 1] + tokens[j:]


def param_type(tokens):
    """A parameter's type: its name dropped (an unnamed one kept as it is)."""
    if tokens in (["void"], ["..."]):
        return type_text(tokens)
    try:
        name, rest = declarator_name(tokens, "a parameter")
    except AbiError:
        return type_text(tokens)
    if name in KEYWORDS or not any(is_ident(t) and t not in QUALIFIERS for t in rest):
        return type_text(strip_param_names(tokens))  # unnamed: the identifier was the type
    return type_text(strip_param_names(rest))


def matching(tokens, i):
    """Index of the bracket closing tokens[i]."""
    pairs = {"(": ")", "[": "]", "{": "}"}
    depth = 0
    for j in range(i, len(tokens)):
        if tokens[j] in pairs:
            depth += 1
        elif tokens[j] in pairs.values():
            depth -= 1
            if depth == 0:
                return j
    raise AbiError("unbalanced brackets in " + " ".join(tokens[i:i + 20]))


def preprocess(header, cc):
    """(code of the header itself, its #define lines) after the preprocessor, the header's
    includes left out."""
    inc = os.path.dirname(os.path.dirname(os.path.abspath(header)))
    rel = os.path.relpath(os.path.abspath(header), inc)
    res = subprocess.run([cc, "-E", "-dD", "-I", inc, "-x", "c", "-"], input=f'#include "{rel}"\n',
                         capture_output=True, text=True)
    if res.returncode != 0:
        raise AbiError(f"{cc} -E {header}: {res.stderr.strip()}")
    real = os.path.realpath(header)
    mine, code, defines = False, [], []
    for line in res.stdout.splitlines():
        m = re.match(r'# \d+ "([^"]*)"', line)
        if m:
            mine = os.path.exists(m.group(1)) and os.path.realpath(m.group(1)) == real
            continue
        if not mine:
            continue
        if line.startswith("#define "):
            defines.append(line[len("#define "):])
        elif not line.startswith("#"):
            code.append(line)
    return "\n".join(code), defines


class Dump:
    def __init__(self):
        self.items = {}   # key -> value (text)
        self.order = []

    def add(self, key, value):
        if key in self.items:
            raise AbiError(f"declared twice: {key}")
        self.items[key] = value
        self.order.append(key)

    def text(self):
        return "".join(f"{k} {self.items[k]}".rstrip() + "\n" for k in self.order)

    @staticmethod
    def parse(text, path):
        d = Dump()
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip() or line.startswith("#"):
                continue
            words = line.split(" ", 1 if line.split(" ", 1)[0] in ("version", "soversion", "platform") else 2)
            if len(words) < 2:
                raise AbiError(f"{path}:{n}: not an ABI dump line: {line}")
            d.add(" ".join(words[:-1]), words[-1])
        return d


def parse_header(header, cc):
    """The header's declarations: (functions, structs, enums, opaques, typedefs, consts)."""
    code, defines = preprocess(header, cc)
    decls = split_top(tokenize(code), ";")
    functions, structs, enums, opaques, typedefs = [], [], [], [], []
    for toks in decls:
        what = " ".join(toks)
        if not toks:
            continue
        is_typedef = toks[0] == "typedef"
        body = toks[1:] if is_typedef else toks
        if body and body[0] in ("struct", "union", "enum") and "{" in body:
            kind = body[0]
            if kind == "union":
                raise AbiError(f"unions are not read: {what}")
            tag = body[1] if is_ident(body[1]) else ""
            open_ = body.index("{")
            close = matching(body, open_)
            after = body[close + 1:]
            name = after[0] if is_typedef and len(after) == 1 and is_ident(after[0]) else (
                f"{kind} {tag}" if not is_typedef and not after and tag else None)
            if name is None:
                raise AbiError(f"cannot read: {what}")
            inner = body[open_ + 1:close]
            if kind == "struct":
                fields = []
                for f in split_top(inner, ";"):
                    if ":" in f or len(split_top(f, ",")) > 1:
                        raise AbiError(f"bit-fields and several declarators are not read: {name}: {' '.join(f)}")
                    fname, rest = declarator_name(f, name)
                    fields.append((fname, type_text(strip_param_names(rest))))
                structs.append((name, fields))
            else:
                consts = [c[0] for c in split_top(inner, ",") if c]
                if not all(is_ident(c) for c in consts):
                    raise AbiError(f"cannot read the enumerators of {name}")
                enums.append((name, consts))
            continue
        if is_typedef and len(body) == 3 and body[0] in ("struct", "union") and is_ident(body[2]):
            opaques.append((body[2], f"{body[0]} {body[1]}"))
            continue
        if is_typedef:
            name, rest = declarator_name(body, "a typedef")
            typedefs.append((name, type_text(strip_param_names(rest))))
            continue
        # a function: RET NAME(PARAMS)
        if len(toks) >= 3 and toks[-1] == ")" and "(" in toks:
            open_ = toks.index("(")
            if is_ident(toks[open_ - 1]) and matching(toks, open_) == len(toks) - 1:
                name = toks[open_ - 1]
                params = [param_type(p) for p in split_top(toks[open_ + 1:-1], ",")]
                functions.append((name, f"{type_text(toks[:open_ - 1])}({', '.join(params)})"))
                continue
        raise AbiError(f"cannot read this declaration of {header}: {what}")
    consts, version = [], {}
    for d in defines:
        m = re.match(r"([A-Za-z_]\w*)(\(?)\s*(.*)$", d)
        name, func, value = m.group(1), m.group(2), m.group(3).strip()
        vm = re.match(r"HKRT_VERSION_(MAJOR|MINOR|PATCH)$|HKRT_SOVERSION$", name)
        if vm:
            version[name] = value
            continue
        if func or not value or name.startswith("HKRT_VERSION") or '"' in value:
            continue
        if re.match(r"^[\w\s()+\-*/%<>&|^~]+$", value):
            consts.append(name)
    return functions, structs, enums, opaques, typedefs, consts, version


def dump(header, cc):
    functions, structs, enums, opaques, typedefs, consts, version = parse_header(header, cc)
    for key in ("HKRT_VERSION_MAJOR", "HKRT_VERSION_MINOR", "HKRT_VERSION_PATCH", "HKRT_SOVERSION"):
        if not re.match(r"\d+$", version.get(key, "")):
            raise AbiError(f"{header}: no `#define {key} <number>`")
    inc = os.path.dirname(os.path.dirname(os.path.abspath(header)))
    rel = os.path.relpath(os.path.abspath(header), inc)
    prog = ["#include <stdio.h>", "#include <stddef.h>", "#include <stdalign.h>", f'#include "{rel}"',
            "int main(void) {"]
    for name, fields in structs:
        prog.append(f'  printf("struct {name} size %zu align %zu\\n", sizeof({name}), alignof({name}));')
        for fname, _ in fields:
            prog.append(f'  printf("field {name}.{fname} %zu %zu\\n", offsetof({name}, {fname}), '
                        f"sizeof((({name} *)0)->{fname}));")
    for name, cs in enums:
        prog.append(f'  printf("enum {name} size %zu\\n", sizeof({name}));')
        for c in cs:
            prog.append(f'  printf("enumerator {name}.{c} %lld\\n", (long long){c});')
    for c in consts:
        prog.append(f'  printf("const {c} %lld\\n", (long long)({c}));')
    prog += ["  return 0;", "}"]
    with tempfile.TemporaryDirectory() as tmp:
        src, exe = os.path.join(tmp, "abi.c"), os.path.join(tmp, "abi")
        with open(src, "w") as f:
            f.write("\n".join(prog) + "\n")
        res = subprocess.run([cc, "-std=c11", "-I", inc, src, "-o", exe], capture_output=True, text=True)
        if res.returncode != 0:
            raise AbiError(f"the layout program does not compile ({cc}): {res.stderr.strip()[:2000]}")
        measured = subprocess.run([exe], capture_output=True, text=True, check=True).stdout.splitlines()
        triple = subprocess.run([cc, "-dumpmachine"], capture_output=True, text=True).stdout.strip() or "unknown"
    # gcc says x86_64-linux-gnu, clang x86_64-pc-linux-gnu: the architecture and the system
    system = next((k for k in ("linux", "darwin", "windows", "freebsd") if k in triple), triple.split("-")[-1])
    machine = f"{triple.split('-')[0]}-{system}"
    sizes = {}
    for line in measured:
        w = line.split(" ")
        sizes[(w[0], w[1])] = " ".join(w[2:])
    d = Dump()
    d.add("version", ".".join(version[f"HKRT_VERSION_{p}"] for p in ("MAJOR", "MINOR", "PATCH")))
    d.add("soversion", version["HKRT_SOVERSION"])
    d.add("platform", machine)
    for name, t in functions:
        d.add(f"function {name}", t)
    for name, tag in opaques:
        d.add(f"opaque {name}", tag)
    for name, t in typedefs:
        d.add(f"typedef {name}", t)
    for name, fields in structs:
        d.add(f"struct {name}", sizes[("struct", name)])
        for fname, t in fields:
            d.add(f"field {name}.{fname}", f"{sizes[('field', f'{name}.{fname}')]} {t}")
    for name, cs in enums:
        d.add(f"enum {name}", sizes[("enum", name)])
        for c in cs:
            d.add(f"enumerator {name}.{c}", sizes[("enumerator", f"{name}.{c}")])
    for c in consts:
        d.add(f"const {c}", sizes[("const", c)])
    return d


def header_comment(d):
    return (f"# libhkrt {d.items['version']} (libhkrt.so.{d.items['soversion']}): the ABI of hk/hkrt.h on "
            f"{d.items['platform']}, written by scripts/hkrt_abi.py dump (docs/ABI.md, \"Checking the ABI\")\n")


def compare(ref, new):
    """The breaks of `new` against `ref` (a list of lines) and the additions."""
    breaks, added = [], []
    options = set()  # structs that start with struct_size: may grow at their end
    for k, v in ref.items.items():
        if k.startswith("field ") and k.endswith(".struct_size") and v.split(" ")[0] == "0":
            options.add(k[len("field "):-len(".struct_size")])
    for k in ref.order:
        if k in ("version", "soversion", "platform"):
            continue
        old = ref.items[k]
        kind, name = k.split(" ", 1)
        if k not in new.items:
            where = {"field": "removed or renamed", "enumerator": "removed or renamed"}.get(kind, "removed")
            breaks.append(f"{kind} {name}: {where} (was: {old})")
            continue
        cur = new.items[k]
        if kind == "enumerator" and name.endswith("_COUNT_"):
            continue
        if kind == "struct" and name in options:
            o, c = old.split(), cur.split()  # size S align A
            if int(c[1]) < int(o[1]) or c[3] != o[3]:
                breaks.append(f"struct {name}: {old} -> {cur} (an options struct may only grow)")
            continue
        if cur != old:
            breaks.append(f"{kind} {name}: {old} -> {cur}")
    for k in new.order:
        if k in ref.items or k in ("version", "soversion", "platform"):
            continue
        kind, name = k.split(" ", 1)
        if kind == "field":
            struct = name.split(".")[0]
            if f"struct {struct}" in ref.items:
                off = int(new.items[k].split(" ")[0])
                old_size = int(ref.items[f"struct {struct}"].split()[1])
                if struct not in options:
                    breaks.append(f"field {name}: new in struct {struct}, which is no options struct (only "
                                  f"structs that start with struct_size grow)")
                elif off < old_size and not re.match(r"reserved\d*$", name.split(".")[1]):
                    breaks.append(f"field {name}: new at offset {off}, inside the {old_size} bytes of the "
                                  f"reference's layout (old callers leave those padding bytes undefined: keep "
                                  f"them as a reserved field, docs/ABI.md)")
                else:
                    added.append(f"{k} {new.items[k]}")
                continue
        added.append(f"{k} {new.items[k]}")
    return breaks, added


def load(path):
    with open(path) as f:
        return Dump.parse(f.read(), path)


def version_tuple(v):
    return tuple(int(x) for x in v.split("."))


def check(header, refs, cc, out=print):
    new = dump(header, cc)
    sov, ver = int(new.items["soversion"]), new.items["version"]
    failed = False
    if version_tuple(ver)[0] >= 1 and sov != version_tuple(ver)[0]:
        out(f"ABI: HKRT_SOVERSION {sov} but version {ver}: from 1.0 on the SONAME's number is MAJOR (docs/ABI.md)")
        failed = True
    same, compared = [], 0
    for path in refs:
        ref = load(path)
        rsov = int(ref.items["soversion"])
        if ref.items["platform"] != new.items["platform"]:
            out(f"ABI: {os.path.basename(path)} was written on {ref.items['platform']}, this compiler targets "
                f"{new.items['platform']}: not compared")
            continue
        compared += 1
        if rsov > sov:
            out(f"ABI: {os.path.basename(path)} is of libhkrt.so.{rsov}, newer than this header's HKRT_SOVERSION {sov}")
            failed = True
            continue
        if version_tuple(ref.items["version"]) > version_tuple(ver):
            out(f"ABI: {os.path.basename(path)} is of libhkrt {ref.items['version']}, newer than this header's {ver}")
            failed = True
            continue
        breaks, added = compare(ref, new)
        if rsov < sov:
            out(f"ABI: {os.path.basename(path)} (libhkrt {ref.items['version']}, libhkrt.so.{rsov}): "
                f"{len(breaks)} incompatible change(s) since, covered by the SONAME libhkrt.so.{sov}")
            for b in breaks[:5]:
                out(f"  {b}")
            continue
        same.append(path)
        if breaks:
            failed = True
            out(f"ABI BREAK: hk/hkrt.h ({ver}) is not compatible with libhkrt {ref.items['version']} "
                f"({os.path.basename(path)}), yet both say libhkrt.so.{sov}:")
            for b in breaks:
                out(f"  {b}")
            out(f"Either restore the layout (options structs grow only at their end; new enum values and "
                f"functions are fine), or bump the SONAME: HKRT_SOVERSION in hk/hkrt.h to {sov + 1}, a new "
                f"section in docs/ABI.md, and a new reference: python3 scripts/hkrt_abi.py dump "
                f"loader/include/hk/hkrt.h > tests/abi/hkrt-{ver}.txt")
        else:
            out(f"ABI: compatible with libhkrt {ref.items['version']} ({os.path.basename(path)}, "
                f"libhkrt.so.{sov}); {len(added)} addition(s)")
            for a in added[:20]:
                out(f"  + {a}")
            if len(added) > 20:
                out(f"  + ... {len(added) - 20} more")
    if not compared and not failed:
        out(f"ABI: skipped: no reference dump was written on {new.items['platform']}")
        return None
    if not same and not failed:
        out(f"ABI: no reference dump of libhkrt.so.{sov} (HKRT_SOVERSION {sov}) among {len(refs)} file(s): a new "
            f"SONAME starts a new reference: python3 scripts/hkrt_abi.py dump loader/include/hk/hkrt.h > "
            f"tests/abi/hkrt-{ver}.txt")
        failed = True
    return not failed


def soname(header, lib):
    d = parse_header(header, os.environ.get("CC", "cc"))
    version = d[6]
    ver = ".".join(version[f"HKRT_VERSION_{p}"] for p in ("MAJOR", "MINOR", "PATCH"))
    sov = version.get("HKRT_SOVERSION")
    ok = True
    dyn = subprocess.run(["readelf", "-d", lib], capture_output=True, text=True, check=True).stdout
    m = re.search(r"\(SONAME\).*\[(.*)\]", dyn)
    got = m.group(1) if m else "(none)"
    if got != f"libhkrt.so.{sov}":
        print(f"SONAME: {lib} has SONAME {got}, but hk/hkrt.h says HKRT_SOVERSION {sov} (libhkrt.so.{sov}): "
              f"CMakeLists.txt must take it from the header")
        ok = False
    if os.path.basename(lib) != f"libhkrt.so.{ver}":
        print(f"SONAME: the library's file is {os.path.basename(lib)}, the header's version {ver} "
              f"(libhkrt.so.{ver})")
        ok = False
    nm = subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True, text=True, check=True).stdout
    exported = {w[-1] for w in (l.split() for l in nm.splitlines()) if len(w) >= 3 and w[-1].startswith("hk_")}
    declared = {name for name, _ in d[0]}
    if exported != declared:
        print(f"exports: {lib} exports hk_* functions the header does not declare: "
              f"{' '.join(sorted(exported - declared)) or '-'}; declared but not exported: "
              f"{' '.join(sorted(declared - exported)) or '-'}")
        ok = False
    if ok:
        print(f"SONAME: {os.path.basename(lib)} is libhkrt.so.{sov} (hk/hkrt.h: {ver}, HKRT_SOVERSION {sov}); "
              f"it exports the header's {len(declared)} functions and no other hk_* symbol")
    return ok


# Breaks planted in a copy of the header (check must refuse each, naming `expect`), then
# additions (it must accept them). ref: substitutions made to the reference's header first
# (an older layout). Each pattern must apply once: a header that changed shape fails the
# selftest, saying which planted change to update.
SHRINK_BIND_OPTIONS = (r"\n  uint32_t reserved0;\s*/\* zero: the tail padding of the layout that ended with\s+name_count"
                       r".*?(\n\} hk_bind_weights_options_t;)", r"\1")
MUTATIONS = [
    dict(what="a field inserted in hk_session_options_t",
         new=[(r"(uint32_t struct_size;\s*/\* sizeof\(hk_session_options_t\)[^\n]*\n)", r"\1  uint64_t inserted;\n")],
         expect="field hk_session_options_t.batch"),
    dict(what="an enum value changed", new=[(r"HK_STATUS_NOT_FOUND = 2,", "HK_STATUS_NOT_FOUND = 20,")],
         expect="enumerator hk_status_t.HK_STATUS_NOT_FOUND"),
    dict(what="a parameter's type changed",
         new=[(r"hk_session_set_batch\(hk_session_t \*session, uint64_t batch\)",
               "hk_session_set_batch(hk_session_t *session, uint32_t batch)")],
         expect="function hk_session_set_batch"),
    dict(what="a function removed", new=[(r"HK_API uint64_t hk_session_bucket\([^;]*;", "")],
         expect="function hk_session_bucket"),
    dict(what="a return type changed",
         new=[(r"HK_API uint32_t hk_session_tensor_count\(", "HK_API uint64_t hk_session_tensor_count(")],
         expect="function hk_session_tensor_count"),
    dict(what="a macro's value changed", new=[(r"#define HK_BIND_WEIGHTS_COPY 4u", "#define HK_BIND_WEIGHTS_COPY 8u")],
         expect="const HK_BIND_WEIGHTS_COPY"),
    dict(what="an array bound changed", new=[(r"#define HK_TENSOR_MAX_RANK 6", "#define HK_TENSOR_MAX_RANK 8")],
         expect="struct hk_tensor_info_t"),
    dict(what="a struct without struct_size grown", new=[(r"(\n\} hk_sampling_t;)", r"\n  uint32_t grown;\1")],
         expect="field hk_sampling_t.grown"),
    dict(what="a field's type changed, its size kept",
         new=[(r"(typedef struct hk_launch_info \{\s*)const char \*kernel;", r"\1const signed char *kernel;")],
         expect="field hk_launch_info_t.kernel"),
    dict(what="a new field in an options struct's old tail padding", ref=[SHRINK_BIND_OPTIONS],
         new=[(r"uint32_t reserved0;(\s*/\* zero: the tail padding of the layout that ended with\s+name_count)",
               r"uint32_t planted; \1")],
         expect="field hk_bind_weights_options_t.planted: new at offset 20"),
]
ADDITIONS = [
    dict(what="a new function", new=[(r"(HK_API int hk_session_tensor_bound\()", r"HK_API int hk_planted(void);\n\1")]),
    dict(what="a new enum value before the sentinel", new=[(r"(\n\s*HK_STATUS_COUNT_)", r"\n  HK_STATUS_PLANTED = 14,\1")]),
    dict(what="an options struct grown at its end", new=[(r"(\n\} hk_pack_open_options_t;)", r"\n  uint32_t planted;\1")]),
    dict(what="a new macro", new=[(r"(#define HK_WEIGHTS_MAX_RANK)", r"#define HK_PLANTED 3\n\1")]),
    dict(what="an options struct grown past its old tail padding, kept as reserved0", ref=[SHRINK_BIND_OPTIONS], new=[]),
]


def selftest(header, cc):
    with open(header) as f:
        text = f.read()
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        os.makedirs(os.path.join(tmp, "hk"))
        planted = os.path.join(tmp, "hk", "hkrt.h")

        def substituted(what, subs):
            out = text
            for pattern, repl in subs:
                out, n = re.subn(pattern, repl, out, count=1, flags=re.S)
                if n != 1:
                    raise AbiError(f"selftest: '{what}' no longer applies to {header} (pattern {pattern!r}): "
                                   f"update scripts/hkrt_abi.py")
            return out

        refs = {}
        for case in MUTATIONS + ADDITIONS:
            what, expect = case["what"], case.get("expect")
            try:
                ref_text, new_text = substituted(what, case.get("ref", [])), substituted(what, case["new"])
            except AbiError as e:
                print(e)
                ok = False
                continue
            ref = os.path.join(tmp, f"ref-{len(refs)}.txt")
            if ref_text in refs:  # the same reference: dumped once
                ref = refs[ref_text]
            else:
                with open(planted, "w") as f:
                    f.write(ref_text)
                ref_dump = dump(planted, cc)
                with open(ref, "w") as f:
                    f.write(header_comment(ref_dump) + ref_dump.text())
                refs[ref_text] = ref
            with open(planted, "w") as f:
                f.write(new_text)
            lines = []
            passed = check(planted, [ref], cc, out=lines.append)
            report = "\n".join(lines)
            if expect is None and not passed:
                print(f"selftest: '{what}' was refused:\n{report}")
                ok = False
            elif expect is not None and (passed or expect not in report or "bump the SONAME" not in report):
                print(f"selftest: '{what}' was not reported as a break of {expect}:\n{report}")
                ok = False
    n = len(MUTATIONS) + len(ADDITIONS)
    print(f"selftest: {n} planted changes ({len(MUTATIONS)} breaks, {len(ADDITIONS)} additions): "
          f"{'each judged right' if ok else 'FAILED'}")
    return ok


def main(argv):
    cc = os.environ.get("CC") or "cc"
    if "--cc" in argv:
        i = argv.index("--cc")
        cc = argv[i + 1]
        del argv[i:i + 2]
    if len(argv) < 2 or argv[0] not in ("dump", "check", "soname", "selftest"):
        print(__doc__, file=sys.stderr)
        return 2
    if not shutil.which(cc):
        print(f"hkrt_abi.py: no C compiler '{cc}'", file=sys.stderr)
        return 2
    try:
        if argv[0] == "dump":
            d = dump(argv[1], cc)
            sys.stdout.write(header_comment(d) + d.text())
            return 0
        if argv[0] == "check":
            result = check(argv[1], argv[2:], cc)
            return 77 if result is None else 0 if result else 1
        if argv[0] == "soname":
            return 0 if soname(argv[1], argv[2]) else 1
        return 0 if selftest(argv[1], cc) else 1
    except AbiError as e:
        print(f"hkrt_abi.py: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
