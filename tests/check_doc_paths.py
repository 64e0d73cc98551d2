#!/usr/bin/env python3
"""Fails when a tracked markdown file names a repository file or folder that does not exist.

usage: tests/check_doc_paths.py [ROOT]   (ROOT: the repository; default: the one it is in)

What counts as naming a path, in every tracked *.md file (git ls-files; without git, every *.md
outside build*/ and dot-folders):
  - the target of a markdown link or image, [text](target), that is not a URL: relative to the
    markdown file's folder (a target starting with / to ROOT); a #fragment into a markdown file
    must be one of its headings (GitHub's anchors);
  - in `backticks` (inline, or lines of a fenced code block), every word that starts with a
    top-level folder of the repository (stages/, common/, reference/, tests/, plots/,
    notebooks/, docs/, scripts/, results/, baselines/, bench/, cmake/), relative to ROOT, or with
    ./ or ../, relative to the markdown file's folder.
Left out as patterns, not paths: words with < > * ? { } [ ] $ or an ellipsis, NN_slug or NN as a
placeholder (stages/<series>/NN_slug/), and results/local/ (never committed). A trailing :LINE or
punctuation is dropped.
Prints each missing path as FILE:LINE: ...; exit codes 0 every path exists, 1 some do not, 2 a
usage error.
"""
import functools
import os
import re
import subprocess
import sys
from pathlib import Path

TOP_FOLDERS = ("stages", "common", "reference", "tests", "plots", "notebooks", "docs", "scripts",
               "results", "baselines", "bench", "cmake")
PATTERN_MARKS = re.compile(r"[<>*?{}\[\]$]|\.\.\.|…|(^|/)NN(_slug)?(/|$|_)")
NOT_COMMITTED = ("results/local/",)
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
INLINE_CODE = re.compile(r"(`+)(.+?)\1")
URL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)


def markdown_files(root):
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--", "*.md"], cwd=root, check=True,
                             capture_output=True, text=True).stdout
        return sorted(root / name for name in out.split("\0") if name)
    except (OSError, subprocess.CalledProcessError):
        found = []
        for folder, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if not d.startswith(".") and not d.startswith("build")]
            found += [Path(folder) / f for f in files if f.endswith(".md")]
        return sorted(found)


def github_anchor(heading):
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`|\*\*|__", "", heading.strip().lower())
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link in a heading: its text
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


@functools.lru_cache(maxsize=None)
def anchors_of(path):
    """The anchors of a markdown file's headings (a repeated one gets -1, -2, ... as on GitHub)."""
    names, counts, fenced = set(), {}, False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        match = None if fenced else re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if match:
            anchor = github_anchor(match.group(1))
            n = counts.get(anchor, 0)
            counts[anchor] = n + 1
            names.add(anchor if n == 0 else f"{anchor}-{n}")
        names.update(re.findall(r"\{#([\w-]+)\}", line))  # Doxygen's explicit anchors
    return frozenset(names)


def clean(word):
    word = word.strip("\"'(),;.:")
    word = re.sub(r":\d+(-\d+)?$", "", word)  # file:LINE
    return word.rstrip(".,;:")


def is_pattern(word):
    return bool(PATTERN_MARKS.search(word)) or word.startswith(NOT_COMMITTED)


def paths_in_code(text):
    """The words of a code span or line that name a path: (word, relative to the file?)."""
    for raw in text.split():
        word = clean(raw)
        if not word or is_pattern(word):
            continue
        if word.startswith(("./", "../")):
            yield word, True
        elif word.split("/", 1)[0] in TOP_FOLDERS and "/" in word:
            yield word, False


def check(root):
    root = root.resolve()
    missing, checked = [], 0
    for md in markdown_files(root):
        rel_md = md.relative_to(root)
        fenced = False
        for number, line in enumerate(md.read_text(encoding="utf-8").splitlines(), 1):
            if line.lstrip().startswith("```"):
                fenced = not fenced
                continue
            named = []  # (as written, path, fragment)
            if fenced:
                named += [(w, (md.parent if rel else root) / w, None)
                          for w, rel in paths_in_code(line)]
            else:
                for match in INLINE_CODE.finditer(line):
                    named += [(w, (md.parent if rel else root) / w, None)
                              for w, rel in paths_in_code(match.group(2))]
                for target in LINK.findall(INLINE_CODE.sub("", line)):
                    if URL.match(target) or target.startswith("#") or is_pattern(target):
                        continue
                    path, _, fragment = target.partition("#")
                    base = root if path.startswith("/") else md.parent
                    named.append((target, base / path.lstrip("/"), fragment or None))
            for written, path, fragment in named:
                checked += 1
                where = f"{rel_md}:{number}"
                if not path.exists():
                    shown = os.path.relpath(os.path.normpath(path), root)
                    missing.append(f"{where}: names {written}, but there is no {shown}")
                elif fragment and path.suffix == ".md" and fragment not in anchors_of(path):
                    missing.append(f"{where}: names {written}, but {path.name} has no heading "
                                   f"with the anchor #{fragment}")
    return missing, checked


def main(argv):
    if len(argv) > 2 or (len(argv) == 2 and argv[1] in ("-h", "--help")):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2 if len(argv) > 2 else 0
    root = Path(argv[1]) if len(argv) == 2 else Path(__file__).resolve().parent.parent
    if not root.is_dir():
        print(f"check_doc_paths: no folder {root}", file=sys.stderr)
        return 2
    missing, checked = check(root)
    for line in missing:
        print(line)
    if missing:
        print(f"check_doc_paths: {len(missing)} of {checked} paths named in markdown do not exist")
        return 1
    print(f"check_doc_paths: all {checked} paths named in markdown exist")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
