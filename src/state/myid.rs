//! The daemon's id (`SENTINEL MYID`): chosen once, then kept.
//!
//! As Sentinel keeps `sentinel myid` in its configuration file, Valkyrie
//! keeps its id in the state file, because peers and clients know a
//! daemon by it. Precedence: `sentinel myid` from the configuration file,
//! else the id saved in the state file, else a fresh one from the
//! operating system's random source, saved at once by the runtime.

/// 40 hex characters from the operating system's random source: a fresh
/// daemon id, or an index run id.
pub fn random_id() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 20];
    getrandom::fill(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// The id to use, given the configured and the saved one, and whether the
/// state file must be written to hold it.
pub fn choose(
    configured: Option<&str>,
    saved: Option<&str>,
) -> Result<(String, bool), getrandom::Error> {
    let id = match (configured, saved) {
        (Some(c), _) => c.to_string(),
        (None, Some(s)) => s.to_string(),
        (None, None) => random_id()?,
    };
    let persist = saved != Some(id.as_str());
    Ok((id, persist))
}
