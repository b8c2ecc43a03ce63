#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Builds the hkrt wheel: the Python package (python/hkrt) with libhkrt inside it, so that
`pip install hkrt-*.whl` gives a package that runs with no HKRT_LIBRARY, LD_LIBRARY_PATH or
installed hkc.

    python3 scripts/build_wheel.py --library build/libhkrt.so -o build
    # -> build/hkrt-0.4.0-py3-none-linux_x86_64.whl

(the default build does this: target python_wheel, cmake/HkcWheel.cmake). The wheel holds
  hkrt/*.py                    the package, as in python/hkrt (no _install_paths.py)
  hkrt/_libs/libhkrt.so.N      the library under its SONAME (python/hkrt/_lib.py loads it first,
                               after an explicit load_library(path) or HKRT_LIBRARY)
  hkrt/_libs/libcjson.so.1 ... the shared libraries libhkrt needs beyond the C library and
                               the compiler's runtime (ldd's list, as scripts/carry_libs.sh),
                               loaded by _lib.py before libhkrt so that the dynamic linker finds
                               them by SONAME; --no-deps leaves them out
  hkrt-V.dist-info/            METADATA, WHEEL, top_level.txt, RECORD, licenses/ (hkc's
                               LICENSE and, for each carried library, its Debian copyright
                               file where dpkg knows the package)
Only the standard library is used (zipfile, hashlib): no pip, setuptools or wheel package.
The tag is py3-none-PLATFORM (ctypes, no extension module: any CPython 3.8+ on the platform);
the platform is this interpreter's (sysconfig.get_platform(), e.g. linux_x86_64), or --plat.
The archive is reproducible: sorted entries, fixed timestamps (SOURCE_DATE_EPOCH if set).
"""
import argparse
import base64
import hashlib
import io
import os
import re
import subprocess
import sys
import sysconfig
import time
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Libraries every Linux system has (glibc, the compiler runtime): never carried.
SYSTEM = re.compile(r"^(libc|libm|libdl|libpthread|librt|libutil|libresolv|ld-linux[^.]*|libgcc_s|libstdc\+\+)\.so")


def package_version(source):
    with open(os.path.join(source, "hkrt", "__init__.py")) as f:
        m = re.search(r'^__version__ = "([^"]+)"', f.read(), re.M)
    if not m:
        sys.exit("build_wheel: no __version__ in %s/hkrt/__init__.py" % source)
    return m.group(1)


def platform_tag(plat=None):
    return re.sub(r"[-.]", "_", plat or sysconfig.get_platform())


def soname(path):
    """The library's SONAME (readelf -d), else its file name."""
    try:
        out = subprocess.run(["readelf", "-d", path], capture_output=True, text=True, check=True).stdout
        m = re.search(r"\(SONAME\)\s+Library soname: \[([^\]]+)\]", out)
        if m:
            return m.group(1)
    except (OSError, subprocess.CalledProcessError):
        pass
    return os.path.basename(path)


def dependencies(path):
    """(soname, resolved path) of the shared libraries `path` loads that are not system ones,
    from ldd (transitive). A dependency ldd cannot find is an error: the wheel would not run."""
    out = subprocess.run(["ldd", path], capture_output=True, text=True, check=True).stdout
    deps = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[1] == "=>":
            name, where = parts[0], parts[2]
            if where == "not":
                sys.exit("build_wheel: %s needs %s, which ldd does not find" % (path, name))
            if not SYSTEM.match(name) and where.startswith("/"):
                deps.append((name, where))
    return deps


def debian_copyright(path):
    """(package, text of /usr/share/doc/PACKAGE/copyright) of the Debian package that owns
    `path`, or None (no dpkg, or no such file)."""
    try:
        out = subprocess.run(["dpkg", "-S", os.path.realpath(path)], capture_output=True, text=True).stdout
        if not out:
            out = subprocess.run(["dpkg", "-S", path], capture_output=True, text=True).stdout
    except OSError:
        return None
    if ":" not in out:
        return None
    pkg = out.split(":", 1)[0].split(",")[0].strip()
    doc = "/usr/share/doc/%s/copyright" % pkg
    if not os.path.exists(doc):
        return None
    with open(doc, "rb") as f:
        return pkg, f.read()


def metadata(version):
    return ("Metadata-Version: 2.1\n"
            "Name: hkrt\n"
            "Version: %s\n"
            "Summary: Python bindings of libhkrt, the runtime that replays hkc's .hkpack artifacts "
            "(libhkrt included)\n"
            "License: Apache-2.0\n"
            "Requires-Python: >=3.8\n"
            "Provides-Extra: numpy\n"
            "Requires-Dist: numpy; extra == \"numpy\"\n"
            "Provides-Extra: bf16\n"
            "Requires-Dist: numpy; extra == \"bf16\"\n"
            "Requires-Dist: ml_dtypes; extra == \"bf16\"\n" % version)


def record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d\n" % (name, digest, len(data))


def build(library, out_dir, source, plat=None, carry_deps=True, version=None):
    pkg_version = package_version(source)
    if version is not None and version != pkg_version:
        sys.exit("build_wheel: libhkrt is %s but python/hkrt/__init__.py says __version__ = %s: "
                 "they must agree (hkrt.h HKRT_VERSION_*)" % (version, pkg_version))
    tag = "py3-none-" + platform_tag(plat)
    name = "hkrt-%s-%s.whl" % (pkg_version, tag)
    info = "hkrt-%s.dist-info" % pkg_version
    files = []  # (archive name, bytes, executable)
    pkg_dir = os.path.join(source, "hkrt")
    for f in sorted(os.listdir(pkg_dir)):
        if f.endswith(".py") and f != "_install_paths.py":
            with open(os.path.join(pkg_dir, f), "rb") as fh:
                files.append(("hkrt/" + f, fh.read(), False))
    with open(library, "rb") as fh:
        files.append(("hkrt/_libs/" + soname(library), fh.read(), True))
    licenses = []
    if carry_deps:
        for dep, where in dependencies(library):
            with open(where, "rb") as fh:
                files.append(("hkrt/_libs/" + dep, fh.read(), True))
            c = debian_copyright(where)
            if c:
                licenses.append(("%s/licenses/%s.copyright" % (info, c[0]), c[1], False))
    with open(os.path.join(ROOT, "LICENSE"), "rb") as fh:
        licenses.append(("%s/licenses/LICENSE" % info, fh.read(), False))
    files += sorted(set(licenses))
    files.append(("%s/METADATA" % info, metadata(pkg_version).encode(), False))
    files.append(("%s/WHEEL" % info, ("Wheel-Version: 1.0\nGenerator: hkc scripts/build_wheel.py\n"
                                      "Root-Is-Purelib: false\nTag: %s\n" % tag).encode(), False))
    files.append(("%s/top_level.txt" % info, b"hkrt\n", False))
    record = "".join(record_line(n, d) for n, d, _ in files) + "%s/RECORD,,\n" % info
    files.append(("%s/RECORD" % info, record.encode(), False))

    stamp = time.gmtime(max(int(os.environ.get("SOURCE_DATE_EPOCH", "315532800")), 315532800))[:6]
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, name)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for n, data, exe in files:
            zi = zipfile.ZipInfo(n, stamp)
            zi.compress_type = zipfile.ZIP_DEFLATED
            zi.external_attr = ((0o755 if exe else 0o644) | 0o100000) << 16
            z.writestr(zi, data)
    tmp = path + ".tmp"
    with open(tmp, "wb") as fh:
        fh.write(buf.getvalue())
    os.replace(tmp, path)
    return path, [n for n, _, _ in files]


def main():
    ap = argparse.ArgumentParser(description="Builds hkrt-VERSION-py3-none-PLATFORM.whl: python/hkrt with libhkrt.")
    ap.add_argument("--library", help="libhkrt.so to carry (e.g. build/libhkrt.so)")
    ap.add_argument("-o", "--out", default=".", help="folder the wheel is written to (default: .)")
    ap.add_argument("--source", default=os.path.join(ROOT, "python"), help="the folder holding hkrt/ (default: python/)")
    ap.add_argument("--plat", help="platform tag (default: this interpreter's, e.g. linux_x86_64)")
    ap.add_argument("--version", help="libhkrt's version: refuse to build if the package's differs")
    ap.add_argument("--no-deps", action="store_true", help="carry libhkrt only, not the libraries it loads")
    ap.add_argument("--print-name", action="store_true", help="print the wheel's file name and exit")
    ap.add_argument("-q", "--quiet", action="store_true")
    a = ap.parse_args()
    if a.print_name:
        print("hkrt-%s-py3-none-%s.whl" % (package_version(a.source), platform_tag(a.plat)))
        return
    if not a.library:
        ap.error("--library is required")
    if not os.path.exists(a.library):
        sys.exit("build_wheel: no library %s (build it first: cmake --build build --target hkrt)" % a.library)
    path, names = build(a.library, a.out, a.source, a.plat, not a.no_deps, a.version)
    if not a.quiet:
        libs = [n.split("/")[-1] for n in names if n.startswith("hkrt/_libs/")]
        print("wrote %s (%s)" % (path, ", ".join(libs)))


if __name__ == "__main__":
    main()
