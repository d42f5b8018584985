"""The differences the sandbox is known to have, each with why it does not matter to a user
(tests/differential/known.yaml), matched against a run's differences; and the list of them that
docs/sandbox.md carries, generated.

known.yaml is a list of entries:

  - id: list-items-typed                 # a name, unique, used in the docs and the report
    why: >-                              # why a user (and Lien) need not care; one paragraph
      ...
    where: 'body\\.items\\[\\d+\\]\\.(apiVersion|kind)$'   # a regular expression the difference's path
                                         # must match (searched; the path as report.txt prints it
                                         # after the step, e.g. `exchanges[2].body.items[0].kind`)
    sandbox: '...'                       # optional: one the sandbox's value must match (its repr;
    kube: '...'                          #   for kubectl's output, the unified diff's text)
    cases: 'crd/*'                       # optional: a glob (or a list of globs) the case's id must match
    timing: true                         # instead of `where`: the cases (named by `cases`) whose
                                         # outcome depends on timing; run and reported, not scored
    kube-defect: true                    # instead of `where`: the cases (named by `cases`) where
                                         # kube-apiserver itself fails (a panic, a dropped
                                         # connection): nothing for the sandbox to copy; run and
                                         # reported, not scored, `why` saying what the sandbox does
    sandbox-bug: true                    # optional: the sandbox should change; `why` says how
    sometimes: true                      # optional: the difference shows in some runs only (an
                                         # order Go's map iteration randomizes): not stale when
                                         # a run has none

Entries explain single differences, not cases: a case is explained when every one of its
differences is. A difference in a status code (an HTTP status, kubectl's exit code, the status
of an ApiException) is never explained by an entry: it is always listed as such, and fails the
run. An entry that matched nothing in a whole run fails it too (it is stale: remove it), unless
it is marked `sometimes`.
"""

import fnmatch
import os
import re

import yaml

import compare

# The path of a status code: a step's own (`[3].status`), an exchange's (`[3].exchanges[1].status`),
# an ApiException's, kubectl's exit code. A `status` key inside a body (a Deployment's status) is
# not one.
STATUS_CODE = re.compile(r"^\[\d+\](\.exchanges\[\d+\])?\.(status|exit)$|^\[\d+\]\.exception\.status$")
# What Lien itself reads: objects' labels, annotations, finalizers, owner references, deletion
# timestamps; the AdmissionReviews its webhook receives; Status errors (reason, message, code,
# details) its clients interpret; and watch events, which its controller is fed by.
LIEN_READS = re.compile(
    r"metadata\.(labels|annotations|finalizers|ownerReferences|deletionTimestamp|deletionGracePeriodSeconds)"
    r"|\.reviews\[|\.events(\[len\]|\[\d+\]\.(type|object\.metadata))"
    r"|(body|exception\.body)\.(reason|message|code|details)\b")
# Paths that name those fields without being them: a Table's column definitions, an OpenAPI
# document's schemas, managedFields' field sets.
NOT_LIEN_READS = re.compile(r"columnDefinitions|\.(definitions|components|paths)\.|managedFields|\.protobuf")


def lien_reads(path):
    return bool(LIEN_READS.search(path)) and not NOT_LIEN_READS.search(path)


class Entry:
    def __init__(self, raw):
        self.id = raw["id"]
        self.why = " ".join(str(raw["why"]).split())
        self.where = re.compile(raw.get("where", "$^"))
        self.sandbox = re.compile(raw["sandbox"], re.S) if raw.get("sandbox") else None
        self.kube = re.compile(raw["kube"], re.S) if raw.get("kube") else None
        cases = raw.get("cases")
        self.cases = [cases] if isinstance(cases, str) else cases
        self.bug = bool(raw.get("sandbox-bug"))
        self.timing = bool(raw.get("timing"))
        self.kube_defect = bool(raw.get("kube-defect"))
        self.sometimes = bool(raw.get("sometimes"))
        if (self.timing or self.kube_defect) and not self.cases:
            raise ValueError(f"{self.id}: a `timing` or `kube-defect` entry names its cases")

    @property
    def unscored(self):
        """Whether the entry names cases left out of the number rather than explaining
        differences."""
        return self.timing or self.kube_defect

    def matches(self, case_id, path, a, b):
        if self.cases and not any(fnmatch.fnmatchcase(case_id, c) for c in self.cases):
            return False
        if not self.where.search(path):
            return False
        if self.sandbox and not self.sandbox.search(_text(a)):
            return False
        if self.kube and not self.kube.search(_text(b)):
            return False
        return True


def _text(v):
    return v if isinstance(v, str) else repr(v)


def load(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        raw = yaml.safe_load(f) or []
    entries = [Entry(r) for r in raw]
    ids = [e.id for e in entries]
    dupes = {i for i in ids if ids.count(i) > 1}
    if dupes:
        raise ValueError(f"{path}: ids used twice: {sorted(dupes)}")
    return entries


class Judged:
    """One differing case, judged: which entries explain which of its differences."""

    def __init__(self, case_id, diffs, entries):
        self.case_id = case_id
        self.status = []       # differences in a status code
        self.unexplained = []  # other differences no entry explains
        self.entries = []      # ids of the entries that explained something, in order
        self.lien = False      # a difference in something Lien reads
        # A step (or one of its exchanges) whose status code differs differs in everything
        # else too: those differences are the status code's, listed with it.
        failed = [re.sub(r"\.(status|exit)$|\.exception\.status$", "", p) for p, _, _ in diffs if STATUS_CODE.search(p)]
        self.consequences = 0
        for d in diffs:
            path, a, b = d
            if lien_reads(path):
                self.lien = True
            if STATUS_CODE.search(path):
                self.status.append(d)
                continue
            if any(path.startswith(f + ".") or path.startswith(f + "[") for f in failed):
                self.consequences += 1
                continue
            entry = next((e for e in entries if e.matches(case_id, path, a, b)), None)
            if entry is None:
                self.unexplained.append(d)
            elif entry.id not in self.entries:
                self.entries.append(entry.id)


def unscored_by(case_id, entries):
    """The `timing: true` or `kube-defect: true` entry naming this case: a case whose outcome
    depends on which of two things happens first (a kubectl poll and a garbage collector, a
    watch and a write), or where kube-apiserver itself fails. It runs and is reported, but is
    not scored, so that the number and the list are the same run to run."""
    return next((e for e in entries if e.unscored and any(fnmatch.fnmatchcase(case_id, c) for c in e.cases)), None)


def judge(outcomes, entries):
    """{case id: Judged} for every differing case."""
    return {o.case_id: Judged(o.case_id, o.diffs, entries) for o in outcomes if o.diffs}


BEGIN = "<!-- BEGIN differential: generated by `scripts/differential.sh --write-docs`, checked by `--check-docs` -->"
END = "<!-- END differential -->"


def docs_section(outcomes, entries, judged, label, unscored=()):
    """The generated part of docs/sandbox.md. Only what a run decides goes in (which cases
    differ, and how); nothing that varies run to run (times, values)."""
    total = len(outcomes)
    same = total - len(judged)
    status = [j for j in sorted(judged.values(), key=lambda j: j.case_id) if j.status]
    unexplained = [j for j in sorted(judged.values(), key=lambda j: j.case_id) if j.unexplained]
    lines = [BEGIN, "",
             f"**{same} of {total} cases identical ({100.0 * same / max(total, 1):.1f} %)** between `lien sandbox` and "
             f"kube-apiserver v1.32.13 (`scripts/differential.sh`; the corpus is `tests/differential/cases/`, "
             f"how a case is compared is `tools/differential/`). Of the {len(judged)} that differ, "
             f"{sum(1 for j in judged.values() if j.lien)} differ in something Lien reads (labels, annotations, "
             f"finalizers, owner references, deletion timestamps, AdmissionReviews, watch events, `Status` errors).", ""]
    lines += ["### Status codes that differ", ""]
    if status:
        lines += ["Never explained away: each is a sandbox bug or a case to fix.", "",
                  "| case | where | sandbox | kube-apiserver |", "| --- | --- | --- | --- |"]
        for j in status:
            for path, a, b in j.status:
                lines.append(f"| `{j.case_id}` | {compare.short(label(j.case_id, path), 90)} | {compare.short(a, 40)} | {compare.short(b, 40)} |")
    else:
        lines.append("None.")
    lines += ["", "### Other differences, and why they do not matter to a user", "",
              "From `tests/differential/known.yaml`; a case can show several. *Lien reads* marks a "
              "difference in something Lien itself reads.", "",
              "| difference | cases | why it does not matter |", "| --- | --- | --- |"]
    by_entry = {}
    lien_entries = set()
    for j in judged.values():
        for eid in j.entries:
            by_entry.setdefault(eid, []).append(j.case_id)
    for o in outcomes:
        for path, a, b in o.diffs:
            if lien_reads(path) and not STATUS_CODE.search(path):
                e = next((e for e in entries if e.matches(o.case_id, path, a, b)), None)
                if e:
                    lien_entries.add(e.id)
    for e in entries:
        cases = sorted(by_entry.get(e.id, []))
        if not cases:
            continue
        shown = ", ".join(f"`{c}`" for c in cases[:3]) + (f" and {len(cases) - 3} more" if len(cases) > 3 else "")
        mark = (" (*Lien reads*)" if e.id in lien_entries else "") + (" (sandbox bug)" if e.bug else "")
        why = e.why.replace("|", "\\|")
        lines.append(f"| `{e.id}`{mark} | {len(cases)}: {shown} | {why} |")
    for kind, title, intro in [
        ("timing", "Timing-dependent cases, not scored",
         "Run and reported every time, but left out of the number: whether they differ depends on "
         "which of two things happens first."),
        ("kube_defect", "Where kube-apiserver itself fails, not scored",
         "Run and reported every time, but left out of the number: kube-apiserver v1.32.13 fails "
         "these requests itself (a panic, a dropped connection), so there is no answer to copy; "
         "each says what the sandbox answers instead."),
    ]:
        named = [e for e in entries if getattr(e, kind)]
        if not named:
            continue
        lines += ["", f"### {title}", "", intro, "", "| cases | why |", "| --- | --- |"]
        for e in named:
            ids = sorted(c for c in unscored if any(fnmatch.fnmatchcase(c, g) for g in e.cases))
            why = e.why.replace("|", "\\|")
            lines.append(f"| {', '.join(f'`{c}`' for c in ids)} | {why} |")
    if unexplained:
        # Only the cases: where a case first differs can move run to run (a namespace's
        # deletion is kube-controller-manager's, at its pace); report.txt has every difference.
        lines += ["", "### Not explained yet", "",
                  f"{len(unexplained)} cases, each with differences no entry explains yet (every one in "
                  "`$CARGO_TARGET_DIR/differential/report.txt`, marked NOT EXPLAINED): "
                  + ", ".join(f"`{j.case_id}`" for j in unexplained) + "."]
    lines += ["", END]
    return "\n".join(lines)


def replace_section(text, section):
    if BEGIN in text and END in text:
        return text[:text.index(BEGIN)] + section + text[text.index(END) + len(END):]
    return text.rstrip("\n") + "\n\n" + section + "\n"
