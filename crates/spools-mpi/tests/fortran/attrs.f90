! Attributes, keyvals and error handlers written in Fortran (`use mpi`): MPI_TAG_UB read
! as its value, a value set in Fortran read back and copied to a dup by a Fortran copy
! function (MPI_COMM_DUP_FN for a second keyval, MPI_COMM_NULL_COPY_FN for a third),
! deleted through a Fortran delete function; an error handler written in Fortran called
! with the communicator and the code; MPI-1's MPI_Attr_get; MPI_Sizeof.
module callbacks
  use mpi
  implicit none
  integer :: copies = 0, deletes = 0, handled = 0, handled_code = 0, handled_comm = -1
contains
  subroutine copy_plus_one(oldcomm, keyval, extra, valin, valout, flag, ierr)
    integer :: oldcomm, keyval, ierr
    integer(kind=MPI_ADDRESS_KIND) :: extra, valin, valout
    logical :: flag
    valout = valin + 1 + extra
    flag = .true.
    copies = copies + 1
    ierr = MPI_SUCCESS
  end subroutine

  subroutine count_delete(comm, keyval, val, extra, ierr)
    integer :: comm, keyval, ierr
    integer(kind=MPI_ADDRESS_KIND) :: val, extra
    deletes = deletes + 1
    ierr = MPI_SUCCESS
  end subroutine

  subroutine on_error(comm, code)
    integer :: comm, code
    handled = handled + 1
    handled_code = code
    handled_comm = comm
  end subroutine
end module

program attrs
  use mpi
  use callbacks
  implicit none
  integer :: ierr, rank, k1, k2, k3, dup, eh, n, oldeh
  integer(kind=MPI_ADDRESS_KIND) :: v, extra
  integer :: v1
  logical :: flag
  double precision :: d

  call mpi_init(ierr)
  call mpi_comm_rank(MPI_COMM_WORLD, rank, ierr)

  call mpi_comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, v, flag, ierr)
  call check(flag .and. v >= 32767, 'MPI_TAG_UB is its value')
  call mpi_attr_get(MPI_COMM_WORLD, MPI_TAG_UB, v1, flag, ierr)
  call check(flag .and. v1 == v, 'MPI_Attr_get of MPI_TAG_UB')

  extra = 10
  call mpi_comm_create_keyval(copy_plus_one, count_delete, k1, extra, ierr)
  call mpi_comm_create_keyval(MPI_COMM_DUP_FN, MPI_COMM_NULL_DELETE_FN, k2, extra, ierr)
  call mpi_comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, k3, extra, ierr)
  v = 1000 + rank
  call mpi_comm_set_attr(MPI_COMM_WORLD, k1, v, ierr)
  call mpi_comm_set_attr(MPI_COMM_WORLD, k2, 77_MPI_ADDRESS_KIND, ierr)
  call mpi_comm_set_attr(MPI_COMM_WORLD, k3, 88_MPI_ADDRESS_KIND, ierr)
  v = -1
  call mpi_comm_get_attr(MPI_COMM_WORLD, k1, v, flag, ierr)
  call check(flag .and. v == 1000 + rank, 'a value set in Fortran read back')
  call mpi_comm_dup(MPI_COMM_WORLD, dup, ierr)
  call mpi_comm_get_attr(dup, k1, v, flag, ierr)
  call check(flag .and. v == 1011 + rank .and. copies == 1, 'copied by a Fortran function')
  call mpi_comm_get_attr(dup, k2, v, flag, ierr)
  call check(flag .and. v == 77, 'MPI_COMM_DUP_FN')
  call mpi_comm_get_attr(dup, k3, v, flag, ierr)
  call check(.not. flag, 'MPI_COMM_NULL_COPY_FN')
  call mpi_comm_delete_attr(dup, k1, ierr)
  call check(deletes == 1, 'deleted through a Fortran function')
  call mpi_comm_get_attr(dup, k1, v, flag, ierr)
  call check(.not. flag, 'deleted')

  ! An error handler written in Fortran, then MPI_ERRORS_RETURN.
  call mpi_comm_create_errhandler(on_error, eh, ierr)
  call mpi_comm_set_errhandler(dup, eh, ierr)
  call mpi_comm_call_errhandler(dup, MPI_ERR_OTHER, ierr)
  call check(handled == 1 .and. handled_code == MPI_ERR_OTHER .and. handled_comm == dup, &
             'handler called with the communicator and the code')
  call mpi_send(n, 1, MPI_INTEGER, 12345, 0, dup, ierr)
  call check(handled == 2 .and. handled_code /= MPI_SUCCESS .and. ierr /= MPI_SUCCESS, &
             'handler called for a bad rank')
  call mpi_comm_get_errhandler(dup, oldeh, ierr)
  call mpi_errhandler_free(oldeh, ierr)
  call mpi_errhandler_free(eh, ierr)

  call mpi_sizeof(d, n, ierr)
  call check(n == 8, 'MPI_Sizeof of a double precision')
  call mpi_sizeof(v1, n, ierr)
  call check(n == 4, 'MPI_Sizeof of an integer')

  call mpi_comm_free(dup, ierr)
  call mpi_comm_delete_attr(MPI_COMM_WORLD, k1, ierr)
  call check(deletes == 2, 'world attribute deleted')
  call mpi_comm_free_keyval(k1, ierr)
  call mpi_comm_free_keyval(k2, ierr)
  call mpi_comm_free_keyval(k3, ierr)
  call mpi_barrier(MPI_COMM_WORLD, ierr)
  if (rank == 0) print '(a)', 'ok attrs'
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
