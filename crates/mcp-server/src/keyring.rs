//! Keyring files: the request-state key ([`crate::mrtr`]) and the fleet replica key
//! ([`crate::replica_auth`]) are both `<id> <hex key>` lines in a file only their owner
//! may read, created with one fresh key when missing. The first line is the key that
//! seals or signs; every line opens or verifies, which is what lets a fleet rotate a key
//! in stages without a moment where two replicas disagree.

use std::path::Path;

/// The shortest key accepted: 32 bytes (64 hex digits), an HMAC-SHA256 key's full
/// strength.
pub(crate) const MIN_KEY_BYTES: usize = 32;

/// The id of the key a freshly created file holds.
const FIRST_KEY_ID: &str = "k1";

/// The keys in `path`, in file order (created with one fresh key when missing; refused
/// when another user owns it or others may read it, or it holds no key).
pub(crate) fn load(path: &Path) -> Result<Vec<(String, Vec<u8>)>, String> {
    let text = interpreter_transport::listener::load_or_create_token(path, |bytes| {
        format!(
            "{FIRST_KEY_ID} {}",
            interpreter_transport::listener::hex(bytes)
        )
    })
    .map_err(|e| e.to_string())?;
    let keys = parse(&text)?;
    if keys.is_empty() {
        return Err("holds no key".to_string());
    }
    Ok(keys)
}

/// `<id> <hex>` lines (blank lines and `#` comments skipped), in file order.
fn parse(text: &str) -> Result<Vec<(String, Vec<u8>)>, String> {
    let mut keys: Vec<(String, Vec<u8>)> = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let number = index + 1;
        let (id, key) = line
            .split_once(char::is_whitespace)
            .ok_or_else(|| format!("line {number} is not `<id> <hex key>`"))?;
        if !valid_key_id(id) {
            return Err(format!(
                "line {number}: a key id is 1 to 64 letters, digits, `-`, `_` or `.`"
            ));
        }
        if keys.iter().any(|(seen, _)| seen == id) {
            return Err(format!("line {number}: the key id `{id}` is used twice"));
        }
        let key = key.trim();
        if key.len() % 2 != 0 || !key.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!("line {number}: the key is not hex digits"));
        }
        let bytes = (0..key.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&key[i..i + 2], 16))
            .collect::<Result<Vec<u8>, _>>()
            .map_err(|e| format!("line {number}: {e}"))?;
        if bytes.len() < MIN_KEY_BYTES {
            return Err(format!(
                "line {number}: a key needs at least {MIN_KEY_BYTES} bytes ({} hex digits)",
                MIN_KEY_BYTES * 2
            ));
        }
        keys.push((id.to_string(), bytes));
    }
    Ok(keys)
}

/// Whether `id` may name a key: short, and free of the separators the signature header
/// uses.
pub(crate) fn valid_key_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyrings_keep_file_order_and_refuse_weak_lines() {
        let a = "a".repeat(64);
        let b = "b".repeat(64);
        let keys = parse(&format!("# rotating\nnew {b}\n\nold {a}\n")).unwrap_or_default();
        let ids: Vec<&str> = keys.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(ids, ["new", "old"]);
        for bad in [
            "k1 abcd".to_string(),
            format!("k1 {}", "zz".repeat(32)),
            a.clone(),
            format!("k;1 {a}"),
            format!("k1 {a}\nk1 {b}"),
        ] {
            assert!(parse(&bad).is_err(), "{bad}");
        }
    }
}
