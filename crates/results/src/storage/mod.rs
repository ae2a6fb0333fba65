//! Storage results: `storage run` (and its `report merge`), `init`, `verify`,
//! `backup`, `recover`, `suite` (the stages of the test program), with the resolved test they echo and the verdict rules
//! of a run.

pub mod backup;
pub mod init;
pub mod judge;
pub mod merge;
pub mod recover;
pub mod run;
pub mod spec;
pub mod stats;
pub mod suite;
pub mod verify;
pub mod wording;
