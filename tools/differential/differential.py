#!/usr/bin/env python3
"""The sandbox measured against kube-apiserver, request by request (issue 30).

Starts both servers fresh (servers.py), a recording proxy in front of each (upstream.py) and a
test webhook both call (webhook.py); runs every case of tests/differential/cases/ on both, each
in its own namespace, the two servers at the same time (run.py); normalizes and compares what
came back (normalize.py, compare.py); judges each difference against the explanations of
tests/differential/known.yaml (known.py); prints `N of M cases identical`, writes every
difference to OUT/report.txt (the normalized results of the differing cases beside it, in
OUT/results/), and with --write-docs the generated section of docs/sandbox.md. Exits non-zero
when a difference is not explained, when an explanation explains nothing any more, when a status
code differs, or (--check-docs) when docs/sandbox.md's section is not what this run generates.
--rejudge runs nothing and compares the last run's saved results again (after editing known.yaml
or normalize.py).

Run it with scripts/differential.sh, which makes the Python environment and finds `lien`.
"""

import argparse
import concurrent.futures
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import time

import yaml

import cases as cases_mod
import compare
import known
import normalize
import servers
import upstream
import webhook as webhook_mod
from run import Side, literals

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SERVERS = ("sandbox", "kube")


class Env:
    def __init__(self, workdir, upstreams, proxies, webhook):
        self.workdir = workdir
        self.upstreams = upstreams
        self.proxies = proxies
        self.webhook = webhook
        self.home = os.path.join(workdir, "home")
        os.makedirs(self.home, exist_ok=True)
        self.lock = threading.Lock()

    def cache_dir(self, server):
        return os.path.join(self.workdir, "kubectl-cache", server)

    def kubeconfig(self, server, ns):
        """kubectl's view of one case on one server: the proxy, and tokens that name the case."""
        path = os.path.join(self.workdir, "kubeconfigs", f"{server}-{ns}.yaml")
        if not os.path.exists(path):
            base = self.proxies[server].url
            config = {
                "apiVersion": "v1", "kind": "Config", "current-context": "sandbox",
                "clusters": [{"name": "sandbox", "cluster": {"server": base,
                                                             "certificate-authority-data": self.proxies[server].ca_base64}}],
                "users": [{"name": "sandbox-admin", "user": {"token": f"diff/{ns}/admin"}},
                          {"name": "sandbox-user", "user": {"token": f"diff/{ns}/user"}}],
                "contexts": [{"name": "sandbox", "context": {"cluster": "sandbox", "user": "sandbox-admin", "namespace": ns}},
                             {"name": "sandbox-user", "context": {"cluster": "sandbox", "user": "sandbox-user", "namespace": ns}}],
            }
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path + ".tmp", "w") as f:
                json.dump(config, f)
            os.replace(path + ".tmp", path)
        return path


def prepare_namespace(env, server, ns):
    """The case's namespace, with what kube-controller-manager adds to every namespace (the
    `default` ServiceAccount, the `kube-root-ca.crt` ConfigMap) already there on both servers:
    kube's controllers add them a moment later, the sandbox's at once."""
    up = env.upstreams[server]
    body = json.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}).encode()
    resp = up.request("admin", "POST", "/api/v1/namespaces", [("Content-Type", "application/json")], body)
    if resp.status not in (201, 409):
        raise RuntimeError(f"{server}: creating namespace {ns}: {resp.status} {resp.body[:300]!r}")
    for path in (f"/api/v1/namespaces/{ns}/serviceaccounts/default", f"/api/v1/namespaces/{ns}/configmaps/kube-root-ca.crt"):
        if not upstream.wait_until(lambda: up.request("admin", "GET", path).status == 200, 60):
            raise RuntimeError(f"{server}: {path} did not appear")


class Outcome:
    def __init__(self, case_id, ns, normalized, diffs, seconds):
        self.case_id = case_id
        self.ns = ns
        self.normalized = normalized  # {server: results}; None when read back by --rejudge
        self.diffs = diffs            # [(path, sandbox, kube)]
        self.seconds = seconds
        self.raw = None


def run_case(env, case):
    started = time.monotonic()
    for server in SERVERS:
        prepare_namespace(env, server, case.ns)
    sides = {s: Side(env, s, case) for s in SERVERS}
    threads = [threading.Thread(target=sides[s].run, args=(case.setup, case.steps)) for s in SERVERS]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    raw = {"sent": sorted(literals(case.text)), "sides": {}}
    for s in SERVERS:
        urls = [(env.webhook.url(s, case.ns), "<webhook>"), (env.webhook.base, "<webhook-server>"),
                (env.proxies[s].url, "<server>"), (env.upstreams[s].server, "<server>")]
        raw["sides"][s] = {"urls": urls, "results": sides[s].results}
    return compared(case.id, case.ns, raw, time.monotonic() - started)


def compared(case_id, ns, raw, seconds):
    """An outcome from both sides' raw results (as run, or as saved in OUT/raw/ by an earlier run):
    normalized with aliases of their own per side, then compared."""
    normalized = {}
    for s in SERVERS:
        aliases = normalize.Aliases(raw["sent"])
        for url, placeholder in raw["sides"][s]["urls"]:
            aliases.add_url(url, placeholder)
            if placeholder == "<server>" and "://" in url:
                # The server's own address as it advertises it (`/api`'s
                # serverAddressByClientCIDRs): host and port, without the scheme.
                aliases.add_url(url.split("://", 1)[1], "<server-address>")
        normalized[s] = compare.normalize_side(raw["sides"][s]["results"], aliases)
    diffs = compare.differences(normalized["sandbox"], normalized["kube"])
    o = Outcome(case_id, ns, normalized, diffs, seconds)
    o.raw = raw
    return o


def step_label(case, outcome, path):
    m = re.match(r"\[(\d+)\]\.?(.*)", path)
    if not m:
        return path
    i = int(m.group(1))
    steps = case.steps
    step = steps[i] if i < len(steps) else {}
    kind = next((k for k in ("kubectl", "http", "python", "wait", "wait_webhooks", "webhook", "join") if k in step), "step")
    what = step.get(kind) if kind != "webhook" else "reviews"
    what = str(what).strip().split("\n")[0]
    return f"step {i + 1} ({kind} {compare.short(what, 50)}): {m.group(2)}"


def label_for(cases_by_id):
    def label(case_id, path):
        case = cases_by_id.get(case_id)
        return step_label(case, None, path) if case else path
    return label


def write_report(outcomes, judged, entries, label, out_dir):
    """report.txt: every differing case, every difference, and what explains it; results/: both
    sides' normalized results of each differing case; raw/: every case's results as run, what
    --rejudge reads."""
    os.makedirs(out_dir, exist_ok=True)
    results = os.path.join(out_dir, "results")
    shutil.rmtree(results, ignore_errors=True)
    os.makedirs(results)
    raw_dir = os.path.join(out_dir, "raw")
    os.makedirs(raw_dir, exist_ok=True)
    for o in outcomes:
        if o.raw is not None:
            with open(os.path.join(raw_dir, o.case_id.replace("/", "--") + ".json"), "w") as f:
                json.dump({"id": o.case_id, "ns": o.ns, "seconds": round(o.seconds, 1), **o.raw}, f, default=str)
    with open(os.path.join(out_dir, "report.txt"), "w") as f:
        for o in outcomes:
            if not o.diffs:
                continue
            j = judged[o.case_id]
            tags = (" STATUS CODE DIFFERS" if j.status else "") + (" NOT EXPLAINED" if j.unexplained else "")
            unscored_by = known.unscored_by(o.case_id, entries)
            if unscored_by:
                why = "kube-apiserver fails it" if unscored_by.kube_defect else "timing-dependent"
                tags += f" ({why}: not scored)"
            f.write(f"== {o.case_id} (namespace {o.ns}, {o.seconds:.1f} s){tags}\n")
            if j.entries:
                f.write(f"   known: {', '.join(j.entries)}\n")
            for path, a, b in o.diffs:
                e = next((e.id for e in entries if e.matches(o.case_id, path, a, b)), None)
                note = " [status code]" if known.STATUS_CODE.search(path) else (f" [{e}]" if e else " [NOT EXPLAINED]")
                if b is None and isinstance(a, str):  # a unified diff of printed lines
                    f.write(f"   {label(o.case_id, path)}{note}\n" + "".join(f"      {line}\n" for line in a.split("\n")[:60]))
                else:
                    f.write(f"   {label(o.case_id, path)}{note}\n      sandbox: {compare.short(a, 600)}\n      kube:    {compare.short(b, 600)}\n")
            if o.normalized:
                base = os.path.join(results, o.case_id.replace("/", "--"))
                for s in SERVERS:
                    with open(f"{base}.{s}.yaml", "w") as g:
                        yaml.safe_dump(o.normalized[s], g, sort_keys=False, allow_unicode=True, width=140)


def run_all(args, all_cases):
    workdir = tempfile.mkdtemp(prefix="lien-differential-")
    started = []
    proxies = []
    outcomes = []
    began = time.monotonic()
    try:
        hook = webhook_mod.Webhook(workdir)
        sandbox, t_sandbox = servers.start_sandbox(os.path.abspath(args.lien), workdir)
        started.append(sandbox)
        kube, t_kube = servers.start_control_plane(ROOT, workdir)
        started.append(kube)
        print(f"differential: sandbox ready in {t_sandbox:.1f} s, kube-apiserver in {t_kube:.1f} s; "
              f"{len(all_cases)} cases, {args.jobs} at a time", flush=True)
        ups = {"sandbox": upstream.Upstream("sandbox", sandbox.kubeconfig, workdir),
               "kube": upstream.Upstream("kube", kube.kubeconfig, workdir)}
        px = {s: upstream.Proxy(ups[s], workdir) for s in SERVERS}
        proxies.extend(px.values())
        env = Env(workdir, ups, px, hook)
        pool = concurrent.futures.ThreadPoolExecutor(args.jobs)
        futures = {pool.submit(run_case, env, c): c for c in all_cases}
        try:
            for n, fut in enumerate(concurrent.futures.as_completed(futures), 1):
                case = futures[fut]
                try:
                    o = fut.result()
                except Exception as e:
                    o = Outcome(case.id, case.ns, None, [("runner", f"{type(e).__name__}: {e}", "")], 0)
                outcomes.append(o)
                if n % 50 == 0:
                    print(f"  {n}/{len(all_cases)} cases run ({time.monotonic() - began:.0f} s, "
                          f"{sum(1 for o in outcomes if o.diffs)} differ)", flush=True)
        finally:
            # Stopped (Ctrl-C, SIGTERM): the cases not yet begun are dropped, the running ones
            # end when the servers stop under them.
            pool.shutdown(wait=False, cancel_futures=True)
    finally:
        for p in proxies:
            p.stop()
        for s in reversed(started):
            s.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return outcomes, time.monotonic() - began


def rejudge(out_dir, only):
    """The last run's raw results (OUT/raw/), normalized and compared again."""
    outcomes = []
    raw_dir = os.path.join(out_dir, "raw")
    for name in sorted(os.listdir(raw_dir)):
        with open(os.path.join(raw_dir, name)) as f:
            saved = json.load(f)
        if only is None or re.search(only, saved["id"]):
            outcomes.append(compared(saved["id"], saved["ns"], saved, saved["seconds"]))
    return outcomes


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lien", help="the lien binary whose sandbox is measured")
    parser.add_argument("--cases", default=os.path.join(ROOT, "tests", "differential", "cases"))
    parser.add_argument("--known", default=os.path.join(ROOT, "tests", "differential", "known.yaml"))
    parser.add_argument("--only", help="run only the cases whose id matches this regular expression")
    parser.add_argument("--jobs", type=int, default=4, help="cases run at once (each on both servers)")
    parser.add_argument("--out", default=os.path.join(ROOT, "target", "differential"))
    parser.add_argument("--rejudge", action="store_true",
                        help="run nothing: compare and judge the last run's results (OUT/raw/) again, after a change of known.yaml or of the normalization")
    parser.add_argument("--write-docs", action="store_true", help="rewrite docs/sandbox.md's generated section")
    parser.add_argument("--check-docs", action="store_true", help="fail if docs/sandbox.md's section differs from this run's")
    args = parser.parse_args()

    def stop(signum, frame):
        raise SystemExit(128 + signum)
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGHUP, stop)

    all_cases = cases_mod.load(args.cases, args.only)
    cases_by_id = {c.id: c for c in cases_mod.load(args.cases)}
    entries = known.load(args.known)
    if args.rejudge:
        outcomes, seconds = rejudge(args.out, args.only), None
    else:
        if not args.lien:
            parser.error("--lien is required unless --rejudge")
        if args.only is None:
            shutil.rmtree(os.path.join(args.out, "raw"), ignore_errors=True)
        outcomes, seconds = run_all(args, all_cases)
    outcomes.sort(key=lambda o: o.case_id)
    unscored = [o.case_id for o in outcomes if known.unscored_by(o.case_id, entries)]
    all_outcomes = outcomes
    outcomes = [o for o in outcomes if o.case_id not in set(unscored)]
    judged = known.judge(outcomes, entries)
    label = label_for(cases_by_id)
    write_report(all_outcomes, {**known.judge(all_outcomes, entries), **judged}, entries, label, args.out)

    same = sum(1 for o in outcomes if not o.diffs)
    total = len(outcomes)
    status = sorted(c for c, j in judged.items() if j.status)
    lien = sorted(c for c, j in judged.items() if j.lien)
    unexplained = sorted(c for c, j in judged.items() if j.unexplained)
    known_path = os.path.relpath(args.known, ROOT)
    failures = [f"not explained in {known_path}: {c}" for c in unexplained]
    failures += [f"a status code differs: {c}: {label(c, judged[c].status[0][0])}: "
                 f"sandbox {compare.short(judged[c].status[0][1], 30)}, kube {compare.short(judged[c].status[0][2], 30)}" for c in status]
    if args.only is None:
        used = {e for j in judged.values() for e in j.entries}
        failures += [f"{known_path}: `{e.id}` explains nothing in this run: remove it" for e in entries
                     if e.id not in used and not e.unscored and not e.sometimes]
    took = f" in {seconds:.0f} s" if seconds is not None else ""
    print(f"\n{same} of {total} cases identical ({100.0 * same / max(total, 1):.1f} %){took}"
          f" ({len(unscored)} timing-dependent or kube-failing cases run, not scored); "
          f"a status code differs in {len(status)}, something Lien reads in {len(lien)}, "
          f"not explained: {len(unexplained)}; details: {os.path.join(args.out, 'report.txt')}")
    section = known.docs_section(outcomes, entries, judged, label, unscored)
    docs = os.path.join(ROOT, "docs", "sandbox.md")
    with open(docs) as f:
        text = f.read()
    if args.write_docs:
        if args.only is not None:
            failures.append("--write-docs needs the whole corpus: run it without --only")
        else:
            with open(docs, "w") as f:
                f.write(known.replace_section(text, section))
            print(f"wrote the generated section of {os.path.relpath(docs, ROOT)}")
    elif args.check_docs and known.replace_section(text, section) != text:
        failures.append("docs/sandbox.md's differential section is not this run's: run scripts/differential.sh --write-docs")
    for f in failures:
        print(f"FAIL: {f}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
