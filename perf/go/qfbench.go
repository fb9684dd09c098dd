// qfbench.go - qflow-bench's Go baselines, run by the harness as a child
// process (perf/baseline_go.c). Go's channels and goroutines are what a
// user would pick instead of qflow's queues and tasks, so each case
// mirrors one of qflow-bench's:
//
//	tput     P producer and C consumer goroutines move N values through
//	         one buffered channel (queue.tput.*); prints items_per_s.
//	pingpong two goroutines bounce a value through two buffered channels
//	         (queue.pingpong.task); prints p50_ns and p99_ns of a round trip.
//	spawn    N `go f()` from the main goroutine (task.spawn); prints
//	         ns_per_task.
//	runners  N producer goroutines feed one buffered channel, one consumer
//	         reads for a fixed window (runners.tput.*, runners.fair.*);
//	         prints items_per_s, per-producer min/median/max, zero count and
//	         the time until every producer's first item arrived.
//
// Every value carries its producer and sequence number; the consumers
// check exactly-once delivery and exit with status 2 if it fails.
// GOMAXPROCS is Go's default (the number of CPUs), as a user would run it.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

const seqBits = 40

func fail(format string, a ...interface{}) {
	fmt.Fprintf(os.Stderr, "qfbench-go: "+format+"\n", a...)
	os.Exit(2)
}

// padded: n counters with 128 bytes of nothing on either side, so that no
// other consumer's counters share their lines (the C harness keeps each
// task's state on lines of its own, bench_task_tput.c).
func padded(n int) []uint64 {
	return make([]uint64, n+32)[16 : 16+n]
}

func tput(producers, consumers, capacity, items int) {
	ch := make(chan uint64, capacity)
	per := items / producers
	var pwg, cwg sync.WaitGroup
	counts := make([][]uint64, consumers)
	sums := make([][]uint64, consumers)
	start := time.Now()
	for c := 0; c < consumers; c++ {
		counts[c] = padded(producers)
		sums[c] = padded(producers)
		cwg.Add(1)
		go func(c int) {
			defer cwg.Done()
			for v := range ch {
				p := v >> seqBits
				counts[c][p]++
				sums[c][p] += v & (1<<seqBits - 1)
			}
		}(c)
	}
	for p := 0; p < producers; p++ {
		pwg.Add(1)
		go func(p int) {
			defer pwg.Done()
			for s := 1; s <= per; s++ {
				ch <- uint64(p)<<seqBits | uint64(s)
			}
		}(p)
	}
	pwg.Wait()
	close(ch)
	cwg.Wait()
	el := time.Since(start)
	want := uint64(per) * uint64(per+1) / 2
	for p := 0; p < producers; p++ {
		var n, s uint64
		for c := 0; c < consumers; c++ {
			n += counts[c][p]
			s += sums[c][p]
		}
		if n != uint64(per) || s != want {
			fail("tput: producer %d: %d of %d values arrived", p, n, per)
		}
	}
	fmt.Printf("items_per_s %.1f\n", float64(per*producers)/el.Seconds())
}

func pingpong(rounds, capacity int) {
	ping := make(chan uint64, capacity)
	pong := make(chan uint64, capacity)
	go func() {
		for v := range ping {
			pong <- v + 1
		}
		close(pong)
	}()
	lat := make([]int64, rounds)
	for i := 0; i < rounds; i++ {
		t := time.Now()
		ping <- uint64(2 * i)
		if v := <-pong; v != uint64(2*i+1) {
			fail("pingpong: got %d, want %d", v, 2*i+1)
		}
		lat[i] = int64(time.Since(t))
	}
	close(ping)
	sort.Slice(lat, func(a, b int) bool { return lat[a] < lat[b] })
	fmt.Printf("p50_ns %d\np99_ns %d\n", lat[rounds/2], lat[rounds*99/100])
}

// runners: N goroutines send to one channel; the main goroutine reads for
// `window`. With afterFirst, the window (and the per-producer counts) start
// once every producer's first value has arrived, as runners.fair does.
func runners(n, capacity int, window time.Duration, afterFirst bool) {
	ch := make(chan uint64, capacity)
	var stop atomic.Bool
	var wg sync.WaitGroup
	for p := 0; p < n; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			for s := uint64(1); !stop.Load(); s++ {
				ch <- uint64(p)<<seqBits | s
			}
		}(p)
	}
	got := make([]uint64, n)
	last := make([]uint64, n)
	start := time.Now()
	allFirst := time.Duration(-1)
	seen := 0
	var total uint64
	winStart := start
	deadline := start.Add(window)
	if afterFirst {
		deadline = start.Add(60 * time.Second) // until all have delivered, then the window
	}
	for time.Now().Before(deadline) {
		for k := 0; k < 256; k++ {
			v := <-ch
			p, s := v>>seqBits, v&(1<<seqBits-1)
			if s != last[p]+1 {
				fail("runners: producer %d: seq %d after %d", p, s, last[p])
			}
			if last[p] == 0 {
				seen++
				if seen == n {
					allFirst = time.Since(start)
					if afterFirst {
						winStart = time.Now()
						deadline = winStart.Add(window)
						for i := range got {
							got[i] = 0
						}
						total = 0
					}
				}
			}
			last[p] = s
			got[p]++
			total++
		}
	}
	el := time.Since(winStart)
	stop.Store(true)
	go func() {
		for range ch {
		}
	}()
	wg.Wait()
	close(ch)
	sorted := append([]uint64(nil), got...)
	sort.Slice(sorted, func(a, b int) bool { return sorted[a] < sorted[b] })
	zero := 0
	for _, g := range got {
		if g == 0 {
			zero++
		}
	}
	fmt.Printf("items_per_s %.1f\n", float64(total)/el.Seconds())
	fmt.Printf("min %d\nmedian %d\nmax %d\nzero %d\n", sorted[0], sorted[n/2], sorted[n-1], zero)
	fmt.Printf("all_first_ns %d\n", int64(allFirst))
}

// spawn: n goroutines started with `go f()` from the main goroutine, each
// bumping a counter; prints the time from the first `go` until the last
// has ended, per goroutine.
func spawn(n int) {
	var wg sync.WaitGroup
	var ended atomic.Int64
	wg.Add(n)
	start := time.Now()
	for i := 0; i < n; i++ {
		go func() {
			ended.Add(1)
			wg.Done()
		}()
	}
	wg.Wait()
	el := time.Since(start)
	if ended.Load() != int64(n) {
		fail("spawn: %d of %d goroutines ran", ended.Load(), n)
	}
	fmt.Printf("ns_per_task %.1f\n", float64(el.Nanoseconds())/float64(n))
}

// wake: the main goroutine sends one value at a time to a goroutine parked
// in a receive; a sample is the time from just before the send until the
// receiver holds the value (task.wake.from_task). Before each send the
// sender sleeps gap and waits for the last value to be taken. busy: after
// each send the sender keeps its P for gap instead of parking, so another
// P must run the receiver.
func wake(rounds, warmup int, gap time.Duration, busy bool) {
	ch := make(chan int, 16)
	t0 := make([]int64, rounds)
	t1 := make([]int64, rounds)
	var taken atomic.Int64
	base := time.Now()
	done := make(chan struct{})
	go func() {
		for v := range ch {
			t1[v] = int64(time.Since(base))
			if int64(v) != taken.Load() {
				fail("wake: received %d, expected %d", v, taken.Load())
			}
			taken.Store(int64(v + 1))
		}
		close(done)
	}()
	for i := 0; i < rounds; i++ {
		time.Sleep(gap)
		for taken.Load() < int64(i) {
			time.Sleep(gap)
		}
		t0[i] = int64(time.Since(base))
		ch <- i
		if busy {
			for time.Since(base) < time.Duration(t0[i])+gap {
			}
		}
	}
	close(ch)
	<-done
	lat := make([]int64, 0, rounds-warmup)
	for i := warmup; i < rounds; i++ {
		lat = append(lat, t1[i]-t0[i])
	}
	sort.Slice(lat, func(a, b int) bool { return lat[a] < lat[b] })
	n := len(lat)
	fmt.Printf("p50_ns %d\np99_ns %d\n", lat[(n*50+99)/100-1], lat[(n*99+99)/100-1])
}

func main() {
	mode := flag.String("mode", "tput", "tput | pingpong | runners | runners_fair | spawn | wake_parks | wake_busy")
	p := flag.Int("producers", 1, "producer goroutines (tput, runners)")
	c := flag.Int("consumers", 1, "consumer goroutines (tput)")
	capacity := flag.Int("capacity", 1024, "channel buffer")
	items := flag.Int("items", 1000000, "values in all (tput), rounds (pingpong) or goroutines (spawn)")
	window := flag.Duration("window", 2*time.Second, "runners: how long the consumer reads")
	flag.Parse()
	// What the scheduler was given (GOMAXPROCS from the environment, or the
	// CPUs): qflow-bench checks it against its --workers.
	fmt.Printf("gomaxprocs %d\n", runtime.GOMAXPROCS(0))
	switch *mode {
	case "tput":
		tput(*p, *c, *capacity, *items)
	case "pingpong":
		pingpong(*items, *capacity)
	case "runners":
		runners(*p, *capacity, *window, false)
	case "spawn":
		spawn(*items)
	case "runners_fair":
		runners(*p, *capacity, *window, true)
	case "wake_parks":
		wake(*items, 100, 50*time.Microsecond, false)
	case "wake_busy":
		wake(*items, 100, 50*time.Microsecond, true)
	default:
		fail("unknown mode %q", *mode)
	}
}
