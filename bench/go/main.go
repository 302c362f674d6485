// Command mcr-anchor-go is the Go side of `python -m bench anchors`: a multicluster-runtime
// Manager with one ConfigMap controller over the clusters of an mcr-envtest fleet, driven over
// stdin/stdout with the same JSON-lines protocol as bench/anchors/_worker.py.
//
//	mcr-anchor-go --fleet DIR/fleet.json --clusters K --reconcile noop|get [--first]
//
// With MCR_ANCHOR_CPUPROFILE=FILE set, a pprof CPU profile of the whole run is written to FILE;
// with MCR_ANCHOR_PROFILE_DIR=DIR set instead, one profile per expect command, sampled at 500 Hz,
// is written to DIR/go-<phase>-<pid>.pprof, covering that command's wait.
//
// Cluster i is fleet entry i % len(fleet), built with cluster.New from its kubeconfig (its own
// client, TLS connection and informer) and handed to the clusters provider. The first output
// line reports the engagement: every cluster's ConfigMap informer synced (or, with --first,
// every cluster reconciled once), wall and CPU seconds, RSS before and after. Then each
// {"op": "expect", "phase": P, "count": N, "timeout": T} is answered with {"armed": P} at once
// and a summary once N reconciles of phase P happened, T seconds passed or (with "quiet": Q) no
// reconcile of P came for Q seconds after the first one since the command. Phase "*" counts
// every reconcile (the only phase of the no-op reconcile, which does not read the object).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	mcbuilder "sigs.k8s.io/multicluster-runtime/pkg/builder"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"
	"sigs.k8s.io/multicluster-runtime/providers/clusters"
)

type fleetEntry struct {
	URL        string `json:"url"`
	Kubeconfig string `json:"kubeconfig"`
}

type expectCmd struct {
	Op      string  `json:"op"`
	Phase   string  `json:"phase"`
	Count   int     `json:"count"`
	Timeout float64 `json:"timeout"`
	Quiet   float64 `json:"quiet"`
}

// recorder keeps reconcile latencies per phase and wakes the one armed waiter.
type recorder struct {
	mu     sync.Mutex
	lat    map[string][]float64
	n      map[string]int
	last   map[string]float64
	first  map[string]bool
	want   string
	count  int
	wakeup chan struct{}
}

func newRecorder() *recorder {
	return &recorder{lat: map[string][]float64{}, n: map[string]int{}, last: map[string]float64{}, first: map[string]bool{}}
}

func nowSeconds() float64 { return float64(time.Now().UnixNano()) / 1e9 }

// hit records one reconcile of cluster for phase; sent is the commit time (NaN when unknown).
func (r *recorder) hit(clusterName, phase string, sent float64) {
	now := nowSeconds()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.first[clusterName] = true
	for _, p := range []string{"*", phase} {
		if p == "" {
			continue
		}
		if !math.IsNaN(sent) {
			r.lat[p] = append(r.lat[p], now-sent)
		}
		r.n[p]++
		r.last[p] = now
		if r.wakeup != nil && r.want == p && r.n[p] >= r.count {
			close(r.wakeup)
			r.wakeup = nil
		}
	}
}

func (r *recorder) count0(phase string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n[phase]
}

func (r *recorder) firstCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.first)
}

func percentile(values []float64, q float64) float64 {
	if len(values) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), values...)
	sort.Float64s(s)
	i := int(q * float64(len(s)))
	if i > len(s)-1 {
		i = len(s) - 1
	}
	return s[i]
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return math.NaN()
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

func rssBytes() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b))
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}

// num turns NaN into nil: JSON has no NaN.
func num(x float64) any {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return nil
	}
	return x
}

func (r *recorder) expect(c expectCmd) map[string]any {
	r.mu.Lock()
	wake := make(chan struct{})
	r.want, r.count = c.Phase, c.Count
	if r.n[c.Phase] >= c.Count {
		close(wake)
	} else {
		r.wakeup = wake
	}
	r.mu.Unlock()
	cpu := cpuSeconds()
	if stop := phaseProfile(c.Phase); stop != nil {
		defer stop()
	}
	emit(map[string]any{"armed": c.Phase})
	complete := false
	deadline := time.Now().Add(time.Duration(c.Timeout * float64(time.Second)))
	armedAt := r.count0(c.Phase)
	seen, seenAt := armedAt, time.Now()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
wait:
	for {
		select {
		case <-wake:
			complete = true
			break wait
		case now := <-tick.C:
			if n := r.count0(c.Phase); n != seen {
				seen, seenAt = n, now
			} else if c.Quiet > 0 && n > armedAt && now.Sub(seenAt).Seconds() >= c.Quiet {
				break wait
			}
			if now.After(deadline) {
				break wait
			}
		}
	}
	r.mu.Lock()
	r.wakeup = nil
	lat := append([]float64(nil), r.lat[c.Phase]...)
	last, ok := r.last[c.Phase]
	count := r.n[c.Phase]
	r.mu.Unlock()
	if !ok {
		last = math.NaN()
	}
	maxLat := math.NaN()
	if len(lat) > 0 {
		maxLat = percentile(lat, 1)
	}
	return map[string]any{
		"phase": c.Phase, "complete": complete, "count": count,
		"p50_ms": num(percentile(lat, 0.5) * 1e3), "p99_ms": num(percentile(lat, 0.99) * 1e3),
		"max_ms": num(maxLat * 1e3), "last": num(last), "cpu_s": cpuSeconds() - cpu, "rss": rssBytes(),
		"heap_inuse": heapInuse(),
	}
}

// phaseProfile starts a CPU profile of one expect command when MCR_ANCHOR_PROFILE_DIR is set and
// returns the function that stops and writes it; nil when the variable is unset.
func phaseProfile(phase string) func() {
	dir := os.Getenv("MCR_ANCHOR_PROFILE_DIR")
	if dir == "" {
		return nil
	}
	name := strings.NewReplacer("*", "all", "/", "_").Replace(phase)
	f, err := os.Create(fmt.Sprintf("%s/go-%s-%d.pprof", dir, name, os.Getpid()))
	if err != nil {
		fail("MCR_ANCHOR_PROFILE_DIR: %v", err)
	}
	runtime.SetCPUProfileRate(500)
	if err := pprof.StartCPUProfile(f); err != nil {
		fail("MCR_ANCHOR_PROFILE_DIR: %v", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}

func heapInuse() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

var out = json.NewEncoder(os.Stdout)

func emit(v any) {
	if err := out.Encode(v); err != nil {
		fmt.Fprintln(os.Stderr, "mcr-anchor-go: writing stdout:", err)
		os.Exit(1)
	}
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "mcr-anchor-go: "+format+"\n", args...)
	os.Exit(1)
}

func main() {
	fleetPath := flag.String("fleet", "", "fleet.json written by bench.multicluster._servers")
	k := flag.Int("clusters", 1, "clusters to engage")
	mode := flag.String("reconcile", "get", "noop: count only; get: read the object from the cluster's cache")
	first := flag.Bool("first", false, "engagement ends when every cluster has reconciled once")
	flag.Parse()
	if *mode != "noop" && *mode != "get" {
		fail("--reconcile must be noop or get, not %q", *mode)
	}
	if os.Getenv("MCR_ANCHOR_CPUPROFILE") != "" && os.Getenv("MCR_ANCHOR_PROFILE_DIR") != "" {
		fail("set MCR_ANCHOR_CPUPROFILE or MCR_ANCHOR_PROFILE_DIR, not both")
	}
	if path := os.Getenv("MCR_ANCHOR_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			fail("MCR_ANCHOR_CPUPROFILE: %v", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fail("MCR_ANCHOR_CPUPROFILE: %v", err)
		}
		defer pprof.StopCPUProfile() // at EOF on stdin: main returns
	}
	ctrllog.SetLogger(logr.Discard())
	klog.SetLogger(logr.Discard())

	raw, err := os.ReadFile(*fleetPath)
	if err != nil {
		fail("reading --fleet: %v", err)
	}
	var fleet []fleetEntry
	if err := json.Unmarshal(raw, &fleet); err != nil || len(fleet) == 0 {
		fail("%s: not a non-empty fleet list (%v)", *fleetPath, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	hostCfg, err := clientcmd.BuildConfigFromFlags("", fleet[0].Kubeconfig)
	if err != nil {
		fail("%s: %v", fleet[0].Kubeconfig, err)
	}
	provider := clusters.New()
	mgr, err := mcmanager.New(hostCfg, provider, manager.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		fail("manager: %v", err)
	}
	rec := newRecorder()
	reconcile := func(ctx context.Context, req mcreconcile.Request) (ctrl.Result, error) {
		if *mode == "noop" {
			rec.hit(string(req.ClusterName), "", math.NaN())
			return ctrl.Result{}, nil
		}
		cl, err := mgr.GetCluster(ctx, req.ClusterName)
		if err != nil {
			return ctrl.Result{}, err
		}
		cm := &corev1.ConfigMap{}
		if err := cl.GetClient().Get(ctx, req.NamespacedName, cm); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
		sent, perr := strconv.ParseFloat(cm.Data["t"], 64)
		if perr != nil {
			sent = math.NaN()
		}
		rec.hit(string(req.ClusterName), cm.Data["p"], sent)
		return ctrl.Result{}, nil
	}
	if err := mcbuilder.ControllerManagedBy(mgr).Named("bench-anchor").For(&corev1.ConfigMap{}).
		Complete(mcreconcile.Func(reconcile)); err != nil {
		fail("controller: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }() // starts the provider too
	time.Sleep(200 * time.Millisecond)
	runtime.GC()
	rss0 := rssBytes()
	cpu0 := cpuSeconds()
	start := time.Now()
	made := make([]cluster.Cluster, *k)
	for i := 0; i < *k; i++ {
		e := fleet[i%len(fleet)]
		cfg, err := clientcmd.BuildConfigFromFlags("", e.Kubeconfig)
		if err != nil {
			fail("%s: %v", e.Kubeconfig, err)
		}
		cl, err := cluster.New(cfg)
		if err != nil {
			fail("cluster %d: %v", i, err)
		}
		made[i] = cl
		if err := provider.Add(ctx, multicluster.ClusterName(fmt.Sprintf("c%d", i)), cl); err != nil {
			fail("adding cluster %d: %v", i, err)
		}
	}
	added := time.Since(start).Seconds()
	poll := time.Duration(math.Min(0.1, 0.002*float64(*k)) * float64(time.Second))
	pending := made
	for {
		select {
		case err := <-done:
			fail("manager or provider stopped: %v", err)
		default:
		}
		if *first {
			if rec.firstCount() >= *k {
				break
			}
		} else {
			left := pending[:0]
			for _, cl := range pending {
				inf, err := cl.GetCache().GetInformer(ctx, &corev1.ConfigMap{}, cache.BlockUntilSynced(false))
				if err != nil || !inf.HasSynced() {
					left = append(left, cl)
				}
			}
			pending = left
			if len(pending) == 0 {
				break
			}
		}
		time.Sleep(poll)
	}
	engaged := time.Since(start).Seconds()
	engageCPU := cpuSeconds() - cpu0
	time.Sleep(500 * time.Millisecond)
	runtime.GC()
	emit(map[string]any{
		"engaged": *k, "engage_s": engaged, "engage_cpu_s": engageCPU, "add_s": added,
		"rss0": rss0, "rss1": rssBytes(), "heap_inuse": heapInuse(),
		"gomaxprocs": runtime.GOMAXPROCS(0), "go": runtime.Version(),
	})
	scanner := bufio.NewScanner(os.Stdin)
	for scanner.Scan() {
		line := strings.TrimSpace(scanner.Text())
		if line == "" {
			continue
		}
		var c expectCmd
		if err := json.Unmarshal([]byte(line), &c); err != nil || c.Op != "expect" {
			fail("unknown command %q", line)
		}
		emit(rec.expect(c))
	}
}
