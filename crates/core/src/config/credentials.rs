//! The one credential store: API keys saved per model provider in `<home>/auth.json`
//! (mode 0600), written by `account/login/start` and any login command, read by the
//! config loader into [`ModelProviderInfo::stored_api_key`]. The provider's `env_key`
//! variable, when set, takes precedence over a stored key (see the model client).
//!
//! [`ModelProviderInfo::stored_api_key`]: interpreter_model_client::ModelProviderInfo

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// File name under the home.
pub const CREDENTIALS_FILE: &str = "auth.json";

#[derive(Debug, thiserror::Error)]
pub enum CredentialsError {
    #[error("failed to {action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} is not a valid credential file: {message}", path.display())]
    Invalid { path: PathBuf, message: String },
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct CredentialsFile {
    /// provider id → its credential.
    #[serde(default)]
    providers: BTreeMap<String, ProviderCredential>,
}

#[derive(Debug, Serialize, Deserialize)]
struct ProviderCredential {
    api_key: String,
}

fn path_of(home: &Path) -> PathBuf {
    home.join(CREDENTIALS_FILE)
}

fn read(home: &Path) -> Result<CredentialsFile, CredentialsError> {
    let path = path_of(home);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            return Ok(CredentialsFile::default());
        }
        Err(source) => {
            return Err(CredentialsError::Io {
                action: "read",
                path,
                source,
            });
        }
    };
    serde_json::from_str(&text).map_err(|err| CredentialsError::Invalid {
        path,
        message: err.to_string(),
    })
}

/// Replaces the file with one created 0600 from the start (never world-readable, not
/// even briefly), then renamed over the old one.
fn write(home: &Path, file: &CredentialsFile) -> Result<(), CredentialsError> {
    let path = path_of(home);
    let io = |action: &'static str, source: std::io::Error| CredentialsError::Io {
        action,
        path: path.clone(),
        source,
    };
    std::fs::create_dir_all(home).map_err(|e| io("create the directory of", e))?;
    let text = serde_json::to_string_pretty(file).map_err(|e| CredentialsError::Invalid {
        path: path.clone(),
        message: e.to_string(),
    })?;
    let temp = home.join(format!(".{CREDENTIALS_FILE}.{}.tmp", std::process::id()));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    let mut out = options.open(&temp).map_err(|e| io("write", e))?;
    out.write_all(text.as_bytes())
        .and_then(|()| out.sync_all())
        .map_err(|e| io("write", e))?;
    std::fs::rename(&temp, &path).map_err(|e| io("replace", e))?;
    Ok(())
}

/// The stored API key of `provider_id`, if any. An unreadable store is logged and treated
/// as empty: a broken file must not stop an agent whose key comes from the environment.
pub fn stored_api_key(home: &Path, provider_id: &str) -> Option<String> {
    match read(home) {
        Ok(mut file) => file.providers.remove(provider_id).map(|c| c.api_key),
        Err(err) => {
            tracing::warn!("ignoring stored credentials: {err}");
            None
        }
    }
}

/// Saves `api_key` for `provider_id`, replacing any earlier one.
pub fn store_api_key(
    home: &Path,
    provider_id: &str,
    api_key: &str,
) -> Result<(), CredentialsError> {
    let mut file = read(home)?;
    file.providers.insert(
        provider_id.to_string(),
        ProviderCredential {
            api_key: api_key.to_string(),
        },
    );
    write(home, &file)
}

/// Forgets the key of `provider_id`. Returns whether there was one.
pub fn remove_api_key(home: &Path, provider_id: &str) -> Result<bool, CredentialsError> {
    let mut file = read(home)?;
    let removed = file.providers.remove(provider_id).is_some();
    if removed {
        write(home, &file)?;
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_read_remove_round_trip_with_private_mode() {
        let home = tempfile::tempdir().expect("home");
        assert_eq!(stored_api_key(home.path(), "p"), None);
        store_api_key(home.path(), "p", "sk-1").expect("store");
        store_api_key(home.path(), "q", "sk-2").expect("store");
        assert_eq!(stored_api_key(home.path(), "p").as_deref(), Some("sk-1"));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(home.path().join(CREDENTIALS_FILE))
                .expect("meta")
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        assert!(remove_api_key(home.path(), "p").expect("remove"));
        assert!(!remove_api_key(home.path(), "p").expect("remove"));
        assert_eq!(stored_api_key(home.path(), "q").as_deref(), Some("sk-2"));
    }
}
