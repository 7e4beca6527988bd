package mpi

// Persistent collectives (MPI 4.0 §6.13): an *Init call checks the
// arguments once and returns an inactive persistent request; every Start
// (or Startall) runs the collective again on the buffers' current contents,
// and Wait or Test completes that run. The Init calls are collective and,
// like every Start, must be made in the same order on every process of the
// communicator, relative to each other and to the other collectives on it
// (each Start takes the communicator's next collective sequence number).
// The buffers must not be touched while a run is active. They work on
// intercommunicators too, with the semantics of the blocking call.

func persistentPlan(p *plan, err error) (*Request, error) {
	if err != nil {
		return nil, err
	}
	return &Request{rt: p.r, comm: p.c, op: p.op, peer: AnySource, tag: AnyTag, persistent: true, plan: p}, nil
}

// BarrierInit makes a persistent barrier (MPI_Barrier_init).
func BarrierInit(c *Comm) (*Request, error) {
	return c.planPersistent(barrierPlan("MPI_Barrier_init", c))
}

// BcastInitBuf makes a persistent broadcast (MPI_Bcast_init).
func BcastInitBuf(c *Comm, b Buffer, root int) (*Request, error) {
	return c.planPersistent(bcastPlan("MPI_Bcast_init", c, b, root))
}

// BcastInit makes a persistent broadcast of buf (MPI_Bcast_init).
func BcastInit[T Numeric](c *Comm, buf []T, root int) (*Request, error) {
	return BcastInitBuf(c, Slice(buf), root)
}

// GatherInitBuf makes a persistent gather (MPI_Gather_init).
func GatherInitBuf(c *Comm, send, recv Buffer, root int) (*Request, error) {
	return c.planPersistent(gatherPlan("MPI_Gather_init", c, send, recv, root))
}

// GatherInit makes a persistent gather (MPI_Gather_init).
func GatherInit[T Numeric](c *Comm, send, recv []T, root int) (*Request, error) {
	return GatherInitBuf(c, sbuf(send), Slice(recv), root)
}

// ScatterInitBuf makes a persistent scatter (MPI_Scatter_init).
func ScatterInitBuf(c *Comm, send, recv Buffer, root int) (*Request, error) {
	return c.planPersistent(scatterPlan("MPI_Scatter_init", c, send, recv, root))
}

// ScatterInit makes a persistent scatter (MPI_Scatter_init).
func ScatterInit[T Numeric](c *Comm, send, recv []T, root int) (*Request, error) {
	return ScatterInitBuf(c, Slice(send), sbuf(recv), root)
}

// AllgatherInitBuf makes a persistent Allgather (MPI_Allgather_init).
func AllgatherInitBuf(c *Comm, send, recv Buffer) (*Request, error) {
	return c.planPersistent(allgatherPlan("MPI_Allgather_init", c, send, recv))
}

// AllgatherInit makes a persistent Allgather (MPI_Allgather_init).
func AllgatherInit[T Numeric](c *Comm, send, recv []T) (*Request, error) {
	return AllgatherInitBuf(c, sbuf(send), Slice(recv))
}

// AlltoallInitBuf makes a persistent Alltoall (MPI_Alltoall_init).
func AlltoallInitBuf(c *Comm, send, recv Buffer) (*Request, error) {
	return c.planPersistent(alltoallPlan("MPI_Alltoall_init", c, send, recv))
}

// AlltoallInit makes a persistent Alltoall (MPI_Alltoall_init).
func AlltoallInit[T Numeric](c *Comm, send, recv []T) (*Request, error) {
	return AlltoallInitBuf(c, sbuf(send), Slice(recv))
}

// ReduceInitBuf makes a persistent Reduce (MPI_Reduce_init).
func ReduceInitBuf(c *Comm, send, recv Buffer, o *Op, root int) (*Request, error) {
	return c.planPersistent(reducePlan("MPI_Reduce_init", c, send, recv, o, root))
}

// ReduceInit makes a persistent Reduce (MPI_Reduce_init).
func ReduceInit[T Numeric](c *Comm, send, recv []T, o *Op, root int) (*Request, error) {
	return ReduceInitBuf(c, sbuf(send), Slice(recv), o, root)
}

// AllreduceInitBuf makes a persistent Allreduce (MPI_Allreduce_init).
func AllreduceInitBuf(c *Comm, send, recv Buffer, o *Op) (*Request, error) {
	return c.planPersistent(allreducePlan("MPI_Allreduce_init", c, send, recv, o))
}

// AllreduceInit makes a persistent Allreduce (MPI_Allreduce_init).
func AllreduceInit[T Numeric](c *Comm, send, recv []T, o *Op) (*Request, error) {
	return AllreduceInitBuf(c, sbuf(send), Slice(recv), o)
}

// ReduceScatterBlockInitBuf makes a persistent ReduceScatterBlock
// (MPI_Reduce_scatter_block_init).
func ReduceScatterBlockInitBuf(c *Comm, send, recv Buffer, o *Op) (*Request, error) {
	return c.planPersistent(reduceScatterPlan("MPI_Reduce_scatter_block_init", c, send, recv, nil, o))
}

// ReduceScatterBlockInit makes a persistent ReduceScatterBlock
// (MPI_Reduce_scatter_block_init).
func ReduceScatterBlockInit[T Numeric](c *Comm, send, recv []T, o *Op) (*Request, error) {
	return ReduceScatterBlockInitBuf(c, sbuf(send), Slice(recv), o)
}

// ScanInitBuf makes a persistent Scan (MPI_Scan_init).
func ScanInitBuf(c *Comm, send, recv Buffer, o *Op) (*Request, error) {
	return c.planPersistent(scanPlan("MPI_Scan_init", c, send, recv, o, false))
}

// ScanInit makes a persistent Scan (MPI_Scan_init).
func ScanInit[T Numeric](c *Comm, send, recv []T, o *Op) (*Request, error) {
	return ScanInitBuf(c, sbuf(send), Slice(recv), o)
}

// GathervInitBuf makes a persistent Gatherv (MPI_Gatherv_init).
func GathervInitBuf(c *Comm, send, recv Buffer, counts, displs []int, root int) (*Request, error) {
	return c.planPersistent(gathervPlan("MPI_Gatherv_init", c, send, recv, counts, displs, root))
}

// GathervInit makes a persistent Gatherv (MPI_Gatherv_init).
func GathervInit[T Numeric](c *Comm, send, recv []T, counts, displs []int, root int) (*Request, error) {
	return GathervInitBuf(c, sbuf(send), Slice(recv), counts, displs, root)
}

// ScattervInitBuf makes a persistent Scatterv (MPI_Scatterv_init).
func ScattervInitBuf(c *Comm, send Buffer, counts, displs []int, recv Buffer, root int) (*Request, error) {
	return c.planPersistent(scattervPlan("MPI_Scatterv_init", c, send, counts, displs, recv, root))
}

// ScattervInit makes a persistent Scatterv (MPI_Scatterv_init).
func ScattervInit[T Numeric](c *Comm, send []T, counts, displs []int, recv []T, root int) (*Request, error) {
	return ScattervInitBuf(c, Slice(send), counts, displs, sbuf(recv), root)
}

// AllgathervInitBuf makes a persistent Allgatherv (MPI_Allgatherv_init).
func AllgathervInitBuf(c *Comm, send, recv Buffer, counts, displs []int) (*Request, error) {
	return c.planPersistent(allgathervPlan("MPI_Allgatherv_init", c, send, recv, counts, displs))
}

// AllgathervInit makes a persistent Allgatherv (MPI_Allgatherv_init).
func AllgathervInit[T Numeric](c *Comm, send, recv []T, counts, displs []int) (*Request, error) {
	return AllgathervInitBuf(c, sbuf(send), Slice(recv), counts, displs)
}

// AlltoallvInitBuf makes a persistent Alltoallv (MPI_Alltoallv_init).
func AlltoallvInitBuf(c *Comm, send Buffer, scounts, sdispls []int, recv Buffer, rcounts, rdispls []int) (*Request, error) {
	return c.planPersistent(alltoallvPlan("MPI_Alltoallv_init", c, send, scounts, sdispls, recv, rcounts, rdispls))
}

// AlltoallvInit makes a persistent Alltoallv (MPI_Alltoallv_init).
func AlltoallvInit[T Numeric](c *Comm, send []T, scounts, sdispls []int, recv []T, rcounts, rdispls []int) (*Request, error) {
	return AlltoallvInitBuf(c, sbuf(send), scounts, sdispls, Slice(recv), rcounts, rdispls)
}

// ReduceScatterInitBuf makes a persistent ReduceScatter
// (MPI_Reduce_scatter_init).
func ReduceScatterInitBuf(c *Comm, send, recv Buffer, counts []int, o *Op) (*Request, error) {
	if counts == nil {
		counts = []int{}
	}
	return c.planPersistent(reduceScatterPlan("MPI_Reduce_scatter_init", c, send, recv, counts, o))
}

// ReduceScatterInit makes a persistent ReduceScatter
// (MPI_Reduce_scatter_init).
func ReduceScatterInit[T Numeric](c *Comm, send, recv []T, counts []int, o *Op) (*Request, error) {
	return ReduceScatterInitBuf(c, sbuf(send), Slice(recv), counts, o)
}

// ExscanInitBuf makes a persistent Exscan (MPI_Exscan_init).
func ExscanInitBuf(c *Comm, send, recv Buffer, o *Op) (*Request, error) {
	return c.planPersistent(scanPlan("MPI_Exscan_init", c, send, recv, o, true))
}

// ExscanInit makes a persistent Exscan (MPI_Exscan_init).
func ExscanInit[T Numeric](c *Comm, send, recv []T, o *Op) (*Request, error) {
	return ExscanInitBuf(c, sbuf(send), Slice(recv), o)
}
