//! The producer's end of a parallel pipe.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::Instant;

use spools_map::{Layout, Plan};
use spools_msg::Communicator;

use super::frame::{Header, Hello, Kind, HEADER_LEN, MAX_PAYLOAD};
use super::name::{meet_all, meet_timeout, token_from_hex, Description, PipeName};
use super::{agree_on_outcome, check_both_units, check_own_units, on_rank0};
use crate::collective::rank_bytes;
use crate::crc::extend_crc;
use crate::cursor::RunCursor;
use crate::error::{PipeError, PipeStep, PipeViolation};
use crate::exchange::ExchangeOptions;
use crate::redistribute::redistribute_plan;

/// The producer's end of a parallel pipe; [`PipeWriter::write`] sends one record.
///
/// ```no_run
/// let world = spools::init()?;
/// let l: spools_map::Layout = "u8[1024,1024] block,* on 4x1".parse()?;
/// let name: spools_io::pipe::PipeName = "pipe:frames".parse()?;
/// let mut out = spools_io::pipe::PipeWriter::open(world.io_communicator()?, &name, &l)?;
/// let mine = vec![7u8; 256 * 1024];
/// out.write(&mine)?;
/// out.close()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct PipeWriter<'c> {
    comm: &'c Communicator,
    layout: Layout,
    record: u64,
    mode: Mode,
}

enum Mode {
    Net {
        plan: Plan,
        socks: Vec<TcpStream>,
        bytes: Vec<u64>,
    },
    Stdout {
        plan: Plan,
    },
}

impl std::fmt::Debug for PipeWriter<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PipeWriter")
            .field("layout", &self.layout.to_string())
            .field("record", &self.record)
            .finish_non_exhaustive()
    }
}

fn connect(addr: &str, deadline: Instant) -> Result<TcpStream, PipeError> {
    loop {
        match TcpStream::connect(addr) {
            Ok(s) => return Ok(s),
            Err(e) if Instant::now() > deadline => {
                return Err(PipeError::io(
                    PipeStep::Connect {
                        addr: addr.to_string(),
                    },
                    e,
                ))
            }
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(10)),
        }
    }
}

impl<'c> PipeWriter<'c> {
    /// Opens the pipe `name` for writing records distributed as `layout` (rank `r` holds
    /// unit `r`). Collective over `comm`; waits (up to `SPOOLS_PIPE_TIMEOUT`, 60 s) for
    /// the consumer.
    ///
    /// # Errors
    /// [`PipeError`]: no consumer in time, layouts of different datasets, connections
    /// that fail; an error on any rank fails the call on every rank.
    pub fn open(
        comm: &'c Communicator,
        name: &PipeName,
        layout: &Layout,
    ) -> Result<Self, PipeError> {
        let total = layout
            .total_bytes()
            .ok_or(PipeError::BadName("an unsized layout".into()))?;
        let me = comm.rank();
        let mode = match name {
            PipeName::Stdout => {
                check_own_units(comm, layout, crate::Side::Source)?;
                Mode::Stdout {
                    plan: Plan::new(layout, &on_rank0(total)?)?,
                }
            }
            PipeName::Stdin => return Err(PipeError::BadName("stdin (a producer writes)".into())),
            _ => {
                let mine = Description {
                    layout: layout.to_string(),
                    ranks: comm.size(),
                    addrs: Vec::new(),
                    token: String::new(),
                    pid: std::process::id(),
                };
                let (theirs, cl) = meet_all(comm, name, true, &mine, layout)?;
                check_both_units(comm, layout, crate::Side::Source, &cl, theirs.ranks)?;
                let plan = Plan::new(layout, &cl)?;
                let token = token_from_hex(&theirs.token).ok_or(PipeError::Protocol {
                    side: "consumer",
                    rank: 0,
                    violation: PipeViolation::BadToken,
                })?;
                let deadline = Instant::now() + meet_timeout();
                let conn = (|| -> Result<(Vec<TcpStream>, Vec<u64>), PipeError> {
                    let mut socks = Vec::new();
                    let mut bytes = Vec::new();
                    for (c, addr) in theirs.addrs.iter().enumerate() {
                        let mut s = connect(addr, deadline)?;
                        s.set_nodelay(true)
                            .map_err(|e| PipeError::io(PipeStep::Socket, e))?;
                        let hello = Hello {
                            token,
                            rank: me,
                            ranks: comm.size(),
                        };
                        s.write_all(&hello.encode())
                            .map_err(|e| PipeError::io(PipeStep::Hello { rank: c as u32 }, e))?;
                        socks.push(s);
                        let c = c as u64;
                        bytes.push(if u64::from(me) < layout.units() && c < cl.units() {
                            plan.runs(u64::from(me), c)?.map(|r| r.len).sum()
                        } else {
                            0
                        });
                    }
                    Ok((socks, bytes))
                })();
                let (socks, bytes) = agree_on_outcome(comm, conn)?;
                Mode::Net { plan, socks, bytes }
            }
        };
        Ok(PipeWriter {
            comm,
            layout: layout.clone(),
            record: 0,
            mode,
        })
    }

    /// Records written so far.
    pub fn records(&self) -> u64 {
        self.record
    }

    /// Sends one record: this rank's share of it is `data`. Collective in the byte-stream
    /// mode; otherwise each rank sends its own part and returns when the consumer ranks
    /// have taken it into their socket buffers (back-pressure).
    ///
    /// # Errors
    /// [`PipeError::PeerGone`] when a consumer rank went away, [`PipeError::BufferSize`].
    pub fn write(&mut self, data: &[u8]) -> Result<(), PipeError> {
        let me = self.comm.rank();
        let need = rank_bytes(&self.layout, me)?;
        if (data.len() as u64) < need {
            return Err(PipeError::BufferSize {
                need,
                got: data.len() as u64,
            });
        }
        let record = self.record;
        match &mut self.mode {
            Mode::Stdout { plan } => {
                let total = plan.total_bytes();
                let mut whole = vec![0u8; if me == 0 { total as usize } else { 0 }];
                redistribute_plan(
                    self.comm,
                    plan,
                    data,
                    &mut whole,
                    &ExchangeOptions::default(),
                )?;
                let wrote = if me == 0 {
                    let mut o = std::io::stdout().lock();
                    o.write_all(&whole)
                        .and_then(|()| o.flush())
                        .map_err(|_| PipeError::PeerGone {
                            side: "consumer",
                            rank: 0,
                            when: format!("(standard output closed) in record {record}"),
                        })
                } else {
                    Ok(())
                };
                agree_on_outcome(self.comm, wrote)?;
            }
            Mode::Net { plan, socks, bytes } => {
                let n = socks.len();
                let mut frame = Vec::with_capacity(HEADER_LEN + MAX_PAYLOAD as usize);
                // Start at a different consumer on each rank, to spread the load.
                for k in 0..n {
                    let c = (me as usize + k) % n;
                    let mut left = bytes[c];
                    let mut cur = (left > 0)
                        .then(|| plan.runs(u64::from(me), c as u64))
                        .transpose()?
                        .map(RunCursor::new);
                    loop {
                        let len = left.min(u64::from(MAX_PAYLOAD));
                        frame.clear();
                        frame.extend_from_slice(&[0u8; HEADER_LEN]);
                        let mut crc = 0;
                        let mut got = 0;
                        while got < len {
                            let Some(r) = cur.as_mut().and_then(|c| c.take(len - got)) else {
                                break;
                            };
                            crc = extend_crc(
                                &mut frame,
                                &data[r.src as usize..(r.src + r.len) as usize],
                                crc,
                            );
                            got += r.len;
                        }
                        let h = Header {
                            kind: Kind::Data,
                            record,
                            len: got as u32,
                            crc,
                        };
                        frame[..HEADER_LEN].copy_from_slice(&h.encode());
                        socks[c]
                            .write_all(&frame)
                            .map_err(|_| PipeError::PeerGone {
                                side: "consumer",
                                rank: c as u32,
                                when: format!("in record {record}"),
                            })?;
                        left -= got;
                        if left == 0 {
                            break;
                        }
                    }
                }
            }
        }
        self.record += 1;
        Ok(())
    }

    /// Ends the stream: every consumer rank reads the end after the last record. Returns
    /// when the consumer has closed its end (so every record was read).
    ///
    /// # Errors
    /// [`PipeError::PeerGone`] when a consumer rank went away first.
    pub fn close(self) -> Result<(), PipeError> {
        if let Mode::Net { socks, .. } = self.mode {
            let end = Header {
                kind: Kind::End,
                record: self.record,
                len: 0,
                crc: 0,
            }
            .encode();
            for (c, mut s) in socks.into_iter().enumerate() {
                let gone = |_: ()| PipeError::PeerGone {
                    side: "consumer",
                    rank: c as u32,
                    when: "before the end of the stream".into(),
                };
                s.write_all(&end).map_err(|_| gone(()))?;
                let _ = s.shutdown(Shutdown::Write);
                let mut sink = [0u8; 64];
                loop {
                    match s.read(&mut sink) {
                        Ok(0) => break,
                        Ok(_) => {}
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(_) => return Err(gone(())),
                    }
                }
            }
        }
        Ok(())
    }
}
