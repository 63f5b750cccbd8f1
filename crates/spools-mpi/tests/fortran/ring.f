! A ring in fixed form with mpif.h: every rank passes a token to the next, with
! MPI_Sendrecv, MPI_Send/MPI_Recv and MPI_Isend/MPI_Irecv/MPI_Waitall; checks the status
! fields, MPI_Get_count, MPI_STATUS_IGNORE, MPI_ANY_SOURCE, the processor name and wtime.
      PROGRAM RING
      IMPLICIT NONE
      INCLUDE 'mpif.h'
      INTEGER IERR, RANK, NP, NEXT, PREV, TOKEN, GOT, N, I
      INTEGER STATUS(MPI_STATUS_SIZE), STATS(MPI_STATUS_SIZE, 2)
      INTEGER REQS(2)
      DOUBLE PRECISION T0, BUF(100), RBUF(100)
      CHARACTER*(MPI_MAX_PROCESSOR_NAME) NAME
      INTEGER NLEN
      LOGICAL FLAG
      CALL MPI_INIT(IERR)
      CALL CHECK(IERR .EQ. MPI_SUCCESS, 'init')
      CALL MPI_INITIALIZED(FLAG, IERR)
      CALL CHECK(FLAG, 'initialized')
      CALL MPI_COMM_RANK(MPI_COMM_WORLD, RANK, IERR)
      CALL MPI_COMM_SIZE(MPI_COMM_WORLD, NP, IERR)
      NEXT = MOD(RANK + 1, NP)
      PREV = MOD(RANK + NP - 1, NP)
      T0 = MPI_WTIME()
      CALL MPI_GET_PROCESSOR_NAME(NAME, NLEN, IERR)
      CALL CHECK(NLEN .GT. 0 .AND. NAME(NLEN+1:NLEN+1) .EQ. ' ',
     &           'processor name')
!     Sendrecv around the ring.
      TOKEN = 1000 + RANK
      CALL MPI_SENDRECV(TOKEN, 1, MPI_INTEGER, NEXT, 7, GOT, 1,
     &     MPI_INTEGER, PREV, 7, MPI_COMM_WORLD, STATUS, IERR)
      CALL CHECK(GOT .EQ. 1000 + PREV, 'sendrecv value')
      CALL CHECK(STATUS(MPI_SOURCE) .EQ. PREV, 'status source')
      CALL CHECK(STATUS(MPI_TAG) .EQ. 7, 'status tag')
      CALL MPI_GET_COUNT(STATUS, MPI_INTEGER, N, IERR)
      CALL CHECK(N .EQ. 1, 'get_count')
!     A token passed once around: rank 0 starts, each adds its rank.
      IF (RANK .EQ. 0) THEN
        TOKEN = 0
        CALL MPI_SEND(TOKEN, 1, MPI_INTEGER, NEXT, 1, MPI_COMM_WORLD,
     &                IERR)
        CALL MPI_RECV(TOKEN, 1, MPI_INTEGER, MPI_ANY_SOURCE, 1,
     &                MPI_COMM_WORLD, STATUS, IERR)
        CALL CHECK(TOKEN .EQ. NP * (NP - 1) / 2, 'token')
        CALL CHECK(STATUS(MPI_SOURCE) .EQ. PREV, 'token source')
      ELSE
        CALL MPI_RECV(TOKEN, 1, MPI_INTEGER, PREV, 1, MPI_COMM_WORLD,
     &                MPI_STATUS_IGNORE, IERR)
        TOKEN = TOKEN + RANK
        CALL MPI_SEND(TOKEN, 1, MPI_INTEGER, NEXT, 1, MPI_COMM_WORLD,
     &                IERR)
      END IF
!     Non-blocking, 100 doubles.
      DO I = 1, 100
        BUF(I) = RANK * 1000.0D0 + I
        RBUF(I) = -1
      END DO
      CALL MPI_IRECV(RBUF, 100, MPI_DOUBLE_PRECISION, PREV, 2,
     &               MPI_COMM_WORLD, REQS(1), IERR)
      CALL MPI_ISEND(BUF, 100, MPI_DOUBLE_PRECISION, NEXT, 2,
     &               MPI_COMM_WORLD, REQS(2), IERR)
      CALL MPI_WAITALL(2, REQS, STATS, IERR)
      CALL CHECK(REQS(1) .EQ. MPI_REQUEST_NULL, 'request freed')
      CALL CHECK(STATS(MPI_SOURCE, 1) .EQ. PREV, 'waitall status')
      DO I = 1, 100
        CALL CHECK(RBUF(I) .EQ. PREV * 1000.0D0 + I, 'isend data')
      END DO
      CALL CHECK(MPI_WTIME() .GE. T0, 'wtime')
      CALL MPI_BARRIER(MPI_COMM_WORLD, IERR)
      IF (RANK .EQ. 0) PRINT '(A,I0,A)', 'ok ring ', NP, ' ranks'
      CALL MPI_FINALIZE(IERR)
      END

      SUBROUTINE CHECK(OK, WHAT)
      IMPLICIT NONE
      INCLUDE 'mpif.h'
      LOGICAL OK
      CHARACTER*(*) WHAT
      INTEGER IERR
      IF (.NOT. OK) THEN
        PRINT *, 'FAIL ', WHAT
        CALL MPI_ABORT(MPI_COMM_WORLD, 1, IERR)
      END IF
      END
