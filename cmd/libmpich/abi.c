// The parts of MPICH's ABI that are data, or functions too simple to cross
// into Go: handle conversions (MPICH's Fortran handles are its C handles)
// and the global objects mpi.h declares extern.

#include <stdint.h>

typedef struct { int count_lo, count_hi_and_cancelled, source, tag, error; } adimpi_f08_status;

static int unweighted_mark, weights_empty_mark;
int *const MPI_UNWEIGHTED = &unweighted_mark;
int *const MPI_WEIGHTS_EMPTY = &weights_empty_mark;
int *MPI_F_STATUS_IGNORE = 0;
int *MPI_F_STATUSES_IGNORE = 0;
adimpi_f08_status MPIR_F08_MPI_STATUS_IGNORE_OBJ;
adimpi_f08_status MPIR_F08_MPI_STATUSES_IGNORE_OBJ[1];
int MPIR_F08_MPI_IN_PLACE;
int MPIR_F08_MPI_BOTTOM;
adimpi_f08_status *MPI_F08_STATUS_IGNORE = &MPIR_F08_MPI_STATUS_IGNORE_OBJ;
adimpi_f08_status *MPI_F08_STATUSES_IGNORE = MPIR_F08_MPI_STATUSES_IGNORE_OBJ;
void *const MPI_T_PVAR_ALL_HANDLES = (void *)1;

// MPI_COMM_DUP_FN and friends: copy the attribute value's pointer.
int MPIR_Dup_fn(int oldcomm, int keyval, void *extra, void *in, void *out, int *flag) {
	*(void **)out = in;
	*flag = 1;
	return 0;
}

#define IDENTITY(name, from, to) \
	to name(from h) { return (to)h; } \
	to P##name(from h) __attribute__((alias(#name)));

IDENTITY(MPI_Comm_c2f, int, int)
IDENTITY(MPI_Comm_f2c, int, int)
IDENTITY(MPI_Type_c2f, int, int)
IDENTITY(MPI_Type_f2c, int, int)
IDENTITY(MPI_Group_c2f, int, int)
IDENTITY(MPI_Group_f2c, int, int)
IDENTITY(MPI_Op_c2f, int, int)
IDENTITY(MPI_Op_f2c, int, int)
IDENTITY(MPI_Request_c2f, int, int)
IDENTITY(MPI_Request_f2c, int, int)
IDENTITY(MPI_Info_c2f, int, int)
IDENTITY(MPI_Info_f2c, int, int)
IDENTITY(MPI_Errhandler_c2f, int, int)
IDENTITY(MPI_Errhandler_f2c, int, int)
IDENTITY(MPI_Message_c2f, int, int)
IDENTITY(MPI_Message_f2c, int, int)

// adimpi has no MPI-IO: there are no files to convert.
int MPI_File_c2f(void *fh) { return 0; }
int PMPI_File_c2f(void *fh) __attribute__((alias("MPI_File_c2f")));
void *MPI_File_f2c(int fh) { return 0; }
void *PMPI_File_f2c(int fh) __attribute__((alias("MPI_File_f2c")));

// The internal entry points through which MPICH's Fortran bindings
// (libmpichfort.so.12) reach attributes and generalized requests: adimpi
// does not implement those for Fortran, so the calls fail as unsupported
// functions do (rather than the dynamic linker's failing to find them).
extern int adimpi_unsupported_name(char *);
int MPII_Comm_get_attr() { return adimpi_unsupported_name("MPI_Comm_get_attr from Fortran"); }
int MPII_Comm_set_attr() { return adimpi_unsupported_name("MPI_Comm_set_attr from Fortran"); }
int MPII_Type_get_attr() { return adimpi_unsupported_name("MPI_Type_get_attr from Fortran"); }
int MPII_Type_set_attr() { return adimpi_unsupported_name("MPI_Type_set_attr from Fortran"); }
int MPII_Win_get_attr() { return adimpi_unsupported_name("MPI_Win_get_attr from Fortran"); }
int MPII_Win_set_attr() { return adimpi_unsupported_name("MPI_Win_set_attr from Fortran"); }
void MPII_Grequest_set_lang_f77() { adimpi_unsupported_name("MPI_Grequest_start from Fortran"); }
