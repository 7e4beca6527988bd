// Masterworker is a master/worker program in the shape of the thesis'
// PRSim workload: the master keeps a priority queue of work items, hands
// one to each idle worker with a non-blocking send, and collects results
// with non-blocking receives from any source, feeding each worker that
// answers the next most urgent item. Workers compute a deterministic
// function of the item so the master can check every result.
//
//	go run ./cmd/mpirun -np 8 ./examples/masterworker
package main

import (
	"container/heap"
	"flag"
	"fmt"
	"log"

	"github.com/adimpi/adimpi/mpi"
)

const (
	tagWork = 1
	tagDone = 2
	tagStop = 3
)

var items = flag.Int("items", 2000, "work items")

// item is a unit of work: a priority (lower first) and a size.
type item struct{ id, prio, size int64 }

type queue []item

func (q queue) Len() int { return len(q) }
func (q queue) Less(i, j int) bool {
	return q[i].prio < q[j].prio || (q[i].prio == q[j].prio && q[i].id < q[j].id)
}
func (q queue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *queue) Push(x any)   { *q = append(*q, x.(item)) }
func (q *queue) Pop() any     { o := *q; it := o[len(o)-1]; *q = o[:len(o)-1]; return it }
func work(it item) (result int64) {
	for k := int64(1); k <= it.size; k++ {
		result = (result*31 + k*k) % 1000003
	}
	return result
}

func main() {
	flag.Parse()
	must(mpi.Init())
	w := mpi.World()
	if w.Size() < 2 {
		if w.Rank() == 0 {
			fmt.Println("masterworker: needs at least 2 ranks (one master, one or more workers)")
		}
		must(mpi.Finalize())
		return
	}
	if w.Rank() == 0 {
		master(w)
	} else {
		worker(w)
	}
	must(mpi.Finalize())
}

func master(w *mpi.Comm) {
	q := &queue{}
	for i := int64(0); i < int64(*items); i++ {
		heap.Push(q, item{id: i, prio: (i * 7919) % 101, size: 200 + (i*104729)%800})
	}
	want := map[int64]int64{}
	for _, it := range *q {
		want[it.id] = work(it)
	}
	workers := w.Size() - 1
	sends := make([]*mpi.Request, workers+1)
	outbox := make([][]int64, workers+1)
	give := func(dst int) {
		it := heap.Pop(q).(item)
		if sends[dst] != nil {
			_, err := sends[dst].Wait() // the worker answered, so its last item has arrived
			must(err)
		}
		outbox[dst] = []int64{it.id, it.prio, it.size}
		var err error
		sends[dst], err = mpi.Isend(w, outbox[dst], dst, tagWork)
		must(err)
	}
	busy := 0
	for dst := 1; dst <= workers && q.Len() > 0; dst++ {
		give(dst)
		busy++
	}
	result := []int64{0, 0}
	perWorker := make([]int, workers+1)
	got := 0
	for busy > 0 {
		rq, err := mpi.Irecv(w, result, mpi.AnySource, tagDone)
		must(err)
		st, err := rq.Wait()
		must(err)
		if want[result[0]] != result[1] {
			log.Fatalf("masterworker: item %d: worker %d returned %d, want %d", result[0], st.Source, result[1], want[result[0]])
		}
		delete(want, result[0])
		got++
		perWorker[st.Source]++
		if q.Len() > 0 {
			give(st.Source)
		} else {
			busy--
		}
	}
	for dst := 1; dst <= workers; dst++ {
		if sends[dst] != nil {
			_, err := sends[dst].Wait()
			must(err)
		}
		must(mpi.Send(w, []int64{}, dst, tagStop))
	}
	if len(want) != 0 {
		log.Fatalf("masterworker: %d items never came back", len(want))
	}
	fmt.Printf("masterworker: %d items done by %d workers on device %s (per worker: %v)\n", got, workers, mpi.DeviceName(), perWorker[1:])
}

func worker(w *mpi.Comm) {
	buf := []int64{0, 0, 0}
	for {
		st, err := mpi.Recv(w, buf, 0, mpi.AnyTag)
		must(err)
		if st.Tag == tagStop {
			return
		}
		it := item{id: buf[0], prio: buf[1], size: buf[2]}
		must(mpi.Send(w, []int64{it.id, work(it)}, 0, tagDone))
	}
}

func must(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
