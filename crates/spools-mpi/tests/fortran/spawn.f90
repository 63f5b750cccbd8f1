! Dynamic processes from module mpi_f08: the parents spawn two copies of this program
! with arguments (a CHARACTER array ended by a blank element), then two more through
! MPI_Comm_spawn_multiple with MPI_ARGVS_NULL; each child finds its parents with
! MPI_Comm_get_parent, checks its arguments and MPI_APPNUM, and sends its rank to
! parent 0, which checks them. Prints "ok spawn f08 N ranks" on parent 0.
program spawn
  use mpi_f08
  implicit none
  type(MPI_Comm) :: parent, kids
  character(len=256) :: me, arg
  character(len=16) :: args(3)
  character(len=256) :: cmds(2)
  integer :: rank, size, rsize, i, got, ierr, np(2), codes(2), appnum
  integer(kind=MPI_ADDRESS_KIND) :: val
  logical :: flag
  type(MPI_Info) :: infos(2)

  call MPI_Init()
  call MPI_Comm_get_parent(parent)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, size)
  if (parent /= MPI_COMM_NULL) then
    call MPI_Comm_remote_size(parent, rsize)
    arg = ' '
    if (command_argument_count() > 0) call get_command_argument(1, arg)
    call MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_APPNUM, val, flag, ierr)
    appnum = -1
    if (flag) appnum = int(val)
    if (trim(arg) == 'child') then
      if (command_argument_count() /= 2) stop 'FAIL child: argument count'
      call get_command_argument(2, arg)
      if (trim(arg) /= 'two words') stop 'FAIL child: second argument'
      if (size /= 2 .or. appnum /= 0) stop 'FAIL child: world or appnum'
    else
      if (command_argument_count() /= 0) stop 'FAIL multiple: arguments'
      if (size /= 2 .or. appnum /= rank) stop 'FAIL multiple: world or appnum'
    end if
    call MPI_Send(rank, 1, MPI_INTEGER, 0, 7, parent)
    call MPI_Comm_disconnect(parent)
    call MPI_Finalize()
    stop
  end if
  call get_command_argument(0, me)
  args(1) = 'child'
  args(2) = 'two words'
  args(3) = ' '
  call MPI_Comm_spawn(me, args, 2, MPI_INFO_NULL, 0, MPI_COMM_WORLD, kids, codes, ierr)
  if (ierr /= MPI_SUCCESS .or. any(codes /= MPI_SUCCESS)) stop 'FAIL spawn'
  call check(kids)
  cmds(1) = me
  cmds(2) = me
  np = 1
  infos = MPI_INFO_NULL
  call MPI_Comm_spawn_multiple(2, cmds, MPI_ARGVS_NULL, np, infos, 0, MPI_COMM_WORLD, &
                               kids, MPI_ERRCODES_IGNORE)
  call check(kids)
  if (rank == 0) print '(a,i0,a)', 'ok spawn f08 ', size, ' ranks'
  call MPI_Finalize()
contains
  subroutine check(k)
    type(MPI_Comm), intent(inout) :: k
    call MPI_Comm_remote_size(k, rsize)
    if (rsize /= 2) stop 'FAIL remote size'
    if (rank == 0) then
      do i = 0, 1
        call MPI_Recv(got, 1, MPI_INTEGER, i, 7, k, MPI_STATUS_IGNORE)
        if (got /= i) stop 'FAIL a child sent another rank'
      end do
    end if
    call MPI_Comm_disconnect(k)
  end subroutine
end program
