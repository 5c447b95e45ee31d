//! Test-only crash points, one mechanism for all of them: named fail points
//! of the `fail` crate. Each module names its own steps (`txn::crash_point`,
//! `remote::crash_point`, `cleaner::CrashPoint`) and the tests use the same
//! names.
//!
//! A broker reads them from the environment variable [`ENV`] (`FAILPOINTS`,
//! the crate's convention) when it starts, as `name=return[(arg)]` entries
//! separated by `;` ([`setting`] writes one): the process then SIGKILLs
//! itself at the first step that fires (the transaction coordinator's and
//! tiered storage's steps), or a clean stops as if it had died there
//! (the cleaner's, which its library tests set with [`arm`]). Never set it
//! in production: the broker dies on purpose. An entry that does not parse
//! is logged and ignored.
//!
//! Invariant: with nothing configured, a step costs one read-locked lookup
//! of its name and changes nothing.

/// The environment variable a broker reads its fail points from.
pub const ENV: &str = "FAILPOINTS";

/// One entry of [`ENV`]: `name` fires (with `arg`, when given).
pub fn setting(name: &str, arg: Option<&str>) -> String {
    match arg {
        Some(arg) => format!("{name}=return({arg})"),
        None => format!("{name}=return"),
    }
}

/// Configure the fail points [`ENV`] names (at a broker's start); returns
/// how many were set.
pub fn configure_from_env() -> usize {
    let Ok(value) = std::env::var(ENV) else { return 0 };
    let mut set = 0;
    for entry in value.split(';').map(str::trim).filter(|e| !e.is_empty()) {
        let configured = entry
            .split_once('=')
            .ok_or_else(|| "not name=actions".to_string())
            .and_then(|(name, actions)| fail::cfg(name.trim(), actions.trim()));
        match configured {
            Ok(()) => {
                tracing::warn!("{ENV}: {entry}: test-only, the broker stops there on purpose");
                set += 1;
            }
            Err(e) => tracing::error!("{ENV}: {entry} is not a fail point ({e}); ignored"),
        }
    }
    set
}

/// Whether fail point `name` fires here; `check` is given its argument
/// (`None` for a bare `return`) and decides.
pub fn fires(name: &str, check: impl FnOnce(Option<String>) -> bool) -> bool {
    fail::fail_point!(name, check);
    false
}

/// Whether fail point `name` fires for `scope` (a log dir, say): a bare
/// `return` fires everywhere, `return(scope)` only there.
pub fn fires_in(name: &str, scope: &str) -> bool {
    fires(name, |arg| arg.is_none_or(|a| a.trim() == scope))
}

/// Kill this process with SIGKILL at once, at fail point `name`: no
/// destructor, no flush, no shutdown step runs, exactly as `kill -9`.
pub fn kill_process(name: &str) -> ! {
    tracing::warn!("{ENV}: SIGKILL at {name}");
    // SAFETY: kill(2) with this process's own pid; no memory is touched.
    unsafe {
        libc::kill(libc::getpid(), libc::SIGKILL);
    }
    // SIGKILL cannot be caught; should it not be delivered at once, no
    // further step may run.
    std::process::abort()
}

/// Fail point `name` set to fire for `scope` in this process until the
/// returned guard drops (library tests). Guards are taken one at a time, so
/// tests that arm fail points run one after another.
///
/// # Panics
/// `name` is not a fail point name the crate accepts.
pub fn arm(name: &str, scope: &str) -> Armed {
    let scenario = fail::FailScenario::setup();
    fail::cfg(name, &format!("return({scope})")).expect("a fail point name");
    Armed { _scenario: scenario }
}

/// What [`arm`] returns: while it lives its fail point is set; dropping it
/// clears every fail point.
#[derive(Debug)]
pub struct Armed {
    _scenario: fail::FailScenario<'static>,
}

/// Names of held fail points a step has reached (and waits at).
static REACHED: parking_lot::Mutex<Vec<String>> = parking_lot::Mutex::new(Vec::new());
static REACHED_CHANGED: parking_lot::Condvar = parking_lot::Condvar::new();

/// A step that stops while fail point `name` is armed for `scope` ([`arm`]):
/// it waits there until the guard drops (library tests watch what the rest
/// of the broker can do meanwhile).
pub fn hold_here(name: &str, scope: &str) {
    if !fires_in(name, scope) {
        return;
    }
    REACHED.lock().push(name.to_string());
    REACHED_CHANGED.notify_all();
    // Until the guard clears every fail point (checked every few ms: a
    // test-only path).
    while fail::list().iter().any(|(n, _)| n == name) {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    REACHED.lock().retain(|n| n != name);
}

impl Armed {
    /// Wait until a step holds at the armed point ([`hold_here`]); false
    /// when none did within `timeout`.
    pub fn wait_held(&self, name: &str, timeout: std::time::Duration) -> bool {
        let deadline = std::time::Instant::now() + timeout;
        let mut reached = REACHED.lock();
        while !reached.iter().any(|n| n == name) {
            if REACHED_CHANGED.wait_until(&mut reached, deadline).timed_out() {
                return reached.iter().any(|n| n == name);
            }
        }
        true
    }
}
