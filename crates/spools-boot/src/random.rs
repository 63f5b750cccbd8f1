//! Random bytes from the operating system (secrets, nonces, job ids).

/// Fills an array from the operating system's random source.
///
/// # Errors
/// The operating system's error if it has no random source.
pub fn random<const N: usize>() -> std::io::Result<[u8; N]> {
    let mut b = [0u8; N];
    getrandom::fill(&mut b).map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(b)
}
