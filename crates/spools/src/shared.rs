//! One runtime per process for the front doors linked into one binary: the Python
//! package carries the MPI library (`libmpi_abi.so.1`) inside its extension, so that
//! mpi4py and `spools` in one program are one rank of one job, with the same
//! communicators. The first front door to start joins the job; the others share its
//! [`World`]; the last to leave finalises it.
//!
//! A front door calls [`join`] where it would call [`crate::init`], keeps the
//! `Arc<World>`, and gives it back to [`leave`] (its finalize) or [`abort`].

use std::sync::{Arc, Mutex, PoisonError};

use spools_boot::config::{Config, ThreadLevel};
use spools_boot::identity::JobEnv;
use spools_boot::BootError;

use crate::world::{InitError, World};

/// The process's shared world and how many front doors hold it.
struct Entry {
    world: Arc<World>,
    users: usize,
}

static SHARED: Mutex<Option<Entry>> = Mutex::new(None);

/// The process's world: joins the job ([`crate::init`], collective) if no front door of
/// this binary did yet, else shares the world it joined. Every `join` is matched by one
/// [`leave`] or [`abort`].
///
/// ```
/// let a = spools::shared::join()?;            // joins (a job of one rank when run alone)
/// let b = spools::shared::join()?;            // the same rank, the same communicators
/// assert!(std::sync::Arc::ptr_eq(&a, &b));
/// spools::shared::leave(b)?;                  // a still holds it
/// spools::shared::leave(a)?;                  // the last one finalises
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
/// As [`crate::init`], for the first front door.
pub fn join() -> Result<Arc<World>, InitError> {
    join_as(None)
}

/// [`join`] for a front door that knows which of its threads will call (MPI's
/// `MPI_Init_thread`): the first to join sets the rank's thread level to `level`, or to
/// `SPOOLS_THREAD_LEVEL` where that is set and higher (a later one shares the world at
/// the level it has: [`spools_boot::config::Config::thread_level_in_effect`]).
///
/// ```
/// use spools::ThreadLevel;
/// let w = spools::shared::join_at(ThreadLevel::Funneled)?;
/// assert_eq!(w.worker().config().thread_level, ThreadLevel::Funneled);
/// spools::shared::leave(w)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
/// As [`join`].
pub fn join_at(level: ThreadLevel) -> Result<Arc<World>, InitError> {
    join_as(Some(level))
}

fn join_as(level: Option<ThreadLevel>) -> Result<Arc<World>, InitError> {
    let mut g = SHARED.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(e) = g.as_mut() {
        e.users += 1;
        return Ok(e.world.clone());
    }
    let world = Arc::new(match level {
        None => crate::init()?,
        Some(level) => {
            let mut cfg = Config::load().map_err(BootError::from)?;
            // SPOOLS_THREAD_LEVEL, when set, may raise the level asked for (a program
            // that says single but calls from several threads), never lower it.
            cfg.thread_level = if std::env::var_os("SPOOLS_THREAD_LEVEL").is_some() {
                cfg.thread_level.max(level)
            } else {
                level
            };
            let env = JobEnv::from_env().map_err(BootError::from)?;
            crate::init_with(cfg, env)?
        }
    });
    *g = Some(Entry {
        world: world.clone(),
        users: 1,
    });
    Ok(world)
}

/// Gives back a front door's world: the last one finalises it ([`World::finalize`],
/// collective); the others leave it to the front doors still using it.
///
/// # Errors
/// As [`World::finalize`], for the last one.
pub fn leave(world: Arc<World>) -> Result<(), BootError> {
    let last = {
        let mut g = SHARED.lock().unwrap_or_else(PoisonError::into_inner);
        match g.as_mut() {
            Some(e) if Arc::ptr_eq(&e.world, &world) => {
                e.users -= 1;
                if e.users == 0 {
                    g.take()
                } else {
                    None
                }
            }
            // Not the shared world (or it was aborted): finalise what was given.
            _ => None,
        }
    };
    match last {
        Some(e) => {
            drop(world);
            match Arc::try_unwrap(e.world) {
                Ok(w) => w.finalize(),
                // A front door kept a clone past its leave: dropping the last clone
                // leaves the job at process exit (World's drop contract).
                Err(_) => Ok(()),
            }
        }
        None => Ok(()),
    }
}

/// Ends the whole job because of a failure on this rank ([`World::abort`]), whichever
/// front doors still hold the world: their operations fail from now on.
pub fn abort(world: &World, cause: &str) {
    world.abort_here(cause);
    let mut g = SHARED.lock().unwrap_or_else(PoisonError::into_inner);
    if g.as_ref()
        .is_some_and(|e| std::ptr::eq(Arc::as_ptr(&e.world), world))
    {
        g.take();
    }
}
