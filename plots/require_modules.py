"""Exit code 77 (CTest: "skipped") when a test's Python packages are missing.

The plot and notebook tests run in the repository's .venv (scripts/setup.sh installs it from
requirements.txt). On a machine without it, such as a GPU machine that cannot reach PyPI, they
are reported as skipped with the reason, never as passed.
"""
import importlib.util
import sys

SKIP = 77


def require(*modules):
    missing = [name for name in modules if importlib.util.find_spec(name) is None]
    if missing:
        print(f"skipped: Python package(s) {', '.join(missing)} not installed for {sys.executable}; "
              "run scripts/setup.sh to create .venv from requirements.txt")
        sys.exit(SKIP)
