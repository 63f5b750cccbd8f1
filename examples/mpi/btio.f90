! In the spirit of NAS BT-IO: a 3-D grid of 5-component records (double precision),
! split over a 2-D Cartesian grid of ranks (y and z, uneven where the extent does not
! divide), appended step after step to one file through collective MPI-IO with a
! subarray view, then read back step by step and checked on every rank.
!
!   btio PATH [N] [STEPS] [--time]
!
! Prints one line, the same on every MPI: the grid, the steps, the bytes and the sum of
! all values read; with --time also the write and read bandwidth (MB/s, slowest rank).
program btio
  use mpi
  implicit none
  integer :: ierr, rank, np, n, steps, t, i, j, k, c, fh, ftype, cart, nargs
  integer :: dims(2), coords(2), ly, lz, oy, oz, gsizes(4), lsizes(4), starts(4), bad
  logical :: periods(2), timing
  integer(kind=MPI_OFFSET_KIND) :: disp, fsize, step_bytes
  double precision, allocatable :: u(:, :, :, :), v(:, :, :, :)
  double precision :: total, sum_all, tw, tr, t0
  character(len=512) :: path, arg

  call mpi_init(ierr)
  call mpi_comm_rank(MPI_COMM_WORLD, rank, ierr)
  call mpi_comm_size(MPI_COMM_WORLD, np, ierr)
  nargs = command_argument_count()
  n = 12
  steps = 3
  timing = .false.
  call get_command_argument(1, path)
  if (nargs >= 2) then
    call get_command_argument(2, arg)
    read (arg, *) n
  end if
  if (nargs >= 3) then
    call get_command_argument(3, arg)
    read (arg, *) steps
  end if
  if (nargs >= 4) timing = .true.

  dims = 0
  call mpi_dims_create(np, 2, dims, ierr)
  periods = .false.
  call mpi_cart_create(MPI_COMM_WORLD, 2, dims, periods, .false., cart, ierr)
  call mpi_cart_coords(cart, rank, 2, coords, ierr)
  call split(n, dims(1), coords(1), oy, ly)
  call split(n, dims(2), coords(2), oz, lz)
  allocate(u(5, n, ly, lz), v(5, n, ly, lz))
  gsizes = (/ 5, n, n, n /)
  lsizes = (/ 5, n, ly, lz /)
  starts = (/ 0, 0, oy, oz /)
  call mpi_type_create_subarray(4, gsizes, lsizes, starts, MPI_ORDER_FORTRAN, &
                                MPI_DOUBLE_PRECISION, ftype, ierr)
  call mpi_type_commit(ftype, ierr)
  step_bytes = 5_MPI_OFFSET_KIND * n * n * n * 8

  call mpi_barrier(MPI_COMM_WORLD, ierr)
  t0 = mpi_wtime()
  call mpi_file_open(cart, path, MPI_MODE_CREATE + MPI_MODE_WRONLY, MPI_INFO_NULL, fh, ierr)
  call ok(ierr == MPI_SUCCESS, 'open for writing')
  do t = 1, steps
    call fill(u, t)
    disp = (t - 1) * step_bytes
    call mpi_file_set_view(fh, disp, MPI_DOUBLE_PRECISION, ftype, 'native', MPI_INFO_NULL, ierr)
    call mpi_file_write_all(fh, u, size(u), MPI_DOUBLE_PRECISION, MPI_STATUS_IGNORE, ierr)
    call ok(ierr == MPI_SUCCESS, 'write_all')
  end do
  call mpi_file_close(fh, ierr)
  tw = mpi_wtime() - t0
  call ok(fh == MPI_FILE_NULL, 'close')

  call mpi_barrier(MPI_COMM_WORLD, ierr)
  t0 = mpi_wtime()
  call mpi_file_open(cart, path, MPI_MODE_RDONLY, MPI_INFO_NULL, fh, ierr)
  call ok(ierr == MPI_SUCCESS, 'open for reading')
  call mpi_file_get_size(fh, fsize, ierr)
  call ok(fsize == steps * step_bytes, 'file size')
  total = 0
  bad = 0
  do t = 1, steps
    disp = (t - 1) * step_bytes
    call mpi_file_set_view(fh, disp, MPI_DOUBLE_PRECISION, ftype, 'native', MPI_INFO_NULL, ierr)
    v = -1
    call mpi_file_read_all(fh, v, size(v), MPI_DOUBLE_PRECISION, MPI_STATUS_IGNORE, ierr)
    call ok(ierr == MPI_SUCCESS, 'read_all')
    call fill(u, t)
    bad = bad + count(u /= v)
    total = total + sum(v)
  end do
  call mpi_file_close(fh, ierr)
  tr = mpi_wtime() - t0
  call ok(bad == 0, 'records read back differ from those written')

  call mpi_reduce(total, sum_all, 1, MPI_DOUBLE_PRECISION, MPI_SUM, 0, MPI_COMM_WORLD, ierr)
  call mpi_allreduce(MPI_IN_PLACE, tw, 1, MPI_DOUBLE_PRECISION, MPI_MAX, MPI_COMM_WORLD, ierr)
  call mpi_allreduce(MPI_IN_PLACE, tr, 1, MPI_DOUBLE_PRECISION, MPI_MAX, MPI_COMM_WORLD, ierr)
  if (rank == 0) then
    print '(a,i0,a,i0,a,i0,a,i0,a,i0,a,i0,a,f0.1)', 'btio grid ', n, '^3 ranks ', np, &
      ' (', dims(1), 'x', dims(2), ') steps ', steps, ' bytes ', fsize, ' sum ', sum_all
    if (timing) print '(a,f0.1,a,f0.1)', 'btio MB/s write ', &
      dble(fsize) / tw / 1d6, ' read ', dble(fsize) / tr / 1d6
  end if
  call mpi_type_free(ftype, ierr)
  call mpi_comm_free(cart, ierr)
  call mpi_finalize(ierr)

contains
  ! The part of 1..N that coordinate C of P takes: offset O (0-based) and length L.
  subroutine split(n, p, c, o, l)
    integer, intent(in) :: n, p, c
    integer, intent(out) :: o, l
    l = n / p
    o = c * l + min(c, mod(n, p))
    if (c < mod(n, p)) l = l + 1
  end subroutine

  subroutine fill(a, t)
    double precision, intent(out) :: a(:, :, :, :)
    integer, intent(in) :: t
    do k = 1, lz
      do j = 1, ly
        do i = 1, n
          do c = 1, 5
            a(c, i, j, k) = c + 10d0 * i + 1d3 * (oy + j) + 1d5 * (oz + k) + 1d7 * t
          end do
        end do
      end do
    end do
  end subroutine

  subroutine ok(cond, what)
    logical, intent(in) :: cond
    character(*), intent(in) :: what
    integer :: e
    if (.not. cond) then
      print *, 'FAIL ', what, ' on rank ', rank
      call mpi_abort(MPI_COMM_WORLD, 1, e)
    end if
  end subroutine
end program
