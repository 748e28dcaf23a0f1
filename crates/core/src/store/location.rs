//! Which store a configuration names: the `thread_store` setting.

use std::path::PathBuf;

/// The value of `thread_store` that means the local home (also the default).
pub const LOCAL_STORE: &str = "local";

/// Where threads are kept.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum StoreLocation {
    /// Rollout files and the SQLite index under this home.
    Local { home: PathBuf },
    /// A PostgreSQL database. `url` never holds a password: that comes from the
    /// environment (`PGPASSWORD`) when the store connects, so the config file and the
    /// process's command line hold no secret.
    Postgres { url: String },
}

impl StoreLocation {
    /// Reads a `thread_store` value: `local` (or nothing) for the home, a
    /// `postgres://` / `postgresql://` URL for PostgreSQL. A URL carrying a password is
    /// refused rather than used, so the secret is moved out of the file, not just
    /// tolerated there.
    pub fn parse(value: Option<&str>, home: PathBuf) -> Result<Self, String> {
        let Some(value) = value
            .map(str::trim)
            .filter(|v| !v.is_empty() && *v != LOCAL_STORE)
        else {
            return Ok(Self::Local { home });
        };
        let Some(rest) = value
            .strip_prefix("postgres://")
            .or_else(|| value.strip_prefix("postgresql://"))
        else {
            return Err(format!(
                "`{value}` is not a thread store: use `{LOCAL_STORE}` or a postgres:// URL"
            ));
        };
        let authority = rest.split(['/', '?']).next().unwrap_or_default();
        if let Some((user_info, _)) = authority.rsplit_once('@')
            && user_info.contains(':')
        {
            return Err(
                "the thread_store URL must not contain a password: set PGPASSWORD in the \
                 environment instead"
                    .to_string(),
            );
        }
        if authority.is_empty() {
            return Err(format!("`{value}` names no database host"));
        }
        Ok(Self::Postgres {
            url: value.to_string(),
        })
    }

    pub fn is_local(&self) -> bool {
        matches!(self, Self::Local { .. })
    }
}

impl std::fmt::Display for StoreLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Local { home } => write!(f, "local ({})", home.display()),
            Self::Postgres { url } => {
                // The host, port and database; user names and options are left out.
                let rest = url.split_once("://").map_or(url.as_str(), |(_, rest)| rest);
                let rest = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
                let rest = rest.split('?').next().unwrap_or(rest);
                write!(f, "postgres ({rest})")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_or_local_is_the_home() {
        let home = PathBuf::from("/h");
        for value in [None, Some(""), Some("local"), Some(" local ")] {
            assert_eq!(
                StoreLocation::parse(value, home.clone()).unwrap(),
                StoreLocation::Local { home: home.clone() }
            );
        }
    }

    #[test]
    fn a_postgres_url_is_kept_and_shown_without_its_user() {
        let location = StoreLocation::parse(
            Some("postgres://agent@db:5432/threads?sslmode=require"),
            "/h".into(),
        )
        .unwrap();
        assert!(!location.is_local());
        assert_eq!(location.to_string(), "postgres (db:5432/threads)");
    }

    #[test]
    fn a_password_in_the_url_is_refused() {
        let err = StoreLocation::parse(Some("postgres://agent:hunter2@db/threads"), "/h".into())
            .unwrap_err();
        assert!(err.contains("PGPASSWORD"), "{err}");
        assert!(!err.contains("hunter2"), "{err}");
    }

    #[test]
    fn other_schemes_are_refused() {
        assert!(StoreLocation::parse(Some("mysql://db/x"), "/h".into()).is_err());
        assert!(StoreLocation::parse(Some("postgres:///x"), "/h".into()).is_err());
    }
}
