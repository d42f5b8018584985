package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const (
	serviceAccountIs = "https://kubernetes.default.svc.cluster.local"
	frontProxyUser   = "front-proxy-client"
)

// controlPlane is one instance: its files, and its processes once started.
type controlPlane struct {
	o       options
	dataDir string
	logDir  string
	pkiDir  string
	// The first address of the Service range: the `kubernetes` Service's, named by the API
	// server's serving certificate as on any cluster.
	kubernetesServiceIP string

	caPath, caKeyPath string
	admissionCAPath   string
	admissionConfig   string // empty: no client certificate for webhooks
	apiserverCert     [2]string
	etcdCAPath        string
	etcdServer        [2]string
	etcdClient        [2]string
	frontProxyCAPath  string
	frontProxyClient  [2]string
	controllerCert    [2]string
	saKey, saPub      string

	ca         *authority
	adminCert  *issued
	userCert   *issued
	controller *issued
	kubeconfig string
	// tokenKubeconfig: the same users authenticated by bearer tokens, as `lien sandbox`
	// authenticates its own (the differential compares the two servers with it).
	tokenKubeconfig string
	tokens          []string
	tokenFilePath   string
	kcmKubecfg      string
	apiPort         int
	kcmPort         int
	etcdPort        int
	etcdPeer        int
	procs           []*proc
	exited          chan procExit
	adminClient     *http.Client
}

type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

type procExit struct {
	name string
	err  error
}

// portConflict: a process could not bind the port it was given.
type portConflict struct{ name string }

func (p *portConflict) Error() string { return p.name + " found its port taken" }

// stopped: asked to stop (stdin closed, a signal) before the control plane was ready.
type stopped struct{ why string }

func (s *stopped) Error() string { return "stopped before ready (" + s.why + ")" }

// prepare writes everything that does not depend on the ports: certificates, keys and the
// admission configuration.
func prepare(o options, dataDir string) (*controlPlane, error) {
	cp := &controlPlane{
		o:       o,
		dataDir: dataDir,
		logDir:  filepath.Join(dataDir, "logs"),
		pkiDir:  filepath.Join(dataDir, "pki"),
		exited:  make(chan procExit, 3),
	}
	_, network, err := net.ParseCIDR(o.serviceCIDR)
	if err != nil || network.IP.To4() == nil {
		return nil, fmt.Errorf("--service-cluster-ip-range %q: not an IPv4 CIDR", o.serviceCIDR)
	}
	first := network.IP.To4()
	cp.kubernetesServiceIP = net.IPv4(first[0], first[1], first[2], first[3]+1).String()
	for _, d := range []string{cp.logDir, cp.pkiDir, filepath.Join(dataDir, "admission")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	for _, bin := range []string{"etcd", "kube-apiserver", "kube-controller-manager"} {
		if _, err := os.Stat(filepath.Join(o.binDir, bin)); err != nil {
			return nil, fmt.Errorf("%s: %w (build with scripts/control-plane.sh build)", bin, err)
		}
	}
	if err := cp.writePKI(); err != nil {
		return nil, fmt.Errorf("generating certificates: %w", err)
	}
	return cp, nil
}

func (cp *controlPlane) writePKI() error {
	var err error
	if cp.ca, err = newAuthority("lien-control-plane-ca"); err != nil {
		return err
	}
	cp.caPath = filepath.Join(cp.pkiDir, "ca.crt")
	cp.caKeyPath = filepath.Join(cp.pkiDir, "ca.key")
	if err := os.WriteFile(cp.caPath, cp.ca.certPEM, 0o600); err != nil {
		return err
	}
	caKey, err := keyPEM(cp.ca.key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(cp.caKeyPath, caKey, 0o600); err != nil {
		return err
	}
	serving, err := cp.ca.issue(leaf{
		commonName: "kube-apiserver",
		hosts: []string{"127.0.0.1", "localhost", cp.kubernetesServiceIP, "kubernetes", "kubernetes.default",
			"kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		server: true,
	})
	if err != nil {
		return err
	}
	if cp.apiserverCert[0], cp.apiserverCert[1], err = serving.write(cp.pkiDir, "apiserver"); err != nil {
		return err
	}
	if cp.adminCert, err = cp.ca.issue(leaf{commonName: adminUser, orgs: []string{mastersGroup}, client: true}); err != nil {
		return err
	}
	if cp.userCert, err = cp.ca.issue(leaf{commonName: secondUser, orgs: []string{secondUserOrg}, client: true}); err != nil {
		return err
	}
	if cp.controller, err = cp.ca.issue(leaf{commonName: controllerUser, client: true}); err != nil {
		return err
	}
	for range tokenUsers {
		t, err := randomToken()
		if err != nil {
			return err
		}
		cp.tokens = append(cp.tokens, t)
	}
	cp.tokenFilePath = filepath.Join(cp.pkiDir, "tokens.csv")
	if err := os.WriteFile(cp.tokenFilePath, tokenFile(cp.tokens), 0o600); err != nil {
		return err
	}
	kcmServing, err := cp.ca.issue(leaf{commonName: "kube-controller-manager", hosts: []string{"127.0.0.1", "localhost"}, server: true})
	if err != nil {
		return err
	}
	if cp.controllerCert[0], cp.controllerCert[1], err = kcmServing.write(cp.pkiDir, "controller-manager-serving"); err != nil {
		return err
	}

	// etcd has a CA of its own: with the cluster's, every user's client certificate would open
	// etcd directly.
	etcdCA, err := newAuthority("lien-control-plane-etcd-ca")
	if err != nil {
		return err
	}
	cp.etcdCAPath = filepath.Join(cp.pkiDir, "etcd-ca.crt")
	if err := os.WriteFile(cp.etcdCAPath, etcdCA.certPEM, 0o600); err != nil {
		return err
	}
	etcdServer, err := etcdCA.issue(leaf{commonName: "etcd", hosts: []string{"127.0.0.1", "localhost"}, server: true, client: true})
	if err != nil {
		return err
	}
	if cp.etcdServer[0], cp.etcdServer[1], err = etcdServer.write(cp.pkiDir, "etcd-server"); err != nil {
		return err
	}
	etcdClient, err := etcdCA.issue(leaf{commonName: "kube-apiserver-etcd-client", client: true})
	if err != nil {
		return err
	}
	if cp.etcdClient[0], cp.etcdClient[1], err = etcdClient.write(cp.pkiDir, "apiserver-etcd-client"); err != nil {
		return err
	}

	// The aggregation layer's front proxy, as kubeadm sets it up: kube-apiserver forwards to
	// extension API servers with this client certificate, and publishes the CA in
	// kube-system/extension-apiserver-authentication, where the controller-manager's delegated
	// authentication looks for it (and logs an error every few seconds when it is missing).
	frontProxyCA, err := newAuthority("lien-control-plane-front-proxy-ca")
	if err != nil {
		return err
	}
	cp.frontProxyCAPath = filepath.Join(cp.pkiDir, "front-proxy-ca.crt")
	if err := os.WriteFile(cp.frontProxyCAPath, frontProxyCA.certPEM, 0o600); err != nil {
		return err
	}
	frontProxyClient, err := frontProxyCA.issue(leaf{commonName: frontProxyUser, client: true})
	if err != nil {
		return err
	}
	if cp.frontProxyClient[0], cp.frontProxyClient[1], err = frontProxyClient.write(cp.pkiDir, "front-proxy-client"); err != nil {
		return err
	}

	if cp.saKey, cp.saPub, err = serviceAccountKeys(cp.pkiDir); err != nil {
		return err
	}

	// The admission client CA signs nothing but the API server's webhook client certificate: a
	// webhook trusting it can tell the API server's calls from anyone else's.
	admissionCA, err := newAuthority("lien-control-plane-admission-client-ca")
	if err != nil {
		return err
	}
	cp.admissionCAPath = filepath.Join(cp.pkiDir, "admission-client-ca.crt")
	if err := os.WriteFile(cp.admissionCAPath, admissionCA.certPEM, 0o600); err != nil {
		return err
	}
	if !cp.o.noAdmissionCert {
		client, err := admissionCA.issue(leaf{commonName: admissionClientUser, client: true})
		if err != nil {
			return err
		}
		if cp.admissionConfig, err = admissionConfiguration(filepath.Join(cp.dataDir, "admission"), client); err != nil {
			return err
		}
	}

	pool := x509.NewCertPool()
	pool.AddCert(cp.ca.cert)
	adminPair, err := tls.X509KeyPair(cp.adminCert.certPEM, cp.adminCert.keyPEM)
	if err != nil {
		return err
	}
	cp.adminClient = &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{
			Proxy:           nil, // 127.0.0.1 only, whatever the environment says
			TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{adminPair}},
		},
	}
	return nil
}

func (cp *controlPlane) server() string {
	return "https://127.0.0.1:" + strconv.Itoa(cp.apiPort)
}

// freePorts asks the kernel for n distinct free ports on 127.0.0.1 (all held open at once, so
// they differ), then frees them for the processes to bind.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// writeKubeconfigs writes the two kubeconfigs, which name the API server's port.
func (cp *controlPlane) writeKubeconfigs() error {
	text, err := kubeconfig(cp.server(), cp.ca.certPEM,
		[]user{{name: adminUser, cert: cp.adminCert}, {name: secondUser, cert: cp.userCert}},
		[]string{adminContext, secondContext})
	if err != nil {
		return err
	}
	cp.kubeconfig = filepath.Join(cp.dataDir, "kubeconfig")
	if err := os.WriteFile(cp.kubeconfig, text, 0o600); err != nil {
		return err
	}
	text, err = kubeconfig(cp.server(), cp.ca.certPEM,
		[]user{{name: adminUser, token: cp.tokens[0]}, {name: secondUser, token: cp.tokens[1]}},
		[]string{adminContext, secondContext})
	if err != nil {
		return err
	}
	cp.tokenKubeconfig = filepath.Join(cp.dataDir, "kubeconfig-tokens")
	if err := os.WriteFile(cp.tokenKubeconfig, text, 0o600); err != nil {
		return err
	}
	text, err = kubeconfig(cp.server(), cp.ca.certPEM, []user{{name: controllerUser, cert: cp.controller}}, []string{"controller-manager"})
	if err != nil {
		return err
	}
	cp.kcmKubecfg = filepath.Join(cp.dataDir, "controller-manager.kubeconfig")
	return os.WriteFile(cp.kcmKubecfg, text, 0o600)
}

func (cp *controlPlane) etcdArgs() []string {
	client := "https://127.0.0.1:" + strconv.Itoa(cp.etcdPort)
	peer := "https://127.0.0.1:" + strconv.Itoa(cp.etcdPeer)
	return []string{
		"--name=lien",
		// A fresh store per start: a retry on new ports must not find the last one's member.
		"--data-dir=" + filepath.Join(cp.dataDir, "etcd-"+strconv.Itoa(cp.etcdPort)),
		"--listen-client-urls=" + client,
		"--advertise-client-urls=" + client,
		"--listen-peer-urls=" + peer,
		"--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=lien=" + peer,
		"--initial-cluster-state=new",
		"--cert-file=" + cp.etcdServer[0], "--key-file=" + cp.etcdServer[1],
		"--client-cert-auth=true", "--trusted-ca-file=" + cp.etcdCAPath,
		"--peer-cert-file=" + cp.etcdServer[0], "--peer-key-file=" + cp.etcdServer[1],
		"--peer-client-cert-auth=true", "--peer-trusted-ca-file=" + cp.etcdCAPath,
		// A test's data is thrown away with the instance: no fsync (etcd's commit latency
		// otherwise is the disk's, shared with every parallel test), and a small quota.
		"--unsafe-no-fsync=true",
		"--quota-backend-bytes=" + strconv.Itoa(512<<20),
		"--log-level=warn",
	}
}

func (cp *controlPlane) apiserverArgs() []string {
	args := []string{
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(cp.apiPort),
		"--cert-dir=" + filepath.Join(cp.dataDir, "apiserver"),
		"--tls-cert-file=" + cp.apiserverCert[0], "--tls-private-key-file=" + cp.apiserverCert[1],
		"--client-ca-file=" + cp.caPath,
		"--token-auth-file=" + cp.tokenFilePath,
		"--etcd-servers=https://127.0.0.1:" + strconv.Itoa(cp.etcdPort),
		"--etcd-cafile=" + cp.etcdCAPath,
		"--etcd-certfile=" + cp.etcdClient[0], "--etcd-keyfile=" + cp.etcdClient[1],
		"--authorization-mode=RBAC",
		// On by default in v1.32; named so that a change of defaults cannot turn Lien's
		// webhooks off unnoticed.
		"--enable-admission-plugins=MutatingAdmissionWebhook,ValidatingAdmissionWebhook",
		"--service-cluster-ip-range=" + cp.o.serviceCIDR,
		"--service-account-issuer=" + serviceAccountIs,
		"--service-account-key-file=" + cp.saPub,
		"--service-account-signing-key-file=" + cp.saKey,
		"--requestheader-client-ca-file=" + cp.frontProxyCAPath,
		"--requestheader-allowed-names=" + frontProxyUser,
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + cp.frontProxyClient[0], "--proxy-client-key-file=" + cp.frontProxyClient[1],
		// The `kubernetes` Service's endpoints would be 127.0.0.1, which Endpoints validation
		// refuses (loopback), and the reconciler would retry and log that forever. No pod runs
		// here to reach the API server through the Service anyway.
		"--endpoint-reconciler-type=none",
		"--profiling=false",
	}
	if cp.admissionConfig != "" {
		args = append(args, "--admission-control-config-file="+cp.admissionConfig)
	}
	return args
}

func (cp *controlPlane) controllerManagerArgs() []string {
	return []string{
		"--kubeconfig=" + cp.kcmKubecfg,
		"--authentication-kubeconfig=" + cp.kcmKubecfg,
		"--authorization-kubeconfig=" + cp.kcmKubecfg,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(cp.kcmPort),
		"--cert-dir=" + filepath.Join(cp.dataDir, "controller-manager"),
		"--tls-cert-file=" + cp.controllerCert[0], "--tls-private-key-file=" + cp.controllerCert[1],
		"--leader-elect=false",
		// Each controller acts as its own service account (kube-system/generic-garbage-collector,
		// namespace-controller, ...), as kubeadm clusters run it: RBAC sees who deletes what.
		"--use-service-account-credentials=true",
		"--service-account-private-key-file=" + cp.saKey,
		"--root-ca-file=" + cp.caPath,
		"--cluster-signing-cert-file=" + cp.caPath, "--cluster-signing-key-file=" + cp.caKeyPath,
		"--controllers=" + cp.o.controllers,
		// The namespace controller lists and deletes every resource type, ~60 of them, per
		// namespace; the default 20 requests/s would make a test's namespace deletion take
		// seconds of client-side throttling alone.
		"--kube-api-qps=200", "--kube-api-burst=400",
		"--profiling=false",
	}
}

// start picks ports, starts etcd and kube-apiserver, then kube-controller-manager once the API
// server answers (it gives up after 10 s without one, which a loaded machine can exceed), and
// waits until the API server is ready and the controller-manager healthy.
func (cp *controlPlane) start(deadline time.Time, stop <-chan string) error {
	ports, err := freePorts(4)
	if err != nil {
		return err
	}
	cp.apiPort, cp.kcmPort, cp.etcdPort, cp.etcdPeer = ports[0], ports[1], ports[2], ports[3]
	cp.procs = nil
	cp.exited = make(chan procExit, 3)
	if err := cp.writeKubeconfigs(); err != nil {
		return err
	}
	if err := cp.spawn("etcd", cp.etcdArgs()); err != nil {
		return err
	}
	if err := cp.spawn("kube-apiserver", cp.apiserverArgs()); err != nil {
		return err
	}
	if err := cp.await(deadline, stop, "the API server's /healthz", func() bool {
		return cp.get(cp.server()+"/healthz") == nil
	}); err != nil {
		return err
	}
	if err := cp.spawn("kube-controller-manager", cp.controllerManagerArgs()); err != nil {
		return err
	}
	kcm := "https://127.0.0.1:" + strconv.Itoa(cp.kcmPort) + "/healthz"
	return cp.await(deadline, stop, "the API server's /readyz and the controller-manager's /healthz", func() bool {
		return cp.get(cp.server()+"/readyz") == nil && cp.get(kcm) == nil
	})
}

// await polls ok every 100 ms until it holds, a process exits, stop is asked or the deadline
// passes.
func (cp *controlPlane) await(deadline time.Time, stop <-chan string, what string, ok func() bool) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if ok() {
			return nil
		}
		select {
		case exit := <-cp.exited:
			if cp.logMentions(exit.name, "address already in use") {
				return &portConflict{exit.name}
			}
			return fmt.Errorf("%s exited before the control plane was ready (%v)", exit.name, exit.err)
		case why := <-stop:
			return &stopped{why}
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out waiting for %s (--ready-timeout %s)", what, cp.o.readyTimeout)
		}
	}
}

// get answers nil once url serves 200 "ok" to the admin.
func (cp *controlPlane) get(url string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := cp.adminClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != "ok" {
		return fmt.Errorf("%s: %d %s", url, resp.StatusCode, body)
	}
	return nil
}

// spawn starts one process, its output to a log file, in a process group of its own (a Ctrl-C
// at the terminal reaches the launcher only, which stops everything in order), killed by the
// kernel if the launcher dies.
func (cp *controlPlane) spawn(name string, args []string) error {
	logPath := filepath.Join(cp.logDir, name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	defer logFile.Close() // the child holds its own descriptor
	cmd := exec.Command(filepath.Join(cp.o.binDir, name), args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.Dir = cp.dataDir
	cmd.Env = environment()
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	cp.procs = append(cp.procs, p)
	exited := cp.exited
	go func() {
		err := cmd.Wait()
		close(p.done)
		exited <- procExit{name, err}
	}()
	return nil
}

// environment is the launcher's minus proxy settings: the control plane talks to 127.0.0.1
// only, and a webhook call must not be sent through a proxy by mistake.
func environment() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch strings.ToLower(name) {
		case "http_proxy", "https_proxy", "no_proxy", "all_proxy", "kubeconfig":
			continue
		}
		env = append(env, kv)
	}
	return env
}

func (cp *controlPlane) pids() map[string]int {
	out := map[string]int{}
	for _, p := range cp.procs {
		out[p.name] = p.cmd.Process.Pid
	}
	return out
}

// kill stops every process at once with SIGKILL (their state is thrown away with the data
// directory, so there is nothing to shut down gracefully) and waits until they are gone.
func (cp *controlPlane) kill() {
	for _, p := range cp.procs {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	}
	for _, p := range cp.procs {
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			fmt.Fprintf(os.Stderr, "lien-control-plane: %s (pid %d) did not exit after SIGKILL\n", p.name, p.cmd.Process.Pid)
		}
	}
}

func (cp *controlPlane) logMentions(name, text string) bool {
	b, err := os.ReadFile(filepath.Join(cp.logDir, name+".log"))
	return err == nil && bytes.Contains(b, []byte(text))
}

// printLogTails shows the end of each process's log, for a failure to be diagnosed from the
// test's output alone (the data directory is removed).
func (cp *controlPlane) printLogTails(w io.Writer) {
	for _, p := range cp.procs {
		b, err := os.ReadFile(p.log)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
		if len(lines) > 30 {
			lines = lines[len(lines)-30:]
		}
		fmt.Fprintf(w, "---- last lines of %s's log ----\n%s\n", p.name, strings.Join(lines, "\n"))
	}
}
