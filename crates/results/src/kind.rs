//! The result kinds and the one place that maps a result.json to its type.
//!
//! Adding a kind is a new type plus one line in [`kinds!`]: the name, the variant and the type. The
//! loader, the schema generation (`schema/<kind>.schema.json`) and the
//! schema test then cover it.

use crate::mail::run::{MailRunResult, MailSetupResult};
use crate::mail::sweep::MailSweepResult;
use crate::storage::backup::BackupResult;
use crate::storage::init::StorageInitResult;
use crate::storage::recover::RecoverResult;
use crate::storage::run::StorageResult;
use crate::storage::suite::StorageSuiteResult;
use crate::storage::verify::StorageVerifyResult;
use crate::verdict::{RunHeader, SCHEMA_VERSION, Verdict};
use serde_json::Value;

macro_rules! kinds {
    ($($variant:ident $name:literal $ty:ty;)+) => {
        /// Every kind of result.json (`kind`).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Kind {
            $($variant,)+
        }

        /// A result of any kind, typed.
        #[derive(Debug, Clone)]
        pub enum AnyResult {
            $($variant(Box<$ty>),)+
        }

        impl Kind {
            pub const ALL: &'static [Kind] = &[$(Kind::$variant,)+];

            /// The `kind` string of result.json.
            pub fn name(self) -> &'static str {
                match self {
                    $(Kind::$variant => $name,)+
                }
            }

            pub fn parse(name: &str) -> Option<Kind> {
                match name {
                    $($name => Some(Kind::$variant),)+
                    _ => None,
                }
            }

            /// The JSON Schema of this kind's result.json, from its type.
            pub fn schema(self) -> Value {
                match self {
                    $(Kind::$variant => crate::kind::schema_of::<$ty>($name),)+
                }
            }
        }

        impl AnyResult {
            pub fn kind(&self) -> Kind {
                match self {
                    $(AnyResult::$variant(_) => Kind::$variant,)+
                }
            }

            fn typed(kind: Kind, v: Value) -> serde_json::Result<AnyResult> {
                Ok(match kind {
                    $(Kind::$variant => AnyResult::$variant(Box::new(serde_json::from_value(v)?)),)+
                })
            }

            /// The result as result.json holds it.
            pub fn to_value(&self) -> serde_json::Result<Value> {
                match self {
                    $(AnyResult::$variant(r) => serde_json::to_value(r),)+
                }
            }

            pub fn header(&self) -> &RunHeader {
                match self {
                    $(AnyResult::$variant(r) => &r.run,)+
                }
            }

            pub fn header_mut(&mut self) -> &mut RunHeader {
                match self {
                    $(AnyResult::$variant(r) => &mut r.run,)+
                }
            }

            pub fn verdict(&self) -> &Verdict {
                match self {
                    $(AnyResult::$variant(r) => &r.verdict,)+
                }
            }
        }

        /// A result serializes as its kind's type (result.json).
        impl serde::Serialize for AnyResult {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                match self {
                    $(AnyResult::$variant(r) => r.serialize(s),)+
                }
            }
        }
    };
}

kinds! {
    StorageRun "storage-run" StorageResult;
    StorageInit "storage-init" StorageInitResult;
    StorageVerify "storage-verify" StorageVerifyResult;
    StorageBackup "storage-backup" BackupResult;
    StorageRecover "storage-recover" RecoverResult;
    MailRun "mail-run" MailRunResult;
    MailSetup "mail-setup" MailSetupResult;
    MailSweep "mail-sweep" MailSweepResult;
    StorageSuite "storage-suite" StorageSuiteResult;
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a value is not a result this mailbench reads.
#[derive(Debug, Clone, PartialEq)]
pub enum LoadError {
    /// No `kind` at the top level or in a `run` header.
    NoKind,
    /// A kind this mailbench does not know.
    UnknownKind(String),
    /// Written by a newer mailbench.
    TooNew(u64),
    /// The kind is known but the content does not match its type.
    Invalid(Kind, String),
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoadError::NoKind => write!(f, "it has no \"kind\""),
            LoadError::UnknownKind(k) => write!(f, "its kind `{k}` is not one mailbench knows"),
            LoadError::TooNew(v) => write!(
                f,
                "it has result schema version {v}; this mailbench reads up to version \
                 {SCHEMA_VERSION}: use a newer mailbench"
            ),
            LoadError::Invalid(k, e) => write!(f, "it is not a readable {k} result: {e}"),
        }
    }
}

/// The `kind` of a result: top level (storage) or in the `run` header (mail).
pub fn kind_of(v: &Value) -> Option<&str> {
    v.get("kind")
        .and_then(Value::as_str)
        .or_else(|| v.get("run")?.get("kind")?.as_str())
}

/// The schema version: top level or in the `run` header.
pub fn schema_version_of(v: &Value) -> Option<u64> {
    (v.get("schema_version").and_then(Value::as_u64))
        .or_else(|| v.get("run")?.get("schema_version")?.as_u64())
}

impl AnyResult {
    /// Reads a result.json value: its kind, its version (newer than this
    /// mailbench reads is refused), the older shapes of version 1 brought to
    /// today's (see [`upgrade_v1`]), then its type.
    pub fn from_value(mut v: Value) -> Result<AnyResult, LoadError> {
        let name = kind_of(&v).ok_or(LoadError::NoKind)?.to_string();
        let kind = Kind::parse(&name).ok_or(LoadError::UnknownKind(name))?;
        if let Some(n) = schema_version_of(&v)
            && n > u64::from(SCHEMA_VERSION)
        {
            return Err(LoadError::TooNew(n));
        }
        upgrade_v1(kind, &mut v);
        AnyResult::typed(kind, v).map_err(|e| LoadError::Invalid(kind, e.to_string()))
    }
}

/// Schema version 1 files written before the typed model had a few shapes of
/// their own; they are brought to today's shape before typing:
/// - `storage-init` results had no header and no verdict (only `kind`,
///   `init`, `spec`, and over ranks `host` as a name and `rank`): they get an
///   empty header (host name kept) and a Pass verdict, which is what their
///   exit code said.
/// - `mail-run` results named the whole day's weighted p95 response time
///   `score` (and a merge's hosts their `score_ms`): renamed `response_time`
///   and `response_time_ms`, what they are (the sweep's supported users are
///   the score).
pub fn upgrade_v1(kind: Kind, v: &mut Value) {
    let Some(o) = v.as_object_mut() else {
        return;
    };
    if kind == Kind::MailRun {
        rename_key(o, "score", "response_time");
        let hosts = (o.get_mut("merged"))
            .and_then(|m| m.get_mut("hosts"))
            .and_then(Value::as_array_mut);
        for h in hosts.into_iter().flatten().filter_map(Value::as_object_mut) {
            rename_key(h, "score_ms", "response_time_ms");
        }
    }
    if kind == Kind::StorageInit && !o.contains_key("schema_version") {
        let hostname = o.get("host").and_then(Value::as_str).unwrap_or_default();
        let mut header = RunHeader::empty(kind.name());
        header.host.hostname = hostname.to_string();
        if let Ok(Value::Object(h)) = serde_json::to_value(&header) {
            for (k, x) in h {
                o.insert(k, x);
            }
        }
        if !o.contains_key("verdict")
            && let Ok(pass) = serde_json::to_value(Verdict::from_reasons(Vec::new()))
        {
            o.insert("verdict".into(), pass);
        }
    }
}

/// Moves `from` to `to` in `o` unless `to` is already there.
fn rename_key(o: &mut serde_json::Map<String, Value>, from: &str, to: &str) {
    if !o.contains_key(to)
        && let Some(x) = o.remove(from)
    {
        o.insert(to.to_string(), x);
    }
}

/// The schema of one kind: draft 2020-12, titled by the kind, every object
/// strict (see [`strict`]).
pub(crate) fn schema_of<T: schemars::JsonSchema>(name: &str) -> Value {
    let schema = schemars::generate::SchemaSettings::draft2020_12()
        .into_generator()
        .into_root_schema_for::<T>();
    let mut v = Value::from(schema);
    strict(&mut v);
    if let Some(o) = v.as_object_mut() {
        o.insert("title".into(), format!("mailbench {name} result").into());
        o.insert(
            "$comment".into(),
            "Generated from the result types (crates/results): \
             MAILBENCH_WRITE_SCHEMAS=1 cargo test -p mailbench-results --test schema"
                .into(),
        );
    }
    v
}

/// Objects with named properties allow no other keys (the types name every
/// key a result has); maps keep their `additionalProperties` schema.
fn strict(v: &mut Value) {
    match v {
        Value::Object(o) => {
            if o.contains_key("properties") && !o.contains_key("additionalProperties") {
                o.insert("additionalProperties".into(), Value::Bool(false));
            }
            for x in o.values_mut() {
                strict(x);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(strict),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::disclosure::Disclosure;
    use crate::disclosure::tests::{detected, disclosure_toml};

    /// A disclosure as it would be embedded in a result validates against the
    /// strict schema generated from the types.
    #[test]
    fn a_detected_disclosure_validates_against_its_strict_schema() {
        let schema = schema_of::<Disclosure>("disclosure");
        let runner = proptest::test_runner::Config::with_cases(16);
        let mut r = proptest::test_runner::TestRunner::new(runner);
        let mut schemas = boon::Schemas::new();
        let mut compiler = boon::Compiler::new();
        compiler.add_resource("mem://disclosure", schema).unwrap();
        let id = compiler.compile("mem://disclosure", &mut schemas).unwrap();
        r.run(&(disclosure_toml(), detected()), |(declared, detected)| {
            let mut v = serde_json::to_value(Disclosure { declared, detected }).unwrap();
            if let Err(e) = schemas.validate(&v, id) {
                panic!("{e:#}\n{v:#}");
            }
            // A key the types do not name, or a guessed fact, is refused.
            v["detected"]["kernel"] = serde_json::json!({"guess": "6.1"});
            assert!(schemas.validate(&v, id).is_err());
            v["detected"]["kernel"] = serde_json::json!({"value": "6.1"});
            v["detected"]["disk"] = serde_json::json!("sda");
            assert!(schemas.validate(&v, id).is_err());
            Ok(())
        })
        .unwrap();
    }
}
