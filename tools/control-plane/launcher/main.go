// Command lien-control-plane runs a real Kubernetes control plane for Lien's tests: etcd,
// kube-apiserver and kube-controller-manager as plain processes on 127.0.0.1, with certificates
// and configuration generated for this one instance in a temporary directory.
//
// It prints one JSON line on stdout once the API server is ready and the controller-manager
// healthy, then runs until stdin reaches end of file (the test that started it is gone, however
// it died), or SIGTERM / SIGINT / SIGHUP; then it kills the three processes and removes the
// directory. The processes also get SIGKILL from the kernel if this launcher dies, whatever
// kills it (Pdeathsig), so nothing outlives a test.
//
// Usage: lien-control-plane --bin-dir DIR [--no-admission-client-cert] [--data-dir DIR]
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func init() {
	// Pdeathsig fires when the *thread* that started a child exits, not the process. Go may run
	// a goroutine on any thread, and a thread can go away under it; pinning the main goroutine to
	// the main thread, and starting every child from the main goroutine, ties the children's
	// lives to the process's.
	runtime.LockOSThread()
}

// ready is the machine-readable line printed once the control plane serves.
type ready struct {
	Server     string `json:"server"`
	Kubeconfig string `json:"kubeconfig"`
	// The same users by bearer token (kube-apiserver's --token-auth-file), as `lien sandbox`
	// authenticates its users.
	TokenKubeconfig string `json:"token_kubeconfig"`
	// The cluster CA: it signed the API server's serving certificate and the users'.
	CA string `json:"ca"`
	// The CA of the certificate kube-apiserver presents to webhooks (give it to
	// `lien run --client-ca-file`). Written in both modes, so a test of the mode without one can
	// configure a webhook to expect it and see that no certificate comes.
	AdmissionClientCA string `json:"admission_client_ca"`
	// Whether kube-apiserver presents that certificate to every webhook.
	AdmissionClientCert bool           `json:"admission_client_cert"`
	Mode                string         `json:"mode"`
	DataDir             string         `json:"data_dir"`
	LauncherPID         int            `json:"launcher_pid"`
	PIDs                map[string]int `json:"pids"`
	StartupSeconds      float64        `json:"startup_seconds"`
}

type options struct {
	binDir          string
	dataDir         string
	noAdmissionCert bool
	readyTimeout    time.Duration
	// The cluster's Service range (the `kube-apiserver` flag). The differential runner gives the
	// sandbox's, 10.96.0.0/12, so that a Service asking for an address is judged alike by both.
	serviceCIDR string
	// kube-controller-manager's --controllers. The differential runner keeps only the
	// controllers the sandbox also runs, so that nothing else writes to the objects it compares.
	controllers string
}

func main() {
	var o options
	flag.StringVar(&o.binDir, "bin-dir", "", "directory holding etcd, kube-apiserver and kube-controller-manager")
	flag.StringVar(&o.dataDir, "data-dir", "", "directory for certificates, configuration, etcd's data and logs (default: a new temporary directory, removed at exit; a given one is kept)")
	flag.BoolVar(&o.noAdmissionCert, "no-admission-client-cert", false, "kube-apiserver presents no client certificate to webhooks (as most managed clusters)")
	flag.DurationVar(&o.readyTimeout, "ready-timeout", 180*time.Second, "give up if the control plane is not ready by then")
	flag.StringVar(&o.serviceCIDR, "service-cluster-ip-range", "10.0.0.0/24", "kube-apiserver's Service range; the API server's serving certificate names its first address (the `kubernetes` Service)")
	flag.StringVar(&o.controllers, "controllers", "*", "kube-controller-manager's --controllers")
	flag.Parse()
	if o.binDir == "" || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: lien-control-plane --bin-dir DIR [--no-admission-client-cert] [--data-dir DIR] [--service-cluster-ip-range CIDR] [--controllers LIST]")
		os.Exit(2)
	}
	os.Exit(run(o))
}

func run(o options) int {
	started := time.Now()
	stop := make(chan string, 4)
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	go func() { stop <- "signal " + (<-signals).String() }()
	if watchesStdin() {
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			stop <- "stdin closed"
		}()
	}

	sweepStale()
	dataDir, owned, err := makeDataDir(o.dataDir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "lien-control-plane: %v\n", err)
		return 1
	}
	if owned {
		// Removed on every way out but SIGKILL; a later launcher's sweepStale handles that one.
		defer os.RemoveAll(dataDir)
	}

	cp, err := prepare(o, dataDir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "lien-control-plane: %v\n", err)
		return 1
	}
	deadline := started.Add(o.readyTimeout)
	// A port picked free may be taken by someone else before our process binds it (another
	// control plane starting in parallel, say): such a start is retried on new ports.
	const attempts = 3
	for attempt := 1; ; attempt++ {
		err = cp.start(deadline, stop)
		if err == nil {
			break
		}
		cp.kill()
		var conflict *portConflict
		if errors.As(err, &conflict) && attempt < attempts {
			fmt.Fprintf(os.Stderr, "lien-control-plane: %v; retrying on other ports\n", err)
			continue
		}
		fmt.Fprintf(os.Stderr, "lien-control-plane: %v\n", err)
		var asked *stopped
		if !errors.As(err, &asked) {
			cp.printLogTails(os.Stderr)
		}
		return 1
	}

	mode := "admission-client-cert"
	if o.noAdmissionCert {
		mode = "no-admission-client-cert"
	}
	line, err := json.Marshal(ready{
		Server:              cp.server(),
		Kubeconfig:          cp.kubeconfig,
		TokenKubeconfig:     cp.tokenKubeconfig,
		CA:                  cp.caPath,
		AdmissionClientCA:   cp.admissionCAPath,
		AdmissionClientCert: !o.noAdmissionCert,
		Mode:                mode,
		DataDir:             dataDir,
		LauncherPID:         os.Getpid(),
		PIDs:                cp.pids(),
		StartupSeconds:      roundMillis(time.Since(started)),
	})
	if err != nil {
		cp.kill()
		fmt.Fprintf(os.Stderr, "lien-control-plane: %v\n", err)
		return 1
	}
	fmt.Println(string(line))
	fmt.Fprintf(os.Stderr, "lien-control-plane: ready in %.1f s (%s); export KUBECONFIG=%s\n",
		time.Since(started).Seconds(), mode, cp.kubeconfig)

	code := 0
	select {
	case why := <-stop:
		fmt.Fprintf(os.Stderr, "lien-control-plane: stopping (%s)\n", why)
	case exit := <-cp.exited:
		fmt.Fprintf(os.Stderr, "lien-control-plane: %s exited (%v); stopping the others\n", exit.name, exit.err)
		cp.printLogTails(os.Stderr)
		code = 1
	}
	cp.kill()
	return code
}

func roundMillis(d time.Duration) float64 {
	return float64(d.Milliseconds()) / 1000
}

// watchesStdin: stdin's end of file means "stop" only when stdin is a pipe or a socket (a test
// holds the other end). A terminal (stopped with Ctrl-C) or /dev/null (a background job) is not
// watched.
func watchesStdin() bool {
	info, err := os.Stdin.Stat()
	if err != nil {
		return false
	}
	return info.Mode()&(os.ModeNamedPipe|os.ModeSocket) != 0
}

const dataDirPrefix = "lien-control-plane-"

func makeDataDir(given string) (string, bool, error) {
	if given != "" {
		if err := os.MkdirAll(given, 0o700); err != nil {
			return "", false, err
		}
		abs, err := filepath.Abs(given)
		return abs, false, err
	}
	dir, err := os.MkdirTemp("", dataDirPrefix)
	if err != nil {
		return "", false, err
	}
	pid := []byte(strconv.Itoa(os.Getpid()))
	if err := os.WriteFile(filepath.Join(dir, "launcher.pid"), pid, 0o600); err != nil {
		return "", false, err
	}
	return dir, true, nil
}

// sweepStale removes the temporary directories of launchers that were killed outright (SIGKILL
// leaves no chance to clean up): those whose launcher.pid names no live process.
func sweepStale() {
	matches, _ := filepath.Glob(filepath.Join(os.TempDir(), dataDirPrefix+"*"))
	for _, dir := range matches {
		text, err := os.ReadFile(filepath.Join(dir, "launcher.pid"))
		if err != nil {
			continue // being created, or not ours
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(text)))
		if err != nil || pid <= 0 {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			_ = os.RemoveAll(dir)
		}
	}
}
