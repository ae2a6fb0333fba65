//! A rank (a host of a test over several) that failed: in the `multihost`
//! section of a result gathered from ranks, and among a sweep's generators.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A rank that failed, in words that name it (the side channel's message).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RankFailure {
    pub rank: usize,
    pub host: String,
    pub reason: String,
    /// RFC 3339 UTC, when rank 0 learnt of it.
    pub at: String,
}
