#!/usr/bin/env python3
"""Renders a Helm chart offline as `helm template --include-crds` does, with Helm's own engine.

    $(scripts/helm-venv.sh) scripts/helm-render.py deploy/helm/lien [--set KEY=VALUE ...]

Prints one YAML stream: the chart's crds/ first (as Helm installs them), then every rendered
template, each document headed `# Source: <path>` like `helm template`. Values given with --set
are parsed by Helm's own --set parser and checked against values.schema.json by Helm; a value
the schema refuses exits 1 with Helm's message on stderr.
"""

import argparse
import sys

import helm_python as helm


def merge(into, new):
    """Several --set flags into one map, as Helm parses each into the values so far
    (`a.b=1` then `a.c=2` keeps both; `l[0].x=1` then `l[0].y=2` one item with both)."""
    if isinstance(into, dict) and isinstance(new, dict):
        for key, value in new.items():
            into[key] = merge(into[key], value) if key in into else value
        return into
    if isinstance(into, list) and isinstance(new, list):
        for i, value in enumerate(new):
            if i < len(into):
                into[i] = value if value is None else merge(into[i], value)
            else:
                into.append(value)
        return into
    return new


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chart")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--release-name", default="lien")
    parser.add_argument(
        "--lint",
        action="store_true",
        help="instead, run `helm lint --strict`: exit 1 on any warning or error",
    )
    args = parser.parse_args()
    if args.lint:
        report = helm.lint(args.chart, strict=True)
        # Severity 1 is information ("icon is recommended"); 2 a warning, 3 an error.
        findings = [m for m in report["messages"] if m["severity"] >= 2]
        for m in findings:
            print(f"helm lint: {m['path']}: {m['error']}", file=sys.stderr)
        for e in report["errors"]:
            print(f"helm lint: {e}", file=sys.stderr)
        return 1 if findings or report["errors"] else 0
    values: dict = {}
    try:
        for expression in args.set:
            merge(values, helm.parse_set_string(expression))
        chart = helm.Chart.load(args.chart)
        rendered = chart.render(values, name=args.release_name, is_install=True)
    except helm.HelmError as e:
        print(f"helm: {e}", file=sys.stderr)
        return 1
    out = []
    for crd in sorted(chart.crds, key=lambda c: c["name"]):
        out.append(f"# Source: {chart.name}/{crd['name']}\n{crd['data']}")
    for path in sorted(rendered):
        # As `helm template`: NOTES.txt is not a manifest; a document that renders empty
        # (a disabled `if`) is left out.
        if path.endswith("NOTES.txt"):
            continue
        for doc in rendered[path].split("\n---\n"):
            doc = doc.removeprefix("---\n")
            if doc.strip():
                out.append(f"# Source: {path}\n{doc.rstrip()}\n")
    sys.stdout.write("---\n" + "---\n".join(out) if out else "")
    return 0


if __name__ == "__main__":
    sys.exit(main())
