! Derived datatypes from Fortran (`use mpi`): a row of a column-major array as a vector,
! a subarray block, a struct of a record built with MPI_Get_address and sent from
! MPI_BOTTOM with absolute addresses, resized extents, pack/unpack; requests completed by
! MPI_Waitany (1-based indices) and MPI_Testall.
program types
  use mpi
  implicit none
  integer :: ierr, rank, np, next, prev, i, j, k, idx, rowtype, subtype, rectype, rectype2
  integer :: reqs(2), blens(3), oldtypes(3), sizes(2), subsizes(2), starts(2), position
  integer :: status(MPI_STATUS_SIZE), n
  integer(kind=MPI_ADDRESS_KIND) :: disps(3), base, lb, extent
  double precision :: a(6, 5), b(6, 5)
  integer :: ival
  double precision :: dval
  character(len=4) :: cval
  integer :: ival2
  double precision :: dval2
  character(len=4) :: cval2
  character(len=64) :: packed
  logical :: flag

  call mpi_init(ierr)
  call mpi_comm_rank(MPI_COMM_WORLD, rank, ierr)
  call mpi_comm_size(MPI_COMM_WORLD, np, ierr)
  next = mod(rank + 1, np)
  prev = mod(rank + np - 1, np)

  ! Row 2 of a 6x5 column-major array: 5 elements 6 apart.
  call mpi_type_vector(5, 1, 6, MPI_DOUBLE_PRECISION, rowtype, ierr)
  call mpi_type_commit(rowtype, ierr)
  call mpi_type_size(rowtype, n, ierr)
  call check(n == 40, 'vector size')
  call mpi_type_get_extent(rowtype, lb, extent, ierr)
  call check(lb == 0 .and. extent == 8 * (4 * 6 + 1), 'vector extent')
  do j = 1, 5
    do i = 1, 6
      a(i, j) = rank * 100 + i * 10 + j
    end do
  end do
  b = -1
  call mpi_irecv(b(2, 1), 1, rowtype, prev, 3, MPI_COMM_WORLD, reqs(1), ierr)
  call mpi_isend(a(2, 1), 1, rowtype, next, 3, MPI_COMM_WORLD, reqs(2), ierr)
  do k = 1, 2
    call mpi_waitany(2, reqs, idx, status, ierr)
    call check(idx >= 1 .and. idx <= 2, 'waitany index is 1-based')
    call check(reqs(idx) == MPI_REQUEST_NULL, 'waitany freed its request')
  end do
  call mpi_waitany(2, reqs, idx, status, ierr)
  call check(idx == MPI_UNDEFINED, 'waitany with nothing active')
  do j = 1, 5
    do i = 1, 6
      if (i == 2) then
        call check(b(i, j) == prev * 100 + 20 + j, 'row received')
      else
        call check(b(i, j) == -1, 'outside the row untouched')
      end if
    end do
  end do

  ! A 3x2 block at (2,3) (0-based starts) of the 6x5 array.
  sizes = (/ 6, 5 /)
  subsizes = (/ 3, 2 /)
  starts = (/ 2, 3 /)
  call mpi_type_create_subarray(2, sizes, subsizes, starts, MPI_ORDER_FORTRAN, &
                                MPI_DOUBLE_PRECISION, subtype, ierr)
  call mpi_type_commit(subtype, ierr)
  b = -1
  call mpi_sendrecv(a, 1, subtype, next, 4, b, 1, subtype, prev, 4, MPI_COMM_WORLD, &
                    MPI_STATUS_IGNORE, ierr)
  do j = 1, 5
    do i = 1, 6
      if (i >= 3 .and. i <= 5 .and. j >= 4 .and. j <= 5) then
        call check(b(i, j) == prev * 100 + i * 10 + j, 'subarray received')
      else
        call check(b(i, j) == -1, 'outside the subarray untouched')
      end if
    end do
  end do

  ! A record (integer, double, 4 characters) by absolute addresses from MPI_BOTTOM.
  ival = rank
  dval = rank + 0.25d0
  cval = 'r' // achar(48 + mod(rank, 10)) // 'xy'
  call mpi_get_address(ival, disps(1), ierr)
  call mpi_get_address(dval, disps(2), ierr)
  call mpi_get_address(cval, disps(3), ierr)
  blens = (/ 1, 1, 4 /)
  oldtypes = (/ MPI_INTEGER, MPI_DOUBLE_PRECISION, MPI_CHARACTER /)
  call mpi_type_create_struct(3, blens, disps, oldtypes, rectype, ierr)
  call mpi_type_commit(rectype, ierr)
  call mpi_get_address(ival2, disps(1), ierr)
  call mpi_get_address(dval2, disps(2), ierr)
  call mpi_get_address(cval2, disps(3), ierr)
  call mpi_type_create_struct(3, blens, disps, oldtypes, rectype2, ierr)
  call mpi_type_commit(rectype2, ierr)
  call mpi_sendrecv(MPI_BOTTOM, 1, rectype, next, 5, MPI_BOTTOM, 1, rectype2, prev, 5, &
                    MPI_COMM_WORLD, status, ierr)
  call check(ival2 == prev .and. dval2 == prev + 0.25d0, 'struct numbers')
  call check(cval2 == 'r' // achar(48 + mod(prev, 10)) // 'xy', 'struct characters')
  call mpi_get_count(status, rectype2, n, ierr)
  call check(n == 1, 'struct count')

  ! Pack and unpack the record by relative displacements.
  call mpi_get_address(ival, base, ierr)
  position = 0
  call mpi_pack(ival, 1, MPI_INTEGER, packed, 64, position, MPI_COMM_WORLD, ierr)
  call mpi_pack(dval, 1, MPI_DOUBLE_PRECISION, packed, 64, position, MPI_COMM_WORLD, ierr)
  call check(position == 12, 'pack position')
  position = 0
  call mpi_unpack(packed, 64, position, ival2, 1, MPI_INTEGER, MPI_COMM_WORLD, ierr)
  call mpi_unpack(packed, 64, position, dval2, 1, MPI_DOUBLE_PRECISION, MPI_COMM_WORLD, ierr)
  call check(ival2 == rank .and. dval2 == dval, 'unpack')

  ! Testall until both complete.
  call mpi_irecv(ival2, 1, MPI_INTEGER, prev, 6, MPI_COMM_WORLD, reqs(1), ierr)
  call mpi_isend(ival, 1, MPI_INTEGER, next, 6, MPI_COMM_WORLD, reqs(2), ierr)
  flag = .false.
  do while (.not. flag)
    call mpi_testall(2, reqs, flag, MPI_STATUSES_IGNORE, ierr)
  end do
  call check(ival2 == prev, 'testall')

  call mpi_type_free(rowtype, ierr)
  call mpi_type_free(subtype, ierr)
  call mpi_type_free(rectype, ierr)
  call mpi_type_free(rectype2, ierr)
  call check(rectype2 == MPI_DATATYPE_NULL, 'type_free')
  call mpi_barrier(MPI_COMM_WORLD, ierr)
  if (rank == 0) print '(a,i0,a)', 'ok types ', np, ' ranks'
  call mpi_finalize(ierr)

contains
  subroutine check(ok, what)
    logical, intent(in) :: ok
    character(*), intent(in) :: what
    integer :: e
    if (.not. ok) then
      print *, 'FAIL ', what, ' on rank ', rank
      call mpi_abort(MPI_COMM_WORLD, 1, e)
    end if
  end subroutine
end program
