//! API keys stored by `interpreter login`, next to the config in the agent home.
//!
//! The environment variable named by `env_key` always wins; a stored key is only used
//! when that variable is unset or blank (see `client::api_key`, the one place that picks
//! a credential). The file is `$INTERPRETER_HOME/credentials.json`, mode 0600, written
//! atomically (temporary file, then rename).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// File name inside the agent home.
pub const CREDENTIALS_FILE: &str = "credentials.json";

/// A key that never reaches a log or a `Debug` print.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct SecretKey(String);

impl SecretKey {
    pub fn new(key: impl Into<String>) -> Self {
        Self(key.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretKey(<redacted>)")
    }
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CredentialError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not a credentials file: {source}")]
    Parse {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the API key is empty")]
    EmptyKey,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct CredentialFile {
    /// Provider id → API key.
    #[serde(default)]
    api_keys: BTreeMap<String, String>,
}

fn path(home: &Path) -> PathBuf {
    home.join(CREDENTIALS_FILE)
}

fn read(home: &Path) -> Result<CredentialFile, CredentialError> {
    let path = path(home);
    match std::fs::read_to_string(&path) {
        Ok(text) => serde_json::from_str(&text).map_err(|source| CredentialError::Parse {
            path: path.clone(),
            source,
        }),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(CredentialFile::default()),
        Err(source) => Err(CredentialError::Read { path, source }),
    }
}

fn write(home: &Path, file: &CredentialFile) -> Result<PathBuf, CredentialError> {
    let target = path(home);
    let write_error = |source| CredentialError::Write {
        path: target.clone(),
        source,
    };
    interpreter_private_fs::create_dir_all(home).map_err(write_error)?;
    let text = serde_json::to_vec_pretty(file).map_err(|err| write_error(err.into()))?;
    // Created private: the key is never readable by others, not even briefly.
    interpreter_private_fs::write_atomically(&target, &text).map_err(write_error)?;
    Ok(target)
}

/// The key stored for `provider_id`, if any. A missing file means none; an unreadable
/// one is an error, which config loading turns into a warning for the user (the request
/// then fails naming the variable to set).
pub fn stored_api_key(
    home: &Path,
    provider_id: &str,
) -> Result<Option<SecretKey>, CredentialError> {
    Ok(read(home)?
        .api_keys
        .get(provider_id)
        .map(|key| key.trim())
        .filter(|key| !key.is_empty())
        .map(SecretKey::new))
}

/// Stores `key` for `provider_id` (replacing an earlier one); returns the file written.
pub fn store_api_key(
    home: &Path,
    provider_id: &str,
    key: &str,
) -> Result<PathBuf, CredentialError> {
    let key = key.trim();
    if key.is_empty() {
        return Err(CredentialError::EmptyKey);
    }
    let mut file = read(home)?;
    file.api_keys
        .insert(provider_id.to_string(), key.to_string());
    write(home, &file)
}

/// Removes the key stored for `provider_id`; returns whether there was one.
pub fn remove_api_key(home: &Path, provider_id: &str) -> Result<bool, CredentialError> {
    let mut file = read(home)?;
    if file.api_keys.remove(provider_id).is_none() {
        return Ok(false);
    }
    write(home, &file)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_read_remove_with_private_mode() -> Result<(), Box<dyn std::error::Error>> {
        let home = std::env::temp_dir().join(format!("creds-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&home);
        assert_eq!(stored_api_key(&home, "zai")?, None);
        let written = store_api_key(&home, "zai", "  sk-123\n")?;
        assert_eq!(
            stored_api_key(&home, "zai")?.map(|k| k.expose().to_string()),
            Some("sk-123".to_string())
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            assert_eq!(
                std::fs::metadata(&written)?.permissions().mode() & 0o777,
                0o600
            );
        }
        assert!(format!("{:?}", stored_api_key(&home, "zai")?).contains("redacted"));
        assert!(remove_api_key(&home, "zai")?);
        assert!(!remove_api_key(&home, "zai")?);
        assert_eq!(stored_api_key(&home, "zai")?, None);
        std::fs::write(home.join(CREDENTIALS_FILE), "not json")?;
        assert!(matches!(
            stored_api_key(&home, "zai"),
            Err(CredentialError::Parse { .. })
        ));
        assert!(matches!(
            store_api_key(&home, "x", " "),
            Err(CredentialError::EmptyKey)
        ));
        std::fs::remove_dir_all(&home)?;
        Ok(())
    }
}
