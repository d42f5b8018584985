"""Starting the two servers, fresh for each run, and making sure neither outlives the runner.

- the sandbox: `lien sandbox --no-lien --port 0 --authorization-mode=RBAC` (RBAC, as the real
  control plane: the cases about refusals need it, and the others are the admin's);
- kube-apiserver: `scripts/control-plane.sh start` with the sandbox's Service range
  (10.96.0.0/12, so that a requested cluster IP is judged alike) and kube-controller-manager
  running only the controllers the sandbox also runs (garbage collector, namespace,
  serviceaccount, root-ca-cert-publisher, clusterrole-aggregation, PV and PVC protection): the Deployment, ReplicaSet,
  Job… controllers would write status and create objects the sandbox never does (docs/sandbox.md:
  "Nothing runs"), at their own pace, into the objects a case compares.

Both are started from the main thread with PR_SET_PDEATHSIG = SIGKILL (the kernel kills them
when the runner dies, however it dies); the control plane's launcher also stops everything when
its stdin, held by the runner only, closes. A normal exit, SIGINT and SIGTERM stop both at once.
"""

import ctypes
import json
import os
import re
import signal
import subprocess
import threading
import time

_libc = ctypes.CDLL(None, use_errno=True)
PR_SET_PDEATHSIG = 1

SERVICE_RANGE = "10.96.0.0/12"
CONTROLLERS = ",".join([
    "garbage-collector-controller",
    "namespace-controller",
    "serviceaccount-controller",
    "root-ca-certificate-publisher-controller",
    "clusterrole-aggregation-controller",
    "persistentvolume-protection-controller",
    "persistentvolumeclaim-protection-controller",
])


def _die_with_parent():
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    # Its own process group: Ctrl-C in the runner's terminal reaches the runner, which stops
    # the servers in order, not the servers first.
    os.setpgid(0, 0)


class Started:
    def __init__(self, name, proc, kubeconfig, log):
        self.name = name
        self.proc = proc
        self.kubeconfig = kubeconfig
        self.log = log

    def stop(self):
        if self.proc.poll() is not None:
            return
        try:
            if self.proc.stdin:
                self.proc.stdin.close()
            else:
                self.proc.terminate()
            self.proc.wait(timeout=20)
        except Exception:
            self.proc.kill()
            self.proc.wait()


def start_sandbox(lien, workdir):
    kubeconfig = os.path.join(workdir, "sandbox.kubeconfig")
    log = open(os.path.join(workdir, "sandbox.log"), "wb")
    proc = subprocess.Popen(
        [lien, "sandbox", "--no-lien", "--port", "0", "--kubeconfig", kubeconfig,
         "--authorization-mode=RBAC", "--log-format", "text"],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log, preexec_fn=_die_with_parent)
    started = time.monotonic()
    for line in proc.stdout:
        if re.search(rb"listening on https://127\.0\.0\.1:\d+", line):
            break
    else:
        raise RuntimeError(f"the sandbox exited before serving (log: {log.name})")
    # The rest of its stdout is the welcome text; drain it so that it never blocks.
    threading.Thread(target=proc.stdout.read, daemon=True).start()
    for _ in range(200):
        if os.path.exists(kubeconfig) and os.path.getsize(kubeconfig) > 0:
            break
        time.sleep(0.05)
    return Started("sandbox", proc, kubeconfig, log.name), time.monotonic() - started


def start_control_plane(root, workdir):
    log = open(os.path.join(workdir, "control-plane.log"), "wb")
    proc = subprocess.Popen(
        [os.path.join(root, "scripts", "control-plane.sh"), "start",
         "--service-cluster-ip-range", SERVICE_RANGE, "--controllers", CONTROLLERS],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, preexec_fn=_die_with_parent)
    line = proc.stdout.readline()
    if not line:
        proc.wait()
        raise RuntimeError(f"the control plane did not start (log: {log.name})")
    ready = json.loads(line)
    threading.Thread(target=proc.stdout.read, daemon=True).start()
    # The users by bearer token, as the sandbox authenticates its own (same names, uids and
    # groups): an AdmissionReview's or SelfSubjectReview's userInfo then depends on the server,
    # not on how the runner's kubeconfig happens to authenticate.
    return Started("kube", proc, ready["token_kubeconfig"], log.name), ready["startup_seconds"]
