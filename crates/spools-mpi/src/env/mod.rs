//! The environment (MPI 4.1 chapters 9 to 11): joining and leaving the job (`init`) and
//! sessions (`session`), error classes, codes and handlers (`error`, `errhandler`), info
//! objects (`info`), memory and the small environment calls (`mem`), and what the
//! library says about its ABI and the machine (`misc`).

pub(crate) mod errhandler;
pub(crate) mod error;
pub(crate) mod info;
pub(crate) mod init;
pub(crate) mod mem;
pub(crate) mod misc;
pub(crate) mod session;
