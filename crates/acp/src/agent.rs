//! Sessions are threads: the ACP session lifecycle (new, load, resume, list, close,
//! modes, model) over the engine's thread manager and thread index. Each session reads
//! only its own thread's events, so sessions never see each other's updates.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use interpreter_core::config::{Config, ConfigInputs, McpServerConfig, load_config};
use interpreter_core::store::{ListDirection, ListQuery, ListSortKey, ThreadStore};
use interpreter_core::{Thread, ThreadManager, WorkspaceFiles};
use interpreter_protocol::{Op, ReasoningEffort, SessionSource, ThreadId};
use tokio_util::sync::CancellationToken;

use crate::error::AcpError;
use crate::history;
use crate::sdk::Editor;
use crate::update::{
    DEFAULT_EFFORT, Mode, ModelChoice, SessionOption, SessionState, SessionSummary, effort_of,
};

/// Deadline of the endpoint's `GET /models` when a session starts: a slow or absent
/// endpoint leaves the choice to the configured model.
const MODELS_TIMEOUT: Duration = Duration::from_secs(3);
/// How long a closed session's thread may take to record its shutdown.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
/// `session/list` page size.
const LIST_PAGE: usize = 50;

/// What a session was asked to run with; turned into a [`Config`] by the loader.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub cwd: PathBuf,
    pub mode: Mode,
    /// `None`: the configured model.
    pub model: Option<String>,
    /// `None`: the configured reasoning effort.
    pub effort: Option<ReasoningEffort>,
    /// The editor's MCP servers, joined to the configured ones for this session.
    pub mcp_servers: Vec<(String, McpServerConfig)>,
}

/// One session: its thread, its settings, and the prompt running on it.
pub(crate) struct Session {
    pub id: ThreadId,
    thread: Mutex<Arc<Thread>>,
    settings: Mutex<Settings>,
    /// Models offered in the config option (the configured one first).
    models: Mutex<Vec<String>>,
    /// The running prompt (its number and what cancels it), if any.
    prompt: Mutex<Option<(u64, CancellationToken)>>,
    prompts_started: std::sync::atomic::AtomicU64,
    /// Held while the thread is compared with the settings and restarted (for a prompt,
    /// until it has the thread's turn slot), so a settings change never restarts the
    /// thread under a prompt about to start its turn.
    restart: tokio::sync::Mutex<()>,
}

impl Session {
    pub(crate) fn thread(&self) -> Result<Arc<Thread>, AcpError> {
        self.thread
            .lock()
            .map(|t| t.clone())
            .map_err(|_| AcpError::Internal("session state poisoned".into()))
    }

    pub(crate) fn settings(&self) -> Result<Settings, AcpError> {
        self.settings
            .lock()
            .map(|s| s.clone())
            .map_err(|_| AcpError::Internal("session state poisoned".into()))
    }

    fn models(&self) -> Vec<String> {
        self.models.lock().map(|m| m.clone()).unwrap_or_default()
    }

    /// Register a new prompt; refused while one runs (ACP has one prompt per session).
    /// A cancelled prompt may still be handing the thread back; the new one then waits
    /// for the thread.
    pub(crate) fn begin_prompt(&self) -> Result<(u64, CancellationToken), AcpError> {
        let mut prompt = self
            .prompt
            .lock()
            .map_err(|_| AcpError::Internal("session state poisoned".into()))?;
        if prompt
            .as_ref()
            .is_some_and(|(_, token)| !token.is_cancelled())
        {
            return Err(AcpError::InvalidRequest(
                "a prompt is already running in this session".into(),
            ));
        }
        let number = self
            .prompts_started
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let token = CancellationToken::new();
        *prompt = Some((number, token.clone()));
        Ok((number, token))
    }

    pub(crate) fn end_prompt(&self, number: u64) {
        if let Ok(mut prompt) = self.prompt.lock()
            && prompt.as_ref().is_some_and(|(n, _)| *n == number)
        {
            *prompt = None;
        }
    }

    pub(crate) fn cancel_prompt(&self) {
        if let Ok(prompt) = self.prompt.lock()
            && let Some((_, token)) = prompt.as_ref()
        {
            token.cancel();
        }
    }

    /// The session's choices as the editor sees them: what it picked, else what the
    /// thread runs with (a pick takes effect at the next prompt).
    fn state(&self) -> Result<SessionState, AcpError> {
        let settings = self.settings()?;
        let thread = self.thread()?;
        let config = thread.config();
        Ok(SessionState {
            id: self.id.to_string(),
            commands: crate::update::slash_commands(&thread.skills()),
            mode: settings.mode,
            model: ModelChoice {
                current: settings.model.unwrap_or_else(|| config.model.clone()),
                available: self.models(),
            },
            effort: settings.effort.or(config.model_reasoning_effort),
        })
    }
}

pub(crate) struct Agent {
    inputs: ConfigInputs,
    pub threads: ThreadManager,
    sessions: Mutex<HashMap<ThreadId, Arc<Session>>>,
    /// The thread store the process's config names, opened on first use (listings and
    /// history replays would otherwise load the config every time).
    store: tokio::sync::OnceCell<Arc<dyn ThreadStore>>,
}

impl Agent {
    pub(crate) fn new(inputs: ConfigInputs, files: Arc<dyn WorkspaceFiles>) -> Self {
        Self {
            inputs,
            threads: ThreadManager::new().with_workspace_files(files),
            sessions: Mutex::default(),
            store: tokio::sync::OnceCell::new(),
        }
    }

    pub(crate) fn session(&self, id: &str) -> Result<Arc<Session>, AcpError> {
        let thread_id =
            ThreadId::from_str(id).map_err(|_| AcpError::SessionNotFound(id.to_string()))?;
        self.sessions
            .lock()
            .ok()
            .and_then(|s| s.get(&thread_id).cloned())
            .ok_or_else(|| AcpError::SessionNotFound(id.to_string()))
    }

    /// The config a session's thread runs with: the process's inputs, the session's cwd,
    /// mode and model, and the editor's MCP servers.
    pub(crate) async fn config_for(&self, settings: &Settings) -> Result<Config, AcpError> {
        let mut inputs = self.inputs.clone();
        inputs.overrides.cwd = Some(settings.cwd.clone());
        if let Some(model) = &settings.model {
            inputs.overrides.model = Some(model.clone());
        }
        if let Some(effort) = settings.effort {
            inputs.overrides.model_reasoning_effort = Some(effort);
        }
        let (approval, sandbox) = settings.mode.policies();
        inputs.overrides.approval_policy = Some(approval);
        inputs.overrides.sandbox_mode = Some(sandbox);
        let mut config = tokio::task::spawn_blocking(move || load_config(inputs))
            .await
            .map_err(|e| AcpError::Internal(format!("configuration loader stopped: {e}")))??;
        for (name, server) in &settings.mcp_servers {
            config.mcp_servers.insert(name.clone(), server.clone());
        }
        Ok(config)
    }

    /// The process's config, without any session's settings.
    async fn base_config(&self) -> Result<Config, AcpError> {
        let inputs = self.inputs.clone();
        Ok(tokio::task::spawn_blocking(move || load_config(inputs))
            .await
            .map_err(|e| AcpError::Internal(format!("configuration loader stopped: {e}")))??)
    }

    /// The thread store the process's config names (shared with the engine).
    async fn store(&self) -> Result<Arc<dyn ThreadStore>, AcpError> {
        self.store
            .get_or_try_init(|| async {
                let config = self.base_config().await?;
                Ok::<_, AcpError>(self.threads.store(&config).await?)
            })
            .await
            .cloned()
    }

    pub(crate) async fn new_session(&self, settings: Settings) -> Result<SessionState, AcpError> {
        check_cwd(&settings.cwd)?;
        let config = self.config_for(&settings).await?;
        let models = offered_models(config.clone());
        let started = self.threads.start_thread(config, SessionSource::Acp);
        let (started, models) = tokio::join!(started, models);
        let started = started?;
        let session = self.register(started.thread, settings, models);
        session.state()
    }

    /// `session/load` (`replay`) and `session/resume`: the saved thread made live again
    /// with this editor's cwd and MCP servers. With `replay`, the whole history is sent
    /// as updates first.
    pub(crate) async fn open_session(
        &self,
        id: &str,
        settings: Settings,
        replay: Option<&Editor>,
    ) -> Result<SessionState, AcpError> {
        check_cwd(&settings.cwd)?;
        let thread_id =
            ThreadId::from_str(id).map_err(|_| AcpError::SessionNotFound(id.to_string()))?;
        let session = match self.session(id) {
            Ok(session) => session,
            Err(_) => {
                // Opened in this process for the first time (the editor, or acpx, started
                // a new agent): the session goes on in the mode and with the effort its
                // last turn ran with, not the defaults.
                let settings = self.recorded_choices(thread_id, settings).await;
                let config = self.config_for(&settings).await?;
                let models = offered_models(config.clone());
                let resumed = self
                    .threads
                    .get_or_resume(thread_id, async || Ok::<_, AcpError>(config));
                let (resumed, models) = tokio::join!(resumed, models);
                self.register(resumed?, settings, models)
            }
        };
        if let Some(editor) = replay {
            let thread = session.thread()?;
            if thread.is_persisted() {
                for update in history::replay(self.store().await?.as_ref(), thread_id).await? {
                    editor.update(id, update);
                }
            }
        }
        session.state()
    }

    /// `settings` with the mode and reasoning effort the thread's last recorded turn ran
    /// with (as they are unchanged when nothing was recorded or it cannot be read).
    async fn recorded_choices(&self, id: ThreadId, mut settings: Settings) -> Settings {
        let Ok(store) = self.store().await else {
            return settings;
        };
        let Ok(Some(read)) = store.read(id).await else {
            return settings;
        };
        if let Some(context) = interpreter_core::store::last_turn_context(&read.items) {
            if let Some(mode) = Mode::of(context.approval_policy, &context.sandbox_policy) {
                settings.mode = mode;
            }
            settings.effort = settings.effort.or(context.effort);
        }
        settings
    }

    fn register(
        &self,
        thread: Arc<Thread>,
        settings: Settings,
        models: Vec<String>,
    ) -> Arc<Session> {
        let session = Arc::new(Session {
            id: thread.id(),
            thread: Mutex::new(thread),
            settings: Mutex::new(settings),
            models: Mutex::new(models),
            prompt: Mutex::default(),
            prompts_started: std::sync::atomic::AtomicU64::new(0),
            restart: tokio::sync::Mutex::new(()),
        });
        if let Ok(mut sessions) = self.sessions.lock() {
            sessions.insert(session.id, session.clone());
        }
        session
    }

    /// The session's thread for a prompt's turn, restarted first with the session's
    /// current settings when they changed since it started (mode, model or reasoning
    /// effort: the engine fixes them per thread), and its turn slot. No settings change
    /// restarts the thread between the two.
    pub(crate) async fn thread_for_turn(
        &self,
        session: &Session,
    ) -> Result<(Arc<Thread>, tokio::sync::OwnedMutexGuard<()>), AcpError> {
        let _restarting = session.restart.lock().await;
        let thread = self.restarted_if_changed(session).await?;
        let slot = thread.turn_slot().await;
        Ok((thread, slot))
    }

    /// Caller holds `session.restart`.
    async fn restarted_if_changed(&self, session: &Session) -> Result<Arc<Thread>, AcpError> {
        let thread = session.thread()?;
        let config = self.config_for(&session.settings()?).await?;
        let now = thread.config();
        if now.model == config.model
            && now.model_reasoning_effort == config.model_reasoning_effort
            && now.approval_policy == config.approval_policy
            && now.sandbox_policy == config.sandbox_policy
        {
            return Ok(thread);
        }
        let restarted = self
            .threads
            .reconfigure_thread(session.id, config, SHUTDOWN_GRACE)
            .await?;
        if let Ok(mut slot) = session.thread.lock() {
            *slot = restarted.thread.clone();
        }
        Ok(restarted.thread)
    }

    /// One session config option (`mode`, `model`, `reasoning_effort`) for later
    /// prompts; answers the session's choices after it.
    pub(crate) fn set_option(
        &self,
        id: &str,
        option: SessionOption,
        value: &str,
    ) -> Result<SessionState, AcpError> {
        let session = self.session(id)?;
        let unknown = |what: &str| AcpError::InvalidParams(format!("unknown {what} `{value}`"));
        let mut settings = session
            .settings
            .lock()
            .map_err(|_| AcpError::Internal("session state poisoned".into()))?;
        match option {
            SessionOption::Mode => {
                settings.mode = Mode::from_id(value).ok_or_else(|| unknown("mode"))?
            }
            SessionOption::Model => {
                if !session.models().iter().any(|m| m == value) {
                    return Err(unknown("model"));
                }
                settings.model = Some(value.to_string());
            }
            // `default`, offered with the others, goes back to what the config says
            // (the provider's default when it says nothing).
            SessionOption::ReasoningEffort if value == DEFAULT_EFFORT => settings.effort = None,
            SessionOption::ReasoningEffort => {
                settings.effort =
                    Some(effort_of(value).ok_or_else(|| unknown("reasoning effort"))?);
            }
        }
        drop(settings);
        session.state()
    }

    /// Puts the session's current choices into effect now rather than at its next
    /// prompt, when no prompt runs: the engine records them with the thread, so an agent
    /// process that resumes the session later (acpx starts one per command) goes on with
    /// them. Best effort: a choice that cannot be applied now is applied by the next
    /// prompt, as it would have been. Returns the session's choices after, `state` when
    /// the session is gone: what the answer to the change reports, read once the thread
    /// runs with them (an effort set back to `default` shows the configured one, not
    /// the effort the thread ran with before).
    pub(crate) async fn apply_choices(&self, id: &str, state: SessionState) -> SessionState {
        let Ok(session) = self.session(id) else {
            return state;
        };
        let prompting = session
            .prompt
            .lock()
            .map(|prompt| prompt.is_some())
            .unwrap_or(true);
        if !prompting {
            let _restarting = session.restart.lock().await;
            if let Err(e) = self.restarted_if_changed(&session).await {
                tracing::debug!("session {id}: choices left for the next prompt: {e}");
            }
        }
        session.state().unwrap_or(state)
    }

    pub(crate) fn cancel(&self, id: &str) {
        if let Ok(session) = self.session(id) {
            session.cancel_prompt();
        }
    }

    /// Cancel what runs, then stop the thread (its rollout complete on disk) and forget
    /// the session; it can be loaded again.
    pub(crate) async fn close(&self, id: &str) -> Result<(), AcpError> {
        let session = self.session(id)?;
        session.cancel_prompt();
        if let Ok(mut sessions) = self.sessions.lock() {
            sessions.remove(&session.id);
        }
        let thread = session.thread()?;
        // Waits for a cancelled prompt to hand the thread back, bounded.
        let _slot = tokio::time::timeout(SHUTDOWN_GRACE, thread.turn_slot()).await;
        self.threads.remove_thread(session.id).await;
        if let Err(e) = thread.submit(Op::Shutdown).await {
            tracing::debug!("thread {} was already closed: {e}", session.id);
        }
        Ok(())
    }

    /// Delete a session for good: cancel what runs, wait (bounded) for the prompt to hand
    /// the thread back, stop it, and remove its history. A saved session that is not
    /// loaded is deleted too.
    pub(crate) async fn delete(&self, id: &str) -> Result<(), AcpError> {
        let thread_id =
            ThreadId::from_str(id).map_err(|_| AcpError::SessionNotFound(id.to_string()))?;
        if let Ok(session) = self.session(id) {
            session.cancel_prompt();
            if let Ok(mut sessions) = self.sessions.lock() {
                sessions.remove(&session.id);
            }
            let thread = session.thread()?;
            let _slot = tokio::time::timeout(SHUTDOWN_GRACE, thread.turn_slot()).await;
        }
        self.threads
            .delete_thread(&self.base_config().await?, thread_id, SHUTDOWN_GRACE)
            .await
            .map_err(AcpError::from)
    }

    /// Saved threads (any front end's), newest first; only those in `cwd` when given.
    pub(crate) async fn list(
        &self,
        cwd: Option<PathBuf>,
        cursor: Option<String>,
    ) -> Result<(Vec<SessionSummary>, Option<String>), AcpError> {
        let query = ListQuery {
            limit: LIST_PAGE,
            cursor,
            sort_key: ListSortKey::UpdatedAt,
            direction: ListDirection::Desc,
            archived: false,
            cwds: cwd
                .map(|cwd| std::fs::canonicalize(&cwd).unwrap_or(cwd))
                .into_iter()
                .collect(),
            sources: Vec::new(),
            model_providers: Vec::new(),
            search_term: None,
            require_preview: true,
            ..ListQuery::default()
        };
        let page = self.store().await?.list(query).await?;
        let sessions = page
            .records
            .into_iter()
            .map(|record| SessionSummary {
                id: record.id.to_string(),
                cwd: record.cwd,
                title: record.preview,
                updated_at: record.updated_at.to_rfc3339(),
            })
            .collect();
        Ok((sessions, page.next_cursor))
    }

    /// Stop every thread, bounded, when the editor goes away.
    pub(crate) async fn shutdown(&self) {
        if let Ok(sessions) = self.sessions.lock() {
            for session in sessions.values() {
                session.cancel_prompt();
            }
        }
        self.threads.shutdown_all(SHUTDOWN_GRACE).await;
    }
}

/// ACP requires an absolute cwd; the engine also needs it to exist.
fn check_cwd(cwd: &Path) -> Result<(), AcpError> {
    if !cwd.is_absolute() {
        return Err(AcpError::InvalidParams(format!(
            "cwd must be an absolute path, got `{}`",
            cwd.display()
        )));
    }
    if !cwd.is_dir() {
        return Err(AcpError::InvalidParams(format!(
            "cwd `{}` is not a directory",
            cwd.display()
        )));
    }
    Ok(())
}

/// The configured model first, then what the endpoint lists, without duplicates.
async fn offered_models(config: Config) -> Vec<String> {
    let mut models = vec![config.model.clone()];
    match interpreter_model_client::list_models(
        &config.model_provider_id,
        &config.model_provider,
        &config.env,
        MODELS_TIMEOUT,
    )
    .await
    {
        Ok(listing) => {
            for id in listing.ids {
                if !models.contains(&id) {
                    models.push(id);
                }
            }
        }
        Err(err) => tracing::debug!("model list: {err}"),
    }
    models
}
