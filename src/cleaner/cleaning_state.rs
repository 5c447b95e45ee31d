//! `LogCleaningState`: where a partition is in the cleaning protocol (Kafka's
//! `LogCleaningState`). The transitions are the manager's and are drawn in
//! its module doc; a partition with no state is idle.
//!
//! Invariant: an illegal transition is a [`CleaningStateError`] naming the
//! partition, the action and the state it was in, never a silent no-op.

/// Where a partition is in the cleaning protocol (no entry: idle).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogCleaningState {
    /// A cleaner thread is cleaning it.
    InProgress,
    /// Asked to stop; the thread has not noticed yet.
    Aborted,
    /// Not to be cleaned until resumed this many times.
    Paused(u32),
}

impl std::fmt::Display for LogCleaningState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::InProgress => write!(f, "in progress"),
            Self::Aborted => write!(f, "aborted"),
            Self::Paused(n) => write!(f, "paused({n})"),
        }
    }
}

/// An illegal [`LogCleaningState`] transition.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{partition}: cannot {action} a partition whose cleaning state is {}", state.map_or("idle".to_string(), |s| s.to_string()))]
pub struct CleaningStateError {
    pub partition: String,
    pub action: &'static str,
    pub state: Option<LogCleaningState>,
}
