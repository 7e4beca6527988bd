! MPICH's Fortran bindings (libmpichfort.so.12, which calls the C library)
! on adimpi: point-to-point with statuses, collectives, a communicator split.
program fortran
  use mpi
  implicit none
  integer :: ierr, me, np, nxt, prv, x, s, y, half, hs, n
  integer :: status(MPI_STATUS_SIZE), vlen
  character(len=MPI_MAX_LIBRARY_VERSION_STRING) :: lib
  double precision :: v(3)
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, me, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, np, ierr)
  call MPI_Get_library_version(lib, vlen, ierr)
  call check(index(lib(1:vlen), 'adimpi') > 0, 'the library is not adimpi''s')
  nxt = mod(me + 1, np)
  prv = mod(me + np - 1, np)

  x = me + 1
  call MPI_Allreduce(x, s, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  call check(s == np * (np + 1) / 2, 'allreduce')
  v = 0
  if (me == 0) v = (/ 1.5d0, 2.5d0, 3.5d0 /)
  call MPI_Bcast(v, 3, MPI_DOUBLE_PRECISION, 0, MPI_COMM_WORLD, ierr)
  call check(v(3) == 3.5d0, 'bcast')
  call ok('collectives')

  call MPI_Sendrecv(me, 1, MPI_INTEGER, nxt, 7, y, 1, MPI_INTEGER, prv, 7, MPI_COMM_WORLD, status, ierr)
  call check(y == prv .and. status(MPI_SOURCE) == prv .and. status(MPI_TAG) == 7, 'sendrecv')
  call MPI_Get_count(status, MPI_INTEGER, n, ierr)
  call check(n == 1, 'get_count')
  call MPI_Recv(y, 1, MPI_INTEGER, MPI_PROC_NULL, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
  call ok('p2p')

  call MPI_Comm_split(MPI_COMM_WORLD, mod(me, 2), me, half, ierr)
  call MPI_Comm_size(half, hs, ierr)
  call check(hs == (np + 1 - mod(me, 2)) / 2, 'split')
  call MPI_Comm_free(half, ierr)
  call check(half == MPI_COMM_NULL, 'comm_free')
  call ok('split')
  call MPI_Finalize(ierr)

contains

  subroutine check(cond, what)
    logical, intent(in) :: cond
    character(*), intent(in) :: what
    integer :: e
    if (.not. cond) then
      print *, 'rank', me, 'check failed: ', what
      call MPI_Abort(MPI_COMM_WORLD, 3, e)
    end if
  end subroutine

  subroutine ok(what)
    character(*), intent(in) :: what
    integer :: e
    call MPI_Barrier(MPI_COMM_WORLD, e)
    if (me == 0) print '(a, a)', 'ok ', what
    flush(6)
  end subroutine
end program
