//! The users' credentials: one shared password or one per user, from a
//! users file, a password file or `MAILBENCH_PASSWORD` (never flags). Every
//! password is registered for redaction (`mailbench_base::secrets`) as it is
//! read, and one that cannot be sent as it is (CR, LF or NUL would end or
//! split the command that carries it) is refused.

use mailbench_base::limits::{MAX_USERS, MAX_USERS_FILE_BYTES};
use mailbench_base::{Error, Result};
use std::collections::HashMap;
use std::path::Path;

/// User passwords: one shared password or one per user.
#[derive(Clone, Default)]
pub struct Credentials {
    shared: Option<String>,
    per_user: HashMap<String, String>,
    /// The users file's addresses in file order.
    order: Vec<String>,
    /// Their login names (the address when the file gives none).
    logins: Vec<String>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Credentials({} users, shared: {})",
            self.per_user.len(),
            self.shared.is_some()
        )
    }
}

/// Environment variable holding the shared password of remote targets.
pub const PASSWORD_ENV: &str = "MAILBENCH_PASSWORD";

impl Credentials {
    pub fn shared(pw: String) -> Credentials {
        mailbench_base::secrets::register(&pw);
        Credentials {
            shared: Some(pw),
            ..Default::default()
        }
    }

    /// From a users file (`address password` per line; `#` comments), then a
    /// password file (one line), then `MAILBENCH_PASSWORD`. Every password is
    /// registered for redaction before anything else happens with it.
    pub fn load(users_file: Option<&Path>, password_file: Option<&Path>) -> Result<Credentials> {
        let mut c = Credentials::default();
        if let Some(p) = users_file {
            let users = read_users_file(p)?;
            mailbench_base::secrets::register_all(users.iter().map(|u| u.password.as_str()));
            for u in users {
                c.order.push(u.address.clone());
                c.logins.push(u.login.unwrap_or_else(|| u.address.clone()));
                c.per_user.insert(u.address, u.password);
            }
        }
        if let Some(p) = password_file {
            let text = mailbench_base::limits::read_text_capped(
                p,
                mailbench_base::limits::MAX_INPUT_FILE_BYTES,
                "password file",
            )?;
            let pw = text.lines().next().unwrap_or("").to_string();
            mailbench_base::secrets::register(&pw);
            sendable(&pw, &format!("password file {}", p.display()))?;
            c.shared = Some(pw);
        } else if let Ok(pw) = std::env::var(PASSWORD_ENV) {
            mailbench_base::secrets::register(&pw);
            sendable(&pw, PASSWORD_ENV)?;
            c.shared = Some(pw);
        }
        Ok(c)
    }

    pub fn password(&self, user: &str) -> Option<&str> {
        self.per_user
            .get(user)
            .map(|s| s.as_str())
            .or(self.shared.as_deref())
    }

    pub fn is_empty(&self) -> bool {
        self.shared.is_none() && self.per_user.is_empty()
    }

    /// Users listed in the users file, in file order.
    pub fn listed_users(&self) -> &[String] {
        &self.order
    }

    /// Their login names, in the same order.
    pub fn listed_logins(&self) -> &[String] {
        &self.logins
    }
}

/// One line of a users file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub address: String,
    /// The login name when the line gives one (`address login password`).
    pub login: Option<String>,
    pub password: String,
}

/// The `address password` or `address login password` lines of a users
/// file, in order (`#` comments and blank lines skipped; an address listed
/// twice is an error; the password is the rest of the line, so one holding
/// spaces needs the three-column form). The address must have its @domain
/// (it is the From, To and Cc of the user's mail). The file is read with a
/// cap ([`MAX_USERS_FILE_BYTES`]) and lists at most [`MAX_USERS`].
pub fn read_users_file(p: &Path) -> Result<Vec<Listed>> {
    let text = mailbench_base::limits::read_text_capped(p, MAX_USERS_FILE_BYTES, "users file")?;
    let mut out: Vec<Listed> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (i, line) in text.lines().enumerate() {
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        let at = || format!("users file {} line {}", p.display(), i + 1);
        let Some((u, rest)) = l.split_once(char::is_whitespace) else {
            return Err(Error::usage(format!(
                "{}: write `address password` or `address login password`",
                at()
            )));
        };
        let rest = rest.trim();
        let (login, pw) = match rest.split_once(char::is_whitespace) {
            Some((login, pw)) => (Some(login.to_string()), pw.trim()),
            None => (None, rest),
        };
        if !u
            .split_once('@')
            .is_some_and(|(l, d)| !l.is_empty() && !d.is_empty())
        {
            return Err(Error::usage(format!(
                "{}: `{u}` is not an address with its @domain; write `address password`, or \
                 `address login password` when the user logs in with another name",
                at()
            )));
        }
        mailbench_base::secrets::register(pw);
        sendable(pw, &at())?;
        if !seen.insert(u.to_string()) {
            return Err(Error::usage(format!("{}: {u} is listed twice", at())));
        }
        if out.len() == MAX_USERS {
            return Err(Error::usage(format!(
                "users file {} lists more than {MAX_USERS} users: split it over several load generators",
                p.display()
            )));
        }
        out.push(Listed {
            address: u.to_string(),
            login,
            password: pw.to_string(),
        });
    }
    Ok(out)
}

/// Refuses a password that cannot be sent as it is: CR or LF would end the
/// IMAP or SMTP command that carries it (and start another), NUL would split
/// a SASL PLAIN token. `origin` names where it came from; the password itself
/// is never shown.
pub fn sendable(pw: &str, origin: &str) -> Result<()> {
    match pw.chars().find(|c| matches!(c, '\r' | '\n' | '\0')) {
        Some(c) => Err(Error::usage(format!(
            "{origin}: the password holds a {} character, which would end the command \
             that sends it; mailbench refuses it",
            match c {
                '\r' => "carriage return (CR)",
                '\n' => "line feed (LF)",
                _ => "NUL",
            }
        ))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn users_files_give_a_login_name_apart_from_the_address() {
        let t = tempfile::tempdir().unwrap();
        let f = t.path().join("users");
        std::fs::write(
            &f,
            "# users\nload1@example.org pw1\nload2@example.org load2 pass word 2\n",
        )
        .unwrap();
        let u = read_users_file(&f).unwrap();
        assert_eq!(
            (u[0].login.as_deref(), u[0].password.as_str()),
            (None, "pw1")
        );
        assert_eq!(
            (u[1].login.as_deref(), u[1].password.as_str()),
            (Some("load2"), "pass word 2")
        );
        let c = Credentials::load(Some(&f), None).unwrap();
        assert_eq!(c.listed_logins(), ["load1@example.org", "load2"]);
        assert_eq!(c.password("load2@example.org"), Some("pass word 2"));
        std::fs::write(&f, "load3 pw3\n").unwrap();
        let e = read_users_file(&f).unwrap_err();
        assert_eq!(e.exit_status().code(), 2);
        assert!(
            e.to_string().contains("line 1") && e.to_string().contains("@domain"),
            "{e}"
        );
    }

    #[test]
    fn passwords_that_would_end_their_command_are_refused() {
        for pw in ["a\r\nX1 DELETE INBOX", "a\nb", "a\rb", "a\0b"] {
            let e = sendable(pw, "MAILBENCH_PASSWORD").unwrap_err();
            assert_eq!(e.exit_status().code(), 2);
            assert!(!e.to_string().contains(pw), "{e}");
        }
        sendable("s3cr\"et;,.= x", "f").unwrap();
        let t = tempfile::tempdir().unwrap();
        let f = t.path().join("pw");
        std::fs::write(&f, "a-test-password-file\n").unwrap();
        assert_eq!(
            Credentials::load(None, Some(&f)).unwrap().password("u"),
            Some("a-test-password-file")
        );
        for bad in ["/dev/zero", "/dev/urandom"] {
            let e = Credentials::load(None, Some(Path::new(bad))).unwrap_err();
            assert_eq!(e.exit_status().code(), 2, "{bad}: {e}");
            let e = read_users_file(Path::new(bad)).unwrap_err();
            assert_eq!(e.exit_status().code(), 2, "{bad}: {e}");
        }
    }
}
