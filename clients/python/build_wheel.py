#!/usr/bin/env python3
"""Build the fleetq client's wheel with the Python standard library alone.

    python3 clients/python/build_wheel.py [--out DIR]     # make wheel: DIR is dist/

writes DIR/fleetq-<version>-py3-none-any.whl, which installs with no network
and no build backend:

    python3 -m pip install --no-index dist/fleetq-<version>-py3-none-any.whl

A wheel is a zip archive (the binary distribution format, PEP 427): the
package's files at the root, and fleetq-<version>.dist-info/ holding METADATA
(the core metadata: name, version, summary, Requires-Python, the sigv4 extra,
the README as its long description), WHEEL (the format's version and the
py3-none-any tag: pure Python, any interpreter of 3.x) and RECORD (every
file's path, urlsafe-base64 SHA-256 without padding, and size; RECORD's own
row has neither). The metadata comes from pyproject.toml and the version
from fleetq/__init__.py, the one place it is written. Entries are sorted and
dated SOURCE_DATE_EPOCH (default 1980-01-01), so one tree gives one wheel,
byte for byte.
"""

import argparse
import base64
import hashlib
import os
import re
import sys
import time
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = "fleetq"
TAG = "py3-none-any"


def version():
    with open(os.path.join(HERE, PACKAGE, "__init__.py"), encoding="utf-8") as f:
        m = re.search(r'^__version__ = "([^"]+)"$', f.read(), re.M)
    if not m:
        sys.exit("build_wheel: fleetq/__init__.py sets no __version__")
    return m.group(1)


def project():
    """The [project] strings and optional dependencies of pyproject.toml.

    Only the shapes pyproject.toml uses are read: `key = "string"`,
    `key = {text = "string"}` and, under [project.optional-dependencies],
    `extra = ["requirement", ...]`.
    """
    fields, extras, section = {}, {}, ""
    with open(os.path.join(HERE, "pyproject.toml"), encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line.startswith("["):
                section = line.strip("[]")
                continue
            key, sep, value = (s.strip() for s in line.partition("="))
            if not sep:
                continue
            if section == "project":
                m = re.fullmatch(r'"([^"]*)"|\{\s*text\s*=\s*"([^"]*)"\s*\}', value)
                if m:
                    fields[key] = m.group(1) if m.group(1) is not None else m.group(2)
            elif section == "project.optional-dependencies":
                extras[key] = re.findall(r'"([^"]+)"', value)
    for key in ("name", "description", "requires-python"):
        if key not in fields:
            sys.exit("build_wheel: pyproject.toml's [project] has no " + key)
    return fields, extras


def metadata(ver, fields, extras):
    lines = [
        "Metadata-Version: 2.1",
        "Name: " + fields["name"],
        "Version: " + ver,
        "Summary: " + fields["description"],
        "Requires-Python: " + fields["requires-python"],
    ]
    if "license" in fields:
        lines.append("License: " + fields["license"])
    for extra, reqs in sorted(extras.items()):
        lines.append("Provides-Extra: " + extra)
        lines += ['Requires-Dist: %s; extra == "%s"' % (r, extra) for r in reqs]
    lines.append("Description-Content-Type: text/markdown")
    with open(os.path.join(HERE, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    return "\n".join(lines) + "\n\n" + readme


def package_files():
    """The package's files, by their paths in the wheel (caches left out)."""
    out = []
    for root, dirs, files in os.walk(os.path.join(HERE, PACKAGE)):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith((".pyc", ".pyo")):
                continue
            path = os.path.join(root, name)
            out.append((os.path.relpath(path, HERE).replace(os.sep, "/"), path))
    return out


def digest(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def build(out_dir):
    ver = version()
    fields, extras = project()
    name = fields["name"]
    dist_info = "%s-%s.dist-info" % (name, ver)
    entries = []
    for arcname, path in package_files():
        with open(path, "rb") as f:
            entries.append((arcname, f.read()))
    entries.append((dist_info + "/METADATA", metadata(ver, fields, extras).encode()))
    wheel = "Wheel-Version: 1.0\nGenerator: fleetq build_wheel.py\nRoot-Is-Purelib: true\nTag: %s\n" % TAG
    entries.append((dist_info + "/WHEEL", wheel.encode()))
    record = "".join("%s,%s,%d\n" % (a, digest(d), len(d)) for a, d in entries)
    record += dist_info + "/RECORD,,\n"
    entries.append((dist_info + "/RECORD", record.encode()))

    epoch = max(int(os.environ.get("SOURCE_DATE_EPOCH", "315532800")), 315532800)
    stamp = time.gmtime(epoch)[:6]
    os.makedirs(out_dir, exist_ok=True)
    target = os.path.join(out_dir, "%s-%s-%s.whl" % (name, ver, TAG))
    tmp = target + ".tmp"
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        for arcname, data in entries:
            info = zipfile.ZipInfo(arcname, date_time=stamp)
            info.external_attr = 0o100644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    os.replace(tmp, target)
    return target


def main():
    p = argparse.ArgumentParser(description="Build the fleetq client's wheel with the standard library alone.")
    p.add_argument("--out", default="dist", help="directory the wheel is written to (default: dist)")
    print(build(p.parse_args().out))


if __name__ == "__main__":
    main()
