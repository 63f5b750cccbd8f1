! Collectives through `use mpi`: bcast, reduce and allreduce (also MPI_IN_PLACE) on
! INTEGER, REAL and DOUBLE PRECISION, gather, scatterv, allgather, alltoall, scan and a
! split communicator; a commutative and a non-commutative user operator written in
! Fortran (2x2 integer matrix products over a derived type, whose handle the operator
! sees); MPI_Op_free gives the operator's slot back.
module matops
  use mpi
  implicit none
  integer :: mat_type = MPI_DATATYPE_NULL
  integer :: calls = 0
contains
  ! inout = in * inout, element by element of 2x2 matrices stored as 4 integers.
  subroutine matmul2(invec, inoutvec, len, datatype)
    integer :: len, datatype
    integer :: invec(4, len), inoutvec(4, len)
    integer :: i, a(4), b(4)
    if (datatype /= mat_type) then
      print *, 'FAIL operator got datatype', datatype, 'not', mat_type
      call abort_job()
    end if
    do i = 1, len
      a = invec(:, i)
      b = inoutvec(:, i)
      inoutvec(1, i) = a(1) * b(1) + a(2) * b(3)
      inoutvec(2, i) = a(1) * b(2) + a(2) * b(4)
      inoutvec(3, i) = a(3) * b(1) + a(4) * b(3)
      inoutvec(4, i) = a(3) * b(2) + a(4) * b(4)
    end do
    calls = calls + 1
  end subroutine

  subroutine absmax(invec, inoutvec, len, datatype)
    integer :: len, datatype
    double precision :: invec(len), inoutvec(len)
    integer :: i
    do i = 1, len
      inoutvec(i) = max(abs(invec(i)), abs(inoutvec(i)))
    end do
  end subroutine

  subroutine abort_job()
    integer :: ierr
    call mpi_abort(MPI_COMM_WORLD, 1, ierr)
  end subroutine
end module

program coll
  use mpi
  use matops
  implicit none
  integer :: ierr, rank, np, i, j, root, op, opmax, half, hrank, hsize
  integer :: ival, isum, ivec(3), imax(3)
  real :: r
  double precision :: d, dsum, dv(5), dmax(5)
  integer, allocatable :: vals(:), counts(:), displs(:), a2a_s(:), a2a_r(:), got(:)
  integer :: m(4), prod(4), want(4), mats(4, 2), mres(4, 2)

  call mpi_init(ierr)
  call mpi_comm_rank(MPI_COMM_WORLD, rank, ierr)
  call mpi_comm_size(MPI_COMM_WORLD, np, ierr)
  allocate(vals(np), counts(np), displs(np), a2a_s(np), a2a_r(np), got(np + 1))

  do root = 0, np - 1
    ival = -1
    if (rank == root) ival = 40 + root
    call mpi_bcast(ival, 1, MPI_INTEGER, root, MPI_COMM_WORLD, ierr)
    call check(ival == 40 + root, 'bcast')
    isum = -1
    call mpi_reduce(rank + 1, isum, 1, MPI_INTEGER, MPI_SUM, root, MPI_COMM_WORLD, ierr)
    if (rank == root) call check(isum == np * (np + 1) / 2, 'reduce')
  end do
  r = real(rank)
  call mpi_allreduce(MPI_IN_PLACE, r, 1, MPI_REAL, MPI_MAX, MPI_COMM_WORLD, ierr)
  call check(r == real(np - 1), 'allreduce in place real')
  d = 0.5d0 * rank
  call mpi_allreduce(d, dsum, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  call check(dsum == 0.25d0 * np * (np - 1), 'allreduce double')
  ivec = (/ rank, -rank, 7 /)
  call mpi_allreduce(ivec, imax, 3, MPI_INTEGER, MPI_MAX, MPI_COMM_WORLD, ierr)
  call check(all_eq(imax, (/ np - 1, 0, 7 /)), 'allreduce vector')

  ! gather, scatterv, allgather, alltoall, scan
  call mpi_gather(rank * 2, 1, MPI_INTEGER, vals, 1, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
  if (rank == 0) call check(all_eq(vals, (/ (2 * i, i = 0, np - 1) /)), 'gather')
  do i = 1, np
    counts(i) = i
    displs(i) = (i - 1) * i / 2
  end do
  block
    integer :: sbuf(np * (np + 1) / 2), rbuf(np)
    sbuf = (/ (i, i = 1, np * (np + 1) / 2) /)
    rbuf = -1
    call mpi_scatterv(sbuf, counts, displs, MPI_INTEGER, rbuf, rank + 1, MPI_INTEGER, 0, &
                      MPI_COMM_WORLD, ierr)
    call check(all_eq(rbuf(1:rank + 1), (/ (displs(rank + 1) + i, i = 1, rank + 1) /)), &
               'scatterv')
  end block
  call mpi_allgather(rank + 100, 1, MPI_INTEGER, vals, 1, MPI_INTEGER, MPI_COMM_WORLD, ierr)
  call check(all_eq(vals, (/ (100 + i, i = 0, np - 1) /)), 'allgather')
  a2a_s = (/ (rank * 100 + i, i = 0, np - 1) /)
  call mpi_alltoall(a2a_s, 1, MPI_INTEGER, a2a_r, 1, MPI_INTEGER, MPI_COMM_WORLD, ierr)
  call check(all_eq(a2a_r, (/ (i * 100 + rank, i = 0, np - 1) /)), 'alltoall')
  call mpi_scan(rank + 1, isum, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  call check(isum == (rank + 1) * (rank + 2) / 2, 'scan')

  ! A split communicator: even and odd ranks.
  call mpi_comm_split(MPI_COMM_WORLD, mod(rank, 2), -rank, half, ierr)
  call mpi_comm_rank(half, hrank, ierr)
  call mpi_comm_size(half, hsize, ierr)
  call check(hsize == (np + 1 - mod(rank, 2)) / 2, 'split size')
  call mpi_allreduce(rank, isum, 1, MPI_INTEGER, MPI_SUM, half, ierr)
  j = 0
  do i = mod(rank, 2), np - 1, 2
    j = j + i
  end do
  call check(isum == j, 'split allreduce')
  call mpi_comm_free(half, ierr)
  call check(half == MPI_COMM_NULL, 'comm_free')

  ! A non-commutative operator on a derived type: the product M_0 M_1 ... M_{np-1} of
  ! each rank's matrix, in rank order, on every root.
  call mpi_type_contiguous(4, MPI_INTEGER, mat_type, ierr)
  call mpi_type_commit(mat_type, ierr)
  call mpi_op_create(matmul2, .false., op, ierr)
  call check(ierr == MPI_SUCCESS, 'op_create')
  m = (/ 1, rank + 1, 0, 1 /)
  if (mod(rank, 2) == 1) m = (/ 1, 0, rank, 1 /)
  want = (/ 1, 0, 0, 1 /)
  do i = 0, np - 1
    prod = (/ 1, i + 1, 0, 1 /)
    if (mod(i, 2) == 1) prod = (/ 1, 0, i, 1 /)
    want = (/ want(1) * prod(1) + want(2) * prod(3), want(1) * prod(2) + want(2) * prod(4), &
              want(3) * prod(1) + want(4) * prod(3), want(3) * prod(2) + want(4) * prod(4) /)
  end do
  do root = 0, np - 1
    prod = 0
    call mpi_reduce(m, prod, 1, mat_type, op, root, MPI_COMM_WORLD, ierr)
    if (rank == root) call check(all_eq(prod, want), 'non-commutative reduce')
  end do
  mats(:, 1) = m
  mats(:, 2) = m
  call mpi_allreduce(mats, mres, 2, mat_type, op, MPI_COMM_WORLD, ierr)
  call check(all_eq(mres(:, 1), want) .and. all_eq(mres(:, 2), want), 'user allreduce')
  if (np > 1) call check(calls > 0, 'operator called')
  call mpi_op_free(op, ierr)
  call check(op == MPI_OP_NULL, 'op_free')
  call mpi_type_free(mat_type, ierr)

  call mpi_op_create(absmax, .true., opmax, ierr)
  dv = (/ (dble(rank - i), i = 1, 5) /)
  call mpi_allreduce(dv, dmax, 5, MPI_DOUBLE_PRECISION, opmax, MPI_COMM_WORLD, ierr)
  do i = 1, 5
    ! One rank: nothing to combine, the result is the contribution itself.
    if (np == 1) then
      call check(dmax(i) == dble(-i), 'user op on one rank')
    else
      call check(dmax(i) == dble(max(i, abs(np - 1 - i))), 'commutative user op')
    end if
  end do
  call mpi_op_free(opmax, ierr)

  call mpi_barrier(MPI_COMM_WORLD, ierr)
  if (rank == 0) print '(a,i0,a)', 'ok coll ', np, ' ranks'
  call mpi_finalize(ierr)

contains
  logical function all_eq(a, b)
    integer, intent(in) :: a(:), b(:)
    all_eq = size(a) == size(b)
    if (all_eq) all_eq = all(a == b)
  end function

  subroutine check(ok, what)
    logical, intent(in) :: ok
    character(*), intent(in) :: what
    if (.not. ok) then
      print *, 'FAIL ', what, ' on rank ', rank
      call abort_job()
    end if
  end subroutine
end program
