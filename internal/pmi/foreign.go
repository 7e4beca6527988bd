package pmi

import (
	"fmt"
	"os"
	"strconv"
)

// foreignLaunchers are launchers that start every process of a job but
// offer no PMI-1 server (neither PMI_FD nor PMI_PORT): each process would
// otherwise run as a singleton, N silent 1-rank jobs. The size variable
// tells how many processes the launcher started.
var foreignLaunchers = []struct {
	sizeVar string // holds the job's size
	rankVar string // set in every process of a job (size unknown if sizeVar is absent)
	name    string
}{
	{"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "Open MPI's mpirun/mpiexec (Debian's default mpiexec when Open MPI is installed), which speaks PMIx"},
	{"", "PMIX_RANK", "a PMIx launcher (Open MPI's prterun, or srun --mpi=pmix)"},
	{"MV2_COMM_WORLD_SIZE", "MV2_COMM_WORLD_RANK", "MVAPICH's mpirun_rsh"},
	{"SLURM_STEP_NUM_TASKS", "SLURM_PROCID", "Slurm's srun without PMI (run it with srun --mpi=pmi2, or set MpiDefault=pmi2 in slurm.conf)"},
	{"PMI_SIZE", "PMI_RANK", "a launcher that set PMI_RANK and PMI_SIZE but gave neither PMI_FD nor PMI_PORT"},
}

// checkForeignLauncher returns an error if the process was evidently
// started as one of several by a launcher adimpi cannot talk to; Connect
// calls it when the environment offers no PMI server.
func checkForeignLauncher() error {
	for _, l := range foreignLaunchers {
		rank, hasRank := os.LookupEnv(l.rankVar)
		size, hasSize := "", false
		if l.sizeVar != "" {
			size, hasSize = os.LookupEnv(l.sizeVar)
		}
		var what string
		switch n, err := strconv.Atoi(size); {
		case hasSize && err == nil && n > 1:
			what = fmt.Sprintf("%s=%s", l.sizeVar, size)
		case !hasSize && l.sizeVar == "" && hasRank:
			what = fmt.Sprintf("%s=%s", l.rankVar, rank)
		default:
			continue
		}
		return fmt.Errorf("pmi: connect: this process was started by %s (%s), and adimpi cannot talk to it: "+
			"every process would run alone as rank 0 of 1. Start the program with adimpi's mpirun "+
			"(go run github.com/adimpi/adimpi/cmd/mpirun -np N prog) or with MPICH's mpiexec.hydra", l.name, what)
	}
	return nil
}
