//! Model-visible tool names: `mcp__<server>__<tool>`, limited to `[A-Za-z0-9_]` and
//! [`MAX_TOOL_NAME_LEN`] bytes (what function-calling APIs accept), unique across all
//! servers. Each tool keeps its raw server and tool names for the actual call.

use std::collections::HashSet;

/// Longest function name the model APIs accept.
pub const MAX_TOOL_NAME_LEN: usize = 64;

const PREFIX: &str = "mcp__";
const DELIMITER: &str = "__";
/// `_` + 12 hex digits.
const SUFFIX_LEN: usize = 13;

/// Every character outside `[A-Za-z0-9_]` becomes `_` (so does `-`, which some providers
/// reject); an empty part becomes `_`.
pub fn sanitize_name_part(part: &str) -> String {
    if part.is_empty() {
        return "_".to_string();
    }
    part.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Qualified names for `(server, tool)` pairs, in the same order. A name that is too long
/// or already taken (two raw names sanitizing alike) is shortened and given a suffix
/// derived from its raw identity, so the result is stable across runs.
pub fn qualify_tool_names(tools: &[(String, String)]) -> Vec<String> {
    let identity = |i: usize| format!("{}\0{}", tools[i].0, tools[i].1);
    let mut order: Vec<usize> = (0..tools.len()).collect();
    // Deterministic winner: the lexically first raw identity keeps the plain name.
    order.sort_by_key(|i| identity(*i));

    let mut used = HashSet::new();
    let mut names = vec![String::new(); tools.len()];
    for index in order {
        let (server, tool) = &tools[index];
        let namespace = format!("{PREFIX}{}", sanitize_name_part(server));
        let tool = sanitize_name_part(tool);
        let plain = format!("{namespace}{DELIMITER}{tool}");
        let mut chosen = plain;
        let mut attempt = 0u32;
        while chosen.len() > MAX_TOOL_NAME_LEN || used.contains(&chosen) {
            let mut key = identity(index);
            if attempt > 0 {
                key.push('\0');
                key.push_str(&attempt.to_string());
            }
            chosen = shortened(&namespace, &tool, &hash_suffix(&key));
            attempt += 1;
        }
        used.insert(chosen.clone());
        names[index] = chosen;
    }
    names
}

/// `namespace__tool` cut to fit [`MAX_TOOL_NAME_LEN`] with `suffix` appended to the tool
/// part (or, when the namespace alone is too long, replacing it).
fn shortened(namespace: &str, tool: &str, suffix: &str) -> String {
    let room = MAX_TOOL_NAME_LEN.saturating_sub(namespace.len() + DELIMITER.len());
    // Both parts are ASCII after sanitizing, so byte slicing is on char boundaries.
    if room >= SUFFIX_LEN {
        let keep = (room - SUFFIX_LEN).min(tool.len());
        format!("{namespace}{DELIMITER}{}{suffix}", &tool[..keep])
    } else {
        let keep = MAX_TOOL_NAME_LEN - SUFFIX_LEN - DELIMITER.len();
        format!(
            "{}{DELIMITER}{suffix}",
            &namespace[..keep.min(namespace.len())]
        )
    }
}

/// `_` + 12 hex digits of a 64-bit FNV-1a hash of `key`.
fn hash_suffix(key: &str) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in key.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("_{:012x}", hash >> 16)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(s, t)| (s.to_string(), t.to_string()))
            .collect()
    }

    #[test]
    fn sanitizes_both_parts() {
        assert_eq!(
            qualify_tool_names(&pairs(&[
                ("server.one", "tool.two-three"),
                ("music-studio", "get-strudel-guide"),
                ("", "x y")
            ])),
            vec![
                "mcp__server_one__tool_two_three",
                "mcp__music_studio__get_strudel_guide",
                "mcp_____x_y"
            ]
        );
    }

    #[test]
    fn colliding_names_get_a_stable_suffix() {
        let tools = pairs(&[("s", "a-b"), ("s", "a.b"), ("s", "a_b")]);
        let names = qualify_tool_names(&tools);
        // `a-b` sorts first among the raw identities and keeps the plain name.
        assert_eq!(names[0], "mcp__s__a_b");
        assert_ne!(names[1], names[2]);
        for name in &names[1..] {
            assert!(name.starts_with("mcp__s__a_b_"), "{name}");
            assert_eq!(name.len(), "mcp__s__a_b".len() + SUFFIX_LEN);
        }
        assert_eq!(qualify_tool_names(&tools), names, "names are deterministic");
    }

    #[test]
    fn long_names_fit_the_limit_and_stay_unique() {
        let long_tool = "t".repeat(80);
        let long_server = "s".repeat(70);
        let tools = pairs(&[
            ("srv", &long_tool),
            ("srv", &format!("{long_tool}x")),
            (&long_server, "tool"),
        ]);
        let names = qualify_tool_names(&tools);
        for name in &names {
            assert!(name.len() <= MAX_TOOL_NAME_LEN, "{name}");
            assert!(
                name.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            );
        }
        assert_ne!(names[0], names[1]);
        assert!(names[0].starts_with("mcp__srv__ttt"));
        assert!(names[2].starts_with("mcp__sss"));
    }

    #[test]
    fn a_name_equal_to_another_suffixed_name_is_resolved() {
        let first = qualify_tool_names(&pairs(&[("s", "a-b"), ("s", "a.b")]));
        let taken = first[1].trim_start_matches("mcp__s__").to_string();
        let names = qualify_tool_names(&pairs(&[("s", "a-b"), ("s", "a.b"), ("s", &taken)]));
        let unique: HashSet<&String> = names.iter().collect();
        assert_eq!(unique.len(), 3);
    }
}
