// Whether zero-copy sends pay for a stream's links here: loopback TCP throughput, 1 GiB in
// 1 MiB sends from 8 rotating buffers, with plain send() and with MSG_ZEROCOPY (the
// completions reaped from the error queue, at most 6 sends outstanding), the receiver a
// child process reading into one buffer.
//
//   cc -O2 -o zerocopy bench/stream/zerocopy.c && ./zerocopy 0 && ./zerocopy 1
//
// On loopback the kernel copies zero-copy pages on delivery to the local receiver, so the
// notification is pure cost (docs/benchmarks.md, "Streams"); on a NIC it may pay.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <linux/errqueue.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifndef SO_ZEROCOPY
#define SO_ZEROCOPY 60
#endif
#ifndef MSG_ZEROCOPY
#define MSG_ZEROCOPY 0x4000000
#endif
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec/1e9;}
static void reap(int s, long *pending){
  char ctrl[256]; struct msghdr m={0}; m.msg_control=ctrl; m.msg_controllen=sizeof ctrl;
  while (recvmsg(s,&m,MSG_ERRQUEUE|MSG_DONTWAIT)>=0){
    for(struct cmsghdr*c=CMSG_FIRSTHDR(&m);c;c=CMSG_NXTHDR(&m,c)){
      struct sock_extended_err*e=(void*)CMSG_DATA(c);
      if(e->ee_origin==SO_EE_ORIGIN_ZEROCOPY) *pending-= (long)(e->ee_data-e->ee_info+1);
    }
    m.msg_controllen=sizeof ctrl;
  }
}
int main(int argc,char**argv){
  int zc=argc>1&&atoi(argv[1]);
  size_t chunk=1<<20, total=1UL<<30;
  int l=socket(AF_INET,SOCK_STREAM,0); struct sockaddr_in a={.sin_family=AF_INET,.sin_addr.s_addr=htonl(0x7f000001)};
  bind(l,(void*)&a,sizeof a); listen(l,1); socklen_t al=sizeof a; getsockname(l,(void*)&a,&al);
  pid_t p=fork();
  if(p==0){int c=accept(l,0,0);char*b=malloc(chunk);size_t got=0;ssize_t n;while((n=read(c,b,chunk))>0)got+=n;_exit(got==total?0:1);}
  int s=socket(AF_INET,SOCK_STREAM,0); connect(s,(void*)&a,sizeof a);
  int one=1; if(zc && setsockopt(s,SOL_SOCKET,SO_ZEROCOPY,&one,sizeof one)){perror("SO_ZEROCOPY");return 1;}
  char*buf=malloc(chunk*8); memset(buf,7,chunk*8);
  long pending=0; double t=now();
  for(size_t sent=0,i=0;sent<total;i++){
    char*b=buf+(i%8)*chunk; size_t off=0;
    while(off<chunk){ssize_t n=send(s,b+off,chunk-off,zc?MSG_ZEROCOPY:0); if(n<0){if(errno==ENOBUFS){reap(s,&pending);continue;}perror("send");return 1;} off+=n; if(zc)pending++;}
    sent+=chunk; if(zc && pending>6){ struct pollfd f={s,0,0}; while(pending>6){poll(&f,1,10);reap(s,&pending);} }
  }
  shutdown(s,SHUT_WR); int st; waitpid(p,&st,0); double d=now()-t;
  printf("%s: %.0f MB/s (receiver %s)\n", zc?"MSG_ZEROCOPY":"copy", total/d/1e6, WEXITSTATUS(st)==0?"ok":"short");
  return 0;
}
