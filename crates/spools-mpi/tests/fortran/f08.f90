! Module mpi_f08: typed handles and their == and /=, ierror left out and given, statuses
! with %MPI_SOURCE, request arrays, MPI_IN_PLACE, a non-contiguous array section in a
! blocking call (copied in and out: MPI_SUBARRAYS_SUPPORTED is .false.), a user operator
! with the f08 interface (TYPE(C_PTR), VALUE buffers), and MPI-IO through a subarray view.
module f08ops
  use mpi_f08
  use, intrinsic :: iso_c_binding
  implicit none
contains
  subroutine imax(invec, inoutvec, len, datatype)
    type(c_ptr), value :: invec, inoutvec
    integer :: len
    type(MPI_Datatype) :: datatype
    integer, pointer :: a(:), b(:)
    call c_f_pointer(invec, a, [len])
    call c_f_pointer(inoutvec, b, [len])
    if (datatype /= MPI_INTEGER) stop 'imax: not MPI_INTEGER'
    b = max(a, b)
  end subroutine
end module

program f08
  use mpi_f08
  use f08ops
  implicit none
  type(MPI_Comm) :: dup
  type(MPI_Status) :: status
  type(MPI_Request) :: reqs(2)
  type(MPI_Datatype) :: ftype
  type(MPI_File) :: fh
  type(MPI_Op) :: op
  integer :: rank, np, next, prev, ierr, got, i, n
  integer :: a(4, 3), col(3), vals(5), mx(5)
  double precision :: d
  integer(kind=MPI_OFFSET_KIND) :: disp, fsize
  character(len=512) :: path

  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, np, ierr)
  call check(ierr == MPI_SUCCESS, 'ierror given')
  next = mod(rank + 1, np)
  prev = mod(rank + np - 1, np)
  call MPI_Comm_dup(MPI_COMM_WORLD, dup)
  call check(dup /= MPI_COMM_WORLD .and. dup /= MPI_COMM_NULL, 'dup is a new handle')

  call MPI_Sendrecv(rank, 1, MPI_INTEGER, next, 1, got, 1, MPI_INTEGER, prev, 1, dup, status)
  call check(got == prev .and. status%MPI_SOURCE == prev .and. status%MPI_TAG == 1, 'sendrecv')
  call MPI_Get_count(status, MPI_INTEGER, n)
  call check(n == 1, 'get_count')

  ! Row 2 of a column-major array is not contiguous: copied in by the compiler.
  a = reshape([(rank * 100 + i, i = 1, 12)], [4, 3])
  call MPI_Sendrecv(a(2, :), 3, MPI_INTEGER, next, 2, col, 3, MPI_INTEGER, prev, 2, dup, &
                    MPI_STATUS_IGNORE)
  call check(all(col == [prev * 100 + 2, prev * 100 + 6, prev * 100 + 10]), 'section sent')
  a = 0
  call MPI_Recv(a(3, :), 3, MPI_INTEGER, MPI_PROC_NULL, 3, dup, status)
  call check(status%MPI_SOURCE == MPI_PROC_NULL, 'proc_null status')

  call MPI_Irecv(got, 1, MPI_INTEGER, prev, 4, dup, reqs(1))
  call MPI_Isend(rank, 1, MPI_INTEGER, next, 4, dup, reqs(2))
  call MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE)
  call check(got == prev .and. reqs(1) == MPI_REQUEST_NULL, 'waitall')

  d = rank
  call MPI_Allreduce(MPI_IN_PLACE, d, 1, MPI_DOUBLE_PRECISION, MPI_SUM, dup)
  call check(d == np * (np - 1) / 2.0d0, 'allreduce in place')

  call MPI_Op_create(imax, .true., op)
  vals = [(rank * i, i = 1, 5)]
  call MPI_Allreduce(vals, mx, 5, MPI_INTEGER, op, dup)
  call check(all(mx == [((np - 1) * i, i = 1, 5)]), 'f08 user operator')
  call MPI_Op_free(op)
  call check(op == MPI_OP_NULL, 'op_free')

  ! Each rank's 5 integers at its place in a file, through a subarray view.
  call get_command_argument(1, path)
  call MPI_Type_create_subarray(1, [5 * np], [5], [5 * rank], MPI_ORDER_FORTRAN, MPI_INTEGER, ftype)
  call MPI_Type_commit(ftype)
  call MPI_File_open(dup, trim(path), MPI_MODE_CREATE + MPI_MODE_RDWR, MPI_INFO_NULL, fh, ierr)
  call check(ierr == MPI_SUCCESS, 'file_open')
  disp = 0
  call MPI_File_set_view(fh, disp, MPI_INTEGER, ftype, 'native', MPI_INFO_NULL)
  vals = [(rank * 10 + i, i = 1, 5)]
  call MPI_File_write_all(fh, vals, 5, MPI_INTEGER, status)
  call MPI_Get_count(status, MPI_INTEGER, n)
  call check(n == 5, 'write_all count')
  call MPI_File_sync(fh)
  call MPI_Barrier(dup)
  call MPI_File_get_size(fh, fsize)
  call check(fsize == 20 * np, 'file size')
  vals = 0
  call MPI_File_read_at_all(fh, 0_MPI_OFFSET_KIND, vals, 5, MPI_INTEGER, MPI_STATUS_IGNORE)
  call check(all(vals == [(rank * 10 + i, i = 1, 5)]), 'read back')
  call MPI_File_close(fh)
  call check(fh == MPI_FILE_NULL, 'file_close')
  call MPI_Type_free(ftype)

  call MPI_Comm_free(dup)
  call check(dup == MPI_COMM_NULL, 'comm_free')
  if (rank == 0) print '(a,i0,a)', 'ok f08 ', np, ' ranks'
  call MPI_Finalize()

contains
  subroutine check(ok, what)
    logical, intent(in) :: ok
    character(*), intent(in) :: what
    if (.not. ok) then
      print *, 'FAIL ', what, ' on rank ', rank
      call MPI_Abort(MPI_COMM_WORLD, 1)
    end if
  end subroutine
end program
