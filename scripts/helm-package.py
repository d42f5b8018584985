#!/usr/bin/env python3
"""`helm package CHART --destination DIST --version V --app-version V` by Helm's own Go SDK.

    $(scripts/helm-venv.sh) scripts/helm-package.py CHART_DIR DIST VERSION

helm-python-sdk (PyPI; scripts/helm-venv.sh) calls Helm v4's package action compiled into its
wheel, so the archive is the one `helm package` writes (no helm binary can be installed on this
project's machines). Prints the archive's path.
"""
import sys

from helm_python import chart


def main() -> int:
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    chart_dir, dist, version = sys.argv[1:]
    print(chart.package(chart_dir, destination=dist, version=version, app_version=version))
    return 0


if __name__ == "__main__":
    sys.exit(main())
