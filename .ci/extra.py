"""Prints the requirements of one of pyproject.toml's extras that apply to this Python
(their markers evaluated), one a line: what `make setup-core CORE_EXTRA=<name>` adds to
.venv-core. The package's own metadata asks for Python 3.10 (the distributed stack), so
the core's venv cannot install the extra through it; its pins stay in one place all the
same."""

import pathlib
import sys

import tomllib
from packaging.requirements import Requirement

PYPROJECT = pathlib.Path(__file__).resolve().parent.parent / "pyproject.toml"


def requirements(extra: str) -> list[str]:
    """The extra's requirements for this interpreter, without their markers; SystemExit
    naming the valid extras when there is no such extra."""
    extras = tomllib.loads(PYPROJECT.read_text())["project"]["optional-dependencies"]
    if extra not in extras:
        raise SystemExit(f"distrl: no extra {extra!r} in pyproject.toml; valid: {sorted(extras)}")
    found = []
    for line in extras[extra]:
        req = Requirement(line)
        if req.marker is None or req.marker.evaluate():
            extras_part = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
            found.append(f"{req.name}{extras_part}{req.specifier}")
    if not found:
        raise SystemExit(f"distrl: the extra {extra!r} has nothing for Python {sys.version}")
    return found


if __name__ == "__main__":
    print("\n".join(requirements(sys.argv[1])))
