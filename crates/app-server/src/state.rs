//! The state every method shares, below the method families: the server's config
//! inputs and thread manager, the threads this server has loaded and who follows them,
//! the thread index, and what a handler returns ([`Reply`]). Method families
//! (`threads`, `turns`, `accounts`, …) build on this; the processor dispatches to them.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use interpreter_core::config::{Config, ConfigInputs, load_config};
use interpreter_core::store::{self, ThreadRecord, ThreadStore};
use interpreter_core::{Thread, ThreadManager};
use interpreter_protocol::{SessionSource, ThreadId};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::connection::Connection;
use crate::error::AppServerError;
use crate::mapping;
use crate::protocol::notification_names;
use crate::protocol::v2::{self, ThreadStatus};

/// A thread this server has loaded, with who follows it.
pub(crate) struct LoadedThread {
    pub thread: Arc<Thread>,
    pub ephemeral: bool,
    pub forked_from: Option<ThreadId>,
    subscribers: std::sync::Mutex<Vec<Arc<Connection>>>,
    pub active: std::sync::Mutex<Option<ActiveTurn>>,
    /// The engine's requests out to a client, withdrawn when the engine's clock expires
    /// them (the only clock on them).
    pub open_requests: interpreter_core::open_requests::OpenRequests,
}

/// The turn a loaded thread is running.
#[derive(Clone)]
pub(crate) struct ActiveTurn {
    pub turn_id: String,
    /// Who started it: approval requests go there first.
    pub owner: Arc<Connection>,
}

impl LoadedThread {
    fn new(thread: Arc<Thread>, ephemeral: bool, forked_from: Option<ThreadId>) -> Self {
        Self {
            thread,
            ephemeral,
            forked_from,
            subscribers: std::sync::Mutex::default(),
            active: std::sync::Mutex::default(),
            open_requests: interpreter_core::open_requests::OpenRequests::default(),
        }
    }

    pub(crate) fn id(&self) -> ThreadId {
        self.thread.id()
    }

    pub(crate) fn subscribe(&self, connection: &Arc<Connection>) {
        if let Ok(mut subs) = self.subscribers.lock() {
            subs.retain(|c| !c.is_closed());
            if !subs.iter().any(|c| c.id == connection.id) {
                subs.push(connection.clone());
            }
        }
    }

    /// Stop `connection` following the thread; whether it did.
    pub(crate) fn unsubscribe(&self, connection: &Arc<Connection>) -> bool {
        self.subscribers.lock().is_ok_and(|mut subs| {
            let before = subs.len();
            subs.retain(|c| c.id != connection.id && !c.is_closed());
            subs.len() < before
        })
    }

    pub(crate) fn subscribers(&self) -> Vec<Arc<Connection>> {
        self.subscribers
            .lock()
            .map(|mut subs| {
                subs.retain(|c| !c.is_closed());
                subs.clone()
            })
            .unwrap_or_default()
    }

    /// Send a notification to every connection following the thread.
    pub(crate) fn broadcast<T: Serialize>(&self, method: &str, params: &T) {
        for connection in self.subscribers() {
            connection.notify(method, params);
        }
    }

    /// The turn `turn_id` is over: the thread is idle to clients (unless another turn
    /// already took its place).
    pub(crate) fn end_turn(&self, turn_id: &str) {
        if let Ok(mut active) = self.active.lock()
            && active.as_ref().is_some_and(|a| a.turn_id == turn_id)
        {
            *active = None;
        }
    }

    pub(crate) fn active_turn(&self) -> Option<ActiveTurn> {
        self.active.lock().ok().and_then(|a| a.clone())
    }

    pub(crate) fn status(&self) -> ThreadStatus {
        if self.active_turn().is_some() {
            ThreadStatus::Active {
                active_flags: Vec::new(),
            }
        } else {
            ThreadStatus::Idle
        }
    }
}

/// State shared by every connection of one server.
pub(crate) struct ServerState {
    pub inputs: ConfigInputs,
    pub session_source: SessionSource,
    pub thread_manager: Arc<ThreadManager>,
    loaded: std::sync::Mutex<HashMap<ThreadId, Arc<LoadedThread>>>,
    /// The thread store the server's config names, opened on first use.
    store: tokio::sync::OnceCell<Arc<dyn ThreadStore>>,
    pub next_connection_id: AtomicU64,
    /// Fires when the server stops: running turns are interrupted.
    pub shutdown: CancellationToken,
}
/// Work that must happen after the response is on its way (e.g. `thread/started` after
/// the `thread/start` response, a turn's events after the `turn/start` response).
pub(crate) type AfterResponse = Vec<Box<dyn FnOnce() + Send>>;

/// What a request handler returns.
pub(crate) struct Reply {
    pub result: Value,
    pub after: AfterResponse,
}

impl Reply {
    pub(crate) fn new<T: Serialize>(result: &T) -> Result<Self, AppServerError> {
        Ok(Self {
            result: serde_json::to_value(result)
                .map_err(|e| AppServerError::Internal(e.to_string()))?,
            after: Vec::new(),
        })
    }

    pub(crate) fn then(mut self, f: impl FnOnce() + Send + 'static) -> Self {
        self.after.push(Box::new(f));
        self
    }
}

impl ServerState {
    pub(crate) fn new(
        inputs: ConfigInputs,
        session_source: SessionSource,
        thread_manager: Arc<ThreadManager>,
    ) -> Self {
        Self {
            inputs,
            session_source,
            thread_manager,
            loaded: std::sync::Mutex::default(),
            store: tokio::sync::OnceCell::new(),
            next_connection_id: AtomicU64::new(1),
            shutdown: CancellationToken::new(),
        }
    }

    pub(crate) fn loaded(&self, id: ThreadId) -> Option<Arc<LoadedThread>> {
        self.loaded.lock().ok().and_then(|l| l.get(&id).cloned())
    }

    /// The ids of the loaded threads, in a stable order.
    pub(crate) fn loaded_ids(&self) -> Vec<ThreadId> {
        let mut ids: Vec<ThreadId> = self
            .loaded
            .lock()
            .map(|l| l.keys().copied().collect())
            .unwrap_or_default();
        ids.sort_by_key(|id| id.to_string());
        ids
    }

    /// Forget a loaded thread (the engine keeps or drops it separately).
    pub(crate) fn unload(&self, id: ThreadId) -> Option<Arc<LoadedThread>> {
        self.loaded.lock().ok().and_then(|mut l| l.remove(&id))
    }

    pub(crate) fn register(
        &self,
        thread: Arc<Thread>,
        ephemeral: bool,
        forked_from: Option<ThreadId>,
    ) -> Arc<LoadedThread> {
        let loaded = Arc::new(LoadedThread::new(thread, ephemeral, forked_from));
        if let Ok(mut map) = self.loaded.lock() {
            map.insert(loaded.id(), loaded.clone());
        }
        loaded
    }

    /// Apply `turn/start`'s settings (model, cwd, approval policy, sandbox policy,
    /// effort) to an idle thread. They stick for later turns, as in the reference. The
    /// engine fixes a session's settings for its lifetime, so changed settings restart the
    /// thread from its rollout (core's `reconfigure_thread`); its subscribers carry over.
    pub(crate) async fn apply_turn_settings(
        &self,
        loaded: Arc<LoadedThread>,
        params: &v2::TurnStartParams,
    ) -> Result<Arc<LoadedThread>, AppServerError> {
        let mut config = loaded.thread.config().clone();
        let before = (
            config.model.clone(),
            config.cwd.clone(),
            config.approval_policy,
            config.sandbox_policy.clone(),
            config.model_reasoning_effort,
        );
        // A collaboration mode's settings take precedence over the turn's own (Codex).
        let settings = params
            .collaboration_mode
            .as_ref()
            .map(|mode| &mode.settings);
        let model = settings
            .map(|s| &s.model)
            .filter(|model| !model.is_empty())
            .or(params.model.as_ref());
        let effort = settings
            .and_then(|s| s.reasoning_effort.as_ref())
            .or(params.effort.as_ref());
        if let Some(model) = model {
            config.model = model.clone();
        }
        if let Some(cwd) = &params.cwd {
            let cwd = self.inputs.cwd.join(cwd);
            if !cwd.is_dir() {
                return Err(AppServerError::InvalidParams(format!(
                    "cwd {} is not a directory",
                    cwd.display()
                )));
            }
            config.cwd = cwd;
        }
        if let Some(policy) = params.approval_policy {
            config.approval_policy = mapping::approval_policy_in(policy);
        }
        if let Some(policy) = &params.sandbox_policy {
            config.sandbox_policy = mapping::sandbox_policy_in(policy);
        }
        if let Some(effort) = effort {
            config.model_reasoning_effort = Some(
                serde_json::from_value(serde_json::Value::String(effort.clone())).map_err(
                    |_| AppServerError::InvalidParams(format!("unknown effort `{effort}`")),
                )?,
            );
        }
        let after = (
            config.model.clone(),
            config.cwd.clone(),
            config.approval_policy,
            config.sandbox_policy.clone(),
            config.model_reasoning_effort,
        );
        if before == after {
            return Ok(loaded);
        }
        let restarted = self
            .thread_manager
            .reconfigure_thread(loaded.id(), config, std::time::Duration::from_secs(5))
            .await?;
        let replacement = Arc::new(LoadedThread::new(
            restarted.thread,
            loaded.ephemeral,
            loaded.forked_from,
        ));
        for subscriber in loaded.subscribers() {
            replacement.subscribe(&subscriber);
        }
        if let Ok(mut map) = self.loaded.lock() {
            map.insert(replacement.id(), replacement.clone());
        }
        Ok(replacement)
    }

    /// [`Self::load_for_turn`] for a request that needs the thread idle: `connection`
    /// follows the thread, and a running turn refuses the request (`-32600`, "a turn is
    /// running; `what` after it ends").
    pub(crate) async fn load_idle(
        &self,
        id: ThreadId,
        connection: &Arc<Connection>,
        what: &str,
    ) -> Result<Arc<LoadedThread>, AppServerError> {
        let loaded = self.load_for_turn(id).await?;
        loaded.subscribe(connection);
        if loaded.active_turn().is_some() {
            return Err(AppServerError::InvalidRequest(format!(
                "a turn is running; {what} after it ends"
            )));
        }
        Ok(loaded)
    }

    /// A loaded thread, or the saved one loaded from disk (a client may start a turn on a
    /// thread it listed without resuming it first).
    pub(crate) async fn load_for_turn(
        &self,
        id: ThreadId,
    ) -> Result<Arc<LoadedThread>, AppServerError> {
        if let Some(loaded) = self.loaded(id) {
            return Ok(loaded);
        }
        let thread = self
            .thread_manager
            .get_or_resume(id, async || {
                let record = self.record(id).await?;
                let mut config = self
                    .session_config(
                        &mut v2::ThreadSettingsParams::default(),
                        false,
                        record.map(|r| r.cwd),
                    )
                    .await?;
                // Loaded by `turn/start`, a v2 request: its client can be asked.
                config.can_ask_user = true;
                Ok::<_, AppServerError>(config)
            })
            .await?;
        Ok(self.register(thread, false, None))
    }

    pub(crate) async fn retire_idle(&self, just_used: ThreadId) {
        let retired = self.thread_manager.retire_idle(just_used).await;
        let unloaded: Vec<Arc<LoadedThread>> = match self.loaded.lock() {
            Ok(mut map) => retired.iter().filter_map(|id| map.remove(id)).collect(),
            Err(_) => Vec::new(),
        };
        // Its followers learn it is no longer loaded here (`thread/resume` loads it again).
        for loaded in unloaded {
            loaded.broadcast(
                notification_names::THREAD_CLOSED,
                &v2::ThreadIdNotification {
                    thread_id: loaded.id().to_string(),
                },
            );
        }
    }

    /// The config a thread runs with: the server's inputs plus the request's settings
    /// (its `config` as the caller's overrides, held to the inputs' caller limits).
    pub(crate) async fn session_config(
        &self,
        settings: &mut v2::ThreadSettingsParams,
        ephemeral: bool,
        default_cwd: Option<PathBuf>,
    ) -> Result<Config, AppServerError> {
        let mut inputs = self.inputs.clone();
        if let Some(config) = settings.config.take() {
            for (key, value) in config {
                let value = json_to_toml(&value).ok_or_else(|| {
                    AppServerError::InvalidParams(format!("config.{key}: null is not a value"))
                })?;
                inputs.caller_overrides.push((key, value));
            }
        }
        let cwd = settings
            .cwd
            .take()
            .map(PathBuf::from)
            .or(default_cwd.filter(|d| d.is_dir()));
        if let Some(cwd) = cwd {
            inputs.overrides.cwd = Some(if cwd.is_absolute() {
                cwd
            } else {
                self.inputs.cwd.join(cwd)
            });
        }
        if let Some(model) = settings.model.take() {
            inputs.overrides.model = Some(model);
        }
        if let Some(provider) = settings.model_provider.take() {
            inputs.overrides.model_provider = Some(provider);
        }
        if let Some(policy) = settings.approval_policy {
            inputs.overrides.approval_policy = Some(mapping::approval_policy_in(policy));
        }
        if let Some(mode) = settings.sandbox {
            inputs.overrides.sandbox_mode = Some(mapping::sandbox_mode_in(mode));
        }
        if let Some(text) = settings.base_instructions.take() {
            inputs.overrides.base_instructions = Some(text);
        }
        if let Some(text) = settings.developer_instructions.take() {
            inputs.overrides.developer_instructions = Some(text);
        }
        inputs.overrides.ephemeral = ephemeral;
        load_config_blocking(inputs).await
    }

    /// The server's own effective config (no thread settings).
    pub(crate) async fn base_config(&self) -> Result<Config, AppServerError> {
        load_config_blocking(self.inputs.clone()).await
    }

    /// The thread store of the server's config (`thread_store`), shared with the engine.
    pub(crate) async fn store(&self) -> Result<Arc<dyn ThreadStore>, AppServerError> {
        self.store
            .get_or_try_init(|| async {
                let config = self.base_config().await?;
                Ok::<_, AppServerError>(self.thread_manager.store(&config).await?)
            })
            .await
            .cloned()
    }

    /// The index record of a thread.
    pub(crate) async fn record(
        &self,
        id: ThreadId,
    ) -> Result<Option<ThreadRecord>, AppServerError> {
        Ok(self.store().await?.get(id).await?)
    }

    /// The thread's record; [`AppServerError::ThreadNotFound`] when there is none.
    pub(crate) async fn required_record(
        &self,
        id: ThreadId,
    ) -> Result<ThreadRecord, AppServerError> {
        self.record(id)
            .await?
            .ok_or_else(|| AppServerError::ThreadNotFound(id.to_string()))
    }

    /// [`AppServerError::ThreadNotFound`] unless the thread is loaded here or recorded.
    pub(crate) async fn require_known(&self, id: ThreadId) -> Result<(), AppServerError> {
        if self.loaded(id).is_none() {
            self.required_record(id).await?;
        }
        Ok(())
    }

    pub(crate) async fn thread_object(
        &self,
        loaded: &LoadedThread,
    ) -> Result<v2::Thread, AppServerError> {
        let record = if loaded.ephemeral {
            None
        } else {
            self.record(loaded.id()).await?
        };
        let config = loaded.thread.config();
        let mut thread = match record {
            Some(record) => mapping::thread_from_record(&record, loaded.status()),
            None => {
                let now = chrono::Utc::now().timestamp();
                v2::Thread {
                    id: loaded.id().to_string(),
                    session_id: loaded.id().to_string(),
                    forked_from_id: None,
                    parent_thread_id: None,
                    preview: String::new(),
                    ephemeral: loaded.ephemeral,
                    model_provider: config.model_provider_id.clone(),
                    created_at: now,
                    updated_at: now,
                    recency_at: None,
                    status: loaded.status(),
                    path: None,
                    cwd: config.cwd.to_string_lossy().into_owned(),
                    cli_version: env!("CARGO_PKG_VERSION").to_string(),
                    source: mapping::session_source(self.session_source),
                    thread_source: None,
                    agent_nickname: None,
                    agent_role: None,
                    git_info: None,
                    name: None,
                    project_id: None,
                    history_mode: v2::ThreadHistoryMode::Legacy,
                    turns: Vec::new(),
                }
            }
        };
        thread.ephemeral = loaded.ephemeral;
        thread.forked_from_id = loaded.forked_from.map(|id| id.to_string());
        thread.model_provider = config.model_provider_id.clone();
        Ok(thread)
    }

    pub(crate) async fn recorded_turns(
        &self,
        thread: &Thread,
    ) -> Result<Vec<v2::Turn>, AppServerError> {
        if thread.is_persisted() {
            self.read_turns(thread.id()).await
        } else {
            Ok(Vec::new())
        }
    }

    /// Every recorded turn of a thread (as the reverts left it).
    pub(crate) async fn read_turns(&self, id: ThreadId) -> Result<Vec<v2::Turn>, AppServerError> {
        let read = self
            .store()
            .await?
            .read(id)
            .await?
            .ok_or_else(|| AppServerError::ThreadNotFound(id.to_string()))?;
        Ok(store::turns_from_rollout(&read.items)
            .iter()
            .map(mapping::turn_from_record)
            .collect())
    }

    pub(crate) async fn start_response(
        &self,
        loaded: &LoadedThread,
        turns: Vec<v2::Turn>,
    ) -> Result<v2::ThreadStartResponse, AppServerError> {
        let mut thread = self.thread_object(loaded).await?;
        thread.turns = turns;
        let config = loaded.thread.config();
        Ok(v2::ThreadStartResponse {
            thread,
            model: config.model.clone(),
            model_provider: config.model_provider_id.clone(),
            service_tier: None,
            cwd: config.cwd.to_string_lossy().into_owned(),
            instruction_sources: instruction_sources(&config.cwd),
            approval_policy: mapping::approval_policy(config.approval_policy),
            approvals_reviewer: "user".to_string(),
            sandbox: mapping::sandbox_policy(&config.sandbox_policy),
            reasoning_effort: config
                .model_reasoning_effort
                .map(|e| e.as_str().to_string()),
        })
    }
}

async fn load_config_blocking(inputs: ConfigInputs) -> Result<Config, AppServerError> {
    tokio::task::spawn_blocking(move || load_config(inputs))
        .await
        .map_err(|e| AppServerError::Internal(format!("configuration loader stopped: {e}")))?
        .map_err(AppServerError::from)
}

/// AGENTS.md files from the cwd up to the filesystem root that exist (what the engine
/// loads into the context).
fn instruction_sources(cwd: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for dir in cwd.ancestors() {
        let candidate = dir.join("AGENTS.md");
        if candidate.is_file() {
            found.push(candidate.to_string_lossy().into_owned());
        }
        if dir.join(".git").exists() {
            break;
        }
    }
    found.reverse();
    found
}

pub(crate) fn parse_thread_id(text: &str) -> Result<ThreadId, AppServerError> {
    ThreadId::from_str(text)
        .map_err(|_| AppServerError::InvalidRequest(format!("invalid thread id: {text}")))
}

pub(crate) fn normalize_dir(base: &Path, dir: &str) -> PathBuf {
    let path = base.join(dir);
    std::fs::canonicalize(&path).unwrap_or(path)
}

pub(crate) fn parse<T: DeserializeOwned>(params: Option<Value>) -> Result<T, AppServerError> {
    serde_json::from_value(params.unwrap_or_else(|| json!({})))
        .map_err(|e| AppServerError::InvalidParams(e.to_string()))
}

/// One page of `items` from an offset cursor (what an earlier page returned as
/// `nextCursor`); `limit` `None` is the rest. Returns the page and the next cursor.
pub(crate) fn offset_page<T: Clone>(
    items: &[T],
    cursor: Option<&str>,
    limit: Option<u32>,
) -> Result<(Vec<T>, Option<String>), AppServerError> {
    let start = match cursor {
        None => 0,
        Some(text) => text
            .parse::<usize>()
            .ok()
            .filter(|n| *n <= items.len())
            .ok_or_else(|| AppServerError::InvalidRequest(format!("invalid cursor: {text}")))?,
    };
    let end = limit.map_or(items.len(), |n| {
        start.saturating_add(n.max(1) as usize).min(items.len())
    });
    let next = (end < items.len()).then(|| end.to_string());
    Ok((items[start..end].to_vec(), next))
}

/// For "no params" methods: omitted, `null` and `{}` all mean the defaults.
pub(crate) fn parse_or_default<T: DeserializeOwned + Default>(
    params: Option<Value>,
) -> Result<T, AppServerError> {
    match params {
        None | Some(Value::Null) => Ok(T::default()),
        Some(value) => {
            serde_json::from_value(value).map_err(|e| AppServerError::InvalidParams(e.to_string()))
        }
    }
}

/// JSON → TOML for config overrides; `None` for `null`, which TOML cannot express.
pub(crate) fn json_to_toml(value: &Value) -> Option<toml::Value> {
    Some(match value {
        Value::Null => return None,
        Value::Bool(b) => toml::Value::Boolean(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => toml::Value::Integer(i),
            None => toml::Value::Float(n.as_f64()?),
        },
        Value::String(s) => toml::Value::String(s.clone()),
        Value::Array(items) => toml::Value::Array(items.iter().filter_map(json_to_toml).collect()),
        Value::Object(map) => toml::Value::Table(
            map.iter()
                .filter_map(|(k, v)| json_to_toml(v).map(|v| (k.clone(), v)))
                .collect(),
        ),
    })
}
