//! What the model asks the person behind the front end: questions (`request_user_input`)
//! and more sandbox permissions (`request_permissions`), and the answers that come back.
//!
//! Both travel the same way as approvals: an event carries the request with the tool
//! call's id, the front end answers with an [`crate::Op`] naming that id, and the engine
//! treats a missing, late or malformed answer as "no".

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// One question of a `request_user_input` call (Codex's shape).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserInputQuestion {
    /// The key of this question's answer.
    pub id: String,
    /// A short label shown above the question.
    pub header: String,
    pub question: String,
    /// Choices to pick from; `None` asks for free text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<Vec<UserInputOption>>,
    /// With options: the person may also type an answer of their own.
    #[serde(default)]
    pub is_other: bool,
    /// The answer should not be echoed on screen.
    #[serde(default)]
    pub is_secret: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserInputOption {
    pub label: String,
    pub description: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserInputRequestEvent {
    /// Answer with `Op::ResolveUserInput { id: call_id, .. }`.
    pub call_id: String,
    pub turn_id: String,
    pub questions: Vec<UserInputQuestion>,
    /// When nobody answers within this many seconds, the engine tells the model that
    /// nobody answered.
    pub timeout_sec: u64,
}

/// What the person answered: each question's answers by question id, or nothing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum UserInputResponse {
    Answered {
        answers: BTreeMap<String, Vec<String>>,
    },
    /// The person (or the front end for them) did not answer.
    Declined,
}

/// Sandbox permissions beyond the thread's policy: directories commands may also write,
/// and network access. The one shape of a request, a grant and what is in force.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PermissionGrant {
    /// Absolute, normalised directories that become writable roots.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub writable_roots: Vec<PathBuf>,
    /// Commands may use the network.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub network: bool,
}

impl PermissionGrant {
    pub fn is_empty(&self) -> bool {
        self.writable_roots.is_empty() && !self.network
    }

    /// Adds what `other` grants (without duplicates).
    pub fn extend(&mut self, other: &PermissionGrant) {
        for root in &other.writable_roots {
            if !self.writable_roots.contains(root) {
                self.writable_roots.push(root.clone());
            }
        }
        self.network |= other.network;
    }

    /// What both grant: a client can only grant what was asked for.
    pub fn intersect(&self, other: &PermissionGrant) -> PermissionGrant {
        PermissionGrant {
            writable_roots: self
                .writable_roots
                .iter()
                .filter(|root| other.writable_roots.contains(root))
                .cloned()
                .collect(),
            network: self.network && other.network,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PermissionsRequestEvent {
    /// Answer with `Op::ResolvePermissions { id: call_id, .. }`.
    pub call_id: String,
    pub turn_id: String,
    /// The thread's working directory.
    pub cwd: PathBuf,
    /// The model's reason, shown to the person.
    pub reason: Option<String>,
    /// What is asked for, after the engine refused what may never be granted.
    pub permissions: PermissionGrant,
    pub timeout_sec: u64,
}

/// How long a grant lasts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GrantScope {
    /// The rest of the turn that asked.
    #[default]
    Turn,
    /// The rest of the session (until the thread is unloaded).
    Session,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum PermissionsDecision {
    /// Only what was also asked for applies.
    Granted {
        permissions: PermissionGrant,
        scope: GrantScope,
    },
    Denied,
}
