#!/usr/bin/env python3
"""Print the content digest of environment plugin folders, runnable without building Arbiter.

    python3 src/kinds/plugin/runtime/digest.py examples/plugins/arithmetic

The rule is the one in src/kinds/plugin/digest.ts (a test keeps the two in agreement):
walk without following symlinks; skip __pycache__ directories, node_modules/.cache and
*.pyc / *.pyo files; sort entries by their UTF-8 relative path; SHA-256 over
type ("f" or "l") + " " + path + NUL + decimal length + NUL + content (a symlink's content
is its link text); print "sha256:" + hex.
"""
import hashlib
import os
import stat
import sys


def _excluded(parts, is_dir):
    name = parts[-1]
    if is_dir:
        return name == "__pycache__" or (name == ".cache" and len(parts) >= 2 and parts[-2] == "node_modules")
    return name.endswith(".pyc") or name.endswith(".pyo")


def digest_folder(folder):
    entries = []

    def walk(relative_parts):
        absolute = os.path.join(folder, *relative_parts) if relative_parts else folder
        for name in os.listdir(absolute):
            parts = relative_parts + [name]
            child = os.path.join(folder, *parts)
            info = os.lstat(child)
            if stat.S_ISDIR(info.st_mode):
                if not _excluded(parts, True):
                    walk(parts)
            elif stat.S_ISREG(info.st_mode) or stat.S_ISLNK(info.st_mode):
                if not _excluded(parts, False):
                    kind = b"f" if stat.S_ISREG(info.st_mode) else b"l"
                    entries.append((os.fsencode("/".join(parts)), kind, child))

    walk([])
    entries.sort(key=lambda entry: entry[0])
    hasher = hashlib.sha256()
    for path, kind, absolute in entries:
        if kind == b"f":
            with open(absolute, "rb") as handle:
                content = handle.read()
        else:
            content = os.fsencode(os.readlink(absolute))
        hasher.update(kind + b" " + path + b"\0" + str(len(content)).encode() + b"\0")
        hasher.update(content)
    return "sha256:" + hasher.hexdigest()


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.stderr.write("usage: digest.py <plugin folder>...\n")
        sys.exit(2)
    for target in sys.argv[1:]:
        print(digest_folder(target) if len(sys.argv) == 2 else digest_folder(target) + "  " + target)
