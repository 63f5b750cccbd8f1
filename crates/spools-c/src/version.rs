//! The library's version, and the check that the library suits the header a program was
//! built with.

use std::ffi::c_char;

use crate::status::{guard, spools_status_t, Failure};

/// Major version of this header and library: programs built against one major version
/// run with any library of that major version whose minor version is at least theirs.
pub const SPOOLS_VERSION_MAJOR: u32 = 0;
/// Minor version: grows when calls, fields or status values are added.
pub const SPOOLS_VERSION_MINOR: u32 = 1;
/// Patch version: fixes only.
pub const SPOOLS_VERSION_PATCH: u32 = 0;

const VERSION_STRING: &[u8] = concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes();

/// The library's version as "MAJOR.MINOR.PATCH" (a static string, never NULL); with
/// non-NULL arguments, also its three numbers.
///
/// Thread safety: any thread, any time.
///
/// ```c
/// unsigned major, minor, patch;
/// printf("Spools %s\n", spools_version(&major, &minor, &patch));
/// ```
///
/// # Safety
/// Each pointer is NULL or points to writable memory for a `uint32_t`.
#[no_mangle]
pub unsafe extern "C" fn spools_version(
    major: *mut u32,
    minor: *mut u32,
    patch: *mut u32,
) -> *const c_char {
    for (p, v) in [
        (major, SPOOLS_VERSION_MAJOR),
        (minor, SPOOLS_VERSION_MINOR),
        (patch, SPOOLS_VERSION_PATCH),
    ] {
        if !p.is_null() {
            // SAFETY: the caller gives NULL or a writable `uint32_t`.
            unsafe { p.write(v) };
        }
    }
    VERSION_STRING.as_ptr().cast()
}

/// Whether this library serves a program built against header version `major.minor`:
/// `SPOOLS_OK` when the major versions are equal and the library's minor version is at
/// least `minor`, else `SPOOLS_ERR_VERSION` naming both. `spools_init()` runs this check
/// with the header's version when `SPOOLS_INIT_FIELD_API_VERSION` is set (as
/// `SPOOLS_INIT_PARAMS_DEFAULT` does).
///
/// Thread safety: any thread, any time.
///
/// ```c
/// if (spools_check_version(SPOOLS_VERSION_MAJOR, SPOOLS_VERSION_MINOR) != SPOOLS_OK)
///     fprintf(stderr, "%s\n", spools_last_error_message());
/// ```
#[no_mangle]
pub extern "C" fn spools_check_version(major: u32, minor: u32) -> spools_status_t {
    guard(|| check(major, minor))
}

pub(crate) fn check(major: u32, minor: u32) -> Result<(), Failure> {
    if major == SPOOLS_VERSION_MAJOR && minor <= SPOOLS_VERSION_MINOR {
        return Ok(());
    }
    Err(Failure::new(
        spools_status_t::SPOOLS_ERR_VERSION,
        format!(
            "the program was built against Spools header {major}.{minor}, but the library is \
             {SPOOLS_VERSION_MAJOR}.{SPOOLS_VERSION_MINOR}.{SPOOLS_VERSION_PATCH} (it serves \
             headers {SPOOLS_VERSION_MAJOR}.0 to {SPOOLS_VERSION_MAJOR}.{SPOOLS_VERSION_MINOR})"
        ),
    ))
}
