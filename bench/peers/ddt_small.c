/* Short non-contiguous messages between 2 ranks: 8 doubles as MPI_Type_vector(8, 1, 2,
 * MPI_DOUBLE) against 8 contiguous doubles (64 bytes), exchanged with MPI_Sendrecv and
 * passed back and forth with MPI_Send/MPI_Recv; 3 rounds of 20000 calls each. Prints
 * rank 0's microseconds per Sendrecv and per round trip.
 *   usage: ddt_small   (built with mpicc_abi or mpicc, run on 2 ranks) */
#include <mpi.h>
#include <stdio.h>
int main(int argc,char**argv){MPI_Init(&argc,&argv);int me;MPI_Comm_rank(MPI_COMM_WORLD,&me);
double s[16],r[16];for(int i=0;i<16;i++)s[i]=i;MPI_Datatype v;MPI_Type_vector(8,1,2,MPI_DOUBLE,&v);MPI_Type_commit(&v);
for(int rep=0;rep<3;rep++){double t[4];
for(int mode=0;mode<4;mode++){MPI_Barrier(MPI_COMM_WORLD);double a=MPI_Wtime();
for(int i=0;i<20000;i++){
 if(mode==0)MPI_Sendrecv(s,8,MPI_DOUBLE,1-me,1,r,8,MPI_DOUBLE,1-me,1,MPI_COMM_WORLD,MPI_STATUS_IGNORE);
 else if(mode==1)MPI_Sendrecv(s,1,v,1-me,1,r,1,v,1-me,1,MPI_COMM_WORLD,MPI_STATUS_IGNORE);
 else if(mode==2){if(me==0){MPI_Send(s,1,v,1,2,MPI_COMM_WORLD);MPI_Recv(r,1,v,1,2,MPI_COMM_WORLD,MPI_STATUS_IGNORE);}else{MPI_Recv(r,1,v,0,2,MPI_COMM_WORLD,MPI_STATUS_IGNORE);MPI_Send(s,1,v,0,2,MPI_COMM_WORLD);}}
 else {if(me==0){MPI_Send(s,8,MPI_DOUBLE,1,2,MPI_COMM_WORLD);MPI_Recv(r,8,MPI_DOUBLE,1,2,MPI_COMM_WORLD,MPI_STATUS_IGNORE);}else{MPI_Recv(r,8,MPI_DOUBLE,0,2,MPI_COMM_WORLD,MPI_STATUS_IGNORE);MPI_Send(s,8,MPI_DOUBLE,0,2,MPI_COMM_WORLD);}}
}
t[mode]=(MPI_Wtime()-a)/20000*1e6;}
if(me==0)printf("sendrecv contig %.3f vector %.3f | pingpong rt vector %.3f contig %.3f\n",t[0],t[1],t[2],t[3]);}
MPI_Finalize();}
